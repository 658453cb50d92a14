//===- TwillShardingRules.cpp - the factor rule of every op ---------------===//

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"
#include "support/Dpo.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::twill;

using Tensor = ShardingRule::Tensor;

ShardingRule mlir::twill::elementwiseRule(Operation *op) {
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(op->getResult(0)));
  for (Value operand : op->getOperands())
    rule.operands.push_back(shapeOf(operand).size() ? dims : Tensor());
  rule.results.assign(op->getNumResults(), dims);
  return rule;
}

ShardingRule mlir::twill::rowsRule(Operation *op) {
  ShardingRule rule;
  Tensor rows = rule.freshFactors(shapeOf(op->getOperand(0)).drop_back());
  auto byRows = [&](Value value) {
    Tensor dims = rows;
    int last = rule.addFactor(shapeOf(value).back());
    dims.push_back({last});
    rule.replicated.push_back(last);
    return dims;
  };
  for (Value operand : op->getOperands())
    rule.operands.push_back(byRows(operand));
  for (Value result : op->getResults())
    rule.results.push_back(byRows(result));
  return rule;
}

ShardingRule mlir::twill::groupsRule(Operation *op) {
  ShardingRule rule;
  int groups = rule.addFactor(shapeOf(op->getOperand(0)).front());
  auto byGroups = [&](Value value) {
    Tensor dims = {{groups}};
    for (int64_t size : shapeOf(value).drop_front()) {
      int own = rule.addFactor(size);
      dims.push_back({own});
      rule.replicated.push_back(own);
    }
    return dims;
  };
  for (Value operand : op->getOperands())
    rule.operands.push_back(byGroups(operand));
  for (Value result : op->getResults())
    rule.results.push_back(byGroups(result));
  return rule;
}

ShardingRule mlir::twill::wholeRule(Operation *op) {
  ShardingRule rule;
  auto whole = [&](Value value) {
    Tensor dims = rule.freshFactors(shapeOf(value));
    for (const ShardingRule::Dim &dim : dims)
      rule.replicated.push_back(dim.front());
    return dims;
  };
  for (Value operand : op->getOperands())
    rule.operands.push_back(whole(operand));
  for (Value result : op->getResults())
    rule.results.push_back(whole(result));
  return rule;
}

/// A router's tokens, [tokens..., experts] `logits` and [tokens...]
/// `mask` of expert_load and its gradient: the tokens shard as rows do;
/// a token's experts stay whole (its softmax is over all of them).
static std::pair<Tensor, int> routerTokens(ShardingRule &rule, Value logits) {
  Tensor tokens = rule.freshFactors(shapeOf(logits).drop_back());
  int experts = rule.addFactor(shapeOf(logits).back());
  rule.replicated.push_back(experts);
  return {tokens, experts};
}

ShardingRule ExpertLoadOp::getShardingRule() {
  // Sums over the tokens: sharded tokens give partial sums.
  ShardingRule rule;
  auto [tokens, experts] = routerTokens(rule, getLogits());
  int k = rule.addFactor(shapeOf(getIndices()).back());
  rule.replicated.push_back(k);
  Tensor logits = tokens, indices = tokens;
  logits.push_back({experts});
  indices.push_back({k});
  rule.operands = {logits, indices, tokens};
  rule.results = {ShardingRule::tensor({experts}),
                  ShardingRule::tensor({experts}), Tensor()};
  for (const ShardingRule::Dim &dim : tokens)
    rule.reductions.push_back(dim.front());
  return rule;
}

ShardingRule ExpertLoadGradOp::getShardingRule() {
  // A token's gradient is its own; the sums' cotangent is whole.
  ShardingRule rule;
  auto [tokens, experts] = routerTokens(rule, getLogits());
  Tensor logits = tokens;
  logits.push_back({experts});
  rule.operands = {logits, tokens, ShardingRule::tensor({experts})};
  rule.results = {logits};
  return rule;
}

/// `dims` with its last factor marked replicated (a whole-row op).
static ShardingRule rowRule(Operation *op) {
  ShardingRule rule = elementwiseRule(op);
  rule.replicated.push_back(rule.results.front().back().front());
  return rule;
}

