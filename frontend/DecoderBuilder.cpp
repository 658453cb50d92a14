//===- DecoderBuilder.cpp - trace a decoder + LoRA into twill IR ----------===//

#include "frontend/DecoderBuilder.h"
#include "frontend/config/ModelFamily.h"

#include "dialects/twill/TwillEntryPoints.h"
#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "support/BlockedPieces.h"
#include "support/Dropout.h"
#include "support/IgnoreLabel.h"
#include "support/LoraScale.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

#include <cmath>

using namespace mlir;
using namespace mlir::twill;
using ::twill::JobConfig;
using ::twill::ModelConfig;
using ::twill::RopeScaling;

namespace {

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
        seq(job.train().seq_len()) {
    builder.setListener(&layerMarker);
  }

  OwningOpRef<ModuleOp> trace();

private:
  /// A location naming the module (Hugging Face path) an op belongs to.
  Location loc(const Twine &name) {
    return NameLoc::get(builder.getStringAttr(name));
  }

  RankedTensorType floatType(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getF32Type());
  }

  /// Appends a parameter argument named `name`, split as `split`, that is
  /// what `role` says (and `stored`'s rows of a checkpoint tensor).
  Value param(const Twine &name, ArrayRef<int64_t> shape, bool trainable,
              Split split, const Role &role,
              const std::optional<StoredRows> &stored = std::nullopt);
  /// The parameter that is `blocks`[index] of the rows of tensor `tensor`
  /// ([rows, ...`rest`]): the tensor itself where it is one block, else
  /// named after its rows ("<tensor>[first:end]") and stored in them.
  Value blockParam(const std::string &tensor, ArrayRef<RowBlock> blocks,
                   size_t index, ArrayRef<int64_t> rest, bool trainable,
                   Split split, const Role &role);
  /// A base weight's role: drawn at random where no checkpoint gives it.
  static Role baseWeight() { return {InitKind::Normal, std::nullopt, {}}; }
  /// The frozen `[rows, columns]` weight `name` stored as
  /// quantization.base says (NF4 or FP8), split as `split`: its parts as
  /// parameters, dequantized where it is read.
  Value quantizedWeight(const std::string &name, int64_t rows,
                        int64_t columns, Split split, Location at);
  /// Appends the input argument that is `role`, named after it: a [batch,
  /// seq] one (tokens, labels, positions, segments, token_index), or one of
  /// `shape`.
  Value input(ValueRole role, Type elementType);
  Value input(ValueRole role, Type elementType, ArrayRef<int64_t> shape);

  bool isLoraTarget(StringRef module) const {
    return job.has_lora() &&
           llvm::is_contained(job.lora().target_modules(), module.str());
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
  /// `x W^T` for each block W of `weights`, plus PEFT's `(alpha / rank) *
  /// (dropout(x) A^T) B^T` when `target` is adapted: one A (named after
  /// `path`), B's rows split as the weight's (`blocks`), each block's
  /// split as its weight's: the rank never splits.
  SmallVector<Value> linearWith(Value x, ArrayRef<Value> weights,
                                const std::string &path, StringRef target,
                                ArrayRef<RowBlock> blocks);
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
    return ::twill::slidingWindowOf(model, *layerMarker.layer).has_value();
  }
  Value decoderLayer(Value hidden, int64_t layer);
  Value attention(Value normed, const std::string &prefix);
  Value mlp(Value normed, const std::string &prefix);
  /// The MLP of some positions: gate and up, their gated activation
  /// (SwiGLU, or Gemma's GeGLU), down.
  Value mlpTile(Value normed, const std::string &prefix);

  /// `x` ([batch, seq, ...]) cut along the sequence into tiles of about
  /// `tile` positions, or `x` alone when one tile holds it all. Under
  /// sequence parallelism the tiles are blocked (twill.split's `blocks`):
  /// each tp rank cuts its own block of the sequence, ceil(tile / tp)
  /// positions per tile, so a tile is gathered and scattered on its own.
  SmallVector<Value> sequenceTiles(Value x, int64_t tile, Location at);
  /// The token index cut as sequenceTiles cuts the positions (null values
  /// without dropout).
  SmallVector<Value> tokenTiles(int64_t tile, Location at) {
    if (!tokenIndex)
      return SmallVector<Value>(tileSizes(tile).size());
    return sequenceTiles(tokenIndex, tile, at);
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

  Block *body = nullptr;
  unsigned numParams = 0;
  SmallVector<DictionaryAttr> paramAttrs;
  llvm::StringMap<Value> params;                 // by Hugging Face name
  llvm::DenseMap<Value, std::string> paramNames; // the names they have
  Value positions, segments;
  SmallVector<ValueRole> inputRoles; // in argument order
  /// With LoRA dropout: every position's index in the micro-batch (row x
  /// seq_len + position), the micro-batch's number in the run, and the
  /// index of the positions being traced (the whole, or a tile's).
  Value tokenIndex, microBatch, tracedTokens;
};

} // namespace

