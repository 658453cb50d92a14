// twill-rematerialize on a small @train_step that is not Llama: two layers
// of an MLP, marked by twill.layer, a loss, and a hand-written backward.
// Each layer's forward is cloned right before its first backward use, from
// what crosses layers (its input); the backward reads the clones, so a
// layer's activations live only during its forward and its backward.
// RUN: twill-opt %s --twill-rematerialize | FileCheck %s
// Only the first layer recomputed (parallel.checkpoint_layers=1, as
// parallel.memory_budget_gb may choose): layer 1 keeps its activations.
// RUN: twill-opt %s --twill-rematerialize=layers=1 | FileCheck %s --check-prefix=ONE
// Then twill-offload of the first N layers' values: layer 0's output %a0
// is layer 1's input, which layer 1's recompute reads first.
// RUN: twill-opt %s --twill-rematerialize --twill-offload=layers=1 | FileCheck %s --check-prefix=OFF1
// RUN: twill-opt %s --twill-rematerialize --twill-offload=layers=2 | FileCheck %s --check-prefix=OFF2

// ONE: %[[H1:.*]] = twill.matmul %{{.*}}, %{{.*}} {transpose_rhs, twill.layer = 1 : i64}
// ONE: %[[G:.*]] = twill.constant
// ONE-NEXT: %[[D1:.*]] = twill.mul %[[G]], %[[H1]]
// ONE-NEXT: twill.matmul %[[D1]]
// ONE-NEXT: %[[H0R:.*]] = twill.matmul %{{.*}}, %{{.*}} {transpose_rhs, twill.layer = 0 : i64}
// ONE-NEXT: twill.mul %[[D1]], %[[H0R]]

// OFF1-NOT: twill.offload
// OFF2: %[[A0:.*]] = twill.mul %{{.*}}, %{{.*}} {twill.layer = 0 : i64}
// OFF2: twill.offload %[[A0]]
// OFF2: %[[BACK:.*]] = twill.reload
// OFF2-NEXT: twill.matmul %[[BACK]], %{{.*}} {transpose_rhs, twill.layer = 1 : i64}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<8x8xf32> {twill.param = "l0.weight"}, %[[W1:[^:]*]]: tensor<8x8xf32> {twill.param = "l1.weight"}, %[[X:[^:]*]]: tensor<2x8xf32>
func.func @train_step(%w0: tensor<8x8xf32> {twill.param = "l0.weight"},
                      %w1: tensor<8x8xf32> {twill.param = "l1.weight"},
                      %x: tensor<2x8xf32> {twill.input = "x"},
                      %labels: tensor<2xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>) attributes {twill.entry = #twill.entry<train_step>} {
  // The forward, unchanged.
  // CHECK-NEXT: %[[H0:.*]] = twill.matmul %[[X]], %[[W0]] {transpose_rhs, twill.layer = 0 : i64}
  // CHECK-NEXT: %[[A0:.*]] = twill.mul %[[H0]], %[[H0]] {twill.layer = 0 : i64}
  // CHECK-NEXT: %[[H1:.*]] = twill.matmul %[[A0]], %[[W1]] {transpose_rhs, twill.layer = 1 : i64}
  // CHECK-NEXT: %[[A1:.*]] = twill.mul %[[H1]], %[[H1]] {twill.layer = 1 : i64}
  // CHECK-NEXT: twill.cross_entropy %[[A1]]
  %h0 = twill.matmul %x, %w0 {transpose_rhs, twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %a0 = twill.mul %h0, %h0 {twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %h1 = twill.matmul %a0, %w1 {transpose_rhs, twill.layer = 1 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %a1 = twill.mul %h1, %h1 {twill.layer = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %loss, %count = twill.cross_entropy %a1, %labels : (tensor<2x8xf32>, tensor<2xi32>) -> (tensor<f32>, tensor<i64>)
  // The backward. Layer 1 is recomputed from its input %a0 (which crosses
  // layers, so it is kept), just before the gradient reads its %h1; its
  // output %a1 is read by nothing in the backward, so it is not cloned.
  // CHECK-NEXT: %[[G:.*]] = twill.constant
  // CHECK-NEXT: %[[H1R:.*]] = twill.matmul %[[A0]], %[[W1]] {transpose_rhs, twill.layer = 1 : i64}
  // CHECK-NEXT: %[[D1:.*]] = twill.mul %[[G]], %[[H1R]]
  // CHECK-NEXT: twill.matmul %[[D1]], %[[A0]] {transpose_lhs}
  %g = twill.constant 1.000000e+00 : tensor<2x8xf32>
  %d1 = twill.mul %g, %h1 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %gw1 = twill.matmul %d1, %a0 {transpose_lhs} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  // Then layer 0, from the step's input, before its %h0 is read.
  // CHECK-NEXT: %[[H0R:.*]] = twill.matmul %[[X]], %[[W0]] {transpose_rhs, twill.layer = 0 : i64}
  // CHECK-NEXT: %[[D0:.*]] = twill.mul %[[D1]], %[[H0R]]
  // CHECK-NEXT: twill.matmul %[[D0]], %[[X]] {transpose_lhs}
  %d0 = twill.mul %d1, %h0 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %gw0 = twill.matmul %d0, %x {transpose_lhs} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  return %loss, %gw1, %gw0 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}
