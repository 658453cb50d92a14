//===- Pipelines.cpp - the pass pipeline twillc runs ----------------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"

void mlir::twill::buildCompilePipeline(OpPassManager &pm,
                                       const ::twill::JobConfig &job,
                                       Stage until) {
  if (until == Stage::Traced)
    return;
  const ::twill::TrainConfig &train = job.train();
  if (train.precision() == ::twill::TrainConfig::BF16)
    pm.addPass(createMixedPrecision());
  pm.addPass(createAutodiff());
  OptimizerOptions optimizer;
  optimizer.lr = train.lr();
  optimizer.beta1 = train.beta1();
  optimizer.beta2 = train.beta2();
  optimizer.eps = train.eps();
  optimizer.weightDecay = train.weight_decay();
  optimizer.warmupSteps = train.warmup_steps();
  optimizer.maxGradNorm = train.max_grad_norm();
  pm.addPass(createOptimizer(optimizer));
  if (until == Stage::Differentiated)
    return;
  bool sequenceParallel = job.parallel().sequence_parallel();
  pm.addPass(createPropagateSharding({sequenceParallel}));
  if (until == Stage::Placed)
    return;
  pm.addPass(createPartition({sequenceParallel}));
  ::twill::ParallelConfig::ActivationCheckpointing checkpointing =
      job.parallel().activation_checkpointing();
  if (checkpointing != ::twill::ParallelConfig::NONE)
    pm.addPass(createRematerialize(
        {checkpointing == ::twill::ParallelConfig::SELECTIVE,
         job.parallel().checkpoint_layers()}));
  pm.addPass(createFuseEpilogues());
  pm.addPass(createFuseDequantize());
  if (job.parallel().offload_activations())
    pm.addPass(createOffload({job.parallel().offload_layers()}));
  if (until == Stage::Partitioned)
    return;
  if (job.parallel().overlap_communication())
    pm.addPass(createSchedule({job.parallel().prefetch_layers()}));
  pm.addPass(createPlanMemory());
}
