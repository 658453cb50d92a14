//===- ConfigTest.cpp - job config loading, overrides, import, checks -----===//

#include "frontend/config/JobConfig.h"
#include "frontend/config/ModelFamily.h"

#include "google/protobuf/util/message_differencer.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

using namespace twill;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

std::string sourcePath(llvm::StringRef relative) {
  llvm::SmallString<256> path(TWILL_SOURCE_DIR);
  llvm::sys::path::append(path, relative);
  return std::string(path);
}

/// A fresh directory for one test's files, removed with the object.
class TempDir {
public:
  TempDir() {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("twill-test", path));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }

  std::string write(llvm::StringRef name, llvm::StringRef contents) {
    llvm::SmallString<256> file(path);
    llvm::sys::path::append(file, name);
    std::error_code error;
    llvm::raw_fd_ostream os(file, error);
    EXPECT_FALSE(error) << error.message();
    os << contents;
    return std::string(file);
  }
  std::string str() const { return std::string(path); }

private:
  llvm::SmallString<256> path;
};

/// The error text of a failed Expected, or "" with a test failure if it
/// succeeded.
template <typename T> std::string errorOf(llvm::Expected<T> value) {
  if (value) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(value.takeError());
}

std::string errorOf(llvm::Error error) {
  EXPECT_TRUE(bool(error)) << "expected an error";
  return llvm::toString(std::move(error));
}

JobConfig loadTiny(llvm::ArrayRef<std::string> overrides = {}) {
  llvm::Expected<JobConfig> config =
      loadJobConfig(sourcePath("configs/tiny.textproto"), overrides);
  EXPECT_TRUE(bool(config)) << llvm::toString(config.takeError());
  return config ? *config : JobConfig();
}

/// A resolved tiny job with `override` applied, checked again.
/// The validation error after the space-separated `overrides`.
std::string validationErrorAfter(llvm::StringRef overrides) {
  JobConfig config = loadTiny();
  llvm::SmallVector<llvm::StringRef> each;
  overrides.split(each, ' ', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef override : each)
    EXPECT_FALSE(applyOverride(config, override));
  return errorOf(validateJobConfig(config));
}

