//===- SocketHub.cpp - a launch without MPI: rank 0's hub -----------------===//

#include "runtime/comm/SocketHub.h"
#include "runtime/comm/SocketProtocol.h"

#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace twill;
using namespace twill::sockets;

namespace {

struct Peer {
  int fd = -1;
  int rank = -1; // until its hello
  std::string hostname;
  std::vector<char> in, out;
  bool gone = false;
};

/// One collective's inputs as they arrive.
struct Gathering {
  Collective collective;
  std::vector<std::vector<char>> inputs;
  std::vector<bool> arrived;
  int count = 0;
};

using Key = std::pair<std::vector<int32_t>, uint64_t>;

/// The hub's state between polls.
class Serving {
public:
  explicit Serving(int ranks) : byRank(ranks, nullptr) {}

  std::vector<std::unique_ptr<Peer>> peers;
  std::vector<Peer *> byRank;
  std::map<Key, Gathering> gatherings;
  int welcomed = 0;

  /// Says whose hub this is to a connection, before anything else.
  void greet(Peer &peer, const std::string &token) {
    send(peer, Kind::Greeting, 0, {}, {token.data(), token.size()});
  }
  void handle(Peer &peer, Message message);
  /// Ends `group`'s collectives: each rank of it still there is told why.
  void abort(llvm::ArrayRef<int32_t> group, const std::string &why);
  void abortAll(const std::string &why);
  /// A rank has gone: the collectives waiting for it end.
  void left(Peer &peer);

private:
  void send(Peer &peer, Kind kind, uint64_t sequence,
            llvm::ArrayRef<int32_t> group, llvm::ArrayRef<char> bytes) {
    if (peer.gone)
      return;
    Frame frame;
    frame.kind = kind;
    frame.rank = peer.rank;
    frame.sequence = sequence;
    encode(frame, group, bytes, peer.out);
  }
  void hello(Peer &peer, const Message &message);
  void contribute(Peer &peer, Message message);
};

void Serving::abort(llvm::ArrayRef<int32_t> group, const std::string &why) {
  for (int32_t rank : group)
    if (rank >= 0 && rank < int(byRank.size()) && byRank[rank])
      send(*byRank[rank], Kind::Abort, 0, {}, {why.data(), why.size()});
}

void Serving::abortAll(const std::string &why) {
  for (auto &peer : peers)
    send(*peer, Kind::Abort, 0, {}, {why.data(), why.size()});
}

void Serving::left(Peer &peer) {
  peer.gone = true;
  if (peer.rank < 0)
    return;
  for (auto it = gatherings.begin(); it != gatherings.end();) {
    const std::vector<int32_t> &group = it->first.first;
    auto place = std::find(group.begin(), group.end(), peer.rank);
    if (place != group.end() && !it->second.arrived[place - group.begin()]) {
      abort(group, llvm::formatv("rank {0} ended before {1}", peer.rank,
                                 it->second.collective.describe(group)));
      it = gatherings.erase(it);
    } else {
      ++it;
    }
  }
}

void Serving::hello(Peer &peer, const Message &message) {
  int rank = message.frame.rank, ranks = int(byRank.size());
  std::string why;
  if (message.frame.sequence != uint64_t(ranks))
    why = llvm::formatv("rank {0} has WORLD_SIZE={1}, rank 0 {2}", rank,
                        message.frame.sequence, ranks);
  else if (rank < 0 || rank >= ranks || peer.rank >= 0)
    why = llvm::formatv("a rank said it is rank {0} of {1}", rank, ranks);
  else if (byRank[rank])
    why = llvm::formatv("two ranks say they are rank {0} (RANK)", rank);
  if (!why.empty()) {
    abortAll(why);
    send(peer, Kind::Abort, 0, {}, {why.data(), why.size()});
    return;
  }
  peer.rank = rank;
  peer.hostname.assign(message.bytes.begin(), message.bytes.end());
  byRank[rank] = &peer;
  if (++welcomed < ranks)
    return;
  std::string hostnames;
  for (Peer *each : byRank)
    hostnames += each->hostname + "\n";
  for (Peer *each : byRank)
    send(*each, Kind::Welcome, 0, {}, {hostnames.data(), hostnames.size()});
}

void Serving::contribute(Peer &peer, Message message) {
  std::vector<int32_t> &group = message.group;
  auto place = std::find(group.begin(), group.end(), peer.rank);
  const Collective &collective = message.frame.collective;
  if (place == group.end()) {
    abort({peer.rank}, "a rank sent to a collective it is not part of");
    return;
  }
  for (int32_t rank : group)
    if (rank < 0 || rank >= int(byRank.size()) || !byRank[rank] ||
        byRank[rank]->gone) {
      abort(group, llvm::formatv("rank {0} is gone: {1} cannot run", rank,
                                 collective.describe(group)));
      return;
    }
  Key key{group, message.frame.sequence};
  auto [it, made] = gatherings.try_emplace(key);
  Gathering &gathering = it->second;
  if (made) {
    gathering.collective = collective;
    gathering.inputs.resize(group.size());
    gathering.arrived.resize(group.size());
  }
  size_t index = place - group.begin();
  if (!(gathering.collective == collective) || gathering.arrived[index]) {
    abort(group, llvm::formatv("the ranks of {0} disagree about their "
                               "collective number {1} (one program?)",
                               gathering.collective.describe(group),
                               message.frame.sequence));
    gatherings.erase(it);
    return;
  }
  gathering.inputs[index] = std::move(message.bytes);
  gathering.arrived[index] = true;
  if (++gathering.count < int(group.size()))
    return;
  llvm::Expected<std::vector<std::vector<char>>> out =
      results(collective, gathering.inputs);
  if (!out) {
    abort(group,
          collective.describe(group) + ": " + llvm::toString(out.takeError()));
  } else {
    for (size_t i = 0; i < group.size(); ++i)
      send(*byRank[group[i]], Kind::Result, key.second, group, (*out)[i]);
  }
  gatherings.erase(it);
}

void Serving::handle(Peer &peer, Message message) {
  switch (message.frame.kind) {
  case Kind::Hello:
    return hello(peer, message);
  case Kind::Contribute:
    if (welcomed == int(byRank.size()))
      return contribute(peer, std::move(message));
    break;
  case Kind::Abort:
    return abortAll(
        llvm::formatv("rank {0} ended the job: {1}", peer.rank,
                      std::string(message.bytes.begin(), message.bytes.end())));
  default:
    break;
  }
  abortAll(llvm::formatv("rank {0} sent a message out of turn", peer.rank));
}

llvm::Error systemError(const llvm::Twine &call) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 call + ": " + std::strerror(errno));
}

