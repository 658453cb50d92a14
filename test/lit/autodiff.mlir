// twill-autodiff adds @train_step: the loss, then the gradients of the
// trainable parameters only. A frozen weight gets no gradient computation:
// its layer costs one matmul backward (for the activation), never the
// weight-gradient matmul.
// RUN: twill-opt %s --twill-autodiff -split-input-file -verify-diagnostics | FileCheck %s
// RUN: twill-opt %s --twill-autodiff -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=HOST

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
  %z = twill.add %y, %s {twill.host_read} : (tensor<3x4x16xf32>, tensor<3x4x16xf32>) -> tensor<3x4x16xf32>
  %loss, %count = twill.cross_entropy %z, %labels : (tensor<3x4x16xf32>, tensor<3x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// The host reads @forward's logits; the step's keep no memory for it.
// HOST-LABEL: func.func @forward(
// HOST: twill.add {{.*}}twill.host_read
// HOST-LABEL: func.func @train_step(
// HOST-NOT: twill.host_read
// HOST: return

// The forward stays as it was.
// CHECK-LABEL: func.func @forward(
// CHECK: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<i64>

// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[W:[^:]*]]: tensor<16x8xf32> {twill.param = "proj.weight"}
// CHECK-SAME: %[[A:[^:]*]]: tensor<2x8xf32> {twill.param = "proj.lora_A.weight", twill.trainable}
// CHECK-SAME: %[[B:[^:]*]]: tensor<16x2xf32> {twill.param = "proj.lora_B.weight", twill.trainable}
// CHECK-SAME: %[[X:[^:]*]]: tensor<3x4x8xf32>
// CHECK-SAME: -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}, tensor<2x8xf32> {twill.output = "proj.lora_A.weight.grad"}, tensor<16x2xf32> {twill.output = "proj.lora_B.weight.grad"})
// CHECK: %[[D:.*]] = twill.matmul %[[X]], %[[A]] {transpose_rhs}
// CHECK: %[[LOSS:.*]], %[[COUNT:.*]] = twill.cross_entropy
// The seed: d loss_sum / d loss_sum = 1.
// CHECK-NEXT: %[[ONE:.*]] = twill.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[DZ:.*]] = twill.cross_entropy_grad %{{.*}}, %{{.*}}, %[[ONE]]
// The add passes dz to both branches; the frozen branch (%y = x W^T) needs
// nothing: x is an input, W is frozen.
// CHECK-NEXT: %[[DU:.*]] = twill.scale %[[DZ]] by 2.000000e+00
// CHECK-NEXT: %[[DD:.*]] = twill.matmul %[[DU]], %[[B]] : (tensor<3x4x16xf32>, tensor<16x2xf32>) -> tensor<3x4x2xf32>
// B's gradient sums over the batch: one matmul contracting the batch dims
// with the rows.
// CHECK-NEXT: %[[GB:.*]] = twill.matmul %[[DU]], %[[D]] {transpose_lhs} : (tensor<3x4x16xf32>, tensor<3x4x2xf32>) -> tensor<16x2xf32>
// CHECK-NEXT: %[[GA:.*]] = twill.matmul %[[DD]], %[[X]] {transpose_lhs} : (tensor<3x4x2xf32>, tensor<3x4x8xf32>) -> tensor<2x8xf32>
// CHECK-NOT: twill.matmul
// CHECK-NEXT: return %[[LOSS]], %[[COUNT]], %[[GA]], %[[GB]]

// -----

// Full fine-tuning is the same pass with every parameter trainable: now W
// gets its weight-gradient matmul.
func.func @forward(%w: tensor<16x8xf32> {twill.param = "proj.weight", twill.trainable},
                   %x: tensor<3x8xf32> {twill.input = "x"},
                   %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %y = twill.matmul %x, %w {transpose_rhs} : (tensor<3x8xf32>, tensor<16x8xf32>) -> tensor<3x16xf32>
  %loss, %count = twill.cross_entropy %y, %labels : (tensor<3x16xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[DY:.*]] = twill.cross_entropy_grad
// CHECK-NEXT: %[[GW:.*]] = twill.matmul %[[DY]], %{{.*}} {transpose_lhs} : (tensor<3x16xf32>, tensor<3x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[GW]]

// -----

// The tiled loss (twill.linear_cross_entropy) beside logits only the host
// reads: the step drops those logits; each gradient asked for is one op
// that forms the logits again, tile by tile. The input is a LoRA-adapted
// activation here, and the head trainable, so both are asked for.
func.func @forward(%w: tensor<16x8xf32> {twill.param = "lm_head.weight", twill.trainable},
                   %a: tensor<8x8xf32> {twill.param = "proj.lora_A.weight", twill.trainable},
                   %x: tensor<3x8xf32> {twill.input = "x"},
                   %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %h = twill.matmul %x, %a {transpose_rhs} : (tensor<3x8xf32>, tensor<8x8xf32>) -> tensor<3x8xf32>
  %logits = twill.matmul %h, %w {transpose_rhs, twill.host_read} : (tensor<3x8xf32>, tensor<16x8xf32>) -> tensor<3x16xf32>
  %loss, %count, %tile = twill.linear_cross_entropy %h, %w, %labels : (tensor<3x8xf32>, tensor<16x8xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>, tensor<2x16xf32>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[H:.*]] = twill.matmul
// CHECK-NOT: twill.matmul
// CHECK: twill.linear_cross_entropy %[[H]]
// CHECK-NEXT: %[[ONE:.*]] = twill.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[DH:.*]], %{{.*}} = twill.linear_cross_entropy_grad %[[H]], %{{.*}}, %{{.*}}, %[[ONE]] : {{.*}} -> (tensor<3x8xf32>, tensor<2x16xf32>)
// CHECK-NEXT: %[[DW:.*]], %{{.*}} = twill.linear_cross_entropy_grad %[[H]], %{{.*}}, %{{.*}}, %[[ONE]] {wrt_weight} : {{.*}} -> (tensor<16x8xf32>, tensor<2x16xf32>)
// CHECK-NEXT: %[[DA:.*]] = twill.matmul %[[DH]], %{{.*}} {transpose_lhs}
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[DW]], %[[DA]]

// -----

// A split's cotangent is its pieces' put together (a piece nothing reads
// contributes zeros); a concat's is its cotangent cut into the pieces.
func.func @forward(%a: tensor<4x8xf32> {twill.param = "a", twill.trainable},
                   %x: tensor<3x4x8xf32> {twill.input = "x"},
                   %labels: tensor<3x3xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %h = twill.matmul %x, %a {transpose_rhs} : (tensor<3x4x8xf32>, tensor<4x8xf32>) -> tensor<3x4x4xf32>
  %p:3 = twill.split %h {dim = 1 : i64} : tensor<3x4x4xf32> -> tensor<3x2x4xf32>, tensor<3x1x4xf32>, tensor<3x1x4xf32>
  %y0 = twill.scale %p#0 by 2.0 : tensor<3x2x4xf32>
  %y1 = twill.scale %p#1 by 3.0 : tensor<3x1x4xf32>
  %y = twill.concat %y0, %y1 {dim = 1 : i64} : tensor<3x2x4xf32>, tensor<3x1x4xf32> -> tensor<3x3x4xf32>
  %loss, %count = twill.cross_entropy %y, %labels : (tensor<3x3x4xf32>, tensor<3x3xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[DY:.*]] = twill.cross_entropy_grad
// CHECK-NEXT: %[[DP:.*]]:2 = twill.split %[[DY]] {dim = 1 : i64} : tensor<3x3x4xf32> -> tensor<3x2x4xf32>, tensor<3x1x4xf32>
// CHECK-NEXT: %[[D1:.*]] = twill.scale %[[DP]]#1 by 3.0
// CHECK-NEXT: %[[D0:.*]] = twill.scale %[[DP]]#0 by 2.0
// CHECK-NEXT: %[[Z:.*]] = twill.constant 0.000000e+00 : tensor<3x1x4xf32>
// CHECK-NEXT: %[[DH:.*]] = twill.concat %[[D0]], %[[D1]], %[[Z]] {dim = 1 : i64}
// CHECK-NEXT: %[[GA:.*]] = twill.matmul %[[DH]], %{{.*}} {transpose_lhs}
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[GA]]

// -----

// Blocked pieces (a sequence-parallel tiling): the cotangents keep the
// blocks.
func.func @forward(%a: tensor<4x8xf32> {twill.param = "a", twill.trainable},
                   %x: tensor<3x4x8xf32> {twill.input = "x"},
                   %labels: tensor<3x4xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %h = twill.matmul %x, %a {transpose_rhs} : (tensor<3x4x8xf32>, tensor<4x8xf32>) -> tensor<3x4x4xf32>
  %p:2 = twill.split %h {dim = 1 : i64, blocks = 2 : i64} : tensor<3x4x4xf32> -> tensor<3x2x4xf32>, tensor<3x2x4xf32>
  %y0 = twill.scale %p#0 by 2.0 : tensor<3x2x4xf32>
  %y = twill.concat %y0, %p#1 {dim = 1 : i64, blocks = 2 : i64} : tensor<3x2x4xf32>, tensor<3x2x4xf32> -> tensor<3x4x4xf32>
  %loss, %count = twill.cross_entropy %y, %labels : (tensor<3x4x4xf32>, tensor<3x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[DY:.*]] = twill.cross_entropy_grad
// CHECK-NEXT: %[[DP:.*]]:2 = twill.split %[[DY]] {blocks = 2 : i64, dim = 1 : i64}
// CHECK: twill.concat %{{.*}}, %[[DP]]#1 {blocks = 2 : i64, dim = 1 : i64}

// -----

// A trainable parameter the loss does not depend on gets a zero gradient.
func.func @forward(%unused: tensor<4xf32> {twill.param = "unused", twill.trainable},
                   %z: tensor<3x16xf32> {twill.input = "z"},
                   %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %loss, %count = twill.cross_entropy %z, %labels : (tensor<3x16xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[ZERO:.*]] = twill.constant 0.000000e+00 : tensor<4xf32>
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[ZERO]]

// -----

// The forward entry point is found by its role, whatever its name; the
// train step says its own.
func.func @model(%a: tensor<2x8xf32> {twill.param = "a", twill.trainable},
                 %x: tensor<3x8xf32> {twill.input = "x"},
                 %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %z = twill.matmul %x, %a {transpose_rhs} : (tensor<3x8xf32>, tensor<2x8xf32>) -> tensor<3x2xf32>
  %loss, %count = twill.cross_entropy %z, %labels : (tensor<3x2xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @model(
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: attributes {twill.entry = #twill.entry<train_step>}
// CHECK: twill.cross_entropy_grad

// -----

// A function named forward is no forward entry point without its role.
// expected-error @+1 {{twill-autodiff needs a forward entry point}}
module {
  func.func @forward() {
    return
  }
}

// -----

// expected-error @+1 {{twill-autodiff needs a forward entry point}}
module {
  func.func @other() {
    return
  }
}

// -----

// The ops of a layer op's gradient carry the layer as twill.grad_layer (the
// Executable says which layer each backward instruction is of); twill.layer
// stays on the forward alone, which recomputation and scheduling group by.
// The seed and the gradient of the op outside every layer get neither.
func.func @forward(%w: tensor<16x8xf32> {twill.param = "proj.weight", twill.trainable},
                   %x: tensor<3x8xf32> {twill.input = "x"},
                   %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %y = twill.matmul %x, %w {transpose_rhs, twill.layer = 2 : i64} : (tensor<3x8xf32>, tensor<16x8xf32>) -> tensor<3x16xf32>
  %loss, %count = twill.cross_entropy %y, %labels : (tensor<3x16xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: twill.matmul {{.*}}twill.layer = 2
// CHECK: %[[ONE:.*]] = twill.constant 1.000000e+00 : tensor<f32>
// CHECK-NOT: twill.grad_layer
// CHECK-NEXT: %[[DY:.*]] = twill.cross_entropy_grad
// CHECK-NOT: twill.grad_layer
// CHECK-SAME: -> tensor<3x16xf32>
// CHECK-NEXT: twill.matmul %[[DY]], %{{.*}} {transpose_lhs, twill.grad_layer = 2 : i64}
// CHECK-NOT: twill.layer
// CHECK-NEXT: return

// -----

// A router: its weights' gradient goes back through route_grad, of the
// experts it chose; the chosen experts themselves have none.
func.func @forward(%router: tensor<4x8xf32> {twill.param = "mlp.gate.weight", twill.trainable},
                   %x: tensor<3x8xf32> {twill.input = "x"},
                   %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %logits = twill.matmul %x, %router {transpose_rhs} : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %w, %e = twill.route %logits {normalize} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi32>)
  %loss, %count = twill.cross_entropy %w, %labels : (tensor<3x2xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[L:.*]] = twill.matmul
// CHECK-NEXT: %[[W:.*]], %[[E:.*]] = twill.route %[[L]] {normalize}
// CHECK: %[[DW:.*]] = twill.cross_entropy_grad %[[W]]
// CHECK-NEXT: %[[DL:.*]] = twill.route_grad %[[L]], %[[E]], %[[DW]] {normalize} : (tensor<3x4xf32>, tensor<3x2xi32>, tensor<3x2xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[DR:.*]] = twill.matmul %[[DL]], %{{.*}} {transpose_lhs} : (tensor<3x4xf32>, tensor<3x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[DR]]

// -----

// The routers' load-balancing loss added to the loss: the router's
// gradient comes back through route_grad and through the loss's, by the
// probabilities alone (the counts and tokens have none).
func.func @forward(%router: tensor<4x8xf32> {twill.param = "mlp.gate.weight", twill.trainable},
                   %x: tensor<3x8xf32> {twill.input = "x"},
                   %mask: tensor<3xi32> {twill.input = "attention_mask"},
                   %labels: tensor<3xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %logits = twill.matmul %x, %router {transpose_rhs} : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %w, %e = twill.route %logits {normalize} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi32>)
  %p, %c, %n = twill.expert_load %logits, %e, %mask : (tensor<3x4xf32>, tensor<3x2xi32>, tensor<3xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<f32>)
  %aux = twill.load_balancing_loss %p, %c, %n : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %ce, %count = twill.cross_entropy %w, %labels : (tensor<3x2xf32>, tensor<3xi32>) -> (tensor<f32>, tensor<i64>)
  %loss = twill.add %ce, %aux : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[L:.*]] = twill.matmul
// CHECK-NEXT: %[[W:.*]], %[[E:.*]] = twill.route %[[L]] {normalize}
// CHECK-NEXT: %[[P:.*]], %[[C:.*]], %[[N:.*]] = twill.expert_load %[[L]], %[[E]], %[[M:[^ ]*]] :
// CHECK: %[[DP:.*]] = twill.load_balancing_loss_grad %[[C]], %[[N]], %{{.*}} : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: %[[DL1:.*]] = twill.expert_load_grad %[[L]], %[[M]], %[[DP]] : (tensor<3x4xf32>, tensor<3xi32>, tensor<4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[DL2:.*]] = twill.route_grad %[[L]], %[[E]], %{{.*}} {normalize}
// CHECK-NEXT: %[[DL:.*]] = twill.add %[[DL1]], %[[DL2]]
// CHECK-NEXT: %[[DR:.*]] = twill.matmul %[[DL]], %{{.*}} {transpose_lhs}
// CHECK-NEXT: return %{{.*}}, %{{.*}}, %[[DR]]

// -----

// An expert layer's dispatch and combine: the rows' gradient is the
// output's dispatched by the same positions and weights, the input's the
// rows' combined, and each weight's the dot product of its row and its
// token's gradient.
func.func @forward(%scale: tensor<2x3x2xf32> {twill.param = "mlp.scale", twill.trainable},
                   %x: tensor<2x3x4xf32> {twill.input = "x"},
                   %e: tensor<2x3x2xi32> {twill.input = "e"},
                   %labels: tensor<2x3xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %p, %c = twill.expert_positions %e : (tensor<2x3x2xi32>) -> (tensor<2x3x2xi32>, tensor<2x3xi32>)
  %rows = twill.dispatch %x, %p weights(%scale) : (tensor<2x3x4xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>) -> tensor<2x6x4xf32>
  %y = twill.combine %rows, %p weights(%scale) : (tensor<2x6x4xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
  %loss, %count = twill.cross_entropy %y, %labels : (tensor<2x3x4xf32>, tensor<2x3xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[P:.*]], %{{.*}} = twill.expert_positions
// CHECK-NEXT: %[[R:.*]] = twill.dispatch %{{.*}}, %[[P]] weights(%[[S:[^)]*]])
// CHECK-NEXT: %[[Y:.*]] = twill.combine %[[R]], %[[P]] weights(%[[S]])
// CHECK: %[[DY:.*]] = twill.cross_entropy_grad %[[Y]]
// CHECK-DAG: %[[DR:.*]] = twill.dispatch %[[DY]], %[[P]] weights(%[[S]]) : (tensor<2x3x4xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>) -> tensor<2x6x4xf32>
// CHECK-DAG: %[[DS1:.*]] = twill.combine_weights_grad %[[R]], %[[P]], %[[DY]] : (tensor<2x6x4xf32>, tensor<2x3x2xi32>, tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
// CHECK-DAG: %[[DS2:.*]] = twill.combine_weights_grad %[[DR]], %[[P]], %{{.*}} : (tensor<2x6x4xf32>, tensor<2x3x2xi32>, tensor<2x3x4xf32>) -> tensor<2x3x2xf32>
// CHECK-NOT: twill.combine %[[DR]]
// CHECK: return

// -----

// An expert weight trained through a grouped matmul: its gradient is
// grouped_matmul_weight_grad in its layout; the rows (an input) get none.
func.func @forward(%w: tensor<3x4x5xf32> {twill.param = "mlp.experts.down_proj", twill.trainable},
                   %rows: tensor<2x6x5xf32> {twill.input = "rows"},
                   %counts: tensor<2x3xi32> {twill.input = "counts"},
                   %labels: tensor<2x6xi32> {twill.input = "labels"})
    -> (tensor<f32>, tensor<i64>) attributes {twill.entry = #twill.entry<forward>} {
  %y = twill.grouped_matmul %rows, %w, %counts {transpose_rhs} : (tensor<2x6x5xf32>, tensor<3x4x5xf32>, tensor<2x3xi32>) -> tensor<2x6x4xf32>
  %loss, %count = twill.cross_entropy %y, %labels : (tensor<2x6x4xf32>, tensor<2x6xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @train_step(
// CHECK: %[[Y:.*]] = twill.grouped_matmul %[[R:[^,]*]], %{{.*}}, %[[C:[^ ]*]] {transpose_rhs}
// CHECK: %[[DY:.*]] = twill.cross_entropy_grad %[[Y]]
// CHECK-NOT: twill.grouped_matmul %[[DY]]
// CHECK: twill.grouped_matmul_weight_grad %[[R]], %[[DY]], %[[C]] {transpose_rhs} : (tensor<2x6x5xf32>, tensor<2x6x4xf32>, tensor<2x3xi32>) -> tensor<3x4x5xf32>
// CHECK: return
