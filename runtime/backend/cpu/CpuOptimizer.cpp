//===- CpuOptimizer.cpp - norms, the schedule and AdamW -------------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/OptimizerShapes.h"

#include <cmath>

using namespace twill;

/// global_norm, or sum_squares: the (root of the) sum of squares of every
/// input's elements, in order.
static llvm::Error runSquares(const InstructionView &in) {
  int inputs = in.numOperands();
  if (in.numResults() != 1 || in.dtype(inputs) != F32 || in.count(inputs) != 1)
    return in.fail("expects inputs and one f32 scalar result");
  double sumSquares = 0;
  for (int i = 0; i < inputs; ++i) {
    if (in.dtype(i) != F32)
      return in.fail("inputs must be f32");
    cpu::accumulateSquares(in.data<float>(i), in.count(i), sumSquares);
  }
  *in.data<float>(inputs) =
      float(in.opcode() == GLOBAL_NORM ? std::sqrt(sumSquares) : sumSquares);
  return llvm::Error::success();
}

/// clip_coefficient (norm -> coefficient), lr_schedule (step, total steps ->
/// lr) and increment (step -> step + 1): scalars.
static llvm::Error runScalar(const InstructionView &in) {
  if (in.opcode() == CLIP_COEFFICIENT) {
    if (auto error = in.expect(1, 1, {F32, F32}, {0, 0}))
      return error;
    if (in.count(0) != 1 || in.count(1) != 1)
      return in.fail("expects scalars");
    *in.data<float>(1) = cpu::clipCoefficient(
        *in.data<float>(0), in->clip_coefficient().max_norm());
    return llvm::Error::success();
  }
  if (in.opcode() == LR_SCHEDULE) {
    if (auto error = in.expect(2, 1, {I64, I64, F32}, {0, 0, 0}))
      return error;
    if (in.count(0) != 1 || in.count(1) != 1 || in.count(2) != 1)
      return in.fail("expects scalars");
    *in.data<float>(2) = cpu::scheduledLr(
        *in.data<int64_t>(0), *in.data<int64_t>(1), in->lr_schedule().lr(),
        in->lr_schedule().warmup_steps());
    return llvm::Error::success();
  }
  if (auto error = in.expect(1, 1, {I64, I64}, {0, 0}))
    return error;
  if (in.count(0) != 1 || in.count(1) != 1)
    return in.fail("expects scalars");
  *in.data<int64_t>(1) = *in.data<int64_t>(0) + 1;
  return llvm::Error::success();
}

static llvm::Error runAdamW(const InstructionView &in) {
  llvm::Expected<AdamWSettings> settings = adamwSettings(in);
  if (!settings)
    return settings.takeError();
  cpu::adamw(in.data<float>(0), in.data<float>(1), in.data<float>(2),
             in.data<float>(3), *in.data<float>(4), *in.data<float>(5),
             *in.data<int64_t>(6), *settings, in.data<float>(7),
             in.data<float>(8), in.data<float>(9), in.count(0));
  return llvm::Error::success();
}

void cpu::addOptimizerKernels(Kernels &kernels) {
  kernels.add({GLOBAL_NORM, SUM_SQUARES}, runSquares);
  kernels.add({CLIP_COEFFICIENT, LR_SCHEDULE, INCREMENT}, runScalar);
  kernels.add({ADAMW}, runAdamW);
}
