//===- ShardingRule.h - einsum-like factor rules of ops ---------*- C++ -*-===//
//
// An op's sharding rule names the independent index spaces ("factors") of
// its computation and says which dims of each operand and result they make
// up, Shardy style. matmul is `([i, j, k], [l, k]) -> ([i, j, l])` with `k` a
// reduction factor: sharding `k` leaves each device a partial sum, so the
// result becomes partial<sum>. A dim may be several factors (reshape merges
// and splits them, major first); a factor marked replicated must never be
// sharded (rms_norm needs whole rows). Propagation and partitioning read
// only these rules, so they stay generic over the ops.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_DIALECTS_TWILL_SHARDINGRULE_H
#define TWILL_DIALECTS_TWILL_SHARDINGRULE_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::twill {

struct ShardingRule {
  /// The factors a dim is made of, major first (empty: a size-1 dim).
  using Dim = SmallVector<int, 2>;
  using Tensor = SmallVector<Dim, 4>;

  SmallVector<int64_t> factorSizes;
  SmallVector<Tensor> operands, results;
  /// Tensors a fused op forms inside (linear_cross_entropy's logits): their
  /// factors constrain one another as an operand's would.
  SmallVector<Tensor> internals;
  SmallVector<int> reductions, replicated;
  /// Factors the op may shard by reducing across the axis itself, results
  /// staying whole (the vocab of a vocab-parallel cross-entropy).
  SmallVector<int> selfReduced;
  /// Factors an axis may split only into as many blocks as their size (a
  /// blocked split's blocks: one per rank, or none).
  SmallVector<int> exact;
  /// Factors an axis may split only where it divides their size (a
  /// quantized weight's blocks: none is cut).
  SmallVector<int> divisible;

  /// Adds a factor of `size`; returns its index.
  int addFactor(int64_t size) {
    factorSizes.push_back(size);
    return factorSizes.size() - 1;
  }
  /// One fresh factor per dim of `shape`.
  Tensor freshFactors(ArrayRef<int64_t> shape);
  /// A tensor whose dims are the single factors `factors`.
  static Tensor tensor(ArrayRef<int> factors);

  bool isReduction(int factor) const {
    return llvm::is_contained(reductions, factor);
  }
  bool isReplicated(int factor) const {
    return llvm::is_contained(replicated, factor);
  }
  bool isSelfReduced(int factor) const {
    return llvm::is_contained(selfReduced, factor);
  }
  /// Whether an axis of `ranks` may split `factor`.
  bool splitsInto(int factor, int64_t ranks) const {
    return !isReplicated(factor) &&
           (!llvm::is_contained(exact, factor) ||
            factorSizes[factor] == ranks) &&
           (!llvm::is_contained(divisible, factor) ||
            factorSizes[factor] % ranks == 0);
  }

  /// `([i, j, k], [l, k]) -> ([i, j, l]) {i=2, j=8, k=64, l=96}
  /// reduction={k}`; a merged dim prints as `(i j)`, internal tensors as
  /// `internal=([i, j, l])`, exact factors as `exact={i}`.
  std::string str() const;
};

// The rules of several ops each, which an op's ODS names (`shardingRule`).
/// Every operand and result of one shape share one factor per dim.
ShardingRule elementwiseRule(Operation *op);
/// Scalar ops: nothing to shard.
ShardingRule scalarRule(Operation *op);
/// Ops by rows: every operand and result has the same leading dims (the
/// rows, one factor each, shared) and a last dim of its own (a factor each,
/// kept whole: a row is computed from whole rows).
ShardingRule rowsRule(Operation *op);
/// Ops over groups: every operand and result has the same first dim (the
/// groups, one factor, shared) and other dims of its own, kept whole (a
/// group's tokens are sorted among themselves: mixture-of-experts
/// dispatch and combine).
ShardingRule groupsRule(Operation *op);
/// Ops of small whole values (the load-balancing loss of a router's
/// [experts] sums): every dim a factor of its own, never sharded.
ShardingRule wholeRule(Operation *op);

} // namespace mlir::twill

#endif // TWILL_DIALECTS_TWILL_SHARDINGRULE_H
