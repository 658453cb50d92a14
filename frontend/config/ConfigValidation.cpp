//===- ConfigValidation.cpp - defaults and checks for a job ---------------===//

#include "frontend/config/JobConfig.h"
#include "frontend/config/ModelFamily.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVectorExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <limits>
#include <tuple>

using namespace twill;
namespace pb = google::protobuf;

/// Sets every unset singular scalar of `message`, and of each sub-message
/// that is present, to the default the schema declares.
static void fillDefaults(pb::Message &message) {
  const pb::Reflection &reflection = *message.GetReflection();
  const pb::Descriptor &type = *message.GetDescriptor();
  for (int i = 0; i < type.field_count(); ++i) {
    const pb::FieldDescriptor *field = type.field(i);
    if (field->is_repeated() || field->containing_oneof())
      continue;
    if (field->message_type()) {
      if (reflection.HasField(message, field))
        fillDefaults(*reflection.MutableMessage(&message, field));
      continue;
    }
    if (reflection.HasField(message, field))
      continue;
    switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      reflection.SetInt32(&message, field, field->default_value_int32());
      break;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      reflection.SetInt64(&message, field, field->default_value_int64());
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      reflection.SetUInt32(&message, field, field->default_value_uint32());
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      reflection.SetUInt64(&message, field, field->default_value_uint64());
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      reflection.SetDouble(&message, field, field->default_value_double());
      break;
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      reflection.SetFloat(&message, field, field->default_value_float());
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      reflection.SetBool(&message, field, field->default_value_bool());
      break;
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      reflection.SetEnum(&message, field, field->default_value_enum());
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      reflection.SetString(&message, field, field->default_value_string());
      break;
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      break;
    }
  }
}

void twill::resolveDefaults(JobConfig &config) {
  config.mutable_model();
  config.mutable_parallel();
  config.mutable_train();
  config.mutable_data();
  config.mutable_checkpoint();
  if (config.adaptation_case() == JobConfig::ADAPTATION_NOT_SET)
    config.mutable_lora();
  ModelConfig &model = *config.mutable_model();
  const ModelFamily *family = findModelFamily(model.model_type());
  // PEFT's and torchtune's default targets for Llama: q and v, which a
  // fused model's qkv_proj holds; none where parameters are named instead.
  LoraConfig *lora = config.has_lora() ? config.mutable_lora() : nullptr;
  if (lora && lora->target_modules().empty() &&
      lora->target_parameters().empty()) {
    if (family && family->fusedProjections) {
      lora->add_target_modules("qkv_proj");
    } else {
      lora->add_target_modules("q_proj");
      lora->add_target_modules("v_proj");
    }
  }
  // A router is no linear module in transformers 5: PEFT adapts the module
  // `gate` named in target_modules as the parameter gate.weight (and
  // writes it so), as here.
  if (lora && family && family->experts) {
    auto &modules = *lora->mutable_target_modules();
    auto router = llvm::find(modules, "gate");
    if (router != modules.end()) {
      modules.erase(router);
      if (!llvm::is_contained(lora->target_parameters(), "gate.weight"))
        lora->add_target_parameters("gate.weight");
    }
  }
  resolveFamilyDefaults(model);
  // Heads that divide the hidden size give the head size; otherwise, or
  // where the family's default is another, it must be stated (validation
  // says so).
  if (!model.has_head_dim() && model.num_attention_heads() > 0 &&
      model.hidden_size() % model.num_attention_heads() == 0 &&
      !(family && family->statesHeadDim))
    model.set_head_dim(model.hidden_size() / model.num_attention_heads());
  fillDefaults(config);
}

namespace {
/// Collects every problem of a config, one line each.
class Problems {
public:
  template <typename... Args> void add(const char *format, Args &&...args) {
    std::string line = llvm::formatv(format, std::forward<Args>(args)...).str();
    // One line per problem, however often a config repeats it.
    if (seen.insert(line).second)
      lines.push_back(std::move(line));
  }

