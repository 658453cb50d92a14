//===- Communicator.h - MPI collectives on mesh axes ------------*- C++ -*-===//
//
// The CPU runtime's collectives. Ranks form the job's mesh row-major (the
// first axis major: with dp x tp, rank = dp_index * tp + tp_index); each
// axis has a sub-communicator of the ranks that differ only along it, and a
// collective on an axis runs among those. Tensors are row-major fp32 with a
// gather or scatter dim, as the twill collective ops describe them.
//
// Communicator.cpp holds the mesh bookkeeping; the transport is MPI
// (MpiTransport.cpp), or, in a build without MPI (TWILL_WITH_MPI=OFF: a
// single-GPU machine with no MPI installed), one process
// (SingleProcess.cpp), where a collective over one rank is a copy.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_COMM_COMMUNICATOR_H
#define TWILL_RUNTIME_COMM_COMMUNICATOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace twill {

class Communicator {
public:
  /// The process's part in the launch (MPI_Init, MPI_Finalize); before and
  /// after everything else.
  static void initialize(int &argc, char **&argv);
  static void finalize();
  /// Ends every rank of the launch: one rank's error must not leave the
  /// others waiting in a collective.
  [[noreturn]] static void abortAll();
  /// How many ranks the launcher started.
  static int launchedRanks();

  /// Splits MPI_COMM_WORLD (MPI must be initialised) into the axes of a
  /// mesh; fails, on every rank alike, unless the world has exactly as many
  /// ranks as the mesh.
  static llvm::Expected<std::unique_ptr<Communicator>>
  create(llvm::ArrayRef<std::string> axes, llvm::ArrayRef<int64_t> shape);
  ~Communicator();
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;

  int rank() const { return worldRank; }
  int worldSize() const { return size; }
  /// This rank's index along `axis`, and the axis size; -1 for no such axis.
  int coordinate(llvm::StringRef axis) const;
  int axisSize(llvm::StringRef axis) const;

  /// out (shape with dim `dim` times the axis size) = the inputs of the
  /// axis's ranks concatenated along `dim`, in axis order.
  llvm::Error allGather(llvm::StringRef axis, const float *in, float *out,
                        llvm::ArrayRef<int64_t> inShape, int64_t dim);
  /// out = this rank's block along `dim` of the sum of the axis's inputs.
  llvm::Error reduceScatter(llvm::StringRef axis, const float *in, float *out,
                            llvm::ArrayRef<int64_t> inShape, int64_t dim);
  /// out = the sum of the axis's inputs (in may be out).
  llvm::Error allReduce(llvm::StringRef axis, const float *in, float *out,
                        int64_t count);
  llvm::Error allReduce(llvm::StringRef axis, const int64_t *in, int64_t *out,
                        int64_t count);
  /// Per element, the sum (or with `max`, the maximum) over the axis, in
  /// place.
  llvm::Error allReduce(llvm::StringRef axis, double *values, int64_t count,
                        bool max);
  /// The sum over every rank of the world, in place: how a tensor whose
  /// blocks live on different ranks is put together (each rank adds its
  /// block into zeros).
  llvm::Error sumOverWorld(float *values, int64_t count);
  /// Returns once every rank of the world has called it.
  llvm::Error barrier();
  /// Splits `splitDim` into one block per rank of the axis, sends block r to
  /// rank r, and concatenates what arrives along `concatDim`.
  llvm::Error allToAll(llvm::StringRef axis, const float *in, float *out,
                       llvm::ArrayRef<int64_t> inShape, int64_t splitDim,
                       int64_t concatDim);

  /// Copies `bytes` at `data` from rank `root` to every rank.
  llvm::Error broadcast(void *data, int64_t bytes, int root) const;

private:
  Communicator() = default;
  struct Axis {
    std::string name;
    int size = 1, coordinate = 0;
  };
  /// The transport's handles (MPI's sub-communicators), one per axis.
  struct Transport;
  llvm::Expected<const Axis *> findAxis(llvm::StringRef name) const;
  /// Lays the world's ranks out on the mesh; fails unless they fill it.
  llvm::Error layOut(llvm::ArrayRef<std::string> names,
                     llvm::ArrayRef<int64_t> shape);

  int worldRank = 0, size = 1;
  std::vector<Axis> axes;
  std::unique_ptr<Transport> transport;
};

} // namespace twill

#endif // TWILL_RUNTIME_COMM_COMMUNICATOR_H
