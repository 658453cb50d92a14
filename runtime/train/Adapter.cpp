//===- Adapter.cpp - writing PEFT adapters --------------------------------===//

#include "runtime/train/Adapter.h"

#include "google/protobuf/message.h"
#include "runtime/io/BitsAndBytes.h"
#include "runtime/io/Safetensors.h"
#include "runtime/train/Weights.h"
#include "support/AtomicFile.h"
#include "support/Json.h"
#include "support/LoraScale.h"
#include "support/ReadFile.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstdio>
#include <deque>

using namespace twill;

static llvm::Error createDirectory(llvm::StringRef directory) {
  if (std::error_code error = llvm::sys::fs::create_directories(directory))
    return llvm::createStringError(error, "cannot create %s: %s",
                                   directory.str().c_str(),
                                   error.message().c_str());
  return llvm::Error::success();
}

/// Whole tensors of the checkpoint, put together from every rank's blocks
/// of the parameters making them up, ready to write; each with the roles of
/// its parameters (those of its first block: its blocks' agree).
struct WholeTensors {
  // Deques: the tensors' ArrayRefs into them stay valid as they grow.
  std::deque<std::vector<float>> values;
  std::deque<std::vector<uint8_t>> bytes;
  std::vector<io::NamedTensor> tensors;
  std::vector<const Parameter *> parameters;
};

/// The adapter's tensors (or all the others), named by `rename`; a
/// quantized weight as its dequantized values, or with `skipQuantized`
/// not at all. A collective: every rank calls it.
static llvm::Expected<WholeTensors>
parameterTensors(Program &program, bool lora,
                 llvm::function_ref<std::string(llvm::StringRef)> rename,
                 bool skipQuantized = false) {
  llvm::Expected<std::vector<StoredTensor>> stored =
      storedTensors(program.executable());
  if (!stored)
    return stored.takeError();
  WholeTensors whole;
  for (const StoredTensor &tensor : *stored) {
    const Parameter *first = tensor.pieces.front();
    if (first->has_adapter() != lora ||
        (skipQuantized && first->has_quantized()))
      continue;
    llvm::Expected<std::vector<float>> values = program.wholeStored(tensor);
    if (!values)
      return values.takeError();
    // An update that overflowed (train.lr 1e300) leaves a finite loss for
    // the step it was made in: caught here, before it is written as good.
    if (!llvm::all_of(*values, [](float v) { return std::isfinite(v); }))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "%s holds inf or nan: the last update diverged (lower train.lr "
          "or train.weight_decay); nothing of it is written",
          tensor.name.c_str());
    whole.values.push_back(std::move(*values));
    whole.tensors.push_back(
        {rename(tensor.name), tensor.shape, whole.values.back()});
    whole.parameters.push_back(first);
  }
  return whole;
}

llvm::Error twill::writeGradients(Program &program, llvm::StringRef path) {
  llvm::StringMap<int> gradientSums; // a parameter's name -> its sum's buffer
  for (const State &state : program.executable().states())
    if (state.kind() == State::GRAD_SUM)
      gradientSums[state.of()] = state.buffer();
  llvm::Expected<std::vector<StoredTensor>> stored =
      storedTensors(program.executable());
  if (!stored)
    return stored.takeError();
  std::deque<std::vector<float>> values;
  std::vector<io::NamedTensor> tensors;
  for (const StoredTensor &tensor : *stored) {
    if (!tensor.pieces.front()->trainable())
      continue;
    std::vector<float> &whole = values.emplace_back();
    for (const Parameter *piece : tensor.pieces) { // in row order
      auto sum = gradientSums.find(piece->name());
      if (sum == gradientSums.end())
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "trainable parameter '" + piece->name() +
                "' has no gradient sum in the program");
      llvm::Expected<std::vector<float>> block =
          program.wholeTensor(sum->second);
      if (!block)
        return block.takeError();
      whole.insert(whole.end(), block->begin(), block->end());
    }
    tensors.push_back({tensor.name + ".grad", tensor.shape, whole});
  }
  if (!program.writesFiles())
    return llvm::Error::success();
  return io::writeSafetensors(path, tensors);
}

