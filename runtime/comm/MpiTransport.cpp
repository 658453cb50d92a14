//===- MpiTransport.cpp - the collectives over MPI ------------------------===//

#include "runtime/comm/TensorSplit.h"
#include "runtime/comm/Transports.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mpi.h>
#include <thread>

using namespace twill;
using namespace twill::comm;

namespace {

class MpiPending;

/// The mesh's collectives over MPI: one sub-communicator per mesh axis, in
/// the axes' order.
class MpiCommunicator final : public Communicator {
public:
  static llvm::Expected<std::unique_ptr<Communicator>>
  create(llvm::ArrayRef<std::string> axisNames, llvm::ArrayRef<int64_t> shape);
  ~MpiCommunicator() override;

  Started startAllGather(llvm::StringRef axis, const float *in, float *out,
                         llvm::ArrayRef<int64_t> inShape, int64_t dim) override;
  Started startReduceScatter(llvm::StringRef axis, const float *in, float *out,
                             llvm::ArrayRef<int64_t> inShape,
                             int64_t dim) override;
  Started startAllReduce(llvm::StringRef axis, const float *in, float *out,
                         int64_t count) override;
  Started startAllReduce(llvm::StringRef axis, const int64_t *in, int64_t *out,
                         int64_t count) override;
  Started startAllToAll(llvm::StringRef axis, const float *in, float *out,
                        llvm::ArrayRef<int64_t> inShape, int64_t splitDim,
                        int64_t concatDim) override;
  llvm::Error allReduce(llvm::StringRef axis, double *values, int64_t count,
                        bool max) override;
  llvm::Error sumOverWorld(float *values, int64_t count) override;
  llvm::Error barrier() override;
  llvm::Error broadcast(void *data, int64_t bytes, int root) const override;

  /// Waits for `request`, the collective `what` over `comm`, up to the
  /// timeout; past it, fails naming the ranks of `comm` that did not
  /// arrive.
  llvm::Error complete(MPI_Request &request, const llvm::Twine &what,
                       MPI_Comm comm) const;

private:
  MPI_Comm commOf(const Axis *axis) const { return comms[axis - axes.data()]; }
  /// The collective `call` (an MPI_I* function, which returned `started`)
  /// began in `pending`, unless it failed to start.
  static Started inFlight(int started, llvm::StringRef call,
                          std::unique_ptr<MpiPending> pending);
  /// `pending`'s description and communicator: the collective `what` on
  /// axis `name`.
  llvm::Expected<std::unique_ptr<MpiPending>>
  pendingOn(llvm::StringRef name, llvm::StringRef what) const;
  llvm::Error timedOut(const llvm::Twine &what, MPI_Comm comm) const;
  Started reduce(const void *in, void *out, int64_t count, MPI_Datatype type,
                 MPI_Op op, MPI_Comm comm, const llvm::Twine &what) const;
  llvm::Error blocking(Started started) const;

  std::vector<MPI_Comm> comms;
};

/// A collective of MPI's in flight: its request, its staging memory (kept
/// by the base class), and what it is, for the timeout's message.
class MpiPending final : public Communicator::Pending {
public:
  MpiPending(const MpiCommunicator &owner, MPI_Comm comm, std::string what)
      : comm(comm), owner(owner), what(std::move(what)) {}
  /// Abandoned in flight (its run failed, and the job is ending): MPI may
  /// still read or write its staging, so that memory is never freed.
  ~MpiPending() override {
    if (request != MPI_REQUEST_NULL)
      for (std::vector<float> &memory : held)
        new std::vector<float>(std::move(memory)); // deliberately kept
  }
  llvm::Expected<bool> progress() override;

  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Comm comm;

protected:
  llvm::Error complete() override {
    return owner.complete(request, what, comm);
  }

private:
  const MpiCommunicator &owner;
  std::string what;
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

// Known once MPI is initialised: how many ranks share this rank's node,
// and its place among them (ordered by world rank).
static int ranksSharingThisNode = 1;
static int placeOnThisNode = 0;

const Transport twill::kMpiTransport = {
    [](int &argc, char **&argv) {
      MPI_Init(&argc, &argv);
      MPI_Comm node = MPI_COMM_NULL;
      if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                              MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &ranksSharingThisNode);
        MPI_Comm_rank(node, &placeOnThisNode);
        MPI_Comm_free(&node);
      }
    },
    [] { MPI_Finalize(); },
    [] { MPI_Abort(MPI_COMM_WORLD, 1); },
    [] {
      int ranks = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &ranks);
      return ranks;
    },
    [] { return ranksSharingThisNode; },
    [] { return placeOnThisNode; },
    MpiCommunicator::create};

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

llvm::Expected<std::unique_ptr<MpiPending>>
MpiCommunicator::pendingOn(llvm::StringRef name, llvm::StringRef what) const {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  return std::make_unique<MpiPending>(
      *this, commOf(*axis), (what + " over axis '" + name + "'").str());
}

