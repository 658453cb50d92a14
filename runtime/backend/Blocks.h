//===- Blocks.h - kernel parameters every backend shares --------*- C++ -*-===//
//
// Plain structs the kernels of every backend share (nvcc includes them):
// the slice of heads or vocab a partitioned op holds, where a loss's
// positions add up, rope's scaling, AdamW's settings.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_BLOCKS_H
#define TWILL_RUNTIME_BACKEND_BLOCKS_H

#include "support/HostDevice.h"

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

/// Where each position's loss goes in cross_entropy: one sum (no
/// `sequence`), or its row's sum for its sequence (`sequence[p]` of
/// position p, a row every `positionsPerRow` positions, `sequences` per
/// row). `offset` is the first position's place among the op's (a tile's).
struct LossBuckets {
  const int32_t *sequence = nullptr;
  int64_t positionsPerRow = 0, sequences = 0, offset = 0;

  /// Position p's sum (its index among the sums), or -1: none.
  TWILL_HOST_DEVICE int64_t of(int64_t p) const {
    if (!sequence)
      return 0;
    int64_t s = sequence[offset + p];
    return s >= 0 && s < sequences
               ? (offset + p) / positionsPerRow * sequences + s
               : -1;
  }
  /// How many sums there are over `positions` positions.
  TWILL_HOST_DEVICE int64_t count(int64_t positions) const {
    return sequence ? positions / positionsPerRow * sequences : 1;
  }
  /// The same from `first` positions on.
  LossBuckets from(int64_t first) const {
    LossBuckets shifted = *this;
    shifted.offset += first;
    return shifted;
  }
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
