//===- SocketProtocol.h - a launch without MPI: its messages ----*- C++ -*-===//
//
// A launch without MPI (torchrun's environment: RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT) joins its ranks over TCP: rank 0 runs a hub
// (SocketHub.cpp) that every rank, rank 0 too, connects to
// (SocketTransport.cpp). A collective is each rank of its group sending its
// input to the hub, which, once it holds the whole group's, computes each
// rank's result and sends it back (results(): sums in the group's order). The
// hub is a star: right for what a GPU launch sends through it (the NCCL id, the
// loss's statistics, a barrier), and enough for a cpu run; MPI stays the
// transport of large cpu meshes.
//
// A hub greets each connection with its job's token (SocketHub.h), so that
// a rank looking for its hub among several ports passes by another job's,
// and lets in only ranks that prove they know the job's secret
// (SocketAuth.h).
// Every message is a Frame, then its group's world ranks, then its bytes,
// in the ranks' own byte order (every platform Twill builds on is
// little-endian).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_COMM_SOCKETPROTOCOL_H
#define TWILL_RUNTIME_COMM_SOCKETPROTOCOL_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace twill::sockets {

enum class Kind : uint32_t {
  Hello = 1,  // rank -> hub: its rank; bytes: its hostname
  Welcome,    // hub -> rank: every rank's hostname, '\n'-separated
  Contribute, // rank -> hub: its input to a collective
  Result,     // hub -> rank: its result
  Abort,      // either way: the job ends; bytes: why
  Greeting,   // hub -> rank, first on each connection: its job's token
              // and a nonce (SocketAuth.h)
  Answer,     // hub -> rank: its answer to the hello, proved
};

/// What a collective computes (the Communicator's collectives).
enum class Op : uint32_t {
  AllGather = 1,
  ReduceScatter,
  AllReduceF32,
  AllReduceI64,
  AllReduceF64,
  MaxF64,
  AllToAll,
  Broadcast,
};

constexpr uint32_t kMagic = 0x7431c0de;
constexpr int kMaxDims = 8;

/// A collective's description, the same on every rank of its group (the
/// hub checks it): its op, the input's shape and the dims it moves along.
struct Collective {
  Op op = Op::AllReduceF32;
  int32_t rank = 0; // Broadcast: the root's place in the group
  int32_t dims = 0;
  int64_t shape[kMaxDims] = {};
  int64_t dim = 0, concatDim = 0;

  bool operator==(const Collective &other) const;
  llvm::ArrayRef<int64_t> inShape() const { return {shape, size_t(dims)}; }
  /// The bytes of each rank's input (-1 for no size an input can have).
  int64_t inputBytes() const;
  /// What it is, for messages: "all_gather over ranks 0, 2".
  std::string describe(llvm::ArrayRef<int32_t> group) const;
};

struct Frame {
  uint32_t magic = kMagic;
  Kind kind = Kind::Hello;
  int32_t rank = 0;      // the sender's (hub: the receiver's)
  int32_t groupSize = 0; // world ranks following the frame
  uint64_t sequence = 0; // the collective's number in its group
  uint64_t bytes = 0;    // following the group
  Collective collective;
};

static_assert(sizeof(Frame) == 128, "a Frame's layout is the protocol's");

/// A message as read: its frame, group and bytes.
struct Message {
  Frame frame;
  std::vector<int32_t> group;
  std::vector<char> bytes;
};

/// Appends a message to `out`.
void encode(const Frame &frame, llvm::ArrayRef<int32_t> group,
            llvm::ArrayRef<char> bytes, std::vector<char> &out);

/// The first whole message at the front of `buffer`, removed from it; none
/// while it is incomplete; an error for bytes that are no message.
llvm::Expected<std::optional<Message>> decode(std::vector<char> &buffer);

/// Each rank's result of `collective` over its group's inputs (in group
/// order), or why the inputs do not fit it.
llvm::Expected<std::vector<std::vector<char>>>
results(const Collective &collective, llvm::ArrayRef<std::vector<char>> inputs);

} // namespace twill::sockets

#endif // TWILL_RUNTIME_COMM_SOCKETPROTOCOL_H
