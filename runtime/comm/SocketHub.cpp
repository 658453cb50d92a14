//===- SocketHub.cpp - a launch without MPI: rank 0's hub -----------------===//

#include "runtime/comm/SocketHub.h"
#include "runtime/comm/SocketAuth.h"
#include "runtime/comm/SocketProtocol.h"

#include "llvm/ADT/STLExtras.h"

#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <ifaddrs.h>
#include <map>
#include <netdb.h>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace twill;
using namespace twill::sockets;

namespace {

using Clock = std::chrono::steady_clock;

/// How long a connection has to prove it is one of the job's ranks.
constexpr int kHandshakeSeconds = 10;
/// Connections waiting to prove it at once; more are closed unread.
constexpr size_t kMaxStrangers = 64;

struct Peer {
  int fd = -1;
  int rank = -1; // until its hello is let in
  std::string address, nonce, hostname;
  Clock::time_point connected;
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
  Serving(int ranks, std::string secret)
      : byRank(ranks, nullptr), secret(std::move(secret)) {}

  std::vector<std::unique_ptr<Peer>> peers;
  std::vector<Peer *> byRank;
  std::map<Key, Gathering> gatherings;
  int welcomed = 0;

  /// Says whose hub this is to a connection, before anything else, with
  /// the nonce its hello must prove the secret over.
  void greet(Peer &peer, const std::string &token) {
    std::string bytes = greetingBytes(token, peer.nonce);
    send(peer, Kind::Greeting, 0, {}, {bytes.data(), bytes.size()});
  }
  void handle(Peer &peer, Message message);
  /// Closes a connection that is none of the job's ranks, saying why here
  /// and (unproved) to it; the job goes on.
  void refuse(Peer &peer, const std::string &why) {
    turnAway(peer, Kind::Abort, why, why);
  }
  /// Refuses the connections that have not proved themselves in time, and
  /// forgets those gone that never were ranks.
  void expire();
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
  /// The hub's answer to a proved hello: the rank is in where `verdict` is
  /// empty, else turned away with it.
  void answer(Peer &peer, const Hello &hello, const std::string &verdict);
  /// Sends a last message of `kind` to a stranger, names it here, and
  /// closes its connection.
  void turnAway(Peer &peer, Kind kind, llvm::StringRef bytes,
                const std::string &why);

