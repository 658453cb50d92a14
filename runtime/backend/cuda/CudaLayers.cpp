//===- CudaLayers.cpp - the embedding, the norms and rope -----------------===//
//
// What a layer computes besides its matmuls and attention: each runner
// checks its instruction and queues its kernels (CudaEmbeddingKernels.cu,
// CudaNormKernels.cu, CudaRopeKernels.cu).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/RopeFrequencies.h"
#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/shapes/LayerShapes.h"

using namespace twill;

llvm::Error cuda::runEmbedding(const InstructionView &in, Device &device) {
  llvm::Expected<EmbeddingShape> shape = embeddingShape(in);
  if (!shape)
    return shape.takeError();
  cuda::embedding(in.data<void>(0), shape->rows, shape->dim,
                  in.data<int32_t>(1), in.count(1), in.data<void>(2),
                  shape->firstRow.value_or(0), !shape->firstRow, device.errors,
                  in.floatType() == BF16, device.stream);
  return llvm::Error::success();
}

llvm::Error cuda::runEmbeddingGrad(const InstructionView &in, Device &device) {
  llvm::Expected<EmbeddingGradShape> shape = embeddingGradShape(in);
  if (!shape)
    return shape.takeError();
  if (auto error =
          checkCuda(cudaMemsetAsync(in.data<float>(2), 0,
                                    in.count(2) * sizeof(float), device.stream),
                    "cudaMemsetAsync"))
    return error;
  cuda::embeddingGrad(in.data<int32_t>(0), in.count(0), in.data<float>(1),
                      shape->rows, shape->dim, in.data<float>(2), device.errors,
                      device.stream);
  return llvm::Error::success();
}

/// rms_norm (operands x, weight), rms_norm_grad (x, weight, grad) and
/// rms_norm_weight_grad (x, grad): rows of the last dim.
llvm::Error cuda::runRmsNormFamily(const InstructionView &in, Device &device) {
  llvm::Expected<RmsNormShape> shape = rmsNormShape(in);
  if (!shape)
    return shape.takeError();
  auto [rows, dim, eps] = *shape;
  bool bf16 = in.floatType() == BF16;
  bool grad = in.opcode() == RMS_NORM_GRAD;
  bool weightGrad = in.opcode() == RMS_NORM_WEIGHT_GRAD;
  if (weightGrad) {
    llvm::Expected<void *> inverse =
        device.scratchSpace(0, rows * sizeof(double));
    if (!inverse)
      return inverse.takeError();
    cuda::rmsNormWeightGrad(
        in.data<void>(0), in.data<void>(1), in.data<void>(2), rows, dim, eps,
        static_cast<double *>(*inverse), bf16, device.stream);
  } else if (grad) {
    cuda::rmsNormGrad(in.data<void>(0), in.data<void>(1), in.data<void>(2),
                      in.data<void>(3), rows, dim, eps, bf16, device.stream);
  } else {
    cuda::rmsNorm(in.data<void>(0), in.data<void>(1), in.data<void>(2), rows,
                  dim, eps, bf16, device.stream);
  }
  return llvm::Error::success();
}

/// rope, and rope_grad: the same rotation, backwards.
llvm::Error cuda::runRope(const InstructionView &in, Device &device) {
  bool inverse = in.opcode() == ROPE_GRAD;
  llvm::Expected<RopeShape> shape = ropeShape(in);
  if (!shape)
    return shape.takeError();
  const RopeFrequencyScaling &scaling = shape->scaling;
  std::vector<double> key = {
      double(shape->headDim), shape->theta,
      scaling.factor,         scaling.lowFreqFactor,
      scaling.highFreqFactor, double(scaling.originalMaxPosition)};
  double *&table = device.ropeTables[key];
  if (!table) {
    std::vector<double> frequencies =
        ropeFrequencies(shape->headDim, shape->theta, scaling);
    size_t bytes = frequencies.size() * sizeof(double);
    double *made = nullptr;
    if (auto error = checkCuda(cudaMalloc(&made, std::max<size_t>(bytes, 1)),
                               "cudaMalloc"))
      return error;
    if (auto error = checkCuda(
            cudaMemcpy(made, frequencies.data(), bytes, cudaMemcpyHostToDevice),
            "cudaMemcpy")) {
      cudaFree(made);
      return error;
    }
    table = made; // cached only once it holds the frequencies
    device.allocated(bytes);
  }
  cuda::rope(in.data<void>(0), in.data<int32_t>(1), in.data<void>(2),
             shape->tokens, shape->heads, shape->headDim, table, inverse,
             in.floatType() == BF16, device.stream);
  return llvm::Error::success();
}
