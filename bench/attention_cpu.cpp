// Times the cpu backend's attention forward + backward: one row of `seq`
// tokens, 8 query heads of 64 over 2 KV heads, best of 10, the gradient
// from the forward's kept log-sum-exps and from recomputed ones,
// interleaved; a second argument is a sliding window (0: none).
//
//   g++ -O3 -DNDEBUG -fopenmp -std=gnu++17 -I. -Ibuild \
//       -I/usr/lib/llvm-22/include -L/usr/lib/llvm-22/lib \
//       bench/attention_cpu.cpp -Wl,--start-group \
//       $(find build -name 'libTwill*.a') -Wl,--end-group \
//       -o /tmp/attention_cpu -ldnnl -lLLVM -lprotobuf &&
//   /tmp/attention_cpu 2048 [window]
//
// Built with -DOLD against an older CpuKernels.{h,cpp} (before chunked
// attention) it times that one: bench/results/attention.md.
#include "runtime/backend/cpu/CpuKernels.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
using namespace twill;
int main(int argc, char **argv) {
  int64_t B = 1, S = atoi(argv[1]), H = 8, KV = 2, D = 64;
  int64_t W = argc > 2 ? atoi(argv[2]) : 0;
  std::mt19937 g(0); std::uniform_real_distribution<float> u(-1, 1);
  auto r = [&](int64_t n) { std::vector<float> v(n); for (auto &x : v) x = u(g); return v; };
  auto q = r(B*S*H*D), k = r(B*S*KV*D), v = r(B*S*KV*D), dout = r(B*S*H*D);
  std::vector<float> out(q.size()), lse(B*H*S), dq(q.size()), dk(k.size()), dv(v.size());
  // Current code: the gradient from the forward's log-sum-exps (kept) and,
  // interleaved in the same run, recomputing them (the baseline).
  for (bool kept : {true, false, true, false}) {
    double best = 1e9;
    for (int rep = 0; rep < 10; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
#ifdef OLD
      cpu::attention(q.data(), k.data(), v.data(), nullptr, out.data(), B, S, HeadBlock::whole(H), KV, D, 0.125);
      cpu::attentionGrad(q.data(), k.data(), v.data(), out.data(), dout.data(), nullptr, dq.data(), dk.data(), dv.data(), B, S, HeadBlock::whole(H), KV, D, 0.125);
#else
      cpu::attention(q.data(), k.data(), v.data(), nullptr, out.data(), lse.data(), B, S, HeadBlock::whole(H), KV, D, {0.125, W});
      cpu::attentionGrad(q.data(), k.data(), v.data(), kept ? lse.data() : nullptr, dout.data(), nullptr, dq.data(), dk.data(), dv.data(), B, S, HeadBlock::whole(H), KV, D, {0.125, W});
#endif
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    double s = 0; for (float x : dq) s += x;
    printf("seq %lld, %s statistics: %.2f ms (checksum %.4f)\n", (long long)S,
           kept ? "kept" : "recomputed", best * 1e3, s);
  }
}
