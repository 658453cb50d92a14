//===- TwillOps.h - mesh and forward ops ------------------------*- C++ -*-===//

#ifndef TWILL_DIALECTS_TWILL_TWILLOPS_H
#define TWILL_DIALECTS_TWILL_TWILLOPS_H

#include "dialects/twill/ShardingRule.h"
#include "dialects/twill/TwillAttrs.h"
#include "dialects/twill/TwillDialect.h"
#include "dialects/twill/TwillTraits.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "opmodel/Shapes.h"
#include "support/IgnoreLabel.h"

#include <optional>

#include "dialects/twill/TwillInterfaces.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/twill/TwillTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/twill/TwillOps.h.inc"

namespace mlir::twill {
/// verifyShapeRule(op) of each op whose ODS names a shape rule: its
/// sameElementType values of one element type, then the rule.
#define GET_SHAPE_RULE_VERIFIER_DECLS
#include "dialects/twill/TwillDelegations.inc"

/// The layer an op belongs to, as the frontend (or the pass that made the
/// op for one of the layer's) says in its twill.layer.
inline std::optional<int64_t> layerOf(Operation *op) {
  auto layer = op->getAttrOfType<IntegerAttr>(kLayerAttrName);
  if (!layer)
    return std::nullopt;
  return layer.getInt();
}

/// The layer whose forward or backward an op is part of: its twill.layer,
/// else its twill.grad_layer.
inline std::optional<int64_t> forwardOrBackwardLayerOf(Operation *op) {
  for (StringRef name : {kLayerAttrName, kGradLayerAttrName})
    if (auto layer = op->getAttrOfType<IntegerAttr>(name))
      return layer.getInt();
  return std::nullopt;
}

/// Marks every op a builder inserts with `layer` (twill.layer) and
/// `gradLayer` (twill.grad_layer), where set: what a pass makes for a
/// layer's op belongs to the layer's forward or backward as the op does.
struct LayerMarker : public OpBuilder::Listener {
  Attribute layer, gradLayer;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (layer)
      op->setAttr(kLayerAttrName, layer);
    if (gradLayer)
      op->setAttr(kGradLayerAttrName, gradLayer);
  }
};

/// A quantized weight formed in the compute dtype (twill.dequantize_nf4,
/// twill.dequantize_fp8): its first operand is the parameter it reads.
inline bool isDequantize(Operation *op) {
  return op->hasTrait<OpTrait::twill::Dequantize>();
}

/// The train step's loss op, the end of its forward: what follows is the
/// backward. DPO's dpo_loss (after the policy's and the reference's sums),
/// else the first cross_entropy or linear_cross_entropy. Null if there is
/// none.
inline Operation *forwardLoss(Block &body) {
  Operation *first = nullptr;
  for (Operation &op : body) {
    if (isa<DpoLossOp>(op))
      return &op;
    if (!first && isa<CrossEntropyOp, LinearCrossEntropyOp>(op))
      first = &op;
  }
  return first;
}

/// The tensor a collective returns: its result's type, or for a start op
/// the tensor its wait yields.
RankedTensorType collectiveResultType(Operation *op);

/// The kind of collective `op` is or starts (its ODS's `collective`), none
/// for other ops. Generated (TwillDelegations.inc).
std::optional<::twill::shapes::Collective> collectiveKindOf(Operation *op);

/// Whether some op starts `op` (a collective or a copy to or from host
/// memory that twill-schedule splits into a start and a wait). Generated.
bool hasStartOp(Operation *op);

/// Whether `op` starts a collective or a copy to or from host memory (its
/// one result is a !twill.pending).
inline bool isAsyncStart(Operation *op) {
  return op->getNumResults() == 1 &&
         isa<PendingType>(op->getResult(0).getType());
}

/// Whether `value` lives in host memory: an offload's result, the handle of
/// one in flight, or what its wait yields. Only reloads read it.
inline bool inHostMemory(Value value) {
  if (auto wait = value.getDefiningOp<WaitOp>())
    value = wait.getHandle();
  return value.getDefiningOp<OffloadOp>() ||
         value.getDefiningOp<OffloadStartOp>();
}

/// The rule planned memory keeps for collectives and copies in flight, in
/// every block under `planned` (a module twill-plan-memory has planned:
/// twill.arena_bytes): nothing written between a start and its wait lies
/// over the start's input, read until the wait, or its result, written
/// until then. One sweep per block, so that a program with many
/// collectives in flight at once verifies in time linear in its size.
LogicalResult verifyFlightsInPlannedMemory(Operation *planned);

/// Fails, on `op`, unless only reloads read `host` (a value in host memory).
LogicalResult verifyOnlyReloadsRead(Operation *op, Value host);

/// A value's bytes in twill-plan-memory's arena: its tensor's, rounded up
/// to the 64 bytes every value is aligned to.
inline int64_t arenaBytesOf(RankedTensorType type) {
  constexpr int64_t kAlignment = 64;
  int64_t bytes =
      type.getNumElements() * int64_t(type.getElementTypeBitWidth() / 8);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}
} // namespace mlir::twill

#endif // TWILL_DIALECTS_TWILL_TWILLOPS_H
