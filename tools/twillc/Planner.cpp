//===- Planner.cpp - choosing the mesh, checkpointing and micro-batch -----===//

#include "tools/twillc/Planner.h"

#include "frontend/config/JobConfig.h"
#include "proto/TrainRows.h"
#include "support/AtomicFile.h"

#include "google/protobuf/text_format.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

using namespace twill;
using mlir::twill::ResourceReport;

ResourceReport::Rates twill::ratesOn(const ClusterConfig &cluster,
                                     const JobConfig &job) {
  int64_t dp = job.parallel().dp(), tp = job.parallel().tp();
  ResourceReport::Rates rates;
  bool fp32 = job.train().precision() == TrainConfig::FP32;
  rates.flopsPerSecond =
      (fp32 && cluster.fp32_matmul_tflops() > 0 ? cluster.fp32_matmul_tflops()
                                                : cluster.matmul_tflops()) *
      1e12;
  rates.attentionFlopsPerSecond =
      (fp32 ? cluster.fp32_attention_tflops() : cluster.attention_tflops()) *
      1e12;
  rates.memoryBytesPerSecond = cluster.memory_gbps() * 1e9;
  ResourceReport::Link intra{cluster.intra_node_gbps() * 1e9,
                             cluster.intra_node_latency_us() * 1e-6};
  ResourceReport::Link inter{cluster.inter_node_gbps() * 1e9,
                             cluster.inter_node_latency_us() * 1e-6};
  // Ranks are numbered tp fastest: a tp group is consecutive ranks, within
  // a node; a dp group strides by tp, across nodes once the mesh does.
  bool dpSpansNodes =
      cluster.nodes() > 1 && dp * tp > cluster.devices_per_node();
  rates.links[mlir::twill::AxisRole::Tensor] = intra;
  rates.links[mlir::twill::AxisRole::Data] = dpSpansNodes ? inter : intra;
  rates.communicationOverlapsCompute = cluster.communication_overlaps_compute();
  return rates;
}

namespace {

/// What a candidate costs, per rank, per optimizer step.
struct Cost {
  double programBytes = 0, hostBytes = 0;
  double step = 0, compute = 0, recompute = 0, communication = 0;

  static Cost of(const ResourceReport &report) {
    return {double(report.programBytes()),
            double(report.hostArenaBytes),
            report.stepSeconds,
            report.computeSeconds,
            report.recomputeSeconds,
            report.communicationSeconds};
  }
  /// `a` + (b - a) * steps: each figure a line through two layer counts.
  static Cost along(const Cost &a, const Cost &b, double steps) {
    auto line = [&](double Cost::*field) {
      return a.*field + (b.*field - a.*field) * steps;
    };
    return {line(&Cost::programBytes), line(&Cost::hostBytes),
            line(&Cost::step),         line(&Cost::compute),
            line(&Cost::recompute),    line(&Cost::communication)};
  }
};

struct Candidate {
  int64_t dp = 1, tp = 1, rows = 1, accumulation = 1;
  ParallelConfig::ActivationCheckpointing checkpointing = ParallelConfig::NONE;
  JobConfig job;
  Cost cost;
  double tokensPerDevice = 0;
};

std::string checkpointingName(ParallelConfig::ActivationCheckpointing mode) {
  return ParallelConfig::ActivationCheckpointing_Name(mode);
}

/// The divisors of `n`, ascending, found up to its square root.
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d <= n / d; ++d)
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d)
        high.push_back(n / d);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

/// The micro-batch sizes worth costing: the job's own, and divisors of
/// `rows` at least twice the last one taken, and `rows` itself. A step's
/// cost changes little between closer sizes, and a batch of many divisors
/// (720720 has 240) would otherwise compile a program for each.
std::vector<int64_t> microBatchRows(int64_t rows, int64_t own) {
  std::vector<int64_t> taken;
  for (int64_t d : divisors(rows))
    if (taken.empty() || d >= 2 * taken.back() || d == rows || d == own)
      taken.push_back(d);
  return taken;
}

class Planner {
public:
  Planner(const JobConfig &job, const ClusterConfig &cluster, CostFn cost)
      : job(job), cluster(cluster), costOf(cost) {}

