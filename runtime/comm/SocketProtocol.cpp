//===- SocketProtocol.cpp - a launch without MPI: its messages ------------===//

#include "runtime/comm/SocketProtocol.h"
#include "runtime/comm/TensorSplit.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstring>
#include <type_traits>

using namespace twill;
using namespace twill::sockets;
using namespace twill::comm;

static llvm::Error protocolError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

bool Collective::operator==(const Collective &other) const {
  return op == other.op && rank == other.rank && dims == other.dims &&
         inShape() == other.inShape() && dim == other.dim &&
         concatDim == other.concatDim;
}

static int64_t elementBytes(Op op) {
  switch (op) {
  case Op::AllReduceI64:
  case Op::AllReduceF64:
  case Op::MaxF64:
    return 8;
  case Op::Broadcast:
    return 1;
  default:
    return 4;
  }
}

int64_t Collective::inputBytes() const {
  // -1 for a shape no input has (a negative or overflowing size): what
  // arrived from another process is checked, never trusted.
  int64_t bytes = elementBytes(op);
  for (int64_t size : inShape())
    if (size < 0 || __builtin_mul_overflow(bytes, size, &bytes))
      return -1;
  return bytes;
}

std::string Collective::describe(llvm::ArrayRef<int32_t> group) const {
  static const char *names[] = {
      "",           "all_gather", "reduce_scatter",   "all_reduce",
      "all_reduce", "all_reduce", "all_reduce (max)", "all_to_all",
      "broadcast"};
  std::string ranks;
  for (int32_t rank : group)
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
  uint32_t index = uint32_t(op);
  return llvm::formatv("{0} over ranks {1}",
                       index < std::size(names) ? names[index] : "?", ranks);
}

void sockets::encode(const Frame &frame, llvm::ArrayRef<int32_t> group,
                     llvm::ArrayRef<char> bytes, std::vector<char> &out) {
  Frame header = frame;
  header.magic = kMagic;
  header.groupSize = int32_t(group.size());
  header.bytes = bytes.size();
  size_t at = out.size();
  out.resize(at + sizeof(Frame) + group.size() * sizeof(int32_t) +
             bytes.size());
  std::memcpy(out.data() + at, &header, sizeof(Frame));
  at += sizeof(Frame);
  if (!group.empty())
    std::memcpy(out.data() + at, group.data(), group.size() * sizeof(int32_t));
  at += group.size() * sizeof(int32_t);
  if (!bytes.empty())
    std::memcpy(out.data() + at, bytes.data(), bytes.size());
}

llvm::Expected<std::optional<Message>>
sockets::decode(std::vector<char> &buffer) {
  if (buffer.size() < sizeof(Frame))
    return std::nullopt;
  Message message;
  std::memcpy(&message.frame, buffer.data(), sizeof(Frame));
  const Frame &frame = message.frame;
  if (frame.magic != kMagic || frame.groupSize < 0 ||
      frame.groupSize > (1 << 20) || frame.collective.dims < 0 ||
      frame.collective.dims > kMaxDims)
    return protocolError("a message that is not Twill's arrived (another "
                         "program on MASTER_PORT?)");
  size_t groupBytes = size_t(frame.groupSize) * sizeof(int32_t);
  if (buffer.size() - sizeof(Frame) < groupBytes ||
      buffer.size() - sizeof(Frame) - groupBytes < frame.bytes)
    return std::nullopt;
  message.group.resize(frame.groupSize);
  const char *at = buffer.data() + sizeof(Frame);
  if (groupBytes)
    std::memcpy(message.group.data(), at, groupBytes);
  at += groupBytes;
  message.bytes.assign(at, at + frame.bytes);
  buffer.erase(buffer.begin(),
               buffer.begin() + sizeof(Frame) + groupBytes + frame.bytes);
  return message;
}

namespace {

/// a + b; integers wrap around as two's complement (as MPI's sums do on
/// every machine Twill runs on) rather than overflow.
template <typename T> T plus(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
  else
    return a + b;
}

template <typename T>
std::vector<char> reduced(llvm::ArrayRef<std::vector<char>> inputs, bool max) {
  std::vector<char> out = inputs[0];
  T *sum = reinterpret_cast<T *>(out.data());
  size_t count = out.size() / sizeof(T);
  for (const std::vector<char> &input : inputs.drop_front()) {
    const T *values = reinterpret_cast<const T *>(input.data());
    for (size_t i = 0; i < count; ++i)
      sum[i] = max ? std::max(sum[i], values[i]) : plus(sum[i], values[i]);
  }
  return out;
}

/// memcpy, for any count: an empty tensor's data() may be null.
void copy(char *to, const char *from, int64_t bytes) {
  if (bytes > 0)
    std::memcpy(to, from, bytes);
}

llvm::Error unevenSplit(const char *what, int64_t dim, int64_t length,
                        int64_t ranks) {
  return protocolError(
      llvm::formatv("{0}: dim {1} of size {2} does not split over {3} ranks",
                    what, dim, length, ranks));
}

} // namespace

