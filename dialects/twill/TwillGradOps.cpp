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

LogicalResult RopeGradOp::verify() {
  if (failed(verifyShapeRule(*this)))
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

LogicalResult SoftcapGradOp::verify() {
  if (failed(verifyShapeRule(*this)))
    return failure();
  return verifyCap(*this, getCap());
}

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

LogicalResult GroupedMatmulWeightGradOp::verify() {
  if (failed(expectSameElementType(*this, {getRows(), getGrad()})))
    return failure();
  llvm::Expected<shapes::GroupedMatmulDims> dims =
      shapes::groupedMatmulWeightGrad(shapeOf(getRows()), shapeOf(getGrad()),
                                      shapeOf(getCounts()),
                                      shapeOf(getResult()), getTransposeRhs());
  return dims ? success() : check(*this, dims.takeError());
}
