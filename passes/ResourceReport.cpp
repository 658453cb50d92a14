//===- ResourceReport.cpp - per-rank memory and communication -------------===//

#include "passes/ResourceReport.h"

#include "dialects/twill/TwillEntryPoints.h"
#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "opmodel/Flops.h"
#include "passes/Passes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::twill;
using ::twill::shapes::Collective;

/// The bytes of a tensor, or of the tensor a collective in flight yields.
static int64_t bytesOf(Type type) {
  if (auto pending = dyn_cast<PendingType>(type))
    type = pending.getValue();
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() * ((tensor.getElementTypeBitWidth() + 7) / 8);
}

/// The bytes one rank sends for `op` (ring algorithms), and the name the
/// report gives the collective; 0 bytes for ops that move nothing.
static std::pair<StringRef, int64_t> sentBytes(Operation *op, int64_t ranks) {
  if (ranks <= 1)
    return {"", 0};
  if (auto loss = dyn_cast<VocabParallelLossOpInterface>(op)) {
    // A vocab-parallel loss all-reduces three fp64 statistics per row.
    int64_t rows =
        cast<RankedTensorType>(loss.getLabels().getType()).getNumElements();
    return {"all_reduce (vocab-parallel loss)",
            2 * 3 * rows * 8 * (ranks - 1) / ranks};
  }
  std::optional<Collective> kind = collectiveKindOf(op);
  if (!kind)
    return {"", 0};
  int64_t input = bytesOf(op->getOperand(0).getType());
  int64_t result = bytesOf(op->getResult(0).getType());
  switch (*kind) {
  case Collective::AllGather:
    return {"all_gather", input * (ranks - 1)};
  case Collective::ReduceScatter:
    return {"reduce_scatter", result * (ranks - 1)};
  case Collective::AllReduce:
    return {"all_reduce", 2 * input * (ranks - 1) / ranks};
  case Collective::AllToAll:
    return {"all_to_all", input * (ranks - 1) / ranks};
  case Collective::LocalSlice:
    break;
  }
  return {"", 0};
}

double mlir::twill::flopsOf(Operation *op) {
  ::twill::Instruction instruction;
  if (op->getNumResults() == 0 || failed(describeOp(op, instruction)))
    return 0;
  auto shapeOf = [](Value value) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    return type ? type.getShape() : ArrayRef<int64_t>();
  };
  SmallVector<ArrayRef<int64_t>> operands =
      llvm::map_to_vector(op->getOperands(), shapeOf);
  return ::twill::flopsOf(instruction, operands, shapeOf(op->getResult(0)));
}

/// The axis a collective (or its start, or a vocab-parallel loss) runs on.
static StringAttr axisOf(Operation *op) {
  return op->getAttrOfType<StringAttr>(
      isa<VocabParallelLossOpInterface>(op) ? "shard_axis" : "axis");
}

/// The bytes `op` reads and writes: its tensor operands and results.
static int64_t touchedBytes(Operation *op) {
  int64_t bytes = 0;
  for (Value value : llvm::concat<Value>(op->getOperands(), op->getResults()))
    if (isa<RankedTensorType>(value.getType()))
      bytes += bytesOf(value.getType());
  return bytes;
}

/// Ring steps of a collective over `ranks`: k - 1, twice for an all_reduce
/// (a reduce-scatter, then an all-gather).
static int64_t ringSteps(Operation *op, int64_t ranks) {
  bool twice = collectiveKindOf(op) == Collective::AllReduce ||
               isa<VocabParallelLossOpInterface>(op);
  return (twice ? 2 : 1) * (ranks - 1);
}

namespace {
/// One entry point run on the estimate's compute stream and links: one
/// per mesh axis (tensor parallelism within a node, data parallelism
/// across them: separate wires), and one to host memory.
struct Timeline {
  double compute = 0, computing = 0, recomputing = 0, communicating = 0;
  double matmulBound = 0, attentionBound = 0, memoryBound = 0;
  llvm::StringMap<double> links;      // a link -> when it is free
  llvm::DenseMap<Value, double> done; // a handle -> when its transfer ends

  double end() const {
    double last = compute;
    for (const auto &link : links)
      last = std::max(last, link.second);
    return last;
  }

