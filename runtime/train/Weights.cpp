//===- Weights.cpp - filling parameters from checkpoints ------------------===//

#include "runtime/train/Weights.h"

#include "runtime/data/JsonLines.h"
#include "runtime/io/BitsAndBytes.h"
#include "runtime/io/Fp8.h"
#include "runtime/io/Safetensors.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <set>

using namespace twill;

std::string twill::peftAdapterKey(llvm::StringRef name) {
  return "base_model.model." + name.str();
}

static llvm::Error weightError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

/// Fails unless adapter_config.json in `adapterDir` describes the job's LoRA.
static llvm::Error checkAdapterConfig(llvm::StringRef adapterDir,
                                      const LoraConfig &lora) {
  llvm::SmallString<256> path(adapterDir);
  llvm::sys::path::append(path, "adapter_config.json");
  llvm::Expected<llvm::json::Value> config = readJsonFile(path);
  if (!config)
    return config.takeError();
  const llvm::json::Object *object = config->getAsObject();
  std::optional<int64_t> rank = object ? object->getInteger("r") : std::nullopt;
  std::optional<double> alpha =
      object ? object->getNumber("lora_alpha") : std::nullopt;
  if (!rank || !alpha)
    return weightError(path + ": needs r and lora_alpha");
  if (std::optional<llvm::StringRef> type = object->getString("peft_type");
      type && *type != "LORA")
    return weightError(path + ": peft_type is " + *type +
                       "; Twill loads LORA adapters");
  // Variants whose weights mean something else than the job's: rsLoRA
  // (scaled by lora_alpha / sqrt(r)) loads into an rsLoRA job alone, and
  // DoRA (magnitudes besides A and B) into a DoRA job alone; never as if
  // plain.
  bool dora = object->getBoolean("use_dora").value_or(false);
  if (dora != lora.use_dora())
    return weightError(llvm::formatv(
        "{0}: use_dora is {1}, and the job's lora.use_dora is {2}: set "
        "lora.use_dora={1} to load it",
        path, dora ? "true" : "false", lora.use_dora() ? "true" : "false"));
  bool rankStabilized = object->getBoolean("use_rslora").value_or(false);
  if (rankStabilized != lora.use_rslora())
    return weightError(llvm::formatv(
        "{0}: use_rslora is {1} (scaled by lora_alpha / {2}), and the job's "
        "lora.use_rslora is {3}: set lora.use_rslora={1} to load it",
        path, rankStabilized ? "true" : "false",
        rankStabilized ? "sqrt(r)" : "r",
        lora.use_rslora() ? "true" : "false"));
  // The modules and parameters it adapts, when it lists them (PEFT may
  // also write a pattern, which the tensors' names then settle).
  auto sameTargets =
      [&](llvm::StringRef key,
          const google::protobuf::RepeatedPtrField<std::string> &jobTargets)
      -> llvm::Error {
    const llvm::json::Array *targets = object->getArray(key);
    if (!targets)
      return llvm::Error::success();
    std::set<std::string> listed, job(jobTargets.begin(), jobTargets.end());
    for (const llvm::json::Value &target : *targets)
      if (std::optional<llvm::StringRef> name = target.getAsString())
        listed.insert(name->str());
    if (listed == job)
      return llvm::Error::success();
    auto named = [](const std::set<std::string> &targets) {
      return targets.empty() ? std::string("none") : llvm::join(targets, ",");
    };
    return weightError(llvm::formatv(
        "{0}: {1} are {2}, and the job's lora.{1} are {3}: load an adapter "
        "of the job's, or set lora.{1}={4}",
        path, key, named(listed), named(job), llvm::join(listed, ",")));
  };
  if (llvm::Error error = sameTargets("target_modules", lora.target_modules()))
    return error;
  if (llvm::Error error =
          sameTargets("target_parameters", lora.target_parameters()))
    return error;
  if (*rank != lora.rank() || std::abs(*alpha - lora.alpha()) > 1e-9)
    return weightError(
        llvm::formatv("{0}: the adapter has r={1}, lora_alpha={2}; the job has "
                      "lora.rank={3}, lora.alpha={4}",
                      path, *rank, *alpha, lora.rank(), lora.alpha()));
  return llvm::Error::success();
}

