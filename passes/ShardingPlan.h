//===- ShardingPlan.h - where an op's operands and results live -*- C++ -*-===//
//
// The one decision twill-propagate-sharding and twill-partition share. Given
// where an op's operands are on one mesh axis, it picks the factors of the
// op's sharding rule that the axis splits ("claims"), and derives where the
// results are and where each operand must be for the op to run on local
// shards. Propagation keeps the results; partitioning inserts a collective
// wherever an operand is somewhere else. Deciding both in one place is what
// keeps the partitioned program consistent with the placements it shows.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_PASSES_SHARDINGPLAN_H
#define TWILL_PASSES_SHARDINGPLAN_H

#include "dialects/twill/ShardingRule.h"
#include "dialects/twill/TwillAttrs.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::twill {

/// One entry per mesh axis.
using Placement = SmallVector<AxisPlacement, 2>;

/// A type's (or value's) placement, or replicate on every one of `axes` axes.
Placement placementOf(Type type, int axes);
inline Placement placementOf(Value value, int axes) {
  return placementOf(value.getType(), axes);
}

/// The job's mesh as the plan sees it: the dp (FSDP) and tp axes by name.
struct MeshPlan {
  FlatSymbolRefAttr mesh;
  SmallVector<StringRef> axisNames;
  SmallVector<int64_t> axisSizes;
  int dp = -1, tp = -1;
  bool sequenceParallel = true;

  /// The module's (single) twill.mesh; fails with a diagnostic without one.
  static FailureOr<MeshPlan> fromModule(ModuleOp module, bool sequenceParallel,
                                        StringRef passName);
  int axes() const { return axisNames.size(); }
};

/// What one op does on one mesh axis.
struct AxisDecision {
  /// The rule's factors the axis splits.
  SmallVector<int> claimed;
  /// Where each result is, and where each operand must be.
  SmallVector<AxisPlacement> results, operands;
  /// A claimed factor the op reduces over the axis itself (vocab-parallel
  /// cross-entropy): it must be told the axis.
  bool selfReduced = false;
};

AxisDecision decideAxis(Operation *op, const ShardingRule &rule,
                        ArrayRef<Placement> operands, int axis,
                        const MeshPlan &plan);

/// Whether `value` is a function argument marked as a model parameter, or
/// such a parameter cast to its compute dtype (stored and gathered like it),
/// or a quantized one dequantized.
bool isParameter(Value value);

/// The shape of one rank's block of a `shape` tensor at `placement`:
/// several axes splitting one dim split it outermost-first from the last
/// mesh axis (tp, then dp), each into blocks of ceil(size / axis size), so
/// gathering dp gives back the tp block.
SmallVector<int64_t> localShape(ArrayRef<int64_t> shape,
                                ArrayRef<AxisPlacement> placement,
                                ArrayRef<int64_t> axisSizes);

} // namespace mlir::twill

#endif // TWILL_PASSES_SHARDINGPLAN_H
