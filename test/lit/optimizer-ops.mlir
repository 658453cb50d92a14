// The optimizer ops round-trip; adamw checks its shapes.
// RUN: twill-opt %s -split-input-file -verify-diagnostics | twill-opt | FileCheck %s

// CHECK-LABEL: func.func @ops
func.func @ops(%p: tensor<2x8xf32>, %g: tensor<2x8xf32>, %s: tensor<f32>, %step: tensor<i64>) {
  // CHECK: twill.div %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %0 = twill.div %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK: twill.global_norm %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<f32>
  %1 = twill.global_norm %p, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<f32>
  // CHECK: twill.sum_squares %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<f32>
  %squares = twill.sum_squares %p, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<f32>
  // CHECK: twill.sqrt %{{.*}} : tensor<f32> -> tensor<f32>
  %root = twill.sqrt %squares : tensor<f32> -> tensor<f32>
  // CHECK: twill.clip_coefficient %{{.*}} {max_norm = 1.000000e+00 : f64} : tensor<f32>
  %2 = twill.clip_coefficient %1 {max_norm = 1.0 : f64} : tensor<f32>
  // CHECK: twill.lr_schedule %{{.*}}, %{{.*}} {lr = 2.000000e-04 : f64, warmup_steps = 10 : i64}
  %3 = twill.lr_schedule %step, %step {lr = 2.0e-04 : f64, warmup_steps = 10 : i64} : (tensor<i64>, tensor<i64>) -> tensor<f32>
  // CHECK: twill.adamw
  %p2, %m2, %v2 = twill.adamw %p, %g, %g, %g, %3, %2, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.01 : f64}
      : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<f32>, tensor<f32>, tensor<i64>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  // CHECK: twill.increment %{{.*}} : tensor<i64>
  %4 = twill.increment %step : tensor<i64>
  return
}

// -----

func.func @adamw_shapes(%p: tensor<2x8xf32>, %g: tensor<8x2xf32>, %s: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{grad must have shape [2, 8], got [8, 2]}}
  %p2, %m2, %v2 = twill.adamw %p, %g, %p, %p, %s, %s, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.01 : f64}
      : (tensor<2x8xf32>, tensor<8x2xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<f32>, tensor<f32>, tensor<i64>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>)
  return
}
