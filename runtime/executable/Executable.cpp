//===- Executable.cpp - loading and checking compiled jobs ----------------===//

#include "runtime/executable/Executable.h"

#include "proto/ExecutableChecksum.h"
#include "runtime/executable/BFloat16.h"
#include "runtime/executable/Opcodes.h"
#include "runtime/executable/StoredTensors.h"

#include "google/protobuf/descriptor.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>

using namespace twill;

static llvm::Error invalid(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "invalid executable: " + what);
}

int64_t twill::bytesPerElement(DType dtype) {
  switch (dtype) {
  case F32:
  case I32:
    return 4;
  case BF16:
  case F16:
    return 2;
  case I64:
    return 8;
  case U8:
    return 1;
  }
  return 0;
}

int64_t twill::numElements(const Buffer &buffer) {
  int64_t count = 1;
  for (int64_t dim : buffer.shape())
    count *= dim;
  return count;
}

static llvm::Error problem(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

static llvm::Error checkFormat(const Executable &executable) {
  if (executable.format_version() != EXECUTABLE_FORMAT)
    return problem(llvm::formatv(
        "Executable format {0}{1}, and this runtime reads format {2}: "
        "compile the job again with the twillc built with it",
        executable.format_version(),
        executable.format_version() == EXECUTABLE_UNVERSIONED
            ? " (written before formats had versions)"
            : "",
        int(EXECUTABLE_FORMAT)));
  return llvm::Error::success();
}

/// Whether `bytes` hold text (a job's textproto, a JSON file) rather than a
/// serialized program, whose lengths and numbers are bytes below 0x20.
static bool isText(llvm::StringRef bytes) {
  return !bytes.empty() && llvm::json::isUTF8(bytes) &&
         llvm::all_of(bytes, [](unsigned char c) {
           return c >= 0x20 || c == '\n' || c == '\r' || c == '\t';
         });
}

llvm::Expected<Executable> twill::loadExecutable(llvm::StringRef path) {
  // A FIFO or a device (/dev/zero) would be read without end.
  if (llvm::sys::fs::exists(path) && !llvm::sys::fs::is_regular_file(path))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s is not a regular file: give the program twillc wrote",
        path.str().c_str());
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return llvm::createStringError(file.getError(), "cannot read %s: %s",
                                   path.str().c_str(),
                                   file.getError().message().c_str());
  if (isText((*file)->getBuffer()))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s is text, not a program (a job config?): run `twill train %s` "
        "to compile and run a job, or compile it first with `twillc %s -o "
        "job.twx` and give twill-train job.twx",
        path.str().c_str(), path.str().c_str(), path.str().c_str());
  Executable executable;
  if (!executable.ParseFromArray((*file)->getBufferStart(),
                                 (*file)->getBufferSize()))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s is not an Executable written by twillc (corrupt or truncated)",
        path.str().c_str());
  // A program of another format is refused before anything else is read
  // from it; an empty file is no program of any.
  llvm::Error format = (*file)->getBufferSize() ? checkFormat(executable)
                                                : llvm::Error::success();
  if (format)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " +
                                       llvm::toString(std::move(format)));
  if (!executable.has_job() || executable.entry_points_size() == 0)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s holds no program (an empty file?): compile one with twillc",
        path.str().c_str());
  if (!isIntact((*file)->getBuffer(), executable))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "%s is damaged: its contents do not match the checksum twillc "
        "sealed it with (a bad copy, a disk error, or an edit): compile the "
        "job again",
        path.str().c_str());
  if (llvm::Error error = verifyExecutable(executable))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " +
                                       llvm::toString(std::move(error)));
  return executable;
}

/// Fails unless `count` values are within [least, most] (most -1: no
/// bound), naming them as `what`s.
static llvm::Error checkCount(int count, int least, int most,
                              llvm::StringRef what) {
  if (Arity::admits(count, least, most))
    return llvm::Error::success();
  std::string takes = most == least ? std::to_string(least)
                      : most < 0    ? std::to_string(least) + " or more"
                                    : llvm::formatv("{0} to {1}", least, most);
  return problem(llvm::formatv("has {0} {1}{2}; its kind takes {3}", count,
                               what, count == 1 ? "" : "s", takes));
}