bool sameMessage(const google::protobuf::Message &a,
                 const google::protobuf::Message &b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

TEST(JobConfigLoading, ShippedConfigsLoadAndValidate) {
  for (const char *name :
       {"configs/tiny.textproto", "configs/llama3_1_8b_lora.textproto",
        "configs/llama3_3_70b_lora.textproto"}) {
    llvm::Expected<JobConfig> config = loadJobConfig(sourcePath(name), {});
    EXPECT_TRUE(bool(config))
        << name << ": " << llvm::toString(config.takeError());
  }
}

TEST(JobConfigLoading, ReferenceRunsHaveTheirSettings) {
  auto config8b =
      loadJobConfig(sourcePath("configs/llama3_1_8b_lora.textproto"), {});
  ASSERT_TRUE(bool(config8b));
  EXPECT_EQ(config8b->parallel().tp(), 8);
  EXPECT_EQ(config8b->train().batch_size(), 2);
  EXPECT_EQ(config8b->train().seq_len(), 8192);
  EXPECT_EQ(config8b->train().gradient_accumulation_steps(), 8);
  EXPECT_EQ(config8b->lora().rank(), 8);
  EXPECT_EQ(config8b->lora().alpha(), 16);
  EXPECT_DOUBLE_EQ(config8b->train().lr(), 1e-4);

  auto config70b =
      loadJobConfig(sourcePath("configs/llama3_3_70b_lora.textproto"), {});
  ASSERT_TRUE(bool(config70b));
  EXPECT_EQ(config70b->parallel().dp(), 2);
  EXPECT_EQ(config70b->parallel().tp(), 8);
  EXPECT_EQ(config70b->train().batch_size(), 1);
  EXPECT_EQ(config70b->train().seq_len(), 256);
  EXPECT_EQ(config70b->train().gradient_accumulation_steps(), 8);
  EXPECT_EQ(config70b->lora().rank(), 16);
  EXPECT_EQ(config70b->lora().alpha(), 32);
  EXPECT_EQ(config70b->model().num_hidden_layers(), 80);
}

TEST(JobConfigLoading, DefaultsAreResolved) {
  llvm::Expected<JobConfig> config =
      parseJobConfig("model { vocab_size: 8 hidden_size: 8 "
                     "num_hidden_layers: 1 num_attention_heads: 2 "
                     "num_key_value_heads: 1 intermediate_size: 16 }",
                     "job");
  ASSERT_TRUE(bool(config));
  resolveDefaults(*config);
  ASSERT_TRUE(config->has_lora());
  EXPECT_THAT(config->lora().target_modules(),
              ::testing::ElementsAre("q_proj", "v_proj"));
  EXPECT_EQ(config->model().head_dim(), 4);
  EXPECT_TRUE(config->train().has_lr());
  EXPECT_DOUBLE_EQ(config->model().rope_theta(), 500000);
  EXPECT_FALSE(config->model().has_rope_scaling());
  EXPECT_FALSE(validateJobConfig(*config));
}

TEST(JobConfigLoading, TextprotoErrorsAreLocatedWithAHint) {
  std::string error = errorOf(parseJobConfig(
      "train {\n  batch_size: 2\n  batch_sise: 3\n}\n", "job.textproto"));
  EXPECT_THAT(error,
              AllOf(HasSubstr("job.textproto:3:"), HasSubstr("batch_sise"),
                    HasSubstr("did you mean batch_size?")));
}

TEST(JobConfigLoading, TextprotoNamesOfOtherTrainersNameTwills) {
  EXPECT_THAT(errorOf(parseJobConfig("learning_rate: 1e-4\n", "job.textproto")),
              HasSubstr("(Twill calls it train.lr)"));
  EXPECT_THAT(errorOf(parseJobConfig("train { learning_rate: 1e-4 }\n",
                                     "job.textproto")),
              HasSubstr("(Twill calls it train.lr)"));
  EXPECT_THAT(
      errorOf(parseJobConfig("model_name_or_path: \"x\"\n", "job.textproto")),
      HasSubstr("(Twill calls it checkpoint.base_dir)"));
  EXPECT_THAT(errorOf(parseJobConfig("train { xyz: 1 }\n", "job.textproto")),
              HasSubstr("the fields of train are batch_size"));
}

TEST(JobConfigLoading, AnUnknownEnumValueIsPlacedOnItsOwnLine) {
  std::string error = errorOf(parseJobConfig(
      "data {\n  format: MESSAGES\n  path: \"x.jsonl\"\n}\n", "job.textproto"));
  EXPECT_THAT(error, HasSubstr("job.textproto:2:11: Unknown enumeration value "
                               "of \"MESSAGES\""));
  EXPECT_THAT(error, HasSubstr("(one of TOKENIZED, ALPACA, CHAT, PREFERENCE)"));
  EXPECT_THAT(error, HasSubstr("\n    format: MESSAGES\n            ^"));
}

TEST(JobConfigLoading, MissingFileIsNamed) {
  EXPECT_THAT(errorOf(loadJobConfig("/nonexistent/job.textproto", {})),
              HasSubstr("/nonexistent/job.textproto"));
}

//===----------------------------------------------------------------------===//
// Overrides
//===----------------------------------------------------------------------===//

TEST(JobConfigOverrides, SetScalarsOfEveryKind) {
  JobConfig config =
      loadTiny({"train.batch_size=3", "train.lr=5e-5", "parallel.tp=4",
                "parallel.sequence_parallel=false",
                "parallel.activation_checkpointing=FULL",
                "data.path=/data/alpaca.jsonl", "data.format=ALPACA"});
  EXPECT_EQ(config.train().batch_size(), 3);
  EXPECT_DOUBLE_EQ(config.train().lr(), 5e-5);
  EXPECT_EQ(config.parallel().tp(), 4);
  EXPECT_FALSE(config.parallel().sequence_parallel());
  EXPECT_EQ(config.parallel().activation_checkpointing(), ParallelConfig::FULL);
  EXPECT_EQ(config.data().path(), "/data/alpaca.jsonl");
  EXPECT_EQ(config.data().format(), DataConfig::ALPACA);
}

TEST(JobConfigOverrides, RepeatedFieldTakesACommaList) {
  JobConfig config = loadTiny({"lora.target_modules=q_proj, lm_head"});
  EXPECT_THAT(config.lora().target_modules(),
              ::testing::ElementsAre("q_proj", "lm_head"));
}

TEST(JobConfigOverrides, SectionTakesTextproto) {
  JobConfig config = loadTiny({"full_finetune={}"});
  EXPECT_TRUE(config.has_full_finetune());
  EXPECT_FALSE(config.has_lora());

  config = loadTiny({"model.rope_scaling={factor: 4}"});
  EXPECT_DOUBLE_EQ(config.model().rope_scaling().factor(), 4);
  EXPECT_EQ(config.model().rope_scaling().original_max_position_embeddings(),
            64);
}

// Two overrides that choose different members of one oneof contradict each
// other: applied in order, the last silently dropped the first (issue 34).
TEST(JobConfigOverrides, AlternativesOnOneCommandLineAreRefused) {
  JobConfig config;
  EXPECT_THAT(errorOf(applyOverrides(
                  config, {"lora.use_dora=true", "full_finetune={}"})),
              HasSubstr("'lora.use_dora=true' and 'full_finetune={}' "
                        "contradict each other: lora and full_finetune are "
                        "alternatives (one of adaptation)"));
  EXPECT_FALSE(config.has_full_finetune()); // nothing applied
  // A member unset after it was chosen is no longer chosen: the switch
  // the mesh-equivalence runs make.
  llvm::Error switched =
      applyOverrides(config, {"lora.rank=3", "full_finetune={}", "lora="});
  EXPECT_FALSE(bool(switched)) << llvm::toString(std::move(switched));
  EXPECT_TRUE(config.has_full_finetune());
  config.Clear();
  // One member, however many of its fields, is no contradiction.
  llvm::Error applied = applyOverrides(config, {"lora.rank=4", "lora.alpha=8"});
  EXPECT_FALSE(bool(applied)) << llvm::toString(std::move(applied));
  EXPECT_EQ(config.lora().rank(), 4);
}

TEST(JobConfigOverrides, EmptyValueUnsets) {
  JobConfig config = loadTiny({"model.rope_scaling=", "train.lr="});
  EXPECT_FALSE(config.model().has_rope_scaling());
  EXPECT_DOUBLE_EQ(config.train().lr(), 2e-4); // the schema default
}

TEST(JobConfigOverrides, UnknownKeyNamesTheClosestField) {
  JobConfig config;
  EXPECT_THAT(errorOf(applyOverride(config, "train.batch_sise=3")),
              HasSubstr("did you mean train.batch_size?"));
  EXPECT_THAT(errorOf(applyOverride(config, "batch_size=3")),
              HasSubstr("did you mean train.batch_size?"));
  EXPECT_THAT(errorOf(applyOverride(config, "lora.rnak=4")),
              HasSubstr("did you mean lora.rank?"));
  EXPECT_THAT(errorOf(applyOverride(config, "paralel.tp=2")),
              HasSubstr("did you mean parallel.tp?"));
  // Nothing was changed by the failed overrides.
  EXPECT_FALSE(config.has_train());
  EXPECT_FALSE(config.has_lora());
}

TEST(JobConfigOverrides, OtherTrainersNamesAreAnsweredWithTwills) {
  // Hugging Face's TrainingArguments, PEFT, TRL, torchtune and Axolotl.
  const std::pair<const char *, const char *> names[] = {
      {"learning_rate", "train.lr"},
      {"train.learning_rate", "train.lr"},
      {"lr_scheduler_type", "train.warmup_steps"},
      {"num_train_epochs", "train.epochs"},
      {"per_device_train_batch_size", "train.batch_size"},
      {"micro_batch_size", "train.batch_size"},
      {"max_seq_length", "train.seq_len"},
      {"model_name_or_path", "checkpoint.base_dir"},
      {"lora_r", "lora.rank"},
      {"lora_alpha", "lora.alpha"},
      {"lora_dropout", "lora.dropout"},
      {"gradient_checkpointing", "parallel.activation_checkpointing"},
  };
  for (auto [name, twills] : names) {
    JobConfig config;
    EXPECT_THAT(errorOf(applyOverride(config, std::string(name) + "=1")),
                HasSubstr(std::string("(Twill calls it ") + twills + ")"))
        << name;
  }
  // The same name in another section.
  JobConfig config;
  EXPECT_THAT(errorOf(applyOverride(config, "gradient_accumulation_steps=2")),
              HasSubstr("did you mean train.gradient_accumulation_steps?"));
  EXPECT_THAT(errorOf(applyOverride(config, "output_dir=out")),
              HasSubstr("did you mean checkpoint.output_dir?"));
  EXPECT_THAT(errorOf(applyOverride(config, "train.output_dir=out")),
              HasSubstr("did you mean checkpoint.output_dir?"));
}

TEST(JobConfigOverrides, AKeyLikeNoFieldListsTheFieldsThere) {
  JobConfig config;
  std::string error = errorOf(applyOverride(config, "train.warmup_ratio=0.1"));
  EXPECT_THAT(error, HasSubstr("the fields of train are batch_size, seq_len"));
  EXPECT_THAT(error, Not(HasSubstr("did you mean")));
  EXPECT_THAT(errorOf(applyOverride(config, "optimizer.name=adamw")),
              HasSubstr("the fields of the job are model, lora"));
}

TEST(JobConfigOverrides, BadValuesNameTheFieldAndWhatIsAllowed) {
  JobConfig config;
  EXPECT_THAT(errorOf(applyOverride(config, "train.batch_size=two")),
              AllOf(HasSubstr("train.batch_size"), HasSubstr("'two'")));
  EXPECT_THAT(
      errorOf(applyOverride(config, "parallel.activation_checkpointing=ALL")),
      HasSubstr("not one of NONE, FULL, SELECTIVE"));
  EXPECT_THAT(errorOf(applyOverride(config, "train=3")),
              HasSubstr("train is a section"));
  EXPECT_THAT(errorOf(applyOverride(config, "train.batch_size")),
              HasSubstr("must look like field.path=value"));
}

//===----------------------------------------------------------------------===//
// Hugging Face config.json import
//===----------------------------------------------------------------------===//

TEST(HfConfigImport, Llama31_8BMatchesTheShippedConfig) {
  llvm::Expected<ModelConfig> imported =
      importHfConfig(sourcePath("test/data/llama3_1_8b_config.json"));
  ASSERT_TRUE(bool(imported)) << llvm::toString(imported.takeError());
  JobConfig fromJson;
  *fromJson.mutable_model() = *imported;
  resolveDefaults(fromJson);

  auto shipped =
      loadJobConfig(sourcePath("configs/llama3_1_8b_lora.textproto"), {});
  ASSERT_TRUE(bool(shipped));
  EXPECT_TRUE(sameMessage(fromJson.model(), shipped->model()))
      << "imported:\n"
      << fromJson.model().DebugString() << "shipped:\n"
      << shipped->model().DebugString();
}

TEST(HfConfigImport, ReadsTransformers5RopeParameters) {
  TempDir dir;
  std::string path = dir.write("config.json", R"({
    "model_type": "llama", "vocab_size": 32, "hidden_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2,
    "num_key_value_heads": 1, "intermediate_size": 24, "head_dim": 8,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "llama3",
      "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192},
    "eos_token_id": [1, 2], "pad_token_id": null})");
  llvm::Expected<ModelConfig> model = importHfConfig(path);
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_DOUBLE_EQ(model->rope_theta(), 10000);
  ASSERT_TRUE(model->has_rope_scaling());
  EXPECT_EQ(model->rope_scaling().rope_type(), "llama3");
  EXPECT_DOUBLE_EQ(model->rope_scaling().factor(), 32);
  EXPECT_EQ(model->rope_scaling().original_max_position_embeddings(), 8192);

  path = dir.write("config.json", R"({"model_type": "llama",
    "vocab_size": 32,
    "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}})");
  model = importHfConfig(path);
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_DOUBLE_EQ(model->rope_theta(), 500000);
  EXPECT_FALSE(model->has_rope_scaling());
}

