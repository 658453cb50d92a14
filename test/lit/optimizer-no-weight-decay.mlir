// twill-optimizer decays each trained parameter but those the frontend
// marks twill.no_weight_decay (norms' weights, biases: the Hugging Face
// Trainer's rule), whose AdamW has weight_decay 0.
// RUN: twill-opt %s --twill-autodiff --twill-optimizer="weight-decay=0.1" | FileCheck %s

func.func @forward(%w: tensor<16x8xf32> {twill.param = "proj.weight", twill.trainable},
                   %n: tensor<8xf32> {twill.param = "norm.weight", twill.trainable, twill.no_weight_decay},
                   %x: tensor<3x8xf32> {twill.input = "x"},
                   %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum", twill.role = #twill.role<loss_sum>}, tensor<i64> {twill.output = "token_count", twill.role = #twill.role<token_count>}) attributes {twill.entry = #twill.entry<forward>} {
  %h = twill.rms_norm %x, %n {epsilon = 1.0e-05 : f64} : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %y = twill.matmul %h, %w {transpose_rhs} : (tensor<3x8xf32>, tensor<16x8xf32>) -> tensor<3x16xf32>
  %loss, %count = twill.cross_entropy %y, %labels : (tensor<3x16xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @optimizer_step(
// CHECK-SAME: %[[W:[^:]*]]: tensor<16x8xf32> {twill.param = "proj.weight", twill.trainable}
// CHECK-SAME: %[[N:[^:]*]]: tensor<8xf32> {twill.param = "norm.weight", twill.trainable}
// CHECK-DAG: twill.adamw %[[W]], {{.*}} weight_decay = 1.000000e-01 : f64}
// CHECK-DAG: twill.adamw %[[N]], {{.*}} weight_decay = 0.000000e+00 : f64}
