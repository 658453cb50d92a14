// twill-mixed-precision: frozen weights and activations in bf16, the
// trainable fp32 masters cast once, the loss sum kept fp32.
// RUN: twill-opt %s --twill-mixed-precision | FileCheck %s
// The backward follows: activation gradients bf16, parameter gradients fp32.
// RUN: twill-opt %s --twill-mixed-precision --twill-autodiff | FileCheck %s --check-prefix=GRAD

func.func @forward(%w: tensor<16x8xf32> {twill.param = "proj.weight"},
                   %a: tensor<2x8xf32> {twill.param = "proj.lora_A.weight", twill.trainable},
                   %b: tensor<16x2xf32> {twill.param = "proj.lora_B.weight", twill.trainable},
                   %x: tensor<3x4x8xf32> {twill.input = "x"},
                   %labels: tensor<3x4xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %y = twill.matmul %x, %w {transpose_rhs} : (tensor<3x4x8xf32>, tensor<16x8xf32>) -> tensor<3x4x16xf32>
  %d = twill.matmul %x, %a {transpose_rhs} : (tensor<3x4x8xf32>, tensor<2x8xf32>) -> tensor<3x4x2xf32>
  %u = twill.matmul %d, %b {transpose_rhs} : (tensor<3x4x2xf32>, tensor<16x2xf32>) -> tensor<3x4x16xf32>
  %s = twill.scale %u by 2.0 : tensor<3x4x16xf32>
  %z = twill.add %y, %s : (tensor<3x4x16xf32>, tensor<3x4x16xf32>) -> tensor<3x4x16xf32>
  %loss, %count = twill.cross_entropy %z, %labels : (tensor<3x4x16xf32>, tensor<3x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[W:[^:]*]]: tensor<16x8xbf16> {twill.param = "proj.weight"}
// CHECK-SAME: %[[A:[^:]*]]: tensor<2x8xf32> {twill.param = "proj.lora_A.weight", twill.trainable}
// CHECK-SAME: %[[B:[^:]*]]: tensor<16x2xf32> {twill.param = "proj.lora_B.weight", twill.trainable}
// A float per-step input keeps its type (the runtime fills it) and is cast
// like a master.
// CHECK-SAME: %[[X:[^:]*]]: tensor<3x4x8xf32> {twill.input = "x"}
// CHECK-SAME: -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"})
// CHECK-NEXT: %[[A16:.*]] = twill.cast %[[A]] : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK-NEXT: %[[B16:.*]] = twill.cast %[[B]] : tensor<16x2xf32> -> tensor<16x2xbf16>
// CHECK-NEXT: %[[X16:.*]] = twill.cast %[[X]] : tensor<3x4x8xf32> -> tensor<3x4x8xbf16>
// CHECK-NEXT: twill.matmul %[[X16]], %[[W]] {{.*}} -> tensor<3x4x16xbf16>
// CHECK-NEXT: twill.matmul %[[X16]], %[[A16]] {{.*}} -> tensor<3x4x2xbf16>
// CHECK-NEXT: twill.matmul %{{.*}}, %[[B16]] {{.*}} -> tensor<3x4x16xbf16>
// CHECK-NEXT: twill.scale {{.*}} : tensor<3x4x16xbf16>
// CHECK-NEXT: twill.add {{.*}} -> tensor<3x4x16xbf16>
// CHECK-NEXT: twill.cross_entropy {{.*}} : (tensor<3x4x16xbf16>, tensor<3x4xi32>) -> (tensor<f32>, tensor<i64>)

// GRAD-LABEL: func.func @train_step(
// GRAD: twill.cross_entropy_grad {{.*}} : (tensor<3x4x16xbf16>, tensor<3x4xi32>, tensor<f32>) -> tensor<3x4x16xbf16>
// GRAD: %[[GB:.*]] = twill.cast %{{.*}} : tensor<16x2xbf16> -> tensor<16x2xf32>
// GRAD: %[[GA:.*]] = twill.cast %{{.*}} : tensor<2x8xbf16> -> tensor<2x8xf32>
// GRAD: return {{.*}} : tensor<f32>, tensor<i64>, tensor<2x8xf32>, tensor<16x2xf32>

// The tiled loss: its sum stays fp32, its tile is bf16 like the logits.
// RUN: twill-opt %s --twill-mixed-precision | FileCheck %s --check-prefix=TILED
func.func @tiled(%w: tensor<16x8xf32> {twill.param = "lm_head.weight"},
                   %h: tensor<3x8xf32> {twill.input = "h"},
                   %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) {
  %loss, %count, %tile = twill.linear_cross_entropy %h, %w, %labels : (tensor<3x8xf32>, tensor<16x8xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>, tensor<2x16xf32>)
  return %loss, %count : tensor<f32>, tensor<i64>
}
// TILED: twill.linear_cross_entropy {{.*}} : (tensor<3x8xbf16>, tensor<16x8xbf16>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>, tensor<2x16xbf16>)

// Under DPO the per-sequence sums, the log-probabilities from them and
// dpo_loss stay fp32, and so does a precomputed reference (an input that
// is such sums), which is not cast.
// RUN: twill-opt %s --twill-mixed-precision | FileCheck %s --check-prefix=DPO
func.func @dpo(%w: tensor<16x8xf32> {twill.param = "lm_head.weight"},
               %h: tensor<2x4x8xf32> {twill.input = "h"},
               %labels: tensor<2x4xi32> {twill.input = "labels"},
               %segments: tensor<2x4xi32> {twill.input = "segments"},
               %reference: tensor<2x2xf32> {twill.input = "reference_logps", twill.role = #twill.role<reference_logps>})
    -> (tensor<f32>, tensor<i64>, tensor<6xf32>) {
  %logits = twill.matmul %h, %w {transpose_rhs} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %sums, %counts = twill.cross_entropy %logits, %labels sequences(%segments) {sequence_count = 2 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<2x4xi32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
  %policy = twill.scale %sums by -1.0 : tensor<2x2xf32>
  %loss, %pairs, %metrics = twill.dpo_loss %policy, %reference, %counts {loss_type = "sigmoid", beta = 1.000000e-01 : f64} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
  return %loss, %pairs, %metrics : tensor<f32>, tensor<i64>, tensor<6xf32>
}
// DPO-LABEL: func.func @dpo(
// DPO-SAME: %[[REF:[^:]*]]: tensor<2x2xf32> {twill.input = "reference_logps"
// DPO-NOT: twill.cast %[[REF]]
// DPO: twill.cross_entropy {{.*}} : (tensor<2x4x16xbf16>, tensor<2x4xi32>, tensor<2x4xi32>) -> (tensor<2x2xf32>, tensor<2x2xi64>)
// DPO-NEXT: %[[POLICY:.*]] = twill.scale {{.*}} : tensor<2x2xf32>
// DPO-NEXT: twill.dpo_loss %[[POLICY]], %[[REF]], {{.*}} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
