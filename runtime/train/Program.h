//===- Program.h - an Executable with its memory, ready to run --*- C++ -*-===//
//
// Holds the buffers of every value, finds parameters and states by name and
// inputs and outputs by role, and runs entry points on a backend. After a
// run, each output that updates a parameter or a state (as the Executable
// says) is written back into it: that is how a step's updates persist.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_TRAIN_PROGRAM_H
#define TWILL_RUNTIME_TRAIN_PROGRAM_H

#include "runtime/backend/Backend.h"
#include "runtime/comm/Communicator.h"
#include "runtime/executable/Executable.h"
#include "runtime/executable/Layout.h"
#include "runtime/executable/StoredTensors.h"
#include "runtime/io/BitsAndBytes.h"
#include "runtime/io/Fp8.h"
#include "llvm/ADT/StringMap.h"

#include <memory>

namespace twill {

class Program {
public:
  /// `comm` runs the program's collectives (none: a 1-rank program).
  explicit Program(Executable executable, Communicator *comm = nullptr);

  const Executable &executable() const { return program; }
  BufferSet &buffers() { return *memory; }
  const JobConfig &job() const { return program.job(); }

  /// The buffer of the parameter or state `name`; -1 if none.
  int bufferOf(llvm::StringRef name) const {
    auto it = named.find(name);
    return it == named.end() ? -1 : it->second;
  }
  /// The buffer of the per-step input that is `role`; -1 if none.
  int inputOf(ValueRole role) const;
  /// The entry point of `role`; none if the program has none.
  const EntryPoint *entryPoint(EntryRole role) const;

  /// This rank's block of the parameter, state or input in buffer `id`.
  llvm::Expected<BufferBlock> block(int id) const;
  /// The whole tensor of fp32 buffer `id`, put together from every rank's
  /// block. A collective: every rank calls it, in the same order.
  llvm::Expected<std::vector<float>> wholeTensor(int id);
  /// The same of what the host holds, not downloaded first (before the
  /// backend has the values).
  llvm::Expected<std::vector<float>> wholeOnHost(int id);
  /// The whole checkpoint tensor `tensor`, its parameters' whole tensors
  /// (wholeTensor, or with `onHost` wholeOnHost) one after the other; a
  /// quantized weight's values dequantized. A collective.
  llvm::Expected<std::vector<float>> wholeStored(const StoredTensor &tensor,
                                                 bool onHost = false);
  /// The NF4 weight whose codes `codes` holds, put together from every
  /// rank's blocks of its parts (an error if they do not agree). A
  /// collective.
  llvm::Expected<io::Nf4Weight> wholeNf4(const Parameter &codes,
                                         bool onHost = false);
  /// The same of the FP8 weight whose values `values` holds.
  llvm::Expected<io::Fp8Weight> wholeFp8(const Parameter &values,
                                         bool onHost = false);
  /// The Hugging Face folder (or file) the base weights were loaded from;
  /// empty for a random base.
  llvm::StringRef baseCheckpoint() const { return baseDir; }
  void setBaseCheckpoint(llvm::StringRef path) { baseDir = path.str(); }
  /// Whether this is the rank that writes files (rank 0).
  bool writesFiles() const { return !comm || comm->rank() == 0; }
  /// Whether the program runs on more than one rank.
  bool isDistributed() const { return comm && comm->worldSize() > 1; }
  int rank() const { return comm ? comm->rank() : 0; }
  int worldSize() const { return comm ? comm->worldSize() : 1; }
  /// The sum over every rank of the world, in place (on one rank, the
  /// values as they are). A collective.
  llvm::Error sumOverWorld(llvm::MutableArrayRef<float> values) {
    return isDistributed() ? comm->sumOverWorld(values.data(), values.size())
                           : llvm::Error::success();
  }
  /// Copies `bytes` at `data` from rank 0 to every rank (on one rank,
  /// nothing). A collective.
  llvm::Error broadcastFromFirst(void *data, int64_t bytes) {
    return isDistributed() ? comm->broadcast(data, bytes, 0)
                           : llvm::Error::success();
  }
  /// Returns once every rank has called it.
  llvm::Error barrier() {
    return comm ? comm->barrier() : llvm::Error::success();
  }
  /// Makes the host buffers `ids` current (the backend may compute
  /// elsewhere), or hands the host's values to the backend.
  llvm::Error download(llvm::ArrayRef<int> ids) {
    return backend->download(ids);
  }
  llvm::Error upload(llvm::ArrayRef<int> ids) { return backend->upload(ids); }

  /// Runs `entry` on the backend (the inputs as the host buffers hold
  /// them), then writes each output that updates a parameter or state
  /// back into it; the host buffers of its other outputs are then current.
  llvm::Error run(const EntryPoint &entry);

  /// Runs on the backend named `name` ("cpu", the default, or "cuda").
  llvm::Error useBackend(llvm::StringRef name);
  llvm::StringRef backendName() const { return backend->name(); }
  /// The backend's runs are recorded into `profiler` from now on (until
  /// another backend is chosen).
  void profileInto(Profiler *profiler) { backend->profileInto(profiler); }
  std::string memoryReport() const { return backend->memoryReport(); }
  Backend::PeakMemory peakMemory() const { return backend->peakMemory(); }
  /// Fails, saying how much is needed and how much there is, unless the
  /// host has the memory the backend needs there: the whole plan for the
  /// cpu backend, the buffers of their own for one that computes elsewhere.
  /// Before any weight is loaded.
  llvm::Error checkHostMemory() const;

  /// Hands the host buffers of every parameter, state and input to the
  /// backend: after loading weights, before the first run.
  llvm::Error uploadState();

  /// The buffer of `entry`'s output that is `role` (as of its last run);
  /// -1 if none.
  static int outputOf(const EntryPoint &entry, ValueRole role);
  /// The buffer of the value `entry` computes for the host to read after
  /// it (the logits); -1 if none.
  int hostReadBuffer(const EntryPoint &entry) const;

private:
  Executable program;
  std::unique_ptr<BufferSet> memory;
  Communicator *comm;
  std::unique_ptr<Backend> backend;
  std::vector<int> inputIds;
  std::vector<int> coordinates; // this rank's, per mesh axis
  llvm::StringMap<int> named;
  std::string baseDir;
};

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_PROGRAM_H
