//===- MpiTransport.cpp - the collectives over MPI ------------------------===//

#include "runtime/comm/Communicator.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>
#include <cstring>
#include <mpi.h>

using namespace twill;

namespace {

/// The mesh's collectives over MPI: one sub-communicator per mesh axis, in
/// the axes' order.
class MpiCommunicator final : public Communicator {
public:
  static llvm::Expected<std::unique_ptr<Communicator>>
  create(llvm::ArrayRef<std::string> axisNames, llvm::ArrayRef<int64_t> shape);
  ~MpiCommunicator() override;

  llvm::Error allGather(llvm::StringRef axis, const float *in, float *out,
                        llvm::ArrayRef<int64_t> inShape, int64_t dim) override;
  llvm::Error reduceScatter(llvm::StringRef axis, const float *in, float *out,
                            llvm::ArrayRef<int64_t> inShape,
                            int64_t dim) override;
  llvm::Error allReduce(llvm::StringRef axis, const float *in, float *out,
                        int64_t count) override;
  llvm::Error allReduce(llvm::StringRef axis, const int64_t *in, int64_t *out,
                        int64_t count) override;
  llvm::Error allReduce(llvm::StringRef axis, double *values, int64_t count,
                        bool max) override;
  llvm::Error sumOverWorld(float *values, int64_t count) override;
  llvm::Error barrier() override;
  llvm::Error allToAll(llvm::StringRef axis, const float *in, float *out,
                       llvm::ArrayRef<int64_t> inShape, int64_t splitDim,
                       int64_t concatDim) override;
  llvm::Error broadcast(void *data, int64_t bytes, int root) const override;

private:
  MPI_Comm commOf(const Axis *axis) const { return comms[axis - axes.data()]; }
  std::vector<MPI_Comm> comms;
};

} // namespace

static llvm::Error commError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

static llvm::Error checkMpi(int status, llvm::StringRef call) {
  if (status == MPI_SUCCESS)
    return llvm::Error::success();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  return commError(call + " failed: " + llvm::StringRef(text, length));
}

static int64_t product(llvm::ArrayRef<int64_t> values) {
  int64_t result = 1;
  for (int64_t value : values)
    result *= value;
  return result;
}

void Communicator::initialize(int &argc, char **&argv) {
  MPI_Init(&argc, &argv);
}

void Communicator::finalize() { MPI_Finalize(); }

void Communicator::abortAll() {
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

int Communicator::launchedRanks() {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  return ranks;
}

llvm::Expected<std::unique_ptr<Communicator>>
Communicator::create(llvm::ArrayRef<std::string> axisNames,
                     llvm::ArrayRef<int64_t> shape) {
  return MpiCommunicator::create(axisNames, shape);
}

llvm::Expected<std::unique_ptr<Communicator>>
MpiCommunicator::create(llvm::ArrayRef<std::string> axisNames,
                        llvm::ArrayRef<int64_t> shape) {
  auto communicator = std::make_unique<MpiCommunicator>();
  MPI_Comm_rank(MPI_COMM_WORLD, &communicator->worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &communicator->size);
  if (llvm::Error error = communicator->layOut(axisNames, shape))
    return std::move(error);
  // An axis's communicator joins the ranks that agree on every other
  // coordinate.
  const std::vector<Axis> &axes = communicator->axes;
  for (size_t i = 0; i < axes.size(); ++i) {
    int color = 0;
    for (size_t j = 0; j < axes.size(); ++j)
      if (j != i)
        color = color * axes[j].size + axes[j].coordinate;
    MPI_Comm comm = MPI_COMM_NULL;
    if (llvm::Error error = checkMpi(
            MPI_Comm_split(MPI_COMM_WORLD, color, axes[i].coordinate, &comm),
            "MPI_Comm_split"))
      return std::move(error);
    communicator->comms.push_back(comm);
  }
  return communicator;
}

MpiCommunicator::~MpiCommunicator() {
  for (MPI_Comm &comm : comms)
    if (comm != MPI_COMM_NULL)
      MPI_Comm_free(&comm);
}

/// A row-major tensor seen as [outer, dim, inner] around `dim`.
struct Split {
  int64_t outer, length, inner;
  Split(llvm::ArrayRef<int64_t> shape, int64_t dim)
      : outer(product(shape.take_front(dim))), length(shape[dim]),
        inner(product(shape.drop_front(dim + 1))) {}
};

llvm::Error MpiCommunicator::allGather(llvm::StringRef name, const float *in,
                                    float *out, llvm::ArrayRef<int64_t> inShape,
                                    int64_t dim) {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  Split split(inShape, dim);
  int64_t block = split.outer * split.length * split.inner;
  std::vector<float> gathered(block * (*axis)->size);
  if (llvm::Error error =
          checkMpi(MPI_Allgather(in, int(block), MPI_FLOAT, gathered.data(),
                                 int(block), MPI_FLOAT, commOf(*axis)),
                   "MPI_Allgather"))
    return error;
  // gathered is [rank][outer][length * inner]; out is
  // [outer][rank][length * inner].
  int64_t row = split.length * split.inner;
  for (int r = 0; r < (*axis)->size; ++r)
    for (int64_t o = 0; o < split.outer; ++o)
      std::memcpy(out + (o * (*axis)->size + r) * row,
                  gathered.data() + (r * split.outer + o) * row,
                  row * sizeof(float));
  return llvm::Error::success();
}

llvm::Error MpiCommunicator::reduceScatter(llvm::StringRef name, const float *in,
                                        float *out,
                                        llvm::ArrayRef<int64_t> inShape,
                                        int64_t dim) {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  int n = (*axis)->size;
  Split split(inShape, dim);
  if (split.length % n != 0)
    return commError(llvm::formatv("reduce_scatter: dim {0} of size {1} does "
                                   "not split over {2} ranks",
                                   dim, split.length, n));
  int64_t row = split.length / n * split.inner;
  // Rearrange [outer][rank][row] into [rank][outer][row] for MPI.
  std::vector<float> blocks(split.outer * n * row);
  for (int64_t o = 0; o < split.outer; ++o)
    for (int r = 0; r < n; ++r)
      std::memcpy(blocks.data() + (r * split.outer + o) * row,
                  in + (o * n + r) * row, row * sizeof(float));
  return checkMpi(MPI_Reduce_scatter_block(blocks.data(), out,
                                           int(split.outer * row), MPI_FLOAT,
                                           MPI_SUM, commOf(*axis)),
                  "MPI_Reduce_scatter_block");
}

/// MPI_Allreduce, in place when `in` is `out`.
static llvm::Error reduce(const void *in, void *out, int64_t count,
                          MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return checkMpi(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, int(count),
                                type, op, comm),
                  "MPI_Allreduce");
}

