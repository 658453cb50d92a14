//===- DecoderWeights.cpp - a decoder's weights as parameters -------------===//
//
// The tracer's parameters: each with its Hugging Face name and its roles;
// a linear layer's weight (whole, a block of a fused one's rows, or stored
// quantized: its parts and their dequantize), its bias, and its LoRA or
// DoRA adapter.
//
//===----------------------------------------------------------------------===//

#include "frontend/DecoderTracer.h"

#include "support/Dropout.h"
#include "support/LoraScale.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;
using namespace mlir::twill;
using namespace mlir::twill::decoder;

Value DecoderTracer::param(const Twine &name, ArrayRef<int64_t> shape,
                           bool trainable, Split split, const Role &role,
                           const std::optional<StoredRows> &stored,
                           ArrayRef<std::string> stacked) {
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
      builder.getNamedAttr(kTensorParallelAttrName,
                           TensorParallelAttr::get(context, split.style,
                                                   split.heads, split.blocks)),
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
                           fp8 ? 0 : kNf4NestedBlockSize, role.experts)));
  }
  if (stored)
    attrs.push_back(builder.getNamedAttr(
        kStoredAttrName,
        StoredRowsAttr::get(context, options.parameterPrefix + stored->tensor,
                            stored->firstRow, stored->tensorRows)));
  if (!stacked.empty())
    attrs.push_back(builder.getNamedAttr(
        kStackedAttrName,
        builder.getArrayAttr(llvm::map_to_vector(
            stacked, [&](const std::string &tensor) -> Attribute {
              return builder.getStringAttr(options.parameterPrefix + tensor);
            }))));
  if (trainable)
    attrs.push_back(
        builder.getNamedAttr(kTrainableAttrName, builder.getUnitAttr()));
  if (trainable && role.noWeightDecay)
    attrs.push_back(
        builder.getNamedAttr(kNoWeightDecayAttrName, builder.getUnitAttr()));
  if (layerMarker.layer)
    attrs.push_back(builder.getNamedAttr(
        kLayerAttrName, builder.getI64IntegerAttr(*layerMarker.layer)));
  paramAttrs.push_back(builder.getDictionaryAttr(attrs));
  return arg;
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
                                     int64_t columns, Split split, Location at,
                                     int64_t experts,
                                     ArrayRef<std::string> stacked) {
  // The codes carry the weight's own start, keyed by its name as an
  // unquantized weight's: a random base is drawn as it would be, then
  // quantized (the scales are filled with the codes).
  auto codesRole = [&](QuantizedPart part) {
    Role role = baseWeight();
    role.of = name;
    role.quantized = part;
    role.experts = experts;
    return role;
  };
  auto part = [&](QuantizedPart quantized) {
    Role role{InitKind::Zeros, std::nullopt, name, {}, quantized};
    role.experts = experts;
    return role;
  };
  if (job.quantization().base() == ::twill::QuantizationConfig::FP8) {
    // Every value its own: split as the weight, each row's scale with it.
    Value values =
        param(name, {rows, columns}, false, split,
              codesRole(QuantizedPart::Fp8Values), std::nullopt, stacked);
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
                      codesRole(QuantizedPart::Codes), std::nullopt, stacked);
  Value absmax = param(name + ".absmax", {rows, columns / kNf4BlockSize}, false,
                       bytes, part(QuantizedPart::Absmax));
  int64_t blocks = rows * (columns / kNf4BlockSize);
  Value nested =
      param(name + ".nested_absmax",
            {(blocks + kNf4NestedBlockSize - 1) / kNf4NestedBlockSize}, false,
            whole, part(QuantizedPart::NestedAbsmax));
  Value offset = param(name + ".nested_offset", {}, false, whole,
                       part(QuantizedPart::NestedOffset));
  return DequantizeNf4Op::create(
      builder, at, floatType({rows, columns}), codes, absmax, nested, offset,
      builder.getI64IntegerAttr(kNf4BlockSize),
      builder.getI64IntegerAttr(kNf4NestedBlockSize),
      builder.getI64IntegerAttr(rows), builder.getI64IntegerAttr(columns),
      /*shard_axis=*/nullptr);
}