llvm::Expected<std::vector<std::vector<char>>>
sockets::results(const Collective &c, llvm::ArrayRef<std::vector<char>> in) {
  int64_t n = in.size(), bytes = c.inputBytes();
  if (bytes < 0 || n == 0 || (c.op == Op::AllGather && bytes > INT64_MAX / n))
    return protocolError("a collective of no size its inputs can have");
  for (const std::vector<char> &input : in)
    if (int64_t(input.size()) != bytes)
      return protocolError(llvm::formatv(
          "a rank sent {0} bytes to a collective of {1}", input.size(), bytes));
  bool moves = c.op == Op::AllGather || c.op == Op::ReduceScatter ||
               c.op == Op::AllToAll;
  if (moves && (c.dim < 0 || c.dim >= c.dims || c.concatDim < 0 ||
                c.concatDim >= c.dims))
    return protocolError("a collective along a dim its input lacks");
  using Bytes = std::vector<char>;
  // Nothing to move (a dim of size 0): no loop over, nor product of, the
  // other dims, which may be as large as a peer says. A split must still be
  // even.
  if (bytes == 0) {
    if (c.op == Op::ReduceScatter || c.op == Op::AllToAll)
      if (int64_t length = c.shape[c.dim]; length % n)
        return unevenSplit(c.op == Op::ReduceScatter ? "reduce_scatter"
                                                     : "all_to_all",
                           c.dim, length, n);
    return std::vector<Bytes>(n);
  }
  switch (c.op) {
  case Op::AllReduceF32:
    return std::vector<Bytes>(n, reduced<float>(in, false));
  case Op::AllReduceI64:
    return std::vector<Bytes>(n, reduced<int64_t>(in, false));
  case Op::AllReduceF64:
  case Op::MaxF64:
    return std::vector<Bytes>(n, reduced<double>(in, c.op == Op::MaxF64));
  case Op::Broadcast:
    if (c.rank < 0 || c.rank >= n)
      return protocolError("a broadcast from a rank outside its group");
    return std::vector<Bytes>(n, in[c.rank]);
  case Op::AllGather: {
    // out is [outer][rank][length * inner].
    Split split(c.inShape(), c.dim);
    int64_t row = split.length * split.inner * 4;
    Bytes out(bytes * n);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < split.outer; ++o)
        copy(out.data() + (o * n + r) * row, in[r].data() + o * row, row);
    return std::vector<Bytes>(n, out);
  }
  case Op::ReduceScatter: {
    Split split(c.inShape(), c.dim);
    if (split.length % n)
      return unevenSplit("reduce_scatter", c.dim, split.length, n);
    Bytes sum = reduced<float>(in, false);
    int64_t row = split.length / n * split.inner * 4;
    std::vector<Bytes> out(n, Bytes(bytes / n));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < split.outer; ++o)
        copy(out[r].data() + o * row, sum.data() + (o * n + r) * row, row);
    return out;
  }
  case Op::AllToAll: {
    // Rank r's input, split along dim into n blocks: block j goes to rank
    // j, which concatenates its n blocks along concatDim in rank order.
    Split source(c.inShape(), c.dim);
    if (source.length % n)
      return unevenSplit("all_to_all", c.dim, source.length, n);
    std::vector<int64_t> blockShape(c.inShape().begin(), c.inShape().end());
    blockShape[c.dim] /= n;
    int64_t sourceRow = source.length / n * source.inner * 4;
    Split target(blockShape, c.concatDim);
    int64_t targetRow = target.length * target.inner * 4;
    std::vector<Bytes> out(n, Bytes(bytes));
    Bytes block(bytes / n);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t o = 0; o < source.outer; ++o)
          copy(block.data() + o * sourceRow,
               in[r].data() + (o * n + j) * sourceRow, sourceRow);
        for (int64_t o = 0; o < target.outer; ++o)
          copy(out[j].data() + (o * n + r) * targetRow,
               block.data() + o * targetRow, targetRow);
      }
    return out;
  }
  }
  return protocolError("a collective of an unknown kind");
}
