//===- Dropout.h - which elements LoRA dropout keeps ------------*- C++ -*-===//
//
// LoRA's dropout mask is a pure function of where an element is, never of
// which rank computes it or in what order: Philox4x32-10 (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11), keyed by the job's
// seed and the adapted module, counting over the micro-batch, the token's
// place in it and the feature. Every mesh, a resumed run and the backward's
// recomputation therefore drop the same elements, and the test oracle
// (test/oracle/dropout.py) computes the same masks for PEFT. Shared by the
// compiler (stream ids), both backends' kernels and the unit tests.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_DROPOUT_H
#define TWILL_SUPPORT_DROPOUT_H

#include "support/HostDevice.h"

#include <cstdint>

namespace twill {

/// Philox4x32-10: `counter` becomes its four random words under `key`.
TWILL_HOST_DEVICE inline void philox4x32x10(uint32_t counter[4], uint32_t key0,
                                            uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    if (round) {
      key0 += 0x9E3779B9u;
      key1 += 0xBB67AE85u;
    }
    uint64_t p0 = uint64_t(0xD2511F53u) * counter[0];
    uint64_t p1 = uint64_t(0xCD9E8D57u) * counter[2];
    uint32_t c1 = counter[1], c3 = counter[3];
    counter[0] = uint32_t(p1 >> 32) ^ c1 ^ key0;
    counter[1] = uint32_t(p1);
    counter[2] = uint32_t(p0 >> 32) ^ c3 ^ key1;
    counter[3] = uint32_t(p0);
  }
}

/// A dropout mask's parameters: the key (the job's seed, the module's
/// stream) and the micro-batch counted over the whole run.
struct DropoutKey {
  uint32_t seed = 0, stream = 0;
  uint64_t microBatch = 0;
  /// An element is dropped when the top 24 bits of its word are below this:
  /// rate x 2^24, rounded.
  uint32_t threshold = 0;
};

/// rate x 2^24, rounded: the threshold of a rate in [0, 1).
inline uint32_t dropoutThreshold(double rate) {
  return uint32_t(rate * double(1u << 24) + 0.5);
}

/// Whether the mask keeps the four features [4 group, 4 group + 4) of the
/// token at `token` (its row x seq_len + position in the micro-batch):
/// bit i of the result for feature 4 group + i.
TWILL_HOST_DEVICE inline unsigned
dropoutKeeps4(const DropoutKey &key, uint32_t token, uint32_t group) {
  uint32_t words[4] = {group, token, uint32_t(key.microBatch),
                       uint32_t(key.microBatch >> 32)};
  philox4x32x10(words, key.seed, key.stream);
  unsigned keeps = 0;
  for (int i = 0; i < 4; ++i)
    keeps |= unsigned((words[i] >> 8) >= key.threshold) << i;
  return keeps;
}

/// dropoutKeeps4 of the `kDropoutLanes` consecutive groups from `group`:
/// the same words, computed side by side (one array per word of the
/// counter) so that a compiler turns each round into vector instructions.
/// The cpu kernel's.
inline constexpr int kDropoutLanes = 16;
inline void dropoutKeepsLanes(const DropoutKey &key, uint32_t token,
                              uint32_t group, unsigned keeps[kDropoutLanes]) {
  uint32_t c0[kDropoutLanes], c1[kDropoutLanes], c2[kDropoutLanes],
      c3[kDropoutLanes];
  for (int i = 0; i < kDropoutLanes; ++i) {
    c0[i] = group + uint32_t(i);
    c1[i] = token;
    c2[i] = uint32_t(key.microBatch);
    c3[i] = uint32_t(key.microBatch >> 32);
  }
  uint32_t key0 = key.seed, key1 = key.stream;
  for (int round = 0; round < 10; ++round) {
    if (round) {
      key0 += 0x9E3779B9u;
      key1 += 0xBB67AE85u;
    }
    for (int i = 0; i < kDropoutLanes; ++i) {
      uint64_t p0 = uint64_t(0xD2511F53u) * c0[i];
      uint64_t p1 = uint64_t(0xCD9E8D57u) * c2[i];
      uint32_t next0 = uint32_t(p1 >> 32) ^ c1[i] ^ key0;
      uint32_t next2 = uint32_t(p0 >> 32) ^ c3[i] ^ key1;
      c1[i] = uint32_t(p1);
      c3[i] = uint32_t(p0);
      c0[i] = next0;
      c2[i] = next2;
    }
  }
  for (int i = 0; i < kDropoutLanes; ++i)
    keeps[i] = unsigned((c0[i] >> 8) >= key.threshold) |
               unsigned((c1[i] >> 8) >= key.threshold) << 1 |
               unsigned((c2[i] >> 8) >= key.threshold) << 2 |
               unsigned((c3[i] >> 8) >= key.threshold) << 3;
}

/// Whether the mask keeps `feature` of the token at `token`.
TWILL_HOST_DEVICE inline bool dropoutKeeps(const DropoutKey &key,
                                           uint32_t token, uint32_t feature) {
  return (dropoutKeeps4(key, token, feature / 4) >> (feature % 4)) & 1;
}

/// How many groups of four global features the block of `count` features
/// from `first` touches (the first and last maybe partly): a kernel's Philox
/// calls per token. Group g of them is global group first / 4 + g.
TWILL_HOST_DEVICE inline int64_t dropoutGroups(int64_t first, int64_t count) {
  return (first + count - 1) / 4 - first / 4 + 1;
}

/// The stream of an adapted module: FNV-1a (32 bits) of its name
/// ("model.layers.3.self_attn.q_proj"), so that every module drops its own
/// elements and the name alone says which.
inline uint32_t dropoutStream(const char *name, int64_t length) {
  uint32_t hash = 2166136261u;
  for (int64_t i = 0; i < length; ++i) {
    hash ^= uint8_t(name[i]);
    hash *= 16777619u;
  }
  return hash;
}

} // namespace twill

#endif // TWILL_SUPPORT_DROPOUT_H
