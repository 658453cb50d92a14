// twill-offload on a small @train_step that is not Llama: a layer whose
// input %h crosses to the backward, a loss, and a hand-written backward.
// What the backward reads of the forward goes to host memory after its
// last forward reader and comes back right before its first backward
// reader; the backward reads the copy. What the step returns stays.
// Then twill-plan-memory: offloaded values get the host arena, so the
// device arena no longer holds %h across the loss.
// RUN: twill-opt %s --twill-offload | FileCheck %s
// RUN: twill-opt %s --twill-offload --twill-plan-memory | FileCheck %s --check-prefix=PLAN

// CHECK-LABEL: func.func @train_step(
func.func @train_step(%w: tensor<8x8xf32> {twill.param = "l.weight"},
                      %x: tensor<2x8xf32> {twill.input = "x"},
                      %labels: tensor<2xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<8x8xf32>) attributes {twill.entry = #twill.entry<train_step>} {
  // CHECK-NEXT: %[[H:.*]] = twill.matmul %{{.*}}, %{{.*}} {transpose_rhs, twill.layer = 0 : i64}
  // CHECK-NEXT: %[[A:.*]] = twill.mul %[[H]], %[[H]]
  // CHECK-NEXT: %[[HOST:.*]] = twill.offload %[[H]] {twill.layer = 0 : i64} : tensor<2x8xf32>
  // CHECK-NEXT: %[[LOSS:.*]], %{{.*}} = twill.cross_entropy %[[A]]
  %h = twill.matmul %x, %w {transpose_rhs, twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %a = twill.mul %h, %h {twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %loss, %count = twill.cross_entropy %a, %labels : (tensor<2x8xf32>, tensor<2xi32>) -> (tensor<f32>, tensor<i64>)
  // CHECK-NEXT: %[[G:.*]] = twill.constant
  // CHECK-NEXT: %[[BACK:.*]] = twill.reload %[[HOST]] {twill.layer = 0 : i64} : tensor<2x8xf32>
  // CHECK-NEXT: %[[D:.*]] = twill.mul %[[G]], %[[BACK]]
  // CHECK-NEXT: twill.mul %[[D]], %[[BACK]]
  %g = twill.constant 1.000000e+00 : tensor<2x8xf32>
  %d = twill.mul %g, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %dd = twill.mul %d, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %gw = twill.matmul %dd, %x {transpose_lhs} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  // CHECK-NOT: twill.offload
  // CHECK: return
  return %loss, %gw : tensor<f32>, tensor<8x8xf32>
}

// The offloaded %h is the host arena's only value (64 bytes). On the
// device, %h's memory (offset 0) is free once it is offloaded: the
// backward's constant takes it, and the reload gets memory of its own.
// PLAN: module attributes {twill.arena_bytes = 192 : i64, twill.host_arena_bytes = 64 : i64}
// PLAN: twill.matmul {{.*}}twill.arena_offsets = array<i64: 0>, twill.layer = 0
// PLAN: twill.offload {{.*}}twill.arena_offsets = array<i64: 0>
// PLAN: twill.constant {{.*}}twill.arena_offsets = array<i64: 0>
// PLAN-NEXT: twill.reload {{.*}}twill.arena_offsets = array<i64: 64>
