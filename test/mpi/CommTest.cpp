//===- CommTest.cpp - collectives on every mesh axis, on every transport
//---===//
//
// Run as `mpirun -np N twill-comm-tests`, or under torchrun (the TCP
// transport), with TWILL_TEST_MESH=dp,tp. Every rank fills its input from
// its rank, so each rank can compute what every collective must return and
// check it; the process fails on every rank if any rank saw a failure.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/comm/Communicator.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using namespace twill;

namespace {

std::vector<int64_t> meshShape() {
  const char *text = std::getenv("TWILL_TEST_MESH");
  std::vector<int64_t> shape;
  for (llvm::StringRef rest = text ? text : "1,1"; !rest.empty();) {
    auto [head, tail] = rest.split(',');
    shape.push_back(std::stoll(head.str()));
    rest = tail;
  }
  return shape;
}

/// Runs a collective to the end: its start, then its wait.
llvm::Error finished(Communicator::Started started) {
  if (!started)
    return started.takeError();
  return (*started)->wait();
}

/// Rank `rank`'s input: distinct everywhere, so a misplaced value shows.
std::vector<float> inputOf(int rank, int64_t count) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i)
    values[i] = float(rank * 1000 + i);
  return values;
}

class CommTest : public ::testing::Test {
protected:
  void SetUp() override {
    shape = meshShape();
    auto created = Communicator::create({"dp", "tp"}, shape);
    ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
    comm = std::move(*created);
  }

  /// The world rank of the rank at `index` along `axis`, others as ours.
  int rankAlong(int axis, int index) const {
    int dp = axis == 0 ? index : comm->coordinate("dp");
    int tp = axis == 1 ? index : comm->coordinate("tp");
    return dp * int(shape[1]) + tp;
  }

  std::vector<int64_t> shape;
  std::unique_ptr<Communicator> comm;
};

TEST_F(CommTest, RanksAreRowMajorOverTheMesh) {
  EXPECT_EQ(comm->rank(),
            comm->coordinate("dp") * shape[1] + comm->coordinate("tp"));
  EXPECT_EQ(comm->axisSize("dp"), shape[0]);
  EXPECT_EQ(comm->axisSize("tp"), shape[1]);
  EXPECT_EQ(comm->coordinate("pp"), -1);
}

TEST_F(CommTest, AllGatherConcatenatesAlongAnyDim) {
  const int64_t in[] = {2, 3, 4};
  for (int axis = 0; axis < 2; ++axis) {
    const char *name = axis == 0 ? "dp" : "tp";
    int n = int(shape[axis]);
    for (int64_t dim = 0; dim < 3; ++dim) {
      std::vector<float> x = inputOf(comm->rank(), 24), out(24 * n);
      ASSERT_FALSE(
          finished(comm->startAllGather(name, x.data(), out.data(), in, dim)));
      // out[.., r * in[dim] + j, ..] = input of rank r at [.., j, ..].
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < dim; ++d)
        outer *= in[d];
      for (int64_t d = dim + 1; d < 3; ++d)
        inner *= in[d];
      for (int r = 0; r < n; ++r) {
        std::vector<float> theirs = inputOf(rankAlong(axis, r), 24);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < in[dim]; ++j)
            for (int64_t i = 0; i < inner; ++i)
              ASSERT_EQ(out[((o * n + r) * in[dim] + j) * inner + i],
                        theirs[(o * in[dim] + j) * inner + i])
                  << name << " dim " << dim;
      }
    }
  }
}

TEST_F(CommTest, ReduceScatterSumsThenKeepsOurBlock) {
  for (int axis = 0; axis < 2; ++axis) {
    const char *name = axis == 0 ? "dp" : "tp";
    int n = int(shape[axis]);
    const int64_t in[] = {3, 2 * n};
    std::vector<float> x = inputOf(comm->rank(), 6 * n), out(6);
    ASSERT_FALSE(
        finished(comm->startReduceScatter(name, x.data(), out.data(), in, 1)));
    int me = comm->coordinate(name);
    for (int64_t row = 0; row < 3; ++row)
      for (int64_t j = 0; j < 2; ++j) {
        float sum = 0;
        for (int r = 0; r < n; ++r)
          sum += inputOf(rankAlong(axis, r), 6 * n)[row * 2 * n + me * 2 + j];
        ASSERT_EQ(out[row * 2 + j], sum) << name;
      }
  }
}

