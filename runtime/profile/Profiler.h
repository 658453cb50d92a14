//===- Profiler.h - where a program's time goes -----------------*- C++ -*-===//
//
// A backend given a Profiler records a span for every instruction it runs,
// on the track of the stream that ran it, and one for each entry point
// run. The cpu backend times with the wall clock; the cuda backend with
// CUDA events on its streams, read once the run has finished, so timing
// does not serialise the GPU. twill-train --profile writes the spans as a
// Chrome trace and prints a summary.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_PROFILE_PROFILER_H
#define TWILL_RUNTIME_PROFILE_PROFILER_H

#include "proto/executable.pb.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <string>
#include <vector>

namespace twill {

class Profiler {
public:
  enum Track {
    /// What the compute stream does: every instruction (a collective's
    /// span is the compute stream waiting for it).
    Compute,
    /// The collectives' transfers: on cuda, what the communication stream
    /// does; on the cpu, each collective from its start to its wait (MPI
    /// moves it on between instructions).
    Communication,
    /// Each entry point's run, from the host's call to its end.
    EntryPoints,
  };
  struct Span {
    Track track;
    const EntryPoint *entry;
    int instruction; // -1 on the EntryPoints track
    double start, end; // seconds since the profiler was made
  };

  explicit Profiler(const Executable &executable) : executable(executable) {}

  /// Seconds since the profiler was made, on the host's steady clock.
  double now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         began)
        .count();
  }
  void record(const Span &span) { spans.push_back(span); }
  const std::vector<Span> &recorded() const { return spans; }

  /// The spans in Chrome's trace event format (Perfetto, chrome://tracing):
  /// one process per rank, a thread per track; each instruction's span
  /// names its op and carries its shapes, its layer and its entry point.
  llvm::Error writeTrace(llvm::StringRef path, int rank) const;

  /// Time per op kind and per layer as a share of the entry points' runs,
  /// with the FLOP/s of matmuls and attention and the bytes per second of
  /// the rest. The runs up to the first optimizer step are left out when
  /// later ones were recorded: they choose algorithms and allocate.
  void printSummary(llvm::raw_ostream &os) const;

private:
  const Executable &executable;
  std::chrono::steady_clock::time_point began =
      std::chrono::steady_clock::now();
  std::vector<Span> spans;
};

/// The layer an instruction is part of, as the Executable says: "layer N"
/// (its forward or backward), or "outside the layers" (the embedding, the
/// head, the loss, the optimizer).
std::string layerOf(const Instruction &instruction);

/// The floating-point operations of an instruction (opmodel/Flops.h: the
/// model twillc's cost estimate counts by too).
double flopsOf(const Executable &executable, const Instruction &instruction);

/// The bytes an instruction reads and writes, each value once.
double bytesOf(const Executable &executable, const Instruction &instruction);

} // namespace twill

#endif // TWILL_RUNTIME_PROFILE_PROFILER_H
