//===- DecoderTracer.h - the frontend's tracer of a decoder -----*- C++ -*-===//
//
// The state and steps of tracing one decoder model into the twill dialect
// (buildDecoderModule, DecoderBuilder.h): its layers and blocks in
// DecoderBuilder.cpp, its weights as parameters (base weights, quantized
// or not, biases, LoRA and DoRA adapters) in DecoderWeights.cpp. Internal
// to frontend/.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_FRONTEND_DECODERTRACER_H
#define TWILL_FRONTEND_DECODERTRACER_H

#include "frontend/DecoderBuilder.h"
#include "frontend/config/ModelFamily.h"
#include "proto/TrainRows.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace mlir::twill::decoder {

using ::twill::JobConfig;
using ::twill::ModelConfig;

/// How tensor parallelism splits a weight (#twill.tp): what the model's
/// author knows, stated here so that the sharding passes need no names.
struct Split {
  TensorParallelStyle style;
  int64_t heads = 0;  // the attention heads the split dim holds, if any
  int64_t blocks = 0; // the quantized blocks it holds, if any
};

/// The deviation of a base weight drawn at random (checkpoint.random_base):
/// transformers' initializer_range.
constexpr double kBaseWeightStd = 0.02;

/// What a parameter is beyond its shape: how it starts where no checkpoint
/// gives it, and, for an adapter's, which part of which weight's adapter.
struct Role {
  InitKind init;
  std::optional<AdapterPart> part; // an adapter's
  /// The weight an adapter's adapts, or a quantized part's holds part of.
  std::string of;
  std::string tied; // the parameter holding `of`'s values, if another
  std::optional<QuantizedPart> quantized; // a quantized weight's part
  /// A quantized part's weight is a mixture of experts' [experts, rows /
  /// experts, columns] (0: a matrix).
  int64_t experts = 0;
  /// Not decayed by AdamW where trained: a norm's weight or a bias, as the
  /// Hugging Face Trainer exempts them.
  bool noWeightDecay = false;
};

/// bitsandbytes' NF4 as QLoRA stores a base: blocks of 64 values, their
/// scales quantized again in blocks of 256.
constexpr int64_t kNf4BlockSize = 64, kNf4NestedBlockSize = 256;

/// A block of rows of a module's weight, one projection of a fused module
/// (q, k or v of Phi-3's qkv_proj), and how tensor parallelism splits it.
struct RowBlock {
  int64_t rows;
  Split split;
};

/// Where the checkpoint holds a parameter that is a block of rows of one of
/// its tensors.
struct StoredRows {
  std::string tensor;
  int64_t firstRow, tensorRows;
};

/// Marks every op a builder inserts with the decoder layer being traced.
struct LayerMarker : public OpBuilder::Listener {
  std::optional<int64_t> layer;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (layer)
      op->setAttr(
          kLayerAttrName,
          IntegerAttr::get(IntegerType::get(op->getContext(), 64), *layer));
  }
};

/// Traces one model. Parameters become function arguments as they are first
/// used, so the signature lists them in model order. Each parameter states
/// how tensor parallelism splits it, and each op and parameter of a decoder
/// layer its layer.
class DecoderTracer {
public:
  DecoderTracer(MLIRContext &context, const JobConfig &job,
                const ::twill::TraceOptions &options)
      : job(job), model(job.model()),
        family(*::twill::findModelFamily(job.model().model_type())),
        options(options), builder(&context), batch(job.train().batch_size()),
        seq(::twill::rowLength(job.train())) {
    builder.setListener(&layerMarker);
  }

  OwningOpRef<ModuleOp> trace();

private:
  /// Starts the entry point `name` (`role`) at the end of `module`: a
  /// function of the batch's inputs (and LoRA dropout's), whose parameters
  /// are added as they are first used. Returns its tokens.
  Value beginEntry(ModuleOp module, StringRef name, EntryRole role);
  /// Ends it returning `results`, each named after its role.
  void endEntry(ArrayRef<std::pair<Value, ValueRole>> results);
  /// The embedding table, and the lm_head (tied or not to it).
  Value embedTableParam();
  Value lmHeadParam(Value embedTable);