llvm::Error MpiCommunicator::allReduce(llvm::StringRef name, const float *in,
                                    float *out, int64_t count) {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  return reduce(in, out, count, MPI_FLOAT, MPI_SUM, commOf(*axis));
}

llvm::Error MpiCommunicator::allReduce(llvm::StringRef name, const int64_t *in,
                                    int64_t *out, int64_t count) {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  return reduce(in, out, count, MPI_INT64_T, MPI_SUM, commOf(*axis));
}

llvm::Error MpiCommunicator::allReduce(llvm::StringRef name, double *values,
                                    int64_t count, bool max) {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  return reduce(values, values, count, MPI_DOUBLE, max ? MPI_MAX : MPI_SUM,
                commOf(*axis));
}

llvm::Error MpiCommunicator::broadcast(void *data, int64_t bytes,
                                    int root) const {
  return checkMpi(MPI_Bcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD),
                  "MPI_Bcast");
}

llvm::Error MpiCommunicator::barrier() {
  return checkMpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

llvm::Error MpiCommunicator::sumOverWorld(float *values, int64_t count) {
  return reduce(values, values, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

llvm::Error MpiCommunicator::allToAll(llvm::StringRef name, const float *in,
                                   float *out, llvm::ArrayRef<int64_t> inShape,
                                   int64_t splitDim, int64_t concatDim) {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  int n = (*axis)->size;
  if (inShape[splitDim] % n != 0)
    return commError(llvm::formatv("all_to_all: dim {0} of size {1} does not "
                                   "split over {2} ranks",
                                   splitDim, inShape[splitDim], n));
  // The block for rank r: the input's r-th slice along splitDim.
  std::vector<int64_t> blockShape(inShape.begin(), inShape.end());
  blockShape[splitDim] /= n;
  int64_t block = product(blockShape);
  Split source(inShape, splitDim);
  int64_t sourceRow = source.length / n * source.inner;
  std::vector<float> send(block * n), receive(block * n);
  for (int r = 0; r < n; ++r)
    for (int64_t o = 0; o < source.outer; ++o)
      std::memcpy(send.data() + r * block + o * sourceRow,
                  in + (o * n + r) * sourceRow, sourceRow * sizeof(float));
  if (llvm::Error error = checkMpi(
          MPI_Alltoall(send.data(), int(block), MPI_FLOAT, receive.data(),
                       int(block), MPI_FLOAT, commOf(*axis)),
          "MPI_Alltoall"))
    return error;
  // Block r arrived from rank r: it goes to slice r along concatDim.
  Split target(blockShape, concatDim);
  int64_t targetRow = target.length * target.inner;
  for (int r = 0; r < n; ++r)
    for (int64_t o = 0; o < target.outer; ++o)
      std::memcpy(out + (o * n + r) * targetRow,
                  receive.data() + r * block + o * targetRow,
                  targetRow * sizeof(float));
  return llvm::Error::success();
}