// config.json's null is no window; transformers 4's Qwen2.5 keys import.
TEST(HfConfigImport, ReadsEachFamilysKeys) {
  TempDir dir;
  std::string mistral = dir.write("mistral.json", R"({
    "model_type": "mistral", "architectures": ["MistralForCausalLM"],
    "head_dim": 128, "sliding_window": null, "hidden_size": 5120})");
  llvm::Expected<ModelConfig> model = importHfConfig(mistral);
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_FALSE(model->has_sliding_window());
  EXPECT_EQ(model->head_dim(), 128);
  std::string qwen = dir.write("qwen.json", R"({
    "model_type": "qwen2", "use_sliding_window": false,
    "sliding_window": 131072, "max_window_layers": 28,
    "attention_dropout": 0.0, "layer_types": ["full_attention"]})");
  model = importHfConfig(qwen);
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_EQ(model->sliding_window(), 131072);
  EXPECT_FALSE(model->use_sliding_window());
  EXPECT_EQ(model->max_window_layers(), 28);
  EXPECT_EQ(model->layer_types(0), "full_attention");
  // No window with use_sliding_window false.
  EXPECT_FALSE(slidingWindowOf(*model, 0));
  model->set_use_sliding_window(true);
  EXPECT_EQ(slidingWindowOf(*model, 0), std::nullopt); // a full layer
  model->set_layer_types(0, "sliding_attention");
  EXPECT_EQ(slidingWindowOf(*model, 0), 131072);
  // Gemma 2: caps of 50 and 30 where config.json has no key, none where
  // it says null.
  std::string gemma2 = dir.write("gemma2.json", R"({"model_type": "gemma2",
    "final_logit_softcapping": null})");
  model = importHfConfig(gemma2);
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_EQ(model->attn_logit_softcapping(), 50);
  EXPECT_FALSE(model->has_final_logit_softcapping());
  // Phi-3: transformers 5 keeps partial_rotary_factor with the RoPE
  // parameters; Phi-3.5's longrope is read, to be refused by name.
  std::string phi3 = dir.write("phi3.json", R"({"model_type": "phi3",
    "sliding_window": 2047, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                        "partial_rotary_factor": 0.75}})");
  model = importHfConfig(phi3);
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_EQ(model->partial_rotary_factor(), 0.75);
  EXPECT_EQ(model->sliding_window(), 2047);
  EXPECT_FALSE(model->has_rope_scaling());
  std::string longrope = dir.write("longrope.json", R"({"model_type": "phi3",
    "rope_scaling": {"type": "longrope", "long_factor": [1.0, 2.0],
                     "short_factor": [1.0, 1.0]}})");
  model = importHfConfig(longrope);
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_EQ(model->rope_scaling().rope_type(), "longrope");
}