ShardingRule EmbeddingOp::getShardingRule() {
  // A vocab-sharded table looks up the ids in its rows and gives zeros for
  // the others: vocab is a reduction factor.
  ShardingRule rule;
  Tensor ids = rule.freshFactors(shapeOf(getIds()));
  int vocab = rule.addFactor(shapeOf(getTable())[0]);
  int hidden = rule.addFactor(shapeOf(getTable())[1]);
  rule.operands = {ShardingRule::tensor({vocab, hidden}), ids};
  Tensor result = ids;
  result.push_back({hidden});
  rule.results = {result};
  rule.reductions = {vocab};
  return rule;
}

ShardingRule MatmulOp::getShardingRule() {
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs());
  ShardingRule rule;
  Tensor batch = rule.freshFactors(lhs.drop_back(2));
  bool transposeLhs = getTransposeLhs(), transposeRhs = getTransposeRhs();
  int m = rule.addFactor(transposeLhs ? lhs.back() : lhs[lhs.size() - 2]);
  int k = rule.addFactor(transposeLhs ? lhs[lhs.size() - 2] : lhs.back());
  int n = rule.addFactor(transposeRhs ? rhs[rhs.size() - 2] : rhs.back());
  auto matrix = [&](Tensor prefix, int rows, int columns) {
    prefix.push_back({rows});
    prefix.push_back({columns});
    return prefix;
  };
  Tensor rhsBatch = rhs.size() > 2 ? batch : Tensor();
  rule.operands = {transposeLhs ? matrix(batch, k, m) : matrix(batch, m, k),
                   transposeRhs ? matrix(rhsBatch, n, k)
                                : matrix(rhsBatch, k, n)};
  rule.reductions = {k};
  bool contractsBatch = shapeOf(getResult()).size() == 2 && !batch.empty();
  rule.results = {matrix(contractsBatch ? Tensor() : batch, m, n)};
  if (contractsBatch)
    for (const ShardingRule::Dim &dim : batch)
      rule.reductions.push_back(dim.front());
  if (getAddend()) // laid out as the result
    rule.operands.push_back(rule.results.front());
  return rule;
}

/// grouped_matmul and its weight's gradient: `([g, r, k], [e, n, k] or
/// [e, k, n], [g, e]) -> ([g, r, n])`, the gradient `([g, r, k], [g, r, n],
/// [g, e]) -> (the weight)`. Groups shard; a group's rows and the experts
/// stay whole (each expert's rows are a range of them); k is summed over,
/// and, for the gradient, the groups and rows too.
static ShardingRule groupedMatmulRule(Value rows, ArrayRef<int64_t> weight,
                                      bool transposed, bool weightGrad) {
  ShardingRule rule;
  ArrayRef<int64_t> shape = shapeOf(rows);
  int g = rule.addFactor(shape[0]), r = rule.addFactor(shape[1]);
  int k = rule.addFactor(shape[2]), e = rule.addFactor(weight[0]);
  int n = rule.addFactor(transposed ? weight[1] : weight[2]);
  Tensor weightDims = transposed ? ShardingRule::tensor({e, n, k})
                                 : ShardingRule::tensor({e, k, n});
  Tensor rowsIn = ShardingRule::tensor({g, r, k});
  Tensor rowsOut = ShardingRule::tensor({g, r, n});
  Tensor counts = ShardingRule::tensor({g, e});
  rule.replicated = {r, e};
  rule.reductions = {k};
  if (weightGrad) {
    rule.operands = {rowsIn, rowsOut, counts};
    rule.results = {weightDims};
    rule.reductions = {g, r};
  } else {
    rule.operands = {rowsIn, weightDims, counts};
    rule.results = {rowsOut};
  }
  return rule;
}

ShardingRule GroupedMatmulOp::getShardingRule() {
  return groupedMatmulRule(getRows(), shapeOf(getWeight()), getTransposeRhs(),
                           false);
}

ShardingRule GroupedMatmulWeightGradOp::getShardingRule() {
  return groupedMatmulRule(getRows(), shapeOf(getResult()), getTransposeRhs(),
                           true);
}

