//===- CpuMoe.cpp - a mixture of experts' routing -------------------------===//
//
// route and route_grad: support/Routing.h's function of a token, over the
// tokens in parallel.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/shapes/ShapeRule.h"
#include "support/Routing.h"

using namespace twill;

/// logits [tokens..., experts] -> weights [tokens..., k], indices (i32).
llvm::Error cpu::runRoute(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(1, 2, {F32, F32, I32}))
    return error;
  int64_t experts = in.dim(0, 0), k = in.dim(1, 0);
  const float *logits = in.data<float>(0);
  float *weights = in.data<float>(1);
  int32_t *indices = in.data<int32_t>(2);
  bool normalize = in->route().normalize();
#pragma omp parallel for schedule(static)
  for (int64_t token = 0; token < in.count(1) / k; ++token)
    routing::route(logits + token * experts, experts, k, normalize,
                   weights + token * k, indices + token * k);
  return llvm::Error::success();
}

/// logits, indices and grad [tokens..., k] -> the logits' gradient; an
/// index outside the experts is refused before any is read.
llvm::Error cpu::runRouteGrad(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 1, {F32, I32, F32, F32}))
    return error;
  int64_t experts = in.dim(0, 0), k = in.dim(1, 0);
  const int32_t *indices = in.data<int32_t>(1);
  for (int64_t i = 0; i < in.count(1); ++i)
    if (indices[i] < 0 || indices[i] >= experts)
      return in.fail(llvm::formatv("index {0} names expert {1} of {2}", i,
                                   indices[i], experts));
  const float *logits = in.data<float>(0), *grad = in.data<float>(2);
  float *result = in.data<float>(3);
  bool normalize = in->route().normalize();
#pragma omp parallel for schedule(static)
  for (int64_t token = 0; token < in.count(1) / k; ++token)
    routing::routeGrad(logits + token * experts, experts, indices + token * k,
                       grad + token * k, k, normalize,
                       result + token * experts);
  return llvm::Error::success();
}