/// 64 random bits that depend only on `counter` (SplitMix64's output
/// function): element i of a tensor gets its own, so any thread count, and
/// any rank drawing any block, draws the same values.
static uint64_t randomBits(uint64_t counter) {
  uint64_t z = counter + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Fills `values` as an untrained parameter starts (`init`), from its own
/// random stream (the seed and the initializer's), one draw per value.
/// Magnitudes (ROW_NORMS) are zero here: initialiseMagnitudes sets them
/// once every weight is in place.
static void initialise(const Initializer &init, llvm::ArrayRef<int64_t> shape,
                       llvm::MutableArrayRef<float> values, uint64_t seed) {
  switch (init.kind()) {
  case Initializer::ZEROS:
  case Initializer::ROW_NORMS:
  case Initializer::ONES:
    std::fill(values.begin(), values.end(),
              init.kind() == Initializer::ONES ? 1.0f : 0.0f);
    return;
  case Initializer::INIT_UNSPECIFIED: // the loader refuses such a program
  case Initializer::NORMAL:
  case Initializer::KAIMING_UNIFORM:
    break;
  }
  // kaiming_uniform_(a=sqrt(5)), PEFT's choice for LoRA A: bound 1 /
  // sqrt(fan in). Normal: mean 0, deviation `std`, as the sum of four
  // uniforms (Irwin-Hall: bell-shaped within 3.5 deviations), which costs
  // no logarithm or sine: 8B parameters take seconds.
  bool uniform = init.kind() == Initializer::KAIMING_UNIFORM;
  double bound = 1.0 / std::sqrt(double(shape.empty() ? 1 : shape.back()));
  uint64_t stream = randomBits(seed ^ init.stream());
  int64_t count = values.size();
  constexpr double kSixteenBits = 0x1p-16;
  // (sum of four U(0,1) - 2) has deviation sqrt(4 / 12).
  const double normalScale = init.std() / std::sqrt(4.0 / 12);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    uint64_t bits = randomBits(stream + uint64_t(i));
    if (uniform) {
      values[i] = float((2 * ((bits >> 11) * 0x1p-53) - 1) * bound);
      continue;
    }
    double sum = 0;
    for (int part = 0; part < 4; ++part)
      sum += ((bits >> (16 * part)) & 0xffff) * kSixteenBits;
    values[i] = float((sum - 2) * normalScale);
  }
}

/// Fails naming the tensor and the file where `values` hold a NaN or an
/// infinity: training from them would only spread it.
static llvm::Error checkFinite(llvm::ArrayRef<float> values,
                               llvm::StringRef tensor, llvm::StringRef file) {
  int64_t count = values.size(), first = count;
#pragma omp parallel for reduction(min : first)
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]))
      first = std::min(first, i);
  if (first == count)
    return llvm::Error::success();
  return weightError(llvm::formatv("{0}: tensor '{1}' holds {2} at element "
                                   "{3} of this rank's block: a checkpoint "
                                   "must hold finite numbers",
                                   file, tensor, values[first], first));
}

