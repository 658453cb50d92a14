//===- CudaAttention.cpp - attention on cuDNN, or chunked on cuBLAS -------===//
//
// Attention runs as cuDNN's fused kernels where they take the shape
// (FusedAttention.h), and otherwise as ChunkedAttention.h's schedule on
// the operations here. Chunked, scores and their gradients are fp32; P and
// dS take the values' type (bf16 in a bf16 program) so every GEMM reads
// one type and runs on tensor cores.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/ChunkedAttention.h"
#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/cuda/FusedAttention.h"
#include "runtime/backend/shapes/AttentionShape.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace twill;

namespace {

/// Scores of one chunk of queries a GPU keeps at once.
constexpr int64_t kBudgetBytes = int64_t(1) << 30;

/// Runs the schedule's calls on the compute stream; the first failing call
/// is kept and the rest are skipped.
struct CudaAttentionOps {
  // Large GEMMs for the tensor cores (not yet measured on a GPU).
  static constexpr int64_t kMaxChunkRows = 512;
  Device &device;
  bool bf16;
  llvm::Error error = llvm::Error::success();

  CudaAttentionOps(Device &device, bool bf16) : device(device), bf16(bf16) {}
  ~CudaAttentionOps() { llvm::consumeError(std::move(error)); }

  void keep(llvm::Error next) {
    if (!error)
      error = std::move(next);
    else
      llvm::consumeError(std::move(next));
  }

  void *scratch(int slot, int64_t bytes) {
    llvm::Expected<void *> space = device.scratchSpace(slot, bytes);
    if (!space) {
      keep(space.takeError());
      return nullptr;
    }
    return *space;
  }

