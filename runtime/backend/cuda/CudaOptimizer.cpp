//===- CudaOptimizer.cpp - the optimizer step -----------------------------===//
//
// Norms of gradients, the scalar ops of clipping and the schedule, and
// AdamW (CudaOptimizerKernels.cu).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/shapes/OptimizerShapes.h"

using namespace twill;

/// global_norm and sum_squares: one scalar from every element of every
/// input.
llvm::Error cuda::runSquares(const InstructionView &in, Device &device) {
  if (auto error = squaresShape(in))
    return error;
  int inputs = in.numOperands();
  llvm::Expected<void *> space = device.scratchSpace(0, sizeof(double));
  if (!space)
    return space.takeError();
  double *accumulator = static_cast<double *>(*space);
  if (auto error = checkCuda(
          cudaMemsetAsync(accumulator, 0, sizeof(double), device.stream),
          "cudaMemsetAsync"))
    return error;
  for (int i = 0; i < inputs; ++i)
    cuda::accumulateSquares(in.data<float>(i), in.count(i), accumulator,
                            device.stream);
  cuda::finishSquares(accumulator, in.opcode() == GLOBAL_NORM,
                      in.data<float>(inputs), device.stream);
  return llvm::Error::success();
}

/// The scalar ops of the optimizer step.
llvm::Error cuda::runScalar(const InstructionView &in, Device &device) {
  if (auto error = scalarShape(in))
    return error;
  Opcode op = in.opcode();
  if (op == LR_SCHEDULE) {
    cuda::scheduledLr(in.data<int64_t>(0), in.data<int64_t>(1),
                      in->lr_schedule().lr(), in->lr_schedule().warmup_steps(),
                      in.data<float>(2), device.stream);
  } else if (op == INCREMENT) {
    cuda::increment(in.data<int64_t>(0), in.data<int64_t>(1), device.stream);
  } else {
    cuda::clipCoefficient(in.data<float>(0), in->clip_coefficient().max_norm(),
                          in.data<float>(1), device.stream);
  }
  return llvm::Error::success();
}

llvm::Error cuda::runAdamW(const InstructionView &in, Device &device) {
  llvm::Expected<AdamWSettings> settings = adamwSettings(in);
  if (!settings)
    return settings.takeError();
  cuda::adamw(in.data<float>(0), in.data<float>(1), in.data<float>(2),
              in.data<float>(3), in.data<float>(4), in.data<float>(5),
              in.data<int64_t>(6), *settings, in.data<float>(7),
              in.data<float>(8), in.data<float>(9), in.count(0), device.stream);
  return llvm::Error::success();
}
