//===- Program.cpp - an Executable with its memory, ready to run ----------===//

#include "runtime/train/Program.h"

#include "runtime/backend/Backend.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

using namespace twill;

Program::Program(Executable executable, Communicator *comm)
    : program(std::move(executable)), comm(comm) {
  memory = std::make_unique<BufferSet>(program);
  for (const Parameter &parameter : program.parameters())
    named[parameter.name()] = parameter.buffer();
  for (const State &state : program.states())
    named[state.name()] = state.buffer();
  for (const Input &input : program.inputs())
    inputIds.push_back(input.buffer());
  backend = createCpuBackend(*memory, comm);
  if (program.meshes_size())
    for (const std::string &axis : program.meshes(0).axes())
      coordinates.push_back(comm ? std::max(comm->coordinate(axis), 0) : 0);
}

llvm::Expected<BufferBlock> Program::block(int id) const {
  const Buffer &buffer = program.buffers(id);
  if (!program.meshes_size())
    return wholeBlock(buffer);
  return blockOf(buffer, program.meshes(0), coordinates);
}

llvm::Expected<std::vector<float>> Program::wholeTensor(int id) {
  if (llvm::Error error = backend->download({id}))
    return std::move(error);
  return wholeOnHost(id);
}

llvm::Expected<std::vector<float>> Program::wholeOnHost(int id) {
  llvm::Expected<BufferBlock> layout = block(id);
  if (!layout)
    return layout.takeError();
  int64_t count = 1;
  for (int64_t size : layout->globalShape)
    count *= size;
  std::vector<float> whole(count, 0.0f);
  llvm::Expected<std::vector<float>> local = memory->floats(id);
  if (!local)
    return local.takeError();
  // Each block once: its first holder adds it into zeros, the sum over the
  // world is the tensor.
  if (layout->primary)
    addBlock(*local, *layout, whole);
  if (llvm::Error error = sumOverWorld(whole))
    return std::move(error);
  return whole;
}

/// Each part of the quantized weight `of` whole (bytes as their values),
/// by part. A collective.
static llvm::Expected<std::map<QuantizedRole::Part, std::vector<float>>>
wholeParts(Program &program, llvm::StringRef of, bool onHost) {
  std::map<QuantizedRole::Part, std::vector<float>> parts;
  for (const Parameter &part : program.executable().parameters()) {
    if (part.quantized().of() != of)
      continue;
    llvm::Expected<std::vector<float>> values =
        onHost ? program.wholeOnHost(part.buffer())
               : program.wholeTensor(part.buffer());
    if (!values)
      return values.takeError();
    parts[part.quantized().part()] = std::move(*values);
  }
  return parts;
}

static llvm::Error inconsistentParts(const QuantizedRole &role) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "quantized weight '" + role.of() +
          "' lacks a part, or its parts do not agree on its size");
}

static std::vector<uint8_t> asBytes(const std::vector<float> &values) {
  return std::vector<uint8_t>(values.begin(), values.end());
}

llvm::Expected<io::Nf4Weight> Program::wholeNf4(const Parameter &codes,
                                                bool onHost) {
  const QuantizedRole &role = codes.quantized();
  auto parts = wholeParts(*this, role.of(), onHost);
  if (!parts)
    return parts.takeError();
  io::Nf4Weight weight;
  weight.blockSize = role.block_size();
  weight.nestedBlockSize = role.nested_block_size();
  weight.codes = asBytes((*parts)[QuantizedRole::CODES]);
  weight.absmax = asBytes((*parts)[QuantizedRole::ABSMAX]);
  weight.nestedAbsmax = std::move((*parts)[QuantizedRole::NESTED_ABSMAX]);
  const std::vector<float> &offset = (*parts)[QuantizedRole::NESTED_OFFSET];
  int64_t blocks = int64_t(weight.codes.size()) * 2 / weight.blockSize;
  if (offset.size() != 1 || int64_t(weight.absmax.size()) != blocks ||
      int64_t(weight.nestedAbsmax.size()) * weight.nestedBlockSize < blocks)
    return inconsistentParts(role);
  weight.nestedOffset = offset.front();
  return weight;
}

llvm::Expected<io::Fp8Weight> Program::wholeFp8(const Parameter &values,
                                                bool onHost) {
  const QuantizedRole &role = values.quantized();
  auto parts = wholeParts(*this, role.of(), onHost);
  if (!parts)
    return parts.takeError();
  io::Fp8Weight weight{asBytes((*parts)[QuantizedRole::FP8_VALUES]),
                       std::move((*parts)[QuantizedRole::FP8_ROW_SCALES])};
  if (weight.scales.empty() || weight.values.size() % weight.scales.size())
    return inconsistentParts(role);
  return weight;
}

/// The values of the quantized weight `codes` stands for: each level times
/// its block's scale, or each e4m3 value times its row's. A collective.
static llvm::Expected<std::vector<float>>
wholeDequantized(Program &program, const Parameter &codes, bool onHost) {
  if (codes.quantized().part() == QuantizedRole::FP8_VALUES) {
    llvm::Expected<io::Fp8Weight> weight = program.wholeFp8(codes, onHost);
    if (!weight)
      return weight.takeError();
    std::vector<float> values(weight->values.size());
    io::dequantizeFp8(*weight, values);
    return values;
  }
  llvm::Expected<io::Nf4Weight> weight = program.wholeNf4(codes, onHost);
  if (!weight)
    return weight.takeError();
  std::vector<float> values(weight->codes.size() * 2);
  io::dequantizeNf4(*weight, values);
  return values;
}

