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
  return check(*this,
               shapes::attentionGrad(
                   shapeOf(getQuery()), shapeOf(getKey()), shapeOf(getValue()),
                   shapeOf(getOutput()), shapeOf(getGrad()),
                   shapeIfAny(getSegments()),
                   shapeOf(getQueryGrad()), shapeOf(getKeyGrad()),
                   shapeOf(getValueGrad()), bool(getShardAxis())));
}

LogicalResult SwigluGradOp::verify() {
  ArrayRef<int64_t> gate = shapeOf(getGate());
  for (auto [name, value] : {std::pair<StringRef, Value>{"up", getUp()},
                             {"grad", getGrad()},
                             {"gate_grad", getGateGrad()},
                             {"up_grad", getUpGrad()}})
    if (failed(expectShape(*this, name, shapeOf(value), gate)))
      return failure();
  return success();
}

LogicalResult ScaleColumnsGradOp::verify() {
  ArrayRef<int64_t> input = shapeOf(getInput());
  if (input.empty())
    return emitOpError("input must have columns");
  if (failed(expectSameElementType(*this, {getInput(), getScale(), getGrad(),
                                           getInputGrad(), getScaleGrad()})))
    return failure();
  for (auto [name, value] :
       {std::pair<StringRef, Value>{"grad", getGrad()},
        {"input_grad", getInputGrad()}})
    if (failed(expectShape(*this, name, shapeOf(value), input)))
      return failure();
  for (auto [name, value] : {std::pair<StringRef, Value>{"scale", getScale()},
                             {"scale_grad", getScaleGrad()}})
    if (failed(expectShape(*this, name, shapeOf(value), input.take_back())))
      return failure();
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  ArrayRef<int64_t> logits = shapeOf(getLogits());
  if (logits.empty())
    return emitOpError("logits must have a vocab dim");
  if (failed(expectShape(*this, "labels", shapeOf(getLabels()),
                         logits.drop_back())))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), logits);
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  if (failed(expectSameElementType(
          *this, {getInput(), getWeight(), getTile(), getResult()})))
    return failure();
  return check(*this, shapes::tiledLogitsGrad(
                          shapeOf(getInput()), shapeOf(getWeight()),
                          shapeOf(getLabels()), shapeOf(getTile()),
                          shapeOf(getResult()), getWrtWeight()));
}

LogicalResult SqrtOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}

LogicalResult AdamWOp::verify() {
  ArrayRef<int64_t> param = shapeOf(getParam());
  for (auto [name, value] : {std::pair<StringRef, Value>{"grad", getGrad()},
                             {"exp_avg", getExpAvg()},
                             {"exp_avg_sq", getExpAvgSq()},
                             {"new_param", getNewParam()},
                             {"new_exp_avg", getNewExpAvg()},
                             {"new_exp_avg_sq", getNewExpAvgSq()}})
    if (failed(expectShape(*this, name, shapeOf(value), param)))
      return failure();
  return success();
}
