//===- Shapes.h - the shape rule of each op, written once -------*- C++ -*-===//
//
// What shapes an op's operands and results must have, over plain shapes:
// the dialect's verifiers check the IR's types by these rules, and the
// runtime's decoders (runtime/backend/shapes/) check the Executable's
// buffers by them before a kernel touches memory, so the compiler and the
// runtime cannot disagree on an op's shapes, and say the same when one is
// wrong. Element types are each side's own (the runtime's follow what its
// kernels compute in). MLIR-free: the runtime links it too.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_OPMODEL_SHAPES_H
#define TWILL_OPMODEL_SHAPES_H

#include "support/BlockedPieces.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace twill::shapes {

using Shape = llvm::ArrayRef<int64_t>;

/// "[2, 4, 8]", for messages.
std::string text(Shape shape);

/// Fails with "<what> must have shape [..], got [..]" unless they match.
llvm::Error expectShape(llvm::StringRef what, Shape actual, Shape expected);
/// Fails with "<what> must have rank N, got M" unless it has.
llvm::Error expectRank(llvm::StringRef what, Shape shape, int64_t rank);

// The rules the ops' ODS names (`shapeRule`), one Shape an operand and then
// a result, declared from it; Shapes.cpp says what each checks.
#include "opmodel/ShapeRules.inc"

// The rules that take more than shapes, which the ops' verifiers and
// decoders call themselves.

/// transpose: result dim i is input dim permutation[i], a permutation of
/// every dim.
llvm::Error transpose(Shape input, llvm::ArrayRef<int64_t> permutation,
                      Shape result);
/// split and concat: `whole` cut along `dim` into `pieces` laid out in
/// `blocks` blocks (support/BlockedPieces.h), every other dim equal: the
/// runs of that layout.
llvm::Expected<std::vector<PieceRun>>
pieces(Shape whole, llvm::ArrayRef<Shape> pieces, int64_t dim, int64_t blocks);

/// dropout: input [batch, seq, features], tokens [batch, seq] -> like
/// input.
llvm::Error dropout(Shape input, Shape tokens, Shape result);

/// dequantize: codes [rows, columns / 2] (two 4-bit codes a byte), absmax
/// [rows, columns / blockSize] (a block's scale code), nested
/// [ceil(wholeRows * wholeColumns / blockSize / nestedBlockSize)] (the
/// whole weight's), offset [] -> [rows, columns]: the whole [wholeRows,
/// wholeColumns] weight, or a block of its rows, or of its columns that
/// divides them into whole blocks.
llvm::Error dequantize(Shape codes, Shape absmax, Shape nested, Shape offset,
                       Shape result, int64_t blockSize, int64_t nestedBlockSize,
                       int64_t wholeRows, int64_t wholeColumns);

/// cross_entropy: logits [..., vocab], labels [...]; its gradient's result
/// like the logits.
llvm::Error crossEntropy(Shape logits, Shape labels);
llvm::Error crossEntropyGrad(Shape logits, Shape labels, Shape result);
/// What cross_entropy sums into (its loss and count; its gradient's grad):
/// a scalar, or with `sequences` (labels' shape) [labels' rows...,
/// `sequenceCount`].
llvm::Error lossSums(Shape labels, std::optional<Shape> sequences,
                     int64_t sequenceCount, Shape sums);

/// dpo_loss: policy, reference and tokens [pairs, 2] -> metrics [6] (and
/// 0-d loss and pairs); its gradient's result like the policy.
llvm::Error dpoLoss(Shape policy, Shape reference, Shape tokens, Shape metrics);
llvm::Error dpoLossGrad(Shape policy, Shape reference, Shape tokens,
                        Shape result);

/// adamw: param, grad, exp_avg, exp_avg_sq and the three new values, all
/// of one shape.
llvm::Error adamw(Shape param, Shape grad, Shape expAvg, Shape expAvgSq,
                  Shape newParam, Shape newExpAvg, Shape newExpAvgSq);

