//===- TwillGradOps.cpp - verifiers of the gradient and optimizer ops -----===//
//
// A gradient op's values have the shapes of the forward values they stand
// for, which is what these check.
//
//===----------------------------------------------------------------------===//

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"

using namespace mlir;
using namespace mlir::twill;

LogicalResult EmbeddingGradOp::verify() {
  if (failed(expectRank(*this, "result", getResult(), 2)) ||
      failed(expectSameElementType(*this, {getGrad(), getResult()})))
    return failure();
  SmallVector<int64_t> expected(shapeOf(getIds()));
  expected.push_back(shapeOf(getResult())[1]);
  return expectShape(*this, "grad", shapeOf(getGrad()), expected);
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(expectSameElementType(
          *this, {getInput(), getWeight(), getGrad(), getResult()})))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  if (input.empty())
    return emitOpError("input must have rank 1 or more");
  if (failed(expectShape(*this, "weight", shapeOf(getWeight()),
                         input.take_back())) ||
      failed(expectShape(*this, "grad", shapeOf(getGrad()), input)))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), input);
}

LogicalResult RmsNormWeightGradOp::verify() {
  if (failed(
          expectSameElementType(*this, {getInput(), getGrad(), getResult()})))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  if (input.empty())
    return emitOpError("input must have rank 1 or more");
  if (failed(expectShape(*this, "grad", shapeOf(getGrad()), input)))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), input.take_back());
}

LogicalResult RopeGradOp::verify() {
  if (failed(expectRank(*this, "grad", getGrad(), 4)) ||
      failed(expectSameElementType(*this, {getGrad(), getResult()})) ||
      failed(verifyRopeScaling(*this, getScalingFactor(), getLowFreqFactor(),
                               getHighFreqFactor(), getOriginalMaxPosition())))
    return failure();
  ArrayRef<int64_t> grad = shapeOf(getGrad());
  if (failed(expectShape(*this, "positions", shapeOf(getPositions()),
                         grad.take_front(2))))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), grad);
}

LogicalResult AttentionGradOp::verify() {
  ArrayRef<int64_t> query = shapeOf(getQuery()), key = shapeOf(getKey());
  if (failed(expectRank(*this, "query", getQuery(), 4)) ||
      failed(expectRank(*this, "key", getKey(), 4)) ||
      failed(expectShape(*this, "value", shapeOf(getValue()), key)) ||
      failed(expectShape(*this, "output", shapeOf(getOutput()), query)) ||
      failed(expectShape(*this, "grad", shapeOf(getGrad()), query)) ||
      failed(
          expectShape(*this, "query_grad", shapeOf(getQueryGrad()), query)) ||
      failed(expectShape(*this, "key_grad", shapeOf(getKeyGrad()), key)) ||
      failed(expectShape(*this, "value_grad", shapeOf(getValueGrad()), key)))
    return failure();
  if (failed(verifyHeadGroups(*this, query[2], key[2], bool(getShardAxis()))))
    return failure();
  if (getSegments() &&
      failed(expectShape(*this, "segments", shapeOf(getSegments()),
                         query.take_front(2))))
    return failure();
  return success();
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
  if (failed(verifyTiledLogits(*this, getInput(), getWeight(), getLabels(),
                               getTile())))
    return failure();
  Value wrt = getWrtWeight() ? getWeight() : getInput();
  if (failed(expectSameElementType(*this, {wrt, getResult()})))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), shapeOf(wrt));
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
