// DoRA's ops: twill.row_sum_squares (a partial sum where its last dim is
// split), twill.sqrt of a tensor, twill.scale_columns and its gradient,
// and twill.detach, which twill-autodiff treats as a constant and removes.
// RUN: twill-opt %s | twill-opt | FileCheck %s --check-prefix=ROUND
// RUN: twill-opt %s --twill-test-sharding-rules | FileCheck %s --check-prefix=RULE
// RUN: twill-opt %s --twill-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition | FileCheck %s --check-prefix=PART
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s --check-prefix=EMIT < %t.txtpb

// A row layer (its weight's input dim split over tp) with DoRA.
twill.mesh @mesh {axes = ["dp", "tp"], shape = [1, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @forward(%w: tensor<8x16xf32> {twill.param = "down.weight", twill.tp = #twill.tp<row>},
                   %a: tensor<2x16xf32> {twill.param = "down.lora_A.weight", twill.tp = #twill.tp<row>, twill.trainable},
                   %b: tensor<8x2xf32> {twill.param = "down.lora_B.weight", twill.tp = #twill.tp<replicate>, twill.trainable},
                   %m: tensor<8xf32> {twill.param = "down.lora_magnitude_vector", twill.tp = #twill.tp<replicate>, twill.trainable},
                   %x: tensor<3x4x16xf32> {twill.input = "x"},
                   %labels: tensor<3x4xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %ba = twill.matmul %b, %a : (tensor<8x2xf32>, tensor<2x16xf32>) -> tensor<8x16xf32>
  %wba = twill.add %w, %ba : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %sq = twill.row_sum_squares %wba : tensor<8x16xf32> -> tensor<8xf32>
  %root = twill.sqrt %sq : tensor<8xf32> -> tensor<8xf32>
  %n = twill.detach %root : tensor<8xf32>
  %ratio = twill.div %m, %n : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %y = twill.matmul %x, %w {transpose_rhs} : (tensor<3x4x16xf32>, tensor<8x16xf32>) -> tensor<3x4x8xf32>
  %z = twill.scale_columns %y, %ratio : (tensor<3x4x8xf32>, tensor<8xf32>) -> tensor<3x4x8xf32>
  %loss, %count = twill.cross_entropy %z, %labels : (tensor<3x4x8xf32>, tensor<3x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// ROUND: twill.row_sum_squares %{{.*}} : tensor<8x16xf32> -> tensor<8xf32>
// ROUND: twill.sqrt %{{.*}} : tensor<8xf32> -> tensor<8xf32>
// ROUND: twill.detach %{{.*}} : tensor<8xf32>
// ROUND: twill.scale_columns %{{.*}}, %{{.*}} : (tensor<3x4x8xf32>, tensor<8xf32>) -> tensor<3x4x8xf32>

// RULE: twill.row_sum_squares {{.*}}twill.sharding_rule = "([i, j]) -> ([i]) {i=8, j=16} reduction={j}"
// RULE: twill.sqrt {{.*}}twill.sharding_rule = "([i]) -> ([i]) {i=8}"
// RULE: twill.scale_columns {{.*}}twill.sharding_rule = "([i, j, k], [k]) -> ([i, j, k]) {i=3, j=4, k=8}"

// The magnitude gets a gradient through scale_columns; A and B none
// through the detached norm (they reach the loss only through it here);
// no detach is left.
// GRAD-LABEL: func.func @train_step(
// GRAD-NOT: twill.detach
// GRAD: %{{.*}}, %[[DR:.*]] = twill.scale_columns_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3x4x8xf32>, tensor<8xf32>, tensor<3x4x8xf32>) -> (tensor<3x4x8xf32>, tensor<8xf32>)
// GRAD: twill.div %[[DR]], %{{.*}}
// GRAD-NOT: twill.detach
// GRAD: %[[ZA:.*]] = twill.constant 0.000000e+00 : tensor<2x16xf32>
// GRAD: %[[ZB:.*]] = twill.constant 0.000000e+00 : tensor<8x2xf32>
// GRAD: return {{.*}}%[[ZA]], %[[ZB]], %{{.*}} :

// Each tp rank sums the squares of its columns: the partial sums are
// all-reduced before the root.
// PART-LABEL: func.func @train_step(
// PART: %[[S:.*]] = twill.row_sum_squares %{{.*}} : tensor<8x8xf32> -> tensor<8xf32>
// PART-NEXT: %[[R:.*]] = twill.all_reduce %[[S]] over @mesh["tp"] : tensor<8xf32>
// PART-NEXT: twill.sqrt %[[R]] : tensor<8xf32> -> tensor<8xf32>

// EMIT: opcode: ROW_SUM_SQUARES
// EMIT: opcode: SQRT
// EMIT: opcode: SCALE_COLUMNS
// EMIT: opcode: SCALE_COLUMNS_GRAD