/// Fails unless the instruction has an opcode this runtime knows, as many
/// operands and results as its kind takes, and every attribute it carries.
static llvm::Error checkInstruction(const Instruction &instruction) {
  if (!instruction.has_opcode() || instruction.opcode() == OPCODE_UNSPECIFIED)
    return problem("has no opcode this runtime knows: compiled by a newer "
                   "twillc?");
  Arity arity = arityOf(instruction.opcode());
  if (llvm::Error error =
          checkCount(instruction.operands_size(), arity.leastOperands,
                     arity.mostOperands, "operand"))
    return error;
  if (llvm::Error error =
          checkCount(instruction.results_size(), arity.leastResults,
                     arity.mostResults, "result"))
    return error;
  Instruction::AttributesCase expected = attributesOf(instruction.opcode());
  if (instruction.attributes_case() != expected)
    return problem(expected == Instruction::ATTRIBUTES_NOT_SET
                       ? "carries attributes its kind has none of"
                       : "lacks its attributes");
  if (expected == Instruction::ATTRIBUTES_NOT_SET)
    return llvm::Error::success();
  // Every attribute is written by the emitter: a missing one is an error,
  // never a default.
  const google::protobuf::Reflection &reflection = *instruction.GetReflection();
  const google::protobuf::Message &attributes = reflection.GetMessage(
      instruction, instruction.GetDescriptor()->FindFieldByNumber(expected));
  const google::protobuf::Descriptor &kind = *attributes.GetDescriptor();
  for (int i = 0; i < kind.field_count(); ++i) {
    const google::protobuf::FieldDescriptor &field = *kind.field(i);
    if (!field.is_repeated() &&
        !attributes.GetReflection()->HasField(attributes, &field))
      return problem("lacks attribute " + field.name());
  }
  return llvm::Error::success();
}

/// A quantized weight's part: frozen, of a weight, in its dtype and rank;
/// and only such a part holds bytes.
static llvm::Error checkQuantized(const Executable &executable,
                                  const Parameter &parameter) {
  const Buffer &buffer = executable.buffers(parameter.buffer());
  const QuantizedRole &role = parameter.quantized();
  if (!parameter.has_quantized())
    return buffer.dtype() == U8
               ? invalid("parameter '" + parameter.name() +
                         "' holds bytes but is part of no quantized weight")
               : llvm::Error::success();
  QuantizedRole::Part part = role.part();
  bool fp8 = part == QuantizedRole::FP8_VALUES ||
             part == QuantizedRole::FP8_ROW_SCALES;
  bool bytes = part == QuantizedRole::CODES || part == QuantizedRole::ABSMAX ||
               part == QuantizedRole::FP8_VALUES;
  int rank = bytes ? 2
             : part == QuantizedRole::NESTED_ABSMAX ||
                     part == QuantizedRole::FP8_ROW_SCALES
                 ? 1
                 : 0;
  // NF4's blocks as bitsandbytes has them; FP8 has none.
  bool blocks = fp8 ? role.block_size() == 0 && role.nested_block_size() == 0
                    : role.block_size() >= 2 && role.block_size() % 2 == 0 &&
                          role.block_size() <= 4096 &&
                          role.nested_block_size() >= 1 &&
                          role.nested_block_size() <= 4096;
  if (part == QuantizedRole::PART_UNSPECIFIED || role.of().empty() ||
      parameter.trainable() || parameter.has_adapter() || !blocks ||
      buffer.dtype() != (bytes ? U8 : F32) || buffer.shape_size() != rank)
    return invalid("parameter '" + parameter.name() +
                   "' is a quantized weight's part without its part, weight "
                   "or block sizes, or trained, or not of its part's dtype "
                   "and rank");
  return llvm::Error::success();
}