Communicator::Started
MpiCommunicator::inFlight(int started, llvm::StringRef call,
                          std::unique_ptr<MpiPending> pending) {
  if (llvm::Error error = checkMpi(started, call))
    return std::move(error);
  return std::move(pending);
}

llvm::Expected<bool> MpiPending::progress() {
  int done = 0;
  if (llvm::Error error =
          checkMpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test"))
    return std::move(error);
  return done != 0;
}

Communicator::Started
MpiCommunicator::startAllGather(llvm::StringRef name, const float *in,
                                float *out, llvm::ArrayRef<int64_t> inShape,
                                int64_t dim) {
  auto pending = pendingOn(name, "all_gather");
  if (!pending)
    return pending.takeError();
  int ranks = axisSize(name);
  Split split(inShape, dim);
  int64_t block = split.outer * split.length * split.inner;
  if (split.outer == 1) { // along the first dim: the blocks arrive in place
    int started =
        MPI_Iallgather(in, int(block), MPI_FLOAT, out, int(block), MPI_FLOAT,
                       (*pending)->comm, &(*pending)->request);
    return inFlight(started, "MPI_Iallgather", std::move(*pending));
  }
  std::vector<float> gathered(block * ranks);
  int started =
      MPI_Iallgather(in, int(block), MPI_FLOAT, gathered.data(), int(block),
                     MPI_FLOAT, (*pending)->comm, &(*pending)->request);
  // gathered is [rank][outer][length * inner]; out is
  // [outer][rank][length * inner].
  (*pending)->then([=, from = gathered.data()] {
    int64_t row = split.length * split.inner;
    for (int r = 0; r < ranks; ++r)
      for (int64_t o = 0; o < split.outer; ++o)
        std::memcpy(out + (o * ranks + r) * row,
                    from + (r * split.outer + o) * row, row * sizeof(float));
  });
  (*pending)->keep(std::move(gathered));
  return inFlight(started, "MPI_Iallgather", std::move(*pending));
}

Communicator::Started
MpiCommunicator::startReduceScatter(llvm::StringRef name, const float *in,
                                    float *out, llvm::ArrayRef<int64_t> inShape,
                                    int64_t dim) {
  auto pending = pendingOn(name, "reduce_scatter");
  if (!pending)
    return pending.takeError();
  int n = axisSize(name);
  Split split(inShape, dim);
  if (split.length % n != 0)
    return commError(llvm::formatv("reduce_scatter: dim {0} of size {1} does "
                                   "not split over {2} ranks",
                                   dim, split.length, n));
  int64_t row = split.length / n * split.inner;
  if (split.outer == 1) { // along the first dim: the blocks are in place
    int started =
        MPI_Ireduce_scatter_block(in, out, int(row), MPI_FLOAT, MPI_SUM,
                                  (*pending)->comm, &(*pending)->request);
    return inFlight(started, "MPI_Ireduce_scatter_block", std::move(*pending));
  }
  // Rearrange [outer][rank][row] into [rank][outer][row] for MPI.
  std::vector<float> blocks(split.outer * n * row);
  for (int64_t o = 0; o < split.outer; ++o)
    for (int r = 0; r < n; ++r)
      std::memcpy(blocks.data() + (r * split.outer + o) * row,
                  in + (o * n + r) * row, row * sizeof(float));
  int started = MPI_Ireduce_scatter_block(
      blocks.data(), out, int(split.outer * row), MPI_FLOAT, MPI_SUM,
      (*pending)->comm, &(*pending)->request);
  (*pending)->keep(std::move(blocks));
  return inFlight(started, "MPI_Ireduce_scatter_block", std::move(*pending));
}

/// MPI_Iallreduce, in place when `in` is `out`.
Communicator::Started MpiCommunicator::reduce(const void *in, void *out,
                                              int64_t count, MPI_Datatype type,
                                              MPI_Op op, MPI_Comm comm,
                                              const llvm::Twine &what) const {
  auto pending = std::make_unique<MpiPending>(*this, comm, what.str());
  int started = MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out, int(count),
                               type, op, comm, &pending->request);
  return inFlight(started, "MPI_Iallreduce", std::move(pending));
}

/// Waits for a collective as soon as it has started.
llvm::Error MpiCommunicator::blocking(Started started) const {
  if (!started)
    return started.takeError();
  return (*started)->wait();
}

Communicator::Started MpiCommunicator::startAllReduce(llvm::StringRef name,
                                                      const float *in,
                                                      float *out,
                                                      int64_t count) {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  return reduce(in, out, count, MPI_FLOAT, MPI_SUM, commOf(*axis),
                "all_reduce over axis '" + name + "'");
}

Communicator::Started MpiCommunicator::startAllReduce(llvm::StringRef name,
                                                      const int64_t *in,
                                                      int64_t *out,
                                                      int64_t count) {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  return reduce(in, out, count, MPI_INT64_T, MPI_SUM, commOf(*axis),
                "all_reduce over axis '" + name + "'");
}