Value DecoderTracer::param(const Twine &name, ArrayRef<int64_t> shape,
                           bool trainable, Split split, const Role &role,
                           const std::optional<StoredRows> &stored) {
  std::string hfName = name.str();
  // Traced again (by each tile of a tiled MLP): the same argument.
  if (Value traced = params.lookup(hfName))
    return traced;
  // The name is the checkpoint's; nothing after the frontend reads meaning
  // into it (the renaming test option checks that).
  std::string named = options.parameterPrefix + hfName;
  // A quantized weight's codes and scales' codes are bytes.
  bool bytes = role.quantized && (*role.quantized == QuantizedPart::Codes ||
                                  *role.quantized == QuantizedPart::Absmax ||
                                  *role.quantized == QuantizedPart::Fp8Values);
  Type type = bytes ? RankedTensorType::get(shape, builder.getI8Type())
                    : floatType(shape);
  Value arg = body->insertArgument(numParams++, type, loc(hfName));
  params[hfName] = arg;
  paramNames[arg] = named;
  MLIRContext *context = builder.getContext();
  InitKind init = role.init;
  if (init == InitKind::Ones && options.zeroOnes)
    init = InitKind::Zeros;
  SmallVector<NamedAttribute, 6> attrs{
      builder.getNamedAttr(kParamAttrName, builder.getStringAttr(named)),
      builder.getNamedAttr(
          kTensorParallelAttrName,
          TensorParallelAttr::get(context, split.style, split.heads,
                                  split.blocks)),
      builder.getNamedAttr(
          kInitAttrName,
          InitAttr::get(
              context, init,
              llvm::APFloat(init == InitKind::Normal ? kBaseWeightStd : 0.0),
              // Its random values keyed by its checkpoint name
              // here, so that they stay its own however the
              // program names it.
              llvm::xxh3_64bits(hfName)))};
  if (role.part)
    attrs.push_back(builder.getNamedAttr(
        kAdapterAttrName,
        AdapterAttr::get(context, *role.part, options.parameterPrefix + role.of,
                         role.tied)));
  if (role.quantized) {
    bool fp8 = *role.quantized == QuantizedPart::Fp8Values ||
               *role.quantized == QuantizedPart::Fp8RowScales;
    attrs.push_back(builder.getNamedAttr(
        kQuantizedAttrName,
        QuantizedAttr::get(context, *role.quantized,
                           options.parameterPrefix + role.of,
                           fp8 ? 0 : kNf4BlockSize,
                           fp8 ? 0 : kNf4NestedBlockSize)));
  }
  if (stored)
    attrs.push_back(builder.getNamedAttr(
        kStoredAttrName,
        StoredRowsAttr::get(context, options.parameterPrefix + stored->tensor,
                            stored->firstRow, stored->tensorRows)));
  if (trainable)
    attrs.push_back(
        builder.getNamedAttr(kTrainableAttrName, builder.getUnitAttr()));
  if (layerMarker.layer)
    attrs.push_back(builder.getNamedAttr(
        kLayerAttrName, builder.getI64IntegerAttr(*layerMarker.layer)));
  paramAttrs.push_back(builder.getDictionaryAttr(attrs));
  return arg;
}

Value DecoderTracer::input(ValueRole role, Type elementType) {
  return input(role, elementType, {batch, seq});
}

Value DecoderTracer::input(ValueRole role, Type elementType,
                           ArrayRef<int64_t> shape) {
  inputRoles.push_back(role);
  return body->addArgument(RankedTensorType::get(shape, elementType),
                           loc(stringifyValueRole(role)));
}

Value DecoderTracer::matmulTransposed(Value x, Value weight, Location at) {
  auto xType = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(xType.getShape().drop_back());
  shape.push_back(cast<RankedTensorType>(weight.getType()).getDimSize(0));
  return MatmulOp::create(builder, at, floatType(shape), x, weight,
                          /*transposeLhs=*/false, /*transposeRhs=*/true);
}

Value DecoderTracer::blockParam(const std::string &tensor,
                                ArrayRef<RowBlock> blocks, size_t index,
                                ArrayRef<int64_t> rest, bool trainable,
                                Split split, const Role &role) {
  SmallVector<int64_t> shape{blocks[index].rows};
  shape.append(rest.begin(), rest.end());
  if (blocks.size() == 1)
    return param(tensor, shape, trainable, split, role);
  int64_t first = 0, total = 0;
  for (auto [i, block] : llvm::enumerate(blocks)) {
    first += i < index ? block.rows : 0;
    total += block.rows;
  }
  return param(
      llvm::formatv("{0}[{1}:{2}]", tensor, first, first + blocks[index].rows),
      shape, trainable, split, role, StoredRows{tensor, first, total});
}