Value DecoderTracer::expertsWeight(const std::string &name,
                                   ArrayRef<int64_t> shape,
                                   ArrayRef<std::string> stacked, Location at) {
  Split whole{TensorParallelStyle::Replicate};
  if (job.quantization().base() == ::twill::QuantizationConfig::NONE)
    return param(name, shape, baseTrainable(), whole, baseWeight(),
                 std::nullopt, stacked);
  Value rows = quantizedWeight(name, shape[0] * shape[1], shape[2], whole, at,
                               shape[0], stacked);
  return ReshapeOp::create(builder, at, floatType(shape), rows);
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
    weights.push_back(quantized ? quantizedWeight(path + ".weight", block.rows,
                                                  in, block.split, loc(path))
                                : blockParam(path + ".weight", blocks, index,
                                             {in}, baseTrainable(), block.split,
                                             baseWeight()));
  SmallVector<Value> ys =
      linearWith(x, weights, path, isLoraTarget(target), blocks,
                 quantized ? fp8BaseInput(x, loc(path)) : Value());
  if (!::twill::hasBias(model, target))
    return ys;
  // Shards as the output's columns: a row layer's is whole, and added once
  // its partial sums are reduced. transformers starts biases at zero.
  for (auto [index, block] : llvm::enumerate(blocks)) {
    Split columns = block.split.style == TensorParallelStyle::Row
                        ? Split{TensorParallelStyle::Replicate}
                        : block.split;
    Value bias = blockParam(path + ".bias", blocks, index, {}, baseTrainable(),
                            columns, undecayed(InitKind::Zeros));
    ys[index] = AddColumnsOp::create(builder, loc(path), ys[index].getType(),
                                     ys[index], bias);
  }
  return ys;
}

Value DecoderTracer::fp8BaseInput(Value x, Location at) {
  constexpr int64_t kBlock = 128; // what Hopper's FP8 GEMMs scale
  if (job.quantization().base() != ::twill::QuantizationConfig::FP8 ||
      job.quantization().fp8_inputs() !=
          ::twill::QuantizationConfig::E4M3_BLOCKS)
    return x;
  Value &rounded = fp8Rounded[x];
  if (!rounded)
    rounded = RoundToFp8Op::create(builder, at, x.getType(), x,
                                   builder.getI64IntegerAttr(kBlock));
  return rounded;
}

SmallVector<Value> DecoderTracer::linearWith(Value x, ArrayRef<Value> weights,
                                             const std::string &path,
                                             bool adapted,
                                             ArrayRef<RowBlock> blocks,
                                             Value baseInput) {
  SmallVector<Value> ys;
  for (Value weight : weights)
    ys.push_back(
        matmulTransposed(baseInput ? baseInput : x, weight, loc(path)));
  if (!adapted)
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
  // An entry without dropout's inputs (@reference) drops nothing.
  if (double rate = job.lora().dropout(); rate > 0 && microBatch)
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

Value DecoderTracer::expertsProduct(Value rows, Value counts, Value weight,
                                    const std::string &name, int64_t nesting) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(weight.getType()).getShape();
  ArrayRef<int64_t> rowShape =
      cast<RankedTensorType>(rows.getType()).getShape();
  int64_t experts = shape[0], out = shape[1], in = shape[2];
  Location at = loc(name);
  Type result = floatType({rowShape[0], rowShape[1], out});
  Value y = GroupedMatmulOp::create(builder, at, result, rows, weight, counts,
                                    /*transpose_rhs=*/true);
  if (!isLoraTargetParameter(name))
    return y;
  // PEFT wraps the experts' module once per parameter adapted, the first
  // innermost: its adapter is named under each wrapper's base_layer.
  std::string module = StringRef(name).rsplit('.').first.str();
  for (int64_t i = 0; i < nesting; ++i)
    module += ".base_layer";
  int64_t rank = job.lora().rank();
  Split whole{TensorParallelStyle::Replicate};
  Value a =
      param(module + ".lora_A.weight", {rank * experts, in}, true, whole,
            {InitKind::KaimingUniform, AdapterPart::A, name, /*tied=*/""});
  Value b = param(module + ".lora_B.weight", {out, rank * experts}, true, whole,
                  {InitKind::Zeros, AdapterPart::B, name, ""});
  // PEFT's layout: A's rows expert by expert ([experts, rank, in]), B's
  // columns rank by rank (column j x experts + e is expert e's j-th).
  Location loraAt = loc(module + ".lora");
  Value aStack =
      ReshapeOp::create(builder, loraAt, floatType({experts, rank, in}), a);
  Value bStack = TransposeOp::create(
      builder, loraAt, floatType({experts, out, rank}),
      ReshapeOp::create(builder, loraAt, floatType({out, rank, experts}), b),
      builder.getDenseI64ArrayAttr({2, 0, 1}));
  Value down = GroupedMatmulOp::create(
      builder, loraAt, floatType({rowShape[0], rowShape[1], rank}), rows,
      aStack, counts, /*transpose_rhs=*/true);
  Value up = GroupedMatmulOp::create(builder, loraAt, result, down, bStack,
                                     counts, /*transpose_rhs=*/true);
  double scale =
      ::twill::loraScale(job.lora().alpha(), rank, job.lora().use_rslora());
  Value scaled = ScaleOp::create(builder, loraAt, result, up,
                                 builder.getF64FloatAttr(scale));
  return AddOp::create(builder, loraAt, result, y, scaled);
}