  // Real numbers must be finite too: "positive" admits no infinity.
  template <typename T> void positive(llvm::StringRef field, T value) {
    if (value > 0 && isFinite(value))
      return;
    if constexpr (std::is_integral_v<T>)
      add("{0} must be positive, got {1}", field, numberText(value));
    else
      add("{0} must be a positive finite number, got {1}", field,
          numberText(value));
  }
  template <typename T> void nonNegative(llvm::StringRef field, T value) {
    if (value >= 0 && isFinite(value))
      return;
    if constexpr (std::is_integral_v<T>)
      add("{0} must be zero or positive, got {1}", field, numberText(value));
    else
      add("{0} must be zero or a positive finite number, got {1}", field,
          numberText(value));
  }
  /// A count past `most` is a typo, and the compiler's products of it
  /// would overflow.
  void atMost(llvm::StringRef field, int64_t value, int64_t most) {
    if (value > most)
      add("{0} must be at most {1}, got {2}", field, most, value);
  }
  template <typename T> static bool isFinite(T value) {
    if constexpr (std::is_integral_v<T>)
      return true;
    else
      return std::isfinite(double(value));
  }

private:
  /// An integer as itself, a real in its shortest form (1e-05, 0.5).
  template <typename T> static std::string numberText(T value) {
    if constexpr (std::is_integral_v<T>)
      return std::to_string(value);
    else
      return llvm::formatv("{0}", llvm::format("%g", double(value))).str();
  }

public:
  void oneOf(llvm::StringRef field, llvm::StringRef value,
             llvm::ArrayRef<llvm::StringRef> allowed) {
    if (!llvm::is_contained(allowed, value))
      add("{0} '{1}' is not supported; allowed: {2}", field, value,
          llvm::join(allowed, ", "));
  }

  bool empty() const { return lines.empty(); }

  llvm::Error takeError() {
    if (lines.empty())
      return llvm::Error::success();
    constexpr size_t kShown = 20;
    size_t hidden = lines.size() > kShown ? lines.size() - kShown : 0;
    lines.resize(lines.size() - hidden);
    if (hidden)
      lines.push_back(llvm::formatv("... and {0} more problems", hidden));
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   llvm::join(lines, "\n"));
  }

private:
  std::vector<std::string> lines;
  llvm::StringSet<> seen;
};
} // namespace

/// The family's own keys: its class, its activation, the biases and soft
/// caps it reads.
static void validateFamilyKeys(const ModelConfig &model,
                               const ModelFamily *family, Problems &problems) {
  problems.oneOf("model.model_type", model.model_type(),
                 llvm::map_to_vector(modelFamilies(), [](const ModelFamily &f) {
                   return llvm::StringRef(f.modelType);
                 }));
  // A model of another head (a classifier) would be saved as the causal LM
  // Twill trains.
  if (family)
    for (const std::string &architecture : model.architectures())
      problems.oneOf("model.architectures", architecture,
                     {llvm::StringRef(family->causalLm)});
  // Gemma's classes read hidden_activation (checked below), whatever
  // hidden_act says: Gemma 2's config.json states both.
  if (!(family && family->gemmaLayer))
    problems.oneOf("model.hidden_act", model.hidden_act(), {"silu"});
  // A key the family's transformers class does not read would be trained
  // here and ignored there.
  if (family && model.attention_bias() && !family->readsAttentionBias)
    problems.add("model.attention_bias must be false: {0} models have no "
                 "attention biases of that kind",
                 family->modelType);
  if (family && model.mlp_bias() && !family->readsMlpBias)
    problems.add("model.mlp_bias must be false: {0} models have no MLP "
                 "biases",
                 family->modelType);
  // Gemma's MLP gates by GELU's tanh form; the others' by SiLU.
  if (family && family->gemmaLayer)
    problems.oneOf("model.hidden_activation", model.hidden_activation(),
                   {"gelu_pytorch_tanh"});
  else if (model.has_hidden_activation())
    problems.add("model.hidden_activation is Gemma's key; {0} models read "
                 "model.hidden_act",
                 model.model_type());
  if (model.has_query_pre_attn_scalar())
    problems.positive("model.query_pre_attn_scalar",
                      model.query_pre_attn_scalar());
  if (model.has_rope_local_base_freq())
    problems.positive("model.rope_local_base_freq",
                      model.rope_local_base_freq());
  // Soft-capping is Gemma's: its layer reads the keys.
  for (auto [field, set, cap] : {std::tuple{"model.attn_logit_softcapping",
                                            model.has_attn_logit_softcapping(),
                                            model.attn_logit_softcapping()},
                                 std::tuple{"model.final_logit_softcapping",
                                            model.has_final_logit_softcapping(),
                                            model.final_logit_softcapping()}}) {
    if (!set)
      continue;
    if (family && !family->gemmaLayer)
      problems.add("{0} must be null: {1} models have no logit soft-capping",
                   field, family->modelType);
    else
      problems.positive(field, cap);
  }
}