  /// Queues a transfer of `seconds` on `link`, after what it waits for;
  /// compute goes on beside a started one where it can.
  void transfer(Operation *op, StringRef link, double seconds,
                bool overlapsCompute) {
    double &free = links[link];
    free = std::max(compute, free) + seconds;
    communicating += seconds;
    if (isAsyncStart(op) && overlapsCompute)
      done[op->getResult(0)] = free;
    else
      compute = free;
  }

  void run(func::FuncOp function, const llvm::StringMap<int64_t> &axisSizes,
           const llvm::StringMap<ResourceReport::Link> &axisLinks,
           const ResourceReport::Rates &rates) {
    Block &body = function.getBody().front();
    // The train step's layers recomputed in its backward: layer ops after
    // the forward's loss (the backward's own ops have no layer).
    Operation *loss = forwardLoss(body);
    bool backward = false;
    for (Operation &op : body) {
      if (auto wait = dyn_cast<WaitOp>(op)) {
        compute = std::max(compute, done.lookup(wait.getHandle()));
        continue;
      }
      StringAttr axis = axisOf(&op);
      int64_t ranks = axis ? axisSizes.lookup(axis.getValue()) : 1;
      if (int64_t bytes = axis ? sentBytes(&op, ranks).second : 0) {
        auto found = axisLinks.find(axis.getValue());
        const ResourceReport::Link &link =
            found != axisLinks.end() ? found->second : rates.link;
        transfer(&op, axis.getValue(),
                 bytes / link.bytesPerSecond +
                     ringSteps(&op, ranks) * link.latencySeconds,
                 rates.communicationOverlapsCompute);
      } else if (isa<OffloadOp, ReloadOp, OffloadStartOp, ReloadStartOp>(op)) {
        transfer(&op, "host",
                 bytesOf(op.getOperand(0).getType()) /
                         rates.host.bytesPerSecond +
                     rates.host.latencySeconds,
                 rates.communicationOverlapsCompute);
        continue;
      }
      if (isAsyncStart(&op) || isa<func::ReturnOp>(op))
        continue;
      bool attention = isa<AttentionOp, AttentionGradOp>(op) &&
                       rates.attentionFlopsPerSecond > 0;
      double seconds = flopsOf(&op) / (attention ? rates.attentionFlopsPerSecond
                                                 : rates.flopsPerSecond);
      double moving = rates.memoryBytesPerSecond > 0
                          ? touchedBytes(&op) / rates.memoryBytesPerSecond
                          : 0;
      (moving > seconds ? memoryBound
                        : attention ? attentionBound
                                    : matmulBound) += std::max(seconds, moving);
      seconds = std::max(seconds, moving);
      compute += seconds;
      computing += seconds;
      if (backward && layerOf(&op))
        recomputing += seconds;
      backward = backward || &op == loss;
    }
  }
};
} // namespace

