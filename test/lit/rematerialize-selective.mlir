// twill-rematerialize=selective=true (parallel.activation_checkpointing
// SELECTIVE): matmuls are never recomputed; the backward recomputes only the
// cheap ops whose operands it holds anyway. Here a layer norms its input,
// takes two products into a SwiGLU, and sums two products of that (as a
// LoRA product and its base). The backward reads the norm's output, the
// SwiGLU's inputs and output, and the sum: the norm is recomputed from the
// layer's input, the SwiGLU from its inputs (read by its gradient anyway),
// but the sum is kept, since recomputing it would keep both products.
// RUN: twill-opt %s --twill-rematerialize=selective=true | FileCheck %s

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[H:[^:]*]]: tensor<2x8xf32> {twill.input = "h"}, %[[NW:[^:]*]]: tensor<8xf32>
func.func @train_step(%h: tensor<2x8xf32> {twill.input = "h"},
                      %nw: tensor<8xf32> {twill.param = "norm.weight"},
                      %wg: tensor<8x8xf32> {twill.param = "gate.weight"},
                      %wu: tensor<8x8xf32> {twill.param = "up.weight"},
                      %wa: tensor<8x8xf32> {twill.param = "a.weight"},
                      %wb: tensor<8x8xf32> {twill.param = "b.weight"},
                      %labels: tensor<2xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>) attributes {twill.entry = #twill.entry<train_step>} {
  // CHECK: %[[G:.*]] = twill.matmul
  // CHECK-NEXT: %[[U:.*]] = twill.matmul
  // CHECK: %[[Z:.*]] = twill.add
  // CHECK-NEXT: twill.cross_entropy %[[Z]]
  %n = twill.rms_norm %h, %nw {epsilon = 1.0e-05 : f64, twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %g = twill.matmul %n, %wg {transpose_rhs, twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %u = twill.matmul %n, %wu {transpose_rhs, twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %s = twill.swiglu %g, %u {twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %p = twill.matmul %s, %wa {transpose_rhs, twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %q = twill.matmul %s, %wb {transpose_rhs, twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %z = twill.add %p, %q {twill.layer = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %loss, %count = twill.cross_entropy %z, %labels : (tensor<2x8xf32>, tensor<2xi32>) -> (tensor<f32>, tensor<i64>)
  // The SwiGLU's gradient reads its kept inputs; the SwiGLU and the norm
  // are each recomputed right before their first reader (so the norm's
  // output is not held while the SwiGLU's product runs); no matmul is
  // recomputed, and the sum is read where the forward made it.
  // CHECK-NEXT: %[[DZ:.*]] = twill.constant
  // CHECK-NEXT: twill.swiglu_grad %[[G]], %[[U]], %[[DZ]]
  // CHECK-NEXT: %[[SR:.*]] = twill.swiglu %[[G]], %[[U]]
  // CHECK-NEXT: twill.matmul %[[DZ]], %[[SR]] {transpose_lhs}
  // CHECK-NEXT: %[[NR:.*]] = twill.rms_norm %[[H]], %[[NW]]
  // CHECK-NEXT: twill.matmul %{{.*}}, %[[NR]] {transpose_lhs}
  // CHECK-NEXT: twill.mul %[[DZ]], %[[Z]]
  // CHECK-NOT: twill.matmul {{.*}}transpose_rhs
  %dz = twill.constant 1.000000e+00 : tensor<2x8xf32>
  %dg, %du = twill.swiglu_grad %g, %u, %dz : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %gwa = twill.matmul %dz, %s {transpose_lhs} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  %gwg = twill.matmul %dg, %n {transpose_lhs} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  %r = twill.mul %dz, %z : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %loss, %gwa, %gwg, %r : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>
}
