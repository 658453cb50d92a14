//===- CpuMoe.cpp - a mixture of experts' routing and dispatch ------------===//
//
// route and route_grad: support/Routing.h's function of a token, over the
// tokens in parallel; the load-balancing loss: its functions too,
// expert_load's sums an expert at a time; expert_positions, dispatch and
// combine: support/Dispatch.h's, a group, a slot or a token at a time;
// grouped_matmul and its weight's gradient: a oneDNN GEMM an expert a
// group.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/cpu/CpuKernels.h"

#include "runtime/backend/shapes/MoeShapes.h"
#include "support/Dispatch.h"
#include "support/Routing.h"

#include <algorithm>
#include <vector>

using namespace twill;

/// Refuses an index of operand `operand` outside `experts` experts, before
/// any is read.
static llvm::Error checkIndices(const InstructionView &in, int operand,
                                int64_t experts) {
  const int32_t *indices = in.data<int32_t>(operand);
  for (int64_t i = 0; i < in.count(operand); ++i)
    if (indices[i] < 0 || indices[i] >= experts)
      return in.fail(llvm::formatv("index {0} names expert {1} of {2}", i,
                                   indices[i], experts));
  return llvm::Error::success();
}

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

/// logits, indices and grad [tokens..., k] -> the logits' gradient.
llvm::Error cpu::runRouteGrad(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 1, {F32, I32, F32, F32}))
    return error;
  int64_t experts = in.dim(0, 0), k = in.dim(1, 0);
  if (auto error = checkIndices(in, 1, experts))
    return error;
  const int32_t *indices = in.data<int32_t>(1);
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

/// indices [groups, tokens, k] -> positions, counts [groups, experts].
llvm::Error cpu::runExpertPositions(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(1, 2, {I32, I32, I32}))
    return error;
  int64_t groups = in.dim(2, 1), experts = in.dim(2, 0);
  int64_t slots = in.count(0) / groups;
  if (auto error = checkIndices(in, 0, experts))
    return error;
  const int32_t *indices = in.data<int32_t>(0);
  int32_t *positions = in.data<int32_t>(1), *counts = in.data<int32_t>(2);
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g)
    dispatch::expertPositions(indices + g * slots, slots, experts,
                              positions + g * slots, counts + g * experts);
  return llvm::Error::success();
}

/// dispatchShape(in), its positions checked: each in its group's rows or
/// -1 (none), and, where the op writes rows by them (`scatters`), no row
/// twice.
static llvm::Expected<DispatchShape> checkedPositions(const InstructionView &in,
                                                      bool scatters) {
  llvm::Expected<DispatchShape> shape = dispatchShape(in);
  if (!shape)
    return shape.takeError();
  int64_t rows = shape->rows();
  const int32_t *position = in.data<int32_t>(1);
  std::vector<bool> taken(scatters ? rows : 0);
  for (int64_t g = 0; g < shape->groups; ++g) {
    std::fill(taken.begin(), taken.end(), false);
    for (int64_t s = 0; s < rows; ++s, ++position) {
      if (*position < -1 || *position >= rows)
        return in.fail(llvm::formatv("position {0} is row {1} of {2}",
                                     g * rows + s, *position, rows));
      if (scatters && *position >= 0 && taken[*position])
        return in.fail(llvm::formatv("position {0} is row {1} again",
                                     g * rows + s, *position));
      if (scatters && *position >= 0)
        taken[*position] = true;
    }
  }
  return shape;
}