ShardingRule RmsNormOp::getShardingRule() {
  ShardingRule rule = rowRule(*this);
  rule.operands[1] = {rule.results.front().back()};
  return rule;
}

ShardingRule RopeOp::getShardingRule() {
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(getInput()));
  rule.operands = {dims, Tensor(dims.begin(), dims.begin() + 2)};
  rule.results = {dims};
  rule.replicated = {dims.back().front()};
  return rule;
}

/// Attention and its gradient: batch and query heads shard freely; the key
/// and value heads are their own factor (partitioning shards them with the
/// query heads, or replicates them when there are fewer KV heads than
/// devices); every query needs every key, so the sequence stays whole
/// (sequence parallelism gathers it first), and so does the head dim.
static ShardingRule attentionRule(Value query, Value key, bool hasSegments) {
  ArrayRef<int64_t> q = shapeOf(query), k = shapeOf(key);
  ShardingRule rule;
  int batch = rule.addFactor(q[0]), seq = rule.addFactor(q[1]);
  int heads = rule.addFactor(q[2]), kvHeads = rule.addFactor(k[2]);
  int headDim = rule.addFactor(q[3]);
  Tensor queryDims = ShardingRule::tensor({batch, seq, heads, headDim});
  Tensor keyDims = ShardingRule::tensor({batch, seq, kvHeads, headDim});
  rule.operands = {queryDims, keyDims, keyDims};
  if (hasSegments)
    rule.operands.push_back(ShardingRule::tensor({batch, seq}));
  rule.replicated = {seq, headDim};
  return rule;
}

/// The log-sum-exp's dims, [batch, heads, seq], of the query's.
static Tensor logSumExpDims(const Tensor &queryDims) {
  return {queryDims[0], queryDims[2], queryDims[1]};
}

ShardingRule AttentionOp::getShardingRule() {
  // (query, key, value[, segments]) -> (output, log_sum_exp)
  ShardingRule rule = attentionRule(getQuery(), getKey(), bool(getSegments()));
  rule.results = {rule.operands[0], logSumExpDims(rule.operands[0])};
  return rule;
}

ShardingRule AttentionGradOp::getShardingRule() {
  // (query, key, value, output, log_sum_exp, grad[, segments]) -> (dq, dk, dv)
  ShardingRule rule = attentionRule(getQuery(), getKey(), bool(getSegments()));
  Tensor queryDims = rule.operands[0], keyDims = rule.operands[1];
  rule.operands.insert(rule.operands.begin() + 3,
                       {queryDims, logSumExpDims(queryDims), queryDims});
  rule.results = {queryDims, keyDims, keyDims};
  // A key/value head's gradient sums over the query heads it serves.
  rule.reductions = {queryDims[2].front()};
  return rule;
}

ShardingRule RowSumSquaresOp::getShardingRule() {
  // Split along its last dim, each rank sums its columns: a partial sum.
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(getInput()));
  rule.operands = {dims};
  rule.results = {Tensor(dims.begin(), dims.end() - 1)};
  rule.reductions = {dims.back().front()};
  return rule;
}

/// An op of an input and one value per column (scale_columns,
/// add_columns): the vector shards with the columns.
static ShardingRule byColumnRule(Value input) {
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(input));
  rule.operands = {dims, Tensor{dims.back()}};
  rule.results = {dims};
  return rule;
}

ShardingRule ScaleColumnsOp::getShardingRule() {
  return byColumnRule(getInput());
}

ShardingRule ScaleColumnsGradOp::getShardingRule() {
  // The scale's gradient sums over every position: sharded positions give
  // partial sums.
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(getInput()));
  Tensor columns{dims.back()};
  rule.operands = {dims, columns, dims};
  rule.results = {dims, columns};
  for (const ShardingRule::Dim &dim : llvm::ArrayRef(dims).drop_back())
    rule.reductions.push_back(dim.front());
  return rule;
}

ShardingRule AddColumnsOp::getShardingRule() {
  return byColumnRule(getInput());
}

