// The TCP launch's messages as the hub reads them from a socket (any bytes
// a peer sends): each whole message is decoded, checked as a hello that
// must prove the job's secret and read as the hub's greeting and answer
// (the handshake, SocketAuth.h), and a collective's arithmetic runs over
// its bytes as every rank's input. Errors are the
// protocol doing its job; a crash, a sanitizer report or a hang is not.
#include "fuzz/FuzzInput.h"
#include "runtime/comm/SocketAuth.h"
#include "runtime/comm/SocketProtocol.h"

using namespace twill;
using namespace twill::sockets;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<char> buffer(data, data + size);
  for (;;) {
    auto message = decode(buffer);
    auto *decoded = fuzz::valueOrNull(message);
    if (!decoded || !*decoded)
      return 0;
    const Message &m = **decoded;
    const std::string nonce(32, 'n'), secret = "a secret of the fuzzed job";
    auto hello = admit(m, secret, nonce);
    fuzz::valueOrNull(hello);
    llvm::StringRef bytes(m.bytes.data(), m.bytes.size());
    splitGreeting(bytes);
    auto answer = readAnswer(bytes, secret, nonce, nonce, m.frame.rank);
    fuzz::valueOrNull(answer);
    size_t ranks = std::min<size_t>(std::max<size_t>(m.group.size(), 1), 4);
    auto out = results(m.frame.collective,
                       std::vector<std::vector<char>>(ranks, m.bytes));
    fuzz::valueOrNull(out);
  }
}
