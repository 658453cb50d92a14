//===- Gemm.h - one GEMM, row- and column-major -----------------*- C++ -*-===//
//
// Twill's tensors are row-major; cuBLAS and cuBLASLt are column-major. A
// row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T: the
// operands swap and so do m and n, nothing moves in memory. These plain
// descriptions are what the backends hand their libraries, so the mapping
// is tested on the cpu (GemmTest) although only the GPU runs it.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_GEMM_H
#define TWILL_RUNTIME_BACKEND_GEMM_H

#include <array>
#include <cstdint>

namespace twill {

/// Row-major C = alpha op(A) op(B) (+ C when `accumulate`), `batch` times,
/// each operand advancing by its stride (in elements). A and B hold the
/// values' storage type; C is fp32 when `floatResult`, else that type.
struct RowMajorGemm {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  const void *a = nullptr;
  int64_t lda = 0, strideA = 0;
  const void *b = nullptr;
  int64_t ldb = 0, strideB = 0;
  void *c = nullptr;
  int64_t ldc = 0, strideC = 0;
  int64_t batch = 1;
  float alpha = 1;
  bool accumulate = false, floatResult = true;
};

/// The same product for a column-major library: C (m x n, leading dim ldc)
/// = alpha op(A) op(B) (+ C), A and B as the library names them.
struct ColumnMajorGemm {
  bool transA, transB;
  int64_t m, n, k;
  const void *a;
  int64_t lda, strideA;
  const void *b;
  int64_t ldb, strideB;
  void *c;
  int64_t ldc, strideC;
  int64_t batch;
};

inline ColumnMajorGemm toColumnMajor(const RowMajorGemm &g) {
  return {g.transB,  g.transA, g.n,       g.m,       g.k,
          g.b,       g.ldb,    g.strideB, g.a,       g.lda,
          g.strideA, g.c,      g.ldc,     g.strideC, g.batch};
}

/// A stored matrix as cuBLASLt's layouts describe it: rows x columns,
/// column-major with leading dimension `ld`, `batch` of them `stride`
/// elements apart.
struct StoredMatrix {
  int64_t rows, columns, ld, batch, stride;
};

/// The layouts of A, B and C of a column-major GEMM: an operand read
/// transposed is stored the other way round.
inline std::array<StoredMatrix, 3> storedMatrices(const ColumnMajorGemm &g) {
  return {StoredMatrix{g.transA ? g.k : g.m, g.transA ? g.m : g.k, g.lda,
                       g.batch, g.strideA},
          StoredMatrix{g.transB ? g.n : g.k, g.transB ? g.k : g.n, g.ldb,
                       g.batch, g.strideB},
          StoredMatrix{g.m, g.n, g.ldc, g.batch, g.strideC}};
}

/// The largest power of two, at most 256 (the most cuBLASLt asks for),
/// dividing the address of every matrix of a batch: `base`, and `base` plus
/// each multiple of `strideBytes`. A buffer starts on 64 bytes, but an
/// operand inside one need not (a tile of rows at an odd offset).
inline uint32_t alignmentOf(const void *base, int64_t strideBytes) {
  uint64_t bits =
      uint64_t(reinterpret_cast<uintptr_t>(base)) | uint64_t(strideBytes) | 256;
  return uint32_t(bits & (~bits + 1));
}

/// The alignments of A, B, C (the addend) and D (the result) of a
/// column-major GEMM whose elements take `elementBytes`: what cuBLASLt must
/// be told, so that it picks no algorithm that needs more.
inline std::array<uint32_t, 4> gemmAlignments(const ColumnMajorGemm &g,
                                              const void *addend,
                                              int64_t elementBytes) {
  auto of = [&](const void *base, int64_t stride) {
    return alignmentOf(base, g.batch > 1 ? stride * elementBytes : 0);
  };
  return {of(g.a, g.strideA), of(g.b, g.strideB),
          of(addend ? addend : g.c, g.strideC), of(g.c, g.strideC)};
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_GEMM_H