/// What transformers' classes can have and Twill does not build.
static void validateUnbuilt(const ModelConfig &model, Problems &problems) {
  if (model.use_bidirectional_attention())
    problems.add("model.use_bidirectional_attention must be false: Twill "
                 "trains causal language models");
  if (model.attention_dropout() != 0)
    problems.add("model.attention_dropout must be 0 (attention dropout is "
                 "not built), got {0}",
                 model.attention_dropout());
  for (auto [field, rate] :
       {std::pair{"model.resid_pdrop", model.resid_pdrop()},
        std::pair{"model.embd_pdrop", model.embd_pdrop()}})
    if (rate != 0)
      problems.add("{0} must be 0 (dropout in the model is not built), got {1}",
                   field, rate);
  if (model.partial_rotary_factor() != 1)
    problems.add("model.partial_rotary_factor must be 1 (a rotary embedding "
                 "of part of each head is not built), got {0}",
                 model.partial_rotary_factor());
}

/// The most layers a model may have (validateSizes): what loops over the
/// layers of a job not yet valid stop at.
constexpr int64_t kMostLayers = 1 << 10;

/// Where attention slides, layer by layer.
static void validateLayerTypes(const ModelConfig &model, Problems &problems) {
  // A window no layer attends through may be anything (Qwen2-MoE's config
  // writes 0 without use_sliding_window).
  bool used = false;
  for (int64_t layer = 0;
       layer < std::min(model.num_hidden_layers(), kMostLayers) && !used;
       ++layer)
    used = slidingWindowOf(model, layer).has_value();
  if (used)
    problems.positive("model.sliding_window", model.sliding_window());
  for (const std::string &type : model.layer_types())
    problems.oneOf("model.layer_types", type,
                   {"full_attention", "sliding_attention"});
  if (!model.layer_types().empty() &&
      model.layer_types_size() != model.num_hidden_layers())
    problems.add("model.layer_types must name each of the {0} layers, got {1}",
                 model.num_hidden_layers(), model.layer_types_size());
}

/// Each size positive and within its most; whether all are.
static bool validateSizes(const ModelConfig &model, Problems &problems) {
  // The most of each: far past any model trained today (vocab 262,144,
  // hidden 16,384, intermediate 53,248, 126 layers, 128 heads), and small
  // enough that the compiler's products of them fit int64.
  struct Size {
    llvm::StringRef field;
    int64_t value, most;
  } sizes[] = {
      {"model.vocab_size", model.vocab_size(), 1 << 24},
      {"model.hidden_size", model.hidden_size(), 1 << 18},
      {"model.num_hidden_layers", model.num_hidden_layers(), kMostLayers},
      {"model.num_attention_heads", model.num_attention_heads(), 1 << 12},
      {"model.num_key_value_heads", model.num_key_value_heads(), 1 << 12},
      {"model.intermediate_size", model.intermediate_size(), 1 << 20},
      {"model.max_position_embeddings", model.max_position_embeddings(),
       std::numeric_limits<int64_t>::max()}};
  bool sizesOk = true;
  for (auto [field, value, most] : sizes) {
    if (value <= 0) {
      problems.add("{0} must be positive, got {1} (set it in the job, or "
                   "point checkpoint.base_dir at a Hugging Face model folder)",
                   field, value);
      sizesOk = false;
    }
    problems.atMost(field, value, most);
    sizesOk &= value <= most;
  }
  problems.positive("model.rms_norm_eps", model.rms_norm_eps());
  problems.positive("model.rope_theta", model.rope_theta());
  return sizesOk;
}

