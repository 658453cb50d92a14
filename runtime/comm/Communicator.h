//===- Communicator.h - collectives on mesh axes ----------------*- C++ -*-===//
//
// The CPU runtime's collectives. Ranks form the job's mesh row-major (the
// first axis major: with dp x tp, rank = dp_index * tp + tp_index); each
// axis has a sub-communicator of the ranks that differ only along it, and a
// collective on an axis runs among those. Tensors are row-major fp32 with a
// gather or scatter dim, as the twill collective ops describe them.
//
// The program's collectives are started and later waited (Pending), so
// compute can run while they are in flight; every start is waited, and the
// runtime waits at once where the program has a blocking collective.
//
// Communicator is the mesh bookkeeping (Communicator.cpp) and the
// collectives' interface. The transport that implements them is the
// launch's (Launch.cpp): MPI under mpirun or srun (MpiTransport.cpp), TCP
// through rank 0's hub under torchrun's variables (SocketTransport.cpp; a
// build without MPI, TWILL_WITH_MPI=OFF, has only this one for several
// ranks), or one process alone (LocalCommunicator.cpp), which also stands
// in for one rank of a larger mesh where a kernel is checked by itself
// (twill-conformance).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_COMM_COMMUNICATOR_H
#define TWILL_RUNTIME_COMM_COMMUNICATOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace twill {

class Communicator {
public:
  /// The process's part in the launch (MPI_Init and MPI_Finalize, or
  /// joining rank 0's hub and leaving it); before and after everything
  /// else.
  static void initialize(int &argc, char **&argv);
  static void finalize();
  /// Ends every rank of the launch: one rank's error must not leave the
  /// others waiting in a collective.
  [[noreturn]] static void abortAll();
  /// How many ranks the launcher started, and how many of them share this
  /// rank's machine (they share its cores).
  static int launchedRanks();
  static int ranksOnThisNode();
  /// This rank's place among those of its machine (0 for a process
  /// alone): which of the machine's GPUs is its own.
  static int rankOnThisNode();

  /// Lays the launch's ranks (initialize() first) out as the axes of a
  /// mesh; fails, on every rank alike, unless the launch has exactly as
  /// many ranks as the mesh.
  static llvm::Expected<std::unique_ptr<Communicator>>
  create(llvm::ArrayRef<std::string> axes, llvm::ArrayRef<int64_t> shape);
  /// One process standing in for the rank at `coordinates` of a mesh whose
  /// other ranks are absent: kernels that read their rank's position (a
  /// vocab or head block) run as that rank would, an all-reduce keeps this
  /// rank's values (the others add nothing), and a gather, scatter or
  /// exchange over an axis of more than one rank fails. Nothing needs MPI.
  static std::unique_ptr<Communicator>
  standIn(llvm::ArrayRef<std::string> axes, llvm::ArrayRef<int64_t> shape,
          llvm::ArrayRef<int64_t> coordinates);
  virtual ~Communicator() = default;
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  /// How long a collective waits for the axis's other ranks before it
  /// fails, naming them (parallel.collective_timeout_s).
  void setTimeout(double seconds) { timeoutSeconds = seconds; }
  double timeout() const { return timeoutSeconds; }

  int rank() const { return worldRank; }
  int worldSize() const { return size; }
  /// This rank's index along `axis`, and the axis size; -1 for no such axis.
  int coordinate(llvm::StringRef axis) const;
  int axisSize(llvm::StringRef axis) const;

  /// A collective in flight, from its start to its wait. Until wait()
  /// returns, the memory it reads and writes stays as it is.
  class Pending {
  public:
    virtual ~Pending() = default;
    /// Moves the transfer on without blocking, and says whether it is
    /// complete: MPI advances a non-blocking collective only inside MPI
    /// calls, so the runtime calls this between instructions. (With Open
    /// MPI, one call on a collective not yet complete moves every one on.)
    virtual llvm::Expected<bool> progress() { return true; }
    /// Blocks until the transfer completes (at most the communicator's
    /// timeout), then runs the steps then() added, in order. Once only.
    llvm::Error wait();
    /// `step` runs once the transfer is complete: it puts the result in
    /// place (out of staging memory, or narrowed to bf16).
    void then(std::function<void()> step) { steps.push_back(std::move(step)); }
    /// Memory the transfer reads or writes, kept with it until it ends
    /// (and beyond, where it is abandoned in flight: see ~MpiPending).
    void keep(std::vector<float> memory) { held.push_back(std::move(memory)); }

  protected:
    virtual llvm::Error complete() = 0;
    std::vector<std::vector<float>> held;

  private:
    std::vector<std::function<void()>> steps;
  };
  using Started = llvm::Expected<std::unique_ptr<Pending>>;
  /// A collective that completed as it started (a process alone).
  static std::unique_ptr<Pending> completed();

  /// Starts out (shape with dim `dim` times the axis size) = the inputs of
  /// the axis's ranks concatenated along `dim`, in axis order.
  virtual Started startAllGather(llvm::StringRef axis, const float *in,
                                 float *out, llvm::ArrayRef<int64_t> inShape,
                                 int64_t dim) = 0;
  /// Starts out = this rank's block along `dim` of the sum of the axis's
  /// inputs.
  virtual Started startReduceScatter(llvm::StringRef axis, const float *in,
                                     float *out,
                                     llvm::ArrayRef<int64_t> inShape,
                                     int64_t dim) = 0;
  /// Starts out = the sum of the axis's inputs (in may be out).
  virtual Started startAllReduce(llvm::StringRef axis, const float *in,
                                 float *out, int64_t count) = 0;
  virtual Started startAllReduce(llvm::StringRef axis, const int64_t *in,
                                 int64_t *out, int64_t count) = 0;
  /// Starts splitting `splitDim` into one block per rank of the axis,
  /// sending block r to rank r, and concatenating what arrives along
  /// `concatDim`.
  virtual Started startAllToAll(llvm::StringRef axis, const float *in,
                                float *out, llvm::ArrayRef<int64_t> inShape,
                                int64_t splitDim, int64_t concatDim) = 0;

  /// Per element, the sum (or with `max`, the maximum) over the axis, in
  /// place.
  virtual llvm::Error allReduce(llvm::StringRef axis, double *values,
                                int64_t count, bool max) = 0;
  /// The sum over every rank of the world, in place: how a tensor whose
  /// blocks live on different ranks is put together (each rank adds its
  /// block into zeros).
  virtual llvm::Error sumOverWorld(float *values, int64_t count) = 0;
  /// Returns once every rank of the world has called it.
  virtual llvm::Error barrier() = 0;

  /// Copies `bytes` at `data` from rank `root` to every rank.
  virtual llvm::Error broadcast(void *data, int64_t bytes, int root) const = 0;

protected:
  Communicator() = default;
  struct Axis {
    std::string name;
    int size = 1, coordinate = 0;
  };
  llvm::Expected<const Axis *> findAxis(llvm::StringRef name) const;
  /// Lays the world's ranks out on the mesh; fails unless they fill it.
  llvm::Error layOut(llvm::ArrayRef<std::string> names,
                     llvm::ArrayRef<int64_t> shape);

  int worldRank = 0, size = 1;
  std::vector<Axis> axes;
  double timeoutSeconds = 600;
};

} // namespace twill

#endif // TWILL_RUNTIME_COMM_COMMUNICATOR_H