ShardingRule ColumnSumsOp::getShardingRule() {
  // Sharded rows give partial sums.
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(getInput()));
  rule.operands = {dims};
  rule.results = {Tensor{dims.back()}};
  for (const ShardingRule::Dim &dim : llvm::ArrayRef(dims).drop_back())
    rule.reductions.push_back(dim.front());
  return rule;
}

ShardingRule DequantizeNf4Op::getShardingRule() {
  // Rows split anywhere; columns only in whole blocks, where the axis
  // divides them: a block's codes and its scale stay on one rank. The
  // nested scales are the whole weight's.
  ShardingRule rule;
  ArrayRef<int64_t> result = shapeOf(getResult());
  int64_t blockSize = getBlockSize();
  int rows = rule.addFactor(result[0]);
  int blocks = rule.addFactor(result[1] / blockSize);
  int codeBytes = rule.addFactor(blockSize / 2);
  int values = rule.addFactor(blockSize);
  int nested = rule.addFactor(shapeOf(getNested())[0]);
  rule.operands = {Tensor{{rows}, {blocks, codeBytes}},
                   Tensor{{rows}, {blocks}}, Tensor{{nested}}, Tensor()};
  rule.results = {Tensor{{rows}, {blocks, values}}};
  rule.replicated = {codeBytes, values, nested};
  rule.divisible = {blocks};
  return rule;
}

ShardingRule DequantizeFp8Op::getShardingRule() {
  // Elementwise, each row's scale with its row.
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(getResult()));
  rule.operands = {dims, Tensor{dims.front()}};
  rule.results = {dims};
  return rule;
}

ShardingRule RoundToFp8Op::getShardingRule() {
  // Elementwise, but a block's values share a scale: the last dim splits
  // only in whole blocks, where the axis divides them (a rank's blocks are
  // then the whole input's); where the block does not divide the dim,
  // not at all.
  ShardingRule rule;
  ArrayRef<int64_t> shape = shapeOf(getInput());
  Tensor dims = rule.freshFactors(shape.drop_back());
  int64_t last = shape.back(), block = getBlockSize();
  if (last % block == 0 && last > block) {
    int blocks = rule.addFactor(last / block);
    int values = rule.addFactor(block);
    dims.push_back({blocks, values});
    rule.replicated.push_back(values);
    rule.divisible.push_back(blocks);
  } else {
    int whole = rule.addFactor(last);
    dims.push_back({whole});
    rule.replicated.push_back(whole);
  }
  rule.operands = {dims};
  rule.results = {dims};
  return rule;
}

/// dpo_loss and its gradient: `[pairs, 2]` operands whose pairs any axis
/// splits, a pair's two completions together.
static ShardingRule dpoRule(Value policy, bool gradient) {
  ShardingRule rule;
  ArrayRef<int64_t> shape = shapeOf(policy);
  int pairs = rule.addFactor(shape[0]);
  int completions = rule.addFactor(shape[1]);
  rule.replicated = {completions};
  ShardingRule::Tensor pair{{pairs}, {completions}};
  rule.operands = {pair, pair, pair};
  if (gradient) {
    rule.operands.push_back(Tensor());
    rule.results = {pair};
    return rule;
  }
  // Sums over the pairs: sharded pairs give partial sums.
  int metrics = rule.addFactor(::twill::dpo::kMetrics);
  rule.results = {Tensor(), Tensor(), Tensor{{metrics}}};
  rule.replicated.push_back(metrics);
  rule.reductions = {pairs};
  return rule;
}

ShardingRule DpoLossOp::getShardingRule() {
  return dpoRule(getPolicy(), /*gradient=*/false);
}

ShardingRule DpoLossGradOp::getShardingRule() {
  return dpoRule(getPolicy(), /*gradient=*/true);
}

ShardingRule DropoutOp::getShardingRule() {
  // Elementwise; the tokens' index follows the input's rows and positions.
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(getInput()));
  rule.operands = {dims, Tensor(dims.begin(), dims.begin() + 2), Tensor()};
  rule.results = {dims};
  return rule;
}

