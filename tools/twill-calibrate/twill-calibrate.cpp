//===- twill-calibrate.cpp - measure this machine for the planner ---------===//
//
//   mpirun -np N twill-calibrate cluster.textproto    (twill plan --calibrate)
//
// Measures what the planner's cost estimate needs (proto/cluster.proto)
// with the kernels and collectives the cpu backend runs, every rank at once
// (they share the machine's cores and memory as a job's ranks do): the
// rate of an fp32 GEMM of a decoder layer's shape and of its attention
// (forward and gradient), the bytes per second of an elementwise add, and
// the bandwidth and per-step latency of an
// all-reduce over the ranks. Rank 0 writes a one-node cluster of N devices
// (the ranks) to the file.
//
//===----------------------------------------------------------------------===//

#include "opmodel/Flops.h"
#include "proto/cluster.pb.h"
#include "runtime/backend/Gemm.h"
#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/comm/Communicator.h"
#include "support/AtomicFile.h"
#include "support/ToolOutput.h"

#include "google/protobuf/text_format.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <unistd.h>
#include <vector>

using namespace twill;
namespace cl = llvm::cl;

static cl::opt<std::string> outputPath(cl::Positional, cl::Required,
                                       cl::desc("<cluster.textproto>"));
static cl::opt<double>
    secondsEach("seconds", cl::desc("How long each measurement runs, at least"),
                cl::init(0.5));

namespace {

/// Times code on every rank at once: enough repetitions for `secondsEach`
/// (the most any rank needs, so all run the same count), started together.
class Timer {
public:
  explicit Timer(Communicator &comm) : comm(comm) {}

  /// The seconds of one run of `body` on this rank.
  llvm::Expected<double> seconds(llvm::function_ref<void()> body) {
    llvm::Expected<int64_t> count = repetitions(body);
    if (!count)
      return count.takeError();
    return elapsed(body, *count) / *count;
  }

  /// The seconds of one run of `first` and of `second`, in blocks of a
  /// tenth of `secondsEach` that take turns (so a drift of the machine's
  /// speed reaches both alike).
  llvm::Expected<std::pair<double, double>>
  alternating(llvm::function_ref<void()> first,
              llvm::function_ref<void()> second) {
    llvm::Expected<int64_t> count = repetitions([&] {
      first();
      second();
    });
    if (!count)
      return count.takeError();
    int64_t block = std::max<int64_t>(1, *count / 10);
    double firstSeconds = 0, secondSeconds = 0;
    for (int64_t done = 0; done < *count; done += block) {
      firstSeconds += elapsed(first, block);
      secondSeconds += elapsed(second, block);
    }
    int64_t runs = (*count + block - 1) / block * block;
    return std::make_pair(firstSeconds / runs, secondSeconds / runs);
  }

  /// The mean over the ranks of `value`.
  llvm::Expected<double> mean(double value) {
    if (llvm::Error error = comm.allReduce("world", &value, 1, /*max=*/false))
      return std::move(error);
    return value / comm.worldSize();
  }

private:
  llvm::Expected<int64_t> repetitions(llvm::function_ref<void()> body) {
    body(); // warm: first touches, oneDNN's kernel choice
    double once = elapsed(body, 1);
    double count = std::max(1.0, std::ceil(secondsEach / std::max(once, 1e-9)));
    if (llvm::Error error = comm.allReduce("world", &count, 1, /*max=*/true))
      return std::move(error);
    if (llvm::Error error = comm.barrier())
      return std::move(error);
    return int64_t(count);
  }

  static double elapsed(llvm::function_ref<void()> body, int64_t count) {
    auto began = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < count; ++i)
      body();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         began)
        .count();
  }

  Communicator &comm;
};