/// A non-blocking socket listening on `port` of every interface (IPv4 too,
/// through mapped addresses, where there is IPv6), or -1 with errno set.
int listenOn(int port, int backlog) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  bool ipv6 = fd >= 0;
  if (!ipv6)
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  int yes = 1, no = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  int bound;
  if (ipv6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(port);
    bound = bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address));
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(port);
    bound = bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address));
  }
  if (bound != 0 || listen(fd, backlog) != 0) {
    int why = errno;
    close(fd);
    errno = why;
    return -1;
  }
  return fd;
}

} // namespace

llvm::Expected<std::unique_ptr<Hub>> Hub::start(llvm::ArrayRef<int> ports,
                                                int ranks, std::string token) {
  std::unique_ptr<Hub> hub(new Hub());
  hub->ranks = ranks;
  hub->token = std::move(token);
  for (int port : ports) {
    hub->listener = listenOn(port, ranks);
    if (hub->listener >= 0) {
      hub->listening = port;
      hub->thread = std::thread([raw = hub.get()] { raw->serve(); });
      return hub;
    }
  }
  return systemError(
      llvm::formatv("rank 0 cannot listen on {0} for the other ranks (in use? "
                    "TWILL_HUB_PORT names another)",
                    describePorts(ports)));
}

Hub::~Hub() {
  stopping = true;
  if (thread.joinable())
    thread.join();
  if (listener >= 0)
    close(listener);
}

void Hub::serve() {
  Serving serving(ranks);
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> stopAt;
  char chunk[1 << 16];
  for (;;) {
    bool connected = false;
    for (auto &peer : serving.peers)
      connected |= !peer->gone;
    if (stopping && !stopAt)
      stopAt = Clock::now() + std::chrono::seconds(30);
    if ((stopping && !connected) || (stopAt && Clock::now() > *stopAt))
      break;
    std::vector<pollfd> polls{{listener, POLLIN, 0}};
    for (auto &peer : serving.peers)
      polls.push_back({peer->gone ? -1 : peer->fd,
                       short(POLLIN | (peer->out.empty() ? 0 : POLLOUT)), 0});
    if (poll(polls.data(), polls.size(), 100) < 0 && errno != EINTR)
      break;
    if (polls[0].revents & POLLIN) {
      int fd =
          accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        serving.peers.push_back(std::make_unique<Peer>());
        serving.peers.back()->fd = fd;
        serving.greet(*serving.peers.back(), token);
      }
    }
    for (size_t i = 1; i < polls.size(); ++i) {
      Peer &peer = *serving.peers[i - 1];
      if (peer.gone || !polls[i].revents)
        continue;
      if (polls[i].revents & POLLOUT) {
        ssize_t sent =
            ::send(peer.fd, peer.out.data(), peer.out.size(), MSG_NOSIGNAL);
        if (sent > 0)
          peer.out.erase(peer.out.begin(), peer.out.begin() + sent);
        else if (sent < 0 && errno != EAGAIN && errno != EINTR)
          serving.left(peer);
      }
      if (peer.gone || !(polls[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t got = recv(peer.fd, chunk, sizeof(chunk), 0);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        serving.left(peer);
        continue;
      }
      if (got < 0)
        continue;
      peer.in.insert(peer.in.end(), chunk, chunk + got);
      for (;;) {
        llvm::Expected<std::optional<Message>> message = decode(peer.in);
        if (!message) {
          serving.abortAll(llvm::toString(message.takeError()));
          serving.left(peer);
          break;
        }
        if (!*message)
          break;
        serving.handle(peer, std::move(**message));
      }
    }
  }
  for (auto &peer : serving.peers)
    close(peer->fd);
}