/// DoRA's magnitudes (ROW_NORMS) start as PEFT's do, as the norm of each
/// output row of W + scale B A, which with B = 0 is W's, the weight their
/// adapter adapts (the rows of it a block's magnitudes are). A collective:
/// each weight is put together from every rank's block (as the host holds
/// it: the device has nothing yet), each rank keeps its block of the norms.
static llvm::Error initialiseMagnitudes(Program &program) {
  llvm::Expected<std::vector<StoredTensor>> tensors =
      storedTensors(program.executable());
  if (!tensors)
    return tensors.takeError();
  // Each weight's rows' norms, put together and computed once however many
  // blocks of magnitudes (a fused module's) start from them.
  llvm::StringMap<std::vector<float>> rowNorms;
  for (const Parameter &parameter : program.executable().parameters()) {
    if (parameter.init().kind() != Initializer::ROW_NORMS)
      continue;
    const AdapterRole &role = parameter.adapter();
    llvm::StringRef weightName = role.tied().empty() ? role.of() : role.tied();
    auto weight = llvm::find_if(*tensors, [&](const StoredTensor &tensor) {
      return tensor.name == weightName;
    });
    if (weight == tensors->end())
      return weightError("'" + parameter.name() +
                         "' starts as the rows' "
                         "norms of '" +
                         role.of() + "', which the program does not hold");
    llvm::Expected<BufferBlock> block = program.block(parameter.buffer());
    if (!block)
      return block.takeError();
    auto [norms, added] = rowNorms.try_emplace(weightName);
    if (added) {
      llvm::Expected<std::vector<float>> whole =
          program.wholeStored(*weight, /*onHost=*/true);
      if (!whole)
        return whole.takeError();
      int64_t rows = weight->shape[0], columns = weight->shape[1];
      norms->second.resize(rows);
      for (int64_t r = 0; r < rows; ++r) {
        const float *row = whole->data() + r * columns;
        double sum = 0;
        for (int64_t c = 0; c < columns; ++c)
          sum += double(row[c]) * row[c];
        norms->second[r] = float(std::sqrt(sum));
      }
    }
    int64_t first = storedFirstRow(parameter), rows = block->globalShape[0];
    if (first + rows > int64_t(norms->second.size()))
      return weightError("'" + parameter.name() + "' has more rows than '" +
                         role.of() + "'");
    const Buffer &buffer = program.buffers().info(parameter.buffer());
    std::vector<float> local(numElements(buffer));
    sliceBlock<float>(llvm::ArrayRef<float>(norms->second).slice(first, rows),
                      *block, local);
    if (llvm::Error error =
            program.buffers().setFloats(parameter.buffer(), local))
      return error;
  }
  return llvm::Error::success();
}

/// A quantized weight whole, in the format the program holds it in.
struct QuantizedWeight {
  io::Nf4Weight nf4;
  io::Fp8Weight fp8;
};

/// A quantized base's weights whole, one at a time: each is read from a
/// bitsandbytes 4-bit checkpoint as it is (NF4), or quantized from the
/// checkpoint's values (a random base's: those its codes' initializer
/// draws, as the weight unquantized would start). Quantizing, a rank codes
/// only the rows its blocks hold (the rest stay zero): FP8's row scales
/// are each row's own; NF4's double quantization takes the mean of every
/// block's absmax, which the ranks find together, each from a share of
/// the rows. NF4 from a checkpoint is a collective.
class QuantizedWeights {
public:
  QuantizedWeights(Program &program,
                   const std::optional<io::SafetensorsCheckpoint> &base,
                   uint64_t seed)
      : program(program), base(base), seed(seed) {
    for (const Parameter &parameter : program.executable().parameters())
      if (standsForWeight(parameter.quantized()))
        standing[parameter.quantized().of()] = &parameter;
  }