// transformers 5 writes Gemma 3's RoPE per layer type.
TEST(HfConfigImport, ReadsRopeParametersPerLayerType) {
  TempDir dir;
  std::string gemma = dir.write("gemma.json", R"({"model_type": "gemma3_text",
    "rope_parameters": {
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
      "full_attention": {"rope_type": "linear", "factor": 8.0,
                         "rope_theta": 1000000.0}}})");
  llvm::Expected<ModelConfig> model = importHfConfig(gemma);
  ASSERT_TRUE(bool(model)) << llvm::toString(model.takeError());
  EXPECT_EQ(model->rope_local_base_freq(), 10000);
  EXPECT_EQ(model->rope_theta(), 1000000);
  EXPECT_EQ(model->rope_scaling().rope_type(), "linear");
  EXPECT_EQ(model->rope_scaling().factor(), 8);
  std::string scaled = dir.write("scaled.json", R"({"rope_parameters": {
      "sliding_attention": {"rope_type": "yarn", "rope_theta": 10000.0}}})");
  EXPECT_THAT(errorOf(importHfConfig(scaled)),
              AllOf(HasSubstr("scaled.json"),
                    HasSubstr("rope_parameters.sliding_attention's rope_type "
                              "'yarn' is not supported")));
}

TEST(HfConfigImport, ErrorsNameTheFile) {
  TempDir dir;
  EXPECT_THAT(errorOf(importHfConfig(dir.str() + "/missing.json")),
              HasSubstr("missing.json"));
  std::string broken = dir.write("broken.json", "{\"vocab_size\": 3");
  EXPECT_THAT(errorOf(importHfConfig(broken)),
              AllOf(HasSubstr("broken.json"), HasSubstr("not valid JSON")));
  std::string wrongType = dir.write(
      "wrong.json", R"({"model_type": "llama", "hidden_size": "big"})");
  EXPECT_THAT(errorOf(importHfConfig(wrongType)),
              AllOf(HasSubstr("wrong.json"), HasSubstr("hidden_size")));
}