llvm::Error twill::writePeftAdapter(Program &program, llvm::StringRef directory,
                                    llvm::StringRef baseModel) {
  const JobConfig &job = program.job();
  llvm::Expected<WholeTensors> whole =
      parameterTensors(program, /*lora=*/true, peftAdapterKey);
  if (!whole)
    return whole.takeError();
  if (!program.writesFiles()) // written once, unsharded, by rank 0
    return llvm::Error::success();
  if (llvm::Error error = createDirectory(directory))
    return error;
  llvm::SmallString<256> weights(directory), config(directory);
  llvm::sys::path::append(weights, "adapter_model.safetensors");
  llvm::sys::path::append(config, "adapter_config.json");
  if (llvm::Error error =
          io::writeSafetensors(weights, whole->tensors, {{"format", "pt"}}))
    return error;

  const LoraConfig &lora = job.lora();
  llvm::json::Array targets, parameters;
  for (const std::string &target : lora.target_modules())
    targets.push_back(target);
  for (const std::string &target : lora.target_parameters())
    parameters.push_back(target);
  llvm::json::Object adapterConfig{{"peft_type", "LORA"},
                                   {"task_type", "CAUSAL_LM"},
                                   {"r", lora.rank()},
                                   {"lora_alpha", lora.alpha()},
                                   {"lora_dropout", lora.dropout()},
                                   {"target_modules", std::move(targets)},
                                   {"target_parameters", std::move(parameters)},
                                   {"base_model_name_or_path", baseModel},
                                   {"bias", "none"},
                                   {"fan_in_fan_out", false},
                                   {"inference_mode", true},
                                   {"init_lora_weights", true},
                                   {"use_rslora", lora.use_rslora()},
                                   {"use_dora", lora.use_dora()},
                                   {"modules_to_save", nullptr},
                                   {"revision", nullptr}};
  std::string text;
  llvm::raw_string_ostream(text)
      << llvm::formatv("{0:2}", llvm::json::Value(std::move(adapterConfig)));
  return writeFileAtomically(config,
                             [&](llvm::raw_ostream &os) { os << text; });
}

/// The set fields of `message` as JSON, numbers as numbers (protobuf's own
/// JSON mapping writes 64-bit integers as strings, which transformers
/// rejects). A field that is a oneof of its own (`..._or_null`) and unset
/// is null: config.json's word for none, where a missing key would take
/// the transformers class's default (Mistral's sliding_window).
static llvm::json::Object toJson(const google::protobuf::Message &message) {
  namespace pb = google::protobuf;
  llvm::json::Object object;
  const pb::Reflection &reflection = *message.GetReflection();
  const pb::Descriptor &type = *message.GetDescriptor();
  for (int i = 0; i < type.oneof_decl_count(); ++i)
    if (const pb::OneofDescriptor *oneof = type.oneof_decl(i);
        oneof->field_count() == 1 && !reflection.HasOneof(message, oneof))
      object[oneof->field(0)->name()] = nullptr;
  std::vector<const pb::FieldDescriptor *> fields;
  reflection.ListFields(message, &fields);
  for (const pb::FieldDescriptor *field : fields) {
    if (field->is_repeated()) {
      // Strings only: ModelConfig's architectures.
      if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING)
        continue;
      llvm::json::Array values;
      for (int i = 0, e = reflection.FieldSize(message, field); i < e; ++i)
        values.push_back(reflection.GetRepeatedString(message, field, i));
      object[field->name()] = std::move(values);
      continue;
    }
    llvm::json::Value value = nullptr;
    switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT64:
      value = reflection.GetInt64(message, field);
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      value = reflection.GetDouble(message, field);
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      value = reflection.GetBool(message, field);
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      value = reflection.GetString(message, field);
      break;
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      value = toJson(reflection.GetMessage(message, field));
      break;
    default:
      continue;
    }
    object[field->name()] = std::move(value);
  }
  return object;
}

