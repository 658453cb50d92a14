//===- LayerCases.cpp - embeddings, norms, rotary positions -----------------===//

#include "test/conformance/CaseBuilder.h"

using namespace twill;
using namespace twill::conformance;

void conformance::embeddingCases(Suite &suite) {
  // A 97-token vocab: whole, and the middle and the padded last of three
  // blocks of 33 rows (ids anywhere in the vocab; other blocks' are zero).
  for (DType type : kFloats) {
    for (const char *axis : {"", "mid", "last"}) {
      CaseBuilder c(suite, EMBEDDING, type, kExact);
      c.in({*axis ? 33 : 97, 45});
      c.operand(I32, {3, 11}, integers(0, 97));
      c.out({3, 11, 45});
      c->mutable_embedding()->set_shard_axis(axis);
      if (*axis)
        c.note(std::string("vocab block of ") + axis);
      c.add();
    }
    CaseBuilder c(suite, EMBEDDING, type, kExact);
    c.in({97, 45});
    c.operand(I32, {2, 5}, integers(97, 100)); // ids past the vocab
    c.out({2, 5, 45});
    c->mutable_embedding()->set_shard_axis("");
    c.note("token outside the vocab").refused().add();
  }
}

void conformance::normCases(Suite &suite) {
  for (DType type : kFloats)
    for (Shape x : {Shape{3, 7, 45}, Shape{2, 4097}}) {
      int64_t dim = x.back();
      CaseBuilder norm(suite, RMS_NORM, type, kSummed);
      norm.in(x);
      norm.in({dim});
      norm.out(x);
      norm->mutable_rms_norm()->set_epsilon(1e-5);
      norm.add();

      CaseBuilder grad(suite, RMS_NORM_GRAD, type, kSummed);
      grad.in(x);
      grad.in({dim});
      grad.in(x);
      grad.out(x);
      grad->mutable_rms_norm()->set_epsilon(1e-5);
      grad.add();

      CaseBuilder weight(suite, RMS_NORM_WEIGHT_GRAD, type, kSummed);
      weight.in(x);
      weight.in(x);
      weight.out({dim});
      weight->mutable_rms_norm()->set_epsilon(1e-5);
      weight.add();
    }
}

void conformance::ropeCases(Suite &suite) {
  for (DType type : kFloats)
    for (Opcode op : {ROPE, ROPE_GRAD}) {
      // Llama 3.1's scaled frequencies, packed documents.
      CaseBuilder scaled(suite, op, type, kSummed);
      scaled.in({2, 17, 3, 10});
      scaled.operand(I32, {2, 17}, positions(17));
      scaled.out({2, 17, 3, 10});
      RopeAttributes &llama31 = *scaled->mutable_rope();
      llama31.set_theta(500000);
      llama31.set_scaling_factor(8);
      llama31.set_low_freq_factor(1);
      llama31.set_high_freq_factor(4);
      llama31.set_original_max_position(8192);
      scaled.note("Llama 3.1 scaling, packed positions").add();
      // Positions far along a 128k context, where angles are large.
      CaseBuilder far(suite, op, type, kSummed);
      far.in({1, 5, 2, 128});
      far.operand(I32, {1, 5}, integers(100000, 131072));
      far.out({1, 5, 2, 128});
      RopeAttributes &unscaled = *far->mutable_rope();
      unscaled.set_theta(10000);
      unscaled.set_scaling_factor(0);
      unscaled.set_low_freq_factor(0);
      unscaled.set_high_freq_factor(0);
      unscaled.set_original_max_position(0);
      far.note("positions past 100k").add();
    }
}

void conformance::embeddingGradCases(Suite &suite) {
  for (DType type : kFloats) {
    CaseBuilder c(suite, EMBEDDING_GRAD, type, kSummed);
    c.operand(I32, {3, 11}, integers(0, 29)); // repeated ids add up
    c.in({3, 11, 19});
    c.out({29, 19});
    c.add();
  }
  CaseBuilder c(suite, EMBEDDING_GRAD, F32, kSummed);
  c.operand(I32, {2, 5}, integers(29, 32)); // ids past the vocab
  c.in({2, 5, 19});
  c.out({29, 19});
  c.note("token outside the vocab").refused().add();
}