TEST(HfConfigImport, BaseDirIsTheLowestLayer) {
  TempDir dir;
  dir.write("config.json", R"({"model_type": "llama", "vocab_size": 64,
    "hidden_size": 32,
    "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 48,
    "rope_theta": 10000.0})");
  std::string job =
      dir.write("job.textproto", "model { num_hidden_layers: 2 }\n"
                                 "checkpoint { base_dir: \"" +
                                     dir.str() + "\" }\n");
  llvm::Expected<JobConfig> config =
      loadJobConfig(job, {"model.intermediate_size=40"});
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  EXPECT_EQ(config->model().vocab_size(), 64); // from config.json
  EXPECT_DOUBLE_EQ(config->model().rope_theta(), 10000);
  EXPECT_EQ(config->model().num_hidden_layers(), 2);  // the job wins
  EXPECT_EQ(config->model().intermediate_size(), 40); // the command line wins

  std::string noModel = dir.write(
      "nomodel.textproto", "checkpoint { base_dir: \"/nonexistent\" }\n");
  EXPECT_THAT(errorOf(loadJobConfig(noModel, {})),
              AllOf(HasSubstr("checkpoint.base_dir"),
                    HasSubstr("/nonexistent/config.json")));
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

TEST(JobConfigValidation, HeadsMustDivide) {
  EXPECT_THAT(validationErrorAfter("model.num_key_value_heads=3"),
              HasSubstr("model.num_attention_heads (4) must be divisible by "
                        "model.num_key_value_heads (3)"));
  EXPECT_THAT(validationErrorAfter("model.head_dim=7"),
              HasSubstr("model.head_dim (7) must be even"));
}

TEST(JobConfigValidation, SizesMustBePositive) {
  EXPECT_THAT(validationErrorAfter("model.hidden_size=0"),
              HasSubstr("model.hidden_size must be positive, got 0"));
  EXPECT_THAT(validationErrorAfter("train.batch_size=-1"),
              HasSubstr("train.batch_size must be positive, got -1"));
  EXPECT_THAT(validationErrorAfter("lora.rank=0"),
              HasSubstr("lora.rank must be positive"));
  EXPECT_THAT(validationErrorAfter("parallel.dp=0"),
              HasSubstr("parallel.dp must be positive"));
}

TEST(JobConfigValidation, UnknownTargetModuleListsTheAllowedOnes) {
  EXPECT_THAT(validationErrorAfter("lora.target_modules=q_proj,qkv_proj"),
              HasSubstr("lora.target_modules 'qkv_proj' is not supported; "
                        "allowed: q_proj, k_proj, v_proj, o_proj, gate_proj, "
                        "up_proj, down_proj, lm_head"));
  EXPECT_THAT(validationErrorAfter("lora.target_modules=q_proj,q_proj"),
              HasSubstr("lists 'q_proj' twice"));
}

TEST(JobConfigValidation, RangesAndSupportedVariants) {
  EXPECT_THAT(validationErrorAfter("lora.dropout=1.5"),
              HasSubstr("lora.dropout must be in [0, 1)"));
  EXPECT_THAT(validationErrorAfter("lora.dropout=-0.1"),
              HasSubstr("lora.dropout must be in [0, 1), got -0.1"));
  // tiny adapts lm_head too.
  EXPECT_THAT(validationErrorAfter("lora.use_dora=true"),
              HasSubstr("lora.use_dora does not support lm_head"));
  EXPECT_THAT(validationErrorAfter("parallel.prefetch_layers=-1"),
              HasSubstr("parallel.prefetch_layers must be zero or positive, "
                        "got -1"));
  EXPECT_THAT(validationErrorAfter("parallel.checkpoint_layers=-2"),
              HasSubstr("parallel.checkpoint_layers must be -1 (every layer) "
                        "or a count of layers, got -2"));
  EXPECT_THAT(validationErrorAfter("parallel.memory_budget_gb=-1"),
              HasSubstr("parallel.memory_budget_gb must be zero or a positive "
                        "finite number, got -1"));
  EXPECT_THAT(
      validationErrorAfter("parallel.dp=4294967296 parallel.tp=4294967296"),
      HasSubstr("parallel.dp x parallel.tp must be at most 1048576 "
                "ranks, got 4294967296 x 4294967296"));
  EXPECT_THAT(validationErrorAfter("parallel.memory_budget_gb=1e30"),
              HasSubstr("parallel.memory_budget_gb must be at most 1e6 (a "
                        "petabyte per rank), got 1e+30"));
  EXPECT_THAT(validationErrorAfter("train.beta2=1"),
              HasSubstr("train.beta2 must be in [0, 1)"));
  EXPECT_THAT(validationErrorAfter("model.rope_scaling.rope_type=yarn"),
              HasSubstr("model.rope_scaling.rope_type 'yarn' is not "
                        "supported; allowed: llama3, linear"));
  EXPECT_THAT(validationErrorAfter("model.attention_dropout=0.1"),
              HasSubstr("model.attention_dropout must be 0 (attention dropout "
                        "is not built), got 0.1"));
}