/// config.json's text of `object`, the members `verbatim` holds as the
/// base's config.json writes them: llvm::json writes 0.0 as 0, and
/// transformers 5's config classes refuse an integer where they declare a
/// float (Mixtral's router_jitter_noise), and a float where an integer
/// (Gemma 2's query_pre_attn_scalar).
static std::string
configText(const llvm::json::Object &object,
           const llvm::StringMap<llvm::StringRef> &verbatim) {
  std::vector<llvm::StringRef> keys;
  for (const auto &member : object)
    keys.push_back(member.first);
  llvm::sort(keys);
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os, /*IndentSize=*/2);
  json.object([&] {
    for (llvm::StringRef key : keys) {
      auto copied = verbatim.find(key);
      if (copied == verbatim.end()) {
        json.attribute(key, *object.get(key));
        continue;
      }
      json.attributeBegin(key);
      json.rawValue(copied->second);
      json.attributeEnd();
    }
  });
  return text;
}

/// Folds each LoRA pair into the weight it adapts: W += scale * B A
/// (loraScale: alpha / r, or alpha / sqrt(r) with rsLoRA), and with DoRA
/// each row then scaled to magnitude / its norm. An adapted weight tied to
/// another (an output layer to the embedding) gets its own: the other's
/// values plus the update, and the model is no longer tied.
static llvm::Error mergeLora(const JobConfig &job, WholeTensors &base,
                             const WholeTensors &lora, bool &untied) {
  double scale =
      loraScale(job.lora().alpha(), job.lora().rank(), job.lora().use_rslora());
  auto find = [](const WholeTensors &tensors, llvm::StringRef name) {
    for (auto [index, tensor] : llvm::enumerate(tensors.tensors))
      if (tensor.name == name)
        return int(index);
    return -1;
  };
  // Part `part` of the adapter of weight `of`, if it has one.
  auto partOf = [&](llvm::StringRef of,
                    AdapterRole::Part part) -> const io::NamedTensor * {
    for (auto [parameter, tensor] :
         llvm::zip_equal(lora.parameters, lora.tensors))
      if (parameter->adapter().of() == of &&
          parameter->adapter().part() == part)
        return &tensor;
    return nullptr;
  };
  for (auto [parameter, a] : llvm::zip_equal(lora.parameters, lora.tensors)) {
    const AdapterRole &role = parameter->adapter();
    if (role.part() != AdapterRole::LORA_A)
      continue;
    const io::NamedTensor *b = partOf(role.of(), AdapterRole::LORA_B);
    int target = find(base, role.of());
    if (target < 0 && !role.tied().empty()) {
      int holder = find(base, role.tied());
      if (holder < 0)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "cannot merge the LoRA of '" + role.of() + "': '" + role.tied() +
                "', which it is tied to, is missing");
      base.values.push_back(base.values[holder]);
      base.tensors.push_back({role.of(), base.tensors[holder].shape, {}});
      base.parameters.push_back(nullptr);
      target = base.tensors.size() - 1;
      untied = true;
    }
    if (!b || target < 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "cannot merge the LoRA of '" + role.of() +
                                         "': its B or base weight is missing");
    // W [out, in] += scale * B [out, r] A [r, in]; each expert's of
    // experts' W [experts, out, in] (PEFT's target_parameters) by its A
    // rows e r + j and B columns j experts + e (j < r).
    const std::vector<int64_t> &shape = base.tensors[target].shape;
    int64_t experts = shape.size() == 3 ? shape[0] : 1;
    int64_t rank = a.shape[0] / experts, in = a.shape[1], out = b->shape[0];
    std::vector<float> &weight = base.values[target];
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t k = 0; k < rank; ++k) {
          double factor =
              scale * b->values[o * rank * experts + k * experts + e];
          float *row = &weight[(e * out + o) * in];
          const float *aRow = &a.values[(e * rank + k) * in];
          for (int64_t i = 0; i < in; ++i)
            row[i] += float(factor * aRow[i]);
        }
    // DoRA: each row of W + scale B A scaled to its magnitude.
    if (const io::NamedTensor *magnitude =
            partOf(role.of(), AdapterRole::MAGNITUDE))
      for (int64_t o = 0; o < out; ++o) {
        double sum = 0;
        for (int64_t i = 0; i < in; ++i)
          sum += double(weight[o * in + i]) * weight[o * in + i];
        double factor = magnitude->values[o] / std::sqrt(sum);
        for (int64_t i = 0; i < in; ++i)
          weight[o * in + i] = float(weight[o * in + i] * factor);
      }
  }
  for (auto [tensor, values] : llvm::zip_equal(base.tensors, base.values))
    tensor.values = values; // re-point: values may have moved
  return llvm::Error::success();
}

