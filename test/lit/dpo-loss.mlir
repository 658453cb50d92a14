// twill.dpo_loss, DPO's loss of preference pairs (support/Dpo.h): its
// syntax, its factor rule (the pairs split by any axis, a pair's two
// completions together; the sums reduced over the pairs), its gradient
// (dpo_loss_grad, to the policy's log-probabilities only), its placement
// (dp=2 splits the 4 pairs; the sums all-reduced) and the instruction it
// becomes.
// RUN: twill-opt %s | twill-opt | FileCheck %s --check-prefix=ROUND
// RUN: twill-opt %s --twill-test-sharding-rules | FileCheck %s --check-prefix=RULE
// RUN: twill-opt %s --twill-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition | FileCheck %s --check-prefix=PART
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s --check-prefix=EMIT < %t.txtpb

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 1], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @forward(%w: tensor<1x3xf32> {twill.param = "w", twill.tp = #twill.tp<replicate>, twill.init = #twill.init<kind = zeros, stream = 1>, twill.trainable},
                   %x: tensor<4x2x3xf32> {twill.input = "x"},
                   %reference: tensor<4x2xf32> {twill.input = "reference"},
                   %tokens: tensor<4x2xi64> {twill.input = "tokens"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}, tensor<6xf32> {twill.output = "metrics"}) attributes {twill.entry = #twill.entry<forward>} {
  %wx = twill.matmul %x, %w {transpose_rhs} : (tensor<4x2x3xf32>, tensor<1x3xf32>) -> tensor<4x2x1xf32>
  %policy = twill.reshape %wx : tensor<4x2x1xf32> -> tensor<4x2xf32>
  %loss, %pairs, %metrics = twill.dpo_loss %policy, %reference, %tokens {loss_type = "ipo", beta = 1.000000e-01 : f64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
  return %loss, %pairs, %metrics : tensor<f32>, tensor<i64>, tensor<6xf32>
}

// ROUND-LABEL: func.func @forward(
// ROUND: twill.dpo_loss %{{.*}}, %{{.*}}, %{{.*}} {beta = 1.000000e-01 : f64, loss_type = "ipo"} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)

// RULE-LABEL: func.func @forward(
// RULE: twill.dpo_loss {{.*}}twill.sharding_rule = "([i, j], [i, j], [i, j]) -> ([], [], [k]) {i=4, j=2, k=6} reduction={i} replicated={j, k}"

// Only the loss sum has a cotangent, and only the policy a gradient.
// GRAD-LABEL: func.func @train_step(
// GRAD: %[[P:.*]] = twill.reshape
// GRAD: %loss, %pairs, %metrics = twill.dpo_loss %[[P]], %arg2, %arg3
// GRAD: %[[ONE:.*]] = twill.constant 1.000000e+00 : tensor<f32>
// GRAD: twill.dpo_loss_grad %[[P]], %arg2, %arg3, %[[ONE]] {beta = 1.000000e-01 : f64, loss_type = "ipo"} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>, tensor<f32>) -> tensor<4x2xf32>

// PART-LABEL: func.func @train_step(
// PART: %loss, %pairs, %metrics = twill.dpo_loss {{.*}} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
// PART: twill.dpo_loss_grad {{.*}} -> tensor<2x2xf32>
// PART: twill.all_reduce %loss over @mesh["dp"] : tensor<f32>
// PART: twill.all_reduce %pairs over @mesh["dp"] : tensor<i64>
// PART: twill.all_reduce %metrics over @mesh["dp"] : tensor<6xf32>

// EMIT: opcode: DPO_LOSS
// EMIT: dpo_loss {
// EMIT-NEXT: loss_type: IPO
// EMIT-NEXT: beta: 0.1
// EMIT-NEXT: label_smoothing: 0
// EMIT: opcode: DPO_LOSS_GRAD
