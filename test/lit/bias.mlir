// A linear layer's bias: twill.add_columns, and its gradient
// twill.column_sums (a partial sum where the rows are split).
// RUN: twill-opt %s | twill-opt | FileCheck %s --check-prefix=ROUND
// RUN: twill-opt %s --twill-test-sharding-rules | FileCheck %s --check-prefix=RULE
// RUN: twill-opt %s --twill-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition | FileCheck %s --check-prefix=PART
// RUN: twill-opt %s --twill-autodiff --twill-propagate-sharding --twill-partition --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s --check-prefix=EMIT < %t.txtpb

// A column layer with a bias (split with its columns over tp), then a row
// layer with one: the row layer's partial sums are reduced before its bias
// is added, which would otherwise count once per rank.
twill.mesh @mesh {axes = ["dp", "tp"], shape = [1, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @forward(%wq: tensor<8x16xf32> {twill.param = "q.weight", twill.tp = #twill.tp<column>, twill.trainable},
                   %bq: tensor<8xf32> {twill.param = "q.bias", twill.tp = #twill.tp<column>, twill.trainable},
                   %wo: tensor<16x8xf32> {twill.param = "o.weight", twill.tp = #twill.tp<row>, twill.trainable},
                   %bo: tensor<16xf32> {twill.param = "o.bias", twill.tp = #twill.tp<replicate>, twill.trainable},
                   %x: tensor<3x4x16xf32> {twill.input = "x"},
                   %labels: tensor<3x4xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %q = twill.matmul %x, %wq {transpose_rhs} : (tensor<3x4x16xf32>, tensor<8x16xf32>) -> tensor<3x4x8xf32>
  %qb = twill.add_columns %q, %bq : (tensor<3x4x8xf32>, tensor<8xf32>) -> tensor<3x4x8xf32>
  %o = twill.matmul %qb, %wo {transpose_rhs} : (tensor<3x4x8xf32>, tensor<16x8xf32>) -> tensor<3x4x16xf32>
  %ob = twill.add_columns %o, %bo : (tensor<3x4x16xf32>, tensor<16xf32>) -> tensor<3x4x16xf32>
  %loss, %count = twill.cross_entropy %ob, %labels : (tensor<3x4x16xf32>, tensor<3x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// ROUND: twill.add_columns %{{.*}}, %{{.*}} : (tensor<3x4x8xf32>, tensor<8xf32>) -> tensor<3x4x8xf32>

// RULE: twill.add_columns {{.*}}twill.sharding_rule = "([i, j, k], [k]) -> ([i, j, k]) {i=3, j=4, k=8}"

// Each bias's gradient sums its output's gradient over every position.
// GRAD-LABEL: func.func @train_step(
// GRAD: twill.column_sums %{{.*}} : tensor<3x4x16xf32> -> tensor<16xf32>
// GRAD: twill.column_sums %{{.*}} : tensor<3x4x8xf32> -> tensor<8xf32>

// The column layer's bias is its rank's columns. The row layer's partial
// sums are reduce-scattered over the sequence (sequence parallelism) and
// the whole bias added to the rank's positions; its gradient, summed over
// them, is all-reduced.
// PART-LABEL: func.func @train_step(
// PART: twill.add_columns %{{.*}}, %{{.*}} : (tensor<3x4x4xf32>, tensor<4xf32>) -> tensor<3x4x4xf32>
// PART: %[[O:.*]] = twill.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<3x4x4xf32>, tensor<16x4xf32>) -> tensor<3x4x16xf32>
// PART-NEXT: %[[R:.*]] = twill.reduce_scatter %[[O]] over @mesh["tp"] dim 1 : tensor<3x4x16xf32> -> tensor<3x2x16xf32>
// PART-NEXT: twill.add_columns %[[R]], %{{.*}} : (tensor<3x2x16xf32>, tensor<16xf32>) -> tensor<3x2x16xf32>
// PART: %[[DB:.*]] = twill.column_sums %{{.*}} : tensor<3x2x16xf32> -> tensor<16xf32>
// PART: twill.column_sums %{{.*}} : tensor<3x4x4xf32> -> tensor<4xf32>
// PART: twill.all_reduce %[[DB]] over @mesh["tp"] : tensor<16xf32>

// EMIT: opcode: ADD_COLUMNS
// EMIT: opcode: COLUMN_SUMS