  /// The weight `parameter` is part of.
  llvm::Expected<const QuantizedWeight *> of(const Parameter &parameter) {
    const QuantizedRole &role = parameter.quantized();
    if (role.of() == current)
      return &weight;
    const Parameter *codes = standing.lookup(role.of());
    if (!codes)
      return weightError("'" + parameter.name() + "' is part of quantized " +
                         "weight '" + role.of() +
                         "', whose codes the program does not hold");
    bool fp8 = codes->quantized().part() == QuantizedRole::FP8_VALUES;
    // The codes' whole shape: [rows, columns / 2] (NF4) or [rows, columns].
    llvm::Expected<BufferBlock> block = program.block(codes->buffer());
    if (!block)
      return block.takeError();
    std::vector<int64_t> shape{block->globalShape[0],
                               block->globalShape[1] * (fp8 ? 1 : 2)};
    const std::string &name = role.of();
    // A mixture of experts' weight is read as rows: of its fused tensor,
    // or of the Hub's tensors of each expert.
    rowsOf.clear();
    if (role.experts() > 0 && base)
      rowsOf = base->contains(name)
                   ? std::vector<std::string>{name}
                   : std::vector<std::string>(codes->stacked().begin(),
                                              codes->stacked().end());
    bool fourBit =
        base && base->contains(name) && io::isBitsAndBytes4bit(*base, name);
    if (fourBit && fp8)
      return weightError(base->fileOf(name) + ": '" + name +
                         "' is a 4-bit weight, and quantization.base FP8 "
                         "quantizes a float one: train with "
                         "quantization.base NF4, or from a float checkpoint");
    if (fourBit) {
      llvm::Expected<io::Nf4Weight> read =
          io::readBitsAndBytes4bit(*base, name, shape);
      if (!read)
        return read.takeError();
      weight.nf4 = std::move(*read);
    } else if (fp8 && base) {
      if (llvm::Error error = readFp8Rows(name, shape))
        return std::move(error);
    } else if (base && shape[1] % role.block_size() == 0) {
      if (llvm::Error error = readNf4Rows(name, shape, role, *codes))
        return std::move(error);
    } else {
      std::vector<float> values(shape[0] * shape[1]);
      if (base) {
        llvm::Expected<std::vector<float>> read =
            readRows(name, shape, 0, shape[0]);
        if (!read)
          return read.takeError();
        values = std::move(*read);
      } else {
        initialise(codes->init(), shape, values, seed);
      }
      if (fp8)
        weight.fp8 = io::quantizeFp8(values, shape[0], shape[1]);
      else
        weight.nf4 = io::quantizeNf4(values, role.block_size(),
                                     role.nested_block_size());
    }
    if (!fp8 && (weight.nf4.blockSize != role.block_size() ||
                 weight.nf4.nestedBlockSize != role.nested_block_size()))
      return weightError(llvm::formatv(
          "{0}: 4-bit weight '{1}' is quantized in blocks of {2} (nested "
          "{3}), the program's in blocks of {4} (nested {5})",
          base ? base->fileOf(name) : "", name, weight.nf4.blockSize,
          weight.nf4.nestedBlockSize, role.block_size(),
          role.nested_block_size()));
    current = name;
    return &weight;
  }

private:
  /// The rows [first, end) of weight `name` that this rank's blocks of the
  /// parts `holding` hold (holding(part): whether a part is one of them).
  template <typename Holding>
  llvm::Expected<std::pair<int64_t, int64_t>>
  heldRows(const std::string &name, int64_t rows, Holding holding) {
    int64_t first = rows, end = 0;
    for (const Parameter &part : program.executable().parameters()) {
      if (part.quantized().of() != name || !holding(part))
        continue;
      llvm::Expected<BufferBlock> block = program.block(part.buffer());
      if (!block)
        return block.takeError();
      if (block->extent[0] > 0) {
        first = std::min(first, block->offset[0]);
        end = std::max(end, block->offset[0] + block->extent[0]);
      }
    }
    return std::make_pair(first, std::max(first, end));
  }

  /// Rows [first, end) of weight `name` ([rows, columns] `shape`) from the
  /// checkpoint, finite.
  llvm::Expected<std::vector<float>> readRows(const std::string &name,
                                              llvm::ArrayRef<int64_t> shape,
                                              int64_t first, int64_t end) {
    std::vector<float> values((end - first) * shape[1]);
    if (values.empty())
      return values;
    llvm::Error error =
        rowsOf.empty()
            ? base->readBlockF32(name, shape, {first, 0},
                                 {end - first, shape[1]}, values)
            : base->readStackedBlockF32(rowsOf, shape, {first, 0},
                                        {end - first, shape[1]}, values);
    if (error)
      return std::move(error);
    if (llvm::Error error = checkFinite(
            values, name, base->fileOf(rowsOf.empty() ? name : rowsOf[0])))
      return std::move(error);
    return values;
  }

