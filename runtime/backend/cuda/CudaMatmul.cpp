//===- CudaMatmul.cpp - the matmul on cuBLASLt ----------------------------===//
//
// The instruction's GEMM (matmulGemm) in column-major form (Gemm.h: the
// operands swap, nothing moves), its matrices described as cuBLASLt's
// layouts: the mapping GemmTest checks on the cpu against an emulation of
// cuBLASLt. The addend is cuBLASLt's C and the result its D. The algorithm
// cuBLASLt's heuristic picks is kept per problem and operands' alignment, so
// each asks once. A quantized matmul forms its weight in the compute dtype
// a panel of rows at a time in scratch (at most kPanelBytes: most weights
// in one) and runs a GEMM on each; an FP8 weight's whose input
// round_to_fp8 rounded multiplies e4m3 codes instead (fp8Product).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/cuda/CudaOps.h"
#include "runtime/backend/shapes/MatmulShape.h"

#include <cublasLt.h>

using namespace twill;

namespace {

/// Descriptors of one call, destroyed with it.
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~LtCall() {
    for (cublasLtMatrixLayout_t layout : {a, b, c})
      if (layout)
        cublasLtMatrixLayoutDestroy(layout);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

/// cuBLASLt's layout of a stored matrix.
llvm::Error layout(cublasLtMatrixLayout_t &out, cudaDataType type,
                   const StoredMatrix &matrix) {
  if (auto error =
          checkBlas(cublasLtMatrixLayoutCreate(&out, type, matrix.rows,
                                               matrix.columns, matrix.ld),
                    "cublasLtMatrixLayoutCreate"))
    return error;
  if (matrix.batch == 1)
    return llvm::Error::success();
  int32_t count = int32_t(matrix.batch);
  int64_t stride = matrix.stride;
  if (auto error = checkBlas(
          cublasLtMatrixLayoutSetAttribute(
              out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
          "cublasLtMatrixLayoutSetAttribute"))
    return error;
  return checkBlas(cublasLtMatrixLayoutSetAttribute(
                       out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                       &stride, sizeof(stride)),
                   "cublasLtMatrixLayoutSetAttribute");
}

/// cuBLASLt's best algorithm for `call` within the workspace, for operands
/// A, B, C and D aligned as `alignments` says.
llvm::Expected<cublasLtMatmulAlgo_t>
chooseAlgorithm(Device &device, const LtCall &call,
                const std::array<uint32_t, 4> &alignments) {
  cublasLtMatmulPreference_t preference = nullptr;
  if (auto error = checkBlas(cublasLtMatmulPreferenceCreate(&preference),
                             "cublasLtMatmulPreferenceCreate"))
    return std::move(error);
  // cuBLASLt assumes 256-byte operands unless told less: only algorithms
  // that need no more than each operand's own alignment may be chosen.
  size_t workspace = Device::kMatmulWorkspaceBytes;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
      sizeof(workspace));
  for (auto [attribute, alignment] :
       llvm::zip_equal(std::array{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES},
                       alignments))
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(
          preference, attribute, &alignment, sizeof(alignment));
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int returned = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(device.lt, call.desc, call.a,
                                            call.b, call.c, call.c, preference,
                                            1, &heuristic, &returned);
  cublasLtMatmulPreferenceDestroy(preference);
  if (auto error = checkBlas(status, "cublasLtMatmulAlgoGetHeuristic"))
    return std::move(error);
  if (returned == 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cuBLASLt has no algorithm for a matmul");
  return heuristic.algo;
}

template <typename T>
llvm::Error setAttribute(const LtCall &call,
                         cublasLtMatmulDescAttributes_t attribute,
                         const T &value) {
  return checkBlas(cublasLtMatmulDescSetAttribute(call.desc, attribute, &value,
                                                  sizeof(value)),
                   "cublasLtMatmulDescSetAttribute");
}

} // namespace

llvm::Error cuda::gemm(Device &device, const RowMajorGemm &rowMajor, DType type,
                       const void *addend) {
  ColumnMajorGemm g = toColumnMajor(rowMajor);
  std::array<StoredMatrix, 3> stored = storedMatrices(g);
  cudaDataType dataType = type == BF16 ? CUDA_R_16BF : CUDA_R_32F;

  LtCall call;
  if (auto error = checkBlas(
          cublasLtMatmulDescCreate(&call.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          "cublasLtMatmulDescCreate"))
    return error;
  for (auto [attribute, transposed] :
       {std::pair(CUBLASLT_MATMUL_DESC_TRANSA, g.transA),
        std::pair(CUBLASLT_MATMUL_DESC_TRANSB, g.transB)})
    if (auto error = setAttribute(call, attribute,
                                  transposed ? CUBLAS_OP_T : CUBLAS_OP_N))
      return error;
  for (auto [made, matrix] :
       {std::pair(&call.a, stored[0]), std::pair(&call.b, stored[1]),
        std::pair(&call.c, stored[2])})
    if (auto error = layout(*made, dataType, matrix))
      return error;

  if (!addend)
    addend = g.c;
  // An algorithm is chosen for the problem and its operands' alignment,
  // which differs between calls of one shape (tiles at offsets).
  std::array<uint32_t, 4> alignments =
      gemmAlignments(g, addend, bytesPerElement(type));
  std::vector<int64_t> key = {dataType, g.transA, g.transB, g.m, g.n, g.k};
  for (const StoredMatrix &matrix : stored)
    key.insert(key.end(), {matrix.rows, matrix.columns, matrix.ld, matrix.batch,
                           matrix.stride});
  key.insert(key.end(), alignments.begin(), alignments.end());
  auto found = device.matmulAlgorithms.find(key);
  if (found == device.matmulAlgorithms.end()) {
    llvm::Expected<cublasLtMatmulAlgo_t> algorithm =
        chooseAlgorithm(device, call, alignments);
    if (!algorithm)
      return algorithm.takeError();
    found = device.matmulAlgorithms.emplace(key, *algorithm).first;
  }
  float alpha = rowMajor.alpha, beta = rowMajor.accumulate ? 1.0f : 0.0f;
  return checkBlas(cublasLtMatmul(device.lt, call.desc, &alpha, g.a, call.a,
                                  g.b, call.b, &beta, addend, call.c, g.c,
                                  call.c, &found->second,
                                  device.matmulWorkspace,
                                  Device::kMatmulWorkspaceBytes, device.stream),
                   "cublasLtMatmul");
}

/// result = alpha op(lhs) op(rhs) (+ addend): one cuBLASLt call, bf16 or
/// fp32 values, fp32 accumulation; the addend is cuBLASLt's C and the
/// result its D, so the epilogue's add reads the addend once and writes
/// nothing more.
llvm::Error cuda::runMatmul(const InstructionView &in, Device &device) {
  llvm::Expected<MatmulShape> shape = matmulShape(in);
  if (!shape)
    return shape.takeError();
  void *result = in.data<void>(shape->result);
  size_t resultBytes = in.count(shape->result) * bytesPerElement(in.dtype(0));
  if (resultBytes == 0)
    return llvm::Error::success();
  if (shape->k == 0) // an empty sum: the addend, or zeros
    return checkCuda(
        shape->hasAddend
            ? cudaMemcpyAsync(result, in.data<void>(2), resultBytes,
                              cudaMemcpyDeviceToDevice, device.stream)
            : cudaMemsetAsync(result, 0, resultBytes, device.stream),
        "cudaMemcpyAsync");
  if (auto error = cuda::gemm(
          device,
          matmulGemm(*shape, in.data<void>(0), in.data<void>(1), result),
          in.dtype(0), shape->hasAddend ? in.data<void>(2) : nullptr))
    return in.fail(llvm::toString(std::move(error)));
  return llvm::Error::success();
}

/// dequantize: the weight's block in the compute dtype, for the GEMMs.
llvm::Error cuda::runDequantizeNf4(const InstructionView &in, Device &device) {
  llvm::Expected<nf4::Geometry> g = nf4Geometry(in);
  if (!g)
    return g.takeError();
  if (g->rows * g->columns == 0)
    return llvm::Error::success();
  cuda::dequantizeNf4(in.data<uint8_t>(0), in.data<uint8_t>(1),
                      in.data<float>(2), in.data<float>(3), *g,
                      in.data<void>(4), in.dtype(4) == BF16, device.stream);
  return llvm::Error::success();
}

/// An FP8 weight's x W^T whose x round_to_fp8 rounded in blocks of 128,
/// onto `out` (which holds the addend or zeros): cuBLASLt multiplies the
/// e4m3 codes, each operand's blocks of 128 along the sum times their own
/// scale (VEC128_32F; the weight's are its rows'). False where cuBLASLt
/// has no algorithm for the problem: the caller forms the weight instead,
/// the same product of the same values.
static llvm::Expected<bool> fp8Product(const InstructionView &in,
                                       const QuantizedMatmulShape &s,
                                       Device &device, void *out) {
  constexpr int64_t kBlock = 128;
  const MatmulShape &p = s.product;
  int64_t m = p.batch * p.m, n = s.rows, k = s.columns;
  int64_t blocks = (k + kBlock - 1) / kBlock;
  bool bf16 = in.dtype(0) == BF16;
  cudaDataType outType = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  // cuBLASLt reads e4m3 codes in rows of whole 16 bytes.
  if (in->quantized_matmul().lhs_fp8_block_size() != kBlock || k % 16 != 0)
    return false;
  // Column-major: D [n, m] = W^T [n, k] x [k, m], W's codes as stored
  // ([n, k] row-major is [k, n] column-major) and x's alike (TN, as
  // Hopper's FP8 GEMMs take them).
  LtCall call;
  if (auto error = checkBlas(
          cublasLtMatmulDescCreate(&call.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          "cublasLtMatmulDescCreate"))
    return std::move(error);
  cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  llvm::Error error = llvm::Error::success();
  // Each attribute set in turn, until one fails.
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto &value) {
    if (!error)
      error = setAttribute(call, attribute, value);
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode);
  set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode);
  if (error)
    return std::move(error);
  for (auto [made, type, rows, columns] :
       {std::tuple(&call.a, CUDA_R_8F_E4M3, k, n),
        std::tuple(&call.b, CUDA_R_8F_E4M3, k, m),
        std::tuple(&call.c, outType, n, m)})
    if (auto failed = layout(*made, type, {rows, columns, rows, 1, 0}))
      return std::move(failed);

  const uint8_t *weight = in.data<uint8_t>(1);
  std::array<uint32_t, 4> alignments = {
      alignmentOf(weight, 0), 256, alignmentOf(out, 0), alignmentOf(out, 0)};
  std::vector<int64_t> key = {outType, m, n, k};
  key.insert(key.end(), alignments.begin(), alignments.end());
  auto found = device.fp8Algorithms.find(key);
  if (found == device.fp8Algorithms.end()) {
    llvm::Expected<cublasLtMatmulAlgo_t> algorithm =
        chooseAlgorithm(device, call, alignments);
    std::optional<cublasLtMatmulAlgo_t> chosen;
    if (algorithm)
      chosen = *algorithm;
    else
      llvm::errs() << "twill: no FP8 GEMM for " << m << "x" << n << "x" << k
                   << " (" << llvm::toString(algorithm.takeError())
                   << "): its weight is formed in the compute dtype\n";
    found = device.fp8Algorithms.emplace(key, chosen).first;
  }
  if (!found->second)
    return false;

  llvm::Expected<void *> codes = device.scratchSpace(0, size_t(m * k));
  if (!codes)
    return codes.takeError();
  llvm::Expected<void *> scales =
      device.scratchSpace(1, size_t(blocks * (m + n)) * sizeof(float));
  if (!scales)
    return scales.takeError();
  float *lhsScales = static_cast<float *>(*scales);
  float *weightScales = lhsScales + blocks * m;
  cuda::encodeFp8Blocks(in.data<void>(0), m, k, kBlock,
                        static_cast<uint8_t *>(*codes), lhsScales, bf16,
                        device.stream);
  cuda::broadcastRowScales(in.data<float>(2), n, blocks, weightScales,
                           device.stream);
  set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
      static_cast<const void *>(weightScales));
  set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
      static_cast<const void *>(lhsScales));
  if (error)
    return std::move(error);
  float alpha = float(p.alpha), beta = 1.0f;
  if (auto failed = checkBlas(
          cublasLtMatmul(device.lt, call.desc, &alpha, weight, call.a, *codes,
                         call.b, &beta, out, call.c, out, call.c,
                         &*found->second, device.matmulWorkspace,
                         Device::kMatmulWorkspaceBytes, device.stream),
          "cublasLtMatmul"))
    return std::move(failed);
  return true;
}

