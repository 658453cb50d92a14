// The gradient ops' verifiers reject values of the wrong shape.
// RUN: twill-opt %s -split-input-file -verify-diagnostics

func.func @embedding_grad(%ids: tensor<2x8xi32>, %dy: tensor<2x7x16xf32>) {
  // expected-error @+1 {{grad must have shape [2, 8, 16], got [2, 7, 16]}}
  %0 = twill.embedding_grad %ids, %dy : (tensor<2x8xi32>, tensor<2x7x16xf32>) -> tensor<32x16xf32>
  return
}

// -----

func.func @rms_norm_weight_grad(%x: tensor<2x8x16xf32>) {
  // expected-error @+1 {{result must have shape [16], got [8]}}
  %0 = twill.rms_norm_weight_grad %x, %x {epsilon = 1.0e-05 : f64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @attention_grad(%q: tensor<2x8x4x4xf32>, %kv: tensor<2x8x2x4xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+1 {{key_grad must have shape [2, 8, 2, 4], got [2, 8, 4, 4]}}
  %dq, %dk, %dv = twill.attention_grad %q, %kv, %kv, %q, %lse, %q {scale = 0.5 : f64}
      : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x4x4xf32>, tensor<2x4x8xf32>, tensor<2x8x4x4xf32>)
      -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>)
  return
}

// -----

func.func @attention_grad_log_sum_exp(%q: tensor<2x8x4x4xf32>, %kv: tensor<2x8x2x4xf32>, %lse: tensor<2x8x4xf32>) {
  // expected-error @+1 {{log_sum_exp must have shape [2, 4, 8], got [2, 8, 4]}}
  %dq, %dk, %dv = twill.attention_grad %q, %kv, %kv, %q, %lse, %q {scale = 0.5 : f64}
      : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x4x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4x4xf32>)
      -> (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>)
  return
}

// -----

func.func @cross_entropy_grad(%logits: tensor<2x8x32xf32>, %labels: tensor<2x8xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{result must have shape [2, 8, 32], got [16, 32]}}
  %0 = twill.cross_entropy_grad %logits, %labels, %g : (tensor<2x8x32xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @swiglu_grad(%x: tensor<2x8xf32>, %y: tensor<2x4xf32>) {
  // expected-error @+1 {{up must have shape [2, 8], got [2, 4]}}
  %dg, %du = twill.swiglu_grad %x, %y, %x : (tensor<2x8xf32>, tensor<2x4xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @column_sums_result(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{result must have shape [8], got [4]}}
  %0 = twill.column_sums %x : tensor<2x4x8xf32> -> tensor<4xf32>
  return
}
