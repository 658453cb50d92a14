//===- CrossEntropyCases.cpp - the losses -----------------------------------===//

#include "test/conformance/CaseBuilder.h"

#include "support/Dpo.h"

using namespace twill;
using namespace twill::conformance;

void conformance::crossEntropyCases(Suite &suite) {
  // A 97-token vocab, whole or in blocks of 33 columns (the last padded);
  // about a fifth of the labels ignored (-100); and a wide vocab.
  struct Logits {
    int64_t rows, columns, vocab;
    const char *axis;
  };
  for (DType type : kFloats)
    for (Logits logits :
         {Logits{23, 97, 97, ""}, Logits{23, 33, 97, "mid"},
          Logits{23, 33, 97, "last"}, Logits{7, 4099, 4099, ""}})
      for (bool gradient : {false, true}) {
        CaseBuilder c(suite, gradient ? CROSS_ENTROPY_GRAD : CROSS_ENTROPY,
                      type, kSummed);
        c.in({logits.rows, logits.columns}, normal(3));
        c.operand(I32, {logits.rows}, labels(logits.vocab));
        if (gradient) {
          c.operand(F32, {}, value(0.37));
          c.out({logits.rows, logits.columns});
        } else {
          c.result(F32, {});
          c.result(I64, {});
        }
        CrossEntropyAttributes &attributes = *c->mutable_cross_entropy();
        attributes.set_ignore_index(-100);
        attributes.set_shard_axis(logits.axis);
        attributes.set_vocab_size(*logits.axis ? logits.vocab : 0);
        attributes.set_wrt_weight(false);
        attributes.set_softcap(0);
        attributes.set_sequence_count(0);
        if (*logits.axis)
          c.note(std::string("vocab block of ") + logits.axis);
        c.add();
      }
  for (bool gradient : {false, true}) {
    CaseBuilder c(suite, gradient ? CROSS_ENTROPY_GRAD : CROSS_ENTROPY, F32,
                  kSummed);
    c.in({5, 97});
    c.operand(I32, {5}, integers(97, 100)); // labels past the vocab
    if (gradient) {
      c.operand(F32, {}, value(1));
      c.out({5, 97});
    } else {
      c.result(F32, {});
      c.result(I64, {});
    }
    CrossEntropyAttributes &attributes = *c->mutable_cross_entropy();
    attributes.set_ignore_index(-100);
    attributes.set_shard_axis("");
    attributes.set_vocab_size(0);
    attributes.set_wrt_weight(false);
    attributes.set_softcap(0);
    attributes.set_sequence_count(0);
    c.note("label outside the vocab").refused().add();
  }
}

/// linear_cross_entropy summed per row and sequence: rows of 6 positions
/// in tiles of 4 (across rows), hidden 24.
static void tiledSequenceLossCases(Suite &suite, DType type, const char *axis) {
  int64_t columns = *axis ? 33 : 97;
  for (int gradient : {0, 1, 2}) { // none, the input's, the weight's
    CaseBuilder c(suite,
                  gradient ? LINEAR_CROSS_ENTROPY_GRAD : LINEAR_CROSS_ENTROPY,
                  type, kSummed);
    c.in({4, 6, 24});
    c.in({columns, 24}, normal(0.5));
    c.operand(I32, {4, 6}, labels(97));
    if (gradient)
      c.operand(F32, {4, 2}, uniform(-2, 2));
    c.operand(I32, {4, 6}, integers(0, 3));
    if (gradient) {
      c.out(gradient == 1 ? Shape{4, 6, 24} : Shape{columns, 24});
    } else {
      c.result(F32, {4, 2});
      c.result(I64, {4, 2});
    }
    c.out({4, columns});
    CrossEntropyAttributes &attributes = *c->mutable_cross_entropy();
    attributes.set_ignore_index(-100);
    attributes.set_shard_axis(axis);
    attributes.set_vocab_size(*axis ? 97 : 0);
    attributes.set_wrt_weight(gradient == 2);
    attributes.set_softcap(0);
    attributes.set_sequence_count(2);
    c.note(std::string("tiled sums per sequence") +
           (gradient == 2 ? ", the weight's" : "") +
           (*axis ? ", vocab block of mid" : ""))
        .add();
  }
}

