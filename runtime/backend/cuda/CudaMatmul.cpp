//===- CudaMatmul.cpp - the matmul on cuBLASLt ----------------------------===//
//
// Row-major result = op(lhs) op(rhs) is column-major result^T = op(rhs)^T
// op(lhs)^T: cuBLASLt's A is the rhs and its B the lhs. A weight shared by
// the batch makes the batch rows one tall matrix; other batches are strided.
// The algorithm cuBLASLt's heuristic picks is kept per problem, so each
// shape asks once.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include <cublasLt.h>

using namespace twill;

namespace {

/// Every buffer starts on a multiple of this (MemoryPlan's and cudaMalloc's
/// alignment, the smaller).
constexpr uint32_t kAlignmentBytes = 64;

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

/// A column-major rows x columns matrix (leading dimension rows), `batch`
/// of them `stride` elements apart.
llvm::Error layout(cublasLtMatrixLayout_t &out, cudaDataType type, int64_t rows,
                   int64_t columns, int64_t batch, int64_t stride) {
  if (auto error =
          checkBlas(cublasLtMatrixLayoutCreate(&out, type, rows, columns, rows),
                    "cublasLtMatrixLayoutCreate"))
    return error;
  if (batch == 1)
    return llvm::Error::success();
  int32_t count = int32_t(batch);
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

} // namespace

llvm::Error cuda::runMatmul(const InstructionView &in, Device &device) {
  llvm::Expected<MatmulShape> shape = matmulShape(in);
  if (!shape)
    return shape.takeError();
  int64_t batch = shape->batch, m = shape->m, n = shape->n, k = shape->k;
  void *result = in.data<void>(shape->result);
  size_t resultBytes = in.count(shape->result) * bytesPerElement(in.dtype(0));
  if (resultBytes == 0)
    return llvm::Error::success();
  if (k == 0) // an empty sum: the addend, or zeros
    return checkCuda(
        shape->hasAddend
            ? cudaMemcpyAsync(result, in.data<void>(2), resultBytes,
                              cudaMemcpyDeviceToDevice, device.stream)
            : cudaMemsetAsync(result, 0, resultBytes, device.stream),
        "cudaMemcpyAsync");
  bool transposeLhs = shape->transposeLhs, transposeRhs = shape->transposeRhs;
  if (!shape->rhsBatched && !transposeLhs) {
    m *= batch; // a shared weight: the batch rows are one matrix
    batch = 1;
  }
  cudaDataType type = in.dtype(0) == BF16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasOperation_t opA = transposeRhs ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transposeLhs ? CUBLAS_OP_T : CUBLAS_OP_N;

  LtCall call;
  if (auto error = checkBlas(
          cublasLtMatmulDescCreate(&call.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          "cublasLtMatmulDescCreate"))
    return error;
  for (auto [attribute, op] : {std::pair(CUBLASLT_MATMUL_DESC_TRANSA, opA),
                               std::pair(CUBLASLT_MATMUL_DESC_TRANSB, opB)})
    if (auto error = checkBlas(cublasLtMatmulDescSetAttribute(
                                   call.desc, attribute, &op, sizeof(op)),
                               "cublasLtMatmulDescSetAttribute"))
      return error;
  // A is the rhs as stored: [k, n] row-major is n x k column-major.
  if (auto error =
          layout(call.a, type, transposeRhs ? k : n, transposeRhs ? n : k,
                 batch, shape->rhsBatched ? k * n : 0))
    return error;
  if (auto error = layout(call.b, type, transposeLhs ? m : k,
                          transposeLhs ? k : m, batch, m * k))
    return error;
  if (auto error = layout(call.c, type, n, m, batch, m * n))
    return error;

  std::vector<int64_t> key = {
      batch, m, n, k, transposeLhs, transposeRhs, shape->rhsBatched, type};
  auto found = device.matmulAlgorithms.find(key);
  if (found == device.matmulAlgorithms.end()) {
    cublasLtMatmulPreference_t preference = nullptr;
    if (auto error = checkBlas(cublasLtMatmulPreferenceCreate(&preference),
                               "cublasLtMatmulPreferenceCreate"))
      return error;
    // The memory plan aligns values to 64 bytes, not cuBLASLt's assumed
    // 256: only algorithms that need no more may be chosen.
    size_t workspace = Device::kMatmulWorkspaceBytes;
    uint32_t alignment = kAlignmentBytes;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
        sizeof(workspace));
    for (cublasLtMatmulPreferenceAttributes_t attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (status == CUBLAS_STATUS_SUCCESS)
        status = cublasLtMatmulPreferenceSetAttribute(
            preference, attribute, &alignment, sizeof(alignment));
    cublasLtMatmulHeuristicResult_t heuristic = {};
    int returned = 0;
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulAlgoGetHeuristic(
          device.lt, call.desc, call.a, call.b, call.c, call.c, preference, 1,
          &heuristic, &returned);
    cublasLtMatmulPreferenceDestroy(preference);
    if (auto error = checkBlas(status, "cublasLtMatmulAlgoGetHeuristic"))
      return error;
    if (returned == 0)
      return in.fail("cuBLASLt has no algorithm for this product");
    found = device.matmulAlgorithms.emplace(key, heuristic.algo).first;
  }
  float alpha = float(shape->alpha), beta = shape->hasAddend ? 1.0f : 0.0f;
  const void *addend = shape->hasAddend ? in.data<void>(2) : result;
  return checkBlas(cublasLtMatmul(device.lt, call.desc, &alpha,
                                  in.data<void>(1), call.a, in.data<void>(0),
                                  call.b, &beta, addend, call.c, result, call.c,
                                  &found->second, device.matmulWorkspace,
                                  Device::kMatmulWorkspaceBytes, device.stream),
                   "cublasLtMatmul");
}
