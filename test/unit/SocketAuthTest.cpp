//===- SocketAuthTest.cpp - who the TCP launch lets in --------------------===//
//
// HMAC-SHA256 against RFC 4231's vectors; the proofs of the handshake
// (SocketAuth.h) accepted only under the job's secret and the nonces of
// their own connection; the job's secret found as JobSecret.h says.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/SocketAuth.h"
#include "runtime/comm/JobSecret.h"

#include "llvm/ADT/StringExtras.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>

using namespace twill;
using namespace twill::sockets;

namespace {

std::string hmacHex(llvm::StringRef key, llvm::StringRef message) {
  return llvm::toHex(hmacSha256(key, message), /*LowerCase=*/true);
}

TEST(SocketAuth, HmacIsRfc4231s) {
  // Test cases 1, 2 and 6 (a key longer than SHA-256's block).
  EXPECT_EQ(hmacHex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hmacHex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hmacHex(std::string(131, '\xaa'),
                    "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(SocketAuth, NoncesAreFreshHex) {
  llvm::Expected<std::string> a = randomHex(16), b = randomHex(16);
  ASSERT_TRUE(bool(a) && bool(b));
  EXPECT_EQ(a->size(), 32u);
  EXPECT_NE(*a, *b);
}

const char *kSecret = "the job's secret, 32 characters.";

Message helloOf(llvm::StringRef secret, llvm::StringRef hubNonce, int rank,
                int ranks) {
  std::string nonce(32, 'r');
  return helloMessage({rank, ranks, nonce,
                       rankProof(secret, hubNonce, nonce, rank, ranks),
                       "node-a"});
}

TEST(SocketAuth, TheHubAdmitsOnlyAProofOfItsSecretOverItsNonce) {
  std::string hubNonce(32, 'h');
  llvm::Expected<Hello> admitted =
      admit(helloOf(kSecret, hubNonce, 1, 4), kSecret, hubNonce);
  ASSERT_TRUE(bool(admitted)) << llvm::toString(admitted.takeError());
  EXPECT_EQ(admitted->rank, 1);
  EXPECT_EQ(admitted->ranks, 4);
  EXPECT_EQ(admitted->hostname, "node-a");

  auto refused = [&](const Message &message) {
    llvm::Expected<Hello> hello = admit(message, kSecret, hubNonce);
    if (hello)
      return std::string("admitted");
    return llvm::toString(hello.takeError());
  };
  // A wrong secret, another connection's nonce (a replay), a rank or size
  // changed after the proof, no proof at all.
  EXPECT_NE(refused(helloOf("another secret of some length", hubNonce, 1, 4))
                .find("did not prove it knows the job's secret"),
            std::string::npos);
  EXPECT_NE(refused(helloOf(kSecret, std::string(32, 'x'), 1, 4)), "admitted");
  Message changed = helloOf(kSecret, hubNonce, 1, 4);
  changed.frame.rank = 2;
  EXPECT_NE(refused(changed), "admitted");
  changed = helloOf(kSecret, hubNonce, 1, 4);
  changed.frame.sequence = 8;
  EXPECT_NE(refused(changed), "admitted");
  Message bare;
  bare.frame.kind = Kind::Hello;
  bare.frame.rank = 1;
  bare.frame.sequence = 4;
  EXPECT_NE(refused(bare).find("no proof"), std::string::npos);
  Message early;
  early.frame.kind = Kind::Contribute;
  EXPECT_NE(refused(early).find("before its hello"), std::string::npos);
}

TEST(SocketAuth, TheRankTrustsOnlyTheHubsProvedAnswer) {
  std::string hubNonce(32, 'h'), rankNonce(32, 'r');
  for (std::string verdict : {"", "rank 1 has joined already"}) {
    std::string bytes = answerBytes(
        hubProof(kSecret, hubNonce, rankNonce, 1, verdict), verdict);
    llvm::Expected<std::string> read =
        readAnswer(bytes, kSecret, hubNonce, rankNonce, 1);
    ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
    EXPECT_EQ(*read, verdict);
    // Another verdict under the same proof, another rank, another secret.
    EXPECT_FALSE(
        bool(readAnswer(bytes + "!", kSecret, hubNonce, rankNonce, 1)));
    EXPECT_FALSE(bool(readAnswer(bytes, kSecret, hubNonce, rankNonce, 2)));
    llvm::Expected<std::string> forged = readAnswer(
        bytes, "another secret of some length", hubNonce, rankNonce, 1);
    ASSERT_FALSE(bool(forged));
    EXPECT_NE(llvm::toString(forged.takeError()).find("does not know"),
              std::string::npos);
  }
}

/// Sets an environment variable for one test.
class Variable {
public:
  Variable(const char *name, const std::string &value) : name(name) {
    if (const char *old = std::getenv(name))
      saved = old;
    setenv(name, value.c_str(), 1);
  }
  ~Variable() {
    if (saved)
      setenv(name, saved->c_str(), 1);
    else
      unsetenv(name);
  }

private:
  const char *name;
  std::optional<std::string> saved;
};

std::string errorOf(llvm::Expected<std::string> secret) {
  return secret ? "no error" : llvm::toString(secret.takeError());
}

std::filesystem::path freshFolder(const char *name) {
  std::filesystem::path folder = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  return folder;
}

TEST(JobSecret, GivenByTheVariablesAndLongEnough) {
  {
    Variable given("TWILL_JOB_SECRET", kSecret);
    llvm::Expected<std::string> secret = jobSecret(3, "job", "198.51.100.77");
    ASSERT_TRUE(bool(secret)) << llvm::toString(secret.takeError());
    EXPECT_EQ(*secret, kSecret);
  }
  {
    Variable given("TWILL_JOB_SECRET", "short");
    EXPECT_NE(errorOf(jobSecret(0, "job", "127.0.0.1"))
                  .find("TWILL_JOB_SECRET: the job's secret has 5 characters"),
              std::string::npos);
  }
  std::filesystem::path folder = freshFolder("twill-job-secret-file");
  std::ofstream(folder / "secret") << kSecret << "\n";
  Variable file("TWILL_JOB_SECRET_FILE", (folder / "secret").string());
  llvm::Expected<std::string> secret = jobSecret(1, "job", "198.51.100.77");
  ASSERT_TRUE(bool(secret)) << llvm::toString(secret.takeError());
  EXPECT_EQ(*secret, kSecret);
}

TEST(JobSecret, RankZeroWritesTheMachinesOwnForItsRanks) {
  std::filesystem::path runtime = freshFolder("twill-job-secret-runtime");
  Variable folder("XDG_RUNTIME_DIR", runtime.string());
  ASSERT_TRUE(isThisMachine("127.0.0.1"));
  ASSERT_TRUE(secretIsMachines("127.0.0.1"));
  EXPECT_NE(errorOf(jobSecret(1, "MASTER_PORT=1 X", "127.0.0.1")),
            "no error"); // not written yet
  llvm::Expected<std::string> written =
      jobSecret(0, "MASTER_PORT=1 X", "127.0.0.1");
  ASSERT_TRUE(bool(written)) << llvm::toString(written.takeError());
  EXPECT_EQ(written->size(), 64u);
  llvm::Expected<std::string> read =
      jobSecret(1, "MASTER_PORT=1 X", "127.0.0.1");
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(*read, *written);
  // Another job's is its own, and a new run's is new.
  llvm::Expected<std::string> other =
      jobSecret(0, "MASTER_PORT=2 X", "127.0.0.1");
  ASSERT_TRUE(bool(other));
  EXPECT_NE(*other, *written);
  llvm::Expected<std::string> again =
      jobSecret(0, "MASTER_PORT=1 X", "127.0.0.1");
  ASSERT_TRUE(bool(again));
  EXPECT_NE(*again, *written);
  // Only its user may read it.
  struct stat status;
  ASSERT_EQ(stat((runtime / "twill").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0700u);
  forgetJobSecret("MASTER_PORT=1 X");
  EXPECT_NE(errorOf(jobSecret(1, "MASTER_PORT=1 X", "127.0.0.1")), "no error");
  // A folder others may open holds no secret.
  chmod((runtime / "twill").c_str(), 0755);
  EXPECT_NE(errorOf(jobSecret(0, "MASTER_PORT=1 X", "127.0.0.1"))
                .find("not a folder only this user may open"),
            std::string::npos);
}

TEST(JobSecret, ARankOfAnotherMachineMustBeGivenOne) {
  // 198.51.100.77 is TEST-NET-2, documentation only: no machine's own.
  EXPECT_FALSE(isThisMachine("198.51.100.77"));
  std::string error = errorOf(jobSecret(2, "job", "198.51.100.77"));
  EXPECT_NE(error.find("rank 2: rank 0's hub (MASTER_ADDR=198.51.100.77) is on "
                       "another machine"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("TWILL_JOB_SECRET"), std::string::npos);
  // Rank 0 is where the hub is: its MASTER_ADDR is not this machine's.
  error = errorOf(jobSecret(0, "job", "198.51.100.77"));
  EXPECT_NE(error.find("rank 0: MASTER_ADDR=198.51.100.77 is not an address "
                       "of this machine"),
            std::string::npos)
      << error;
}

} // namespace
