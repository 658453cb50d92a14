//===- MoeShapes.h - a mixture of experts' decoders -------------*- C++ -*-===//
//
// The decoders both backends' runners of the family share: dispatch's,
// combine's and combine_weights_grad's sizes; grouped_matmul's and its
// weight gradient's dims, counts and each expert's GEMM.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_MOESHAPES_H
#define TWILL_RUNTIME_BACKEND_SHAPES_MOESHAPES_H

#include "opmodel/Shapes.h"
#include "runtime/backend/Gemm.h"
#include "runtime/backend/shapes/ShapeRule.h"
#include "support/HostDevice.h"

#include "llvm/Support/FormatVariadic.h"

#include <vector>

namespace twill {

/// `groups` groups of `tokens` tokens, `k` slots a token, values `width`
/// wide: each group has rows() rows.
struct DispatchShape {
  int64_t groups, tokens, k, width;
  TWILL_HOST_DEVICE int64_t rows() const { return tokens * k; }
};

/// Checks the instruction by its rule, and its dtypes: positions (operand
/// 1) i32, every other value f32 (weights, where there are, operand 2).
inline llvm::Expected<DispatchShape> dispatchShape(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return std::move(error);
  int operands = in.numOperands();
  std::vector<DType> dtypes(operands + 1, F32);
  dtypes[1] = I32;
  if (auto error = in.expect(operands, 1, dtypes))
    return std::move(error);
  llvm::ArrayRef<int64_t> positions = in.shape(1);
  return DispatchShape{positions[0], positions[1], positions[2], in.dim(0, 0)};
}

/// A grouped matmul (or its weight's gradient, `weightGrad`) checked: its
/// dims, and its dtypes, `type` but the counts' i32.
inline llvm::Expected<shapes::GroupedMatmulDims>
groupedMatmulShape(const InstructionView &in, bool weightGrad, DType type) {
  if (auto error = in.expect(3, 1, {type, type, I32, type}))
    return std::move(error);
  bool transposed = in->grouped_matmul().transpose_rhs();
  llvm::Expected<shapes::GroupedMatmulDims> dims =
      weightGrad ? shapes::groupedMatmulWeightGrad(in.shape(0), in.shape(1),
                                                   in.shape(2), in.shape(3),
                                                   transposed)
                 : shapes::groupedMatmul(in.shape(0), in.shape(1), in.shape(2),
                                         in.shape(3), transposed);
  if (!dims)
    return in.fail(llvm::toString(dims.takeError()));
  return dims;
}

/// Fails unless each count (host memory) is 0 or more and a group's sum at
/// most its rows.
inline llvm::Error checkCounts(const InstructionView &in,
                               const shapes::GroupedMatmulDims &dims,
                               const int32_t *counts) {
  for (int64_t g = 0; g < dims.groups; ++g) {
    int64_t sum = 0;
    for (int64_t e = 0; e < dims.experts; ++e, ++counts) {
      if (*counts < 0)
        return in.fail(llvm::formatv("group {0} gives expert {1} {2} rows", g,
                                     e, *counts));
      sum += *counts;
    }
    if (sum > dims.rows)
      return in.fail(llvm::formatv("group {0}'s counts sum to {1}, past its "
                                   "{2} rows",
                                   g, sum, dims.rows));
  }
  return llvm::Error::success();
}

/// Calls `gemm(g, e, first, count)` for each group's experts with rows
/// (their range of the group's rows), then returns the rows each group
/// leaves (its first row past them, a group at a time).
template <typename Gemm>
std::vector<int64_t> forEachExpert(const shapes::GroupedMatmulDims &dims,
                                   const int32_t *counts, Gemm gemm) {
  std::vector<int64_t> used(dims.groups);
  for (int64_t g = 0; g < dims.groups; ++g)
    for (int64_t e = 0; e < dims.experts; ++e) {
      int64_t count = counts[g * dims.experts + e];
      if (count > 0)
        gemm(g, e, used[g], count);
      used[g] += count;
    }
  return used;
}

/// The product of expert `e`'s `count` rows of group `g` from `first`:
/// rows times the weight (grouped_matmul), or, accumulated, the weight's
/// gradient (`weightGrad`: rows^T grad, or grad^T rows transposed).
/// Values are `bytes` wide; `in` rows, `weight` (or grad) and `out` are
/// the instruction's operand 0, operand 1 and result.
inline RowMajorGemm expertGemm(const shapes::GroupedMatmulDims &d,
                               bool transposed, bool weightGrad, int64_t g,
                               int64_t e, int64_t first, int64_t count,
                               const void *in, const void *weight, void *out,
                               int64_t bytes) {
  auto at = [&](const void *base, int64_t elements) {
    return static_cast<const char *>(base) + elements * bytes;
  };
  int64_t row = g * d.rows + first;
  RowMajorGemm gemm;
  gemm.floatResult = false;
  if (!weightGrad) {
    gemm.m = count, gemm.n = d.n, gemm.k = d.k;
    gemm.a = at(in, row * d.k), gemm.lda = d.k;
    gemm.transB = transposed;
    gemm.b = at(weight, e * d.n * d.k), gemm.ldb = transposed ? d.k : d.n;
    gemm.c = const_cast<char *>(at(out, row * d.n)), gemm.ldc = d.n;
    return gemm;
  }
  // The rows of the values (k wide) and of the gradient (n wide).
  const void *values = at(in, row * d.k), *grad = at(weight, row * d.n);
  gemm.transA = true, gemm.k = count, gemm.accumulate = true;
  gemm.m = transposed ? d.n : d.k, gemm.n = transposed ? d.k : d.n;
  gemm.a = transposed ? grad : values, gemm.lda = transposed ? d.n : d.k;
  gemm.b = transposed ? values : grad, gemm.ldb = gemm.n;
  gemm.c = const_cast<char *>(at(out, e * d.n * d.k)), gemm.ldc = gemm.n;
  return gemm;
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_MOESHAPES_H