/// input [groups, tokens, hidden], positions, weights -> rows; a row no
/// slot takes is zero.
llvm::Error cpu::runDispatch(const InstructionView &in) {
  llvm::Expected<DispatchShape> slots = checkedPositions(in, /*scatters=*/true);
  if (!slots)
    return slots.takeError();
  auto [groups, tokens, k, width] = *slots;
  const float *input = in.data<float>(0);
  const int32_t *positions = in.data<int32_t>(1);
  const float *weights = in.numOperands() == 3 ? in.data<float>(2) : nullptr;
  float *rows = in.data<float>(in.numOperands());
  // Positions checked distinct, a group's slots as many as its rows: with
  // every slot placed, every row is written; else the others are zeros.
  int64_t placed = groups * tokens * k;
  if (std::any_of(positions, positions + placed,
                  [](int32_t p) { return p < 0; }))
    cpu::fill(rows, in.count(in.numOperands()), 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t slot = 0; slot < placed; ++slot) {
    if (positions[slot] < 0)
      continue;
    int64_t group = slot / (tokens * k), token = slot / k;
    float weight = weights ? weights[slot] : 1.0f;
    float *row = rows + (group * tokens * k + positions[slot]) * width;
    for (int64_t h = 0; h < width; ++h)
      row[h] = input[token * width + h] * weight;
  }
  return llvm::Error::success();
}

/// rows [groups, tokens * k, hidden], positions, weights -> [groups,
/// tokens, hidden].
llvm::Error cpu::runCombine(const InstructionView &in) {
  llvm::Expected<DispatchShape> slots =
      checkedPositions(in, /*scatters=*/false);
  if (!slots)
    return slots.takeError();
  auto [groups, tokens, k, width] = *slots;
  const float *rows = in.data<float>(0);
  const int32_t *positions = in.data<int32_t>(1);
  const float *weights = in.numOperands() == 3 ? in.data<float>(2) : nullptr;
  float *result = in.data<float>(in.numOperands());
#pragma omp parallel for schedule(static)
  for (int64_t token = 0; token < groups * tokens; ++token) {
    const float *groupRows = rows + token / tokens * tokens * k * width;
    for (int64_t h = 0; h < width; ++h)
      result[token * width + h] = dispatch::combineElement(
          groupRows, positions + token * k,
          weights ? weights + token * k : nullptr, k, width, h);
  }
  return llvm::Error::success();
}

/// rows, positions, grad [groups, tokens, hidden] -> [groups, tokens, k].
llvm::Error cpu::runCombineWeightsGrad(const InstructionView &in) {
  llvm::Expected<DispatchShape> slots =
      checkedPositions(in, /*scatters=*/false);
  if (!slots)
    return slots.takeError();
  auto [groups, tokens, k, width] = *slots;
  const float *rows = in.data<float>(0), *grad = in.data<float>(2);
  const int32_t *positions = in.data<int32_t>(1);
  float *result = in.data<float>(3);
#pragma omp parallel for schedule(static)
  for (int64_t slot = 0; slot < groups * tokens * k; ++slot) {
    int64_t group = slot / (tokens * k), token = slot / k;
    result[slot] =
        positions[slot] < 0
            ? 0.0f
            : dispatch::weightGrad(
                  rows + (group * tokens * k + positions[slot]) * width,
                  grad + token * width, width);
  }
  return llvm::Error::success();
}

/// Runs grouped_matmul or its weight's gradient: each expert's GEMM over
/// its rows of each group, after the counts are checked.
static llvm::Error runGrouped(const InstructionView &in, bool weightGrad) {
  llvm::Expected<shapes::GroupedMatmulDims> dims =
      groupedMatmulShape(in, weightGrad, F32);
  if (!dims)
    return dims.takeError();
  const int32_t *counts = in.data<int32_t>(2);
  if (auto error = checkCounts(in, *dims, counts))
    return error;
  bool transposed = in->grouped_matmul().transpose_rhs();
  float *out = in.data<float>(3);
  if (weightGrad)
    cpu::fill(out, in.count(3), 0.0f);
  std::vector<int64_t> used = forEachExpert(
      *dims, counts, [&](int64_t g, int64_t e, int64_t first, int64_t count) {
        cpu::gemm(expertGemm(*dims, transposed, weightGrad, g, e, first, count,
                             in.data<float>(0), in.data<float>(1), out,
                             sizeof(float)));
      });
  if (!weightGrad) // rows past the counts' sum are zero
    for (int64_t g = 0; g < dims->groups; ++g)
      cpu::fill(out + (g * dims->rows + used[g]) * dims->n,
                (dims->rows - used[g]) * dims->n, 0.0f);
  return llvm::Error::success();
}

