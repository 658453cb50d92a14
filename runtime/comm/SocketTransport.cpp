//===- SocketTransport.cpp - the collectives over TCP, without MPI --------===//
//
// A rank of a launch with torchrun's variables (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT: torchrun --no-python, a Kubernetes
// PyTorchJob, or any launcher that sets them): rank 0 starts the hub
// (SocketHub.h) on MASTER_PORT (TWILL_HUB_PORT where set; the first free of
// the ports after it under torchrun, whose agent holds MASTER_PORT), and
// every rank finds it at MASTER_ADDR by its greeting, proves it knows the
// job's secret (JobSecret.h, SocketAuth.h) and has the hub prove it, and
// learns every rank's hostname (its place on its node). The hub listens on
// MASTER_ADDR's address only (TWILL_HUB_ADDR: another address, or an
// interface's name). A collective sends this rank's
// input at its start; its wait reads the hub's messages until its result has
// come. An axis of one rank computes its collectives here, without the hub.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/JobSecret.h"
#include "runtime/comm/SocketAuth.h"
#include "runtime/comm/SocketHub.h"
#include "runtime/comm/SocketProtocol.h"
#include "runtime/comm/Transports.h"

#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace twill;
using namespace twill::sockets;

namespace {

using Clock = std::chrono::steady_clock;
using Key = std::pair<std::vector<int32_t>, uint64_t>;

/// How long a rank tries to reach the hub: rank 0 may start later.
constexpr int kRendezvousSeconds = 300;

llvm::Error socketError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

/// This rank's connection to the hub, and the messages that came before
/// the collective waiting for them.
class Connection {
public:
  int fd = -1;

  llvm::Error send(const Frame &frame, llvm::ArrayRef<int32_t> group,
                   llvm::ArrayRef<char> bytes) {
    std::vector<char> out;
    encode(frame, group, bytes, out);
    for (size_t at = 0; at < out.size();) {
      ssize_t sent = ::send(fd, out.data() + at, out.size() - at, MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR)
        continue;
      if (sent <= 0)
        return gone();
      at += sent;
    }
    return llvm::Error::success();
  }