/// The heads: KV heads dividing the query heads, a head size.
static void validateHeads(const ModelConfig &model, const ModelFamily *family,
                          Problems &problems) {
  if (model.num_attention_heads() % model.num_key_value_heads() != 0)
    problems.add("model.num_attention_heads ({0}) must be divisible by "
                 "model.num_key_value_heads ({1})",
                 model.num_attention_heads(), model.num_key_value_heads());
  // An unstated head size (0, as defaults fill it) did not follow from the
  // heads; where the heads divide the hidden size, a 0 was stated (a
  // config.json's "head_dim": 0), which is no size: transformers' Llama
  // divides by it, its Mistral takes hidden_size / heads instead.
  bool divides = model.hidden_size() % model.num_attention_heads() == 0;
  if (model.head_dim() == 0 && family && family->statesHeadDim)
    problems.add("model.head_dim must be set for {0} models: transformers' "
                 "default for them is not hidden_size / num_attention_heads",
                 family->modelType);
  else if (model.head_dim() == 0 && !divides)
    problems.add("model.hidden_size ({0}) must be divisible by "
                 "model.num_attention_heads ({1})",
                 model.hidden_size(), model.num_attention_heads());
  else if (model.head_dim() == 0)
    problems.add("model.head_dim must be positive, got 0: leave it out for "
                 "hidden_size / num_attention_heads ({0})",
                 model.hidden_size() / model.num_attention_heads());
  else if (model.head_dim() < 0)
    problems.add("model.head_dim must be positive, got {0}", model.head_dim());
  else if (model.head_dim() % 2 != 0)
    problems.add("model.head_dim ({0}) must be even for rotary embeddings",
                 model.head_dim());
  problems.atMost("model.head_dim", model.head_dim(), 1 << 16);
}

/// Llama 3.1's or linear RoPE scaling.
static void validateRopeScaling(const RopeScaling &scaling,
                                Problems &problems) {
  problems.oneOf("model.rope_scaling.rope_type", scaling.rope_type(),
                 {"llama3", "linear"});
  if (!(scaling.factor() >= 1) || !std::isfinite(scaling.factor()))
    problems.add("model.rope_scaling.factor must be a finite number of at "
                 "least 1, got {0}",
                 scaling.factor());
  if (scaling.rope_type() != "llama3") // linear: the factor alone
    return;
  if (!(scaling.low_freq_factor() > 0 &&
        scaling.high_freq_factor() > scaling.low_freq_factor() &&
        std::isfinite(scaling.high_freq_factor())))
    problems.add("model.rope_scaling needs 0 < low_freq_factor ({0}) < "
                 "high_freq_factor ({1})",
                 scaling.low_freq_factor(), scaling.high_freq_factor());
  problems.positive("model.rope_scaling.original_max_position_embeddings",
                    scaling.original_max_position_embeddings());
}

static void validateModel(const ModelConfig &model, Problems &problems) {
  const ModelFamily *family = findModelFamily(model.model_type());
  validateFamilyKeys(model, family, problems);
  validateUnbuilt(model, problems);
  validateLayerTypes(model, problems);
  if (!validateSizes(model, problems))
    return;
  validateHeads(model, family, problems);
  if (model.has_rope_scaling())
    validateRopeScaling(model.rope_scaling(), problems);
}

static constexpr llvm::StringRef kLoraTargets[] = {
    "q_proj",    "k_proj",  "v_proj",    "o_proj",
    "gate_proj", "up_proj", "down_proj", "lm_head"};
/// A fused model's modules (Phi-3's), as PEFT adapts them.
static constexpr llvm::StringRef kFusedLoraTargets[] = {
    "qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"};

static void validateLora(const LoraConfig &lora, const ModelConfig &model,
                         Problems &problems) {
  const ModelFamily *family = findModelFamily(model.model_type());
  llvm::SmallVector<llvm::StringRef> targets(
      family && family->fusedProjections
          ? llvm::ArrayRef<llvm::StringRef>(kFusedLoraTargets)
          : llvm::ArrayRef<llvm::StringRef>(kLoraTargets));
  // A linear layer to one value, which PEFT adapts as any other.
  if (family && family->experts && family->experts->sharedExpert)
    targets.push_back("shared_expert_gate");
  problems.positive("lora.rank", lora.rank());
  problems.atMost("lora.rank", lora.rank(), 1 << 16);
  problems.positive("lora.alpha", lora.alpha());
  if (!(lora.dropout() >= 0 && lora.dropout() < 1))
    problems.add("lora.dropout must be in [0, 1), got {0}", lora.dropout());
  if (lora.use_dora() && llvm::is_contained(lora.target_modules(), "lm_head"))
    // lm_head is vocab-parallel and may be the embedding table: its rows'
    // norms would need the whole vocab on every rank.
    problems.add("lora.use_dora does not support lm_head in "
                 "lora.target_modules; adapt the projections only");
  llvm::StringSet<> seen;
  for (const std::string &target : lora.target_modules()) {
    problems.oneOf("lora.target_modules", target, targets);
    if (!seen.insert(target).second)
      problems.add("lora.target_modules lists '{0}' twice", target);
  }
  // PEFT's ParamWrapper refuses both: its input is not the product's.
  if (!lora.target_parameters().empty() && lora.dropout() != 0)
    problems.add("lora.dropout must be 0 with lora.target_parameters (PEFT "
                 "adapts parameters without dropout), got {0}",
                 lora.dropout());
  if (!lora.target_parameters().empty() && lora.use_dora())
    problems.add("lora.use_dora does not support lora.target_parameters "
                 "(nor does PEFT)");
  seen.clear();
  for (const std::string &target : lora.target_parameters())
    if (!seen.insert(target).second)
      problems.add("lora.target_parameters lists '{0}' twice", target);
}

