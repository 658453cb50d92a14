//===- Planner.h - choosing mesh, checkpointing, micro-batch ----*- C++ -*-===//
//
// twillc --plan: for a job and a cluster, every mesh the cluster's devices
// make (dp x tp, tensor parallelism within a node), every activation
// checkpointing (NONE, SELECTIVE, FULL) and every split of the step's rows
// into micro-batch x gradient accumulation, each compiled and costed
// (ResourceReport's estimate at the cluster's rates); those whose plan does
// not fit the devices' memory dropped, the rest ranked by predicted tokens
// per second per device, and the winner written as a job.
//
// A model of many layers is costed from compiles of 3 and 4 of its layers,
// extrapolated linearly (each layer is the same program), which makes the
// search take seconds; the winner is then compiled whole, and replaced by
// the next if the whole program does not fit after all.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_TOOLS_TWILLC_PLANNER_H
#define TWILL_TOOLS_TWILLC_PLANNER_H

#include "passes/ResourceReport.h"
#include "proto/cluster.pb.h"
#include "proto/job_config.pb.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace twill {

/// Compiles a job and costs it at the given rates (failure: it does not
/// compile, and has said why).
using CostFn = llvm::function_ref<mlir::FailureOr<mlir::twill::ResourceReport>(
    const JobConfig &, const mlir::twill::ResourceReport::Rates &)>;

/// The cost estimate's rates for mesh dp x tp on `cluster`: its matmul and
/// memory rates, the tp axis on the links within a node, the dp axis on
/// those between nodes when its ranks span nodes.
mlir::twill::ResourceReport::Rates ratesOn(const ClusterConfig &cluster,
                                           const JobConfig &job);

/// Plans `job` on `cluster` (named `clusterName` in the table): prints the
/// best `rows` candidates to `os` and writes the winner to `output`. 0, or
/// 1 after saying why nothing fits.
int planJob(const JobConfig &job, const ClusterConfig &cluster,
            llvm::StringRef clusterName, llvm::StringRef output, int rows,
            CostFn cost, llvm::raw_ostream &os);

} // namespace twill

#endif // TWILL_TOOLS_TWILLC_PLANNER_H
