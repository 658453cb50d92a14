//===- Sampler.cpp - the order rows are visited in ------------------------===//

#include "runtime/data/Sampler.h"

#include <numeric>
#include <random>
#include <utility>

using namespace twill;

std::vector<int64_t> twill::epochOrder(int64_t rows, uint64_t seed,
                                       int64_t epoch, bool shuffle) {
  std::vector<int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle)
    return order;
  // Spelled out rather than std::shuffle, whose algorithm each standard
  // library chooses: the order must not depend on the build.
  std::mt19937_64 random(seed + uint64_t(epoch));
  for (int64_t i = rows - 1; i > 0; --i)
    std::swap(order[i], order[random() % uint64_t(i + 1)]);
  return order;
}
