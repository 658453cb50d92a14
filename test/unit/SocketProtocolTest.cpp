//===- SocketProtocolTest.cpp - the TCP transport's messages and sums
//------===//
//
// The hub's arithmetic (results()) against naive loops over the same
// inputs, and its messages read back whole, in pieces, or refused.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/SocketProtocol.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

using namespace twill;
using namespace twill::sockets;

namespace {

std::vector<char> bytesOf(const std::vector<float> &values) {
  std::vector<char> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> floatsOf(const std::vector<char> &bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

/// Rank r's input of `count` values: distinct everywhere.
std::vector<std::vector<char>> inputs(int ranks, int count) {
  std::vector<std::vector<char>> all;
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> values(count);
    for (int i = 0; i < count; ++i)
      values[i] = float(r * 100 + i);
    all.push_back(bytesOf(values));
  }
  return all;
}

Collective along(Op op, std::vector<int64_t> shape, int64_t dim,
                 int64_t concatDim = 0) {
  Collective c;
  c.op = op;
  c.dims = int32_t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i)
    c.shape[i] = shape[i];
  c.dim = dim;
  c.concatDim = concatDim;
  return c;
}

// Each input [2, 3, 4] (rank r's element (a, b, c) = r*100 + a*12 + b*4 + c).
constexpr int A = 2, B = 3, C = 4, kRanks = 3;

float element(int r, int a, int b, int c) {
  return float(r * 100 + a * B * C + b * C + c);
}

TEST(SocketProtocol, AllGatherConcatenatesAlongTheDim) {
  auto out =
      results(along(Op::AllGather, {A, B, C}, 1), inputs(kRanks, A * B * C));
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  for (const std::vector<char> &each : *out) {
    std::vector<float> got = floatsOf(each); // [A, kRanks * B, C]
    ASSERT_EQ(got.size(), size_t(A * kRanks * B * C));
    for (int a = 0; a < A; ++a)
      for (int rb = 0; rb < kRanks * B; ++rb)
        for (int c = 0; c < C; ++c)
          EXPECT_EQ(got[(a * kRanks * B + rb) * C + c],
                    element(rb / B, a, rb % B, c));
  }
}

TEST(SocketProtocol, ReduceScatterSumsAndSplitsAlongTheDim) {
  // [A, kRanks, C]: rank r keeps row r of dim 1, summed over the ranks.
  auto out = results(along(Op::ReduceScatter, {A, kRanks, C}, 1),
                     inputs(kRanks, A * kRanks * C));
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> got = floatsOf((*out)[r]);
    ASSERT_EQ(got.size(), size_t(A * C));
    for (int a = 0; a < A; ++a)
      for (int c = 0; c < C; ++c) {
        float sum = 0;
        for (int s = 0; s < kRanks; ++s)
          sum += float(s * 100 + (a * kRanks + r) * C + c);
        EXPECT_EQ(got[a * C + c], sum);
      }
  }
}

TEST(SocketProtocol, AllToAllSendsBlockJToRankJ) {
  // Split [A, kRanks * B, C] along dim 1, concatenated along dim 0.
  auto out = results(along(Op::AllToAll, {A, kRanks * B, C}, 1, 0),
                     inputs(kRanks, A * kRanks * B * C));
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  for (int j = 0; j < kRanks; ++j) {
    std::vector<float> got = floatsOf((*out)[j]); // [kRanks * A, B, C]
    for (int ra = 0; ra < kRanks * A; ++ra)
      for (int b = 0; b < B; ++b)
        for (int c = 0; c < C; ++c) {
          int r = ra / A, a = ra % A;
          float sent = float(r * 100 + (a * kRanks * B + j * B + b) * C + c);
          EXPECT_EQ(got[(ra * B + b) * C + c], sent);
        }
  }
}

TEST(SocketProtocol, ReductionsAndBroadcast) {
  Collective sum = along(Op::AllReduceF32, {5}, 0);
  auto out = results(sum, inputs(kRanks, 5));
  ASSERT_TRUE(bool(out));
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(floatsOf((*out)[2])[i], float(300 + 3 * i));
  std::vector<std::vector<char>> doubles;
  for (double value : {2.5, -1.0, 7.25}) {
    std::vector<char> bytes(sizeof(double));
    std::memcpy(bytes.data(), &value, sizeof(double));
    doubles.push_back(bytes);
  }
  auto max = results(along(Op::MaxF64, {1}, 0), doubles);
  ASSERT_TRUE(bool(max));
  double got;
  std::memcpy(&got, (*max)[0].data(), sizeof(double));
  EXPECT_EQ(got, 7.25);
  Collective broadcast = along(Op::Broadcast, {20}, 0);
  broadcast.rank = 1;
  auto sent = results(broadcast, inputs(kRanks, 5));
  ASSERT_TRUE(bool(sent));
  EXPECT_EQ((*sent)[0], inputs(kRanks, 5)[1]);
}

