//===- MemoryPlan.cpp - the arena the compiler planned --------------------===//

#include "runtime/executable/MemoryPlan.h"

#include "runtime/executable/Executable.h"
#include "runtime/executable/Opcodes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include <optional>

using namespace twill;

/// Which operand of `instruction` is a matmul's addend, if it has one: a
/// matmul's third, a quantized matmul's last after its weight's parts.
static std::optional<int> addendOf(const Instruction &instruction) {
  if (instruction.results_size() != 1)
    return std::nullopt;
  int operands = instruction.operands_size();
  if (instruction.opcode() == MATMUL && operands == 3)
    return 2;
  if (instruction.opcode() == QUANTIZED_MATMUL &&
      operands == 2 + (instruction.quantized_matmul().block_size() > 0 ? 4 : 2))
    return operands - 1;
  return std::nullopt;
}

MemoryPlan twill::memoryPlanOf(const Executable &executable) {
  MemoryPlan plan;
  plan.arenaBytes = executable.arena_bytes();
  plan.hostArenaBytes = executable.host_arena_bytes();
  for (const Buffer &buffer : executable.buffers()) {
    int64_t offset = buffer.has_arena_offset() ? buffer.arena_offset() : -1;
    plan.offsets.push_back(offset);
    plan.inHostArena.push_back(buffer.in_host_arena());
    (offset >= 0          ? plan.unsharedBytes
     : buffer.host_read() ? plan.hostReadBytes
                          : plan.ownBytes) += buffer.size_bytes();
  }
  return plan;
}

static llvm::Error badPlan(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "its memory plan is unsound: " + what);
}

namespace {

/// The two arenas, one after the other, as the checks see a planned value.
struct Arenas {
  const Executable &executable;
  int64_t device = executable.arena_bytes(),
          host = executable.host_arena_bytes();
  int buffers = executable.buffers_size();