namespace {

/// Which buffers hold a value before any entry point runs (parameters,
/// states, inputs), and which of them an output may update (a parameter's
/// or a state's).
struct Preset {
  std::vector<bool> written, updatable;
};

bool inRange(const Executable &executable, int id) {
  return id >= 0 && id < executable.buffers_size();
}

/// Each buffer's size is its shape's and dtype's.
llvm::Error checkBuffers(const Executable &executable) {
  for (int id = 0; id < executable.buffers_size(); ++id) {
    const Buffer &buffer = executable.buffers(id);
    for (int64_t dim : buffer.shape())
      if (dim < 0)
        return invalid(llvm::formatv("buffer {0} has a negative dim", id));
    if (buffer.size_bytes() !=
        numElements(buffer) * bytesPerElement(buffer.dtype()))
      return invalid(
          llvm::formatv("buffer {0} has size {1}, its shape and "
                        "dtype need {2}",
                        id, buffer.size_bytes(),
                        numElements(buffer) * bytesPerElement(buffer.dtype())));
  }
  return llvm::Error::success();
}

/// A parameter's roles: how it starts, and an adapter's part and weight.
llvm::Error checkParameter(const Executable &executable,
                           const Parameter &parameter) {
  const Initializer &init = parameter.init();
  if (init.kind() == Initializer::INIT_UNSPECIFIED ||
      (init.kind() == Initializer::NORMAL) != (init.std() > 0))
    return invalid("parameter '" + parameter.name() +
                   "' says not how it starts (or a normal one's deviation)");
  const AdapterRole &adapter = parameter.adapter();
  if (parameter.has_adapter() &&
      (adapter.part() == AdapterRole::PART_UNSPECIFIED || adapter.of().empty()))
    return invalid("parameter '" + parameter.name() +
                   "' is an adapter's without its part or weight");
  if (init.kind() == Initializer::ROW_NORMS && !parameter.has_adapter())
    return invalid("parameter '" + parameter.name() +
                   "' starts as a weight's rows' norms but adapts none");
  return checkQuantized(executable, parameter);
}

/// A state's kind; a gradient sum or a moment is kept for a parameter of
/// the program.
llvm::Error checkState(const State &state,
                       const llvm::StringSet<> &parameters) {
  bool perParameter = state.kind() == State::GRAD_SUM ||
                      state.kind() == State::EXP_AVG ||
                      state.kind() == State::EXP_AVG_SQ;
  if (state.kind() == State::KIND_UNSPECIFIED ||
      perParameter != state.has_of() ||
      (perParameter && !parameters.contains(state.of())))
    return invalid("state '" + state.name() +
                   "' says not what it is (or names no parameter it is "
                   "kept for)");
  return llvm::Error::success();
}

/// Parameters, states and inputs: each a buffer of its own, with its roles.
llvm::Expected<Preset> checkPreset(const Executable &executable) {
  int numBuffers = executable.buffers_size();
  Preset preset{std::vector<bool>(numBuffers, false),
                std::vector<bool>(numBuffers, false)};
  auto claim = [&](int id, bool updatable) {
    if (!inRange(executable, id) || preset.written[id])
      return false;
    preset.written[id] = true;
    preset.updatable[id] = updatable;
    return true;
  };
  llvm::StringSet<> parameters;
  for (const Parameter &parameter : executable.parameters()) {
    if (!claim(parameter.buffer(), true))
      return invalid("parameter '" + parameter.name() + "' has a bad buffer");
    if (llvm::Error error = checkParameter(executable, parameter))
      return std::move(error);
    parameters.insert(parameter.name());
  }
  // The checkpoint's tensors they make up: each read and written whole.
  if (llvm::Expected<std::vector<StoredTensor>> stored =
          storedTensors(executable);
      !stored)
    return stored.takeError();
  for (const State &state : executable.states()) {
    if (!claim(state.buffer(), true))
      return invalid("state '" + state.name() + "' has a bad buffer");
    if (llvm::Error error = checkState(state, parameters))
      return std::move(error);
  }
  for (const Input &input : executable.inputs())
    if (!claim(input.buffer(), false))
      return invalid("input '" + input.name() + "' has a bad buffer");
  return preset;
}

/// An entry point's instructions read only what is written, write each
/// buffer once (a parameter's or a state's only as its new value, in
/// place), and its outputs say their roles and what they update.
llvm::Error checkEntryPoint(const Executable &executable,
                            const EntryPoint &entry, const Preset &preset) {
  std::vector<bool> written = preset.written;
  std::vector<bool> inPlace(executable.buffers_size(), false);
  auto inRange = [&](int id) { return ::inRange(executable, id); };
  for (const auto &[index, instruction] :
       llvm::enumerate(entry.instructions())) {
    auto where = [&, index = index] {
      return llvm::formatv("{0}: instruction {1} ({2})", entry.name(), index,
                           opcodeName(instruction.opcode()))
          .str();
    };
    if (llvm::Error error = checkInstruction(instruction))
      return invalid(where() + " " + llvm::toString(std::move(error)));
    for (int operand : instruction.operands())
      if (!inRange(operand) || !written[operand])
        return invalid(where() + " reads a buffer not yet written");
    for (int result : instruction.results()) {
      bool updates = inRange(result) && preset.updatable[result];
      if (!inRange(result) || (written[result] && !updates) || inPlace[result])
        return invalid(where() + " writes a buffer twice");
      written[result] = true;
      inPlace[result] = updates;
    }
  }
  for (int output : entry.outputs())
    if (!inRange(output) || !written[output])
      return invalid(entry.name() + " returns a buffer it never writes");
  // Each output says what it is and what it updates: a parameter's or a
  // state's buffer of its own size and type, or none.
  if (entry.output_roles_size() != entry.outputs_size() ||
      entry.output_updates_size() != entry.outputs_size())
    return invalid(entry.name() + " does not say of each output its role "
                                  "and what it updates");
  auto fits = [&](const Buffer &to, const Buffer &from) {
    return to.size_bytes() == from.size_bytes() && to.dtype() == from.dtype();
  };
  for (auto [output, updated] :
       llvm::zip_equal(entry.outputs(), entry.output_updates())) {
    if (updated < 0)
      continue;
    if (!inRange(updated) || !preset.updatable[updated] ||
        !fits(executable.buffers(updated), executable.buffers(output)))
      return invalid(entry.name() + " updates buffer " +
                     std::to_string(updated) +
                     ", which is no parameter or state its output fits");
  }
  // A parameter or state written in place is the new value of itself.
  for (auto [id, written] : llvm::enumerate(inPlace))
    if (written &&
        !llvm::any_of(llvm::zip_equal(entry.outputs(), entry.output_updates()),
                      [&, id = id](auto pair) {
                        return std::get<0>(pair) == int(id) &&
                               std::get<1>(pair) == int(id);
                      }))
      return invalid(entry.name() + " writes buffer " + std::to_string(id) +
                     " of a parameter or state in place, and returns it as "
                     "no new value of it");
  if (auto paired = pairStartsWithWaits(entry); !paired)
    return invalid(llvm::toString(paired.takeError()));
  return llvm::Error::success();
}

} // namespace