  /// NF4 weight `name` ([rows, columns] `shape`, its rows whole blocks)
  /// from the checkpoint: every block's absmax, each rank finding those of
  /// its share of the rows (the sum over the world of shares in zeros puts
  /// them together, exactly), their double quantization, and the codes of
  /// the rows this rank's codes hold.
  llvm::Error readNf4Rows(const std::string &name,
                          llvm::ArrayRef<int64_t> shape,
                          const QuantizedRole &role, const Parameter &codes) {
    int64_t rows = shape[0], columns = shape[1], size = role.block_size(),
            world = program.worldSize(), rank = program.rank();
    int64_t shareFirst = rows * rank / world,
            shareEnd = rows * (rank + 1) / world;
    llvm::Expected<std::vector<float>> share =
        readRows(name, shape, shareFirst, shareEnd);
    if (!share)
      return share.takeError();
    std::vector<float> absmax(rows * columns / size, 0.0f);
    std::vector<float> shareAbsmax = io::blockAbsmax(*share, size);
    std::copy(shareAbsmax.begin(), shareAbsmax.end(),
              absmax.begin() + shareFirst * columns / size);
    if (llvm::Error error = program.sumOverWorld(absmax))
      return error;
    weight.nf4 = io::Nf4Weight();
    weight.nf4.blockSize = size;
    weight.nf4.nestedBlockSize = role.nested_block_size();
    io::quantizeNf4Scales(absmax, weight.nf4);
    weight.nf4.codes.assign(rows * columns / 2, 0);
    llvm::Expected<std::pair<int64_t, int64_t>> held = heldRows(
        name, rows, [&](const Parameter &part) { return &part == &codes; });
    if (!held)
      return held.takeError();
    auto [first, end] = *held;
    if (first == end)
      return llvm::Error::success();
    // The share read is reused where it is these rows.
    llvm::Expected<std::vector<float>> values =
        first == shareFirst && end == shareEnd
            ? std::move(*share)
            : readRows(name, shape, first, end);
    if (!values)
      return values.takeError();
    io::nf4Codes(*values,
                 llvm::ArrayRef<float>(absmax).slice(first * columns / size),
                 size,
                 llvm::MutableArrayRef<uint8_t>(weight.nf4.codes)
                     .slice(first * columns / 2, (end - first) * columns / 2));
    return llvm::Error::success();
  }

  /// FP8 weight `name` ([rows, columns] `shape`) from the checkpoint: each
  /// row's scale is its own, so only the rows this rank's blocks of its
  /// parts hold are read and quantized (the rest stay zero).
  llvm::Error readFp8Rows(const std::string &name,
                          llvm::ArrayRef<int64_t> shape) {
    int64_t columns = shape[1];
    weight.fp8.values.assign(shape[0] * columns, 0);
    weight.fp8.scales.assign(shape[0], 0.0f);
    llvm::Expected<std::pair<int64_t, int64_t>> held =
        heldRows(name, shape[0], [](const Parameter &) { return true; });
    if (!held)
      return held.takeError();
    auto [first, end] = *held;
    int64_t rows = end - first;
    if (!rows)
      return llvm::Error::success();
    llvm::Expected<std::vector<float>> values =
        readRows(name, shape, first, end);
    if (!values)
      return values.takeError();
    io::Fp8Weight rowsHeld = io::quantizeFp8(*values, rows, columns);
    std::copy(rowsHeld.values.begin(), rowsHeld.values.end(),
              weight.fp8.values.begin() + first * columns);
    std::copy(rowsHeld.scales.begin(), rowsHeld.scales.end(),
              weight.fp8.scales.begin() + first);
    return llvm::Error::success();
  }

