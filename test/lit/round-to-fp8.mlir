// twill.round_to_fp8, a product's input rounded to e4m3 in blocks
// (quantization.fp8_inputs E4M3_BLOCKS): its syntax, its factor rule (the
// last dim split only in whole blocks, and not at all where the block does
// not divide it), its gradient (straight through: nothing in the
// backward), its placement (tp=3 splits up's 12 outputs, 3 blocks of 4,
// one block a rank) and the instruction it becomes.
// RUN: twill-opt %s | twill-opt | FileCheck %s --check-prefix=ROUND
// RUN: twill-opt %s --twill-test-sharding-rules | FileCheck %s --check-prefix=RULE
// RUN: twill-opt %s --twill-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition | FileCheck %s --check-prefix=PART
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s --check-prefix=EMIT < %t.txtpb

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 3], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @forward(%values: tensor<8x12xi8> {twill.param = "down.weight", twill.tp = #twill.tp<row>, twill.init = #twill.init<kind = normal, std = 2.000000e-02, stream = 1>, twill.quantized = #twill.quantized<fp8_values, of = "down.weight">},
                   %scales: tensor<8xf32> {twill.param = "down.weight.scale", twill.tp = #twill.tp<row>, twill.init = #twill.init<kind = zeros, stream = 2>, twill.quantized = #twill.quantized<fp8_row_scales, of = "down.weight">},
                   %up: tensor<12x16xf32> {twill.param = "up.weight", twill.tp = #twill.tp<column>, twill.init = #twill.init<kind = zeros, stream = 7>, twill.trainable},
                   %x: tensor<2x4x16xf32> {twill.input = "x"},
                   %labels: tensor<2x4xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %rx = twill.round_to_fp8 %x block 5 : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %h = twill.matmul %rx, %up {transpose_rhs} : (tensor<2x4x16xf32>, tensor<12x16xf32>) -> tensor<2x4x12xf32>
  %rh = twill.round_to_fp8 %h block 4 : (tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %w = twill.dequantize_fp8 %values scales(%scales) : (tensor<8x12xi8>, tensor<8xf32>) -> tensor<8x12xf32>
  %y = twill.matmul %rh, %w {transpose_rhs} : (tensor<2x4x12xf32>, tensor<8x12xf32>) -> tensor<2x4x8xf32>
  %loss, %count = twill.cross_entropy %y, %labels : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// ROUND-LABEL: func.func @forward(
// ROUND: twill.round_to_fp8 %{{.*}} block 5 : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
// ROUND: twill.round_to_fp8 %{{.*}} block 4 : (tensor<2x4x12xf32>) -> tensor<2x4x12xf32>

// RULE-LABEL: func.func @forward(
// RULE: twill.round_to_fp8 {{.*}}twill.sharding_rule = "([i, j, k]) -> ([i, j, k]) {i=2, j=4, k=16} replicated={k}"
// RULE: twill.round_to_fp8 {{.*}}twill.sharding_rule = "([i, j, (k l)]) -> ([i, j, (k l)]) {i=2, j=4, k=3, l=4} replicated={l} divisible={k}"

// The backward reads the rounded values (up's gradient) and passes the
// rounding's gradient as it is: nothing rounds there.
// GRAD-LABEL: func.func @train_step(
// GRAD: %[[RX:.*]] = twill.round_to_fp8 %arg3 block 5
// GRAD: twill.cross_entropy_grad
// GRAD-NOT: round_to_fp8
// GRAD: %[[DH:.*]] = twill.matmul %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x12xf32>) -> tensor<2x4x12xf32>
// GRAD-NEXT: twill.matmul %[[DH]], %[[RX]] {transpose_lhs}
// GRAD-NOT: round_to_fp8
// GRAD: return

// PART-LABEL: func.func @train_step(
// PART: twill.round_to_fp8 %arg3 block 5 : (tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
// PART: %[[H:.*]] = twill.matmul
// PART-NEXT: twill.round_to_fp8 %[[H]] block 4 : (tensor<1x4x4xf32>) -> tensor<1x4x4xf32>

// EMIT: opcode: ROUND_TO_FP8
// EMIT: round_to_fp8 {
// EMIT-NEXT: block_size: 5
