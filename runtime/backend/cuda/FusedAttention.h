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
// The forward keeps each row's softmax statistics (its log-sum-exp, the
// op's second result, cuDNN's Stats), which the backward reads: no second
// forward. TWILL_ATTENTION_STATISTICS=recompute makes the backward run the
// forward again for them (and its output), the baseline kept statistics
// are measured against: a forward is about 2/7 of attention's work.
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

/// The alignment cuDNN is told a tensor has (it assumes 16 bytes unless
/// told less): the largest power of two, up to 16, dividing the byte
/// stride of each of its dims of more than one element, from a base the
/// memory plan aligns (as the KV heads' offsets are: multiples of head_dim's
/// 16 bytes). The int32 segments of 2 rows of 150 are 600 bytes apart: 8.
int64_t tensorAlignment(llvm::ArrayRef<int64_t> dims,
                        llvm::ArrayRef<int64_t> strides, int64_t elementBytes);

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

  /// Why cuDNN builds no plan for `problem`'s forward, or (`gradient`) its
  /// backward (and, `recompute`, the forward too), on this device: empty
  /// where it builds them (both once per problem; stderr says how long
  /// each took, and which cuDNN). A refused shape runs the chunked kernel:
  /// the two keep the same statistics, so either direction may run fused
  /// alone.
  std::string refusal(const SdpaProblem &problem, bool gradient,
                      bool recompute);

  /// The device memory a problem's forward or backward needs beside its
  /// operands: its workspace, and where the backward recomputes the
  /// statistics, those and the output.
  llvm::Expected<int64_t> scratchBytes(const SdpaProblem &problem,
                                       bool gradient, bool recompute);

  /// out = attention(q, k, v) and each row's log-sum-exp (`logSumExp`,
  /// [batch, queryHeads, seq] fp32); `scratch` holds scratchBytes(problem,
  /// false, false).
  llvm::Error forward(const SdpaProblem &problem, const SdpaInputs &in,
                      void *out, float *logSumExp, void *scratch);
  /// dq, dk, dv of attention given dL/dout (`grad`), at the forward's
  /// output `out` and statistics `logSumExp`; where those are null, the
  /// forward runs again for them (into `scratch`, which holds
  /// scratchBytes(problem, true, !logSumExp)). The key and value gradients
  /// of KV heads the problem does not use are left to the caller.
  llvm::Error backward(const SdpaProblem &problem, const SdpaInputs &in,
                       const void *out, const float *logSumExp,
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
