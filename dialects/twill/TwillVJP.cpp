//===- TwillVJP.cpp - reverse-mode rules of the forward ops ---------------===//
//
// VJPOpInterface::buildVJP of each forward op whose gradient is more than
// one op an operand (those, its ODS gives: `gradients`, and
// TwillDelegations.inc holds). A rule computes only the operand cotangents
// asked for: the autodiff pass asks for none on frozen weights, so a
// frozen linear layer costs one matmul backward, not two.
//
//===----------------------------------------------------------------------===//

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::twill;

using Cotangents = FailureOr<SmallVector<Value>>;

static RankedTensorType likeType(Value value, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, elementTypeOf(value));
}

/// `op(lhs) op(rhs)` with the result type the matmul verifier expects;
/// `contractBatch` sums over the batch dims too (a matrix result).
static Value matmul(OpBuilder &builder, Location loc, Value lhs, Value rhs,
                    bool transposeLhs, bool transposeRhs,
                    bool contractBatch = false) {
  ArrayRef<int64_t> a = shapeOf(lhs), b = shapeOf(rhs);
  int64_t m = transposeLhs ? a.back() : a[a.size() - 2];
  int64_t n = transposeRhs ? b[b.size() - 2] : b.back();
  SmallVector<int64_t> shape;
  if (!contractBatch)
    shape.append(a.begin(), a.end() - 2);
  shape.append({m, n});
  return MatmulOp::create(builder, loc, likeType(lhs, shape), lhs, rhs,
                          transposeLhs, transposeRhs);
}

Cotangents MatmulOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                              ArrayRef<bool> needed) {
  if (hasEpilogue())
    return emitOpError("has an epilogue: twill-fuse-epilogues runs after "
                       "differentiation");
  Value grad = cotangents[0], lhs = getLhs(), rhs = getRhs();
  bool transposeLhs = getTransposeLhs(), transposeRhs = getTransposeRhs();
  // A weight shared by a batch of activations: its gradient sums over the
  // batch, a matmul that contracts the batch dims with the rows.
  bool sharedRhs = shapeOf(rhs).size() == 2 && shapeOf(lhs).size() > 2;
  if (sharedRhs && transposeLhs)
    return emitOpError("has no gradient rule for a transposed batched lhs "
                       "with a shared rhs");
  SmallVector<Value> grads(2);
  Location loc = getLoc();
  if (needed[0])
    grads[0] = transposeLhs
                   ? matmul(builder, loc, rhs, grad, transposeRhs, true)
                   : matmul(builder, loc, grad, rhs, false, !transposeRhs);
  if (needed[1]) {
    grads[1] =
        transposeRhs
            ? matmul(builder, loc, grad, lhs, true, transposeLhs, sharedRhs)
            : matmul(builder, loc, lhs, grad, !transposeLhs, false, sharedRhs);
  }
  return grads;
}

Cotangents AttentionOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  SmallVector<Value> grads(getNumOperands());
  // The log-sum-exp only feeds attention_grad: it has no cotangent.
  if ((!needed[0] && !needed[1] && !needed[2]) || !cotangents[0])
    return grads;
  auto grad = AttentionGradOp::create(
      builder, getLoc(), getQuery().getType(), getKey().getType(),
      getValue().getType(), getQuery(), getKey(), getValue(), getResult(),
      getLogSumExp(), cotangents[0], getSegments(), getScaleAttr(),
      getShardAxisAttr(), getWindowAttr(), getSoftcapAttr());
  Value results[] = {grad.getQueryGrad(), grad.getKeyGrad(),
                     grad.getValueGrad()};
  for (int i = 0; i < 3; ++i)
    if (needed[i])
      grads[i] = results[i];
  return grads;
}

Cotangents AddOp::buildVJP(OpBuilder &, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  return SmallVector<Value>{needed[0] ? cotangents[0] : Value(),
                            needed[1] ? cotangents[0] : Value()};
}

Cotangents MulOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  SmallVector<Value> grads(2);
  Type type = getResult().getType();
  if (needed[0])
    grads[0] = MulOp::create(builder, getLoc(), type, cotangents[0], getRhs());
  if (needed[1])
    grads[1] = MulOp::create(builder, getLoc(), type, cotangents[0], getLhs());
  return grads;
}