TEST(SocketProtocol, InputsThatDoNotFitAreRefused) {
  std::vector<std::vector<char>> uneven = inputs(kRanks, 4);
  uneven[1].pop_back();
  auto out = results(along(Op::AllReduceF32, {4}, 0), uneven);
  ASSERT_FALSE(bool(out));
  EXPECT_NE(llvm::toString(out.takeError()).find("bytes"), std::string::npos);
  auto split = results(along(Op::ReduceScatter, {A, 4}, 1), inputs(kRanks, 8));
  ASSERT_FALSE(bool(split));
  EXPECT_NE(llvm::toString(split.takeError()).find("does not split"),
            std::string::npos);
}

// What the fuzz target found: shapes a peer may send that no input has,
// or that hold nothing across dims as large as it likes, and sums past
// int64's range.
TEST(SocketProtocol, HostileShapesAndSumsAreBounded) {
  std::vector<std::vector<char>> empty(2);
  auto nothing =
      results(along(Op::AllGather, {int64_t(1) << 40, 0, 1 << 20}, 2), empty);
  ASSERT_TRUE(bool(nothing)) << llvm::toString(nothing.takeError());
  EXPECT_EQ(nothing->size(), 2u);
  EXPECT_TRUE((*nothing)[1].empty());
  // Empty, and split unevenly, with dims whose product is past int64.
  auto uneven = results(
      along(Op::ReduceScatter, {0, 3, int64_t(1) << 40, int64_t(1) << 40}, 1),
      empty);
  ASSERT_FALSE(bool(uneven));
  EXPECT_NE(llvm::toString(uneven.takeError())
                .find("reduce_scatter: dim 1 of size 3"),
            std::string::npos);
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{-4, -2}, {int64_t(1) << 40, int64_t(1) << 40}}) {
    auto refused = results(along(Op::AllReduceF32, shape, 0), empty);
    ASSERT_FALSE(bool(refused));
    llvm::consumeError(refused.takeError());
  }
  std::vector<std::vector<char>> large(2, std::vector<char>(8));
  int64_t top = INT64_MAX, one = 1, sum;
  std::memcpy(large[0].data(), &top, 8);
  std::memcpy(large[1].data(), &one, 8);
  auto wrapped = results(along(Op::AllReduceI64, {1}, 0), large);
  ASSERT_TRUE(bool(wrapped));
  std::memcpy(&sum, (*wrapped)[0].data(), 8);
  EXPECT_EQ(sum, INT64_MIN);
}

TEST(SocketProtocol, MessagesReadBackWholeInPiecesOrRefused) {
  Frame frame;
  frame.kind = Kind::Contribute;
  frame.rank = 3;
  frame.sequence = 41;
  frame.collective = along(Op::AllGather, {2, 5}, 1);
  std::vector<char> stream;
  encode(frame, {1, 3}, {"abc", 3}, stream);
  encode(frame, {}, {}, stream);
  std::vector<char> buffer;
  for (size_t i = 0; i + 1 < stream.size() / 2; ++i) { // a byte at a time
    buffer.push_back(stream[i]);
    auto none = decode(buffer);
    ASSERT_TRUE(bool(none));
    ASSERT_FALSE(bool(*none)) << "a message read before its last byte";
  }
  buffer.insert(buffer.end(), stream.begin() + buffer.size(), stream.end());
  auto first = decode(buffer);
  ASSERT_TRUE(bool(first) && bool(*first));
  EXPECT_EQ((*first)->frame.sequence, 41u);
  EXPECT_EQ((*first)->group, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(std::string((*first)->bytes.begin(), (*first)->bytes.end()), "abc");
  EXPECT_TRUE((*first)->frame.collective == frame.collective);
  auto second = decode(buffer);
  ASSERT_TRUE(bool(second) && bool(*second));
  EXPECT_TRUE((*second)->group.empty());
  EXPECT_TRUE(buffer.empty());
  std::vector<char> garbage(sizeof(Frame) + 8, 'x');
  auto refused = decode(garbage);
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("not Twill's"),
            std::string::npos);
}

} // namespace
