// twill.cross_entropy summed per row and sequence (DPO's completions'
// log-probabilities): its syntax, its factor rule (a row's sums follow
// its row; its positions are summed: partial sums where they are split),
// its gradient (each position takes its sequence's cotangent), its
// placement on dp=2 x tp=2 (rows split by dp; the vocab by tp, reduced by
// the op itself) and the instruction it becomes.
// RUN: twill-opt %s | twill-opt | FileCheck %s --check-prefix=ROUND
// RUN: twill-opt %s --twill-test-sharding-rules | FileCheck %s --check-prefix=RULE
// RUN: twill-opt %s --twill-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition | FileCheck %s --check-prefix=PART
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s --check-prefix=EMIT < %t.txtpb

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @forward(%w: tensor<64x16xf32> {twill.param = "lm_head.weight", twill.tp = #twill.tp<vocab>, twill.init = #twill.init<kind = zeros, stream = 1>, twill.trainable},
                   %h: tensor<4x6x16xf32> {twill.input = "h"},
                   %labels: tensor<4x6xi32> {twill.input = "labels"},
                   %segments: tensor<4x6xi32> {twill.input = "segments"},
                   %reference: tensor<4x2xf32> {twill.input = "reference"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %logits = twill.matmul %h, %w {transpose_rhs} : (tensor<4x6x16xf32>, tensor<64x16xf32>) -> tensor<4x6x64xf32>
  %sums, %counts = twill.cross_entropy %logits, %labels sequences(%segments) {sequence_count = 2 : i64} : (tensor<4x6x64xf32>, tensor<4x6xi32>, tensor<4x6xi32>) -> (tensor<4x2xf32>, tensor<4x2xi64>)
  %logps = twill.scale %sums by -1.0 : tensor<4x2xf32>
  %loss, %pairs, %metrics = twill.dpo_loss %logps, %reference, %counts {loss_type = "sigmoid", beta = 1.000000e-01 : f64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
  return %loss, %pairs : tensor<f32>, tensor<i64>
}

// ROUND-LABEL: func.func @forward(
// ROUND: twill.cross_entropy %{{.*}}, %{{.*}} sequences(%{{.*}}) {sequence_count = 2 : i64} : (tensor<4x6x64xf32>, tensor<4x6xi32>, tensor<4x6xi32>) -> (tensor<4x2xf32>, tensor<4x2xi64>)

// RULE-LABEL: func.func @forward(
// RULE: twill.cross_entropy {{.*}}twill.sharding_rule = "([i, j, k], [i, j], [i, j]) -> ([i, l], [i, l]) {i=4, j=6, k=64, l=2} reduction={j} replicated={l} self-reduced={k}"

// Each position takes its sequence's cotangent: the log-probabilities'
// gradient from dpo_loss_grad, negated.
// GRAD-LABEL: func.func @train_step(
// GRAD: %loss, %count = twill.cross_entropy %[[Z:.*]], %arg2 sequences(%arg3)
// GRAD: %[[D:.*]] = twill.dpo_loss_grad
// GRAD: %[[G:.*]] = twill.scale %[[D]] by -1.000000e+00
// GRAD: twill.cross_entropy_grad %[[Z]], %arg2, %[[G]] sequences(%arg3) {sequence_count = 2 : i64} : (tensor<4x6x64xf32>, tensor<4x6xi32>, tensor<4x2xf32>, tensor<4x6xi32>) -> tensor<4x6x64xf32>

// dp splits the rows, and so each row's sums; tp the vocab, which the op
// reduces itself: the sums need no collective before dpo_loss.
// PART-LABEL: func.func @train_step(
// PART: %loss, %count = twill.cross_entropy %{{.*}}, %arg2 sequences(%arg3) {sequence_count = 2 : i64, shard_axis = "tp", vocab_size = 64 : i64} : (tensor<2x6x32xf32>, tensor<2x6xi32>, tensor<2x6xi32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
// PART-NEXT: twill.scale %loss
// PART-NEXT: twill.dpo_loss
// PART: twill.cross_entropy_grad {{.*}} sequences(%arg3) {sequence_count = 2 : i64, shard_axis = "tp", vocab_size = 64 : i64}

// EMIT: opcode: CROSS_ENTROPY
// EMIT: cross_entropy {
// EMIT: sequence_count: 2