  std::string secret;
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

void Serving::turnAway(Peer &peer, Kind kind, llvm::StringRef bytes,
                       const std::string &why) {
  std::fprintf(stderr,
               "twill: rank 0's hub refused a connection from %s: "
               "%s\n",
               peer.address.c_str(), why.c_str());
  std::vector<char> out;
  Frame frame;
  frame.kind = kind;
  encode(frame, {}, {bytes.data(), bytes.size()}, out);
  // Best effort, never waiting: a stranger gets no queue of its own.
  (void)::send(peer.fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close(peer.fd);
  peer.fd = -1;
  peer.gone = true;
}

void Serving::expire() {
  auto late = Clock::now() - std::chrono::seconds(kHandshakeSeconds);
  for (auto &peer : peers)
    if (!peer->gone && peer->rank < 0 && peer->connected < late)
      refuse(*peer, llvm::formatv("no hello that proves the job's secret in "
                                  "{0} s",
                                  kHandshakeSeconds));
  llvm::erase_if(peers, [](const std::unique_ptr<Peer> &peer) {
    return peer->gone && peer->rank < 0;
  });
}

void Serving::answer(Peer &peer, const Hello &hello,
                     const std::string &verdict) {
  std::string bytes = answerBytes(
      hubProof(secret, peer.nonce, hello.nonce, hello.rank, verdict), verdict);
  if (verdict.empty())
    send(peer, Kind::Answer, 0, {}, {bytes.data(), bytes.size()});
  else // proved: the rank ends on it rather than look further
    turnAway(peer, Kind::Answer, bytes, verdict);
}

void Serving::hello(Peer &peer, const Message &message) {
  llvm::Expected<Hello> hello = admit(message, secret, peer.nonce);
  if (!hello)
    return refuse(peer, llvm::toString(hello.takeError()));
  int rank = hello->rank, ranks = int(byRank.size());
  if (hello->ranks != ranks) { // one of the job's, launched wrong: it ends
    std::string why = llvm::formatv("rank {0} has WORLD_SIZE={1}, rank 0 {2}",
                                    rank, hello->ranks, ranks);
    abortAll(why);
    answer(peer, *hello, why);
    return;
  }
  std::string verdict;
  if (rank < 0 || rank >= ranks)
    verdict =
        llvm::formatv("rank {0} is none of the job's {1} ranks", rank, ranks);
  else if (byRank[rank])
    verdict = llvm::formatv("rank {0} has joined already (two processes with "
                            "RANK={0}?)",
                            rank);
  answer(peer, *hello, verdict);
  if (!verdict.empty())
    return;
  peer.rank = rank;
  peer.hostname = hello->hostname;
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
  if (peer.rank < 0) // a stranger until its hello proves the secret
    return message.frame.kind == Kind::Hello
               ? hello(peer, message)
               : refuse(peer, "it sent something before its hello");
  switch (message.frame.kind) {
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

/// The address of the interface `name` names (an IPv4 one first), if
/// this machine has one of that name.
std::optional<std::string> interfaceAddress(llvm::StringRef name) {
  ifaddrs *interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0)
    return std::nullopt;
  std::optional<std::string> found;
  for (int family : {AF_INET, AF_INET6})
    for (ifaddrs *each = interfaces; each && !found; each = each->ifa_next) {
      char host[NI_MAXHOST];
      if (each->ifa_addr && each->ifa_addr->sa_family == family &&
          name == each->ifa_name &&
          getnameinfo(each->ifa_addr,
                      family == AF_INET ? sizeof(sockaddr_in)
                                        : sizeof(sockaddr_in6),
                      host, sizeof(host), nullptr, 0, NI_NUMERICHOST) == 0)
        found = host;
    }
  freeifaddrs(interfaces);
  return found;
}

/// A non-blocking socket listening on `port` of the first address `host`
/// resolves to that this machine can bind, or -1 with why in `why`.
int listenOn(const std::string &host, int port, int backlog, std::string &why) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int resolved =
      getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (resolved != 0) {
    why = gai_strerror(resolved);
    return -1;
  }
  int listening = -1;
  for (addrinfo *at = found; at && listening < 0; at = at->ai_next) {
    int fd =
        socket(at->ai_family, at->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
               at->ai_protocol);
    if (fd < 0)
      continue;
    int yes = 1, no = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (at->ai_family == AF_INET6) // "::" takes IPv4 too, as asked
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    if (bind(fd, at->ai_addr, at->ai_addrlen) == 0 &&
        listen(fd, backlog) == 0) {
      listening = fd;
    } else {
      why = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  return listening;
}

/// "127.0.0.1:41234", "[::1]:41234": who connected.
std::string peerAddress(const sockaddr_storage &address, socklen_t length) {
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr *>(&address), length, host,
                  sizeof(host), port, sizeof(port),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "an unknown address";
  return address.ss_family == AF_INET6
             ? llvm::formatv("[{0}]:{1}", host, port).str()
             : llvm::formatv("{0}:{1}", host, port).str();
}

/// Takes a new connection: greeted, or refused where too many wait.
void welcome(int listener, const std::string &token, Serving &serving) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  int fd = accept4(listener, reinterpret_cast<sockaddr *>(&address), &length,
                   SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0)
    return;
  auto peer = std::make_unique<Peer>();
  peer->fd = fd;
  peer->address = peerAddress(address, length);
  peer->connected = Clock::now();
  size_t strangers = llvm::count_if(serving.peers, [](const auto &each) {
    return !each->gone && each->rank < 0;
  });
  llvm::Expected<std::string> nonce = randomHex(16);
  if (!nonce || strangers >= kMaxStrangers)
    return serving.refuse(
        *peer, nonce ? llvm::formatv("{0} connections wait to prove the job's "
                                     "secret already",
                                     strangers)
                           .str()
                     : llvm::toString(nonce.takeError()));
  peer->nonce = *nonce;
  serving.greet(*peer, token);
  serving.peers.push_back(std::move(peer));
}

} // namespace

llvm::Expected<std::unique_ptr<Hub>> Hub::start(llvm::StringRef address,
                                                llvm::ArrayRef<int> ports,
                                                int ranks, std::string token,
                                                std::string secret) {
  std::unique_ptr<Hub> hub(new Hub());
  hub->ranks = ranks;
  hub->token = std::move(token);
  hub->secret = std::move(secret);
  std::string host = interfaceAddress(address).value_or(address.str()), why;
  for (int port : ports) {
    hub->listener = listenOn(host, port, ranks, why);
    if (hub->listener >= 0) {
      hub->listening = port;
      std::fprintf(stderr,
                   "twill: rank 0's hub listens on %s, port %d, for "
                   "the job's %d ranks\n",
                   host.c_str(), port, ranks);
      hub->thread = std::thread([raw = hub.get()] { raw->serve(); });
      return hub;
    }
  }
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("rank 0 cannot listen on {0}, {1}, for the other ranks: "
                    "{2} (TWILL_HUB_ADDR names the address or interface of "
                    "this machine to listen on, 0.0.0.0 every one; "
                    "TWILL_HUB_PORT another port)",
                    host, describePorts(ports), why));
}

Hub::~Hub() {
  stopping = true;
  if (thread.joinable())
    thread.join();
  if (listener >= 0)
    close(listener);
}

void Hub::serve() {
  Serving serving(ranks, secret);
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
    serving.expire();
    std::vector<pollfd> polls{{listener, POLLIN, 0}};
    for (auto &peer : serving.peers)
      polls.push_back({peer->gone ? -1 : peer->fd,
                       short(POLLIN | (peer->out.empty() ? 0 : POLLOUT)), 0});
    if (poll(polls.data(), polls.size(), 100) < 0 && errno != EINTR)
      break;
    if (polls[0].revents & POLLIN)
      welcome(listener, token, serving);
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
        if (!message && peer.rank < 0) {
          serving.refuse(peer, llvm::toString(message.takeError()));
          break;
        }
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
    if (peer->fd >= 0)
      close(peer->fd);
}