  /// Every candidate, costed (from 3 and 4 layers when the model has
  /// more); those that do not compile left out.
  std::vector<Candidate> candidates() {
    int64_t devices = cluster.nodes() * cluster.devices_per_node();
    int64_t rowsPerStep =
        job.train().batch_size() * job.train().gradient_accumulation_steps();
    std::vector<Candidate> all;
    for (int64_t tp : divisors(devices)) {
      if (tp > cluster.devices_per_node())
        continue; // tensor parallelism stays within a node
      for (auto checkpointing :
           {ParallelConfig::NONE, ParallelConfig::SELECTIVE,
            ParallelConfig::FULL})
        for (int64_t rows :
             microBatchRows(rowsPerStep, job.train().batch_size())) {
          Candidate candidate;
          candidate.dp = devices / tp;
          candidate.tp = tp;
          candidate.checkpointing = checkpointing;
          candidate.rows = rows;
          candidate.accumulation = rowsPerStep / rows;
          candidate.job = jobFor(candidate);
          // A split past a job's limits (accumulation steps, tokens of a
          // micro-batch) would be written as a job twillc refuses.
          if (llvm::Error invalid = validateJobConfig(candidate.job)) {
            llvm::consumeError(std::move(invalid));
            continue;
          }
          all.push_back(std::move(candidate));
        }
    }
    std::vector<std::optional<Cost>> costs(all.size());
    inParallel(all.size(), [&](size_t i) { costs[i] = estimate(all[i]); });
    std::vector<Candidate> costed;
    for (auto [candidate, cost] : llvm::zip_equal(all, costs))
      if (cost) {
        costed.push_back(std::move(candidate));
        setCost(costed.back(), *cost);
      }
    return costed;
  }

  /// `candidates` costed whole, in parallel; those that do not compile, or
  /// do not fit whole, left out (and said, on `os`).
  std::vector<Candidate> verified(llvm::ArrayRef<Candidate> candidates,
                                  llvm::raw_ostream &os) {
    std::vector<std::optional<Cost>> costs(candidates.size());
    inParallel(candidates.size(),
               [&](size_t i) { costs[i] = whole(candidates[i]); });
    std::vector<Candidate> kept;
    for (auto [candidate, cost] : llvm::zip_equal(candidates, costs)) {
      if (!cost)
        continue;
      if (!fits(*cost)) {
        os << llvm::formatv("  (dp={0} tp={1} {2} {3} x {4}: estimated at "
                            "{5:f2} GB, the whole program needs {6:f2} GB)\n",
                            candidate.dp, candidate.tp,
                            checkpointingName(candidate.checkpointing),
                            candidate.rows, candidate.accumulation,
                            candidate.cost.programBytes / 1e9,
                            cost->programBytes / 1e9);
        continue;
      }
      kept.push_back(candidate);
      setCost(kept.back(), *cost);
    }
    return kept;
  }

  /// The whole model's cost of `candidate`.
  std::optional<Cost> whole(const Candidate &candidate) {
    return costAt(candidate, layers());
  }

  /// Whether candidates are costed from 3 and 4 layers, not whole.
  bool extrapolates() const { return layers() > 4; }

  bool fits(const Cost &cost) const {
    return cost.programBytes <= cluster.device_memory_gb() * 1e9;
  }

private:
  void setCost(Candidate &candidate, const Cost &cost) const {
    int64_t devices = cluster.nodes() * cluster.devices_per_node();
    candidate.cost = cost;
    candidate.tokensPerDevice = double(job.train().batch_size()) *
                                job.train().gradient_accumulation_steps() *
                                rowLength(job.train()) / cost.step / devices;
  }

  /// Runs `each(0 .. count - 1)` on a thread per core.
  static void inParallel(size_t count, llvm::function_ref<void(size_t)> each) {
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next++) < count;)
        each(i);
    };
    std::vector<std::thread> threads;
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned t = 1; t < std::min<size_t>(cores, count); ++t)
      threads.emplace_back(work);
    work();
    for (std::thread &thread : threads)
      thread.join();
  }

  int64_t layers() const { return job.model().num_hidden_layers(); }

  JobConfig jobFor(const Candidate &candidate) const {
    JobConfig planned = job;
    ParallelConfig &parallel = *planned.mutable_parallel();
    parallel.set_dp(candidate.dp);
    parallel.set_tp(candidate.tp);
    parallel.set_activation_checkpointing(candidate.checkpointing);
    parallel.set_checkpoint_layers(-1);
    parallel.set_memory_budget_gb(0); // the plan chooses instead
    planned.mutable_train()->set_batch_size(candidate.rows);
    planned.mutable_train()->set_gradient_accumulation_steps(
        candidate.accumulation);
    return planned;
  }

  std::optional<Cost> costAt(const Candidate &candidate, int64_t layerCount) {
    JobConfig at = candidate.job;
    at.mutable_model()->set_num_hidden_layers(layerCount);
    mlir::FailureOr<ResourceReport> report = costOf(at, ratesOn(cluster, at));
    if (mlir::failed(report))
      return std::nullopt;
    return Cost::of(*report);
  }

  /// From 3 and 4 layers, extended to the model's (its own when it has 4
  /// or fewer).
  std::optional<Cost> estimate(const Candidate &candidate) {
    if (layers() <= 4)
      return whole(candidate);
    std::optional<Cost> three = costAt(candidate, 3),
                        four = costAt(candidate, 4);
    if (!three || !four)
      return std::nullopt;
    return Cost::along(*three, *four, layers() - 3);
  }

  const JobConfig &job;
  const ClusterConfig &cluster;
  CostFn costOf;
};

