//===- Backend.h - what runs a program's instructions -----------*- C++ -*-===//
//
// A backend runs entry points over the program's buffers. The host keeps a
// copy of every buffer (Program's BufferSet): the cpu backend computes in
// it; the cuda backend computes in device memory and moves values between
// the two only when asked (weights once after loading, inputs before each
// run, scalar outputs after it, parameters when an adapter is written).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_BACKEND_H
#define TWILL_RUNTIME_BACKEND_BACKEND_H

#include "runtime/comm/Communicator.h"
#include "runtime/executable/Executable.h"
#include "runtime/profile/Profiler.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <memory>
#include <utility>

namespace twill {

/// (source, target): an output written back into the parameter or state it
/// updates.
using WriteBack = std::pair<int, int>;

class Backend {
public:
  virtual ~Backend() = default;
  virtual llvm::StringRef name() const = 0;

  /// Runs `entry`, then copies each write-back's source into its target.
  /// After it, the host copies of the entry's outputs that are not written
  /// back are current.
  virtual llvm::Error run(const EntryPoint &entry,
                          llvm::ArrayRef<WriteBack> writeBacks) = 0;
  /// The host copies of these buffers changed: the backend takes them.
  virtual llvm::Error upload(llvm::ArrayRef<int> ids) = 0;
  /// Makes the host copies of these buffers current.
  virtual llvm::Error download(llvm::ArrayRef<int> ids) = 0;

  /// Fails once the backend can run nothing more: a GPU's fault (an
  /// illegal address) ends its context for the rest of the process.
  virtual llvm::Error usable() { return llvm::Error::success(); }

  /// From now on, records a span per instruction and per run into
  /// `profiler` (none: records nothing).
  void profileInto(Profiler *into) { profiler = into; }
  /// What the backend's memory came to, where it has memory of its own
  /// (the cuda backend's device memory); empty otherwise.
  virtual std::string memoryReport() const { return {}; }

  /// The most memory the computation has held so far, and what that is.
  struct PeakMemory {
    uint64_t bytes = 0;
    llvm::StringRef what;
  };
  virtual PeakMemory peakMemory() const = 0;

protected:
  Profiler *profiler = nullptr;
};

/// Runs `each` on the instructions of `entry` in order, up to the first
/// error, which then names the entry point and the instruction.
inline llvm::Error forEachInstruction(
    const EntryPoint &entry,
    llvm::function_ref<llvm::Error(int index, const Instruction &)> each) {
  for (int index = 0; index < entry.instructions_size(); ++index)
    if (llvm::Error error = each(index, entry.instructions(index)))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}, instruction {1}: {2}", entry.name(), index,
                        llvm::toString(std::move(error))));
  return llvm::Error::success();
}

/// The reference backend, computing in `buffers` (the host copies).
std::unique_ptr<Backend> createCpuBackend(BufferSet &buffers,
                                          Communicator *comm);

/// Why createCudaBackend cannot run here at all: no GPU (none, or no NVIDIA
/// driver), or a build without CUDA. Tools and tests report that as a
/// skip; any other failure to start (a GPU CUDA cannot use) is an error.
class NoGpuError : public llvm::ErrorInfo<NoGpuError> {
public:
  static char ID;
  explicit NoGpuError(std::string message) : message(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override { os << message; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  std::string message;
};

/// The cuda backend on this rank's GPU; fails with a clear message where
/// Twill was built without CUDA or no GPU is present (a NoGpuError), or
/// CUDA cannot use the GPU.
llvm::Expected<std::unique_ptr<Backend>> createCudaBackend(BufferSet &buffers,
                                                           Communicator *comm);

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_BACKEND_H