static constexpr llvm::StringLiteral kSingleFile = "model.safetensors",
                                     kIndex = "model.safetensors.index.json",
                                     kConfig = "config.json";

/// The files of the model `directory` holds, either layout's: the single
/// file, the index and the shards it lists (of the names transformers and
/// Twill give shards, files of the folder: a listed path is never one).
static llvm::StringSet<> modelFiles(llvm::StringRef directory) {
  llvm::StringSet<> files{kSingleFile, kIndex};
  llvm::SmallString<256> index(directory);
  llvm::sys::path::append(index, kIndex);
  if (!llvm::sys::fs::exists(index))
    return files;
  llvm::Expected<llvm::json::Value> parsed = readJsonFile(index);
  if (!parsed) {
    // Unreadable, it lists nothing to remove; it is replaced or removed.
    llvm::consumeError(parsed.takeError());
    return files;
  }
  const llvm::json::Object *object = parsed->getAsObject();
  if (const llvm::json::Object *weightMap =
          object ? object->getObject("weight_map") : nullptr)
    for (const auto &entry : *weightMap)
      if (std::optional<llvm::StringRef> shard = entry.second.getAsString();
          shard && shard->starts_with("model-") &&
          shard->ends_with(".safetensors") &&
          shard->find_first_of("/\\") == llvm::StringRef::npos)
        files.insert(*shard);
  return files;
}

/// writeShards' files, each name written erased from `stale`.
static llvm::Error writeLayout(llvm::StringRef directory,
                               llvm::ArrayRef<io::NamedTensor> tensors,
                               int64_t maxBytes, llvm::StringSet<> &stale) {
  std::vector<std::vector<io::NamedTensor>> shards(1);
  int64_t shardBytes = 0, totalBytes = 0;
  for (const io::NamedTensor &tensor : tensors) {
    int64_t bytes = tensor.byteSize();
    if (shardBytes && shardBytes + bytes > maxBytes) {
      shards.emplace_back();
      shardBytes = 0;
    }
    shards.back().push_back(tensor);
    shardBytes += bytes;
    totalBytes += bytes;
  }
  auto inDirectory = [&](llvm::StringRef name) {
    llvm::SmallString<256> path(directory);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  if (shards.size() == 1) {
    stale.erase(kSingleFile);
    return io::writeSafetensors(inDirectory(kSingleFile), shards.front(),
                                {{"format", "pt"}});
  }
  llvm::json::Object weightMap;
  for (auto [index, shard] : llvm::enumerate(shards)) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors",
                  index + 1, shards.size());
    for (const io::NamedTensor &tensor : shard)
      weightMap[tensor.name] = std::string(name);
    stale.erase(name);
    if (llvm::Error error =
            io::writeSafetensors(inDirectory(name), shard, {{"format", "pt"}}))
      return error;
  }
  llvm::json::Object index{
      {"metadata", llvm::json::Object{{"total_size", totalBytes}}},
      {"weight_map", std::move(weightMap)}};
  std::string text;
  llvm::raw_string_ostream(text)
      << llvm::formatv("{0:2}", llvm::json::Value(std::move(index)));
  stale.erase(kIndex);
  return writeFileAtomically(inDirectory(kIndex),
                             [&](llvm::raw_ostream &os) { os << text; });
}