/// What a loss sums into (its loss and count, or a gradient's cotangent of
/// them): a scalar, or with sequences each row's (the positions' leading
/// factors) per sequence (a factor of its own, whole).
static Tensor lossSumsOf(ShardingRule &rule, const Tensor &positions,
                         bool bySequence, int64_t sequenceCount) {
  if (!bySequence)
    return Tensor();
  Tensor sums(positions.begin(), positions.end() - 1);
  int sequences = rule.addFactor(sequenceCount);
  rule.replicated.push_back(sequences);
  sums.push_back({sequences});
  return sums;
}

/// The positions a loss's sums run over, its reductions: every one, or with
/// sequences only the last (the rows keep sums of their own).
static void reduceOverPositions(ShardingRule &rule, const Tensor &positions,
                                bool bySequence) {
  ArrayRef<ShardingRule::Dim> summed = positions;
  for (const ShardingRule::Dim &dim : bySequence ? summed.take_back() : summed)
    rule.reductions.push_back(dim.front());
}

ShardingRule CrossEntropyOp::getShardingRule() {
  // The loss and count are sums over positions: sharded positions give
  // partial sums. A sharded vocab is reduced by the op itself across the
  // axis (a vocab-parallel loss): the results stay whole.
  ShardingRule rule;
  Tensor positions = rule.freshFactors(shapeOf(getLabels()));
  int vocab = rule.addFactor(shapeOf(getLogits()).back());
  Tensor logits = positions;
  logits.push_back({vocab});
  rule.operands = {logits, positions};
  if (getSequences())
    rule.operands.push_back(positions);
  Tensor sums = lossSumsOf(rule, positions, bool(getSequences()),
                           getSequenceCount().value_or(0));
  reduceOverPositions(rule, positions, bool(getSequences()));
  rule.results = {sums, sums};
  rule.selfReduced = {vocab};
  return rule;
}

ShardingRule CrossEntropyGradOp::getShardingRule() {
  // A position reads its row's sequence's gradient: no sum.
  ShardingRule rule;
  Tensor positions = rule.freshFactors(shapeOf(getLabels()));
  int vocab = rule.addFactor(shapeOf(getLogits()).back());
  Tensor logits = positions;
  logits.push_back({vocab});
  Tensor grad = lossSumsOf(rule, positions, bool(getSequences()),
                           getSequenceCount().value_or(0));
  rule.operands = {logits, positions, grad};
  if (getSequences())
    rule.operands.push_back(positions);
  rule.results = {logits};
  rule.selfReduced = {vocab};
  return rule;
}

/// linear_cross_entropy and its gradients: `input [positions..., hidden]`,
/// `weight [vocab, hidden]`, `labels [positions...]`, then a gradient's
/// cotangent of the sums (and the sequences, with them). The logits
/// `[positions..., vocab]` it forms inside are never whole on a rank: the
/// vocab may be split and reduced by the op itself, and then the positions
/// may not (one axis cannot split both); the hidden dim is summed whole
/// and the tile's rows are its own.
static ShardingRule tiledLogitsRule(Operation *op, bool grad, bool bySequence,
                                    int64_t sequenceCount) {
  ShardingRule rule;
  Tensor positions = rule.freshFactors(shapeOf(op->getOperand(2)));
  int hidden = rule.addFactor(shapeOf(op->getOperand(1))[1]);
  int vocab = rule.addFactor(shapeOf(op->getOperand(1))[0]);
  int tileRows = rule.addFactor(shapeOf(op->getResults().back())[0]);
  Tensor input = positions, logits = positions;
  input.push_back({hidden});
  logits.push_back({vocab});
  rule.operands = {input, ShardingRule::tensor({vocab, hidden}), positions};
  rule.internals = {logits};
  rule.replicated = {hidden, tileRows};
  rule.selfReduced = {vocab};
  Tensor tile = ShardingRule::tensor({tileRows, vocab});
  Tensor sums = lossSumsOf(rule, positions, bySequence, sequenceCount);
  if (!grad) {
    if (bySequence)
      rule.operands.push_back(positions);
    reduceOverPositions(rule, positions, bySequence);
    rule.results = {sums, sums, tile};
    return rule;
  }
  rule.operands.push_back(sums);
  if (bySequence)
    rule.operands.push_back(positions);
  if (cast<LinearCrossEntropyGradOp>(op).getWrtWeight()) {
    // The weight's gradient sums over every position.
    reduceOverPositions(rule, positions, /*bySequence=*/false);
    rule.results = {rule.operands[1], tile};
    return rule;
  }
  // The input's gradient sums over the vocab: a split one leaves partial
  // sums; the positions are its own.
  rule.reductions = {vocab};
  rule.results = {input, tile};
  return rule;
}