FailureOr<ResourceReport>
mlir::twill::reportResources(ModuleOp module, int64_t microSteps,
                             ResourceReport::Rates rates) {
  ResourceReport report;
  report.rates = rates;
  // The arena twill-plan-memory laid out, when it has run.
  if (auto arena = module->getAttrOfType<IntegerAttr>(kArenaBytesAttrName))
    report.arenaBytes = arena.getInt();
  if (auto arena = module->getAttrOfType<IntegerAttr>(kHostArenaBytesAttrName))
    report.hostArenaBytes = arena.getInt();
  // Each axis's size, and its link: its role's.
  llvm::StringMap<int64_t> axisSizes;
  llvm::StringMap<ResourceReport::Link> axisLinks;
  for (MeshOp mesh : module.getOps<MeshOp>())
    for (auto [index, axis] : llvm::enumerate(mesh.getAxes())) {
      StringRef name = cast<StringAttr>(axis).getValue();
      axisSizes[name] = mesh.getAxisSizes()[index];
      std::optional<AxisRole> role = mesh.roleOf(index);
      auto link = role ? rates.links.find(*role) : rates.links.end();
      axisLinks[name] = link != rates.links.end() ? link->second : rates.link;
      report.mesh += llvm::formatv("{0}{1}={2}", index ? " x " : "", name,
                                   mesh.getAxisSizes()[index]);
    }

  llvm::StringSet<> seen; // a buffer read by several entry points counts once
  for (func::FuncOp function : module.getOps<func::FuncOp>()) {
    for (BlockArgument argument : function.getArguments()) {
      unsigned index = argument.getArgNumber();
      int64_t bytes = bytesOf(argument.getType());
      if (auto name =
              function.getArgAttrOfType<StringAttr>(index, kParamAttrName)) {
        if (!seen.insert(name.getValue()).second)
          continue;
        (function.getArgAttr(index, kTrainableAttrName) ? report.trainableBytes
                                                        : report.frozenBytes) +=
            bytes;
      } else if (auto name = function.getArgAttrOfType<StringAttr>(
                     index, kStateAttrName)) {
        if (!seen.insert(name.getValue()).second)
          continue;
        auto role =
            function.getArgAttrOfType<StateRoleAttr>(index, kStateRoleAttrName);
        bool gradient = role && role.getKind() == StateKind::GradSum;
        (gradient ? report.gradientBytes : report.optimizerBytes) += bytes;
      } else if (auto name = function.getArgAttrOfType<StringAttr>(
                     index, kInputAttrName)) {
        if (seen.insert(("input " + name.getValue()).str()).second)
          report.inputBytes += bytes;
      }
    }

    function.walk([&](Operation *op) {
      for (Value result : op->getResults())
        if (isa<RankedTensorType>(result.getType()))
          report.valueBytes += bytesOf(result.getType());
      // Values the plan leaves memory of their own (outputs, what the host
      // reads; not a parameter or state written in place); a wait's is its
      // start's.
      auto offsets =
          op->getAttrOfType<DenseI64ArrayAttr>(kArenaOffsetsAttrName);
      if (offsets && !isa<WaitOp>(op))
        for (auto [offset, result] :
             llvm::zip(offsets.asArrayRef(), op->getResults()))
          if (offset < 0 && offset != kInPlaceOffset)
            (op->hasAttr(kHostReadAttrName) ? report.evaluationBytes
                                            : report.ownValueBytes) +=
                bytesOf(result.getType());
    });
    std::optional<EntryRole> role = entryRoleOf(function);
    int64_t repeats = role == EntryRole::TrainStep       ? microSteps
                      : role == EntryRole::OptimizerStep ? 1
                                                         : 0;
    // DPO's precomputed reference: a pass before training, not a step's.
    if (role == EntryRole::Reference) {
      Timeline pass;
      pass.run(function, axisSizes, axisLinks, rates);
      report.referenceSeconds = pass.end();
      continue;
    }
    if (!repeats)
      continue; // @forward is evaluation, not the training step
    Timeline timeline;
    timeline.run(function, axisSizes, axisLinks, rates);
    report.computeSeconds += repeats * timeline.computing;
    report.matmulBoundSeconds += repeats * timeline.matmulBound;
    report.attentionBoundSeconds += repeats * timeline.attentionBound;
    report.memoryBoundSeconds += repeats * timeline.memoryBound;
    report.recomputeSeconds += repeats * timeline.recomputing;
    report.communicationSeconds += repeats * timeline.communicating;
    report.stepSeconds += repeats * timeline.end();
    function.walk([&](Operation *op) {
      StringAttr axis = axisOf(op);
      if (!axis)
        return;
      auto [kind, bytes] = sentBytes(op, axisSizes.lookup(axis.getValue()));
      if (kind.empty())
        return;
      ResourceReport::Traffic &traffic =
          report.traffic[{axis.getValue().str(), kind.str()}];
      traffic.calls += repeats;
      traffic.bytes += repeats * bytes;
    });
  }
  return report;
}

/// 1234567 -> "1234567 B (1.18 MiB)".
static std::string bytesText(int64_t bytes) {
  return llvm::formatv("{0} B ({1:f2} MiB)", bytes, bytes / 1048576.0).str();
}