  /// A location naming the module (Hugging Face path) an op belongs to.
  Location loc(const Twine &name) {
    return NameLoc::get(builder.getStringAttr(name));
  }

  RankedTensorType floatType(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getF32Type());
  }

  /// Appends a parameter argument named `name`, split as `split`, that is
  /// what `role` says (and `stored`'s rows of a checkpoint tensor; or, in a
  /// checkpoint without `name`, the rows of the tensors `stacked`, end to
  /// end).
  Value param(const Twine &name, ArrayRef<int64_t> shape, bool trainable,
              Split split, const Role &role,
              const std::optional<StoredRows> &stored = std::nullopt,
              ArrayRef<std::string> stacked = {});
  /// The parameter that is `blocks`[index] of the rows of tensor `tensor`
  /// ([rows, ...`rest`]): the tensor itself where it is one block, else
  /// named after its rows ("<tensor>[first:end]") and stored in them.
  Value blockParam(const std::string &tensor, ArrayRef<RowBlock> blocks,
                   size_t index, ArrayRef<int64_t> rest, bool trainable,
                   Split split, const Role &role);
  /// A base weight's role: drawn at random where no checkpoint gives it.
  static Role baseWeight() { return {InitKind::Normal, std::nullopt, {}}; }
  /// A norm's weight's or a bias's role: starting as `init`, and not
  /// decayed where trained.
  static Role undecayed(InitKind init) {
    Role role{init, std::nullopt, {}};
    role.noWeightDecay = true;
    return role;
  }
  /// The frozen `[rows, columns]` weight `name` stored as
  /// quantization.base says (NF4 or FP8), split as `split`: its parts as
  /// parameters, dequantized where it is read. A mixture of experts'
  /// weight is quantized as its rows: `experts` of them, read from the
  /// Hub's per-expert tensors `stacked` where the checkpoint has no `name`.
  Value quantizedWeight(const std::string &name, int64_t rows, int64_t columns,
                        Split split, Location at, int64_t experts = 0,
                        ArrayRef<std::string> stacked = {});
  /// A sparse layer's frozen base `[experts, out, in]` weight `name`
  /// (stored fused, or as the Hub's per-expert tensors `stacked`), whole
  /// or, with a quantized base, dequantized from its rows.
  Value expertsWeight(const std::string &name, ArrayRef<int64_t> shape,
                      ArrayRef<std::string> stacked, Location at);
  /// Appends the input argument that is `role`, named after it: a [batch,
  /// seq] one (tokens, labels, positions, segments, token_index), or one of
  /// `shape`.
  Value input(ValueRole role, Type elementType);
  Value input(ValueRole role, Type elementType, ArrayRef<int64_t> shape);

  bool isLoraTarget(StringRef module) const {
    return !adaptersOff && job.has_lora() &&
           llvm::is_contained(job.lora().target_modules(), module.str());
  }
  /// Whether lora.target_parameters adapts the parameter named `name`.
  bool isLoraTargetParameter(StringRef name) const {
    return !adaptersOff && job.has_lora() &&
           ::twill::targetsParameter(job.lora(), name);
  }
  bool baseTrainable() const { return job.has_full_finetune(); }

  /// A new `[out, in]` weight named `path`.weight applied by linearWith,
  /// plus `path`.bias where the model has one (after the adapter's sum, as
  /// PEFT's DoRA leaves the bias out of what it scales).
  Value linear(Value x, const std::string &path, StringRef target, int64_t in,
               int64_t out, Split split) {
    return linearBlocks(x, path, target, in, {{out, split}}).front();
  }
  /// The same of a fused module, whose `path`.weight stacks the rows of
  /// several projections (`blocks`): one result per block, each block of
  /// the weight (and of B, the magnitudes and the bias) a parameter of its
  /// own, split as its projection is.
  SmallVector<Value> linearBlocks(Value x, const std::string &path,
                                  StringRef target, int64_t in,
                                  ArrayRef<RowBlock> blocks);
  /// `x W^T` (`baseInput` W^T, where given) for each block W of
  /// `weights`, plus PEFT's `(alpha / rank) *
  /// (dropout(x) A^T) B^T` where `adapted`: one A (named after
  /// `path`), B's rows split as the weight's (`blocks`), each block's
  /// split as its weight's: the rank never splits.
  SmallVector<Value> linearWith(Value x, ArrayRef<Value> weights,
                                const std::string &path, bool adapted,
                                ArrayRef<RowBlock> blocks,
                                Value baseInput = {});
  /// Each of `rows` ([groups, rows, in]) times its expert's weight of
  /// `weight` ([experts, out, in], named `name`) as `counts` assign rows
  /// to experts, plus PEFT's (alpha / rank) (x A_e^T) B_e^T where
  /// lora.target_parameters names it: A [rank x experts, in] and B [out,
  /// rank x experts] of PEFT's ParamWrapper, named as PEFT nests its
  /// wrappers (`nesting` base_layers deep).
  Value expertsProduct(Value rows, Value counts, Value weight,
                       const std::string &name, int64_t nesting);
  /// What an FP8 base's products read of `x`: `x` rounded to e4m3 in
  /// blocks of 128 where quantization.fp8_inputs asks it, else `x`.
  Value fp8BaseInput(Value x, Location at);
  /// `x W^T` over the last dim of `x`.
  Value matmulTransposed(Value x, Value weight, Location at);

  /// RMSNorm over the last dim of `x`, of `size` values (a norm of the
  /// hidden state, or of each head); Gemma's scales by (1 + w).
  Value rmsNorm(Value x, const Twine &path, int64_t size);
  /// Rotary embedding of `[batch, seq, heads, head_dim]` heads, as the
  /// layer being traced has it (Gemma 3's sliding layers: a base of their
  /// own, unscaled).
  Value rope(Value heads, const std::string &path);
  /// Whether the layer being traced attends through a sliding window (of
  /// any length).
  bool slidingLayer() const {
    return ::twill::slidingWindowOf(model, tracedLayer).has_value();
  }
  Value decoderLayer(Value hidden, int64_t layer);
  /// The final norm's output of `tokens` through the embedding and every
  /// decoder layer (with adapters, unless adaptersOff).
  Value hiddenStates(Value tokens, Value embedTable);
  /// The logits of the final norm's output `h` through `lmHead` (and its
  /// adapter, unless adaptersOff), capped where the model caps them.
  Value logitsOf(Value h, Value lmHead);
  /// What the loss sums of `h`'s logits (`logits`, or formed a tile at a
  /// time from `lmHead` when not adapted): the cross-entropy and the
  /// labelled positions, scalars, or with `sequences` (DPO) per row and
  /// sequence, [rows, 2].
  SmallVector<Value, 2> lossSums(Value h, Value logits, Value lmHead,
                                 Value labels, Value sequences);
  /// A sequence's log-probability from its summed cross-entropy.
  Value logProbabilities(Value crossEntropy);
  /// The `[rows, 2]` log-probabilities of each row's chosen and rejected
  /// sequences under the decoder traced again (`lmHead` traced after the
  /// layers where null): @reference's, the model as training starts (a
  /// starting adapter, TRL's reference, in it).
  Value sequenceLogProbabilities(Value tokens, Value embedTable, Value lmHead);
  /// The same with every adapter off: dpo.reference ADAPTER_OFF's.
  Value referenceLogProbabilities(Value tokens, Value embedTable, Value lmHead);
  /// DPO's loss, pairs and metric sums: the policy's per-sequence
  /// log-probabilities (from `sums`, `counts` of lossSums) against the
  /// reference's.
  SmallVector<Value, 3> dpoLoss(ArrayRef<Value> sums, Value reference);
  Value attention(Value normed, const std::string &prefix);
  Value mlp(Value normed, const std::string &prefix);
  /// The MLP of some positions: gate and up, their gated activation
  /// (SwiGLU, or Gemma's GeGLU), down.
  Value mlpTile(Value normed, const std::string &prefix);
  /// That MLP of `inner` named `path` (a dense layer's, or Qwen2-MoE's
  /// shared expert).
  Value gatedMlp(Value normed, const std::string &path, int64_t inner);
  /// A sparse layer's MLP on `normed` [batch, tokens, hidden]: a router
  /// and its experts (ModelFamily::experts), each batch row's tokens
  /// sorted by expert among themselves.
  Value expertsTile(Value normed, const std::string &prefix);
  /// Adds what a router sends each expert (expert_load of its `logits` and
  /// choice `indices`, the tokens tracedMask keeps) to routerLoad.
  void addRouterLoad(Value logits, Value indices, Location at);
  /// `lossSum`, plus with model.output_router_logits the routers'
  /// load-balancing loss of routerLoad weighted to be router_aux_loss_coef
  /// times it in the step's mean loss (times the step's tokens); and that
  /// loss (null without).
  std::pair<Value, Value> withLoadBalancingLoss(Value lossSum);

  /// `x` ([batch, seq, ...]) cut along the sequence into tiles of about
  /// `tile` positions, or `x` alone when one tile holds it all. Under
  /// sequence parallelism the tiles are blocked (twill.split's `blocks`):
  /// each tp rank cuts its own block of the sequence, ceil(tile / tp)
  /// positions per tile, so a tile is gathered and scattered on its own.
  SmallVector<Value> sequenceTiles(Value x, int64_t tile, Location at);
  /// A [batch, seq] input (the token index, the attention mask) cut as
  /// sequenceTiles cuts the positions (null values where it is null).
  SmallVector<Value> inputTiles(Value input, int64_t tile, Location at) {
    if (!input)
      return SmallVector<Value>(tileSizes(tile).size());
    return sequenceTiles(input, tile, at);
  }
  /// The positions of each tile sequenceTiles cuts: {seq} for one.
  SmallVector<int64_t> tileSizes(int64_t tile) const;
  /// The inverse: `tiles` of `sequenceTiles`' layout put together.
  Value joinTiles(ArrayRef<Value> tiles, Location at);
  int64_t sequenceBlocks() const {
    return job.parallel().sequence_parallel() ? job.parallel().tp() : 1;
  }
  /// The tiles of the vocab-parallel ends of the model, the embedding's
  /// lookup and the loss: parallel.loss_tile_tokens positions under
  /// sequence parallelism, where each tile is scattered from (gathered for)
  /// the sequence shards on its own; else none (the loss forms its logits a
  /// tile at a time by itself).
  int64_t vocabEndTile() const {
    return sequenceBlocks() > 1 ? job.parallel().loss_tile_tokens() : 0;
  }

  const JobConfig &job;
  const ModelConfig &model;
  const ::twill::ModelFamily &family; // a validated job's
  const ::twill::TraceOptions &options;
  OpBuilder builder;
  LayerMarker layerMarker;
  int64_t batch, seq;

  func::FuncOp entry; // the entry point being traced
  Block *body = nullptr;
  unsigned numParams = 0;
  SmallVector<DictionaryAttr> paramAttrs;
  llvm::StringMap<Value> params;                 // by Hugging Face name
  llvm::DenseMap<Value, std::string> paramNames; // the names they have
  Value labels, positions, segments;
  SmallVector<ValueRole> inputRoles; // in argument order
  /// With LoRA dropout: every position's index in the micro-batch (row x
  /// seq_len + position), the micro-batch's number in the run, and the
  /// index of the positions being traced (the whole, or a tile's).
  Value tokenIndex, microBatch, tracedTokens;
  /// With the routers' load-balancing loss: the attention mask (1 for an
  /// example's token), its tile being traced, the labelled tokens of the
  /// step, and the sums of expert_load over the routers traced.
  Value attentionMask, tracedMask, stepTokens;
  struct RouterLoad {
    Value probabilities, counts, tokens;
  } routerLoad;
  /// Tracing DPO's reference model: every adapter off, its layers numbered
  /// after the policy's.
  bool adaptersOff = false;
  /// The model layer being traced.
  int64_t tracedLayer = 0;
  /// Inputs of an FP8 base's products rounded to e4m3 (fp8_inputs
  /// E4M3_BLOCKS), once for every product that reads them.
  llvm::DenseMap<Value, Value> fp8Rounded;
};

} // namespace mlir::twill::decoder

#endif // TWILL_FRONTEND_DECODERTRACER_H