ShardingRule LinearCrossEntropyOp::getShardingRule() {
  return tiledLogitsRule(*this, /*grad=*/false, bool(getSequences()),
                         getSequenceCount().value_or(0));
}

ShardingRule LinearCrossEntropyGradOp::getShardingRule() {
  return tiledLogitsRule(*this, /*grad=*/true, bool(getSequences()),
                         getSequenceCount().value_or(0));
}

/// split and concat: `whole` and its `pieces` share every dim but `dim`,
/// which each has whole (a factor of its own, never split); with `blocks`
/// > 1 that dim is the blocks, which an axis of as many ranks may split,
/// then the part of a block each has.
static ShardingRule piecesRule(Value whole, ValueRange pieces, int64_t dim,
                               int64_t blocks, bool wholeIsOperand) {
  ShardingRule rule;
  auto blockPart = [&](int64_t size) { return (size + blocks - 1) / blocks; };
  Tensor shared = rule.freshFactors(shapeOf(whole));
  int wholeCut = shared[dim].front();
  rule.factorSizes[wholeCut] = blockPart(shapeOf(whole)[dim]);
  rule.replicated.push_back(wholeCut);
  ShardingRule::Dim blocked;
  if (blocks > 1) {
    blocked.push_back(rule.addFactor(blocks));
    rule.exact.push_back(blocked.front());
  }
  auto cutDim = [&](int cut) {
    ShardingRule::Dim cutDim = blocked;
    cutDim.push_back(cut);
    return cutDim;
  };
  Tensor wholeTensor = shared;
  wholeTensor[dim] = cutDim(wholeCut);
  SmallVector<Tensor> pieceTensors;
  for (Value piece : pieces) {
    Tensor tensor = shared;
    int cut = rule.addFactor(blockPart(shapeOf(piece)[dim]));
    rule.replicated.push_back(cut);
    tensor[dim] = cutDim(cut);
    pieceTensors.push_back(tensor);
  }
  if (wholeIsOperand) {
    rule.operands = {wholeTensor};
    rule.results = pieceTensors;
  } else {
    rule.operands = pieceTensors;
    rule.results = {wholeTensor};
  }
  return rule;
}

ShardingRule SplitOp::getShardingRule() {
  return piecesRule(getInput(), getPieces(), getDim(), getBlocks(),
                    /*wholeIsOperand=*/true);
}

ShardingRule ConcatOp::getShardingRule() {
  return piecesRule(getResult(), getPieces(), getDim(), getBlocks(),
                    /*wholeIsOperand=*/false);
}

ShardingRule ReshapeOp::getShardingRule() {
  // Match runs of input dims with runs of output dims of equal product;
  // a dim made of several dims of the other side is those factors.
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  Tensor inDims(in.size()), outDims(out.size());
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    size_t i0 = i, o0 = o;
    int64_t inSize = i < in.size() ? in[i++] : 1;
    int64_t outSize = o < out.size() ? out[o++] : 1;
    while (inSize != outSize) {
      if (inSize < outSize && i < in.size())
        inSize *= in[i++];
      else if (outSize < inSize && o < out.size())
        outSize *= out[o++];
      else
        break;
    }
    if (i - i0 == 1) { // one input dim: the output dims are its factors
      for (size_t d = o0; d < o; ++d) {
        int factor = rule.addFactor(out[d]);
        outDims[d] = {factor};
        inDims[i0].push_back(factor);
      }
    } else { // several input dims make one output dim
      for (size_t d = i0; d < i; ++d) {
        int factor = rule.addFactor(in[d]);
        inDims[d] = {factor};
        for (size_t e = o0; e < o; ++e)
          outDims[e].push_back(factor);
        // Dims regrouped across both sides ([2, 3] -> [3, 2]) share no
        // factor boundary: keep them whole.
        if (o - o0 > 1)
          rule.replicated.push_back(factor);
      }
    }
  }
  rule.operands = {inDims};
  rule.results = {outDims};
  return rule;
}

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule;
  Tensor in = rule.freshFactors(shapeOf(getInput()));
  Tensor out;
  for (int64_t dim : getPermutation())
    out.push_back(in[dim]);
  rule.operands = {in};
  rule.results = {out};
  return rule;
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