llvm::Error cuda::runQuantizedMatmul(const InstructionView &in,
                                     Device &device) {
  constexpr int64_t kPanelBytes = int64_t(256) << 20;
  llvm::Expected<QuantizedMatmulShape> s = quantizedMatmulShape(in);
  if (!s)
    return s.takeError();
  const MatmulShape &p = s->product;
  DType type = in.dtype(0);
  int64_t bytes = bytesPerElement(type);
  void *out = in.data<void>(p.result);
  size_t outBytes = in.count(p.result) * bytes;
  if (outBytes == 0)
    return llvm::Error::success();
  // The addend, or zeros, which every panel's GEMM adds to (the memory
  // plan may place the result over the addend: then nothing moves).
  void *addend = p.hasAddend ? in.data<void>(1 + s->parts) : nullptr;
  if (addend != out)
    if (auto error = checkCuda(
            addend ? cudaMemcpyAsync(out, addend, outBytes,
                                     cudaMemcpyDeviceToDevice, device.stream)
                   : cudaMemsetAsync(out, 0, outBytes, device.stream),
            "cudaMemcpyAsync"))
      return error;
  if (s->columns == 0) // an empty weight: nothing to add
    return llvm::Error::success();
  if (in->quantized_matmul().lhs_fp8_block_size() > 0) {
    llvm::Expected<bool> done = fp8Product(in, *s, device, out);
    if (!done)
      return in.fail(llvm::toString(done.takeError()));
    if (*done)
      return llvm::Error::success();
  }
  int64_t rows = panelRows(*s, kPanelBytes, bytes);
  llvm::Expected<void *> panel = device.scratchSpace(
      0, size_t(std::min(rows, s->rows) * s->columns * bytes));
  if (!panel)
    return panel.takeError();
  for (int64_t first = 0; first < s->rows; first += rows) {
    int64_t count = std::min(rows, s->rows - first);
    if (s->nf4) {
      cuda::dequantizeNf4(in.data<uint8_t>(1) + first * (s->columns / 2),
                          in.data<uint8_t>(2) +
                              first * (s->columns / s->geometry.blockSize),
                          in.data<float>(3), in.data<float>(4),
                          nf4Rows(s->geometry, first, count), *panel,
                          type == BF16, device.stream);
    } else {
      cuda::dequantizeFp8(in.data<uint8_t>(1) + first * s->columns,
                          in.data<float>(2) + first, count, s->columns, *panel,
                          type == BF16, device.stream);
    }
    if (auto error = cuda::gemm(
            device,
            panelGemm(*s, first, count, in.data<void>(0), *panel, out, bytes),
            type, nullptr))
      return in.fail(llvm::toString(std::move(error)));
  }
  return llvm::Error::success();
}

llvm::Error cuda::runDequantizeFp8(const InstructionView &in, Device &device) {
  llvm::Expected<Fp8Shape> shape = fp8Shape(in);
  if (!shape)
    return shape.takeError();
  if (shape->rows * shape->columns == 0)
    return llvm::Error::success();
  cuda::dequantizeFp8(in.data<uint8_t>(0), in.data<float>(1), shape->rows,
                      shape->columns, in.data<void>(2), in.dtype(2) == BF16,
                      device.stream);
  return llvm::Error::success();
}

llvm::Error cuda::runRoundToFp8(const InstructionView &in, Device &device) {
  llvm::Expected<RoundToFp8Shape> s = roundToFp8Shape(in);
  if (!s)
    return s.takeError();
  if (s->rows * s->columns > 0)
    cuda::roundToFp8(in.data<void>(0), s->rows, s->columns, s->block,
                     in.data<void>(1), in.dtype(0) == BF16, device.stream);
  return llvm::Error::success();
}
