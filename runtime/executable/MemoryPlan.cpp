//===- MemoryPlan.cpp - values that share memory --------------------------===//

#include "runtime/executable/MemoryPlan.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <iterator>
#include <map>

using namespace twill;

namespace {
/// First-fit allocation in an arena that grows as needed, with freed blocks
/// merged with their free neighbours.
class Arena {
public:
  int64_t allocate(int64_t bytes) {
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->second >= bytes) {
        int64_t offset = it->first, left = it->second - bytes;
        free.erase(it);
        if (left)
          free[offset + bytes] = left;
        return offset;
      }
    int64_t offset = end;
    end += bytes;
    high = std::max(high, end);
    return offset;
  }
  void release(int64_t offset, int64_t bytes) {
    auto next = free.lower_bound(offset);
    if (next != free.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto previous = std::prev(next);
      if (previous->first + previous->second == offset) {
        offset = previous->first;
        bytes += previous->second;
        free.erase(previous);
      }
    }
    if (offset + bytes == end)
      end = offset; // the top of the arena is free again
    else
      free[offset] = bytes;
  }
  int64_t highWater() const { return high; }

private:
  std::map<int64_t, int64_t> free; // offset -> size
  int64_t end = 0, high = 0;
};
} // namespace

MemoryPlan twill::planMemory(const Executable &executable,
                             llvm::ArrayRef<int> pinned) {
  constexpr int64_t kAlignment = 64;
  MemoryPlan plan;
  plan.offsets.assign(executable.buffers_size(), -1);
  std::vector<bool> keep(executable.buffers_size(), false);
  for (int id : pinned)
    keep[id] = true;
  for (const EntryPoint &entry : executable.entry_points())
    for (int output : entry.outputs())
      keep[output] = true;
  auto bytesOf = [&](int id) {
    return (executable.buffers(id).size_bytes() + kAlignment - 1) /
           kAlignment * kAlignment;
  };

  // Entry points never run at once: each plans the arena from empty.
  for (const EntryPoint &entry : executable.entry_points()) {
    std::vector<int> lastUse(executable.buffers_size(), -1);
    for (int index = 0; index < entry.instructions_size(); ++index)
      for (int operand : entry.instructions(index).operands())
        lastUse[operand] = index;
    Arena arena;
    for (int index = 0; index < entry.instructions_size(); ++index) {
      const Instruction &instruction = entry.instructions(index);
      // Results first, then the operands read for the last time go: a
      // result never shares memory with its own operands.
      for (int result : instruction.results())
        if (!keep[result]) {
          plan.offsets[result] = arena.allocate(bytesOf(result));
          plan.unsharedBytes += executable.buffers(result).size_bytes();
        }
      auto release = [&](int id) {
        if (plan.offsets[id] >= 0 && !keep[id])
          arena.release(plan.offsets[id], bytesOf(id));
      };
      for (int operand : instruction.operands())
        if (lastUse[operand] == index)
          release(operand);
      for (int result : instruction.results())
        if (lastUse[result] < 0) // never read
          release(result);
    }
    plan.arenaBytes = std::max(plan.arenaBytes, arena.highWater());
  }
  for (int id = 0; id < executable.buffers_size(); ++id)
    if (plan.offsets[id] < 0)
      plan.ownBytes += executable.buffers(id).size_bytes();
  return plan;
}

std::vector<int> twill::hostReadBuffers(const Executable &executable) {
  std::vector<int> ids;
  for (int id = 0; id < executable.buffers_size(); ++id)
    if (executable.buffers(id).host_read())
      ids.push_back(id);
  return ids;
}
