//===- Sampler.h - the order rows are visited in ----------------*- C++ -*-===//
//
// torch's DistributedSampler semantics: each epoch visits every row once,
// in an order shuffled by (seed + epoch), the same on every rank. Ranks do
// not pick rows themselves: each global micro-batch is split over dp by the
// batch inputs' placement (every tp rank of a dp group gets the same rows),
// so the dp ranks together see each row once per epoch.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_SAMPLER_H
#define TWILL_RUNTIME_DATA_SAMPLER_H

#include <cstdint>
#include <vector>

namespace twill {

/// The order of `rows` rows in `epoch`: a Fisher-Yates shuffle driven by
/// std::mt19937_64 seeded with seed + epoch (the same on every platform), or
/// 0, 1, 2, ... without `shuffle`.
std::vector<int64_t> epochOrder(int64_t rows, uint64_t seed, int64_t epoch,
                                bool shuffle);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_SAMPLER_H