llvm::Error twill::verifyExecutable(const Executable &executable) {
  // Nothing else is read from a program of another format.
  if (llvm::Error error = checkFormat(executable))
    return error;
  if (llvm::Error error = checkBuffers(executable))
    return error;
  llvm::Expected<Preset> preset = checkPreset(executable);
  if (!preset)
    return preset.takeError();
  for (const EntryPoint &entry : executable.entry_points())
    if (llvm::Error error = checkEntryPoint(executable, entry, *preset))
      return error;
  if (llvm::Error error = checkMemoryPlan(executable))
    return invalid(llvm::toString(std::move(error)));
  return llvm::Error::success();
}

BufferSet::BufferSet(const Executable &executable)
    : program(executable), memoryPlan(memoryPlanOf(executable)),
      storage(executable.buffers_size()) {}

std::byte *BufferSet::data(int id) {
  if (memoryPlan.offsets[id] >= 0) {
    std::vector<std::byte> &in = memoryPlan.inHostArena[id] ? hostArena : arena;
    if (in.empty())
      in.resize(memoryPlan.inHostArena[id] ? memoryPlan.hostArenaBytes
                                           : memoryPlan.arenaBytes);
    return in.data() + memoryPlan.offsets[id];
  }
  std::vector<std::byte> &bytes = storage[id];
  if (bytes.empty())
    bytes.resize(program.buffers(id).size_bytes()); // zeros
  return bytes.data();
}

static llvm::Error notFloats(int id) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "buffer " + std::to_string(id) +
                                     " holds no floats");
}

llvm::Expected<std::vector<float>> BufferSet::floats(int id) {
  std::vector<float> values(numElements(info(id)));
  switch (info(id).dtype()) {
  case F32:
    std::memcpy(values.data(), data(id), values.size() * sizeof(float));
    return values;
  case BF16:
    widenBF16(as<uint16_t>(id), values.data(), values.size());
    return values;
  case U8:
    std::copy_n(as<uint8_t>(id), values.size(), values.data());
    return values;
  default:
    return notFloats(id);
  }
}

llvm::Error BufferSet::setBytes(int id, llvm::ArrayRef<uint8_t> bytes) {
  if (info(id).dtype() != U8 || int64_t(bytes.size()) != numElements(info(id)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "buffer " + std::to_string(id) +
                                       " holds no bytes, or another count");
  std::copy(bytes.begin(), bytes.end(), as<uint8_t>(id));
  return llvm::Error::success();
}

llvm::Error BufferSet::setFloats(int id, llvm::ArrayRef<float> values) {
  if ((int64_t)values.size() != numElements(info(id)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "buffer " + std::to_string(id) +
                                       " holds a different count of values");
  switch (info(id).dtype()) {
  case F32:
    std::memcpy(data(id), values.data(), values.size() * sizeof(float));
    return llvm::Error::success();
  case BF16:
    narrowToBF16(values.data(), as<uint16_t>(id), values.size());
    return llvm::Error::success();
  default:
    return notFloats(id);
  }
}