  Program &program;
  const std::optional<io::SafetensorsCheckpoint> &base;
  uint64_t seed;
  llvm::StringMap<const Parameter *> standing;
  std::string current;
  QuantizedWeight weight;
  /// The tensors whose rows are the weight being read (a mixture of
  /// experts'), or none: the weight itself.
  std::vector<std::string> rowsOf;
};

/// Fills `parameter`, a part of a quantized weight, with this rank's block
/// of it.
static llvm::Error loadQuantizedPart(Program &program,
                                     const Parameter &parameter,
                                     QuantizedWeights &weights) {
  llvm::Expected<const QuantizedWeight *> weight = weights.of(parameter);
  if (!weight)
    return weight.takeError();
  llvm::Expected<BufferBlock> block = program.block(parameter.buffer());
  if (!block)
    return block.takeError();
  const Buffer &buffer = program.buffers().info(parameter.buffer());
  int64_t whole = 1;
  for (int64_t size : block->globalShape)
    whole *= size;
  // The part whole, this rank's block of it into the buffer: bytes or
  // fp32 scales.
  auto place = [&](auto all) -> llvm::Error {
    using T = typename decltype(all)::value_type;
    if (int64_t(all.size()) != whole)
      return weightError(
          "'" + parameter.name() + "' holds " + std::to_string(whole) +
          " values of quantized weight '" + parameter.quantized().of() +
          "', whose part has " + std::to_string(all.size()));
    std::vector<T> local(numElements(buffer));
    sliceBlock<T>(all, *block, local);
    if constexpr (std::is_same_v<T, uint8_t>)
      return program.buffers().setBytes(parameter.buffer(), local);
    else
      return program.buffers().setFloats(parameter.buffer(), local);
  };
  const QuantizedWeight &w = **weight;
  using Bytes = llvm::ArrayRef<uint8_t>;
  using Floats = llvm::ArrayRef<float>;
  switch (parameter.quantized().part()) {
  case QuantizedRole::CODES:
    return place(Bytes(w.nf4.codes));
  case QuantizedRole::ABSMAX:
    return place(Bytes(w.nf4.absmax));
  case QuantizedRole::NESTED_ABSMAX:
    return place(Floats(w.nf4.nestedAbsmax));
  case QuantizedRole::NESTED_OFFSET:
    return place(Floats(w.nf4.nestedOffset));
  case QuantizedRole::FP8_VALUES:
    return place(Bytes(w.fp8.values));
  case QuantizedRole::FP8_ROW_SCALES:
    return place(Floats(w.fp8.scales));
  default: // the loader refuses such a program
    return weightError("'" + parameter.name() + "' is no quantized part");
  }
}

/// Whether transformers drops checkpoint tensor `name` without a word: the
/// buffers earlier versions saved (its _adjust_missing_and_unexpected_keys'
/// patterns), which are computed, not read.
static bool droppedBuffer(llvm::StringRef name) {
  return name.contains("rotary_emb.inv_freq") || name == "position_ids" ||
         name.ends_with(".position_ids");
}

/// The module holding `name` in a checkpoint's dotted names (PyTorch's
/// state_dict), "" at the top.
static llvm::StringRef parentModule(llvm::StringRef name) {
  return name.contains('.') ? name.rsplit('.').first : "";
}

