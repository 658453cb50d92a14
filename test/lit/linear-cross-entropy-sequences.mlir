// twill.linear_cross_entropy summed per row and sequence (DPO's tiled
// log-probabilities): its syntax, its factor rule (a row's sums follow its
// row; only the positions are summed) and its gradients (each carries the
// sequences; the weight's sums over every position).
// RUN: twill-opt %s | twill-opt | FileCheck %s --check-prefix=ROUND
// RUN: twill-opt %s --twill-test-sharding-rules | FileCheck %s --check-prefix=RULE
// RUN: twill-opt %s --twill-autodiff --twill-test-sharding-rules | FileCheck %s --check-prefix=GRAD

func.func @forward(%w: tensor<64x16xf32> {twill.param = "lm_head.weight", twill.tp = #twill.tp<vocab>, twill.init = #twill.init<kind = zeros, stream = 1>, twill.trainable},
                   %h: tensor<4x6x16xf32> {twill.input = "h"},
                   %labels: tensor<4x6xi32> {twill.input = "labels"},
                   %segments: tensor<4x6xi32> {twill.input = "segments"},
                   %reference: tensor<4x2xf32> {twill.input = "reference"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %sums, %counts, %tile = twill.linear_cross_entropy %h, %w, %labels sequences(%segments) {sequence_count = 2 : i64} : (tensor<4x6x16xf32>, tensor<64x16xf32>, tensor<4x6xi32>, tensor<4x6xi32>) -> (tensor<4x2xf32>, tensor<4x2xi64>, tensor<8x64xf32>)
  %logps = twill.scale %sums by -1.0 : tensor<4x2xf32>
  %loss, %pairs, %metrics = twill.dpo_loss %logps, %reference, %counts {loss_type = "hinge", beta = 1.000000e-01 : f64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
  return %loss, %pairs : tensor<f32>, tensor<i64>
}

// ROUND-LABEL: func.func @forward(
// ROUND: twill.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} sequences(%{{.*}}) {sequence_count = 2 : i64} : (tensor<4x6x16xf32>, tensor<64x16xf32>, tensor<4x6xi32>, tensor<4x6xi32>) -> (tensor<4x2xf32>, tensor<4x2xi64>, tensor<8x64xf32>)

// RULE-LABEL: func.func @forward(
// RULE: twill.linear_cross_entropy {{.*}}twill.sharding_rule = "([i, j, k], [l, k], [i, j], [i, j]) -> ([i, n], [i, n], [m, l]) {i=4, j=6, k=16, l=64, m=8, n=2} internal=([i, j, l]) reduction={j} replicated={k, m, n} self-reduced={l}"

// GRAD-LABEL: func.func @train_step(
// GRAD: twill.dpo_loss_grad
// GRAD: twill.linear_cross_entropy_grad %arg1, %arg0, %arg2, %{{.*}} sequences(%arg3) {sequence_count = 2 : i64, twill.sharding_rule = "([i, j, k], [l, k], [i, j], [i, n], [i, j]) -> ([l, k], [m, l]) {i=4, j=6, k=16, l=64, m=8, n=2} internal=([i, j, l]) reduction={i, j} replicated={k, m, n} self-reduced={l}", wrt_weight}