/// The collectives, blocking or started: what moves over the `ranks` ranks
/// of a mesh axis.
enum class Collective {
  AllGather,
  ReduceScatter,
  LocalSlice,
  AllReduce,
  AllToAll,
};
/// The dims a collective names are its input's: `dim` (all_gather,
/// reduce_scatter, local_slice; all_to_all's concat_dim) and all_to_all's
/// `splitDim`.
llvm::Error collectiveDims(Collective kind, Shape input, int64_t dim,
                           int64_t splitDim);
/// collectiveDims, and the result's shape over `ranks` ranks of `axis`:
/// all_reduce's the input's; reduce_scatter's and local_slice's `dim` one
/// block of ceil(whole / ranks); all_gather's `ranks` such blocks (a whole
/// of any size they cover: the last block padded); all_to_all's split dim
/// divided by `ranks` (evenly) and its concat dim multiplied.
llvm::Error collective(Collective kind, Shape input, Shape result, int64_t dim,
                       int64_t splitDim, int64_t ranks, llvm::StringRef axis);

/// attention: query [batch, seq, heads, headDim], key and value [batch,
/// seq, kvHeads, headDim], segments (if any: none is empty) [batch, seq]
/// -> like query, and the log-sum-exp [batch, heads, seq]. The query heads
/// are a multiple of the key/value heads; with `queryHeadsSharded` (the
/// query heads one rank's block, the key/value heads all of them) either
/// count may divide the other.
llvm::Error attention(Shape query, Shape key, Shape value,
                      std::optional<Shape> segments, Shape result,
                      Shape logSumExp, bool queryHeadsSharded);
/// attention_grad: query, key, value, output, log-sum-exp, grad [,
/// segments] -> the gradients of query, key and value.
llvm::Error attentionGrad(Shape query, Shape key, Shape value, Shape output,
                          Shape logSumExp, Shape grad,
                          std::optional<Shape> segments, Shape queryGrad,
                          Shape keyGrad, Shape valueGrad,
                          bool queryHeadsSharded);

/// linear_cross_entropy's operands: input [..., hidden], weight [vocab,
/// hidden], labels [...] and a tile [rows, vocab] of at least one row.
llvm::Error tiledLogits(Shape input, Shape weight, Shape labels, Shape tile);
/// linear_cross_entropy_grad's: the same, and the gradient of the input or
/// (`wrtWeight`) of the weight.
llvm::Error tiledLogitsGrad(Shape input, Shape weight, Shape labels,
                            Shape tile, Shape result, bool wrtWeight);

/// A matmul's dims: `batch` products of op(lhs) [m, k] and op(rhs) [k, n].
/// rhs has no batch dims (one matrix for every product) or lhs's; a matrix
/// result from batched operands sums over the batch (with transpose_lhs
/// and without transpose_rhs: a weight's gradient), which then counts in
/// k and no longer in batch.
struct MatmulDims {
  int64_t batch, m, n, k;
  bool rhsBatched;
};
/// matmul: lhs, rhs -> result. An addend, of the result's type, each side
/// checks with its types (the verifier, MatmulShape.h).
llvm::Expected<MatmulDims> matmul(Shape lhs, Shape rhs, Shape result,
                                  bool transposeLhs, bool transposeRhs);

/// A grouped matmul's dims: `groups` groups of `rows` rows [., k], and
/// `experts` weights [k, n] (stored [n, k] where transposed).
struct GroupedMatmulDims {
  int64_t groups, rows, experts, k, n;
};
/// grouped_matmul: rows [groups, rows, k], weight, counts [groups, experts]
/// -> result [groups, rows, n].
llvm::Expected<GroupedMatmulDims> groupedMatmul(Shape rows, Shape weight,
                                                Shape counts, Shape result,
                                                bool transposeWeight);
/// grouped_matmul_weight_grad: rows, grad [groups, rows, n], counts ->
/// result (the weight's shape).
llvm::Expected<GroupedMatmulDims>
groupedMatmulWeightGrad(Shape rows, Shape grad, Shape counts, Shape result,
                        bool transposeWeight);

} // namespace twill::shapes

#endif // TWILL_OPMODEL_SHAPES_H