/// Writes `tensors` into `directory` as one model.safetensors, or as
/// model-0000i-of-0000n.safetensors files of at most `maxBytes` each with
/// model.safetensors.index.json, as transformers saves them. A model the
/// folder held before (an earlier run's, in the same output folder) goes
/// once the new one is whole: a stale index beside a new single file had
/// Twill read the old shards, a stale single file beside a new index had
/// transformers read it, and stale shards are read by loaders that take
/// every .safetensors file of a folder (vLLM's).
static llvm::Error writeShards(llvm::StringRef directory,
                               llvm::ArrayRef<io::NamedTensor> tensors,
                               int64_t maxBytes) {
  llvm::StringSet<> stale = modelFiles(directory);
  llvm::Error written = writeLayout(directory, tensors, maxBytes, stale);
  if (written)
    return written;
  for (const auto &entry : stale) {
    llvm::SmallString<256> path(directory);
    llvm::sys::path::append(path, entry.getKey());
    if (std::error_code error = llvm::sys::fs::remove(path))
      return llvm::createStringError(
          error, "cannot remove %s, of the model %s held before: %s",
          path.c_str(), directory.str().c_str(), error.message().c_str());
  }
  return llvm::Error::success();
}

/// Adds the quantized weights of `program` to `whole` as bitsandbytes'
/// 4-bit checkpoints hold them (transformers' save of a Linear4bit): the
/// codes, the scales' codes, the nested scales, both maps and the quant
/// state. A collective.
static llvm::Error addFourBitWeights(Program &program, WholeTensors &whole) {
  for (const Parameter &codes : program.executable().parameters()) {
    const QuantizedRole &role = codes.quantized();
    if (role.part() == QuantizedRole::FP8_VALUES)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "the FP8 base's weights have no checkpoint format Twill writes "
          "yet: --write-base writes an NF4 base");
    if (role.part() != QuantizedRole::CODES)
      continue;
    const std::string &name = role.of();
    if (role.experts() > 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "'" + name +
              "' is a mixture of experts' weight, which bitsandbytes' 4-bit "
              "checkpoints do not quantize (transformers quantizes linear "
              "layers): --write-base writes no such base");
    auto addFloats = [&](std::string key, std::vector<float> values) {
      whole.values.push_back(std::move(values));
      llvm::ArrayRef<float> stored = whole.values.back();
      whole.tensors.push_back({name + key, {int64_t(stored.size())}, stored});
    };
    // Each shaped [count] (the codes [count, 1], as bitsandbytes packs
    // them) unless said otherwise.
    auto addBytes = [&](std::string key, std::vector<uint8_t> bytes,
                        std::vector<int64_t> shape = {}) {
      whole.bytes.push_back(std::move(bytes));
      llvm::ArrayRef<uint8_t> stored = whole.bytes.back();
      if (shape.empty())
        shape = {int64_t(stored.size())};
      whole.tensors.push_back({name + key, shape, {}, stored});
    };
    llvm::Expected<io::Nf4Weight> weight = program.wholeNf4(codes);
    if (!weight)
      return weight.takeError();
    llvm::Expected<BufferBlock> layout = program.block(codes.buffer());
    if (!layout)
      return layout.takeError();
    int64_t rows = layout->globalShape[0], columns = layout->globalShape[1] * 2;
    float offset = weight->nestedOffset;
    int64_t codeBytes = weight->codes.size();
    addBytes("", std::move(weight->codes), {codeBytes, 1});
    addBytes(".absmax", std::move(weight->absmax));
    addFloats(".nested_absmax", std::move(weight->nestedAbsmax));
    addFloats(".quant_map", std::vector<float>(io::nf4Levels().begin(),
                                               io::nf4Levels().end()));
    addFloats(".nested_quant_map", std::vector<float>(io::dynamicMap().begin(),
                                                      io::dynamicMap().end()));
    // The offset's every digit: a float read back as the same float.
    std::string state =
        llvm::formatv("{{\"quant_type\": \"nf4\", \"blocksize\": {0}, "
                      "\"dtype\": \"float32\", \"shape\": [{1}, {2}], "
                      "\"nested_blocksize\": {3}, \"nested_dtype\": "
                      "\"float32\", \"nested_offset\": {4}}",
                      role.block_size(), rows, columns,
                      role.nested_block_size(),
                      llvm::format("%.17g", double(offset)))
            .str();
    addBytes(std::string(io::kNf4StateSuffix),
             std::vector<uint8_t>(state.begin(), state.end()));
  }
  return llvm::Error::success();
}