/// rows [groups, rows, k], weight, counts [groups, experts] -> [groups,
/// rows, n].
llvm::Error cpu::runGroupedMatmul(const InstructionView &in) {
  return runGrouped(in, /*weightGrad=*/false);
}

/// rows, grad [groups, rows, n], counts -> the weight's gradient.
llvm::Error cpu::runGroupedMatmulWeightGrad(const InstructionView &in) {
  return runGrouped(in, /*weightGrad=*/true);
}

/// logits [tokens..., experts], indices [tokens..., k], mask [tokens...]
/// -> probabilities, counts [experts], tokens []: each kept token's
/// softmax once, then each expert's sums over the tokens in parallel, in
/// double.
llvm::Error cpu::runExpertLoad(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 3, {F32, I32, I32, F32, F32, F32}))
    return error;
  int64_t experts = in.dim(0, 0), k = in.dim(1, 0), tokens = in.count(2);
  if (auto error = checkIndices(in, 1, experts))
    return error;
  const float *logits = in.data<float>(0);
  const int32_t *indices = in.data<int32_t>(1), *mask = in.data<int32_t>(2);
  float *probabilities = in.data<float>(3), *counts = in.data<float>(4);
  std::vector<routing::Softmax> softmax(tokens);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t)
    if (mask[t])
      softmax[t] = routing::softmaxOf(logits + t * experts, experts);
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < experts; ++e) {
    double probability = 0, count = 0;
    for (int64_t t = 0; t < tokens; ++t)
      if (mask[t]) {
        probability += softmax[t](logits[t * experts + e]);
        count += routing::chose(indices + t * k, k, e);
      }
    probabilities[e] = float(probability);
    counts[e] = float(count);
  }
  *in.data<float>(5) = float(std::count_if(
      mask, mask + tokens, [](int32_t kept) { return kept != 0; }));
  return llvm::Error::success();
}

/// logits, mask, grad [experts] -> the logits' gradient, zeros where the
/// mask is.
llvm::Error cpu::runExpertLoadGrad(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 1, {F32, I32, F32, F32}))
    return error;
  int64_t experts = in.dim(0, 0), tokens = in.count(1);
  const float *logits = in.data<float>(0), *grad = in.data<float>(2);
  const int32_t *mask = in.data<int32_t>(1);
  float *result = in.data<float>(3);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    if (mask[t])
      routing::softmaxGrad(logits + t * experts, experts, grad,
                           result + t * experts);
    else
      std::fill(result + t * experts, result + (t + 1) * experts, 0.0f);
  }
  return llvm::Error::success();
}

/// probabilities, counts [experts], tokens [] -> the loss [].
llvm::Error cpu::runLoadBalancingLoss(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 1, {F32, F32, F32, F32}))
    return error;
  *in.data<float>(3) = routing::loadBalancingLoss(
      in.data<float>(0), in.data<float>(1), *in.data<float>(2), in.count(0));
  return llvm::Error::success();
}

/// counts [experts], tokens [], grad [] -> dL/dprobabilities [experts].
llvm::Error cpu::runLoadBalancingLossGrad(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 1, {F32, F32, F32, F32}))
    return error;
  const float *counts = in.data<float>(0);
  float tokens = *in.data<float>(1), grad = *in.data<float>(2);
  float *result = in.data<float>(3);
  for (int64_t e = 0; e < in.count(0); ++e)
    result[e] =
        routing::loadBalancingLossGrad(counts[e], tokens, in.count(0), grad);
  return llvm::Error::success();
}