void printRow(llvm::raw_ostream &os, int rank, const Candidate &c) {
  const Cost &cost = c.cost;
  os << llvm::formatv(
      "{0,3}  dp={1,-2} tp={2,-2} {3,-9} {4,4} x {5,-3} "
      "{6,8} {7,9:f3} {8,10:f0} {9,9:f3} {10,9:f3} "
      "{11,9:f3}\n",
      rank, c.dp, c.tp, checkpointingName(c.checkpointing), c.rows,
      c.accumulation,
      llvm::formatv("{0}", llvm::format("%.3g", cost.programBytes / 1e9)).str(),
      cost.step, c.tokensPerDevice, cost.compute, cost.recompute,
      std::max(0.0, cost.step - cost.compute));
}

} // namespace

int twill::planJob(const JobConfig &job, const ClusterConfig &cluster,
                   llvm::StringRef clusterName, llvm::StringRef output,
                   int rows, CostFn cost, llvm::raw_ostream &os) {
  auto began = std::chrono::steady_clock::now();
  Planner planner(job, cluster, cost);
  std::vector<Candidate> all = planner.candidates();
  // The estimate from 3 and 4 layers may miss the whole program's memory
  // by a fifth or more (first fit packs a longer program differently):
  // it orders the candidates, and only the whole program decides.
  double margin = planner.extrapolates() ? 1.3 : 1.0;
  std::vector<Candidate> fitting;
  for (Candidate &candidate : all)
    if (candidate.cost.programBytes <=
        margin * cluster.device_memory_gb() * 1e9)
      fitting.push_back(std::move(candidate));
  auto faster = [](const Candidate &a, const Candidate &b) {
    return a.tokensPerDevice > b.tokensPerDevice;
  };
  llvm::stable_sort(fitting, faster);
  int64_t devices = cluster.nodes() * cluster.devices_per_node();
  os << llvm::formatv(
      "Plan for {0} on {1} ({2} device{6} of {3} GB): {4} candidates, {5} "
      "{7}\n",
      job.model().model_type() + " " +
          std::to_string(job.model().num_hidden_layers()) + " layers, " +
          std::to_string(job.train().batch_size() *
                         job.train().gradient_accumulation_steps()) +
          " rows of " + std::to_string(rowLength(job.train())) +
          " tokens a step",
      clusterName, devices,
      llvm::formatv("{0}", llvm::format("%g", cluster.device_memory_gb()))
          .str(),
      all.size(), fitting.size(), devices > 1 ? "s" : "",
      planner.extrapolates()
          ? "within 30% of fitting by the estimate from 3 and 4 layers"
          : "fit");
  // The best, each compiled whole: those that fit after all, until there
  // are `rows` of them or no candidate is left.
  std::vector<Candidate> best;
  for (size_t next = 0; best.size() < size_t(rows) && next < fitting.size();) {
    size_t take = std::min(fitting.size() - next, size_t(rows) - best.size());
    std::vector<Candidate> checked =
        planner.verified(llvm::ArrayRef(fitting).slice(next, take), os);
    best.insert(best.end(), checked.begin(), checked.end());
    next += take;
  }
  llvm::stable_sort(best, faster);
  if (best.empty()) {
    llvm::errs() << llvm::formatv(
        "twillc: error: no mesh, checkpointing or micro-batch of this job "
        "fits {0} GB per device\n",
        llvm::formatv("{0}", llvm::format("%g", cluster.device_memory_gb())));
    return 1;
  }
  const Candidate &winner = best.front();
  os << "  #  mesh        checkpoint  rows x acc  mem GB    step s  "
        "tok/s/dev  compute s  recomp s  exposed s\n";
  for (auto [index, candidate] : llvm::enumerate(best))
    printRow(os, index + 1, candidate);
  os << "(predictions of twillc's cost estimate, each program compiled "
        "whole: step = compute, recompute included, plus the communication "
        "it cannot hide; rows x acc: train.batch_size x "
        "gradient_accumulation_steps)\n";

  std::string text;
  google::protobuf::TextFormat::PrintToString(winner.job, &text);
  if (llvm::Error error =
          writeFileAtomically(output, [&](llvm::raw_ostream &out) {
            out << llvm::formatv(
                       "# twillc --plan on {0}: predicted {1:f0} tokens/s "
                       "per device, {2:f3} s a step; the program needs {3} B "
                       "per device\n",
                       clusterName, winner.tokensPerDevice, winner.cost.step,
                       int64_t(winner.cost.programBytes))
                << text;
          }))
    return (llvm::errs() << "twillc: error: "
                         << llvm::toString(std::move(error)) << "\n"),
           1;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  os << llvm::formatv("Wrote {0}: parallel.dp={1} parallel.tp={2} "
                      "parallel.activation_checkpointing={3} "
                      "train.batch_size={4} "
                      "train.gradient_accumulation_steps={5} ({6:f1} s)\n",
                      output, winner.dp, winner.tp,
                      checkpointingName(winner.checkpointing), winner.rows,
                      winner.accumulation, seconds);
  return 0;
}
