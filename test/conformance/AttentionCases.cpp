//===- AttentionCases.cpp - attention and its gradient ----------------------===//

#include "test/conformance/CaseBuilder.h"

#include <cmath>

using namespace twill;
using namespace twill::conformance;

/// attention and attention_grad over q [batch, seq, heads, dim] and k, v
/// [batch, seq, kvHeads, dim], with packed documents or not, on one rank's
/// block of heads (`axis`) or all of them, in a sliding `window` or not (0),
/// soft-capped (Gemma 2's `softcap`) or not (0), q and k filled as given.
/// The forward's results are the output and each row's log-sum-exp; the
/// gradient's case runs the forward first and takes both from it, as a
/// program does, so each backend's gradient reads its own statistics.
static void attention(Suite &suite, DType type, int64_t batch, int64_t seq,
                      int64_t heads, int64_t kvHeads, int64_t dim, bool packed,
                      const char *axis, const char *note, int64_t window = 0,
                      double softcap = 0, Fill queries = normal(),
                      Fill keys = normal()) {
  Shape q = {batch, seq, heads, dim}, kv = {batch, seq, kvHeads, dim},
        lse = {batch, heads, seq};
  double tolerance = type == BF16 ? kBF16Attention : kSummed;
  AttentionAttributes attributes;
  attributes.set_scale(1 / std::sqrt(double(dim)));
  attributes.set_shard_axis(axis);
  attributes.set_window(window);
  attributes.set_softcap(softcap);

  CaseBuilder forward(suite, ATTENTION, type, tolerance);
  forward.in(q, queries);
  forward.in(kv, keys);
  forward.in(kv);
  if (packed)
    forward.operand(I32, {batch, seq}, segments(seq));
  forward.out(q);
  forward.result(F32, lse);
  *forward->mutable_attention() = attributes;
  forward.note(note).add();

  CaseBuilder gradient(suite, ATTENTION_GRAD, type, tolerance);
  Instruction first;
  first.set_opcode(ATTENTION);
  *first.mutable_attention() = attributes;
  first.add_operands(gradient.in(q, queries));
  first.add_operands(gradient.in(kv, keys));
  first.add_operands(gradient.in(kv));
  first.add_results(gradient.computed(type, q));
  first.add_results(gradient.computed(F32, lse));
  gradient.in(q); // dL/doutput
  if (packed)
    first.add_operands(gradient.operand(I32, {batch, seq}, segments(seq)));
  gradient.out(q);
  gradient.out(kv);
  gradient.out(kv);
  *gradient->mutable_attention() = attributes;
  gradient.before(first).note(note).add();
}

void conformance::attentionCases(Suite &suite) {
  for (DType type : kFloats) {
    attention(suite, type, 2, 17, 3, 3, 10, false, "", "MHA");
    attention(suite, type, 3, 1, 6, 2, 12, false, "", "GQA, seq 1");
    attention(suite, type, 2, 17, 6, 2, 12, true, "", "GQA, packed");
    attention(suite, type, 1, 513, 4, 2, 20, true, "",
              "GQA, packed, two chunks");
    // Query heads 2-3 of 6 (middle block): they straddle two KV heads.
    attention(suite, type, 2, 17, 2, 2, 12, true, "mid", "heads 2-3 of 6, GQA");
    // Query head 2 of 3 over all 3 KV heads: KV heads replicated.
    attention(suite, type, 2, 17, 1, 3, 12, false, "last",
              "head 2 of 3, replicated KV heads");
    attention(suite, type, 1, 4096, 2, 1, 16, true, "",
              "seq 4096, MQA, packed");
    // Sliding windows: shorter than a document, and over chunks whose
    // keys start past 0.
    attention(suite, type, 2, 17, 6, 2, 12, true, "", "GQA, packed, window 5",
              5);
    attention(suite, type, 1, 513, 4, 2, 20, true, "mid",
              "heads of the mid block, two chunks, window 100", 100);
    attention(suite, type, 1, 4096, 2, 1, 16, false, "",
              "seq 4096, MQA, window 1024", 1024);
    // Gemma 2's: a cap of 2 on logits of about N(0, 12 / sqrt(12)).
    attention(suite, type, 2, 17, 6, 2, 12, true, "",
              "GQA, packed, window 5, soft-capped", 5, 2.0);
    // Shapes cuDNN's fused attention takes on the cuda backend (bf16,
    // head_dim a multiple of 8): keys past a multiple of 128, head_dim 64
    // to 256, a window, one rank's block of whole KV groups and part of
    // one.
    attention(suite, type, 2, 200, 8, 2, 64, false, "",
              "GQA, head_dim 64, seq 200 (fused on cuda)");
    attention(suite, type, 1, 300, 4, 4, 128, false, "",
              "MHA, head_dim 128, window 64 (fused on cuda)", 64);
    attention(suite, type, 3, 2, 4, 2, 256, false, "",
              "GQA, head_dim 256, seq 2 (fused on cuda)");
    attention(suite, type, 2, 130, 2, 6, 64, false, "mid",
              "heads 2-3 of 6 on KV heads 2-3 of 6 (fused on cuda)");
    attention(suite, type, 2, 130, 1, 1, 96, false, "mid",
              "head 1 of 3, MQA, head_dim 96 (fused on cuda)");
    // Those cuDNN takes through a score modifier: soft caps and packed
    // documents, with and without a window.
    attention(suite, type, 2, 150, 4, 2, 64, true, "",
              "GQA, packed, head_dim 64, window 37, soft-capped (fused on "
              "cuda)",
              37, 2.0);
    attention(suite, type, 1, 200, 4, 2, 256, false, "",
              "GQA, head_dim 256, soft-capped (fused on cuda)", 0, 2.0);
    attention(suite, type, 1, 300, 2, 6, 128, true, "mid",
              "heads 2-3 of 6, packed, head_dim 128 (fused on cuda)");
    // Every score -120 (q.k = 64 * 3.875 * -3.875, over sqrt(64)), so every
    // row's log-sum-exp is below -88.7, at seq 64 past a multiple of 128,
    // masked by a tensor (documents): cuDNN 9.19's sm90 backward made NaN
    // in dq there (NVIDIA/cudnn-frontend#628).
    attention(suite, type, 1, 192, 4, 2, 64, true, "",
              "GQA, packed, seq 192, scores of -120 (fused on cuda)", 0, 0,
              value(3.875), value(-3.875));
  }
}
