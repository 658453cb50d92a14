//===- ResourceReport.h - per-rank memory and communication ----*- C++ -*-===//
//
// What `twillc --report` prints, read off the partitioned program: the bytes
// each rank keeps between steps (parameters, gradient sums, optimizer
// state: the types of the entry points' arguments are the rank's blocks),
// and the bytes each rank sends per optimizer step, by mesh axis and
// collective, for ring algorithms: an all_gather or reduce_scatter over k
// ranks sends (k - 1) blocks, an all_reduce 2 (k - 1) / k of the tensor, an
// all_to_all (k - 1) / k of it. Blocks are ceil(size / k), so rank 0 holds
// the largest: the figures are rank 0's. A cost estimate then times a
// step on one compute stream and one link, to show how much of the
// communication collectives in flight hide behind compute.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_PASSES_RESOURCEREPORT_H
#define TWILL_PASSES_RESOURCEREPORT_H

#include "dialects/twill/TwillAttrs.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>

namespace mlir::twill {

/// The floating-point operations of `op`, as opmodel/Flops.h counts those
/// of the instruction it is emitted as (0 for an op that is none).
double flopsOf(Operation *op);

struct ResourceReport {
  struct Traffic {
    int64_t calls = 0, bytes = 0;
  };
  int64_t frozenBytes = 0, trainableBytes = 0, gradientBytes = 0,
          optimizerBytes = 0;
  /// Every value the entry points compute, and the arena the runtime's
  /// memory plan fits them in (set by whoever plans it; 0: not planned).
  int64_t valueBytes = 0, arenaBytes = 0;
  /// The host arena of the offloaded activations (twill-offload).
  int64_t hostArenaBytes = 0;
  /// The per-step inputs, and the computed values the plan leaves memory
  /// of their own: outputs, and the values only an evaluation computes for
  /// the host to read (the forward pass's logits), which a rank allocates
  /// when it first evaluates.
  int64_t inputBytes = 0, ownValueBytes = 0, evaluationBytes = 0;
  /// What a rank allocates to train, as twill-train does: every buffer
  /// with memory of its own but the evaluation's, and the arena.
  int64_t programBytes() const {
    return frozenBytes + trainableBytes + gradientBytes + optimizerBytes +
           inputBytes + ownValueBytes + arenaBytes;
  }
  /// (axis, collective) -> calls and bytes sent per optimizer step.
  std::map<std::pair<std::string, std::string>, Traffic> traffic;
  std::string mesh; // "dp=2 x tp=4"

  /// An optimizer step's time by a cost estimate. The compute stream runs
  /// each op for max(FLOPs / flopsPerSecond (attention's at
  /// attentionFlopsPerSecond where set), bytes it reads and writes /
  /// memoryBytesPerSecond) (FLOPs: matmuls and attention; with
  /// memoryBytesPerSecond 0 the other ops are free); the collectives of
  /// each mesh axis cross that axis's link (`links`, else `link`) one at a
  /// time, a ring of k ranks taking k - 1 steps of the link's latency (an
  /// all_reduce 2 (k - 1)) besides its bytes over the bandwidth; copies to
  /// and from host memory cross the `host` link; and a wait (or a blocking
  /// collective or copy) holds compute until its transfer is done. Hidden
  /// communication is what overlaps compute (none, where
  /// communicationOverlapsCompute is false).
  struct Link {
    double bytesPerSecond = 100e9, latencySeconds = 0;
  };
  struct Rates {
    double flopsPerSecond = 400e12, memoryBytesPerSecond = 0;
    double attentionFlopsPerSecond = 0; // 0: flopsPerSecond
    Link link; // every mesh axis's, unless `links` has its role's
    std::map<AxisRole, Link> links; // by what a mesh axis parallelises
    Link host{50e9, 0};                // copies to and from host memory
    /// False where the cores that compute also move the bytes (ranks
    /// sharing a cpu): then every transfer holds compute until it is done.
    bool communicationOverlapsCompute = true;
  };
  Rates rates;
  /// The cluster the rates are (proto/cluster.proto); empty: rates given
  /// by hand (--report-tflops, --report-gbps).
  std::string ratesName;
  /// Compute (of which the backward's recomputation of checkpointed layers
  /// is `recomputeSeconds`), the time links are busy, and the step.
  double computeSeconds = 0, recomputeSeconds = 0, communicationSeconds = 0,
         stepSeconds = 0;
  /// The compute by the rate that bounds each op: FLOPs at flopsPerSecond
  /// (matmuls, the tiled loss), attention's FLOPs, or bytes at
  /// memoryBytesPerSecond; a measured rate of each rescales its part (the
  /// device check's calibration).
  double matmulBoundSeconds = 0, attentionBoundSeconds = 0,
         memoryBoundSeconds = 0;
  /// DPO's precomputed reference: its pass's time a micro-batch (0: none).
  double referenceSeconds = 0;
  /// The arena with every collective waited where it starts (set by
  /// whoever compiles that too; 0: not known).
  int64_t waitedArenaBytes = 0;

  void print(llvm::raw_ostream &os) const;
};

/// The report of a partitioned module whose optimizer step follows
/// `microSteps` train steps (gradient accumulation).
FailureOr<ResourceReport> reportResources(ModuleOp module, int64_t microSteps,
                                          ResourceReport::Rates rates = {});

} // namespace mlir::twill

#endif // TWILL_PASSES_RESOURCEREPORT_H