/// A row-major fp32 GEMM C[m x n] = A[m x k] B[k x n] with its own memory.
struct OwnedGemm {
  OwnedGemm(int64_t m, int64_t n, int64_t k)
      : a(m * k, 0.5f), b(k * n, 0.25f), c(m * n) {
    gemm.m = m, gemm.n = n, gemm.k = k;
    gemm.a = a.data(), gemm.lda = k;
    gemm.b = b.data(), gemm.ldb = n;
    gemm.c = c.data(), gemm.ldc = n;
  }
  void operator()() const { cpu::gemm(gemm); }
  double flops() const { return 2.0 * gemm.m * gemm.n * gemm.k; }

  std::vector<float> a, b, c;
  RowMajorGemm gemm;
};

/// A decoder layer's causal attention, forward and gradient, with its own
/// memory: 512 tokens, 8 query heads on 2 KV heads of 64.
struct OwnedAttention {
  static constexpr int64_t seq = 512, heads = 8, kvHeads = 2, dim = 64;
  OwnedAttention()
      : q(seq * heads * dim, 0.01f), kv(seq * kvHeads * dim, 0.02f),
        out(q.size()), lse(heads * seq), dq(q.size()), dk(kv.size()),
        dv(kv.size()) {}
  void forward() {
    cpu::attention(q.data(), kv.data(), kv.data(), nullptr, out.data(),
                   lse.data(), 1, seq, HeadBlock::whole(heads), kvHeads, dim,
                   logits);
  }
  /// From the forward's statistics; the output stands in for its gradient.
  void gradient() {
    cpu::attentionGrad(q.data(), kv.data(), kv.data(), lse.data(), out.data(),
                       nullptr, dq.data(), dk.data(), dv.data(), 1, seq,
                       HeadBlock::whole(heads), kvHeads, dim, logits);
  }
  /// Forward and gradient, as the cost estimate counts them (Flops.h).
  double flops() const {
    Instruction instruction;
    int64_t shape[] = {1, seq, heads, dim};
    llvm::ArrayRef<int64_t> operands[] = {shape};
    instruction.set_opcode(ATTENTION);
    double forward = flopsOf(instruction, operands, shape);
    instruction.set_opcode(ATTENTION_GRAD);
    return forward + flopsOf(instruction, operands, shape);
  }

  std::vector<float> q, kv, out, lse, dq, dk, dv;
  AttentionLogits logits{1 / 8.0};
};

/// Starts a collective, runs `between` while it is in flight, and waits for
/// it, keeping the first error.
void runCollective(llvm::function_ref<Communicator::Started()> start,
                   llvm::function_ref<void(Communicator::Pending &)> between,
                   std::optional<llvm::Error> &failed) {
  if (failed)
    return;
  Communicator::Started started = start();
  if (!started) {
    failed = started.takeError();
    return;
  }
  between(**started);
  if (llvm::Error error = (*started)->wait())
    failed = std::move(error);
}

/// The matmul and attention rates and the memory bandwidth of a rank while
/// every rank works.
llvm::Error measureCompute(Timer &timer, ClusterConfig &cluster,
                           std::string &details) {
  // A decoder layer's GEMM: 1024 tokens x 512 hidden into 1024 outputs.
  OwnedGemm gemm(1024, 1024, 512);
  llvm::Expected<double> gemmSeconds = timer.seconds(gemm);
  if (!gemmSeconds)
    return gemmSeconds.takeError();
  llvm::Expected<double> flops = timer.mean(gemm.flops() / *gemmSeconds);
  if (!flops)
    return flops.takeError();

  OwnedAttention attention;
  llvm::Expected<double> attentionSeconds = timer.seconds([&] {
    attention.forward();
    attention.gradient();
  });
  if (!attentionSeconds)
    return attentionSeconds.takeError();
  llvm::Expected<double> attentionFlops =
      timer.mean(attention.flops() / *attentionSeconds);
  if (!attentionFlops)
    return attentionFlops.takeError();

  // An elementwise add over arrays far larger than the caches.
  constexpr int64_t count = int64_t(1) << 23;
  std::vector<float> x(count, 1.0f), y(count, 2.0f), z(count);
  llvm::Expected<double> addSeconds =
      timer.seconds([&] { cpu::add(x.data(), y.data(), z.data(), count); });
  if (!addSeconds)
    return addSeconds.takeError();
  llvm::Expected<double> bytes =
      timer.mean(3.0 * count * sizeof(float) / *addSeconds);
  if (!bytes)
    return bytes.takeError();

  cluster.set_matmul_tflops(*flops / 1e12);
  cluster.set_attention_tflops(*attentionFlops / 1e12);
  cluster.set_fp32_attention_tflops(*attentionFlops / 1e12);
  cluster.set_memory_gbps(*bytes / 1e9);
  details =
      llvm::formatv("# fp32 GEMM 1024x1024x512: {0:f1} GFLOP/s per "
                    "rank; attention of {1} tokens, {2} heads of {3}, and its "
                    "gradient: {4:f1} GFLOP/s per rank; add over {5} MiB: "
                    "{6:f1} GB/s per rank\n",
                    *flops / 1e9, OwnedAttention::seq, OwnedAttention::heads,
                    OwnedAttention::dim, *attentionFlops / 1e9,
                    3 * count * sizeof(float) >> 20, *bytes / 1e9)
          .str();
  return llvm::Error::success();
}

