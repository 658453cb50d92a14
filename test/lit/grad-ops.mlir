// The gradient ops and constants round-trip.
// RUN: twill-opt %s | twill-opt | FileCheck %s

// CHECK-LABEL: func.func @grads
func.func @grads(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>, %ids: tensor<2x8xi32>,
                 %q: tensor<2x8x4x4xf32>, %kv: tensor<2x8x2x4xf32>, %lse: tensor<2x4x8xf32>,
                 %logits: tensor<2x8x32xf32>) {
  // CHECK: twill.constant 1.000000e+00 : tensor<f32>
  %one = twill.constant 1.0 : tensor<f32>
  // CHECK: twill.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x8xi32>, tensor<2x8x16xf32>) -> tensor<32x16xf32>
  %0 = twill.embedding_grad %ids, %x : (tensor<2x8xi32>, tensor<2x8x16xf32>) -> tensor<32x16xf32>
  // CHECK: twill.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64}
  %1 = twill.rms_norm_grad %x, %w, %x {epsilon = 1.0e-05 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: twill.rms_norm_weight_grad %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<16xf32>
  %2 = twill.rms_norm_weight_grad %x, %x {epsilon = 1.0e-05 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<16xf32>
  // CHECK: twill.rope_grad %{{.*}}, %{{.*}} {theta = 1.000000e+04 : f64}
  %3 = twill.rope_grad %q, %ids {theta = 1.0e+04 : f64} : (tensor<2x8x4x4xf32>, tensor<2x8xi32>) -> tensor<2x8x4x4xf32>
  // CHECK: twill.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} segments(%{{.*}}) {scale = 5.000000e-01 : f64}
  %dq, %dk, %dv = twill.attention_grad %q, %kv, %kv, %q, %lse, %q segments(%ids) {scale = 0.5 : f64}
      : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x4x4xf32>, tensor<2x4x8xf32>, tensor<2x8x4x4xf32>, tensor<2x8xi32>)
      -> (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>)
  // CHECK: twill.swiglu_grad
  %dg, %du = twill.swiglu_grad %x, %x, %x : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  // CHECK: twill.softcap_grad %{{.*}}, %{{.*}} cap 3.000000e+01 : tensor<2x8x16xf32>
  %sc = twill.softcap_grad %x, %x cap 30.0 : tensor<2x8x16xf32>
  // CHECK: twill.geglu_grad
  %eg, %eu = twill.geglu_grad %x, %x, %x : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  // CHECK: twill.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x32xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x32xf32>
  %4 = twill.cross_entropy_grad %logits, %ids, %one : (tensor<2x8x32xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x32xf32>
  return
}
