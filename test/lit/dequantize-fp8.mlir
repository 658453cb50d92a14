// twill.dequantize_fp8, a frozen weight stored in FP8 (quantization.base
// FP8): its syntax, its factor rule (elementwise, each row's scale with its
// row), the backward's second dequantization, its placement (FSDP gathers
// the bytes; tp splits a row layer's 20 columns in blocks of 7, the last
// padded: no block to keep whole) and the instruction it becomes.
// RUN: twill-opt %s | twill-opt | FileCheck %s --check-prefix=ROUND
// RUN: twill-opt %s --twill-test-sharding-rules | FileCheck %s --check-prefix=RULE
// RUN: twill-opt %s --twill-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition | FileCheck %s --check-prefix=PART
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s --check-prefix=EMIT < %t.txtpb

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 3], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @forward(%values: tensor<8x20xi8> {twill.param = "down.weight", twill.tp = #twill.tp<row>, twill.init = #twill.init<kind = normal, std = 2.000000e-02, stream = 1>, twill.quantized = #twill.quantized<fp8_values, of = "down.weight">},
                   %scales: tensor<8xf32> {twill.param = "down.weight.scale", twill.tp = #twill.tp<row>, twill.init = #twill.init<kind = zeros, stream = 2>, twill.quantized = #twill.quantized<fp8_row_scales, of = "down.weight">},
                   %up: tensor<20x16xf32> {twill.param = "up.weight", twill.tp = #twill.tp<column>, twill.init = #twill.init<kind = zeros, stream = 7>, twill.trainable},
                   %x: tensor<2x4x16xf32> {twill.input = "x"},
                   %labels: tensor<2x4xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %w = twill.dequantize_fp8 %values scales(%scales) : (tensor<8x20xi8>, tensor<8xf32>) -> tensor<8x20xf32>
  %h = twill.matmul %x, %up {transpose_rhs} : (tensor<2x4x16xf32>, tensor<20x16xf32>) -> tensor<2x4x20xf32>
  %y = twill.matmul %h, %w {transpose_rhs} : (tensor<2x4x20xf32>, tensor<8x20xf32>) -> tensor<2x4x8xf32>
  %loss, %count = twill.cross_entropy %y, %labels : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// ROUND-LABEL: func.func @forward(
// ROUND-SAME: twill.quantized = #twill.quantized<fp8_values, of = "down.weight">
// ROUND-SAME: twill.quantized = #twill.quantized<fp8_row_scales, of = "down.weight">
// ROUND: twill.dequantize_fp8 %{{.*}} scales(%{{.*}}) : (tensor<8x20xi8>, tensor<8xf32>) -> tensor<8x20xf32>

// RULE-LABEL: func.func @forward(
// RULE: twill.dequantize_fp8 {{.*}}twill.sharding_rule = "([i, j], [i]) -> ([i, j]) {i=8, j=20}"

// GRAD-LABEL: func.func @train_step(
// GRAD: %[[W:.*]] = twill.dequantize_fp8
// GRAD: twill.cross_entropy_grad
// GRAD-NOT: %[[W]]
// GRAD: %[[AGAIN:.*]] = twill.dequantize_fp8
// GRAD-NEXT: twill.matmul %{{.*}}, %[[AGAIN]] :

// PART-LABEL: func.func @train_step(
// PART: %[[V:.*]] = twill.all_gather %arg0 over @mesh["dp"] dim 0 : tensor<4x7xi8> -> tensor<8x7xi8>
// PART: %[[S:.*]] = twill.all_gather %arg1 over @mesh["dp"] dim 0 : tensor<4xf32> -> tensor<8xf32>
// PART: twill.dequantize_fp8 %[[V]] scales(%[[S]]) : (tensor<8x7xi8>, tensor<8xf32>) -> tensor<8x7xf32>
// PART: twill.cross_entropy_grad
// PART: twill.dequantize_fp8 {{.*}} -> tensor<8x7xf32>

// EMIT: quantized {
// EMIT-NEXT: part: FP8_VALUES
// EMIT-NEXT: of: "down.weight"
// EMIT-NEXT: block_size: 0
// EMIT-NEXT: nested_block_size: 0
// EMIT: quantized {
// EMIT-NEXT: part: FP8_ROW_SCALES
// EMIT: opcode: DEQUANTIZE_FP8