static void validateTrain(const TrainConfig &train, Problems &problems) {
  problems.positive("train.batch_size", train.batch_size());
  problems.positive("train.seq_len", train.seq_len());
  problems.positive("train.gradient_accumulation_steps",
                    train.gradient_accumulation_steps());
  // A hundred times the longest context trained today; the compiler's
  // tiles of a longer one take minutes and gigabytes to form.
  problems.atMost("train.seq_len", train.seq_len(), 1 << 27);
  problems.atMost("train.gradient_accumulation_steps",
                  train.gradient_accumulation_steps(), 1 << 20);
  // Times the steps of an epoch, the run's steps: 2^63 epochs overflowed
  // into an error about a checkpoint that was not there.
  problems.atMost("train.epochs", train.epochs(), 1 << 20);
  constexpr int64_t kMostTokens = int64_t(1) << 32;
  if (train.seq_len() > 0 &&
      train.batch_size() > kMostTokens / train.seq_len())
    problems.add("train.batch_size x train.seq_len (the tokens of a "
                 "micro-batch) must be at most {0}, got {1} x {2}",
                 kMostTokens, train.batch_size(), train.seq_len());
  problems.positive("train.epochs", train.epochs());
  problems.nonNegative("train.max_steps_per_epoch",
                       train.max_steps_per_epoch());
  problems.positive("train.lr", train.lr());
  for (auto [field, beta] :
       {std::pair<llvm::StringRef, double>{"train.beta1", train.beta1()},
        {"train.beta2", train.beta2()}})
    if (!(beta >= 0 && beta < 1))
      problems.add("{0} must be in [0, 1), got {1}", field, beta);
  problems.positive("train.eps", train.eps());
  problems.nonNegative("train.weight_decay", train.weight_decay());
  problems.nonNegative("train.warmup_steps", train.warmup_steps());
  problems.nonNegative("train.max_grad_norm", train.max_grad_norm());
  problems.positive("train.log_every", train.log_every());
}

/// What a micro-batch through the model forms, in elements: the weights,
/// and each token's values in every layer (a generous count, not the cost
/// model's). At most 2^52, so that every byte count the compiler adds up
/// (a few bytes each, a few hundred values deep) stays inside int64.
static void validateScale(const JobConfig &config, Problems &problems) {
  const ModelConfig &model = config.model();
  double hidden = model.hidden_size(), inner = model.intermediate_size(),
         vocab = model.vocab_size(), layers = model.num_hidden_layers(),
         heads = double(model.num_attention_heads()) + 2 *
                 double(model.num_key_value_heads()),
         rank = config.has_lora() ? config.lora().rank() : 0,
         tokens = double(config.train().batch_size()) *
                  double(config.train().seq_len());
  double width = 4 * hidden + 3 * inner + heads * double(model.head_dim()) +
                 7 * rank;
  double weights = layers * (4 * hidden * hidden + 3 * hidden * inner) +
                   2 * vocab * hidden;
  double elements = tokens * (layers * width + vocab) + weights;
  constexpr double kMostElements = 4503599627370496.0; // 2^52
  if (!(elements <= kMostElements))
    problems.add("the job is too large to compile: {0} tokens a micro-batch "
                 "through this model form about {1} values, more than 2^52; "
                 "lower train.batch_size or train.seq_len",
                 llvm::format("%.0f", tokens), llvm::format("%.3g", elements));
}

/// NF4's block: a weight's rows are whole blocks of it.
constexpr int64_t kNf4Block = 64;