  void gemm(const RowMajorGemm &call) {
    if (error)
      return;
    cudaDataType values = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    cudaDataType result = call.floatResult ? CUDA_R_32F : values;
    float beta = call.accumulate ? 1.0f : 0.0f;
    ColumnMajorGemm g = toColumnMajor(call); // as GemmTest checks it
    keep(checkBlas(cublasGemmStridedBatchedEx(
                       device.blas, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                       g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.m), int(g.n),
                       int(g.k), &call.alpha, g.a, values, int(g.lda),
                       g.strideA, g.b, values, int(g.ldb), g.strideB, &beta,
                       g.c, result, int(g.ldc), g.strideC, int(g.batch),
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx"));
  }

  /// One stream: groups run one after another, sharing the scratch.
  template <typename Each> void forEachGroup(int64_t groups, Each each) {
    for (int64_t group = 0; group < groups && !error; ++group)
      each(group);
  }

  void copyRows(const void *from, int64_t fromStride, void *to,
                int64_t toStride, int64_t rows, int64_t width) {
    if (error)
      return;
    size_t e = bf16 ? 2 : 4;
    keep(checkCuda(cudaMemcpy2DAsync(to, toStride * e, from, fromStride * e,
                                     width * e, rows, cudaMemcpyDeviceToDevice,
                                     device.stream),
                   "cudaMemcpy2DAsync"));
  }

  void softmaxRows(const SoftmaxRows &rows) {
    if (!error)
      cuda::softmaxRows(rows, bf16, device.stream);
  }
  void probabilityRows(const SoftmaxRows &rows) {
    if (!error)
      cuda::probabilityRows(rows, bf16, device.stream);
  }
  void softmaxGradRows(const SoftmaxRows &rows) {
    if (!error)
      cuda::softmaxGradRows(rows, bf16, device.stream);
  }
  void zero(float *values, int64_t count) {
    if (!error)
      keep(checkCuda(
          cudaMemsetAsync(values, 0, count * sizeof(float), device.stream),
          "cudaMemsetAsync"));
  }
  void store(const float *from, void *to, int64_t count) {
    if (error)
      return;
    if (bf16)
      cuda::cast(from, cuda::CastSource::F32, to, /*toBF16=*/true, count,
                 device.stream);
    else
      keep(checkCuda(cudaMemcpyAsync(to, from, count * sizeof(float),
                                     cudaMemcpyDeviceToDevice, device.stream),
                     "cudaMemcpyAsync"));
  }
};

/// The chunked kernel's problem, with the log-sum-exp it writes (the
/// forward) or reads (the gradient; null: recomputed).
AttentionProblem problem(const InstructionView &in, const AttentionShape &shape,
                         float *logSumExp) {
  return {in.data<void>(0),
          in.data<void>(1),
          in.data<void>(2),
          shape.segments(in),
          shape.batch,
          shape.seq,
          shape.kvHeads,
          shape.headDim,
          shape.heads,
          int(bytesPerElement(in.dtype(0))),
          shape.logits,
          logSumExp};
}

} // namespace

/// `shape`'s problem for cuDNN's fused attention, made ready (its graphs
/// built, its scratch held), or nothing: the chunked kernel runs it (a
/// shape Twill does not map onto cuDNN's, or, but under
/// TWILL_CUDA_ATTENTION=fused, one cuDNN refuses: stderr names it once).
struct Fused {
  FusedAttention *attention;
  SdpaProblem problem;
  void *scratch;
};
static llvm::Expected<std::optional<Fused>>
fused(const AttentionShape &shape, bool bf16, bool gradient, bool recompute,
      Device &device) {
  if (device.attentionKernel == Device::AttentionKernel::Chunked)
    return std::nullopt;
  llvm::Expected<SdpaProblem> problem = sdpaProblem(shape, bf16);
  if (!problem) {
    llvm::consumeError(problem.takeError()); // the reason is the note's
    return std::nullopt;
  }
  if (!device.fusedAttention) {
    llvm::Expected<std::unique_ptr<FusedAttention>> made =
        FusedAttention::create(device.stream);
    if (!made)
      return made.takeError();
    device.fusedAttention = std::move(*made);
  }
  std::string why =
      device.fusedAttention->refusal(*problem, gradient, recompute);
  if (!why.empty()) {
    const SdpaProblem &p = *problem;
    std::string what = llvm::formatv(
        "attention{0} of {1} x {2} tokens, {3} heads on {4}, head_dim {5}",
        gradient ? "'s gradient" : "", p.batch, p.seq, p.queryHeads, p.kvHeads,
        p.headDim);
    if (device.attentionKernel == Device::AttentionKernel::Fused)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "TWILL_CUDA_ATTENTION=fused, and cuDNN's fused attention takes no " +
              what + ": " + why);
    if (device.namedFallbacks.insert(what).second)
      llvm::errs() << "twill: " << what << " runs the chunked kernel: " << why
                   << "\n";
    return std::nullopt;
  }
  llvm::Expected<int64_t> bytes =
      device.fusedAttention->scratchBytes(*problem, gradient, recompute);
  if (!bytes)
    return bytes.takeError();
  llvm::Expected<void *> scratch = device.scratchSpace(0, *bytes);
  if (!scratch)
    return scratch.takeError();
  return Fused{device.fusedAttention.get(), *problem, *scratch};
}

static SdpaInputs sdpaInputs(const InstructionView &in,
                             const AttentionShape &shape) {
  return {in.data<void>(0), in.data<void>(1), in.data<void>(2),
          shape.segments(in)};
}

/// cuDNN's fused SDPA where it takes the shape (FusedAttention.h), else
/// ChunkedAttention.h's schedule: cuBLAS GEMMs and two row kernels.
llvm::Error cuda::runAttention(const InstructionView &in, Device &device) {
  llvm::Expected<AttentionShape> shape = attentionShape(in, false);
  if (!shape)
    return shape.takeError();
  float *logSumExp = shape->logSumExp(in, false);
  llvm::Expected<std::optional<Fused>> cudnn =
      fused(*shape, in.dtype(0) == BF16, false, false, device);
  if (!cudnn)
    return cudnn.takeError();
  if (*cudnn)
    return (*cudnn)->attention->forward(
        (*cudnn)->problem, sdpaInputs(in, *shape),
        in.data<void>(shape->firstResult), logSumExp, (*cudnn)->scratch);
  CudaAttentionOps ops(device, in.dtype(0) == BF16);
  chunkedAttention(ops, problem(in, *shape, logSumExp),
                   in.data<void>(shape->firstResult), kBudgetBytes);
  return std::move(ops.error);
}

llvm::Error cuda::runAttentionGrad(const InstructionView &in, Device &device) {
  llvm::Expected<AttentionShape> shape = attentionShape(in, true);
  if (!shape)
    return shape.takeError();
  llvm::Expected<bool> recompute = recomputesStatistics();
  if (!recompute)
    return recompute.takeError();
  float *logSumExp = *recompute ? nullptr : shape->logSumExp(in, true);
  const void *grad = in.data<void>(AttentionShape::kGrad);
  int first = shape->firstResult;
  llvm::Expected<std::optional<Fused>> cudnn =
      fused(*shape, in.dtype(0) == BF16, true, *recompute, device);
  if (!cudnn)
    return cudnn.takeError();
  if (*cudnn) {
    const SdpaProblem &problem = (*cudnn)->problem;
    // KV heads no query head of this rank's block uses get no gradient
    // (bf16 values: 2 bytes each).
    if (problem.kvHeads < shape->kvHeads)
      for (int result : {first + 1, first + 2})
        if (auto error =
                checkCuda(cudaMemsetAsync(in.data<void>(result), 0,
                                          in.count(result) * 2, device.stream),
                          "cudaMemsetAsync"))
          return error;
    return (*cudnn)->attention->backward(
        problem, sdpaInputs(in, *shape),
        logSumExp ? in.data<void>(AttentionShape::kGradOutput) : nullptr,
        logSumExp, grad, in.data<void>(first), in.data<void>(first + 1),
        in.data<void>(first + 2), (*cudnn)->scratch);
  }
  CudaAttentionOps ops(device, in.dtype(0) == BF16);
  chunkedAttentionGrad(ops, problem(in, *shape, logSumExp), grad,
                       in.data<void>(first), in.data<void>(first + 1),
                       in.data<void>(first + 2), kBudgetBytes);
  return std::move(ops.error);
}
