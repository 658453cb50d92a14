//===- CpuLayers.cpp - embeddings, norms and rotary positions -------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/LayerShapes.h"

using namespace twill;

llvm::Error cpu::runEmbedding(const InstructionView &in) {
  llvm::Expected<EmbeddingShape> shape = embeddingShape(in);
  if (!shape)
    return shape.takeError();
  return cpu::embedding(in.data<float>(0), shape->rows, shape->dim,
                        in.data<int32_t>(1), in.count(1), in.data<float>(2),
                        shape->firstRow);
}

llvm::Error cpu::runEmbeddingGrad(const InstructionView &in) {
  llvm::Expected<EmbeddingGradShape> shape = embeddingGradShape(in);
  if (!shape)
    return shape.takeError();
  return cpu::embeddingGrad(in.data<int32_t>(0), in.count(0), in.data<float>(1),
                            shape->rows, shape->dim, in.data<float>(2));
}

/// rms_norm (input, weight -> result), rms_norm_grad (input, weight, grad ->
/// the input's) and rms_norm_weight_grad (input, grad -> the weight's).
llvm::Error cpu::runRmsNormFamily(const InstructionView &in) {
  llvm::Expected<RmsNormShape> shape = rmsNormShape(in);
  if (!shape)
    return shape.takeError();
  auto [rows, dim, epsilon] = *shape;
  if (in.opcode() == RMS_NORM)
    cpu::rmsNorm(in.data<float>(0), in.data<float>(1), in.data<float>(2), rows,
                 dim, epsilon);
  else if (in.opcode() == RMS_NORM_GRAD)
    cpu::rmsNormGrad(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                     in.data<float>(3), rows, dim, epsilon);
  else
    cpu::rmsNormWeightGrad(in.data<float>(0), in.data<float>(1),
                           in.data<float>(2), rows, dim, epsilon);
  return llvm::Error::success();
}

/// rope and rope_grad: the same rotation, forwards or backwards.
llvm::Error cpu::runRope(const InstructionView &in) {
  llvm::Expected<RopeShape> shape = ropeShape(in);
  if (!shape)
    return shape.takeError();
  cpu::rope(in.data<float>(0), in.data<int32_t>(1), in.data<float>(2),
            shape->tokens, shape->heads, shape->headDim, shape->theta,
            shape->scaling, /*inverse=*/in.opcode() == ROPE_GRAD);
  return llvm::Error::success();
}