/// `whole` as the base checkpoint lays its tensors out: a mixture of
/// experts' weight whose checkpoint holds each expert's tensors (the Hub's
/// layout, its parameter's `stacked`) and not the fused one is written as
/// those tensors, its row blocks end to end as they were read, so that
/// loaders of either layout read what they gave.
static llvm::Error inTheLayoutRead(Program &program, WholeTensors &whole) {
  if (program.baseCheckpoint().empty() ||
      llvm::none_of(whole.parameters,
                    [](const Parameter *p) { return p->stacked_size() > 0; }))
    return llvm::Error::success();
  llvm::Expected<io::SafetensorsCheckpoint> base =
      io::SafetensorsCheckpoint::open(program.baseCheckpoint());
  if (!base)
    return base.takeError();
  std::vector<io::NamedTensor> tensors;
  std::vector<const Parameter *> parameters;
  for (auto [tensor, parameter] :
       llvm::zip_equal(whole.tensors, whole.parameters)) {
    if (!parameter->stacked_size() || base->contains(tensor.name)) {
      tensors.push_back(tensor);
      parameters.push_back(parameter);
      continue;
    }
    int64_t columns = tensor.shape.back(), row = 0;
    for (const std::string &piece : parameter->stacked()) {
      const io::TensorInfo *info = base->find(piece);
      int64_t rows = info ? info->shape.front() : 0;
      if (!info || info->shape.size() != 2 || info->shape[1] != columns ||
          (row + rows) * columns > int64_t(tensor.values.size()))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "%s: '%s', whose rows '%s' was read from, is no longer [rows, "
            "%lld] within it: the checkpoint changed while training",
            program.baseCheckpoint().str().c_str(), piece.c_str(),
            tensor.name.c_str(), (long long)columns);
      tensors.push_back({piece,
                         {rows, columns},
                         tensor.values.slice(row * columns, rows * columns)});
      parameters.push_back(parameter);
      row += rows;
    }
  }
  whole.tensors = std::move(tensors);
  whole.parameters = std::move(parameters);
  return llvm::Error::success();
}

llvm::Error twill::writeHfModel(Program &program, llvm::StringRef directory,
                                HfWeights weights) {
  bool held = weights == HfWeights::Held;
  llvm::Expected<WholeTensors> whole = parameterTensors(
      program, /*lora=*/false, [](llvm::StringRef name) { return name.str(); },
      /*skipQuantized=*/held);
  if (!whole)
    return whole.takeError();
  if (held)
    if (llvm::Error error = addFourBitWeights(program, *whole))
      return error;
  bool untied = false;
  if (weights == HfWeights::Merged) {
    llvm::Expected<WholeTensors> lora =
        parameterTensors(program, /*lora=*/true,
                         [](llvm::StringRef name) { return name.str(); });
    if (!lora)
      return lora.takeError();
    if (llvm::Error error = mergeLora(program.job(), *whole, *lora, untied))
      return error;
  }
  if (llvm::Error error = inTheLayoutRead(program, *whole))
    return error;
  if (!program.writesFiles())
    return llvm::Error::success();
  if (llvm::Error error = createDirectory(directory))
    return error;
  if (llvm::Error error =
          writeShards(directory, whole->tensors,
                      program.job().checkpoint().max_shard_bytes()))
    return error;

  // ModelConfig's fields are config.json's keys, its architectures among
  // them (the frontend states them).
  llvm::json::Object object = toJson(program.job().model());
  object["torch_dtype"] = object["dtype"] = "float32";
  if (untied)
    object["tie_word_embeddings"] = false;
  // What else the base's config.json says (its token ids, ...) stays true
  // of the model; so does its generation_config.json, copied as it is.
  llvm::SmallString<256> baseConfig(program.baseCheckpoint()),
      generation(program.baseCheckpoint());
  llvm::sys::path::append(baseConfig, kConfig);
  llvm::sys::path::append(generation, "generation_config.json");
  std::unique_ptr<llvm::MemoryBuffer> baseText;
  llvm::StringMap<llvm::StringRef> verbatim; // the base's keys, as written
  if (!program.baseCheckpoint().empty() &&
      llvm::sys::fs::is_regular_file(baseConfig)) {
    llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> read =
        readRegularFile(baseConfig, uint64_t(64) << 20, "the base's config");
    if (!read)
      return read.takeError();
    baseText = std::move(*read);
    llvm::Expected<llvm::json::Value> base =
        parseJson(baseText->getBuffer(), baseConfig);
    if (!base)
      return base.takeError();
    // Not its quantization: the weights written are not quantized (or,
    // held, are as Twill holds them). A value the job keeps is written as
    // the base writes it.
    if (const llvm::json::Object *keys = base->getAsObject())
      for (const auto &[key, value] : *keys)
        if (key != "quantization_config" &&
            (object.try_emplace(key, value).second || *object.get(key) == value))
          verbatim[key] = jsonMemberText(baseText->getBuffer(), key);
  }
  if (!program.baseCheckpoint().empty() &&
      llvm::sys::fs::is_regular_file(generation)) {
    llvm::SmallString<256> copy(directory);
    llvm::sys::path::append(copy, "generation_config.json");
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
        llvm::MemoryBuffer::getFile(generation);
    if (!text)
      return llvm::createStringError(text.getError(), "cannot read %s",
                                     generation.c_str());
    if (llvm::Error error = writeFileAtomically(
            copy, [&](llvm::raw_ostream &os) { os << (*text)->getBuffer(); }))
      return error;
  }
  if (held &&
      llvm::any_of(program.executable().parameters(),
                   [](const Parameter &p) { return p.has_quantized(); }))
    object["quantization_config"] =
        llvm::json::Object{{"quant_method", "bitsandbytes"},
                           {"load_in_4bit", true},
                           {"load_in_8bit", false},
                           {"bnb_4bit_quant_type", "nf4"},
                           {"bnb_4bit_use_double_quant", true},
                           {"bnb_4bit_compute_dtype", "float32"},
                           {"bnb_4bit_quant_storage", "uint8"}};
  std::string text = configText(object, verbatim);
  llvm::SmallString<256> config(directory);
  llvm::sys::path::append(config, kConfig);
  return writeFileAtomically(config,
                             [&](llvm::raw_ostream &os) { os << text; });
}