Value DecoderTracer::quantizedWeight(const std::string &name, int64_t rows,
                                     int64_t columns, Split split,
                                     Location at) {
  // The codes carry the weight's own start, keyed by its name as an
  // unquantized weight's: a random base is drawn as it would be, then
  // quantized (the scales are filled with the codes).
  auto codesRole = [&](QuantizedPart part) {
    Role role = baseWeight();
    role.of = name;
    role.quantized = part;
    return role;
  };
  auto part = [&](QuantizedPart quantized) {
    return Role{InitKind::Zeros, std::nullopt, name, {}, quantized};
  };
  if (job.quantization().base() == ::twill::QuantizationConfig::FP8) {
    // Every value its own: split as the weight, each row's scale with it.
    Value values = param(name, {rows, columns}, false, split,
                         codesRole(QuantizedPart::Fp8Values));
    Value scales = param(name + ".scale", {rows}, false, split,
                         part(QuantizedPart::Fp8RowScales));
    return DequantizeFp8Op::create(builder, at, floatType({rows, columns}),
                                   values, scales);
  }
  // A row layer's columns split over tp in whole blocks, or not at all.
  Split bytes = split;
  if (split.style == TensorParallelStyle::Row)
    bytes.blocks = columns / kNf4BlockSize;
  Split whole{TensorParallelStyle::Replicate};
  Value codes = param(name, {rows, columns / 2}, false, bytes,
                      codesRole(QuantizedPart::Codes));
  Value absmax = param(name + ".absmax", {rows, columns / kNf4BlockSize},
                       false, bytes, part(QuantizedPart::Absmax));
  int64_t blocks = rows * (columns / kNf4BlockSize);
  Value nested = param(
      name + ".nested_absmax",
      {(blocks + kNf4NestedBlockSize - 1) / kNf4NestedBlockSize}, false, whole,
      part(QuantizedPart::NestedAbsmax));
  Value offset = param(name + ".nested_offset", {}, false, whole,
                       part(QuantizedPart::NestedOffset));
  return DequantizeNf4Op::create(
      builder, at, floatType({rows, columns}), codes, absmax, nested, offset,
      builder.getI64IntegerAttr(kNf4BlockSize),
      builder.getI64IntegerAttr(kNf4NestedBlockSize),
      builder.getI64IntegerAttr(rows), builder.getI64IntegerAttr(columns),
      /*shard_axis=*/nullptr);
}

SmallVector<Value> DecoderTracer::linearBlocks(Value x, const std::string &path,
                                               StringRef target, int64_t in,
                                               ArrayRef<RowBlock> blocks) {
  SmallVector<Value> weights;
  // Validation keeps fused modules out of a quantized base.
  bool quantized =
      job.quantization().base() != ::twill::QuantizationConfig::NONE &&
      blocks.size() == 1;
  for (auto [index, block] : llvm::enumerate(blocks))
    weights.push_back(
        quantized
            ? quantizedWeight(path + ".weight", block.rows, in, block.split,
                              loc(path))
            : blockParam(path + ".weight", blocks, index, {in},
                         baseTrainable(), block.split, baseWeight()));
  SmallVector<Value> ys = linearWith(x, weights, path, target, blocks);
  if (!::twill::hasBias(model, target))
    return ys;
  // Shards as the output's columns: a row layer's is whole, and added once
  // its partial sums are reduced. transformers starts biases at zero.
  for (auto [index, block] : llvm::enumerate(blocks)) {
    Split columns = block.split.style == TensorParallelStyle::Row
                        ? Split{TensorParallelStyle::Replicate}
                        : block.split;
    Value bias = blockParam(path + ".bias", blocks, index, {}, baseTrainable(),
                            columns, {InitKind::Zeros, std::nullopt, {}});
    ys[index] = AddColumnsOp::create(builder, loc(path), ys[index].getType(),
                                     ys[index], bias);
  }
  return ys;
}

