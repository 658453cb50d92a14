//===- OptimizerCases.cpp - norms, the schedule and AdamW -------------------===//

#include "test/conformance/CaseBuilder.h"

using namespace twill;
using namespace twill::conformance;

void conformance::optimizerCases(Suite &suite) {
  for (Opcode op : {GLOBAL_NORM, SUM_SQUARES}) {
    CaseBuilder c(suite, op, F32, kSummed);
    c.in({1001});
    c.in({3, 7, 45});
    c.in({});
    c.out({});
    c.add();
  }
  CaseBuilder root(suite, SQRT, F32, kSummed);
  root.in({}, uniform(0.5, 20));
  root.out({});
  root.add();
  for (double norm : {3.7, 0.2}) {
    CaseBuilder clip(suite, CLIP_COEFFICIENT, F32, kSummed);
    clip.in({}, value(norm));
    clip.out({});
    clip->mutable_clip_coefficient()->set_max_norm(1);
    clip.note(norm > 1 ? "clipped" : "under the limit").add();
  }
  for (int64_t step : {1, 7}) {
    CaseBuilder lr(suite, LR_SCHEDULE, F32, kSummed);
    lr.operand(I64, {}, value(double(step)));
    lr.operand(I64, {}, value(10));
    lr.out({});
    lr->mutable_lr_schedule()->set_lr(1e-4);
    lr->mutable_lr_schedule()->set_warmup_steps(3);
    lr.note(step < 3 ? "warming up" : "cosine").add();
  }
  CaseBuilder increment(suite, INCREMENT, I64, kExact);
  increment.operand(I64, {}, value(41));
  increment.result(I64, {});
  increment.add();

  CaseBuilder adamw(suite, ADAMW, F32, kSummed);
  adamw.in({1001});                      // param
  adamw.in({1001});                      // grad
  adamw.in({1001}, normal(0.1));         // exp_avg
  adamw.in({1001}, uniform(1e-4, 1e-2)); // exp_avg_sq
  adamw.in({}, value(1e-3));             // lr
  adamw.in({}, value(0.5));              // grad_scale
  adamw.operand(I64, {}, value(4));      // step
  for (int i = 0; i < 3; ++i)
    adamw.out({1001});
  AdamwAttributes &settings = *adamw->mutable_adamw();
  settings.set_beta1(0.9);
  settings.set_beta2(0.999);
  settings.set_eps(1e-8);
  settings.set_weight_decay(0.01);
  adamw.add();
}