// Issue 37: a quantized base is frozen, of rows of whole blocks, and not
// yet of fused projections; only an FP8 one rounds its products' inputs.
TEST(JobConfigValidation, QuantizedBase) {
  JobConfig quantized =
      loadTiny({"quantization.base=NF4", "model.intermediate_size=192"});
  EXPECT_FALSE(validateJobConfig(quantized));
  EXPECT_THAT(validationErrorAfter("quantization.base=NF4"),
              HasSubstr("quantization.base NF4 quantizes blocks of 64 values "
                        "along each projection's rows, and "
                        "model.intermediate_size (160) is no multiple of 64: "
                        "the block size does not divide it"));
  EXPECT_THAT(validationErrorAfter("quantization.base=NF4 "
                                   "model.intermediate_size=192 "
                                   "full_finetune={} lora="),
              HasSubstr("full_finetune trains them: a trained weight cannot "
                        "be NF4; use lora"));
  // FP8 has no blocks: any size.
  JobConfig fp8 = loadTiny({"quantization.base=FP8"});
  EXPECT_FALSE(validateJobConfig(fp8));
  EXPECT_THAT(validationErrorAfter("quantization.base=FP8 full_finetune={} "
                                   "lora="),
              HasSubstr("a trained weight cannot be FP8; use lora"));
  // Inputs rounded to e4m3 are an FP8 base's.
  EXPECT_FALSE(validateJobConfig(loadTiny(
      {"quantization.base=FP8", "quantization.fp8_inputs=E4M3_BLOCKS"})));
  EXPECT_THAT(validationErrorAfter("quantization.fp8_inputs=E4M3_BLOCKS"),
              HasSubstr("quantization.fp8_inputs E4M3_BLOCKS rounds the "
                        "inputs of an FP8 base's products, but "
                        "quantization.base is NONE: set base FP8, or leave "
                        "fp8_inputs out"));
  EXPECT_THAT(validationErrorAfter("quantization.base=NF4 model.hidden_size=96 "
                                   "model.head_dim=24 "
                                   "model.intermediate_size=192"),
              AllOf(HasSubstr("model.hidden_size (96) is no multiple of 64"),
                    HasSubstr("model.num_attention_heads x model.head_dim "
                              "(96) is no multiple of 64")));
  EXPECT_THAT(validationErrorAfter("quantization.base=NF4 "
                                   "model.intermediate_size=192 "
                                   "model.model_type=phi3 model.rope_scaling= "
                                   "lora.target_modules=qkv_proj"),
              HasSubstr("quantization.base NF4 does not yet quantize fused "
                        "projections (phi3's qkv_proj and gate_up_proj)"));
}

// Issue 38: DPO trains LoRA on preference pairs, its loss's settings in
// range; the preference format and the dpo section are DPO's.
TEST(JobConfigValidation, Dpo) {
  EXPECT_FALSE(validateJobConfig(loadTiny(
      {"train.objective=DPO", "data.format=PREFERENCE", "dpo.beta=0.5"})));
  EXPECT_THAT(validationErrorAfter("train.objective=DPO"),
              HasSubstr("train.objective DPO trains on preference pairs: set "
                        "data.format PREFERENCE"));
  EXPECT_THAT(validationErrorAfter("data.format=PREFERENCE"),
              HasSubstr("data.format PREFERENCE holds preference pairs, which "
                        "train.objective DPO trains on; set it"));
  EXPECT_THAT(validationErrorAfter("dpo.beta=0.5"),
              HasSubstr("the dpo section configures train.objective DPO"));
  EXPECT_THAT(validationErrorAfter("train.objective=DPO data.format=PREFERENCE "
                                   "dpo.beta=0"),
              HasSubstr("dpo.beta must be a positive finite number, got 0"));
  EXPECT_THAT(validationErrorAfter("train.objective=DPO data.format=PREFERENCE "
                                   "dpo.label_smoothing=0.5"),
              HasSubstr("dpo.label_smoothing must be in [0, 0.5), got 0.5"));
  EXPECT_THAT(validationErrorAfter("train.objective=DPO data.format=PREFERENCE "
                                   "dpo.loss_type=IPO dpo.label_smoothing=0.1"),
              HasSubstr("dpo.label_smoothing smooths the SIGMOID and ROBUST "
                        "losses; IPO has none"));
  EXPECT_THAT(validationErrorAfter("train.objective=DPO data.format=PREFERENCE "
                                   "full_finetune={} lora= "
                                   "dpo.reference=ADAPTER_OFF"),
              HasSubstr("train.objective DPO of a full fine-tune needs "
                        "dpo.reference PRECOMPUTED"));
  llvm::Error full = validateJobConfig(
      loadTiny({"train.objective=DPO", "data.format=PREFERENCE",
                "full_finetune={}", "lora=", "dpo.reference=PRECOMPUTED"}));
  EXPECT_FALSE(bool(full)) << llvm::toString(std::move(full));
  // Robust DPO reads it too.
  llvm::Error robust = validateJobConfig(
      loadTiny({"train.objective=DPO", "data.format=PREFERENCE",
                "dpo.loss_type=ROBUST", "dpo.label_smoothing=0.1"}));
  EXPECT_FALSE(bool(robust)) << llvm::toString(std::move(robust));
}