/// Each of `sizes` (a config field, or a product of two, and its value)
/// whole blocks of NF4, where it is set: a quantized `weight`'s rows are
/// cut into them.
static void requireNf4Blocks(
    std::initializer_list<std::pair<const char *, int64_t>> sizes,
    llvm::StringRef weight, Problems &problems) {
  for (auto [what, columns] : sizes)
    if (columns > 0 && columns % kNf4Block)
      problems.add("quantization.base NF4 quantizes blocks of {0} values "
                   "along each {1}'s rows, and {2} ({3}) is no multiple of "
                   "{0}: the block size does not divide it",
                   kNf4Block, weight, what, columns);
}

/// A quantized base: frozen, and (NF4) every projection's rows whole
/// blocks of 64 values (bitsandbytes' NF4 blocks, which no shard may cut).
static void validateQuantization(const JobConfig &config, Problems &problems) {
  QuantizationConfig::Format format = config.quantization().base();
  if (config.quantization().fp8_inputs() != QuantizationConfig::AS_IS &&
      format != QuantizationConfig::FP8)
    problems.add(
        "quantization.fp8_inputs {0} rounds the inputs of an FP8 "
        "base's products, but quantization.base is {1}: set base "
        "FP8, or leave fp8_inputs out",
        QuantizationConfig::Fp8Inputs_Name(config.quantization().fp8_inputs()),
        QuantizationConfig::Format_Name(format));
  if (format == QuantizationConfig::NONE)
    return;
  std::string name = QuantizationConfig::Format_Name(format);
  if (config.has_full_finetune())
    problems.add("quantization.base {0} stores the frozen base weights "
                 "quantized, but full_finetune trains them: a trained weight "
                 "cannot be {0}; use lora",
                 name);
  const ModelConfig &model = config.model();
  const ModelFamily *family = findModelFamily(model.model_type());
  if (family && family->fusedProjections)
    problems.add("quantization.base {0} does not yet quantize fused "
                 "projections ({1}'s qkv_proj and gate_up_proj)",
                 name, model.model_type());
  if (format != QuantizationConfig::NF4)
    return;
  requireNf4Blocks({{"model.hidden_size", model.hidden_size()},
                    {"model.intermediate_size", model.intermediate_size()},
                    {"model.num_attention_heads x model.head_dim",
                     model.num_attention_heads() * model.head_dim()}},
                   "projection", problems);
}

/// DPO: preference pairs, LoRA (the reference is the base with every
/// adapter off), and its loss's settings in range; the dpo section and the
/// preference format are DPO's only.
static void validateObjective(const JobConfig &config, Problems &problems) {
  bool dpo = config.train().objective() == TrainConfig::DPO;
  bool pairs = config.data().format() == DataConfig::PREFERENCE;
  if (!dpo) {
    if (pairs)
      problems.add("data.format PREFERENCE holds preference pairs, which "
                   "train.objective DPO trains on; set it");
    if (config.has_dpo())
      problems.add("the dpo section configures train.objective DPO; set it, "
                   "or leave the section out");
    return;
  }
  if (!pairs)
    problems.add("train.objective DPO trains on preference pairs: set "
                 "data.format PREFERENCE");
  const DpoConfig &settings = config.dpo();
  // A full fine-tune's reference is the model before its first step: there
  // is no adapter to turn off, so it is computed once, before training.
  if (config.has_full_finetune() &&
      settings.reference() != DpoConfig::PRECOMPUTED)
    problems.add("train.objective DPO of a full fine-tune needs "
                 "dpo.reference PRECOMPUTED: its reference is the model "
                 "before training, computed once over the data (with lora "
                 "it is the base with every adapter off)");
  problems.positive("dpo.beta", settings.beta());
  double smoothing = settings.label_smoothing();
  if (!(smoothing >= 0 && smoothing < 0.5))
    problems.add("dpo.label_smoothing must be in [0, 0.5), got {0}",
                 llvm::format("%g", smoothing));
  else if (smoothing > 0 && settings.loss_type() != DpoConfig::SIGMOID &&
           settings.loss_type() != DpoConfig::ROBUST)
    problems.add("dpo.label_smoothing smooths the SIGMOID and ROBUST losses; "
                 "{0} has none",
                 DpoConfig::LossType_Name(settings.loss_type()));
}

