//===- OptimizerShapes.h - norms, scalars and AdamW ------------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_OPTIMIZERSHAPES_H
#define TWILL_RUNTIME_BACKEND_SHAPES_OPTIMIZERSHAPES_H

#include "opmodel/Shapes.h"
#include "runtime/backend/InstructionView.h"

namespace twill {

/// global_norm and sum_squares: f32 inputs -> one f32 scalar.
inline llvm::Error squaresShape(const InstructionView &in) {
  int inputs = in.numOperands();
  if (in.numResults() != 1 || in.dtype(inputs) != F32 || in.count(inputs) != 1)
    return in.fail("expects inputs and one f32 scalar result");
  for (int i = 0; i < inputs; ++i)
    if (in.dtype(i) != F32)
      return in.fail("inputs must be f32");
  return llvm::Error::success();
}

/// clip_coefficient (norm -> coefficient, f32), lr_schedule (step, total
/// steps -> lr: i64, i64 -> f32) and increment (step -> step + 1, i64):
/// scalars.
inline llvm::Error scalarShape(const InstructionView &in) {
  llvm::Error error = in.opcode() == LR_SCHEDULE
                          ? in.expect(2, 1, {I64, I64, F32})
                      : in.opcode() == INCREMENT ? in.expect(1, 1, {I64, I64})
                                                 : in.expect(1, 1, {F32, F32});
  if (error)
    return error;
  for (int i = 0; i < in.numOperands() + in.numResults(); ++i)
    if (in.count(i) != 1)
      return in.fail("expects scalars");
  return llvm::Error::success();
}

/// adamw (param, grad, exp_avg, exp_avg_sq, lr, grad_scale, step) ->
/// (param, exp_avg, exp_avg_sq): its settings, once the shapes agree.
inline llvm::Expected<AdamWSettings> adamwSettings(const InstructionView &in) {
  if (auto error =
          in.expect(7, 3, {F32, F32, F32, F32, F32, F32, I64, F32, F32, F32}))
    return std::move(error);
  if (auto error = in.check(shapes::adamw(in.shape(0), in.shape(1), in.shape(2),
                                          in.shape(3), in.shape(7), in.shape(8),
                                          in.shape(9))))
    return std::move(error);
  if (in.count(4) != 1 || in.count(5) != 1 || in.count(6) != 1)
    return in.fail("lr, grad_scale and step must be scalars");
  const AdamwAttributes &adamw = in->adamw();
  return AdamWSettings{adamw.beta1(), adamw.beta2(), adamw.eps(),
                       adamw.weight_decay()};
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_OPTIMIZERSHAPES_H