TEST_F(CommTest, AllReduceSums) {
  for (int axis = 0; axis < 2; ++axis) {
    const char *name = axis == 0 ? "dp" : "tp";
    std::vector<float> x = inputOf(comm->rank(), 5), out(5);
    ASSERT_FALSE(finished(comm->startAllReduce(name, x.data(), out.data(), 5)));
    for (int64_t i = 0; i < 5; ++i) {
      float sum = 0;
      for (int r = 0; r < shape[axis]; ++r)
        sum += inputOf(rankAlong(axis, r), 5)[i];
      ASSERT_EQ(out[i], sum);
    }
  }
}

TEST_F(CommTest, AllToAllMovesAShardFromOneDimToAnother) {
  // Sharded on dim 1 (each rank holds [4, 2]) -> sharded on dim 0.
  int n = int(shape[1]);
  const int64_t in[] = {4 * n, 2};
  std::vector<float> x = inputOf(comm->rank(), 8 * n), out(8 * n);
  ASSERT_FALSE(
      finished(comm->startAllToAll("tp", x.data(), out.data(), in, 0, 1)));
  // Our output [4, 2n]: column block r comes from rank r's rows of our
  // block along dim 0.
  int me = comm->coordinate("tp");
  for (int r = 0; r < n; ++r) {
    std::vector<float> theirs = inputOf(rankAlong(1, r), 8 * n);
    for (int64_t row = 0; row < 4; ++row)
      for (int64_t j = 0; j < 2; ++j)
        ASSERT_EQ(out[row * 2 * n + r * 2 + j], theirs[(me * 4 + row) * 2 + j]);
  }
}

/// Collectives on both axes in flight at once, waited in the other order
/// than they started: each completes with its own values.
TEST_F(CommTest, CollectivesInFlightCompleteInAnyOrder) {
  int tp = int(shape[1]), dp = int(shape[0]);
  const int64_t in[] = {2, 3};
  std::vector<float> x = inputOf(comm->rank(), 6);
  std::vector<float> gathered(6 * tp), summed(6), counts(6);
  auto gather = comm->startAllGather("tp", x.data(), gathered.data(), in, 0);
  auto sum = comm->startAllReduce("dp", x.data(), summed.data(), 6);
  auto count = comm->startAllReduce("tp", x.data(), counts.data(), 6);
  ASSERT_TRUE(gather && sum && count);
  for (auto *pending : {&*count, &*sum, &*gather}) {
    llvm::Expected<bool> done = (*pending)->progress();
    ASSERT_TRUE(bool(done)) << llvm::toString(done.takeError());
  }
  ASSERT_FALSE((*count)->wait());
  ASSERT_FALSE((*sum)->wait());
  ASSERT_FALSE((*gather)->wait());
  for (int r = 0; r < tp; ++r)
    for (int64_t i = 0; i < 6; ++i)
      ASSERT_EQ(gathered[r * 6 + i], inputOf(rankAlong(1, r), 6)[i]);
  for (int64_t i = 0; i < 6; ++i) {
    float overDp = 0, overTp = 0;
    for (int d = 0; d < dp; ++d)
      overDp += inputOf(rankAlong(0, d), 6)[i];
    for (int t = 0; t < tp; ++t)
      overTp += inputOf(rankAlong(1, t), 6)[i];
    ASSERT_EQ(summed[i], overDp);
    ASSERT_EQ(counts[i], overTp);
  }
}

/// all_gather over tp, then all_reduce over dp, as an Executable says:
/// blocking, or (`started`) each started and waited later, with the
/// reduce's input also read by an add while the reduce is in flight.
Executable collectiveProgram(int tp, bool started) {
  Executable executable;
  executable.set_format_version(EXECUTABLE_FORMAT);
  auto addBuffer = [&](std::initializer_list<int64_t> dims) {
    Buffer &buffer = *executable.add_buffers();
    buffer.set_dtype(F32);
    int64_t count = 1;
    for (int64_t dim : dims) {
      buffer.add_shape(dim);
      count *= dim;
    }
    buffer.set_size_bytes(count * 4);
  };
  addBuffer({2, 3});
  addBuffer({2, 3 * tp});
  addBuffer({2, 3 * tp});
  addBuffer({2, 3 * tp});
  Input &input = *executable.add_inputs();
  input.set_name("x");
  input.set_buffer(0);
  EntryPoint &entry = *executable.add_entry_points();
  entry.set_name("forward");
  auto wait = [&](int result) {
    Instruction &wait = *entry.add_instructions();
    wait.set_opcode(WAIT);
    wait.add_operands(result);
  };
  Instruction &gather = *entry.add_instructions();
  gather.set_opcode(started ? ALL_GATHER_START : ALL_GATHER);
  gather.add_operands(0);
  gather.add_results(1);
  gather.mutable_gather()->set_axis("tp");
  gather.mutable_gather()->set_dim(1);
  if (started)
    wait(1);
  Instruction &reduce = *entry.add_instructions();
  reduce.set_opcode(started ? ALL_REDUCE_START : ALL_REDUCE);
  reduce.add_operands(1);
  reduce.add_results(2);
  reduce.mutable_all_reduce()->set_axis("dp");
  Instruction &add = *entry.add_instructions();
  add.set_opcode(ADD);
  add.add_operands(1);
  add.add_operands(1);
  add.add_results(3);
  if (started)
    wait(2);
  entry.add_outputs(2);
  entry.add_output_roles(VALUE_UNSPECIFIED);
  entry.add_output_updates(-1);
  entry.add_outputs(3);
  entry.add_output_roles(VALUE_UNSPECIFIED);
  entry.add_output_updates(-1);
  return executable;
}