ShardingRule ConstantOp::getShardingRule() {
  ShardingRule rule;
  rule.results = {rule.freshFactors(shapeOf(getResult()))};
  return rule;
}

ShardingRule EmbeddingGradOp::getShardingRule() {
  // Summing the rows of each id is a reduction over positions; each device
  // may compute any rows of the table.
  ShardingRule rule;
  Tensor ids = rule.freshFactors(shapeOf(getIds()));
  int vocab = rule.addFactor(shapeOf(getResult())[0]);
  int hidden = rule.addFactor(shapeOf(getResult())[1]);
  Tensor grad = ids;
  grad.push_back({hidden});
  rule.operands = {ids, grad};
  rule.results = {ShardingRule::tensor({vocab, hidden})};
  for (const ShardingRule::Dim &dim : ids)
    rule.reductions.push_back(dim.front());
  return rule;
}

ShardingRule RmsNormGradOp::getShardingRule() {
  ShardingRule rule = rowRule(*this);
  rule.operands[1] = {rule.results.front().back()};
  return rule;
}

ShardingRule RmsNormWeightGradOp::getShardingRule() {
  ShardingRule rule;
  Tensor input = rule.freshFactors(shapeOf(getInput()));
  rule.operands = {input, input};
  rule.results = {{input.back()}};
  for (const ShardingRule::Dim &dim : ArrayRef(input).drop_back())
    rule.reductions.push_back(dim.front());
  rule.replicated = {input.back().front()};
  return rule;
}

ShardingRule RopeGradOp::getShardingRule() {
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(getGrad()));
  rule.operands = {dims, Tensor(dims.begin(), dims.begin() + 2)};
  rule.results = {dims};
  rule.replicated = {dims.back().front()};
  return rule;
}

//===----------------------------------------------------------------------===//
// Optimizer ops
//===----------------------------------------------------------------------===//

ShardingRule AdamWOp::getShardingRule() {
  // Elementwise over the parameter; the scalars are whole everywhere.
  ShardingRule rule;
  Tensor dims = rule.freshFactors(shapeOf(getParam()));
  rule.operands = {dims, dims, dims, dims, Tensor(), Tensor(), Tensor()};
  rule.results = {dims, dims, dims};
  return rule;
}

/// A scalar from every element of every input: each dim a fresh factor,
/// all reductions (a sum: shards give partial sums) or all replicated.
static ShardingRule scalarOfInputsRule(ValueRange inputs, bool sums) {
  ShardingRule rule;
  for (Value input : inputs) {
    Tensor dims = rule.freshFactors(shapeOf(input));
    for (const ShardingRule::Dim &dim : dims)
      (sums ? rule.reductions : rule.replicated).push_back(dim.front());
    rule.operands.push_back(dims);
  }
  rule.results = {Tensor()};
  return rule;
}

ShardingRule GlobalNormOp::getShardingRule() {
  // The square root makes the norm of shards no sum of their norms: the
  // inputs stay whole here; the partitioner sums squares across shards.
  return scalarOfInputsRule(getInputs(), /*sums=*/false);
}

ShardingRule SumSquaresOp::getShardingRule() {
  return scalarOfInputsRule(getInputs(), /*sums=*/true);
}

ShardingRule mlir::twill::scalarRule(Operation *op) {
  ShardingRule rule;
  rule.operands.assign(op->getNumOperands(), Tensor());
  rule.results.assign(op->getNumResults(), Tensor());
  return rule;
}