/// Each of lora.target_parameters names a parameter of some sparse layer
/// that LoRA adapts in place: PEFT fails where none matches at all; one
/// that matches nothing is a typo either way.
static void validateTargetParameters(const JobConfig &config,
                                     Problems &problems) {
  const ModelConfig &model = config.model();
  // Layers past what validateModel allows are not looped over.
  int64_t layers = std::min(model.num_hidden_layers(), kMostLayers);
  for (const std::string &target : config.lora().target_parameters()) {
    LoraConfig one;
    one.add_target_parameters(target);
    bool matched = false;
    for (int64_t layer = 0; layer < layers && !matched; ++layer) {
      if (!hasExperts(model, layer))
        continue;
      std::string prefix = llvm::formatv("model.layers.{0}.", layer).str();
      matched = targetsParameter(one, prefix + kRouterWeight.str());
      for (llvm::StringRef parameter : kExpertParameters)
        matched = matched || targetsParameter(one, prefix + parameter.str());
    }
    if (!matched)
      problems.add("lora.target_parameters names '{0}', which is no "
                   "parameter of a sparse layer: Twill adapts {1}, {2} and "
                   "{3} (the router)",
                   target, kExpertParameters[0], kExpertParameters[1],
                   kRouterWeight);
  }
}

/// A mixture of experts' sizes and layers, its routers' load-balancing
/// loss and a quantized base of its experts.
static void validateExperts(const JobConfig &config, Problems &problems) {
  const ModelConfig &model = config.model();
  const ModelFamily *family = findModelFamily(model.model_type());
  if (!family || !family->experts) {
    if (model.num_experts() != 0)
      problems.add("model.num_experts must be 0: {0} models have no experts",
                   model.model_type());
    if (model.output_router_logits())
      problems.add("model.output_router_logits must be false: {0} models "
                   "have no router",
                   model.model_type());
    if (config.has_lora() && !config.lora().target_parameters().empty())
      problems.add("lora.target_parameters must be empty for {0} models "
                   "(they adapt a mixture of experts' router and experts); "
                   "adapt modules with lora.target_modules",
                   model.model_type());
    return;
  }
  if (config.has_lora())
    validateTargetParameters(config, problems);
  problems.positive("model.num_experts", model.num_experts());
  if (family->experts->ownIntermediateSize)
    problems.positive("model.moe_intermediate_size",
                      model.moe_intermediate_size());
  if (family->experts->sharedExpert)
    problems.positive("model.shared_expert_intermediate_size",
                      model.shared_expert_intermediate_size());
  problems.positive("model.decoder_sparse_step", model.decoder_sparse_step());
  if (model.num_experts_per_tok() < 1 ||
      model.num_experts_per_tok() > model.num_experts())
    problems.add("model.num_experts_per_tok must be 1 to model.num_experts "
                 "({0}), got {1}",
                 model.num_experts(), model.num_experts_per_tok());
  for (int64_t layer : model.mlp_only_layers())
    if (layer < 0 || layer >= model.num_hidden_layers())
      problems.add("model.mlp_only_layers names layer {0} of {1}", layer,
                   model.num_hidden_layers());
  // The routers' load-balancing loss, transformers' (off unless asked).
  if (model.output_router_logits() &&
      config.train().objective() == TrainConfig::DPO)
    problems.add("model.output_router_logits must be false under "
                 "train.objective DPO: the routers' load-balancing loss is "
                 "built for supervised fine-tuning alone");
  if (!(model.router_aux_loss_coef() >= 0) ||
      !std::isfinite(model.router_aux_loss_coef()))
    problems.add("model.router_aux_loss_coef must be 0 or more, got {0}",
                 model.router_aux_loss_coef());
  // PEFT adapts a mixture of experts' MLP projections as target_parameters
  // of the experts, not as modules.
  if (config.has_lora())
    for (llvm::StringRef mlp : {"gate_proj", "up_proj", "down_proj"})
      if (llvm::is_contained(config.lora().target_modules(), mlp))
        problems.add("lora.target_modules may not name {0} for {1} models: "
                     "PEFT adapts the experts' projections as parameters; "
                     "set lora.target_parameters=mlp.experts.gate_up_proj,"
                     "mlp.experts.down_proj",
                     mlp, model.model_type());
  // A quantized base holds the experts' weights as their rows; their
  // grouped products read them dequantized, their inputs as they are.
  if (config.quantization().fp8_inputs() != QuantizationConfig::AS_IS)
    problems.add("quantization.fp8_inputs must be AS_IS for {0} models (the "
                 "experts' products do not round their inputs yet)",
                 model.model_type());
  if (config.quantization().base() == QuantizationConfig::NF4)
    requireNf4Blocks({{"model.moe_intermediate_size",
                       model.moe_intermediate_size()},
                      {"model.shared_expert_intermediate_size",
                       model.shared_expert_intermediate_size()}},
                     "weight", problems);
}