SmallVector<Value> DecoderTracer::linearWith(Value x, ArrayRef<Value> weights,
                                             const std::string &path,
                                             StringRef target,
                                             ArrayRef<RowBlock> blocks) {
  SmallVector<Value> ys;
  for (Value weight : weights)
    ys.push_back(matmulTransposed(x, weight, loc(path)));
  if (!isLoraTarget(target))
    return ys;
  int64_t in = cast<RankedTensorType>(weights[0].getType()).getDimSize(1);
  int64_t rank = job.lora().rank();
  // A takes the base's input dim, B its output dim: each follows the base
  // where the base splits that dim, and is whole otherwise. The blocks of
  // a fused module split their output dim alike, or none does.
  Split whole{TensorParallelStyle::Replicate};
  bool splitsInput = blocks[0].split.style == TensorParallelStyle::Row;
  // PEFT's start: A kaiming-uniform, B zero, so the product starts at 0.
  // The weight adapted is `path`.weight; where another parameter holds it
  // (an lm_head tied to the embedding), the adapter says which.
  std::string weightName = path + ".weight",
              holder = paramNames.lookup(weights[0]);
  std::string tied =
      weights.size() == 1 && holder != options.parameterPrefix + weightName
          ? holder
          : "";
  Value a = param(path + ".lora_A.weight", {rank, in}, true,
                  splitsInput ? blocks[0].split : whole,
                  {InitKind::KaimingUniform, AdapterPart::A, weightName, tied});
  Location at = loc(path + ".lora");
  Value dropped = x;
  if (double rate = job.lora().dropout(); rate > 0)
    dropped = DropoutOp::create(
        builder, loc(path + ".lora_dropout"), x.getType(), x, tracedTokens,
        microBatch, builder.getF64FloatAttr(rate),
        builder.getI64IntegerAttr(uint32_t(job.train().seed())),
        builder.getI64IntegerAttr(
            ::twill::dropoutStream(path.data(), path.size())),
        /*shard_axis=*/nullptr);
  // One product with A for every block: PEFT's module has one A.
  Value down = matmulTransposed(dropped, a, at);
  double scale =
      ::twill::loraScale(job.lora().alpha(), rank, job.lora().use_rslora());
  for (auto [index, block] : llvm::enumerate(blocks)) {
    Split outputs = splitsInput ? whole : block.split;
    Value b = blockParam(path + ".lora_B.weight", blocks, index, {rank}, true,
                         outputs,
                         {InitKind::Zeros, AdapterPart::B, weightName, tied});
    Value up = matmulTransposed(down, b, at);
    Value scaled = ScaleOp::create(builder, at, up.getType(), up,
                                   builder.getF64FloatAttr(scale));
    Value &y = ys[index];
    if (!job.lora().use_dora()) {
      y = AddOp::create(builder, at, y.getType(), y, scaled);
      continue;
    }

    // DoRA, as PEFT computes it: magnitude m over the norm n of each
    // output row of W + scale B A, n detached; with the input dropped,
    // d(x): W x + (m / n - 1) W d(x) + (m / n) scale B A d(x), and without
    // dropout (or in evaluation) W d(x) is W x itself. Row by row: a
    // block's rows are its own.
    Value weight = weights[index];
    Location doraAt = loc(path + ".lora_magnitude_vector");
    Value magnitude = blockParam(
        path + ".lora_magnitude_vector", blocks, index, {}, true, outputs,
        {InitKind::RowNorms, AdapterPart::Magnitude, weightName, tied});
    Value product = MatmulOp::create(builder, doraAt, weight.getType(), b, a,
                                     /*transposeLhs=*/false,
                                     /*transposeRhs=*/false);
    Value adapted =
        AddOp::create(builder, doraAt, weight.getType(), weight,
                      ScaleOp::create(builder, doraAt, weight.getType(),
                                      product, builder.getF64FloatAttr(scale)));
    Type rows = magnitude.getType();
    Value squares = RowSumSquaresOp::create(builder, doraAt, rows, adapted);
    // 1e-30 more: a padded row (all zero, where a rank's block runs past
    // the dim) scales by 0 rather than 0 / 0; a real row's sum is far above
    // it.
    squares = AddOp::create(builder, doraAt, rows, squares,
                            ConstantOp::create(builder, doraAt, rows,
                                               builder.getF64FloatAttr(1e-30)));
    Value norm = DetachOp::create(
        builder, doraAt, rows, SqrtOp::create(builder, doraAt, rows, squares));
    Value ratio = DivOp::create(builder, doraAt, rows, magnitude, norm);
    Value less =
        AddOp::create(builder, doraAt, rows, ratio,
                      ConstantOp::create(builder, doraAt, rows,
                                         builder.getF64FloatAttr(-1.0)));
    Value base = dropped == x ? y : matmulTransposed(dropped, weight, doraAt);
    Type type = y.getType();
    Value change = AddOp::create(
        builder, doraAt, type,
        ScaleColumnsOp::create(builder, doraAt, type, base, less),
        ScaleColumnsOp::create(builder, doraAt, type, scaled, ratio));
    y = AddOp::create(builder, at, type, y, change);
  }
  return ys;
}