llvm::Expected<std::vector<float>>
Program::wholeStored(const StoredTensor &tensor, bool onHost) {
  if (tensor.pieces.front()->has_quantized())
    return wholeDequantized(*this, *tensor.pieces.front(), onHost);
  std::vector<float> whole;
  for (const Parameter *piece : tensor.pieces) {
    llvm::Expected<std::vector<float>> values =
        onHost ? wholeOnHost(piece->buffer()) : wholeTensor(piece->buffer());
    if (!values)
      return values.takeError();
    // Row-major blocks of rows: the tensor's values are theirs in order.
    whole.insert(whole.end(), values->begin(), values->end());
  }
  return whole;
}

const EntryPoint *Program::entryPoint(EntryRole role) const {
  for (const EntryPoint &entry : program.entry_points())
    if (entry.role() == role)
      return &entry;
  return nullptr;
}

int Program::inputOf(ValueRole role) const {
  for (const Input &input : program.inputs())
    if (input.role() == role)
      return input.buffer();
  return -1;
}

int Program::outputOf(const EntryPoint &entry, ValueRole role) {
  for (int i = 0; i < entry.output_roles_size(); ++i)
    if (entry.output_roles(i) == role)
      return entry.outputs(i);
  return -1;
}

int Program::hostReadBuffer(const EntryPoint &entry) const {
  for (const Instruction &instruction : entry.instructions())
    for (int result : instruction.results())
      if (program.buffers(result).host_read())
        return result;
  return -1;
}

llvm::Error Program::run(const EntryPoint &entry) {
  std::vector<WriteBack> writeBacks;
  std::vector<int> results;
  for (int i = 0; i < entry.outputs_size(); ++i) {
    int target = entry.output_updates(i);
    int source = entry.outputs(i);
    if (target < 0) {
      results.push_back(source);
      continue;
    }
    // The loader checked that it fits the parameter or state it updates;
    // one written in place is there already.
    if (source != target)
      writeBacks.push_back({source, target});
  }
  if (llvm::Error error = backend->upload(inputIds))
    return error;
  if (llvm::Error error = backend->run(entry, writeBacks))
    return error;
  return backend->download(results);
}

llvm::Error Program::useBackend(llvm::StringRef name) {
  if (name == "cpu") {
    backend = createCpuBackend(*memory, comm);
    return llvm::Error::success();
  }
  if (name != "cuda")
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--backend: unknown backend '" + name +
                                       "' (cpu or cuda)");
  llvm::Expected<std::unique_ptr<Backend>> cuda =
      createCudaBackend(*memory, comm);
  if (!cuda)
    return cuda.takeError();
  backend = std::move(*cuda);
  return llvm::Error::success();
}

llvm::Error Program::uploadState() {
  std::vector<int> ids;
  for (const Parameter &parameter : program.parameters())
    ids.push_back(parameter.buffer());
  for (const State &state : program.states())
    ids.push_back(state.buffer());
  ids.insert(ids.end(), inputIds.begin(), inputIds.end());
  return backend->upload(ids);
}

/// The host memory a new allocation can have: /proc/meminfo's MemAvailable,
/// within the cgroup's limit where there is one; none where neither says.
static std::optional<int64_t> availableHostBytes() {
  std::optional<int64_t> available;
  if (auto meminfo = llvm::MemoryBuffer::getFileAsStream("/proc/meminfo")) {
    llvm::SmallVector<llvm::StringRef> lines;
    (*meminfo)->getBuffer().split(lines, '\n');
    for (llvm::StringRef line : lines) {
      int64_t kib = 0;
      if (line.consume_front("MemAvailable:") &&
          !line.trim().split(' ').first.getAsInteger(10, kib))
        available = kib * 1024;
    }
  }
  auto readBytes = [](const char *path) -> std::optional<int64_t> {
    auto file = llvm::MemoryBuffer::getFileAsStream(path);
    int64_t bytes = 0;
    if (!file || (*file)->getBuffer().trim().getAsInteger(10, bytes))
      return std::nullopt; // absent, or "max"
    return bytes;
  };
  std::optional<int64_t> limit = readBytes("/sys/fs/cgroup/memory.max");
  std::optional<int64_t> used = readBytes("/sys/fs/cgroup/memory.current");
  if (limit && used)
    available = std::min(available.value_or(*limit - *used), *limit - *used);
  return available;
}

llvm::Error Program::checkHostMemory() const {
  const MemoryPlan &plan = memory->plan();
  bool hostComputes = backend->name() == "cpu";
  // The offloaded activations' arena is in host memory on every backend.
  int64_t needed = plan.ownBytes + plan.hostArenaBytes +
                   (hostComputes ? plan.arenaBytes : 0);
  std::optional<int64_t> available = availableHostBytes();
  if (!available || needed <= *available)
    return llvm::Error::success();
  constexpr double GiB = 1 << 30;
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("the program needs {0:f2} GiB of host memory ({1:f2} GiB "
                    "of parameters, state, inputs and offloaded "
                    "activations{2}), and this machine "
                    "has {3:f2} GiB available: lower train.seq_len or "
                    "train.batch_size, turn on "
                    "parallel.activation_checkpointing, or use more ranks",
                    needed / GiB, (plan.ownBytes + plan.hostArenaBytes) / GiB,
                    hostComputes ? llvm::formatv(", a {0:f2} GiB arena of "
                                                 "computed values",
                                                 plan.arenaBytes / GiB)
                                       .str()
                                 : std::string(),
                    *available / GiB));
}
