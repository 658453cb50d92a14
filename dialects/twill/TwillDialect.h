//===- TwillDialect.h - the twill dialect -----------------------*- C++ -*-===//

#ifndef TWILL_DIALECTS_TWILL_TWILLDIALECT_H
#define TWILL_DIALECTS_TWILL_TWILLDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/twill/TwillDialect.h.inc"

namespace mlir::twill {
/// Function argument attribute: the parameter's Hugging Face name.
inline constexpr llvm::StringLiteral kParamAttrName = "twill.param";
/// Unit function argument attribute: a parameter the optimizer updates.
inline constexpr llvm::StringLiteral kTrainableAttrName = "twill.trainable";
/// Unit function argument attribute beside twill.trainable: a parameter
/// AdamW does not decay (a norm's weight, a bias: the Hugging Face
/// Trainer's rule).
inline constexpr llvm::StringLiteral kNoWeightDecayAttrName =
    "twill.no_weight_decay";
/// Function argument attribute: a per-step input (tokens, labels, ...).
inline constexpr llvm::StringLiteral kInputAttrName = "twill.input";
/// Function argument attribute: program state kept between steps
/// (optimizer moments, gradient sums, the step counter), zero at first.
inline constexpr llvm::StringLiteral kStateAttrName = "twill.state";
/// Function argument attribute beside twill.state: what the state is
/// (#twill.state_role), which the runtime and the cost report know it by.
inline constexpr llvm::StringLiteral kStateRoleAttrName = "twill.state_role";
/// Function result attribute: what the result is ("loss_sum",
/// "token_count", "<parameter>.grad"); a result named after a parameter or
/// a state is its new value.
inline constexpr llvm::StringLiteral kOutputAttrName = "twill.output";
/// Function argument attribute: how tensor parallelism splits the
/// parameter (#twill.tp), stated by the frontend; states carry their
/// parameter's.
inline constexpr llvm::StringLiteral kTensorParallelAttrName = "twill.tp";
/// Function argument attributes of a parameter, stated by the frontend:
/// how it starts where no checkpoint gives it (#twill.init), and for an
/// adapter's, which part it is of what (#twill.adapter). The runtime knows
/// a parameter by these alone.
inline constexpr llvm::StringLiteral kInitAttrName = "twill.init";
inline constexpr llvm::StringLiteral kAdapterAttrName = "twill.adapter";
/// Function argument attribute of a parameter that is some rows of a
/// checkpoint's tensor (#twill.stored_rows), stated by the frontend.
inline constexpr llvm::StringLiteral kStoredAttrName = "twill.stored";
/// Function argument attribute of a parameter that a checkpoint may hold
/// as several tensors, their rows end to end (a mixture of experts'
/// per-expert tensors): an array of their names, stated by the frontend.
inline constexpr llvm::StringLiteral kStackedAttrName = "twill.stacked";
/// Function argument attribute of a parameter that holds part of a
/// quantized frozen weight (#twill.quantized), stated by the frontend.
inline constexpr llvm::StringLiteral kQuantizedAttrName = "twill.quantized";
/// Function argument and result attribute: what a per-step input or an
/// output is (#twill.role), which the runtime finds it by.
inline constexpr llvm::StringLiteral kRoleAttrName = "twill.role";
/// Function attribute: what an entry point is for (#twill.entry).
inline constexpr llvm::StringLiteral kEntryAttrName = "twill.entry";
/// Op and parameter attribute: the index of the model layer (a decoder
/// layer) it belongs to, stated by the frontend; activation checkpointing
/// recomputes by layer.
inline constexpr llvm::StringLiteral kLayerAttrName = "twill.layer";
/// Op attribute set by twill-autodiff on the ops of a layer op's gradient:
/// the layer whose backward they are. Apart from twill.layer, which marks
/// the forward that checkpointing recomputes and the scheduler prefetches
/// by; the Executable carries either as the instruction's layer.
inline constexpr llvm::StringLiteral kGradLayerAttrName = "twill.grad_layer";
/// Function argument attribute set by twill-partition: the argument's whole
/// type with its placement (the argument itself is the local block).
inline constexpr llvm::StringLiteral kGlobalAttrName = "twill.global";
/// Op attribute: the runtime reads this op's results after a run (the
/// logits, for evaluation). twill-partition records their whole types and
/// placements in kGlobalResultsAttrName, so the runtime can put them
/// together from every rank's block.
inline constexpr llvm::StringLiteral kHostReadAttrName = "twill.host_read";
inline constexpr llvm::StringLiteral kGlobalResultsAttrName =
    "twill.global_results";
/// twill-plan-memory's: per result of an op, its offset in the arena (-1:
/// memory of its own; kInPlaceOffset: the buffer of the parameter or state
/// it is the new value of, written in place); on the module, the arena's
/// size in bytes.
inline constexpr llvm::StringLiteral kArenaOffsetsAttrName =
    "twill.arena_offsets";
inline constexpr int64_t kInPlaceOffset = -2;
inline constexpr llvm::StringLiteral kArenaBytesAttrName = "twill.arena_bytes";
/// On the module: the bytes of the host arena twill-plan-memory places the
/// offloaded values in (an offload's offsets are in it).
inline constexpr llvm::StringLiteral kHostArenaBytesAttrName =
    "twill.host_arena_bytes";
} // namespace mlir::twill

#endif // TWILL_DIALECTS_TWILL_TWILLDIALECT_H
