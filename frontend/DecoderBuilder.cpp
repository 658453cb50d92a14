//===- DecoderBuilder.cpp - trace a decoder + LoRA into twill IR ----------===//

#include "frontend/DecoderTracer.h"
#include "support/Dpo.h"

#include "dialects/twill/TwillEntryPoints.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "support/BlockedPieces.h"
#include "support/IgnoreLabel.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::twill;
using namespace mlir::twill::decoder;
using ::twill::RopeScaling;

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

Value DecoderTracer::rmsNorm(Value x, const Twine &path, int64_t size) {
  std::string module = path.str();
  // Gemma's weights start at 0 and scale by 1 + w: the same start.
  Value weight =
      param(module + ".weight", {size}, baseTrainable(),
            {TensorParallelStyle::Replicate},
            undecayed(family.gemmaLayer ? InitKind::Zeros : InitKind::Ones));
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
  SmallVector<Value> tokenPieces = inputTiles(tokenIndex, tile, at);
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
  std::optional<int64_t> window = ::twill::slidingWindowOf(model, tracedLayer);
  // Gemma scales by its query_pre_attn_scalar instead of the head size.
  double scalar = model.has_query_pre_attn_scalar()
                      ? model.query_pre_attn_scalar()
                      : double(headDim);
  // The log-sum-exp is fp32 at every precision.
  auto logSumExp =
      RankedTensorType::get({batch, heads, seq}, builder.getF32Type());
  Value context = AttentionOp::create(
      builder, at, q.getType(), logSumExp, q, k, v, segments,
      builder.getF64FloatAttr(1.0 / std::sqrt(scalar)),
      /*shard_axis=*/nullptr,
      window && *window < seq ? builder.getI64IntegerAttr(*window)
                              : IntegerAttr(),
      model.has_attn_logit_softcapping()
          ? builder.getF64FloatAttr(model.attn_logit_softcapping())
          : FloatAttr())
                      .getResult();
  Value merged = ReshapeOp::create(
      builder, at, floatType({batch, seq, heads * headDim}), context);
  SmallVector<Value> outputs;
  tokenPieces = inputTiles(tokenIndex, tile, at);
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
  SmallVector<Value> tokenPieces = inputTiles(tokenIndex, tile, at);
  SmallVector<Value> maskPieces = inputTiles(attentionMask, tile, at);
  for (auto [index, piece] : llvm::enumerate(sequenceTiles(normed, tile, at))) {
    tracedTokens = tokenPieces[index];
    tracedMask = maskPieces[index];
    outputs.push_back(::twill::hasExperts(model, tracedLayer)
                          ? expertsTile(piece, prefix)
                          : mlpTile(piece, prefix));
  }
  tracedTokens = tokenIndex;
  tracedMask = attentionMask;
  return joinTiles(outputs, at);
}

Value DecoderTracer::mlpTile(Value normed, const std::string &prefix) {
  return gatedMlp(normed, prefix + ".mlp", model.intermediate_size());
}