void ResourceReport::print(llvm::raw_ostream &os) const {
  os << "Per rank, on mesh " << mesh << " (rank 0: the largest blocks)\n";
  os << "  frozen parameters:    " << bytesText(frozenBytes) << "\n";
  os << "  trainable parameters: " << bytesText(trainableBytes) << "\n";
  os << "  gradient sums:        " << bytesText(gradientBytes) << "\n";
  os << "  optimizer state:      " << bytesText(optimizerBytes) << "\n";
  os << "  computed values:      " << bytesText(valueBytes) << "\n";
  if (arenaBytes) {
    os << "    sharing an arena of " << bytesText(arenaBytes)
       << " (the memory plan)\n";
    os << "  the program needs:    " << bytesText(programBytes())
       << " (the arena, and the inputs and outputs with the rest)\n";
    if (hostArenaBytes)
      os << "  offloaded to host:    " << bytesText(hostArenaBytes)
         << " (the activations the backward reads, in host memory between "
            "the forward and the backward)\n";
    os << "  evaluating needs:     " << bytesText(evaluationBytes)
       << " more (the forward pass's logits, which the host reads; held "
          "from the first evaluation on)\n";
  }
  os << "Sent per optimizer step, per rank (ring algorithms):\n";
  if (traffic.empty())
    os << "  nothing: one rank\n";
  int64_t total = 0;
  for (const auto &[key, entry] : traffic) {
    os << llvm::formatv("  {0,-3} {1,-34} {2,6} calls  {3}\n", key.first,
                        key.second, entry.calls, bytesText(entry.bytes));
    total += entry.bytes;
  }
  os << "  total: " << bytesText(total) << "\n";
  if (communicationSeconds <= 0 && ratesName.empty())
    return; // one rank, rates by hand: nothing to overlap
  double hidden =
      std::max(0.0, computeSeconds + communicationSeconds - stepSeconds);
  if (ratesName.empty())
    os << llvm::formatv(
        "Overlap, by a cost estimate (matmuls and attention at {0} TFLOP/s; "
        "per mesh axis, one collective at a time at {1} GB/s):\n",
        rates.flopsPerSecond / 1e12, rates.link.bytesPerSecond / 1e9);
  else
    os << "Time, by a cost estimate at the rates of " << ratesName << ":\n";
  os << llvm::formatv(
      "  compute {0:f3} ms, communication {1:f3} ms, of "
      "which hidden behind compute {2:f3} ms ({3:f0}%)\n",
      1e3 * computeSeconds, 1e3 * communicationSeconds, 1e3 * hidden,
      communicationSeconds > 0 ? 100 * hidden / communicationSeconds : 0.0);
  if (!ratesName.empty()) {
    // The rates as the cluster file gives them (740, 1e-06).
    auto rate = [](double perSecond, double unit) {
      std::string text;
      llvm::raw_string_ostream(text) << llvm::format("%g", perSecond / unit);
      return text;
    };
    os << llvm::formatv(
        "  compute by what bounds each op: matmul FLOPs {0:f3} ms at {1} "
        "TFLOP/s, attention FLOPs {2:f3} ms at {3} TFLOP/s, bytes {4:f3} ms "
        "at {5} GB/s\n",
        1e3 * matmulBoundSeconds, rate(rates.flopsPerSecond, 1e12),
        1e3 * attentionBoundSeconds,
        rate(rates.attentionFlopsPerSecond > 0 ? rates.attentionFlopsPerSecond
                                               : rates.flopsPerSecond,
             1e12),
        1e3 * memoryBoundSeconds, rate(rates.memoryBytesPerSecond, 1e9));
  }
  os << llvm::formatv("  step {0:f3} ms", 1e3 * stepSeconds);
  if (recomputeSeconds > 0)
    os << llvm::formatv(" (recomputation {0:f3} ms of the compute)",
                        1e3 * recomputeSeconds);
  os << "\n";
  if (referenceSeconds > 0)
    os << llvm::formatv("  reference pass {0:f3} ms a micro-batch, once over "
                        "the data before training (dpo.reference "
                        "PRECOMPUTED)\n",
                        1e3 * referenceSeconds);
  if (waitedArenaBytes && arenaBytes)
    os << "  collectives in flight hold "
       << bytesText(arenaBytes - waitedArenaBytes)
       << " more of the arena than waited at once\n";
}
