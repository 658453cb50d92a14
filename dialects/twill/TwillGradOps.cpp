//===- TwillGradOps.cpp - verifiers of the gradient and optimizer ops -----===//
//
// A gradient op's values have the shapes of the forward values they stand
// for, which is what these check.
//
//===----------------------------------------------------------------------===//

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"
#include "opmodel/Shapes.h"

using namespace mlir;
using namespace mlir::twill;
namespace shapes = ::twill::shapes;

LogicalResult EmbeddingGradOp::verify() {
  if (failed(expectSameElementType(*this, {getGrad(), getResult()})))
    return failure();
  return check(*this, shapes::embeddingGrad(shapeOf(getIds()), shapeOf(getGrad()),
                                            shapeOf(getResult())));
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(expectSameElementType(
          *this, {getInput(), getWeight(), getGrad(), getResult()})))
    return failure();
  return check(*this,
               shapes::rmsNormGrad(shapeOf(getInput()), shapeOf(getWeight()),
                                   shapeOf(getGrad()), shapeOf(getResult())));
}

LogicalResult RmsNormWeightGradOp::verify() {
  if (failed(
          expectSameElementType(*this, {getInput(), getGrad(), getResult()})))
    return failure();
  return check(*this, shapes::rmsNormWeightGrad(shapeOf(getInput()),
                                                shapeOf(getGrad()),
                                                shapeOf(getResult())));
}

LogicalResult RopeGradOp::verify() {
  if (failed(expectSameElementType(*this, {getGrad(), getResult()})) ||
      failed(check(*this, shapes::rope(shapeOf(getGrad()),
                                       shapeOf(getPositions()),
                                       shapeOf(getResult())))))
    return failure();
  return verifyRopeScaling(*this, getScalingFactor(), getLowFreqFactor(),
                           getHighFreqFactor(), getOriginalMaxPosition());
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionLogits(*this, getWindow(), getSoftcap())))
    return failure();
  return check(*this,
               shapes::attentionGrad(
                   shapeOf(getQuery()), shapeOf(getKey()), shapeOf(getValue()),
                   shapeOf(getOutput()), shapeOf(getLogSumExp()),
                   shapeOf(getGrad()), shapeIfAny(getSegments()),
                   shapeOf(getQueryGrad()), shapeOf(getKeyGrad()),
                   shapeOf(getValueGrad()), bool(getShardAxis())));
}

LogicalResult mlir::twill::verifyGatedGrad(Operation *op) {
  return check(op, shapes::gatedGrad(
                       shapeOf(op->getOperand(0)), shapeOf(op->getOperand(1)),
                       shapeOf(op->getOperand(2)), shapeOf(op->getResult(0)),
                       shapeOf(op->getResult(1))));
}

LogicalResult ScaleColumnsGradOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getScale(), getGrad(),
                                           getInputGrad(), getScaleGrad()})))
    return failure();
  return check(*this, shapes::scaleColumnsGrad(
                          shapeOf(getInput()), shapeOf(getScale()),
                          shapeOf(getGrad()), shapeOf(getInputGrad()),
                          shapeOf(getScaleGrad())));
}

LogicalResult ColumnSumsOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return check(*this,
               shapes::columnSums(shapeOf(getInput()), shapeOf(getResult())));
}

LogicalResult SoftcapGradOp::verify() { return verifyCap(*this, getCap()); }

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(check(*this, shapes::crossEntropyGrad(shapeOf(getLogits()),
                                                   shapeOf(getLabels()),
                                                   shapeOf(getResult())))))
    return failure();
  return check(*this, shapes::lossSums(
                          shapeOf(getLabels()), shapeIfAny(getSequences()),
                          getSequenceCount().value_or(0), shapeOf(getGrad())));
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(expectSameElementType(
          *this, {getInput(), getWeight(), getTile(), getResult()})))
    return failure();
  if (getSoftcap() && failed(verifyCap(*this, *getSoftcap())))
    return failure();
  if (failed(check(*this, shapes::tiledLogitsGrad(
                              shapeOf(getInput()), shapeOf(getWeight()),
                              shapeOf(getLabels()), shapeOf(getTile()),
                              shapeOf(getResult()), getWrtWeight()))))
    return failure();
  return check(*this, shapes::lossSums(
                          shapeOf(getLabels()), shapeIfAny(getSequences()),
                          getSequenceCount().value_or(0), shapeOf(getGrad())));
}

LogicalResult SqrtOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return check(*this, shapes::unary(shapeOf(getInput()), shapeOf(getResult())));
}

LogicalResult AdamWOp::verify() {
  return check(*this, shapes::adamw(shapeOf(getParam()), shapeOf(getGrad()),
                                    shapeOf(getExpAvg()),
                                    shapeOf(getExpAvgSq()),
                                    shapeOf(getNewParam()),
                                    shapeOf(getNewExpAvg()),
                                    shapeOf(getNewExpAvgSq())));
}

LogicalResult DpoLossGradOp::verify() {
  if (failed(verifyDpoSettings(*this, getLossType(), getBeta(),
                               getLabelSmoothing())))
    return failure();
  return check(
      *this, shapes::dpoLossGrad(shapeOf(getPolicy()), shapeOf(getReference()),
                                 shapeOf(getTokens()), shapeOf(getResult())));
}
