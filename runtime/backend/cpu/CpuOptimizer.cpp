//===- CpuOptimizer.cpp - norms, the schedule and AdamW -------------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/OptimizerShapes.h"
#include "support/ElementMath.h"

#include <cmath>

using namespace twill;

/// global_norm, or sum_squares: the (root of the) sum of squares of every
/// input's elements, in order.
llvm::Error cpu::runSquares(const InstructionView &in) {
  if (auto error = squaresShape(in))
    return error;
  int inputs = in.numOperands();
  double sumSquares = 0;
  for (int i = 0; i < inputs; ++i)
    cpu::accumulateSquares(in.data<float>(i), in.count(i), sumSquares);
  *in.data<float>(inputs) =
      float(in.opcode() == GLOBAL_NORM ? std::sqrt(sumSquares) : sumSquares);
  return llvm::Error::success();
}

/// clip_coefficient (norm -> coefficient), lr_schedule (step, total steps ->
/// lr) and increment (step -> step + 1): scalars.
llvm::Error cpu::runScalar(const InstructionView &in) {
  if (auto error = scalarShape(in))
    return error;
  if (in.opcode() == CLIP_COEFFICIENT) {
    *in.data<float>(1) = math::clipCoefficient(
        *in.data<float>(0), in->clip_coefficient().max_norm());
    return llvm::Error::success();
  }
  if (in.opcode() == LR_SCHEDULE) {
    *in.data<float>(2) = math::scheduledLr(
        *in.data<int64_t>(0), *in.data<int64_t>(1), in->lr_schedule().lr(),
        in->lr_schedule().warmup_steps());
    return llvm::Error::success();
  }
  *in.data<int64_t>(1) = *in.data<int64_t>(0) + 1;
  return llvm::Error::success();
}

llvm::Error cpu::runAdamW(const InstructionView &in) {
  llvm::Expected<AdamWSettings> settings = adamwSettings(in);
  if (!settings)
    return settings.takeError();
  cpu::adamw(in.data<float>(0), in.data<float>(1), in.data<float>(2),
             in.data<float>(3), *in.data<float>(4), *in.data<float>(5),
             *in.data<int64_t>(6), *settings, in.data<float>(7),
             in.data<float>(8), in.data<float>(9), in.count(0));
  return llvm::Error::success();
}
