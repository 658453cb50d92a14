//===- MemoryPlan.h - the arena the compiler planned ------------*- C++ -*-===//
//
// twill-plan-memory places the values each entry point computes in one
// arena: values whose lives (from the instruction that writes them to the
// last that reads them) do not overlap share memory, and a matmul whose
// addend dies with it computes in place over it. The Executable carries
// each planned buffer's offset and the arena's size; parameters, states,
// inputs, outputs and host-read values keep memory of their own. The
// runtime checks the plan before it allocates anything.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_EXECUTABLE_MEMORYPLAN_H
#define TWILL_RUNTIME_EXECUTABLE_MEMORYPLAN_H

#include "proto/executable.pb.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace twill {

struct MemoryPlan {
  /// Per buffer: its offset in the arena (the host arena where
  /// `inHostArena`), or -1 for memory of its own.
  std::vector<int64_t> offsets;
  std::vector<bool> inHostArena;
  int64_t arenaBytes = 0;
  /// The arena in host memory the offloaded values share (OFFLOAD's
  /// results; only RELOADs read them).
  int64_t hostArenaBytes = 0;
  /// What the arena's values would take each with memory of its own.
  int64_t unsharedBytes = 0;
  /// The buffers with memory of their own (parameters, states, inputs,
  /// outputs): with the arena, all a training run needs.
  int64_t ownBytes = 0;
  /// The values only an evaluation computes for the host to read (the
  /// forward pass's logits): memory of their own, held from the first run
  /// that computes them.
  int64_t hostReadBytes = 0;
};

/// The plan `executable` carries, and what it comes to (checked by
/// checkMemoryPlan).
MemoryPlan memoryPlanOf(const Executable &executable);

/// Fails unless the plan is sound: every planned buffer is a value an
/// instruction computes (no parameter, state, input, output or host-read
/// value), starts on a 64-byte boundary and ends inside its arena, only
/// offloads write the host arena and only reloads read it, and no two
/// values live at once overlap (a matmul's result may lie exactly over
/// the addend it reads for the last time: it computes in place). A
/// collective in flight holds its input and its result from its start to
/// its wait.
llvm::Error checkMemoryPlan(const Executable &executable);

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_MEMORYPLAN_H