Cotangents DivOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                           ArrayRef<bool> needed) {
  SmallVector<Value> grads(2);
  Type type = getResult().getType();
  Location loc = getLoc();
  if (needed[0])
    grads[0] = DivOp::create(builder, loc, type, cotangents[0], getRhs());
  if (needed[1]) {
    // d(a / b)/db = -(a / b) / b.
    Value scaled =
        MulOp::create(builder, loc, type, cotangents[0], getResult());
    Value quotient = DivOp::create(builder, loc, type, scaled, getRhs());
    grads[1] = ScaleOp::create(builder, loc, type, quotient,
                               builder.getF64FloatAttr(-1.0));
  }
  return grads;
}

/// A gated activation's cotangents: its gradient op's, gate's and up's.
template <typename GatedGradOp, typename GatedOp>
static Cotangents gatedVJP(GatedOp op, OpBuilder &builder,
                           ValueRange cotangents, ArrayRef<bool> needed) {
  Type type = op.getResult().getType();
  auto grad = GatedGradOp::create(builder, op.getLoc(), type, type, op.getLhs(),
                                  op.getRhs(), cotangents[0]);
  return SmallVector<Value>{needed[0] ? grad.getGateGrad() : Value(),
                            needed[1] ? grad.getUpGrad() : Value()};
}

Cotangents SwigluOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                              ArrayRef<bool> needed) {
  return gatedVJP<SwigluGradOp>(*this, builder, cotangents, needed);
}

Cotangents GegluOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                             ArrayRef<bool> needed) {
  return gatedVJP<GegluGradOp>(*this, builder, cotangents, needed);
}

Cotangents SigmoidGateOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                                   ArrayRef<bool> needed) {
  return gatedVJP<SigmoidGateGradOp>(*this, builder, cotangents, needed);
}

Cotangents ScaleOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                             ArrayRef<bool> needed) {
  SmallVector<Value> grads(1);
  if (needed[0])
    grads[0] = ScaleOp::create(builder, getLoc(), getInput().getType(),
                               cotangents[0], getFactorAttr());
  return grads;
}

Cotangents ScaleColumnsOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                                   ArrayRef<bool> needed) {
  Type type = getInput().getType();
  auto grad = ScaleColumnsGradOp::create(builder, getLoc(), type,
                                         getScale().getType(), getInput(),
                                         getScale(), cotangents[0]);
  return SmallVector<Value>{needed[0] ? grad.getInputGrad() : Value(),
                            needed[1] ? grad.getScaleGrad() : Value()};
}

Cotangents AddColumnsOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                                  ArrayRef<bool> needed) {
  SmallVector<Value> grads{needed[0] ? cotangents[0] : Value(), Value()};
  if (needed[1])
    grads[1] = ColumnSumsOp::create(builder, getLoc(), getBias().getType(),
                                    cotangents[0]);
  return grads;
}

Cotangents RoundToFp8Op::buildVJP(OpBuilder &builder, ValueRange cotangents,
                                  ArrayRef<bool> needed) {
  // Straight through: the rounding's steps are taken as the identity.
  return SmallVector<Value>{needed[0] ? cotangents[0] : Value()};
}

Cotangents DropoutOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                               ArrayRef<bool> needed) {
  // The mask is a function of the element's place: the gradient is dropped
  // and scaled as the input was. Tokens and micro-batch have none.
  SmallVector<Value> grads(3);
  if (needed[0])
    grads[0] = DropoutOp::create(builder, getLoc(), getInput().getType(),
                                 cotangents[0], getTokens(), getMicroBatch(),
                                 getRateAttr(), getSeedAttr(), getStreamAttr(),
                                 getShardAxisAttr());
  return grads;
}

Cotangents LinearCrossEntropyOp::buildVJP(OpBuilder &builder,
                                          ValueRange cotangents,
                                          ArrayRef<bool> needed) {
  SmallVector<Value> grads(getNumOperands());
  if (!cotangents[0])
    return grads;
  // One op per gradient: each forms the logits again, tile by tile.
  for (int operand : {0, 1})
    if (needed[operand])
      grads[operand] =
          LinearCrossEntropyGradOp::create(
              builder, getLoc(), getOperand(operand).getType(),
              getTile().getType(), getInput(), getWeight(), getLabels(),
              cotangents[0], getSequences(),
              /*wrt_weight=*/operand == 1 ? builder.getUnitAttr() : nullptr,
              getIgnoreIndexAttr(), getShardAxisAttr(), getVocabSizeAttr(),
              getSoftcapAttr(), getSequenceCountAttr())
              .getResult();
  return grads;
}