Value DecoderTracer::rmsNorm(Value x, const Twine &path, int64_t size) {
  std::string module = path.str();
  // Gemma's weights start at 0 and scale by 1 + w: the same start.
  Value weight = param(
      module + ".weight", {size}, baseTrainable(),
      {TensorParallelStyle::Replicate},
      {family.gemmaLayer ? InitKind::Zeros : InitKind::Ones, std::nullopt, {}});
  Location at = loc(module);
  if (family.gemmaLayer)
    weight = AddOp::create(builder, at, weight.getType(), weight,
                           ConstantOp::create(builder, at, weight.getType(),
                                              builder.getF64FloatAttr(1.0)));
  return RmsNormOp::create(builder, at, x.getType(), x, weight,
                           builder.getF64FloatAttr(model.rms_norm_eps()));
}

Value DecoderTracer::rope(Value heads, const std::string &path) {
  bool local = model.has_rope_local_base_freq() && slidingLayer();
  auto op = RopeOp::create(
      builder, loc(path), heads.getType(), heads, positions,
      builder.getF64FloatAttr(local ? model.rope_local_base_freq()
                                    : model.rope_theta()),
      FloatAttr(), FloatAttr(), FloatAttr(), IntegerAttr());
  if (model.has_rope_scaling() && !local) {
    const RopeScaling &scaling = model.rope_scaling();
    op.setScalingFactorAttr(builder.getF64FloatAttr(scaling.factor()));
    if (scaling.rope_type() == "linear")
      return op;
    op.setLowFreqFactorAttr(builder.getF64FloatAttr(scaling.low_freq_factor()));
    op.setHighFreqFactorAttr(
        builder.getF64FloatAttr(scaling.high_freq_factor()));
    op.setOriginalMaxPositionAttr(
        builder.getI64IntegerAttr(scaling.original_max_position_embeddings()));
  }
  return op;
}

SmallVector<int64_t> DecoderTracer::tileSizes(int64_t tile) const {
  int64_t blocks = sequenceBlocks();
  int64_t block = (seq + blocks - 1) / blocks;
  int64_t chunk = (tile + blocks - 1) / blocks;
  if (tile <= 0 || chunk >= block)
    return {seq};
  std::vector<int64_t> chunks;
  for (int64_t start = 0; start < block; start += chunk)
    chunks.push_back(std::min(chunk, block - start));
  std::vector<int64_t> sizes = ::twill::blockedPieceSizes(seq, blocks, chunks);
  return SmallVector<int64_t>(sizes.begin(), sizes.end());
}

SmallVector<Value> DecoderTracer::sequenceTiles(Value x, int64_t tile,
                                                Location at) {
  SmallVector<int64_t> sizes = tileSizes(tile);
  if (sizes.size() == 1)
    return {x};
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<Type> tiles;
  for (int64_t size : sizes) {
    SmallVector<int64_t> shape(type.getShape());
    shape[1] = size;
    tiles.push_back(type.clone(shape));
  }
  auto split =
      SplitOp::create(builder, at, tiles, x, /*dim=*/1, sequenceBlocks());
  return SmallVector<Value>(split.getPieces());
}