Value DecoderTracer::gatedMlp(Value normed, const std::string &path,
                              int64_t inner) {
  int64_t hidden = model.hidden_size();
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

Value DecoderTracer::expertsTile(Value normed, const std::string &prefix) {
  // As transformers' Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock and
  // Qwen2MoeSparseMoeBlock (which adds the shared expert): the
  // router's logits, each token's top-k experts; each expert's tokens
  // through its SwiGLU MLP (gate_up_proj [experts, 2 inner, hidden]:
  // gate's rows, then up's; down_proj [experts, hidden, inner]), summed
  // back by the weights.
  const ::twill::ModelFamily::Experts &named = *family.experts;
  std::string path = prefix + ".mlp";
  Location at = loc(path);
  int64_t hidden = model.hidden_size(), experts = model.num_experts();
  int64_t k = model.num_experts_per_tok();
  int64_t inner = named.ownIntermediateSize ? model.moe_intermediate_size()
                                            : model.intermediate_size();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(normed.getType()).getShape();
  int64_t groups = shape[0], tokens = shape[1], rows = tokens * k;
  Split whole{TensorParallelStyle::Replicate};
  // The Hub's checkpoints keep the router and each expert's weights under
  // the family's module (Mixtral's block_sparse_moe).
  std::string hub = prefix + "." + named.hubModule.str();
  std::vector<std::string> hubRouter;
  if (hub != path)
    hubRouter.push_back(hub + ".gate.weight");
  std::string routerName = prefix + "." + ::twill::kRouterWeight.str();
  Value router = param(routerName, {experts, hidden}, baseTrainable(), whole,
                       baseWeight(), std::nullopt, hubRouter);
  Value logits =
      linearWith(normed, {router}, path + ".gate",
                 isLoraTargetParameter(routerName), {{experts, whole}})
          .front();
  Type i32 = builder.getI32Type();
  auto chosen = RankedTensorType::get({groups, tokens, k}, i32);
  auto route =
      RouteOp::create(builder, at, floatType({groups, tokens, k}), chosen,
                      logits, named.alwaysNormalize || model.norm_topk_prob());
  if (tracedMask)
    addRouterLoad(logits, route.getIndices(), at);
  auto sorted = ExpertPositionsOp::create(
      builder, at, chosen, RankedTensorType::get({groups, experts}, i32),
      route.getIndices());
  Value dispatched =
      DispatchOp::create(builder, at, floatType({groups, rows, hidden}), normed,
                         sorted.getPositions(), Value());
  // Stored fused, as transformers 5 holds them, or as the Hub's tensors
  // of each expert (what save_pretrained writes): gate's rows, then up's.
  auto perExpert = [&](std::initializer_list<llvm::StringRef> projections) {
    std::vector<std::string> tensors;
    for (int64_t e = 0; e < experts; ++e)
      for (llvm::StringRef projection : projections)
        tensors.push_back(
            llvm::formatv("{0}.experts.{1}.{2}.weight", hub, e, projection));
    return tensors;
  };
  std::string gateUpName = prefix + "." + ::twill::kExpertParameters[0].str(),
              downName = prefix + "." + ::twill::kExpertParameters[1].str();
  Value gateUp = expertsWeight(gateUpName, {experts, 2 * inner, hidden},
                               perExpert({named.gate, named.up}), at);
  Value down = expertsWeight(downName, {experts, hidden, inner},
                             perExpert({named.down}), at);
  // PEFT nests the wrapper of gate_up_proj (defined first) inside down's.
  Value both = expertsProduct(dispatched, sorted.getCounts(), gateUp,
                              gateUpName, isLoraTargetParameter(downName));
  Type half = floatType({groups, rows, inner});
  auto halves = SplitOp::create(builder, at, TypeRange{half, half}, both,
                                /*dim=*/2, /*blocks=*/1);
  Value act = SwigluOp::create(builder, at, half, halves.getPieces()[0],
                               halves.getPieces()[1]);
  Value out = expertsProduct(act, sorted.getCounts(), down, downName, 0);
  Value combined = CombineOp::create(builder, at, normed.getType(), out,
                                     sorted.getPositions(), route.getWeights());
  if (!named.sharedExpert)
    return combined;
  // Qwen2-MoE's shared expert, scaled by the sigmoid of its gate's one
  // value, which a product with a column of ones spreads over the hidden
  // size.
  Value shared = gatedMlp(normed, path + ".shared_expert",
                          model.shared_expert_intermediate_size());
  Value gate = linear(normed, path + ".shared_expert_gate",
                      "shared_expert_gate", hidden, 1, whole);
  Value ones = ConstantOp::create(builder, at, floatType({hidden, 1}),
                                  builder.getF64FloatAttr(1.0));
  Value gates = matmulTransposed(gate, ones, at);
  Value gated =
      SigmoidGateOp::create(builder, at, normed.getType(), gates, shared);
  return AddOp::create(builder, at, normed.getType(), combined, gated);
}

void DecoderTracer::addRouterLoad(Value logits, Value indices, Location at) {
  Type f32 = builder.getF32Type();
  auto sums = RankedTensorType::get({model.num_experts()}, f32);
  auto load = ExpertLoadOp::create(builder, at, sums, sums,
                                   RankedTensorType::get({}, f32), logits,
                                   indices, tracedMask);
  RouterLoad layer{load.getProbabilities(), load.getCounts(), load.getTokens()};
  if (!routerLoad.probabilities) {
    routerLoad = layer;
    return;
  }
  auto add = [&](Value &sum, Value more) {
    sum = AddOp::create(builder, at, sum.getType(), sum, more);
  };
  add(routerLoad.probabilities, layer.probabilities);
  add(routerLoad.counts, layer.counts);
  add(routerLoad.tokens, layer.tokens);
}

std::pair<Value, Value> DecoderTracer::withLoadBalancingLoss(Value lossSum) {
  if (!routerLoad.probabilities)
    return {lossSum, Value()};
  // transformers adds coef x the loss to the micro-batch's mean loss; the
  // host divides the step's gradient by its tokens, so the sum adds it
  // times them.
  Location at = loc("router_aux_loss");
  auto scalar = RankedTensorType::get({}, builder.getF32Type());
  Value aux =
      LoadBalancingLossOp::create(builder, at, scalar, routerLoad.probabilities,
                                  routerLoad.counts, routerLoad.tokens);
  Value weighted = ScaleOp::create(
      builder, at, scalar, MulOp::create(builder, at, scalar, aux, stepTokens),
      builder.getF64FloatAttr(model.router_aux_loss_coef()));
  return {AddOp::create(builder, at, scalar, lossSum, weighted), aux};
}

Value DecoderTracer::decoderLayer(Value hidden, int64_t layer) {
  tracedLayer = layer;
  layerMarker.layer = layer + (adaptersOff ? model.num_hidden_layers() : 0);
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

  bool dpo = job.train().objective() == ::twill::TrainConfig::DPO;
  bool precomputed =
      dpo && job.dpo().reference() == ::twill::DpoConfig::PRECOMPUTED;
  Value tokens = beginEntry(module.get(), "forward", EntryRole::Forward);
  // A precomputed reference is an input of the forward, after the batch's.
  Value reference;
  if (precomputed)
    reference =
        input(ValueRole::ReferenceLogps, builder.getF32Type(), {batch, 2});
  // A DPO step's gradient is of each micro-batch's mean loss, as TRL's: the
  // host weights the micro-batch's loss sum by 1 / its pairs (the train
  // step's seed; the forward's own loss is the sum).
  if (dpo)
    input(ValueRole::LossWeight, builder.getF32Type(), {});
  Value embedTable = embedTableParam();
  Value h = hiddenStates(tokens, embedTable);
  Value lmHead = lmHeadParam(embedTable);
  Value logits = logitsOf(h, lmHead);
  // Named, so that the runtime can dump it.
  logits.getDefiningOp()->setLoc(loc("logits"));
  logits.getDefiningOp()->setAttr(mlir::twill::kHostReadAttrName,
                                  builder.getUnitAttr());
  // Under DPO a row's segments are its chosen (0) and rejected (1)
  // sequences: the sums are each's.
  SmallVector<Value, 2> sums =
      lossSums(h, logits, lmHead, labels, dpo ? segments : Value());
  if (!dpo) {
    auto [lossSum, aux] = withLoadBalancingLoss(sums[0]);
    SmallVector<std::pair<Value, ValueRole>, 3> results = {
        {lossSum, ValueRole::LossSum}, {sums[1], ValueRole::TokenCount}};
    if (aux)
      results.push_back({aux, ValueRole::RouterAuxLoss});
    endEntry(results);
    return module;
  }
  // The reference is the base: the same decoder with every adapter off,
  // reading the same parameters; nothing trainable reaches its sums.
  if (!precomputed)
    reference = referenceLogProbabilities(tokens, embedTable, lmHead);
  SmallVector<Value, 3> loss = dpoLoss(sums, reference);
  endEntry({{loss[0], ValueRole::LossSum},
            {loss[1], ValueRole::TokenCount},
            {loss[2], ValueRole::DpoMetrics}});
  if (!precomputed)
    return module;

  // The reference's own entry point, which the runtime runs over the data
  // before training: the model as training starts, as TRL's reference is
  // (a new adapter, B = 0, adds nothing; a starting one is in it; a full
  // fine-tune's weights are the base's).
  tokens = beginEntry(module.get(), "reference", EntryRole::Reference);
  embedTable = embedTableParam();
  reference = sequenceLogProbabilities(tokens, embedTable, Value());
  endEntry({{reference, ValueRole::ReferenceLogps}});
  return module;
}

Value DecoderTracer::beginEntry(ModuleOp module, StringRef name,
                                EntryRole role) {
  builder.setInsertionPointToEnd(module.getBody());
  entry = func::FuncOp::create(builder, loc(name), name,
                               builder.getFunctionType({}, {}));
  setEntryRole(entry, role);
  body = entry.addEntryBlock();
  builder.setInsertionPointToStart(body);
  // Parameters and inputs are the function's: traced anew.
  numParams = 0;
  paramAttrs.clear();
  params.clear();
  paramNames.clear();
  inputRoles.clear();
  fp8Rounded.clear();
  tokenIndex = microBatch = tracedTokens = Value();
  attentionMask = tracedMask = stepTokens = Value();
  routerLoad = RouterLoad();

  Type i32 = builder.getI32Type();
  Value tokens = input(ValueRole::Tokens, i32);
  labels = input(ValueRole::Labels, i32);
  positions = input(ValueRole::Positions, i32);
  segments = input(ValueRole::Segments, i32);
  // LoRA dropout keys its masks by the positions' index in the run; the
  // reference has no adapters to drop.
  if (role != EntryRole::Reference && job.has_lora() &&
      job.lora().dropout() > 0) {
    tokenIndex = tracedTokens = input(ValueRole::TokenIndex, i32);
    microBatch = input(ValueRole::MicroBatch, builder.getI64Type(), {});
  }
  // The routers' load-balancing loss counts an example's tokens, not
  // padding (transformers' attention_mask), and is weighted by the step's
  // labelled tokens.
  if (model.output_router_logits()) {
    attentionMask = tracedMask = input(ValueRole::AttentionMask, i32);
    stepTokens = input(ValueRole::StepTokens, builder.getF32Type(), {});
  }
  return tokens;
}

void DecoderTracer::endEntry(ArrayRef<std::pair<Value, ValueRole>> results) {
  SmallVector<Value> values;
  for (auto [value, role] : results)
    values.push_back(value);
  func::ReturnOp::create(builder, entry.getLoc(), values);
  // What nothing reads goes (the reference's logits, where its loss forms
  // them a tile at a time), unless the host reads it.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*body)))
    if (!op.hasAttr(kHostReadAttrName) && isOpTriviallyDead(&op))
      op.erase();
  // The signature follows the arguments traced.
  entry.setFunctionType(
      builder.getFunctionType(body->getArgumentTypes(), ValueRange(values)));
  // Inputs and outputs are named after their roles.
  auto named = [&](StringRef attrName, ValueRole role) {
    return builder.getDictionaryAttr(
        {builder.getNamedAttr(attrName,
                              builder.getStringAttr(stringifyValueRole(role))),
         builder.getNamedAttr(kRoleAttrName,
                              ValueRoleAttr::get(builder.getContext(), role))});
  };
  SmallVector<Attribute> argAttrs(paramAttrs.begin(), paramAttrs.end());
  for (ValueRole role : inputRoles)
    argAttrs.push_back(named(kInputAttrName, role));
  entry.setAllArgAttrs(argAttrs);
  SmallVector<DictionaryAttr> resultAttrs;
  for (auto [value, role] : results)
    resultAttrs.push_back(named(kOutputAttrName, role));
  entry.setAllResultAttrs(resultAttrs);
}

Value DecoderTracer::embedTableParam() {
  return param("model.embed_tokens.weight",
               {model.vocab_size(), model.hidden_size()}, baseTrainable(),
               {TensorParallelStyle::Vocab}, baseWeight());
}

Value DecoderTracer::lmHeadParam(Value embedTable) {
  // A tied lm_head reads the embedding table; PEFT adapts it all the same.
  if (model.tie_word_embeddings())
    return embedTable;
  return param("lm_head.weight", {model.vocab_size(), model.hidden_size()},
               baseTrainable(), {TensorParallelStyle::Vocab}, baseWeight());
}

Value DecoderTracer::logitsOf(Value h, Value lmHead) {
  Split vocabRows{TensorParallelStyle::Vocab};
  Value logits = linearWith(h, {lmHead}, "lm_head", isLoraTarget("lm_head"),
                            {{model.vocab_size(), vocabRows}})
                     .front();
  // Gemma 2 squashes its logits into (-cap, cap).
  if (model.has_final_logit_softcapping())
    logits = SoftcapOp::create(
        builder, loc("lm_head"), logits.getType(), logits,
        builder.getF64FloatAttr(model.final_logit_softcapping()));
  return logits;
}

Value DecoderTracer::hiddenStates(Value tokens, Value embedTable) {
  int64_t hidden = model.hidden_size();
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
  return rmsNorm(h, "model.norm", hidden);
}

SmallVector<Value, 2> DecoderTracer::lossSums(Value h, Value logits,
                                              Value lmHead, Value labels,
                                              Value sequences) {
  int64_t vocab = model.vocab_size();
  Type f32 = builder.getF32Type(), i64 = builder.getI64Type();
  // Scalars, or each row's two sequences' sums.
  SmallVector<int64_t> shape;
  if (sequences)
    shape = {batch, 2};
  auto sums = [&](Type type) { return RankedTensorType::get(shape, type); };
  IntegerAttr sequenceCount =
      sequences ? builder.getI64IntegerAttr(2) : IntegerAttr();
  FloatAttr cap = model.has_final_logit_softcapping()
                      ? builder.getF64FloatAttr(model.final_logit_softcapping())
                      : FloatAttr();
  // The loss forms the logits (capped, Gemma 2's) a tile of tokens at a
  // time when they are a plain product (an adapted lm_head's are a sum):
  // the host still reads the whole logits, which the training step drops.
  // Under sequence parallelism its input is gathered a tile at a time too.
  int64_t tileTokens = job.parallel().loss_tile_tokens();
  Location at = loc("loss");
  if (tileTokens <= 0 || isLoraTarget("lm_head")) {
    auto whole = CrossEntropyOp::create(
        builder, at, sums(f32), sums(i64), logits, labels, sequences,
        /*ignore_index=*/::twill::kIgnoreLabel, /*shard_axis=*/nullptr,
        /*vocab_size=*/nullptr, sequenceCount);
    return {whole.getLoss(), whole.getCount()};
  }
  int64_t dp = job.parallel().dp();
  SmallVector<Value> inputs = sequenceTiles(h, vocabEndTile(), at);
  SmallVector<Value> tileLabels = sequenceTiles(labels, vocabEndTile(), at);
  SmallVector<Value> tileSequences(inputs.size());
  if (sequences)
    tileSequences = sequenceTiles(sequences, vocabEndTile(), at);
  SmallVector<Value, 2> total;
  for (auto [input, tileLabel, tileSequence] :
       llvm::zip_equal(inputs, tileLabels, tileSequences)) {
    int64_t positions = cast<RankedTensorType>(input.getType()).getDimSize(1);
    int64_t rows = std::min(tileTokens, (batch + dp - 1) / dp * positions);
    auto tile = LinearCrossEntropyOp::create(
        builder, at, sums(f32), sums(i64), floatType({rows, vocab}), input,
        lmHead, tileLabel, tileSequence,
        /*ignore_index=*/::twill::kIgnoreLabel, /*shard_axis=*/nullptr,
        /*vocab_size=*/nullptr, cap, sequenceCount);
    if (total.empty()) {
      total = {tile.getLoss(), tile.getCount()};
      continue;
    }
    total[0] = AddOp::create(builder, at, total[0].getType(), total[0],
                             tile.getLoss());
    total[1] = AddOp::create(builder, at, total[1].getType(), total[1],
                             tile.getCount());
  }
  return total;
}

/// A sequence's log-probability is minus its summed cross-entropy.
Value DecoderTracer::logProbabilities(Value crossEntropy) {
  return ScaleOp::create(builder, loc("dpo"), crossEntropy.getType(),
                         crossEntropy, builder.getF64FloatAttr(-1.0));
}

Value DecoderTracer::referenceLogProbabilities(Value tokens, Value embedTable,
                                               Value lmHead) {
  adaptersOff = true;
  llvm::scope_exit restore([&] { adaptersOff = false; });
  return sequenceLogProbabilities(tokens, embedTable, lmHead);
}

Value DecoderTracer::sequenceLogProbabilities(Value tokens, Value embedTable,
                                              Value lmHead) {
  Value h = hiddenStates(tokens, embedTable);
  if (!lmHead)
    lmHead = lmHeadParam(embedTable);
  return logProbabilities(
      lossSums(h, logitsOf(h, lmHead), lmHead, labels, segments)[0]);
}

SmallVector<Value, 3> DecoderTracer::dpoLoss(ArrayRef<Value> sums,
                                             Value reference) {
  const ::twill::DpoConfig &settings = job.dpo();
  auto scalar = [&](Type type) { return RankedTensorType::get({}, type); };
  std::string lossType =
      llvm::StringRef(::twill::DpoConfig::LossType_Name(settings.loss_type()))
          .lower();
  auto loss = DpoLossOp::create(
      builder, loc("dpo"), scalar(builder.getF32Type()),
      scalar(builder.getI64Type()),
      RankedTensorType::get({::twill::dpo::kMetrics}, builder.getF32Type()),
      logProbabilities(sums[0]), reference, sums[1],
      builder.getStringAttr(lossType), builder.getF64FloatAttr(settings.beta()),
      builder.getF64FloatAttr(settings.label_smoothing()));
  return {loss.getLoss(), loss.getPairs(), loss.getMetrics()};
}

namespace twill {
OwningOpRef<ModuleOp> buildDecoderModule(MLIRContext &context,
                                         const JobConfig &job,
                                         const TraceOptions &options) {
  return DecoderTracer(context, job, options).trace();
}
} // namespace twill