/// The link between the ranks: an all-reduce's bandwidth and per-step
/// latency with nothing else running, then what a collective costs in flight
/// over compute as the runtime runs it (started between instructions, moved
/// on after each, waited later). Where the ranks' cores also move the bytes
/// (ranks sharing a cpu), that cost is not hidden: the link's latency is
/// then what a ring step costs that way.
llvm::Error measureLink(Communicator &comm, Timer &timer,
                        ClusterConfig &cluster, std::string &details) {
  int ranks = comm.worldSize();
  std::optional<llvm::Error> failed;
  auto allReduce = [&](std::vector<float> &values) {
    return timer.seconds([&] {
      runCollective(
          [&] {
            return comm.startAllReduce("world", values.data(), values.data(),
                                       values.size());
          },
          [](Communicator::Pending &) {}, failed);
    });
  };
  // A ring all-reduce sends 2 (k - 1) / k of its bytes per rank; a tiny one
  // is latency alone, over 2 (k - 1) steps.
  std::vector<float> big(int64_t(1) << 22, 1.0f), one(1, 1.0f);
  llvm::Expected<double> bigSeconds = allReduce(big);
  if (!bigSeconds)
    return bigSeconds.takeError();
  llvm::Expected<double> oneSeconds = allReduce(one);
  if (!oneSeconds)
    return oneSeconds.takeError();
  if (failed)
    return std::move(*failed);
  double steps = 2.0 * (ranks - 1);
  double sent = steps / ranks * big.size() * sizeof(float);
  llvm::Expected<double> bandwidth =
      timer.mean(sent / std::max(*bigSeconds - *oneSeconds, 1e-9));
  if (!bandwidth)
    return bandwidth.takeError();
  llvm::Expected<double> latency = timer.mean(*oneSeconds / steps);
  if (!latency)
    return latency.takeError();

  // An FSDP gather of a LoRA layer's piece over two GEMMs of a layer.
  OwnedGemm gemm(256, 512, 256);
  std::vector<float> piece(int64_t(1) << 15, 1.0f),
      gathered(piece.size() * ranks);
  int64_t shape[] = {int64_t(piece.size())};
  auto gather = [&](llvm::function_ref<void(Communicator::Pending &)> between) {
    runCollective(
        [&] {
          return comm.startAllGather("world", piece.data(), gathered.data(),
                                     shape, 0);
        },
        between, failed);
  };
  llvm::Expected<double> alone =
      timer.seconds([&] { gather([](Communicator::Pending &) {}); });
  if (!alone)
    return alone.takeError();
  llvm::Expected<std::pair<double, double>> overCompute = timer.alternating(
      [&] { gemm(), gemm(); },
      [&] {
        gather([&](Communicator::Pending &pending) {
          for (int i = 0; i < 2 && !failed; ++i) {
            gemm();
            if (llvm::Expected<bool> done = pending.progress(); !done)
              failed = done.takeError();
          }
        });
      });
  if (!overCompute)
    return overCompute.takeError();
  if (failed)
    return std::move(*failed);
  llvm::Expected<double> exposed =
      timer.mean(std::max(overCompute->second - overCompute->first, 0.0));
  llvm::Expected<double> aloneMean = timer.mean(*alone);
  if (!exposed)
    return exposed.takeError();
  if (!aloneMean)
    return aloneMean.takeError();
  // Less than half hidden: count it whole, as the step will.
  bool overlaps = *exposed < 0.5 * *aloneMean;
  double gatherSteps = ranks - 1;
  double ringStep = (*exposed - gatherSteps / ranks * gathered.size() *
                                    sizeof(float) / *bandwidth) /
                    gatherSteps;

  cluster.set_intra_node_gbps(*bandwidth / 1e9);
  cluster.set_intra_node_latency_us(
      1e6 * (overlaps ? *latency : std::max(*latency, ringStep)));
  cluster.set_communication_overlaps_compute(overlaps);
  details += llvm::formatv(
                 "# all-reduce of {0} MiB over {1} ranks: {2:f3} ms, of 4 B: "
                 "{3:f1} us; an all-gather of {4} KiB a rank: {5:f3} ms "
                 "alone, {6:f3} ms more over two GEMMs of {7:f3} ms\n",
                 big.size() * sizeof(float) >> 20, ranks, 1e3 * *bigSeconds,
                 1e6 * *oneSeconds, piece.size() * sizeof(float) >> 10,
                 1e3 * *aloneMean, 1e3 * *exposed, 1e3 * overCompute->first)
                 .str();
  return llvm::Error::success();
}

