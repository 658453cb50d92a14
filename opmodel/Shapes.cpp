//===- Shapes.cpp - the shape rule of each op -----------------------------===//

#include "opmodel/Shapes.h"

#include "support/Dpo.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace twill;
using llvm::Error;

static Error problem(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

std::string shapes::text(Shape shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

Error shapes::expectShape(llvm::StringRef what, Shape actual, Shape expected) {
  if (actual == expected)
    return Error::success();
  return problem(what + " must have shape " + text(expected) + ", got " +
                 text(actual));
}

Error shapes::expectRank(llvm::StringRef what, Shape shape, int64_t rank) {
  if (int64_t(shape.size()) == rank)
    return Error::success();
  return problem(llvm::formatv("{0} must have rank {1}, got {2}", what, rank,
                               shape.size()));
}

/// `ids` with `dim` appended: an embedding's rows.
static llvm::SmallVector<int64_t> rowsOf(shapes::Shape ids, int64_t dim) {
  llvm::SmallVector<int64_t> rows(ids);
  rows.push_back(dim);
  return rows;
}

/// embedding: table [rows, dim], ids [...] -> [..., dim].
Error shapes::embedding(Shape table, Shape ids, Shape result) {
  if (Error error = expectRank("table", table, 2))
    return error;
  return expectShape("result", result, rowsOf(ids, table[1]));
}

/// embedding_grad: ids [...], grad [..., dim] -> the table's [rows, dim].
Error shapes::embeddingGrad(Shape ids, Shape grad, Shape result) {
  if (Error error = expectRank("result", result, 2))
    return error;
  return expectShape("grad", grad, rowsOf(ids, result[1]));
}

/// rms_norm: input [..., dim], weight [dim] -> like input.
Error shapes::rmsNorm(Shape input, Shape weight, Shape result) {
  if (input.empty())
    return problem("input must have rank 1 or more");
  if (Error error = expectShape("weight", weight, input.take_back()))
    return error;
  return expectShape("result", result, input);
}

/// rms_norm_grad: input, weight, grad -> the input's.
Error shapes::rmsNormGrad(Shape input, Shape weight, Shape grad,
                          Shape result) {
  if (Error error = rmsNorm(input, weight, result))
    return error;
  return expectShape("grad", grad, input);
}

/// rms_norm_weight_grad: input, grad -> the weight's [dim].
Error shapes::rmsNormWeightGrad(Shape input, Shape grad, Shape result) {
  if (input.empty())
    return problem("input must have rank 1 or more");
  if (Error error = expectShape("grad", grad, input))
    return error;
  return expectShape("result", result, input.take_back());
}

/// x [batch, seq, heads, headDim] (headDim even), positions [batch, seq]
/// -> like x: a rotation, forwards or back.
Error shapes::rope(Shape x, Shape positions, Shape result) {
  if (Error error = expectRank("input", x, 4))
    return error;
  if (x.back() % 2 != 0)
    return problem(llvm::formatv("head dim must be even, got {0}", x.back()));
  if (Error error = expectShape("positions", positions, x.take_front(2)))
    return error;
  return expectShape("result", result, x);
}

/// Fails unless each named shape is `like`.
static Error allLike(shapes::Shape like,
                     std::initializer_list<std::pair<const char *, shapes::Shape>>
                         values) {
  for (auto [what, shape] : values)
    if (Error error = shapes::expectShape(what, shape, like))
      return error;
  return Error::success();
}

/// lhs, rhs -> result, all of one shape.
Error shapes::binary(Shape lhs, Shape rhs, Shape result) {
  return allLike(lhs, {{"rhs", rhs}, {"result", result}});
}

/// The result of the input's shape.
Error shapes::unary(Shape input, Shape result) {
  return expectShape("result", result, input);
}

/// The elements of a value of `shape`.
static int64_t elementsOf(shapes::Shape shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

/// reshape: as many elements in the result as in the input.
Error shapes::reshape(Shape input, Shape result) {
  if (elementsOf(input) == elementsOf(result))
    return Error::success();
  return problem(llvm::formatv("cannot reshape {0} elements into {1}",
                               elementsOf(input), elementsOf(result)));
}

/// gate, up, grad -> the gate's and up's, all of one shape.
Error shapes::gatedGrad(Shape gate, Shape up, Shape grad, Shape gateGrad,
                        Shape upGrad) {
  return allLike(gate, {{"up", up},
                        {"grad", grad},
                        {"gate_grad", gateGrad},
                        {"up_grad", upGrad}});
}

Error shapes::transpose(Shape input, llvm::ArrayRef<int64_t> permutation,
                        Shape result) {
  llvm::SmallVector<bool> used(input.size(), false);
  bool permutes = permutation.size() == input.size();
  for (int64_t dim : permutation) {
    permutes = permutes && dim >= 0 && dim < int64_t(input.size()) &&
               !used[dim];
    if (permutes)
      used[dim] = true;
  }
  if (!permutes)
    return problem(llvm::formatv(
        "permutation {0} is not a permutation of the {1} input dims",
        text(permutation), input.size()));
  llvm::SmallVector<int64_t> expected;
  for (int64_t dim : permutation)
    expected.push_back(input[dim]);
  return expectShape("result", result, expected);
}

llvm::Expected<std::vector<PieceRun>>
shapes::pieces(Shape whole, llvm::ArrayRef<Shape> pieces, int64_t dim,
               int64_t blocks) {
  if (dim < 0 || dim >= int64_t(whole.size()))
    return problem(llvm::formatv("dim {0} is not a dim of {1}", dim,
                                 text(whole)));
  if (pieces.empty())
    return problem("needs at least one piece");
  llvm::SmallVector<int64_t> sizes;
  for (Shape piece : pieces) {
    llvm::SmallVector<int64_t> expected(whole);
    if (piece.size() == whole.size())
      expected[dim] = piece[dim];
    if (Error error = expectShape("piece", piece, expected))
      return std::move(error);
    sizes.push_back(piece[dim]);
  }
  llvm::Expected<std::vector<PieceRun>> runs =
      blockedPieceRuns(whole[dim], blocks, sizes);
  if (!runs)
    return problem(llvm::formatv("pieces do not lay out dim {0}: {1}", dim,
                                 llvm::toString(runs.takeError())));
  return runs;
}

/// DoRA's: row_sum_squares, input [..., columns] -> [...]; scale_columns,
/// input, scale [columns] -> like input; and its gradient, input, scale,
/// grad -> the input's and the scale's.
Error shapes::rowSumSquares(Shape input, Shape result) {
  if (input.empty())
    return problem("input must have a dim to sum over");
  return expectShape("result", result, input.drop_back());
}

/// An op of `input` and a vector of one value per column (`vectorName`).
static Error byColumn(shapes::Shape input, llvm::StringRef vectorName,
                      shapes::Shape vector, shapes::Shape result) {
  if (input.empty())
    return problem("input must have columns");
  if (Error error = shapes::expectShape(vectorName, vector, input.take_back()))
    return error;
  return shapes::expectShape("result", result, input);
}

Error shapes::scaleColumns(Shape input, Shape scale, Shape result) {
  return byColumn(input, "scale", scale, result);
}

/// A bias: add_columns, input, bias [columns] -> like input; its gradient
/// column_sums, input [..., columns] -> [columns].
Error shapes::addColumns(Shape input, Shape bias, Shape result) {
  return byColumn(input, "bias", bias, result);
}

Error shapes::columnSums(Shape input, Shape result) {
  if (input.empty())
    return problem("input must have columns");
  return expectShape("result", result, input.take_back());
}

Error shapes::scaleColumnsGrad(Shape input, Shape scale, Shape grad,
                               Shape inputGrad, Shape scaleGrad) {
  if (input.empty())
    return problem("input must have columns");
  if (Error error = allLike(input, {{"grad", grad}, {"input_grad", inputGrad}}))
    return error;
  return allLike(input.take_back(),
                 {{"scale", scale}, {"scale_grad", scaleGrad}});
}

Error shapes::dropout(Shape input, Shape tokens, Shape result) {
  if (Error error = expectRank("input", input, 3))
    return error;
  if (Error error = expectShape("result", result, input))
    return error;
  return expectShape("tokens", tokens, input.take_front(2));
}

Error shapes::dequantize(Shape codes, Shape absmax, Shape nested, Shape offset,
                         Shape result, int64_t blockSize,
                         int64_t nestedBlockSize, int64_t wholeRows,
                         int64_t wholeColumns) {
  if (blockSize < 2 || blockSize % 2 || nestedBlockSize < 1)
    return problem(llvm::formatv("block_size must be even and at least 2 and "
                                 "nested_block_size positive, got {0} and {1}",
                                 blockSize, nestedBlockSize));
  // Far past any weight, so that the blocks' count below stays exact.
  constexpr int64_t kMaxSide = int64_t(1) << 26;
  if (wholeRows < 1 || wholeColumns < 1 || wholeRows > kMaxSide ||
      wholeColumns > kMaxSide)
    return problem(llvm::formatv("the whole weight's shape [{0}, {1}] must be "
                                 "positive and at most 2^26 a side",
                                 wholeRows, wholeColumns));
  if (wholeColumns % blockSize)
    return problem(llvm::formatv("block_size {0} does not divide the weight's "
                                 "{1} columns",
                                 blockSize, wholeColumns));
  if (Error error = expectRank("result", result, 2))
    return error;
  int64_t rows = result[0], columns = result[1];
  if (rows < 1 || rows > wholeRows || columns < 1 || wholeColumns % columns ||
      columns % blockSize)
    return problem(llvm::formatv(
        "the result {0} is no block of the [{1}, {2}] weight in whole "
        "blocks of {3} columns",
        text(result), wholeRows, wholeColumns, blockSize));
  int64_t blocks = wholeRows * (wholeColumns / blockSize);
  int64_t nestedBlocks = (blocks + nestedBlockSize - 1) / nestedBlockSize;
  if (Error error = expectShape("codes", codes, {rows, columns / 2}))
    return error;
  if (Error error = expectShape("absmax", absmax, {rows, columns / blockSize}))
    return error;
  if (Error error = expectShape("nested_absmax", nested, {nestedBlocks}))
    return error;
  return expectShape("nested_offset", offset, {});
}

/// dequantize_fp8: values [rows, columns], scales [rows] -> [rows,
/// columns].
Error shapes::dequantizeFp8(Shape values, Shape scales, Shape result) {
  if (Error error = expectRank("result", result, 2))
    return error;
  if (Error error = expectShape("values", values, result))
    return error;
  return expectShape("scales", scales, result.take_front());
}

Error shapes::crossEntropy(Shape logits, Shape labels) {
  if (logits.empty())
    return problem("logits must have a vocab dim");
  return expectShape("labels", labels, logits.drop_back());
}

Error shapes::crossEntropyGrad(Shape logits, Shape labels, Shape result) {
  if (Error error = crossEntropy(logits, labels))
    return error;
  return expectShape("result", result, logits);
}

Error shapes::lossSums(Shape labels, std::optional<Shape> sequences,
                       int64_t sequenceCount, Shape sums) {
  if (!sequences) {
    if (sequenceCount != 0)
      return problem("sequence_count needs sequences");
    return expectShape("the sums", sums, {});
  }
  if (Error error = expectShape("sequences", *sequences, labels))
    return error;
  if (labels.empty() || sequenceCount <= 0)
    return problem("sequences need labels with a position dim and a "
                   "positive sequence_count");
  llvm::SmallVector<int64_t> expected(labels.drop_back());
  expected.push_back(sequenceCount);
  return expectShape("the sums", sums, expected);
}

Error shapes::dpoLoss(Shape policy, Shape reference, Shape tokens,
                      Shape metrics) {
  if (policy.size() != 2 || policy[1] != 2)
    return problem("policy must be [pairs, 2] (chosen, rejected), got " +
                   text(policy));
  if (Error error =
          allLike(policy, {{"reference", reference}, {"tokens", tokens}}))
    return error;
  return expectShape("metrics", metrics, {dpo::kMetrics});
}

Error shapes::dpoLossGrad(Shape policy, Shape reference, Shape tokens,
                          Shape result) {
  if (Error error = dpoLoss(policy, reference, tokens, {dpo::kMetrics}))
    return error;
  return expectShape("result", result, policy);
}

Error shapes::adamw(Shape param, Shape grad, Shape expAvg, Shape expAvgSq,
                    Shape newParam, Shape newExpAvg, Shape newExpAvgSq) {
  return allLike(param, {{"grad", grad},
                         {"exp_avg", expAvg},
                         {"exp_avg_sq", expAvgSq},
                         {"new_param", newParam},
                         {"new_exp_avg", newExpAvg},
                         {"new_exp_avg_sq", newExpAvgSq}});
}

Error shapes::collectiveDims(Collective kind, Shape input, int64_t dim,
                             int64_t splitDim) {
  if (kind == Collective::AllReduce)
    return Error::success();
  auto isDim = [&](const char *name, int64_t d) -> Error {
    if (d >= 0 && d < int64_t(input.size()))
      return Error::success();
    return problem(llvm::formatv("{0} {1} is not a dim of a {2}-d tensor",
                                 name, d, input.size()));
  };
  if (kind != Collective::AllToAll)
    return isDim("dim", dim);
  if (Error error = isDim("split_dim", splitDim))
    return error;
  return isDim("concat_dim", dim);
}

Error shapes::collective(Collective kind, Shape input, Shape result,
                         int64_t dim, int64_t splitDim, int64_t ranks,
                         llvm::StringRef axis) {
  if (Error error = collectiveDims(kind, input, dim, splitDim))
    return error;
  auto block = [&](int64_t whole) { return (whole + ranks - 1) / ranks; };
  llvm::SmallVector<int64_t> expected(input);
  switch (kind) {
  case Collective::AllReduce:
    break;
  case Collective::AllGather:
    if (result.size() == input.size() && block(result[dim]) == input[dim])
      expected[dim] = result[dim];
    else
      expected[dim] *= ranks;
    break;
  case Collective::ReduceScatter:
  case Collective::LocalSlice:
    expected[dim] = block(expected[dim]);
    break;
  case Collective::AllToAll:
    if (expected[splitDim] % ranks != 0)
      return problem(llvm::formatv(
          "split dim {0} of size {1} does not split over the {2} ranks of "
          "\"{3}\"",
          splitDim, expected[splitDim], ranks, axis));
    expected[splitDim] /= ranks;
    expected[dim] *= ranks;
    break;
  }
  return expectShape("result", result, expected);
}

/// What attention and its gradient both check of their operands.
static Error attentionOperands(shapes::Shape query, shapes::Shape key,
                               shapes::Shape value,
                               std::optional<shapes::Shape> segments,
                               bool queryHeadsSharded) {
  using namespace shapes;
  for (auto [what, shape] : {std::pair<const char *, Shape>{"query", query},
                             {"key", key},
                             {"value", value}})
    if (Error error = expectRank(what, shape, 4))
      return error;
  if (Error error =
          expectShape("key", key, {query[0], query[1], key[2], query[3]}))
    return error;
  if (Error error = expectShape("value", value, key))
    return error;
  if (segments)
    if (Error error =
            expectShape("segments", *segments, query.take_front(2)))
      return error;
  int64_t heads = query[2], kvHeads = key[2];
  if ((kvHeads > 0 && heads % kvHeads == 0) ||
      (queryHeadsSharded && heads > 0 && kvHeads % heads == 0))
    return Error::success();
  return problem(llvm::formatv(
      "query heads ({0}) must be a multiple of key/value heads ({1})", heads,
      kvHeads));
}

/// What attention and its gradient both check of the log-sum-exp: one per
/// query row of each head, [batch, heads, seq].
static Error logSumExpOf(shapes::Shape query, shapes::Shape logSumExp) {
  return shapes::expectShape("log_sum_exp", logSumExp,
                             {query[0], query[2], query[1]});
}

Error shapes::attention(Shape query, Shape key, Shape value,
                        std::optional<Shape> segments, Shape result,
                        Shape logSumExp, bool queryHeadsSharded) {
  if (Error error =
          attentionOperands(query, key, value, segments, queryHeadsSharded))
    return error;
  if (Error error = expectShape("result", result, query))
    return error;
  return logSumExpOf(query, logSumExp);
}

Error shapes::attentionGrad(Shape query, Shape key, Shape value, Shape output,
                            Shape logSumExp, Shape grad,
                            std::optional<Shape> segments, Shape queryGrad,
                            Shape keyGrad, Shape valueGrad,
                            bool queryHeadsSharded) {
  if (Error error =
          attentionOperands(query, key, value, segments, queryHeadsSharded))
    return error;
  if (Error error = logSumExpOf(query, logSumExp))
    return error;
  if (Error error = allLike(query, {{"output", output},
                                    {"grad", grad},
                                    {"query_grad", queryGrad}}))
    return error;
  return allLike(key, {{"key_grad", keyGrad}, {"value_grad", valueGrad}});
}

Error shapes::tiledLogits(Shape input, Shape weight, Shape labels, Shape tile) {
  if (Error error = expectRank("weight", weight, 2))
    return error;
  if (Error error = expectRank("tile", tile, 2))
    return error;
  if (input.empty())
    return problem("input must have a hidden dim");
  if (Error error = expectShape("labels", labels, input.drop_back()))
    return error;
  if (Error error = expectShape("weight", weight, {weight[0], input.back()}))
    return error;
  if (tile[0] < 1)
    return problem("tile must hold at least one row");
  return expectShape("tile", tile, {tile[0], weight[0]});
}

Error shapes::tiledLogitsGrad(Shape input, Shape weight, Shape labels,
                              Shape tile, Shape result, bool wrtWeight) {
  if (Error error = tiledLogits(input, weight, labels, tile))
    return error;
  return expectShape("result", result, wrtWeight ? weight : input);
}

llvm::Expected<shapes::MatmulDims>
shapes::matmul(Shape lhs, Shape rhs, Shape result, bool transposeLhs,
               bool transposeRhs) {
  if (lhs.size() < 2 || rhs.size() < 2)
    return problem("operands must have rank 2 or more");
  Shape batchDims = lhs.drop_back(2);
  if (rhs.size() != 2 && rhs.drop_back(2) != batchDims)
    return problem("rhs must have no batch dims or lhs's " + text(batchDims) +
                   ", got " + text(rhs.drop_back(2)));
  MatmulDims dims;
  dims.m = lhs[lhs.size() - 2];
  dims.k = lhs.back();
  if (transposeLhs)
    std::swap(dims.m, dims.k);
  int64_t rhsK = rhs[rhs.size() - 2];
  dims.n = rhs.back();
  if (transposeRhs)
    std::swap(rhsK, dims.n);
  if (dims.k != rhsK)
    return problem(
        llvm::formatv("contracting dims differ: {0} vs {1}", dims.k, rhsK));
  dims.batch = elementsOf(batchDims);
  dims.rhsBatched = rhs.size() > 2;
  llvm::SmallVector<int64_t> expected(batchDims);
  if (result.size() == 2 && !batchDims.empty() && dims.rhsBatched) {
    if (!transposeLhs || transposeRhs)
      return problem("sums over batch dims only with transpose_lhs and "
                     "without transpose_rhs");
    expected.clear(); // the batch dims are contracted
    dims.k *= dims.batch;
    dims.batch = 1;
    dims.rhsBatched = false;
  }
  expected.append({dims.m, dims.n});
  if (Error error = expectShape("result", result, expected))
    return std::move(error);
  return dims;
}

/// A router's choices, `chosen` [rows..., k], of logits [rows..., experts]:
/// at least one expert a token and at most all of them.
static Error topK(shapes::Shape logits, llvm::StringRef what,
                  shapes::Shape chosen) {
  if (logits.empty())
    return problem("logits must have rank 1 or more");
  if (chosen.empty() || chosen.back() < 1 || chosen.back() > logits.back())
    return problem(llvm::formatv("{0} must choose 1 to {1} experts (the "
                                 "logits' last dim) a token, got {2}",
                                 what, logits.back(), shapes::text(chosen)));
  llvm::SmallVector<int64_t> expected(logits.drop_back());
  expected.push_back(chosen.back());
  return shapes::expectShape(what, chosen, expected);
}

/// logits [rows..., experts] -> weights and indices [rows..., k].
Error shapes::route(Shape logits, Shape weights, Shape indices) {
  if (Error error = topK(logits, "weights", weights))
    return error;
  return expectShape("indices", indices, weights);
}

/// logits, indices [rows..., k], grad like indices -> like logits.
Error shapes::routeGrad(Shape logits, Shape indices, Shape grad, Shape result) {
  if (Error error = topK(logits, "indices", indices))
    return error;
  if (Error error = expectShape("grad", grad, indices))
    return error;
  return expectShape("result", result, logits);
}

/// A router's `mask` of its tokens, `[tokens...]` of logits [tokens...,
/// experts], and the [experts] sums `what` of them.
static Error maskAndSums(shapes::Shape logits, shapes::Shape mask,
                         llvm::StringRef what, shapes::Shape sums) {
  if (Error error = shapes::expectShape("mask", mask, logits.drop_back()))
    return error;
  return shapes::expectShape(what, sums, {logits.back()});
}

/// logits [tokens..., experts], indices [tokens..., k], mask [tokens...]
/// -> probabilities and counts [experts], tokens [].
Error shapes::expertLoad(Shape logits, Shape indices, Shape mask,
                         Shape probabilities, Shape counts, Shape tokens) {
  if (Error error = topK(logits, "indices", indices))
    return error;
  if (Error error = maskAndSums(logits, mask, "probabilities", probabilities))
    return error;
  if (Error error = expectShape("counts", counts, probabilities))
    return error;
  return expectShape("tokens", tokens, {});
}

/// logits, mask, grad [experts] -> like logits.
Error shapes::expertLoadGrad(Shape logits, Shape mask, Shape grad,
                             Shape result) {
  if (logits.empty())
    return problem("logits must have rank 1 or more");
  if (Error error = maskAndSums(logits, mask, "grad", grad))
    return error;
  return expectShape("result", result, logits);
}

/// Each expert's sums `[experts]` (`first`, then `second` alike) and the
/// tokens [] they are over.
static Error expertSums(llvm::StringRef firstName, shapes::Shape first,
                        llvm::StringRef secondName, shapes::Shape second,
                        shapes::Shape tokens) {
  if (Error error = shapes::expectRank(firstName, first, 1))
    return error;
  if (Error error = shapes::expectShape(secondName, second, first))
    return error;
  return shapes::expectShape("tokens", tokens, {});
}

/// probabilities, counts [experts], tokens [] -> loss [].
Error shapes::loadBalancingLoss(Shape probabilities, Shape counts, Shape tokens,
                                Shape loss) {
  if (Error error =
          expertSums("probabilities", probabilities, "counts", counts, tokens))
    return error;
  return expectShape("loss", loss, {});
}

/// counts [experts], tokens [], grad [] -> like counts.
Error shapes::loadBalancingLossGrad(Shape counts, Shape tokens, Shape grad,
                                    Shape result) {
  if (Error error = expertSums("counts", counts, "result", result, tokens))
    return error;
  return expectShape("grad", grad, {});
}

/// A group's slots, `[groups, tokens, k]`, as `what` (positions or
/// weights) must be: `positions` itself, when it is well formed.
static Error slotsOf(llvm::StringRef what, shapes::Shape slots) {
  if (Error error = shapes::expectRank(what, slots, 3))
    return error;
  if (slots[2] < 1)
    return problem(llvm::formatv("{0} must give each token 1 or more slots, "
                                 "got {1}",
                                 what, shapes::text(slots)));
  return Error::success();
}

/// indices [groups, tokens, k] -> positions (its shape), counts
/// [groups, experts].
Error shapes::expertPositions(Shape indices, Shape positions, Shape counts) {
  if (Error error = slotsOf("indices", indices))
    return error;
  if (Error error = expectShape("positions", positions, indices))
    return error;
  if (Error error = expectRank("counts", counts, 2))
    return error;
  if (counts[1] < 1)
    return problem("counts must have 1 or more experts");
  return expectShape("counts", counts, {indices[0], counts[1]});
}

/// A token's values `tokens` [groups, tokens, hidden] and their rows
/// `rows` [groups, tokens * k, hidden] by `positions` [groups, tokens, k],
/// weighted by `weights` (positions' shape) where there are.
static Error tokensAndRows(shapes::Shape tokens, llvm::StringRef tokensName,
                           shapes::Shape positions,
                           std::optional<shapes::Shape> weights,
                           shapes::Shape rows, llvm::StringRef rowsName) {
  if (Error error = slotsOf("positions", positions))
    return error;
  if (weights)
    if (Error error = shapes::expectShape("weights", *weights, positions))
      return error;
  if (Error error = shapes::expectRank(tokensName, tokens, 3))
    return error;
  if (Error error = shapes::expectShape(tokensName, tokens.take_front(2),
                                        positions.take_front(2)))
    return error;
  return shapes::expectShape(
      rowsName, rows, {positions[0], positions[1] * positions[2], tokens[2]});
}

/// input [groups, tokens, hidden], positions [groups, tokens, k], weights
/// (positions' shape) -> rows [groups, tokens * k, hidden].
Error shapes::dispatch(Shape input, Shape positions,
                       std::optional<Shape> weights, Shape rows) {
  return tokensAndRows(input, "input", positions, weights, rows, "rows");
}

/// rows [groups, tokens * k, hidden], positions [groups, tokens, k],
/// weights -> result [groups, tokens, hidden].
Error shapes::combine(Shape rows, Shape positions, std::optional<Shape> weights,
                      Shape result) {
  return tokensAndRows(result, "result", positions, weights, rows, "rows");
}

/// rows [groups, tokens * k, hidden], positions, grad [groups, tokens,
/// hidden] -> result (positions' shape).
Error shapes::combineWeightsGrad(Shape rows, Shape positions, Shape grad,
                                 Shape result) {
  if (Error error =
          tokensAndRows(grad, "grad", positions, std::nullopt, rows, "rows"))
    return error;
  return expectShape("result", result, positions);
}

/// The dims of a grouped matmul's rows [groups, rows, k], its weight
/// [experts, k, n] (or [experts, n, k] transposed), counts [groups,
/// experts], and its [groups, rows, n]; the weight and the latter named
/// as the op names them.
static llvm::Expected<shapes::GroupedMatmulDims>
groupedDims(shapes::Shape rows, llvm::StringRef weightName,
            shapes::Shape weight, shapes::Shape counts, llvm::StringRef outName,
            shapes::Shape out, bool transposeWeight) {
  using shapes::expectRank, shapes::expectShape;
  for (auto [what, shape] :
       {std::pair<llvm::StringRef, shapes::Shape>{"rows", rows},
        {weightName, weight},
        {outName, out}})
    if (Error error = expectRank(what, shape, 3))
      return std::move(error);
  shapes::GroupedMatmulDims dims{rows[0], rows[1], weight[0], rows[2], out[2]};
  llvm::SmallVector<int64_t> stored = {dims.experts, dims.k, dims.n};
  if (transposeWeight)
    std::swap(stored[1], stored[2]);
  if (Error error = expectShape(weightName, weight, stored))
    return std::move(error);
  if (Error error = expectShape("counts", counts, {dims.groups, dims.experts}))
    return std::move(error);
  if (Error error = expectShape(outName, out, {dims.groups, dims.rows, dims.n}))
    return std::move(error);
  return dims;
}

llvm::Expected<shapes::GroupedMatmulDims>
shapes::groupedMatmul(Shape rows, Shape weight, Shape counts, Shape result,
                      bool transposeWeight) {
  return groupedDims(rows, "weight", weight, counts, "result", result,
                     transposeWeight);
}

llvm::Expected<shapes::GroupedMatmulDims>
shapes::groupedMatmulWeightGrad(Shape rows, Shape grad, Shape counts,
                                Shape result, bool transposeWeight) {
  return groupedDims(rows, "result", result, counts, "grad", grad,
                     transposeWeight);
}