Cotangents SplitOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                             ArrayRef<bool> needed) {
  SmallVector<Value> grads(1);
  if (!needed[0])
    return grads;
  // A piece nothing read has a zero cotangent.
  SmallVector<Value> pieces;
  for (auto [piece, cotangent] : llvm::zip_equal(getPieces(), cotangents))
    pieces.push_back(cotangent ? cotangent
                               : ConstantOp::create(builder, getLoc(),
                                                    piece.getType(),
                                                    builder.getF64FloatAttr(0))
                                     .getResult());
  grads[0] = ConcatOp::create(builder, getLoc(), getInput().getType(), pieces,
                              getDimAttr(), getBlocksAttr());
  return grads;
}

Cotangents ConcatOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                              ArrayRef<bool> needed) {
  SmallVector<Value> grads(getPieces().size());
  if (llvm::none_of(needed, [](bool b) { return b; }))
    return grads;
  auto split = SplitOp::create(builder, getLoc(), getPieces().getTypes(),
                               cotangents[0], getDimAttr(), getBlocksAttr());
  for (auto [index, piece] : llvm::enumerate(split.getPieces()))
    if (needed[index])
      grads[index] = piece;
  return grads;
}

Cotangents ReshapeOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                               ArrayRef<bool> needed) {
  SmallVector<Value> grads(1);
  if (needed[0])
    grads[0] = ReshapeOp::create(builder, getLoc(), getInput().getType(),
                                 cotangents[0]);
  return grads;
}

Cotangents TransposeOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                                 ArrayRef<bool> needed) {
  SmallVector<Value> grads(1);
  if (!needed[0])
    return grads;
  ArrayRef<int64_t> permutation = getPermutation();
  SmallVector<int64_t> inverse(permutation.size());
  for (auto [index, dim] : llvm::enumerate(permutation))
    inverse[dim] = index;
  grads[0] = TransposeOp::create(builder, getLoc(), getInput().getType(),
                                 cotangents[0], inverse);
  return grads;
}

Cotangents CastOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                            ArrayRef<bool> needed) {
  SmallVector<Value> grads(1);
  if (needed[0] && isa<FloatType>(elementTypeOf(getInput())))
    grads[0] =
        CastOp::create(builder, getLoc(), getInput().getType(), cotangents[0]);
  return grads;
}

// dispatch and combine are each other's adjoint: a row of dispatch's is
// its token times its weight, and combine sums a token's rows times
// their weights; each one's weights have combine_weights_grad's gradient,
// of the rows and the tokens' values (one of them the cotangent).
template <typename Adjoint, typename Op>
static Cotangents adjointVJP(Op op, OpBuilder &builder, Value grad,
                             ArrayRef<bool> needed) {
  SmallVector<Value> grads(op->getNumOperands());
  if (!grad)
    return grads;
  Value operand = op->getOperand(0), weights = op.getWeights();
  if (needed[0])
    grads[0] = Adjoint::create(builder, op.getLoc(), operand.getType(), grad,
                               op.getPositions(), weights);
  auto [rows, tokens] = std::is_same_v<Op, DispatchOp>
                            ? std::pair{grad, operand}
                            : std::pair{operand, grad};
  if (weights && needed[2])
    grads[2] =
        CombineWeightsGradOp::create(builder, op.getLoc(), weights.getType(),
                                     rows, op.getPositions(), tokens);
  return grads;
}

Cotangents DispatchOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                                ArrayRef<bool> needed) {
  return adjointVJP<CombineOp>(*this, builder, cotangents[0], needed);
}

Cotangents CombineOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                               ArrayRef<bool> needed) {
  return adjointVJP<DispatchOp>(*this, builder, cotangents[0], needed);
}

// y = rows W_e (or W_e^T) per expert: the rows' gradient is grad W_e^T
// (or W_e), the other transposition; the weight's, rows^T grad over its
// rows, in the weight's layout.
Cotangents GroupedMatmulOp::buildVJP(OpBuilder &builder, ValueRange cotangents,
                                     ArrayRef<bool> needed) {
  SmallVector<Value> grads(getNumOperands());
  Value grad = cotangents[0];
  if (!grad)
    return grads;
  if (needed[0])
    grads[0] =
        GroupedMatmulOp::create(builder, getLoc(), getRows().getType(), grad,
                                getWeight(), getCounts(), !getTransposeRhs());
  if (needed[1])
    grads[1] = GroupedMatmulWeightGradOp::create(
        builder, getLoc(), getWeight().getType(), getRows(), grad, getCounts(),
        getTransposeRhs());
  return grads;
}
