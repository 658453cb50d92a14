//===- FusedAttention.h - attention as cuDNN's fused SDPA -------*- C++ -*-===//
//
// The cuda backend's attention where cuDNN's fused flash attention (its
// SDPA graphs, through cudnn-frontend) computes what ChunkedAttention.h
// does: causal grouped-query attention of bf16 values, with a sliding
// window, packed documents and Gemma 2's soft cap, head_dim up to 256.
// What it cannot take (fp32 values, one token, a head block that splits a
// KV group unevenly) runs the chunked kernel, which stays the reference.
//
// cuDNN's own causal and window masks skip the tiles they hide; a soft cap
// or documents need a score modifier, which applies every mask itself
// (documents compare each query's segment with each key's).
//
// Twill's values are [batch, seq, heads, headDim]; the graphs read them
// in place as cuDNN's [batch, heads, seq, headDim] through strides. A rank
// holding a block of the query heads (sharded attention) reads the KV
// heads its block uses, from their first.
//
// The forward keeps no statistics (the op has one result), so the
// backward runs the forward graph again for them: a forward is about 2/7
// of attention's work, paid once more in the backward.
//
// Graphs are built once per problem and kept. This header keeps
// cudnn-frontend's (large) headers out of the backend's other files.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_FUSEDATTENTION_H
#define TWILL_RUNTIME_BACKEND_CUDA_FUSEDATTENTION_H

#include "runtime/backend/shapes/AttentionShape.h"

#include "llvm/Support/Error.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <tuple>

namespace twill {

/// One fused attention as cuDNN sees it: the key its graphs are kept by.
struct SdpaProblem {
  int64_t batch, seq, queryHeads, kvHeads, headDim;
  /// Elements from one token's row to the next in the query (and output)
  /// and key (and value) tensors: all their heads' values.
  int64_t queryRowElements, kvRowElements;
  /// The first KV head the query heads use, in the key and value tensors
  /// (which hold kvRowElements / headDim heads).
  int64_t firstKvHead;
  int64_t window;
  double scale, softcap;
  /// Whether the rows pack documents: int32 segments [batch, seq] say each
  /// token's, and attention stays inside each.
  bool segments;

  auto key() const {
    return std::tie(batch, seq, queryHeads, kvHeads, headDim, queryRowElements,
                    kvRowElements, firstKvHead, window, scale, softcap,
                    segments);
  }
  bool operator<(const SdpaProblem &other) const { return key() < other.key(); }
};

/// What a fused attention reads: q, k and v, [batch, seq, heads, headDim]
/// bf16, and where the problem packs documents their int32 segments
/// [batch, seq].
struct SdpaInputs {
  const void *q, *k, *v;
  const int32_t *segments;
};

/// `shape`'s problem for cuDNN's fused attention, or why it has none (see
/// above): the chunked kernel runs it.
llvm::Expected<SdpaProblem> sdpaProblem(const AttentionShape &shape, bool bf16);

/// Builds `problem`'s forward and backward graphs and validates them for
/// compute capability `smVersion` (90: Hopper) without a device: what
/// cuDNN's host side checks before it looks for kernels.
llvm::Error validateSdpaGraphs(const SdpaProblem &problem, int smVersion);

/// cuDNN's handle on one stream and the graphs built on it, by problem.
class FusedAttention {
public:
  static llvm::Expected<std::unique_ptr<FusedAttention>>
  create(cudaStream_t stream);
  ~FusedAttention();

  /// Whether cuDNN builds `problem`'s forward graph, or (`gradient`) the two
  /// of its gradient, on this device (all three once per problem). Where it
  /// builds none (no engine for the shape on this GPU), stderr says so once
  /// and the chunked kernel runs it: the forward and the gradient each
  /// recompute what they need, so either may run fused alone.
  bool takes(const SdpaProblem &problem, bool gradient);

  /// The device memory a problem's forward or backward needs beside its
  /// operands (its workspace, and the backward's statistics and output).
  llvm::Expected<int64_t> scratchBytes(const SdpaProblem &problem,
                                       bool gradient);

  /// out = attention(q, k, v); `scratch` holds scratchBytes(problem, false).
  llvm::Error forward(const SdpaProblem &problem, const SdpaInputs &in,
                      void *out, void *scratch);
  /// dq, dk, dv of attention given dL/dout (`grad`); `scratch` holds
  /// scratchBytes(problem, true). The output the gradient is taken at is
  /// made again with the statistics, so the two agree by construction. The
  /// key and value gradients of KV heads the problem does not use are left
  /// to the caller.
  llvm::Error backward(const SdpaProblem &problem, const SdpaInputs &in,
                       const void *grad, void *dq, void *dk, void *dv,
                       void *scratch);

  struct Graphs;

private:
  FusedAttention() = default;
  llvm::Expected<Graphs *> graphs(const SdpaProblem &problem, bool gradient);
  struct State;
  std::unique_ptr<State> state;
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_CUDA_FUSEDATTENTION_H
