//===- Blocks.h - kernel parameters every backend shares ----------*- C++ -*-===//
//
// Plain structs the kernels of every backend share (nvcc includes them):
// the slice of heads or vocab a partitioned op holds, rope's scaling,
// AdamW's settings.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_BLOCKS_H
#define TWILL_RUNTIME_BACKEND_BLOCKS_H

#include <cstdint>

namespace twill {

/// Query heads: `count` of them, global heads [first, first + count) of
/// `total`, over every key/value head (all of them: first 0, total count).
struct HeadBlock {
  int64_t count, first, total;
  static HeadBlock whole(int64_t heads) { return {heads, 0, heads}; }
};

/// Logit columns: `columns` per row, global columns [first, first +
/// columns) of a `vocab`-sized vocab; columns past the vocab are padding.
struct VocabBlock {
  int64_t columns, first, vocab;
  static VocabBlock whole(int64_t vocab) { return {vocab, 0, vocab}; }
};

/// Llama 3.1 frequency scaling of the rotary embedding; factor 0: none;
/// the factor alone (originalMaxPosition 0): linear.
struct RopeFrequencyScaling {
  double factor = 0, lowFreqFactor = 0, highFreqFactor = 0;
  int64_t originalMaxPosition = 0;
};

/// What attention's softmax makes of each score: its scale, the sliding
/// window (a query sees the keys less than `window` positions before it;
/// 0: every earlier one) and Gemma 2's soft-cap (softcap tanh(s /
/// softcap) of the scaled score s; 0: none).
struct AttentionLogits {
  double scale;
  int64_t window = 0;
  double softcap = 0;
};

/// AdamW's hyper-parameters (the lr and step come as values).
struct AdamWSettings {
  double beta1, beta2, eps, weightDecay;
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_BLOCKS_H