/// The CPU backend runs collective instructions through the communicator,
/// blocking or started and waited, to the same values.
TEST_F(CommTest, BackendRunsCollectiveInstructions) {
  int tp = int(shape[1]), dp = int(shape[0]);
  for (bool started : {false, true}) {
    Executable executable = collectiveProgram(tp, started);
    ASSERT_FALSE(verifyExecutable(executable));
    BufferSet buffers(executable);
    std::vector<float> mine = inputOf(comm->rank(), 6);
    std::copy(mine.begin(), mine.end(), buffers.as<float>(0));
    ASSERT_FALSE(
        CpuBackend::run(executable.entry_points(0), buffers, comm.get()));
    const float *out = buffers.as<float>(2), *twice = buffers.as<float>(3);
    for (int64_t row = 0; row < 2; ++row)
      for (int r = 0; r < tp; ++r)
        for (int64_t j = 0; j < 3; ++j) {
          float sum = 0;
          for (int d = 0; d < dp; ++d)
            sum += inputOf(d * tp + r, 6)[row * 3 + j];
          ASSERT_EQ(out[row * 3 * tp + r * 3 + j], sum) << started;
          ASSERT_EQ(twice[row * 3 * tp + r * 3 + j],
                    2 * inputOf(rankAlong(0, comm->coordinate("dp")) -
                                    comm->coordinate("tp") + r,
                                6)[row * 3 + j])
              << started;
        }
  }
}

TEST(CommMesh, AWrongRankCountIsAnErrorOnEveryRank) {
  int size = Communicator::launchedRanks();
  auto created = Communicator::create({"dp", "tp"}, {size + 1, 1});
  ASSERT_FALSE(bool(created));
  EXPECT_NE(llvm::toString(created.takeError()).find("ranks were started"),
            std::string::npos);
}

// Each rank's GPU is its place on its node: the ranks of one machine (here
// every rank: mpirun starts them on this one) hold places 0, 1, ... once
// each, whatever their world ranks.
TEST(CommMesh, EachRankOfANodeHasItsOwnPlaceOnIt) {
  int size = Communicator::launchedRanks();
  ASSERT_EQ(Communicator::ranksOnThisNode(), size);
  auto world = Communicator::create({"world"}, {size});
  ASSERT_TRUE(bool(world)) << llvm::toString(world.takeError());
  float place = float(Communicator::rankOnThisNode());
  std::vector<float> places(size);
  ASSERT_FALSE(bool(finished(
      (*world)->startAllGather("world", &place, places.data(), {1}, 0))));
  std::sort(places.begin(), places.end());
  for (int i = 0; i < size; ++i)
    EXPECT_EQ(places[i], i);
}

} // namespace

int main(int argc, char **argv) {
  Communicator::initialize(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS() != 0, anyFailed = 0;
  {
    int size = Communicator::launchedRanks();
    auto world = Communicator::create({"world"}, {size});
    double worst = failed;
    llvm::Error error = world ? (*world)->allReduce("world", &worst, 1,
                                                    /*max=*/true)
                              : world.takeError();
    if (error) {
      std::fprintf(stderr, "twill-comm-tests: the ranks' verdicts: %s\n",
                   llvm::toString(std::move(error)).c_str());
      return 1;
    }
    anyFailed = worst > 0;
  }
  Communicator::finalize();
  return anyFailed;
}