/// Checks the tensors of `base` (read from `baseDir`) that no parameter of
/// `program` reads, of which transformers warns and which it leaves out.
/// One in a module of the model, or in a module directly inside one (a
/// bias of a projection the model has none of, a norm its attention
/// lacks), says the checkpoint is of another model, or of this one
/// configured otherwise, and that training without it would train another
/// model: refused. The others (layers past the job's count, the parts of
/// a model around this one) are said, on rank 0. A checkpoint without a
/// tensor the model reads is left to the read, which names it.
static llvm::Error checkUnusedTensors(Program &program,
                                      const io::SafetensorsCheckpoint &base,
                                      llvm::StringRef baseDir) {
  llvm::StringSet<> read, modules;
  for (const Parameter &parameter : program.executable().parameters()) {
    if (parameter.has_adapter())
      continue;
    llvm::StringRef name = parameter.has_quantized()
                               ? llvm::StringRef(parameter.quantized().of())
                               : storedTensorName(parameter);
    if (!base.contains(name))
      return llvm::Error::success();
    read.insert(name);
    llvm::StringRef module = parentModule(name);
    for (llvm::StringRef holder : {module, parentModule(module)})
      if (!holder.empty())
        modules.insert(holder);
  }
  std::vector<std::string> foreign, unread;
  for (std::string &name : base.names()) {
    std::optional<llvm::StringRef> weight = io::fourBitWeightOf(name);
    if (read.contains(name) || droppedBuffer(name) ||
        (weight && read.contains(*weight)))
      continue;
    llvm::StringRef module = parentModule(name);
    bool inModel =
        modules.contains(module) || modules.contains(parentModule(module));
    (inModel ? foreign : unread).push_back(std::move(name));
  }
  // "N tensors" and the first five of their names.
  auto count = [](llvm::ArrayRef<std::string> names) {
    return names.size() == 1 ? std::string("1 tensor")
                             : llvm::formatv("{0} tensors", names.size()).str();
  };
  auto firstNames = [](llvm::ArrayRef<std::string> names) {
    std::string list = llvm::join(names.take_front(5), ", ");
    if (names.size() > 5)
      list += llvm::formatv(" and {0} more", names.size() - 5);
    return list;
  };
  if (!foreign.empty())
    return weightError(llvm::formatv(
        "{0}: {1} {2} in the model's modules, and the model has no "
        "parameter for {3} ({4}): the checkpoint is of another model, or of "
        "this one configured otherwise (its model_type here is \"{5}\"), and "
        "training without {3} would train another model",
        base.fileOf(foreign.front()), count(foreign),
        foreign.size() == 1 ? "lies" : "lie",
        foreign.size() == 1 ? "it" : "them", firstNames(foreign),
        program.job().model().model_type()));
  if (!unread.empty() && program.writesFiles())
    llvm::WithColor::warning() << llvm::formatv(
        "{0}: {1} of the checkpoint {2} no parameter of this model, and {2} "
        "not read: {3}\n",
        baseDir, count(unread), unread.size() == 1 ? "is" : "are",
        firstNames(unread));
  return llvm::Error::success();
}

