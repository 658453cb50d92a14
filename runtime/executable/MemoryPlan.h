//===- MemoryPlan.h - values that share memory ------------------*- C++ -*-===//
//
// The values an entry point computes live from the instruction that writes
// them to the last one that reads them; values whose lifetimes do not
// overlap share memory, in one arena for the whole program (entry points
// never run at once). Parameters, states, inputs, the entry points' outputs
// and the values the host reads after a run (`pinned`) keep their own
// memory. Allocation follows the program: first fit when a value is
// written, freed after its last reader, so a value never overlaps the
// operands of the instruction that writes it.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_EXECUTABLE_MEMORYPLAN_H
#define TWILL_RUNTIME_EXECUTABLE_MEMORYPLAN_H

#include "proto/executable.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <vector>

namespace twill {

struct MemoryPlan {
  /// Per buffer: its offset in the arena, or -1 for memory of its own.
  std::vector<int64_t> offsets;
  int64_t arenaBytes = 0;
  /// What the arena's values would take each with memory of its own.
  int64_t unsharedBytes = 0;
  /// The buffers with memory of their own (parameters, states, inputs,
  /// outputs, host-read values): with the arena, all the program needs.
  int64_t ownBytes = 0;
};

MemoryPlan planMemory(const Executable &executable,
                      llvm::ArrayRef<int> pinned);

/// The values the host reads after a run (their buffers' host_read: the
/// logits), which the plan must leave in memory of their own.
std::vector<int> hostReadBuffers(const Executable &executable);

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_MEMORYPLAN_H