// Issue 35: each family the frontend builds validates; an unknown one, a
// feature not built and a field a family needs are refused, each named.
TEST(JobConfigValidation, ModelFamilies) {
  for (const ModelFamily &family : modelFamilies()) {
    std::vector<std::string> overrides = {
        "model.model_type=" + family.modelType.str(),
        "model.architectures=", "model.head_dim=24",
        "lora.target_modules=o_proj"};
    if (family.experts) // sizes of its own, stated
      overrides.insert(overrides.end(),
                       {"model.num_experts=4", "model.num_experts_per_tok=2",
                        "model.moe_intermediate_size=32",
                        "model.shared_expert_intermediate_size=48"});
    JobConfig config = loadTiny(overrides);
    EXPECT_EQ(config.model().architectures(0), family.causalLm);
  }
  EXPECT_THAT(validationErrorAfter("model.model_type=gemma"),
              HasSubstr("model.model_type 'gemma' is not supported; allowed: "
                        "llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, "
                        "mixtral, gemma2, gemma3_text, phi3"));
  // Soft-capping is Gemma's; bidirectional attention is not built;
  // Gemma's activation is its own key.
  for (const char *cap :
       {"model.attn_logit_softcapping", "model.final_logit_softcapping"}) {
    EXPECT_THAT(validationErrorAfter(std::string(cap) + "=50"),
                HasSubstr(std::string(cap) + " must be null: llama models "
                                             "have no logit soft-capping"));
    EXPECT_THAT(validationErrorAfter(std::string("model.model_type=gemma2 "
                                                 "model.architectures= ") +
                                     cap + "=-1"),
                HasSubstr(std::string(cap) + " must be a positive finite "
                                             "number, got -1"));
  }
  // Gemma 2's config.json states hidden_act beside hidden_activation,
  // which its class reads.
  EXPECT_TRUE(bool(loadJobConfig(
      sourcePath("configs/tiny.textproto"),
      {"model.model_type=gemma2", "model.hidden_act=gelu_pytorch_tanh"})));
  // Gemma 2's defaults: every other layer slides; no soft-cap it does not
  // state.
  JobConfig gemma2 = loadTiny({"model.model_type=gemma2"});
  EXPECT_FALSE(gemma2.model().has_attn_logit_softcapping());
  EXPECT_EQ(gemma2.model().layer_types(0), "sliding_attention");
  EXPECT_EQ(gemma2.model().layer_types(1), "full_attention");
  EXPECT_THAT(validationErrorAfter("model.model_type=gemma3_text "
                                   "model.architectures= "
                                   "model.use_bidirectional_attention=true"),
              HasSubstr("model.use_bidirectional_attention must be false"));
  EXPECT_THAT(validationErrorAfter("model.model_type=gemma3_text "
                                   "model.architectures= "
                                   "model.hidden_activation=gelu"),
              HasSubstr("model.hidden_activation 'gelu' is not supported; "
                        "allowed: gelu_pytorch_tanh"));
  EXPECT_THAT(validationErrorAfter("model.hidden_activation=gelu_pytorch_tanh"),
              HasSubstr("model.hidden_activation is Gemma's key; llama models "
                        "read model.hidden_act"));
  // Gemma 3's defaults: its activation, scalar, local RoPE base and five
  // sliding layers to each full one.
  JobConfig gemma =
      loadTiny({"model.model_type=gemma3_text", "model.num_hidden_layers=7"});
  EXPECT_EQ(gemma.model().hidden_activation(), "gelu_pytorch_tanh");
  EXPECT_EQ(gemma.model().query_pre_attn_scalar(), 256);
  EXPECT_EQ(gemma.model().rope_local_base_freq(), 10000);
  ASSERT_EQ(gemma.model().layer_types_size(), 7);
  EXPECT_EQ(gemma.model().layer_types(4), "sliding_attention");
  EXPECT_EQ(gemma.model().layer_types(5), "full_attention");
  EXPECT_EQ(gemma.model().layer_types(6), "sliding_attention");
  EXPECT_THAT(validationErrorAfter("model.model_type=qwen2"),
              HasSubstr("model.architectures 'LlamaForCausalLM' is not "
                        "supported; allowed: Qwen2ForCausalLM"));
  // Biases where the family's transformers class reads none.
  EXPECT_THAT(
      validationErrorAfter("model.model_type=mistral model.architectures= "
                           "model.attention_bias=true"),
      HasSubstr("model.attention_bias must be false: mistral models have no "
                "attention biases"));
  EXPECT_THAT(validationErrorAfter("model.model_type=qwen3 "
                                   "model.architectures= model.mlp_bias=true"),
              HasSubstr("model.mlp_bias must be false: qwen3 models"));
  EXPECT_THAT(
      validationErrorAfter("model.model_type=mistral model.architectures= "
                           "model.sliding_window=0"),
      HasSubstr("model.sliding_window must be positive, got 0"));
  EXPECT_THAT(validationErrorAfter("model.layer_types=full_attention"),
              HasSubstr("model.layer_types must name each of the 2 layers, "
                        "got 1"));
  EXPECT_THAT(validationErrorAfter("model.layer_types=full_attention,local"),
              HasSubstr("model.layer_types 'local' is not supported"));
  // Windows shorter than the sequence (tiny's is 64 positions).
  EXPECT_TRUE(bool(loadJobConfig(
      sourcePath("configs/tiny.textproto"),
      {"model.model_type=qwen2",
       "model.architectures=", "model.sliding_window=8",
       "model.use_sliding_window=true", "model.max_window_layers=1"})));
  EXPECT_TRUE(
      bool(loadJobConfig(sourcePath("configs/tiny.textproto"),
                         {"model.model_type=mistral",
                          "model.architectures=", "model.sliding_window=16"})));
  // Phi-3's projections are fused: PEFT adapts qkv_proj and gate_up_proj,
  // by default qkv_proj (which holds q and v).
  EXPECT_THAT(
      validationErrorAfter("model.model_type=phi3 model.architectures="),
      HasSubstr("lora.target_modules 'q_proj' is not supported; "
                "allowed: qkv_proj, o_proj, gate_up_proj, down_proj, "
                "lm_head"));
  JobConfig phi3 = loadTiny({"model.model_type=phi3",
                             "model.architectures=", "lora.target_modules="});
  ASSERT_EQ(phi3.lora().target_modules_size(), 1);
  EXPECT_EQ(phi3.lora().target_modules(0), "qkv_proj");
  // Phi-3's dropouts and partial rotary embedding are not built.
  for (const char *rate : {"model.resid_pdrop", "model.embd_pdrop"})
    EXPECT_THAT(validationErrorAfter(std::string(rate) + "=0.1"),
                HasSubstr(std::string(rate) + " must be 0 (dropout in the "
                                              "model is not built), got 0.1"));
  EXPECT_THAT(validationErrorAfter("model.partial_rotary_factor=0.75"),
              HasSubstr("model.partial_rotary_factor must be 1 (a rotary "
                        "embedding of part of each head is not built), got "
                        "0.75"));
  // Qwen3Config's head_dim is 128 whatever the hidden size: it is not
  // guessed.
  EXPECT_THAT(errorOf(loadJobConfig(
                  sourcePath("configs/tiny.textproto"),
                  {"model.model_type=qwen3", "model.architectures="})),
              HasSubstr("model.head_dim must be set for qwen3 models"));
}