llvm::Error twill::checkNewModelFolder(llvm::StringRef flag,
                                       llvm::StringRef directory,
                                       llvm::StringRef baseDir) {
  llvm::SmallString<256> baseFolder(baseDir);
  if (!baseDir.empty() && !llvm::sys::fs::is_directory(baseDir))
    llvm::sys::path::remove_filename(baseFolder);
  if (llvm::Error error =
          checkNotInFolder(flag, directory, "the base folder", baseFolder))
    return error;
  // What makes the folder a model's: the index first (it names the
  // shards), the single file, its config, then any safetensors file.
  std::string found;
  for (llvm::StringRef name : {kIndex, kSingleFile, kConfig}) {
    llvm::SmallString<256> path(directory);
    llvm::sys::path::append(path, name);
    if (llvm::sys::fs::exists(path)) {
      found = std::string(path);
      break;
    }
  }
  std::error_code error;
  for (llvm::sys::fs::directory_iterator file(directory, error), end;
       !error && found.empty() && file != end; file.increment(error))
    if (llvm::StringRef(file->path()).ends_with(".safetensors"))
      found = file->path();
  if (found.empty())
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      flag + " " + directory + " holds a model already (" + found +
          "): a model written beside it would mix with it (loaders read a "
          "stale index's shards in place of the new file); give a new or "
          "empty folder, or remove that model first");
}

llvm::Error twill::saveTrainingResult(Program &program,
                                      llvm::StringRef directory,
                                      llvm::StringRef finalDirectory) {
  const JobConfig &job = program.job();
  if (job.has_full_finetune())
    return writeHfModel(program, directory, HfWeights::Trained);
  if (!job.checkpoint().random_base())
    return writePeftAdapter(program, directory, job.checkpoint().base_dir());
  // The adapter is only as good as its base: keep the random one beside it.
  llvm::SmallString<256> base(directory);
  llvm::sys::path::append(base, "base");
  if (llvm::Error error = writeHfModel(program, base, HfWeights::Trained))
    return error;
  llvm::SmallString<256> finalBase(finalDirectory.empty() ? directory
                                                          : finalDirectory);
  llvm::sys::path::append(finalBase, "base");
  return writePeftAdapter(program, directory, finalBase);
}