llvm::Error MpiCommunicator::allReduce(llvm::StringRef name, double *values,
                                       int64_t count, bool max) {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  return blocking(reduce(values, values, count, MPI_DOUBLE,
                         max ? MPI_MAX : MPI_SUM, commOf(*axis),
                         "the loss's row statistics over axis '" + name + "'"));
}

llvm::Error MpiCommunicator::broadcast(void *data, int64_t bytes,
                                       int root) const {
  auto pending = std::make_unique<MpiPending>(
      *this, MPI_COMM_WORLD, "a broadcast from rank " + std::to_string(root));
  int started = MPI_Ibcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD,
                           &pending->request);
  return blocking(inFlight(started, "MPI_Ibcast", std::move(pending)));
}

llvm::Error MpiCommunicator::barrier() {
  auto pending = std::make_unique<MpiPending>(*this, MPI_COMM_WORLD,
                                              "a barrier of every rank");
  int started = MPI_Ibarrier(MPI_COMM_WORLD, &pending->request);
  return blocking(inFlight(started, "MPI_Ibarrier", std::move(pending)));
}

llvm::Error MpiCommunicator::sumOverWorld(float *values, int64_t count) {
  return blocking(reduce(values, values, count, MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD, "a sum over every rank"));
}

Communicator::Started
MpiCommunicator::startAllToAll(llvm::StringRef name, const float *in,
                               float *out, llvm::ArrayRef<int64_t> inShape,
                               int64_t splitDim, int64_t concatDim) {
  auto pending = pendingOn(name, "all_to_all");
  if (!pending)
    return pending.takeError();
  int n = axisSize(name);
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
  int started = MPI_Ialltoall(send.data(), int(block), MPI_FLOAT,
                              receive.data(), int(block), MPI_FLOAT,
                              (*pending)->comm, &(*pending)->request);
  // Block r arrived from rank r: it goes to slice r along concatDim.
  Split target(blockShape, concatDim);
  (*pending)->then([=, from = receive.data()] {
    int64_t targetRow = target.length * target.inner;
    for (int r = 0; r < n; ++r)
      for (int64_t o = 0; o < target.outer; ++o)
        std::memcpy(out + (o * n + r) * targetRow,
                    from + r * block + o * targetRow,
                    targetRow * sizeof(float));
  });
  (*pending)->keep(std::move(send));
  (*pending)->keep(std::move(receive));
  return inFlight(started, "MPI_Ialltoall", std::move(*pending));
}

llvm::Error MpiCommunicator::complete(MPI_Request &request,
                                      const llvm::Twine &what,
                                      MPI_Comm comm) const {
  auto began = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    if (llvm::Error error =
            checkMpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test"))
      return error;
    if (done)
      return llvm::Error::success();
    // Poll at once first (collectives are usually quick), then calmly.
    if (polls < 1000)
      continue;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
            .count() > timeoutSeconds)
      return timedOut(what, comm);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

/// Past the timeout, every rank that waits says so to every rank, then
/// listens a few seconds: the ranks of the collective not heard from are
/// the ones that did not arrive (stopped, stuck, or elsewhere).
llvm::Error MpiCommunicator::timedOut(const llvm::Twine &what,
                                      MPI_Comm comm) const {
  constexpr int kTag = 7411;
  static int announced; // the sends read it after this returns
  announced = worldRank;
  for (int rank = 0; rank < size; ++rank)
    if (rank != worldRank) {
      MPI_Request send;
      if (MPI_Isend(&announced, 1, MPI_INT, rank, kTag, MPI_COMM_WORLD,
                    &send) == MPI_SUCCESS)
        MPI_Request_free(&send);
    }
  std::vector<bool> heard(size, false);
  heard[worldRank] = true;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < until) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, &arrived, &status);
    if (!arrived) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    int rank = -1;
    MPI_Recv(&rank, 1, MPI_INT, status.MPI_SOURCE, kTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    if (rank >= 0 && rank < size)
      heard[rank] = true;
  }
  // The collective's ranks, as ranks of the world.
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int members = 0;
  MPI_Group_size(group, &members);
  std::vector<int> local(members), global(members);
  for (int i = 0; i < members; ++i)
    local[i] = i;
  MPI_Group_translate_ranks(group, members, local.data(), world, global.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  std::string missing;
  for (int rank : global)
    if (rank >= 0 && !heard[rank])
      missing += (missing.empty() ? "" : ", ") + std::to_string(rank);
  return commError(llvm::formatv(
      "{0} waited {1} s (parallel.collective_timeout_s) and rank(s) {2} of "
      "it did not arrive: stopped, stuck, or elsewhere in the program",
      what.str(), timeoutSeconds,
      missing.empty() ? std::string("(none answered late)") : missing));
}