// Issue 34, class 8: counts past any model overflowed int64 in the
// compiler (hidden_size 4e12 reported negative bytes, batch_size 1e12 an
// internal error) or compiled for minutes (1e8 layers, seq_len 1e12).
TEST(JobConfigValidation, CountsHaveTheirMost) {
  EXPECT_THAT(validationErrorAfter("model.hidden_size=4000000000000"),
              HasSubstr("model.hidden_size must be at most 262144, got "
                        "4000000000000"));
  EXPECT_THAT(validationErrorAfter("model.num_hidden_layers=100000000"),
              HasSubstr("model.num_hidden_layers must be at most 1024"));
  EXPECT_THAT(validationErrorAfter("model.vocab_size=1000000000000000"),
              HasSubstr("model.vocab_size must be at most 16777216"));
  EXPECT_THAT(validationErrorAfter("lora.rank=1000000000000"),
              HasSubstr("lora.rank must be at most 65536"));
  EXPECT_THAT(validationErrorAfter("train.seq_len=1000000000000"),
              HasSubstr("train.seq_len must be at most 134217728"));
  EXPECT_THAT(
      validationErrorAfter("train.gradient_accumulation_steps=1000000000000"),
      HasSubstr("train.gradient_accumulation_steps must be at most 1048576"));
  EXPECT_THAT(validationErrorAfter("parallel.collective_timeout_s=1e-9"),
              HasSubstr("parallel.collective_timeout_s must be a finite "
                        "number of at least 1 (second), got 1e-09"));
  EXPECT_THAT(validationErrorAfter("checkpoint.output_dir="),
              HasSubstr("checkpoint.output_dir must name a folder"));
  // The merged model would be written over the base's files.
  EXPECT_THAT(validationErrorAfter("checkpoint.random_base=false "
                                   "checkpoint.base_dir=/m/base "
                                   "checkpoint.output_dir=/m/x/../base/"),
              HasSubstr("checkpoint.output_dir is checkpoint.base_dir"));
  EXPECT_THAT(validationErrorAfter("train.epochs=9223372036854775807"),
              HasSubstr("train.epochs must be at most 1048576"));
  EXPECT_THAT(validationErrorAfter("train.batch_size=1000000000000"),
              HasSubstr("train.batch_size x train.seq_len (the tokens of a "
                        "micro-batch) must be at most 4294967296, got "
                        "1000000000000 x 64"));
  // Each count in range, their product past what the compiler can count:
  // one message, not one per field.
  std::string scale = validationErrorAfter(
      "model.hidden_size=262144 model.head_dim=65536 "
      "model.intermediate_size=1048576 model.num_hidden_layers=1024 "
      "train.seq_len=1048576");
  EXPECT_THAT(scale, HasSubstr("the job is too large to compile: 4194304 "
                               "tokens a micro-batch through this model form "
                               "about"));
  EXPECT_THAT(scale, Not(HasSubstr("must be at most")));
}

TEST(JobConfigValidation, EveryProblemIsReported) {
  JobConfig config = loadTiny();
  ASSERT_FALSE(applyOverride(config, "train.seq_len=0"));
  ASSERT_FALSE(applyOverride(config, "train.lr=0"));
  ASSERT_FALSE(applyOverride(config, "lora.alpha=-2"));
  std::string error = errorOf(validateJobConfig(config));
  EXPECT_THAT(error, AllOf(HasSubstr("train.seq_len"), HasSubstr("train.lr"),
                           HasSubstr("lora.alpha")));
}

TEST(JobConfigValidation, NoDivisibilityIsRequiredOfTheMesh) {
  // tp above the kv-head count, a sequence and a vocab that tp does not
  // divide, a LoRA rank unrelated to dp x tp: all valid.
  JobConfig config =
      loadTiny({"parallel.tp=8", "parallel.dp=3", "train.seq_len=30",
                "model.vocab_size=509", "lora.rank=3"});
  EXPECT_FALSE(validateJobConfig(config));
}

} // namespace