void conformance::sequenceLossCases(Suite &suite) {
  // Rows of 6 positions, each of sequence 0, 1 or 2 (of 2: none): DPO's
  // completions' sums; the whole vocab and a block of it.
  for (DType type : kFloats)
    for (const char *axis : {"", "mid"})
      for (bool gradient : {false, true}) {
        int64_t columns = *axis ? 33 : 97;
        CaseBuilder c(suite, gradient ? CROSS_ENTROPY_GRAD : CROSS_ENTROPY,
                      type, kSummed);
        c.in({4, 6, columns}, normal(3));
        c.operand(I32, {4, 6}, labels(97));
        if (gradient)
          c.operand(F32, {4, 2}, uniform(-2, 2));
        c.operand(I32, {4, 6}, integers(0, 3));
        if (gradient) {
          c.out({4, 6, columns});
        } else {
          c.result(F32, {4, 2});
          c.result(I64, {4, 2});
        }
        CrossEntropyAttributes &attributes = *c->mutable_cross_entropy();
        attributes.set_ignore_index(-100);
        attributes.set_shard_axis(axis);
        attributes.set_vocab_size(*axis ? 97 : 0);
        attributes.set_wrt_weight(false);
        attributes.set_softcap(0);
        attributes.set_sequence_count(2);
        c.note(*axis ? "sums per sequence, vocab block of mid"
                     : "sums per sequence")
            .add();
      }
  for (DType type : kFloats)
    for (const char *axis : {"", "mid"})
      tiledSequenceLossCases(suite, type, axis);
}

void conformance::dpoLossCases(Suite &suite) {
  // 37 pairs of log-probabilities, about one in ten without a token in a
  // completion (padding: not counted); each loss type, and the gradient.
  struct Loss {
    DpoLossAttributes::LossType type;
    double beta, smoothing;
    const char *note;
  };
  for (Loss loss : {Loss{DpoLossAttributes::SIGMOID, 0.1, 0, "sigmoid"},
                    Loss{DpoLossAttributes::SIGMOID, 0.5, 0.2,
                         "sigmoid, label smoothing 0.2"},
                    Loss{DpoLossAttributes::ROBUST, 0.5, 0.2,
                         "robust, label smoothing 0.2"},
                    Loss{DpoLossAttributes::IPO, 0.1, 0, "ipo"},
                    Loss{DpoLossAttributes::HINGE, 0.3, 0, "hinge"}})
    for (bool gradient : {false, true}) {
      CaseBuilder c(suite, gradient ? DPO_LOSS_GRAD : DPO_LOSS, F32, kSummed);
      c.operand(F32, {37, 2}, uniform(-60, -1));
      c.operand(F32, {37, 2}, uniform(-60, -1));
      c.operand(I64, {37, 2}, integers(0, 10));
      if (gradient) {
        c.operand(F32, {}, value(0.37));
        c.out({37, 2});
      } else {
        c.result(F32, {});
        c.result(I64, {});
        c.result(F32, {dpo::kMetrics});
      }
      DpoLossAttributes &attributes = *c->mutable_dpo_loss();
      attributes.set_loss_type(loss.type);
      attributes.set_beta(loss.beta);
      attributes.set_label_smoothing(loss.smoothing);
      c.note(loss.note).add();
    }
}

void conformance::linearCrossEntropyCases(Suite &suite) {
  // 20 positions in tiles of 6 (the last of 2), hidden 24; the vocab whole
  // or in blocks as for cross_entropy; the logits plain or soft-capped at 2
  // (Gemma 2's). The tile (the last tile's logits, or their gradient) is
  // compared too.
  struct Vocab {
    int64_t columns, vocab;
    const char *axis;
  };
  for (DType type : kFloats)
    for (Vocab v :
         {Vocab{97, 97, ""}, Vocab{33, 97, "mid"}, Vocab{33, 97, "last"}})
      for (double cap : {0.0, 2.0})
        for (int gradient : {0, 1, 2}) { // none, the input's, the weight's
          CaseBuilder c(suite,
                        gradient ? LINEAR_CROSS_ENTROPY_GRAD
                                 : LINEAR_CROSS_ENTROPY,
                        type, kSummed);
          c.in({5, 4, 24});
          c.in({v.columns, 24}, normal(0.5));
          c.operand(I32, {5, 4}, labels(v.vocab));
          if (gradient) {
            c.operand(F32, {}, value(0.37));
            c.out(gradient == 1 ? Shape{5, 4, 24} : Shape{v.columns, 24});
          } else {
            c.result(F32, {});
            c.result(I64, {});
          }
          c.out({6, v.columns});
          CrossEntropyAttributes &attributes = *c->mutable_cross_entropy();
          attributes.set_ignore_index(-100);
          attributes.set_shard_axis(v.axis);
          attributes.set_vocab_size(*v.axis ? v.vocab : 0);
          attributes.set_wrt_weight(gradient == 2);
          attributes.set_softcap(cap);
          attributes.set_sequence_count(0);
          c.note(std::string(gradient == 2 ? "the weight's; " : "") +
                 (*v.axis ? std::string("vocab block of ") + v.axis
                          : std::string("whole vocab")) +
                 (cap > 0 ? "; capped at 2" : ""));
          c.add();
        }
}