  /// Reads what the hub has sent, waiting at most `milliseconds` for the
  /// first bytes; fails once the job has ended.
  llvm::Error read(int milliseconds) {
    if (!ended.empty())
      return socketError(ended);
    pollfd wanted{fd, POLLIN, 0};
    int ready = poll(&wanted, 1, milliseconds);
    if (ready <= 0)
      return llvm::Error::success();
    char chunk[1 << 16];
    ssize_t got = recv(fd, chunk, sizeof(chunk), 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
      return llvm::Error::success();
    if (got <= 0)
      return gone();
    in.insert(in.end(), chunk, chunk + got);
    for (;;) {
      llvm::Expected<std::optional<Message>> message = decode(in);
      if (!message)
        return message.takeError();
      if (!*message)
        return llvm::Error::success();
      Message &m = **message;
      if (m.frame.kind == Kind::Abort) {
        ended = std::string(m.bytes.begin(), m.bytes.end());
        return socketError(ended);
      }
      if (m.frame.kind == Kind::Greeting)
        greeting = std::string(m.bytes.begin(), m.bytes.end());
      else if (m.frame.kind == Kind::Answer)
        answer = std::string(m.bytes.begin(), m.bytes.end());
      else if (m.frame.kind == Kind::Welcome)
        welcome = std::string(m.bytes.begin(), m.bytes.end());
      else
        arrived[{m.group, m.frame.sequence}] = std::move(m.bytes);
    }
  }

  /// The result of collective `key`, once it has come.
  std::optional<std::vector<char>> take(const Key &key) {
    auto it = arrived.find(key);
    if (it == arrived.end())
      return std::nullopt;
    std::vector<char> bytes = std::move(it->second);
    arrived.erase(it);
    return bytes;
  }

  std::optional<std::string> greeting, answer, welcome;

private:
  llvm::Error gone() {
    ended = "the connection to rank 0's hub (MASTER_ADDR) ended: rank 0 "
            "has stopped";
    return socketError(ended);
  }

  std::vector<char> in;
  std::map<Key, std::vector<char>> arrived;
  std::string ended;
};

/// The launch as this process sees it.
struct Launch {
  int rank = 0, size = 1, localRanks = 1, localRank = 0;
  std::string error; // why it could not join the others, if it could not
  std::string token; // the job's name (join())
  Connection connection;
  std::unique_ptr<Hub> hub;
};
Launch launch;

/// A variable's integer value in [low, high], or why not.
llvm::Expected<int> integerVariable(const char *name, int low, int high) {
  const char *text = std::getenv(name);
  int value = 0;
  if (!text || llvm::StringRef(text).getAsInteger(10, value) || value < low ||
      value > high)
    return socketError(llvm::formatv("{0}={1}: a whole number from {2} to "
                                     "{3}",
                                     name, text ? text : "", low, high));
  return value;
}

/// A connection to `host`:`port`, or -1 with why in `last`.
int connectTo(const char *host, int port, std::string &last) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  int resolved =
      getaddrinfo(host, std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0) {
    last = gai_strerror(resolved);
    return -1;
  }
  int connected = -1;
  for (addrinfo *at = found; at && connected < 0; at = at->ai_next) {
    int fd =
        socket(at->ai_family, at->ai_socktype | SOCK_CLOEXEC, at->ai_protocol);
    if (fd < 0)
      continue;
    if (connect(fd, at->ai_addr, at->ai_addrlen) == 0) {
      connected = fd;
    } else {
      last = llvm::formatv("port {0}: {1}", port, std::strerror(errno));
      close(fd);
    }
  }
  freeaddrinfo(found);
  return connected;
}

/// How long a listener has to greet a rank, and to answer its hello,
/// before it looks on.
constexpr int kGreetingSeconds = 5;

/// What this rank says and proves to its hub.
struct Joining {
  const char *host; // MASTER_ADDR
  std::string token;
  std::string secret; // empty: the machine's, read at each try (JobSecret.h)
  int rank, ranks;
  std::string hostname; // this machine's, which the hub tells every rank
};

/// Reads `connection` until `arrived` holds something, at most
/// kGreetingSeconds; the error of a connection that ended first.
llvm::Error awaitMessage(Connection &connection,
                         const std::optional<std::string> &arrived) {
  auto until = Clock::now() + std::chrono::seconds(kGreetingSeconds);
  while (!arrived && Clock::now() < until)
    if (llvm::Error error = connection.read(100))
      return error;
  return llvm::Error::success();
}

/// Over a connection greeted by this job's hub: the hello, proving the
/// secret, and the hub's answer, proving it. None where the hub is not
/// this job's or refused the proof (to try again: the machine's secret may
/// be a crashed run's, or not yet written); an error where the job's own
/// hub refused this rank.
llvm::Expected<bool> introduce(Connection &candidate, const Joining &joining,
                               llvm::StringRef hubNonce, std::string &last) {
  std::string secret = joining.secret;
  if (secret.empty()) {
    llvm::Expected<std::string> machines =
        jobSecret(joining.rank, joining.token, joining.host);
    if (!machines) {
      last = llvm::toString(machines.takeError());
      return false;
    }
    secret = *machines;
  }
  llvm::Expected<std::string> nonce = randomHex(16);
  if (!nonce)
    return nonce.takeError();
  Hello hello{joining.rank, joining.ranks, *nonce,
              rankProof(secret, hubNonce, *nonce, joining.rank, joining.ranks),
              joining.hostname};
  Message message = helloMessage(hello);
  llvm::Error error = candidate.send(message.frame, {}, message.bytes);
  if (!error)
    error = awaitMessage(candidate, candidate.answer);
  if (error || !candidate.answer) {
    last = error ? llvm::toString(std::move(error))
                 : "the hub did not answer this rank's hello";
    return false;
  }
  llvm::Expected<std::string> verdict =
      readAnswer(*candidate.answer, secret, hubNonce, *nonce, joining.rank);
  if (!verdict) {
    last = llvm::toString(verdict.takeError());
    return false;
  }
  if (!verdict->empty())
    return socketError("rank 0's hub refused this rank: " + *verdict);
  return true;
}

/// The connection to this job's hub at MASTER_ADDR (its greeting says the
/// job's token, its answer proves the job's secret), on the first of
/// `ports` that has it, trying again until rank 0 listens. What listens on
/// the others (another job's hub, or no hub) is passed by.
llvm::Expected<Connection> connectToHub(llvm::ArrayRef<int> ports,
                                        const Joining &joining) {
  auto until = Clock::now() + std::chrono::seconds(kRendezvousSeconds);
  std::string last;
  while (Clock::now() < until) {
    for (int port : ports) {
      Connection candidate;
      candidate.fd = connectTo(joining.host, port, last);
      if (candidate.fd < 0)
        continue;
      llvm::Error error = awaitMessage(candidate, candidate.greeting);
      auto [token, nonce] = splitGreeting(candidate.greeting.value_or(""));
      if (!error && candidate.greeting && token == joining.token) {
        llvm::Expected<bool> joined =
            introduce(candidate, joining, nonce, last);
        if (joined && *joined)
          return candidate;
        close(candidate.fd);
        if (!joined)
          return joined.takeError();
        continue;
      }
      last = llvm::formatv("port {0}: {1}", port,
                           candidate.greeting ? "the hub of another job"
                           : error            ? llvm::toString(std::move(error))
                                              : "no hub greets there");
      llvm::consumeError(std::move(error));
      close(candidate.fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return socketError(llvm::formatv("cannot reach rank 0's hub at "
                                   "MASTER_ADDR={0}, {1}, in {2} s: {3}",
                                   joining.host, describePorts(ports),
                                   kRendezvousSeconds, last));
}

/// How many ports after MASTER_PORT the hub may take under torchrun.
constexpr int kHubPorts = 8;

/// The ports rank 0's hub may listen on, in the order it tries them:
/// TWILL_HUB_PORT where set; under torchrun, whose agent's store holds
/// MASTER_PORT, the kHubPorts after it (another job, or any socket, may
/// hold one); else MASTER_PORT, as a launcher that sets the variables
/// itself means.
llvm::Expected<std::vector<int>> hubPorts() {
  if (std::getenv("TWILL_HUB_PORT")) {
    llvm::Expected<int> port = integerVariable("TWILL_HUB_PORT", 1, 65535);
    if (!port)
      return port.takeError();
    return std::vector<int>{*port};
  }
  llvm::Expected<int> port = integerVariable("MASTER_PORT", 1, 65535);
  if (!port)
    return port.takeError();
  const char *agentStore = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (!agentStore || !llvm::StringRef(agentStore).equals_insensitive("true"))
    return std::vector<int>{*port};
  std::vector<int> ports;
  for (int next = 1; next <= kHubPorts; ++next)
    ports.push_back((*port + next - 1) % 65535 + 1);
  return ports;
}

/// Joins the launch: rank 0's hub first, then the hello and the welcome.
llvm::Error join() {
  llvm::Expected<int> size = integerVariable("WORLD_SIZE", 1, 1 << 20);
  if (!size)
    return size.takeError();
  llvm::Expected<int> rank = integerVariable("RANK", 0, *size - 1);
  if (!rank)
    return rank.takeError();
  llvm::Expected<std::vector<int>> ports = hubPorts();
  if (!ports)
    return ports.takeError();
  // The job's name, the same on each of its ranks: MASTER_PORT is its own
  // on MASTER_ADDR while it runs, and torchrun names each run.
  const char *runId = std::getenv("TORCHELASTIC_RUN_ID");
  std::string token =
      llvm::formatv("MASTER_PORT={0} TORCHELASTIC_RUN_ID={1}",
                    std::getenv("MASTER_PORT"), runId ? runId : "");
  launch.rank = *rank;
  launch.size = *size;
  launch.token = token;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  Joining joining{std::getenv("MASTER_ADDR"), token, "", *rank, *size, host};
  // Rank 0 makes the machine's secret; a rank given one, or on another
  // machine, learns now whether it has one. Another rank of rank 0's
  // machine reads the machine's at each try.
  if (launch.rank == 0 || !secretIsMachines(joining.host)) {
    llvm::Expected<std::string> secret = jobSecret(*rank, token, joining.host);
    if (!secret)
      return secret.takeError();
    joining.secret = *secret;
  }
  if (launch.rank == 0) {
    const char *address = std::getenv("TWILL_HUB_ADDR");
    llvm::Expected<std::unique_ptr<Hub>> hub = Hub::start(
        address ? address : joining.host, *ports, *size, token, joining.secret);
    if (!hub)
      return hub.takeError();
    launch.hub = std::move(*hub);
    *ports = {launch.hub->port()};
  }
  llvm::Expected<Connection> connected = connectToHub(*ports, joining);
  if (!connected)
    return connected.takeError();
  launch.connection = std::move(*connected);
  Connection &connection = launch.connection;
  auto until = Clock::now() + std::chrono::seconds(kRendezvousSeconds);
  while (!connection.welcome) {
    if (Clock::now() > until)
      return socketError(llvm::formatv(
          "not every one of the {0} ranks (WORLD_SIZE) reached rank 0 in {1} "
          "s",
          launch.size, kRendezvousSeconds));
    if (llvm::Error error = connection.read(100))
      return error;
  }
  // This rank's place among those of its machine, by world rank.
  llvm::SmallVector<llvm::StringRef> hosts;
  llvm::StringRef(*connection.welcome).split(hosts, '\n', -1, false);
  launch.localRanks = launch.localRank = 0;
  for (int other = 0; other < int(hosts.size()); ++other)
    if (hosts[other] == host) {
      launch.localRanks += 1;
      launch.localRank += other < launch.rank;
    }
  return llvm::Error::success();
}

class SocketCommunicator;

/// A collective sent to the hub, waiting for its result.
class SocketPending final : public Communicator::Pending {
public:
  SocketPending(const SocketCommunicator &owner, Key key, void *out,
                int64_t bytes, std::string what)
      : owner(owner), key(std::move(key)), out(out), bytes(bytes),
        what(std::move(what)) {}
  llvm::Expected<bool> progress() override;

protected:
  llvm::Error complete() override;

private:
  llvm::Error arrived(std::vector<char> result);
  const SocketCommunicator &owner;
  std::optional<std::vector<char>> done; // taken by progress()
  Key key;
  void *out;
  int64_t bytes;
  std::string what;
};

class SocketCommunicator final : public Communicator {
public:
  static llvm::Expected<std::unique_ptr<Communicator>>
  create(llvm::ArrayRef<std::string> axisNames, llvm::ArrayRef<int64_t> shape);

  Started startAllGather(llvm::StringRef axis, const float *in, float *out,
                         llvm::ArrayRef<int64_t> inShape,
                         int64_t dim) override {
    return start(axis, moving(Op::AllGather, inShape, dim), in, out,
                 [](int64_t bytes, int ranks) { return bytes * ranks; });
  }
  Started startReduceScatter(llvm::StringRef axis, const float *in, float *out,
                             llvm::ArrayRef<int64_t> inShape,
                             int64_t dim) override {
    return start(axis, moving(Op::ReduceScatter, inShape, dim), in, out,
                 [](int64_t bytes, int ranks) { return bytes / ranks; });
  }
  Started startAllReduce(llvm::StringRef axis, const float *in, float *out,
                         int64_t count) override {
    return start(axis, flat(Op::AllReduceF32, count), in, out);
  }
  Started startAllReduce(llvm::StringRef axis, const int64_t *in, int64_t *out,
                         int64_t count) override {
    return start(axis, flat(Op::AllReduceI64, count), in, out);
  }
  Started startAllToAll(llvm::StringRef axis, const float *in, float *out,
                        llvm::ArrayRef<int64_t> inShape, int64_t splitDim,
                        int64_t concatDim) override {
    Collective collective = moving(Op::AllToAll, inShape, splitDim);
    collective.concatDim = concatDim;
    return start(axis, collective, in, out);
  }
  llvm::Error allReduce(llvm::StringRef axis, double *values, int64_t count,
                        bool max) override {
    return finish(start(axis, flat(max ? Op::MaxF64 : Op::AllReduceF64, count),
                        values, values));
  }
  llvm::Error sumOverWorld(float *values, int64_t count) override {
    return finish(
        start(world(), flat(Op::AllReduceF32, count), values, values));
  }
  llvm::Error barrier() override {
    return finish(start(world(), flat(Op::AllReduceF32, 0), nullptr, nullptr));
  }
  llvm::Error broadcast(void *data, int64_t bytes, int root) const override {
    Collective collective = flat(Op::Broadcast, bytes);
    collective.rank = root;
    return finish(start(world(), collective, data, data));
  }

private:
  friend class SocketPending;

  static Collective flat(Op op, int64_t count) {
    Collective collective;
    collective.op = op;
    collective.dims = 1;
    collective.shape[0] = count;
    return collective;
  }
  static Collective moving(Op op, llvm::ArrayRef<int64_t> shape, int64_t dim) {
    Collective collective;
    collective.op = op;
    collective.dims = int32_t(std::min<size_t>(shape.size(), kMaxDims + 1));
    for (size_t i = 0; i < shape.size() && i < kMaxDims; ++i)
      collective.shape[i] = shape[i];
    collective.dim = dim;
    return collective;
  }
  static llvm::Error finish(Started started) {
    if (!started)
      return started.takeError();
    return (*started)->wait();
  }

  /// The world ranks of `axis`, in its order: those that agree with this
  /// rank on every other axis.
  llvm::Expected<std::vector<int32_t>> groupOf(llvm::StringRef axis) const;
  std::vector<int32_t> world() const {
    std::vector<int32_t> ranks(size);
    for (int i = 0; i < size; ++i)
      ranks[i] = i;
    return ranks;
  }

  using Sized = int64_t (*)(int64_t inputBytes, int ranks);
  Started start(llvm::StringRef axis, const Collective &collective,
                const void *in, void *out, Sized outBytes = nullptr) const {
    llvm::Expected<std::vector<int32_t>> group = groupOf(axis);
    if (!group)
      return group.takeError();
    return start(std::move(*group), collective, in, out, outBytes);
  }
  Started start(std::vector<int32_t> group, const Collective &collective,
                const void *in, void *out, Sized outBytes = nullptr) const;

  mutable std::map<std::vector<int32_t>, uint64_t> sequences;
};

llvm::Expected<std::unique_ptr<Communicator>>
SocketCommunicator::create(llvm::ArrayRef<std::string> axisNames,
                           llvm::ArrayRef<int64_t> shape) {
  if (!launch.error.empty())
    return socketError(launch.error);
  auto communicator = std::make_unique<SocketCommunicator>();
  communicator->worldRank = launch.rank;
  communicator->size = launch.size;
  if (llvm::Error error = communicator->layOut(axisNames, shape))
    return std::move(error);
  return communicator;
}

llvm::Expected<std::vector<int32_t>>
SocketCommunicator::groupOf(llvm::StringRef name) const {
  llvm::Expected<const Axis *> axis = findAxis(name);
  if (!axis)
    return axis.takeError();
  // Row-major: the first axis major (Communicator::layOut).
  int stride = 1;
  for (size_t i = axes.size(); i-- > 0 && &axes[i] != *axis;)
    stride *= axes[i].size;
  int first = worldRank - (*axis)->coordinate * stride;
  std::vector<int32_t> group((*axis)->size);
  for (int i = 0; i < (*axis)->size; ++i)
    group[i] = first + i * stride;
  return group;
}

Communicator::Started SocketCommunicator::start(std::vector<int32_t> group,
                                                const Collective &collective,
                                                const void *in, void *out,
                                                Sized outBytes) const {
  if (collective.dims > kMaxDims)
    return socketError(llvm::formatv("a collective of {0} dims (at most {1})",
                                     collective.dims, kMaxDims));
  int64_t bytes = collective.inputBytes();
  int64_t resultBytes = outBytes ? outBytes(bytes, group.size()) : bytes;
  llvm::ArrayRef<char> input(static_cast<const char *>(in), bytes);
  std::string what = collective.describe(group);
  if (group.size() == 1) { // this rank alone: no one to wait for
    llvm::Expected<std::vector<std::vector<char>>> result =
        results(collective, {std::vector<char>(input.begin(), input.end())});
    if (!result)
      return socketError(what + ": " + llvm::toString(result.takeError()));
    if (resultBytes)
      std::memmove(out, (*result)[0].data(), resultBytes);
    return completed();
  }
  Frame frame;
  frame.kind = Kind::Contribute;
  frame.rank = worldRank;
  frame.sequence = sequences[group]++;
  frame.collective = collective;
  // The input goes now, so `in` may be `out`.
  if (llvm::Error error = launch.connection.send(frame, group, input))
    return std::move(error);
  return std::make_unique<SocketPending>(
      *this, Key{std::move(group), frame.sequence}, out, resultBytes, what);
}

llvm::Error SocketPending::arrived(std::vector<char> result) {
  if (int64_t(result.size()) != bytes)
    return socketError(llvm::formatv("{0}: {1} bytes came back, not {2}", what,
                                     result.size(), bytes));
  if (bytes)
    std::memcpy(out, result.data(), bytes);
  return llvm::Error::success();
}

llvm::Expected<bool> SocketPending::progress() {
  if (llvm::Error error = launch.connection.read(0))
    return std::move(error);
  std::optional<std::vector<char>> result = launch.connection.take(key);
  if (!result)
    return false;
  done = std::move(*result); // complete() finds it here
  return true;
}

llvm::Error SocketPending::complete() {
  auto began = Clock::now();
  while (!done) {
    if (std::optional<std::vector<char>> result = launch.connection.take(key)) {
      done = std::move(*result);
      break;
    }
    if (std::chrono::duration<double>(Clock::now() - began).count() >
        owner.timeout())
      return socketError(llvm::formatv(
          "{0} waited {1} s (parallel.collective_timeout_s) and not every "
          "rank of it arrived: stopped, stuck, or elsewhere in the program",
          what, owner.timeout()));
    if (llvm::Error error = launch.connection.read(100))
      return socketError(what + ": " + llvm::toString(std::move(error)));
  }
  return arrived(std::move(*done));
}

} // namespace

bool twill::launchedWithSockets() {
  for (const char *mpi : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(mpi))
      return false;
  for (const char *torchrun :
       {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    if (!std::getenv(torchrun))
      return false;
  return true;
}

const Transport twill::kSocketTransport = {
    [](int &, char **&) {
      if (llvm::Error error = join())
        launch.error = llvm::toString(std::move(error));
    },
    [] {
      if (launch.connection.fd >= 0)
        close(launch.connection.fd);
      launch.connection.fd = -1;
      launch.hub.reset(); // rank 0: once every rank has gone
      if (launch.rank == 0 && !launch.token.empty())
        forgetJobSecret(launch.token);
    },
    [] {
      // The hub tells every rank why; a moment for it to, before this
      // process (rank 0: and its hub) ends.
      Frame abort;
      abort.kind = Kind::Abort;
      abort.rank = launch.rank;
      const char *why = "it failed (its error is in its own output)";
      if (launch.connection.fd < 0)
        return;
      llvm::Error sent =
          launch.connection.send(abort, {}, {why, std::strlen(why)});
      if (!sent)
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      llvm::consumeError(std::move(sent));
    },
    [] { return launch.size; },
    [] { return launch.localRanks; },
    [] { return launch.localRank; },
    SocketCommunicator::create};