Value DecoderTracer::joinTiles(ArrayRef<Value> tiles, Location at) {
  if (tiles.size() == 1)
    return tiles.front();
  auto type = cast<RankedTensorType>(tiles.front().getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[1] = seq;
  return ConcatOp::create(builder, at, type.clone(shape), tiles, /*dim=*/1,
                          sequenceBlocks());
}

Value DecoderTracer::attention(Value normed, const std::string &prefix) {
  int64_t hidden = model.hidden_size(), headDim = model.head_dim();
  int64_t heads = model.num_attention_heads();
  int64_t kvHeads = model.num_key_value_heads();
  std::string attn = prefix + ".self_attn";
  int64_t tile = job.parallel().attention_tile_tokens();
  Location at = loc(attn);

  // Project each tile of parallel.attention_tile_tokens positions (its q,
  // k and v together, so that a tile's gathered input dies after them),
  // put the tiles together, split into heads, rotate queries and keys;
  // untiled, each projection is finished before the next begins.
  struct Projection {
    StringRef name;
    int64_t heads;
    bool rotate;
    SmallVector<Value> tiles;
    Value heads4d;
  };
  Projection projections[] = {{"q_proj", heads, true, {}, {}},
                              {"k_proj", kvHeads, true, {}, {}},
                              {"v_proj", kvHeads, false, {}, {}}};
  auto finish = [&](Projection &p) {
    std::string path = attn + "." + p.name.str();
    Value split = ReshapeOp::create(builder, loc(path),
                                    floatType({batch, seq, p.heads, headDim}),
                                    joinTiles(p.tiles, loc(path)));
    // Qwen3 normalises each query and key head before rotating it.
    if (p.rotate && family.qkNorm)
      split =
          rmsNorm(split, attn + "." + p.name.take_front(1) + "_norm", headDim);
    p.heads4d = p.rotate ? rope(split, path + ".rope") : split;
  };
  auto block = [&](const Projection &p) {
    return RowBlock{p.heads * headDim, {TensorParallelStyle::Column, p.heads}};
  };
  SmallVector<Value> pieces = sequenceTiles(normed, tile, at);
  SmallVector<Value> tokenPieces = tokenTiles(tile, at);
  for (auto [index, piece] : llvm::enumerate(pieces)) {
    tracedTokens = tokenPieces[index];
    // Phi-3's qkv_proj: one module of q's, k's and v's rows.
    if (family.fusedProjections) {
      SmallVector<Value> qkv =
          linearBlocks(piece, attn + ".qkv_proj", "qkv_proj", hidden,
                       {block(projections[0]), block(projections[1]),
                        block(projections[2])});
      for (auto [p, y] : llvm::zip_equal(projections, qkv))
        p.tiles.push_back(y);
      if (pieces.size() == 1)
        llvm::for_each(projections, finish);
      continue;
    }
    for (Projection &p : projections) {
      p.tiles.push_back(linear(piece, attn + "." + p.name.str(), p.name, hidden,
                               p.heads * headDim, block(p).split));
      if (pieces.size() == 1)
        finish(p);
    }
  }
  if (pieces.size() > 1)
    for (Projection &p : projections)
      finish(p);
  Value q = projections[0].heads4d, k = projections[1].heads4d,
        v = projections[2].heads4d;

  // A window no shorter than the sequence is no window.
  std::optional<int64_t> window =
      ::twill::slidingWindowOf(model, *layerMarker.layer);
  // Gemma scales by its query_pre_attn_scalar instead of the head size.
  double scalar = model.has_query_pre_attn_scalar()
                      ? model.query_pre_attn_scalar()
                      : double(headDim);
  Value context = AttentionOp::create(
      builder, at, q.getType(), q, k, v, segments,
      builder.getF64FloatAttr(1.0 / std::sqrt(scalar)),
      /*shard_axis=*/nullptr,
      window && *window < seq ? builder.getI64IntegerAttr(*window)
                              : IntegerAttr(),
      model.has_attn_logit_softcapping()
          ? builder.getF64FloatAttr(model.attn_logit_softcapping())
          : FloatAttr());
  Value merged = ReshapeOp::create(
      builder, at, floatType({batch, seq, heads * headDim}), context);
  SmallVector<Value> outputs;
  tokenPieces = tokenTiles(tile, at);
  for (auto [index, piece] : llvm::enumerate(sequenceTiles(merged, tile, at))) {
    tracedTokens = tokenPieces[index];
    outputs.push_back(linear(piece, attn + ".o_proj", "o_proj", heads * headDim,
                             hidden, {TensorParallelStyle::Row, heads}));
  }
  tracedTokens = tokenIndex;
  return joinTiles(outputs, at);
}

Value DecoderTracer::mlp(Value normed, const std::string &prefix) {
  // Tiles of parallel.mlp_tile_tokens positions, each through the whole
  // MLP: one tile's activations live at a time.
  Location at = loc(prefix + ".mlp");
  int64_t tile = job.parallel().mlp_tile_tokens();
  SmallVector<Value> outputs;
  SmallVector<Value> tokenPieces = tokenTiles(tile, at);
  for (auto [index, piece] : llvm::enumerate(sequenceTiles(normed, tile, at))) {
    tracedTokens = tokenPieces[index];
    outputs.push_back(mlpTile(piece, prefix));
  }
  tracedTokens = tokenIndex;
  return joinTiles(outputs, at);
}

Value DecoderTracer::mlpTile(Value normed, const std::string &prefix) {
  int64_t hidden = model.hidden_size(), inner = model.intermediate_size();
  std::string path = prefix + ".mlp";
  Split column{TensorParallelStyle::Column}, row{TensorParallelStyle::Row};
  Value gate, up;
  if (family.fusedProjections) { // Phi-3's gate_up_proj: gate's rows, up's
    SmallVector<Value> gateUp =
        linearBlocks(normed, path + ".gate_up_proj", "gate_up_proj", hidden,
                     {{inner, column}, {inner, column}});
    gate = gateUp[0];
    up = gateUp[1];
  } else {
    gate =
        linear(normed, path + ".gate_proj", "gate_proj", hidden, inner, column);
    up = linear(normed, path + ".up_proj", "up_proj", hidden, inner, column);
  }
  Value act =
      family.gemmaLayer
          ? GegluOp::create(builder, loc(path), gate.getType(), gate, up)
                .getResult()
          : SwigluOp::create(builder, loc(path), gate.getType(), gate, up)
                .getResult();
  return linear(act, path + ".down_proj", "down_proj", inner, hidden, row);
}

Value DecoderTracer::decoderLayer(Value hidden, int64_t layer) {
  layerMarker.layer = layer;
  llvm::scope_exit done([&] { layerMarker.layer.reset(); });
  std::string prefix = llvm::formatv("model.layers.{0}", layer).str();
  int64_t size = model.hidden_size();
  Location at = loc(prefix);
  // Each block's output joins the residual stream; Gemma normalises it
  // first (its post_attention_layernorm and post_feedforward_layernorm), and
  // names the MLP's input norm pre_feedforward_layernorm.
  auto residual = [&](Value block, const char *postNorm) {
    if (family.gemmaLayer)
      block = rmsNorm(block, prefix + postNorm, size);
    return AddOp::create(builder, at, hidden.getType(), hidden, block);
  };
  hidden = residual(
      attention(rmsNorm(hidden, prefix + ".input_layernorm", size), prefix),
      ".post_attention_layernorm");
  const char *mlpNorm = family.gemmaLayer ? ".pre_feedforward_layernorm"
                                          : ".post_attention_layernorm";
  return residual(mlp(rmsNorm(hidden, prefix + mlpNorm, size), prefix),
                  ".post_feedforward_layernorm");
}

OwningOpRef<ModuleOp> DecoderTracer::trace() {
  MLIRContext *context = builder.getContext();
  context->loadDialect<TwillDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc("job"));
  builder.setInsertionPointToEnd(module->getBody());
  MeshOp::create(
      builder, loc("mesh"), "mesh", builder.getStrArrayAttr({"dp", "tp"}),
      builder.getI64ArrayAttr({job.parallel().dp(), job.parallel().tp()}),
      builder.getArrayAttr(
          {AxisRoleAttr::get(builder.getContext(), AxisRole::Data),
           AxisRoleAttr::get(builder.getContext(), AxisRole::Tensor)}));

  auto forward = func::FuncOp::create(builder, loc("forward"), "forward",
                                      builder.getFunctionType({}, {}));
  setEntryRole(forward, EntryRole::Forward);
  body = forward.addEntryBlock();
  builder.setInsertionPointToStart(body);

  Type i32 = builder.getI32Type();
  Value tokens = input(ValueRole::Tokens, i32);
  Value labels = input(ValueRole::Labels, i32);
  positions = input(ValueRole::Positions, i32);
  segments = input(ValueRole::Segments, i32);
  if (job.has_lora() && job.lora().dropout() > 0) {
    tokenIndex = tracedTokens = input(ValueRole::TokenIndex, i32);
    microBatch = input(ValueRole::MicroBatch, builder.getI64Type(), {});
  }

  int64_t vocab = model.vocab_size(), hidden = model.hidden_size();
  Split vocabRows{TensorParallelStyle::Vocab};
  Value embedTable = param("model.embed_tokens.weight", {vocab, hidden},
                           baseTrainable(), vocabRows, baseWeight());
  // Under sequence parallelism the lookup's partial sums are scattered a
  // tile at a time, as the loss gathers its input.
  Location embedAt = loc("model.embed_tokens");
  SmallVector<Value> embedded;
  for (Value ids : sequenceTiles(tokens, vocabEndTile(), embedAt))
    embedded.push_back(EmbeddingOp::create(
        builder, embedAt,
        floatType({batch, cast<RankedTensorType>(ids.getType()).getDimSize(1),
                   hidden}),
        embedTable, ids, /*shard_axis=*/nullptr));
  Value h = joinTiles(embedded, embedAt);
  // Gemma scales the embeddings by sqrt(hidden_size), rounded to the
  // weights' dtype as transformers rounds it.
  if (family.gemmaLayer) {
    llvm::APFloat normalizer(std::sqrt(double(hidden)));
    bool lost;
    normalizer.convert(job.train().precision() == ::twill::TrainConfig::BF16
                           ? llvm::APFloat::BFloat()
                           : llvm::APFloat::IEEEsingle(),
                       llvm::APFloat::rmNearestTiesToEven, &lost);
    normalizer.convert(llvm::APFloat::IEEEdouble(),
                       llvm::APFloat::rmNearestTiesToEven, &lost);
    h = ScaleOp::create(builder, embedAt, h.getType(), h,
                        builder.getF64FloatAttr(normalizer.convertToDouble()));
  }
  for (int64_t layer = 0; layer < model.num_hidden_layers(); ++layer)
    h = decoderLayer(h, layer);
  h = rmsNorm(h, "model.norm", hidden);

  // A tied lm_head reads the embedding table; PEFT adapts it all the same.
  Value lmHead = model.tie_word_embeddings()
                     ? embedTable
                     : param("lm_head.weight", {vocab, hidden}, baseTrainable(),
                             vocabRows, baseWeight());
  Value logits =
      linearWith(h, {lmHead}, "lm_head", "lm_head", {{vocab, vocabRows}})
          .front();
  // Gemma 2 squashes its logits into (-cap, cap).
  FloatAttr cap = model.has_final_logit_softcapping()
                      ? builder.getF64FloatAttr(model.final_logit_softcapping())
                      : FloatAttr();
  if (cap)
    logits = SoftcapOp::create(builder, loc("lm_head"), logits.getType(),
                               logits, cap);
  // Named, so that the runtime can dump it.
  logits.getDefiningOp()->setLoc(loc("logits"));
  logits.getDefiningOp()->setAttr(mlir::twill::kHostReadAttrName,
                                  builder.getUnitAttr());
  auto scalar = [&](Type type) { return RankedTensorType::get({}, type); };
  Type f32 = builder.getF32Type(), i64 = builder.getI64Type();
  // The loss forms the logits (capped, Gemma 2's) a tile of tokens at a
  // time when they are a plain product (an adapted lm_head's are a sum):
  // the host still reads the whole logits, which the training step drops.
  // Under sequence parallelism its input is gathered a tile at a time too.
  int64_t tileTokens = job.parallel().loss_tile_tokens();
  SmallVector<Value, 2> loss;
  if (tileTokens > 0 && !isLoraTarget("lm_head")) {
    int64_t dp = job.parallel().dp();
    Location at = loc("loss");
    SmallVector<Value> inputs = sequenceTiles(h, vocabEndTile(), at);
    SmallVector<Value> tileLabels = sequenceTiles(labels, vocabEndTile(), at);
    for (auto [input, tileLabel] : llvm::zip_equal(inputs, tileLabels)) {
      int64_t positions = cast<RankedTensorType>(input.getType()).getDimSize(1);
      int64_t rows = std::min(tileTokens, (batch + dp - 1) / dp * positions);
      auto tile = LinearCrossEntropyOp::create(
          builder, at, scalar(f32), scalar(i64), floatType({rows, vocab}),
          input, lmHead, tileLabel, /*ignore_index=*/::twill::kIgnoreLabel,
          /*shard_axis=*/nullptr, /*vocab_size=*/nullptr, cap);
      if (loss.empty()) {
        loss = {tile.getLoss(), tile.getCount()};
        continue;
      }
      loss[0] = AddOp::create(builder, at, loss[0].getType(), loss[0],
                              tile.getLoss());
      loss[1] = AddOp::create(builder, at, loss[1].getType(), loss[1],
                              tile.getCount());
    }
  } else {
    auto whole = CrossEntropyOp::create(builder, loc("loss"), scalar(f32),
                                        scalar(i64), logits, labels,
                                        /*ignore_index=*/::twill::kIgnoreLabel,
                                        /*shard_axis=*/nullptr,
                                        /*vocab_size=*/nullptr);
    loss = {whole.getLoss(), whole.getCount()};
  }
  func::ReturnOp::create(builder, loc("forward"), loss);

  // The signature follows the arguments traced.
  forward.setFunctionType(builder.getFunctionType(
      body->getArgumentTypes(),
      forward.getBody().front().getTerminator()->getOperandTypes()));
  SmallVector<Attribute> argAttrs(paramAttrs.begin(), paramAttrs.end());
  // Inputs and outputs are named after their roles.
  auto named = [&](StringRef attrName, ValueRole role) {
    return builder.getDictionaryAttr(
        {builder.getNamedAttr(attrName,
                              builder.getStringAttr(stringifyValueRole(role))),
         builder.getNamedAttr(kRoleAttrName,
                              ValueRoleAttr::get(builder.getContext(), role))});
  };
  for (ValueRole role : inputRoles)
    argAttrs.push_back(named(kInputAttrName, role));
  forward.setAllArgAttrs(argAttrs);
  forward.setAllResultAttrs(
      ArrayRef<DictionaryAttr>{named(kOutputAttrName, ValueRole::LossSum),
                               named(kOutputAttrName, ValueRole::TokenCount)});
  return module;
}

namespace twill {
OwningOpRef<ModuleOp> buildDecoderModule(MLIRContext &context,
                                         const JobConfig &job,
                                         const TraceOptions &options) {
  return DecoderTracer(context, job, options).trace();
}
} // namespace twill
