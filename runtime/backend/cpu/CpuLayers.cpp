//===- CpuLayers.cpp - embeddings, norms and rotary positions -------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/LayerShapes.h"

#include <algorithm>

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
  if (auto error = in.expect(2, 1, {I32, F32, F32}, {0, 1, 2}))
    return error;
  int64_t dim = in.dim(2, 0);
  if (in.count(1) != in.count(0) * dim)
    return in.fail("grad size is not ids x hidden");
  return cpu::embeddingGrad(in.data<int32_t>(0), in.count(0), in.data<float>(1),
                            in.shape(2)[0], dim, in.data<float>(2));
}

/// rms_norm (input, weight -> result), rms_norm_grad (input, weight, grad ->
/// the input's) and rms_norm_weight_grad (input, grad -> the weight's).
llvm::Error cpu::runRmsNormFamily(const InstructionView &in) {
  double epsilon = in->rms_norm().epsilon();
  if (in.opcode() == RMS_NORM) {
    if (auto error = in.expect(2, 1, {F32, F32, F32}, {1, 1, 1}))
      return error;
    int64_t dim = in.dim(0, 0);
    if (in.count(1) != dim)
      return in.fail("weight size differs from the last dim");
    if (auto error = in.expectSameCount(0, 2))
      return error;
    cpu::rmsNorm(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                 in.count(0) / std::max<int64_t>(dim, 1), dim, epsilon);
    return llvm::Error::success();
  }
  if (in.opcode() == RMS_NORM_GRAD) {
    if (auto error = in.expect(3, 1, {F32, F32, F32, F32}, {1, 1, 1, 1}))
      return error;
    int64_t dim = in.dim(0, 0);
    if (in.count(1) != dim || in.count(2) != in.count(0) ||
        in.count(3) != in.count(0))
      return in.fail("input, weight, grad and result do not agree");
    cpu::rmsNormGrad(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                     in.data<float>(3), in.count(0) / std::max<int64_t>(dim, 1),
                     dim, epsilon);
    return llvm::Error::success();
  }
  if (auto error = in.expect(2, 1, {F32, F32, F32}, {1, 1, 1}))
    return error;
  int64_t dim = in.dim(0, 0);
  if (in.count(1) != in.count(0) || in.count(2) != dim)
    return in.fail("input, grad and result do not agree");
  cpu::rmsNormWeightGrad(in.data<float>(0), in.data<float>(1),
                         in.data<float>(2),
                         in.count(0) / std::max<int64_t>(dim, 1), dim, epsilon);
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