/// Measures everything, every rank at once, into `cluster`.
llvm::Error measure(Communicator &comm, ClusterConfig &cluster,
                    std::string &details) {
  Timer timer(comm);
  cluster.set_nodes(1);
  cluster.set_devices_per_node(comm.worldSize());
  double memory = double(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  cluster.set_device_memory_gb(memory / Communicator::ranksOnThisNode() / 1e9);
  if (llvm::Error error = measureCompute(timer, cluster, details))
    return error;
  if (comm.worldSize() == 1)
    return llvm::Error::success();
  return measureLink(comm, timer, cluster, details);
}

} // namespace

int main(int argc, char **argv) {
  twill::checkStandardOutputAtExit("twill-calibrate");
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Twill: measure this machine\n");
  Communicator::initialize(argc, argv);
  int status = 0;
  {
    int ranks = Communicator::launchedRanks();
    llvm::Expected<std::unique_ptr<Communicator>> comm =
        Communicator::create({"world"}, {ranks});
    useRankThreads();
    ClusterConfig cluster;
    std::string details;
    llvm::Error error =
        comm ? measure(**comm, cluster, details) : comm.takeError();
    if (error) {
      llvm::WithColor::error(llvm::errs(), "twill-calibrate")
          << llvm::toString(std::move(error)) << "\n";
      status = 1;
    } else if ((*comm)->rank() == 0) {
      char host[256] = "this machine";
      gethostname(host, sizeof host - 1);
      cluster.set_name(
          llvm::formatv("{0}, {1} ranks (measured)", host, ranks).str());
      std::string text;
      google::protobuf::TextFormat::PrintToString(cluster, &text);
      if (llvm::Error error =
              writeFileAtomically(outputPath, [&](llvm::raw_ostream &out) {
                out << "# twill-calibrate on " << host << ", " << ranks
                    << " ranks at once\n"
                    << details << text;
              })) {
        llvm::WithColor::error(llvm::errs(), "twill-calibrate")
            << llvm::toString(std::move(error)) << "\n";
        status = 1;
      } else {
        llvm::outs() << details << text;
      }
    }
  }
  Communicator::finalize();
  return status;
}