llvm::Expected<uint64_t> twill::loadParameters(Program &program,
                                               llvm::StringRef baseDir,
                                               llvm::StringRef adapterDir) {
  const JobConfig &job = program.job();
  bool randomBase = baseDir.empty() && job.checkpoint().random_base();
  if (baseDir.empty() && !randomBase)
    return weightError("no base model: set checkpoint.base_dir in the job "
                       "(or checkpoint.random_base), or pass --weights");
  std::optional<io::SafetensorsCheckpoint> base;
  if (!randomBase) {
    llvm::Expected<io::SafetensorsCheckpoint> opened =
        io::SafetensorsCheckpoint::open(baseDir);
    if (!opened)
      return opened.takeError();
    base = std::move(*opened);
    // Once per base a program reads (an evaluation reads it again with its
    // adapter), before any of it is read.
    if (program.baseCheckpoint() != baseDir)
      if (llvm::Error error = checkUnusedTensors(program, *base, baseDir))
        return std::move(error);
    program.setBaseCheckpoint(baseDir);
  }

  uint64_t seed = job.train().seed();
  std::unique_ptr<io::SafetensorsFile> adapter;
  if (!adapterDir.empty()) {
    if (llvm::Error error = checkAdapterConfig(adapterDir, job.lora()))
      return error;
    llvm::SmallString<256> path(adapterDir);
    llvm::sys::path::append(path, "adapter_model.safetensors");
    llvm::Expected<std::unique_ptr<io::SafetensorsFile>> opened =
        io::SafetensorsFile::open(path);
    if (!opened)
      return opened.takeError();
    adapter = std::move(*opened);
    // The adapter adapts exactly the job's modules: one trained with other
    // targets is not loaded in part. (PEFT may also save base layers beside
    // the LoRA weights, lm_head's say; those are not Twill's to load.)
    llvm::StringSet<> expected;
    for (const Parameter &parameter : program.executable().parameters())
      if (parameter.has_adapter())
        expected.insert(peftAdapterKey(storedTensorName(parameter)));
    for (const std::string &name : adapter->names())
      if (llvm::StringRef(name).contains(".lora_") && !expected.contains(name))
        return weightError(
            path + ": holds '" + name +
            "', which this job does not adapt: the adapter was trained with "
            "other targets (or for another model); the job's "
            "lora.target_modules are " +
            llvm::join(job.lora().target_modules(), ",") +
            ", its lora.target_parameters " +
            llvm::join(job.lora().target_parameters(), ","));
  }

  // Scratch reused by every parameter: the largest is allocated once.
  std::vector<float> local, values, whole;
  QuantizedWeights quantized(program, base, seed);
  for (const Parameter &parameter : program.executable().parameters()) {
    if (parameter.has_quantized()) {
      if (llvm::Error error = loadQuantizedPart(program, parameter, quantized))
        return std::move(error);
      continue;
    }
    const Buffer &buffer = program.buffers().info(parameter.buffer());
    if (buffer.dtype() != F32 && buffer.dtype() != BF16)
      return weightError("parameter '" + parameter.name() +
                         "' is neither fp32 nor bf16");
    llvm::Expected<BufferBlock> block = program.block(parameter.buffer());
    if (!block)
      return block.takeError();
    // Made in fp32, stored as the program keeps the parameter.
    local.resize(numElements(buffer));
    bool lora = parameter.has_adapter();
    if ((lora && adapter) || (!lora && base)) {
      // Each rank reads only its block of the checkpoint's tensor (of its
      // rows of it, for a block of a fused one).
      const std::string &tensor = storedTensorName(parameter);
      std::vector<int64_t> shape = block->globalShape, offset = block->offset;
      if (parameter.has_stored()) {
        shape[0] = parameter.stored().tensor_rows();
        offset[0] += parameter.stored().first_row();
      }
      values.resize(block->extentElements());
      // A checkpoint may hold a mixture of experts' weights an expert at a
      // time: the tensors the parameter's rows are stacked from.
      bool stacked =
          !lora && !base->contains(tensor) && parameter.stacked_size() > 0;
      std::vector<std::string> pieces;
      if (stacked)
        pieces.assign(parameter.stacked().begin(), parameter.stacked().end());
      llvm::Error error =
          lora ? adapter->readBlockF32(peftAdapterKey(tensor), shape, offset,
                                       block->extent, values)
          : stacked ? base->readStackedBlockF32(pieces, shape, offset,
                                                block->extent, values)
                    : base->readBlockF32(tensor, shape, offset, block->extent,
                                         values);
      if (error)
        return std::move(error);
      if (llvm::Error error = checkFinite(
              values, tensor,
              lora ? adapter->path()
                   : base->fileOf(stacked ? pieces.front() : tensor)))
        return error;
      placeBlock(values, *block, local);
    } else if (block->globalShape == block->localShape &&
               block->extentElements() == int64_t(local.size())) {
      initialise(parameter.init(), block->globalShape, local, seed);
    } else {
      // The same values on every rank: draw the whole tensor, keep the
      // block, so any mesh starts from the same weights.
      int64_t count = 1;
      for (int64_t size : block->globalShape)
        count *= size;
      whole.resize(count);
      initialise(parameter.init(), block->globalShape, whole, seed);
      sliceBlock<float>(whole, *block, local);
    }
    if (llvm::Error stored =
            program.buffers().setFloats(parameter.buffer(), local))
      return std::move(stored);
  }
  if (!adapter)
    if (llvm::Error error = initialiseMagnitudes(program))
      return std::move(error);
  return (base ? base->bytesRead() : 0) + (adapter ? adapter->bytesRead() : 0);
}