  bool planned(int id) const {
    return executable.buffers(id).has_arena_offset();
  }
  bool inHost(int id) const {
    return id >= 0 && id < buffers && executable.buffers(id).in_host_arena();
  }
  /// A planned value's address.
  int64_t address(int id) const {
    const Buffer &buffer = executable.buffers(id);
    return buffer.arena_offset() + (buffer.in_host_arena() ? device : 0);
  }
  int64_t bytes(int id) const { return executable.buffers(id).size_bytes(); }
};

/// Every planned value aligned inside its arena, and none the host reads
/// after a run.
llvm::Error checkOffsets(const Arenas &arenas) {
  constexpr int64_t kAlignment = 64;
  for (int id = 0; id < arenas.buffers; ++id) {
    const Buffer &buffer = arenas.executable.buffers(id);
    if (buffer.in_host_arena() && !arenas.planned(id))
      return badPlan(llvm::formatv("buffer {0} is in the host arena "
                                   "without an offset",
                                   id));
    if (!arenas.planned(id))
      continue;
    int64_t offset = buffer.arena_offset();
    int64_t bytes = buffer.in_host_arena() ? arenas.host : arenas.device;
    if (offset < 0 || offset % kAlignment != 0 ||
        offset > bytes - buffer.size_bytes())
      return badPlan(llvm::formatv(
          "buffer {0} ({1} bytes) at offset {2} is not aligned inside the "
          "{3}-byte {4}arena",
          id, buffer.size_bytes(), offset, bytes,
          buffer.in_host_arena() ? "host " : ""));
    if (buffer.host_read())
      return badPlan(llvm::formatv("buffer {0} is read by the host after a "
                                   "run, and the arena would overwrite it",
                                   id));
  }
  return llvm::Error::success();
}

/// Parameters, states, inputs and outputs outlive a run: none in an arena.
llvm::Error checkPersistent(const Arenas &arenas) {
  const Executable &executable = arenas.executable;
  auto mustPersist = [&](int id, llvm::StringRef what) -> llvm::Error {
    if (id >= 0 && id < arenas.buffers && arenas.planned(id))
      return badPlan(llvm::formatv("buffer {0} is {1}, and the arena "
                                   "would overwrite it",
                                   id, what));
    return llvm::Error::success();
  };
  for (const Parameter &parameter : executable.parameters())
    if (auto error = mustPersist(parameter.buffer(), "a parameter"))
      return error;
  for (const State &state : executable.states())
    if (auto error = mustPersist(state.buffer(), "a state"))
      return error;
  for (const Input &input : executable.inputs())
    if (auto error = mustPersist(input.buffer(), "an input"))
      return error;
  for (const EntryPoint &entry : executable.entry_points())
    for (int output : entry.outputs())
      if (auto error = mustPersist(output, "an output"))
        return error;
  return llvm::Error::success();
}

/// Only an offload (or its start) writes the host arena and only a reload
/// (or its start) reads it: no kernel sees host memory.
llvm::Error checkHostArenaAccess(const Arenas &arenas) {
  for (const EntryPoint &entry : arenas.executable.entry_points())
    for (const Instruction &instruction : entry.instructions()) {
      // A wait names its start's result and touches nothing.
      Opcode kind = blockingOf(instruction.opcode());
      bool offload = kind == OFFLOAD, reload = kind == RELOAD || kind == WAIT;
      for (int id : instruction.results())
        if (arenas.inHost(id) && !offload)
          return badPlan(llvm::formatv(
              "{0}: buffer {1} is in the host arena, and {2} writes it",
              entry.name(), id, opcodeName(instruction.opcode())));
      for (int id : instruction.operands())
        if (arenas.inHost(id) && !reload)
          return badPlan(llvm::formatv(
              "{0}: buffer {1} is in the host arena, and {2} reads it",
              entry.name(), id, opcodeName(instruction.opcode())));
    }
  return llvm::Error::success();
}

/// No two values of `entry` live at once overlap: in program order, with
/// the planned values alive, by address.
llvm::Error checkNoOverlap(const Arenas &arenas, const EntryPoint &entry) {
  // A collective or copy in flight reads its input until its wait.
  llvm::Expected<std::vector<int>> partner = pairStartsWithWaits(entry);
  if (!partner)
    return badPlan(llvm::toString(partner.takeError()));
  auto readBy = [&](int index) {
    const Instruction &instruction = entry.instructions(index);
    std::vector<int> read(instruction.operands().begin(),
                          instruction.operands().end());
    if (instruction.opcode() == WAIT)
      read.push_back(entry.instructions((*partner)[index]).operands(0));
    return read;
  };
  std::vector<int> lastUse(arenas.buffers, -1);
  for (int index = 0; index < entry.instructions_size(); ++index)
    for (int operand : readBy(index))
      lastUse[operand] = index;
  std::map<int64_t, std::pair<int64_t, int>> live; // start -> (end, id)
  auto release = [&](int id) {
    auto found = live.find(arenas.address(id));
    if (found != live.end() && found->second.second == id)
      live.erase(found);
  };
  for (int index = 0; index < entry.instructions_size(); ++index) {
    const Instruction &instruction = entry.instructions(index);
    // A matmul (or a quantized one) may compute in place: its result
    // exactly over its addend, which it reads for the last time and not as
    // another operand.
    if (std::optional<int> at = addendOf(instruction)) {
      int addend = instruction.operands(*at), result = instruction.results(0);
      if (lastUse[addend] == index && arenas.planned(addend) &&
          arenas.planned(result) &&
          llvm::count(instruction.operands(), addend) == 1 &&
          arenas.address(addend) == arenas.address(result) &&
          arenas.bytes(addend) == arenas.bytes(result))
        release(addend);
    }
    for (int id : instruction.results()) {
      if (!arenas.planned(id) || arenas.bytes(id) == 0)
        continue;
      int64_t start = arenas.address(id), end = start + arenas.bytes(id);
      auto next = live.lower_bound(start);
      int other = -1;
      if (next != live.end() && next->first < end)
        other = next->second.second;
      else if (next != live.begin() && std::prev(next)->second.first > start)
        other = std::prev(next)->second.second;
      if (other >= 0)
        return badPlan(llvm::formatv(
            "{0}: instruction {1} writes buffer {2} over buffer {3}, "
            "which is still to be read",
            entry.name(), index, id, other));
      live[start] = {end, id};
    }
    for (int id : readBy(index))
      if (lastUse[id] == index && arenas.planned(id))
        release(id);
    for (int id : instruction.results())
      if (lastUse[id] < 0 && arenas.planned(id))
        release(id);
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error twill::checkMemoryPlan(const Executable &executable) {
  Arenas arenas{executable};
  if (arenas.device < 0 || arenas.host < 0)
    return badPlan("an arena has a negative size");
  if (llvm::Error error = checkOffsets(arenas))
    return error;
  if (llvm::Error error = checkPersistent(arenas))
    return error;
  if (llvm::Error error = checkHostArenaAccess(arenas))
    return error;
  for (const EntryPoint &entry : executable.entry_points())
    if (llvm::Error error = checkNoOverlap(arenas, entry))
      return error;
  return llvm::Error::success();
}