llvm::Error twill::validateJobConfig(const JobConfig &config) {
  Problems problems;
  validateModel(config.model(), problems);
  validateExperts(config, problems);
  if (config.has_lora())
    validateLora(config.lora(), config.model(), problems);
  validateQuantization(config, problems);
  validateObjective(config, problems);
  // No divisibility constraint ties dp or tp to any model size: the compiler
  // pads and masks what does not divide.
  problems.positive("parallel.dp", config.parallel().dp());
  problems.positive("parallel.tp", config.parallel().tp());
  // dp x tp ranks, checked before anything multiplies them (an overflow
  // asked mpirun for -np 0).
  constexpr int64_t kMostRanks = int64_t(1) << 20;
  int64_t dp = config.parallel().dp(), tp = config.parallel().tp();
  if (dp > 0 && tp > 0 && (dp > kMostRanks || tp > kMostRanks / dp))
    problems.add("parallel.dp x parallel.tp must be at most {0} ranks, got "
                 "{1} x {2}",
                 kMostRanks, dp, tp);
  // Under a second, every collective of a real step times out, and the
  // message blames ranks that were never late.
  if (!(config.parallel().collective_timeout_s() >= 1) ||
      !std::isfinite(config.parallel().collective_timeout_s()))
    problems.add("parallel.collective_timeout_s must be a finite number of at "
                 "least 1 (second), got {0}",
                 llvm::format("%g", config.parallel().collective_timeout_s()));
  problems.nonNegative("parallel.prefetch_layers",
                       config.parallel().prefetch_layers());
  problems.nonNegative("parallel.loss_tile_tokens",
                       config.parallel().loss_tile_tokens());
  problems.nonNegative("parallel.mlp_tile_tokens",
                       config.parallel().mlp_tile_tokens());
  problems.nonNegative("parallel.attention_tile_tokens",
                       config.parallel().attention_tile_tokens());
  problems.nonNegative("parallel.memory_budget_gb",
                       config.parallel().memory_budget_gb());
  // In bytes it must fit an int64 with room: more than a petabyte per rank
  // is a typo, which would overflow to a budget nothing fits.
  if (config.parallel().memory_budget_gb() > 1e6)
    problems.add("parallel.memory_budget_gb must be at most 1e6 (a petabyte "
                 "per rank), got {0}",
                 llvm::format("%g", config.parallel().memory_budget_gb()));
  for (auto [field, layers] : {std::pair{"parallel.checkpoint_layers",
                                         config.parallel().checkpoint_layers()},
                               std::pair{"parallel.offload_layers",
                                         config.parallel().offload_layers()}})
    if (layers < -1)
      problems.add("{0} must be -1 (every layer) or a count of layers, got "
                   "{1}",
                   field, layers);
  validateTrain(config.train(), problems);
  if (problems.empty()) // of sizes that are each in range
    validateScale(config, problems);
  problems.nonNegative("checkpoint.save_every",
                       config.checkpoint().save_every());
  const CheckpointConfig &checkpoint = config.checkpoint();
  if (checkpoint.output_dir().empty())
    problems.add("checkpoint.output_dir must name a folder for the run's "
                 "log, checkpoints and adapter, got an empty one");
  // The merged model and the full fine-tune's weights are written as the
  // base's files are named: into the base's folder, over it.
  auto folder = [](llvm::StringRef path) {
    llvm::SmallString<256> normal(path);
    llvm::sys::path::remove_dots(normal, /*remove_dot_dot=*/true);
    return std::string(llvm::StringRef(normal).rtrim('/'));
  };
  if (!checkpoint.base_dir().empty() &&
      folder(checkpoint.base_dir()) == folder(checkpoint.output_dir()))
    problems.add("checkpoint.output_dir is checkpoint.base_dir ({0}): the "
                 "run would write its model over the base model's files; "
                 "give the run another folder",
                 checkpoint.output_dir());
  if (config.checkpoint().random_base() &&
      !config.checkpoint().base_dir().empty())
    problems.add("checkpoint.random_base and checkpoint.base_dir exclude "
                 "each other: start from random weights or from a model");
  if (checkpoint.merged() && !checkpoint.save_final())
    problems.add("checkpoint.merged asks for the merged model at the end, "
                 "checkpoint.save_final: false for nothing written at the "
                 "end: choose one");
  return problems.takeError();
}
