//===- LocalCommunicator.cpp - one process, alone -------------------------===//
//
// The collectives of a process with no peers: a launch of one rank (a build
// without MPI), or a stand-in for one rank of a larger mesh. A reduction
// over an axis keeps this rank's values, since no other rank adds to them;
// a gather, scatter or exchange over an axis of one rank leaves the values
// as they are, and over a larger axis it cannot run.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/TensorSplit.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstring>

using namespace twill;
using namespace twill::comm;

namespace {

class LocalCommunicator final : public Communicator {
public:
  LocalCommunicator(llvm::ArrayRef<std::string> names,
                    llvm::ArrayRef<int64_t> shape,
                    llvm::ArrayRef<int64_t> coordinates) {
    for (size_t i = 0; i < names.size(); ++i)
      axes.push_back({names[i], int(shape[i]), int(coordinates[i])});
  }

  Started startAllGather(llvm::StringRef axis, const float *in, float *out,
                         llvm::ArrayRef<int64_t> inShape, int64_t) override {
    return exchange("gather", axis, in, out, product(inShape));
  }
  Started startReduceScatter(llvm::StringRef axis, const float *in, float *out,
                             llvm::ArrayRef<int64_t> inShape,
                             int64_t) override {
    return exchange("scatter", axis, in, out, product(inShape));
  }
  Started startAllToAll(llvm::StringRef axis, const float *in, float *out,
                        llvm::ArrayRef<int64_t> inShape, int64_t,
                        int64_t) override {
    return exchange("exchange", axis, in, out, product(inShape));
  }
  Started startAllReduce(llvm::StringRef axis, const float *in, float *out,
                         int64_t count) override {
    return completedUnless(keep(axis, in, out, count * sizeof(float)));
  }
  Started startAllReduce(llvm::StringRef axis, const int64_t *in, int64_t *out,
                         int64_t count) override {
    return completedUnless(keep(axis, in, out, count * sizeof(int64_t)));
  }
  llvm::Error allReduce(llvm::StringRef axis, double *values, int64_t count,
                        bool) override {
    return keep(axis, values, values, count * sizeof(double));
  }
  llvm::Error sumOverWorld(float *, int64_t) override {
    return llvm::Error::success();
  }
  llvm::Error barrier() override { return llvm::Error::success(); }
  llvm::Error broadcast(void *, int64_t, int) const override {
    return llvm::Error::success();
  }

private:
  /// This rank's values, the whole of a reduction without peers.
  llvm::Error keep(llvm::StringRef axis, const void *in, void *out,
                   int64_t bytes) {
    if (llvm::Expected<const Axis *> found = findAxis(axis); !found)
      return found.takeError();
    if (in != out)
      std::memmove(out, in, bytes);
    return llvm::Error::success();
  }

  /// Alone, a collective is done as soon as it starts.
  static Started completedUnless(llvm::Error error) {
    if (error)
      return std::move(error);
    return completed();
  }

  /// A gather, scatter or exchange: over one rank, the values as they are.
  Started exchange(llvm::StringRef what, llvm::StringRef axis, const float *in,
                   float *out, int64_t count) {
    llvm::Expected<const Axis *> found = findAxis(axis);
    if (!found)
      return found.takeError();
    if ((*found)->size != 1)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("cannot {0} over axis '{1}' of {2} ranks: this "
                        "process stands in for one of them, and the others "
                        "are absent",
                        what, axis, (*found)->size));
    std::memmove(out, in, count * sizeof(float));
    return completed();
  }
};

} // namespace

std::unique_ptr<Communicator>
Communicator::standIn(llvm::ArrayRef<std::string> axes,
                      llvm::ArrayRef<int64_t> shape,
                      llvm::ArrayRef<int64_t> coordinates) {
  return std::make_unique<LocalCommunicator>(axes, shape, coordinates);
}
