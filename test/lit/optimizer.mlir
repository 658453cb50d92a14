// twill-optimizer makes @train_step sum gradients into states and adds
// @optimizer_step: divide by the host's gradient_divisor (the step's tokens),
// clip, schedule the learning rate, AdamW, reset the sums, count the step.
// RUN: twill-opt %s --twill-autodiff --twill-optimizer="lr=0.001 warmup-steps=3 max-grad-norm=0.5 weight-decay=0.1" | FileCheck %s
// RUN: twill-opt %s --twill-autodiff --twill-optimizer="max-grad-norm=0" | FileCheck %s --check-prefix=NOCLIP
// RUN: not twill-opt %s --twill-optimizer 2>&1 | FileCheck %s --check-prefix=ORDER

func.func @forward(%w: tensor<16x8xf32> {twill.param = "proj.weight"},
                   %a: tensor<2x8xf32> {twill.param = "proj.lora_A.weight", twill.trainable},
                   %x: tensor<3x8xf32> {twill.input = "x"},
                   %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum", twill.role = #twill.role<loss_sum>}, tensor<i64> {twill.output = "token_count", twill.role = #twill.role<token_count>}) attributes {twill.entry = #twill.entry<forward>} {
  %y = twill.matmul %x, %w {transpose_rhs} : (tensor<3x8xf32>, tensor<16x8xf32>) -> tensor<3x16xf32>
  %d = twill.matmul %x, %a {transpose_rhs} : (tensor<3x8xf32>, tensor<2x8xf32>) -> tensor<3x2xf32>
  %e = twill.matmul %d, %a : (tensor<3x2xf32>, tensor<2x8xf32>) -> tensor<3x8xf32>
  %z = twill.matmul %e, %w {transpose_rhs} : (tensor<3x8xf32>, tensor<16x8xf32>) -> tensor<3x16xf32>
  %s = twill.add %y, %z : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
  %loss, %count = twill.cross_entropy %s, %labels : (tensor<3x16xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[GRADSUM:[^:]*]]: tensor<2x8xf32> {twill.state = "proj.lora_A.weight.grad_sum", twill.state_role = #twill.state_role<grad_sum, of = "proj.lora_A.weight">}
// CHECK-SAME: -> (tensor<f32> {twill.output = "loss_sum", twill.role = #twill.role<loss_sum>}, tensor<i64> {twill.output = "token_count", twill.role = #twill.role<token_count>}, tensor<2x8xf32> {twill.output = "proj.lora_A.weight.grad_sum"})
// CHECK: %[[LOSS:.*]], %[[COUNT:.*]] = twill.cross_entropy
// CHECK: %[[NEWGRAD:.*]] = twill.add %[[GRADSUM]], %{{.*}} : (tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK-NEXT: return %[[LOSS]], %[[COUNT]], %[[NEWGRAD]]

// CHECK-LABEL: func.func @optimizer_step(
// CHECK-SAME: %[[P:[^:]*]]: tensor<2x8xf32> {twill.param = "proj.lora_A.weight", twill.trainable}
// CHECK-SAME: %[[G:[^:]*]]: tensor<2x8xf32> {twill.state = "proj.lora_A.weight.grad_sum", twill.state_role = #twill.state_role<grad_sum, of = "proj.lora_A.weight">}
// CHECK-SAME: %[[M:[^:]*]]: tensor<2x8xf32> {twill.state = "proj.lora_A.weight.exp_avg", twill.state_role = #twill.state_role<exp_avg, of = "proj.lora_A.weight">}
// CHECK-SAME: %[[V:[^:]*]]: tensor<2x8xf32> {twill.state = "proj.lora_A.weight.exp_avg_sq", twill.state_role = #twill.state_role<exp_avg_sq, of = "proj.lora_A.weight">}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {twill.state = "step", twill.state_role = #twill.state_role<step>}
// CHECK-SAME: %[[DIVISOR:[^:]*]]: tensor<f32> {twill.input = "gradient_divisor", twill.role = #twill.role<gradient_divisor>}
// CHECK-SAME: %[[TOTAL:[^:]*]]: tensor<i64> {twill.input = "total_steps", twill.role = #twill.role<total_steps>}
// CHECK-SAME: %[[AT:[^:]*]]: tensor<i64> {twill.input = "schedule_step", twill.role = #twill.role<schedule_step>}
// Results named after a parameter or state update it; the rest is reported.
// CHECK-SAME: -> (tensor<2x8xf32> {twill.output = "proj.lora_A.weight"}, tensor<2x8xf32> {twill.output = "proj.lora_A.weight.exp_avg"}, tensor<2x8xf32> {twill.output = "proj.lora_A.weight.exp_avg_sq"}, tensor<2x8xf32> {twill.output = "proj.lora_A.weight.grad_sum"}, tensor<i64> {twill.output = "step"}, tensor<f32> {twill.output = "grad_norm", twill.role = #twill.role<grad_norm>}, tensor<f32> {twill.output = "lr", twill.role = #twill.role<lr>})
// CHECK-NEXT: %[[ONE:.*]] = twill.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[INV:.*]] = twill.div %[[ONE]], %[[DIVISOR]]
// CHECK-NEXT: %[[NORMSUM:.*]] = twill.global_norm %[[G]] : (tensor<2x8xf32>) -> tensor<f32>
// CHECK-NEXT: %[[NORM:.*]] = twill.mul %[[NORMSUM]], %[[INV]]
// CHECK-NEXT: %[[COEF:.*]] = twill.clip_coefficient %[[NORM]] {max_norm = 5.000000e-01 : f64}
// CHECK-NEXT: %[[SCALE:.*]] = twill.mul %[[INV]], %[[COEF]]
// The lr schedule reads the step's place (schedule_step), AdamW the
// updates made (step).
// CHECK-NEXT: %[[LR:.*]] = twill.lr_schedule %[[AT]], %[[TOTAL]] {lr = 1.000000e-03 : f64, warmup_steps = 3 : i64}
// CHECK-NEXT: %[[NP:.*]], %[[NM:.*]], %[[NV:.*]] = twill.adamw %[[P]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[SCALE]], %[[STEP]] {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK-NEXT: %[[ZERO:.*]] = twill.constant 0.000000e+00 : tensor<2x8xf32>
// CHECK-NEXT: %[[NEXT:.*]] = twill.increment %[[STEP]] : tensor<i64>
// CHECK-NEXT: return %[[NP]], %[[NM]], %[[NV]], %[[ZERO]], %[[NEXT]], %[[NORM]], %[[LR]]

// Without clipping the scale is 1 / divisor alone.
// NOCLIP-LABEL: func.func @optimizer_step(
// NOCLIP-NOT: twill.clip_coefficient
// NOCLIP: twill.adamw

// ORDER: error: twill-optimizer needs the train step of twill-autodiff
