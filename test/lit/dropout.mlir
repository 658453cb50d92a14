// twill.dropout, LoRA's dropout: its syntax, its factor rule, its gradient
// (the same dropout of the incoming gradient, only in @train_step), its
// partitioning (a block of the features needs its offset) and the
// instruction it becomes.
// RUN: twill-opt %s -split-input-file | twill-opt -split-input-file | FileCheck %s --check-prefix=ROUND
// RUN: twill-opt %s -split-input-file --twill-test-sharding-rules | FileCheck %s --check-prefix=RULE
// RUN: twill-opt %s -split-input-file --twill-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: twill-opt %s -split-input-file --twill-autodiff --twill-propagate-sharding --twill-partition | FileCheck %s --check-prefix=PART
// RUN: twill-opt %s -split-input-file --twill-autodiff --twill-propagate-sharding --twill-partition --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s --check-prefix=EMIT < %t.txtpb

twill.mesh @mesh {axes = ["dp", "tp"], shape = [1, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @forward(%up: tensor<16x8xf32> {twill.param = "up.weight", twill.tp = #twill.tp<column>, twill.trainable},
                   %w: tensor<8x16xf32> {twill.param = "down.weight", twill.tp = #twill.tp<row>},
                   %a: tensor<2x16xf32> {twill.param = "down.lora_A.weight", twill.tp = #twill.tp<row>, twill.trainable},
                   %b: tensor<8x2xf32> {twill.param = "down.lora_B.weight", twill.tp = #twill.tp<replicate>, twill.trainable},
                   %x: tensor<3x4x8xf32> {twill.input = "x"},
                   %labels: tensor<3x4xi32> {twill.input = "labels"},
                   %index: tensor<3x4xi32> {twill.input = "token_index"},
                   %micro: tensor<i64> {twill.input = "micro_batch"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %h = twill.matmul %x, %up {transpose_rhs} : (tensor<3x4x8xf32>, tensor<16x8xf32>) -> tensor<3x4x16xf32>
  %y = twill.matmul %h, %w {transpose_rhs} : (tensor<3x4x16xf32>, tensor<8x16xf32>) -> tensor<3x4x8xf32>
  %dh = twill.dropout %h tokens(%index) micro_batch(%micro) {rate = 0.1 : f64, seed = 3 : i64, stream = 77 : i64} : (tensor<3x4x16xf32>, tensor<3x4xi32>, tensor<i64>) -> tensor<3x4x16xf32>
  %d = twill.matmul %dh, %a {transpose_rhs} : (tensor<3x4x16xf32>, tensor<2x16xf32>) -> tensor<3x4x2xf32>
  %u = twill.matmul %d, %b {transpose_rhs} : (tensor<3x4x2xf32>, tensor<8x2xf32>) -> tensor<3x4x8xf32>
  %z = twill.add %y, %u : (tensor<3x4x8xf32>, tensor<3x4x8xf32>) -> tensor<3x4x8xf32>
  %loss, %count = twill.cross_entropy %z, %labels : (tensor<3x4x8xf32>, tensor<3x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// ROUND: twill.dropout %{{.*}} tokens(%{{.*}}) micro_batch(%{{.*}}) {rate = 1.000000e-01 : f64, seed = 3 : i64, stream = 77 : i64} : (tensor<3x4x16xf32>, tensor<3x4xi32>, tensor<i64>) -> tensor<3x4x16xf32>

// Elementwise; the token index follows the rows and positions.
// RULE: twill.dropout {{.*}}twill.sharding_rule = "([i, j, k], [i, j], []) -> ([i, j, k]) {i=3, j=4, k=16}"

// @forward evaluates: no dropout. The step drops the input, and its
// backward drops the gradient of the input with the same mask.
// GRAD-LABEL: func.func @forward(
// GRAD-NOT: twill.dropout
// GRAD-LABEL: func.func @train_step(
// GRAD: %[[DH:.*]] = twill.dropout %{{[^ ]*}} tokens(%[[I:[^)]*]]) micro_batch(%[[M:[^)]*]]) {rate = 1.000000e-01 : f64, seed = 3 : i64, stream = 77 : i64}
// GRAD: twill.matmul %[[DH]], %{{.*}} {transpose_rhs}
// GRAD: %[[DD:.*]] = twill.matmul %{{.*}}, %{{.*}} : (tensor<3x4x2xf32>, tensor<2x16xf32>) -> tensor<3x4x16xf32>
// GRAD: twill.dropout %[[DD]] tokens(%[[I]]) micro_batch(%[[M]]) {rate = 1.000000e-01 : f64, seed = 3 : i64, stream = 77 : i64}
// GRAD: return

// The row layer's input holds a tp rank's block of the features: the
// dropout says so, for the offset of its features.
// PART-LABEL: func.func @train_step(
// PART: twill.dropout {{.*}} {rate = 1.000000e-01 : f64, seed = 3 : i64, shard_axis = "tp", stream = 77 : i64} : (tensor<3x4x8xf32>, tensor<3x4xi32>, tensor<i64>) -> tensor<3x4x8xf32>

// EMIT: opcode: DROPOUT
// EMIT: dropout {
// EMIT-NEXT: rate: 0.1
// EMIT-NEXT: seed: 3
// EMIT-NEXT: stream: 77
// EMIT-NEXT: shard_axis: "tp"
