// twill-emit-executable writes one buffer per value and one instruction per
// op, with the parameter table and the inputs; each op becomes its opcode
// and every attribute its kind carries, defaults written out; each
// parameter its roles (how it starts, what it adapts), each input and
// output its role, each state what it is, each instruction its layer (a
// forward's or a backward's), and each output the parameter or state it
// updates (one named after it); the program says which format it is.
// RUN: twill-opt %s --twill-emit-executable=output=%t.txtpb -split-input-file -verify-diagnostics
// RUN: FileCheck %s < %t.txtpb

func.func @forward(%w: tensor<4x8xf32> {twill.param = "layer.weight", twill.init = #twill.init<kind = normal, std = 0.02, stream = 5>},
                   %a: tensor<2x8xf32> {twill.param = "layer.lora_A.weight", twill.trainable, twill.init = #twill.init<kind = kaiming_uniform, stream = 7>, twill.adapter = #twill.adapter<a, of = "layer.weight">},
                   %x: tensor<3x8xf32> {twill.input = "x", twill.role = #twill.role<tokens>},
                   %n: tensor<i64> {twill.state = "step", twill.state_role = #twill.state_role<step>})
    -> (tensor<3x4xf32> {twill.output = "y", twill.role = #twill.role<loss_sum>}, tensor<i64> {twill.output = "step"}) attributes {twill.entry = #twill.entry<forward>} {
  %0 = twill.matmul %x, %w {transpose_rhs, twill.layer = 3 : i64} : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32> loc("layer")
  %1 = twill.scale %0 by 5.000000e-01 {twill.grad_layer = 2 : i64} : tensor<3x4xf32>
  %2 = twill.transpose %1, [1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
  %3 = twill.transpose %2, [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
  %4 = twill.increment %n : tensor<i64>
  return %3, %4 : tensor<3x4xf32>, tensor<i64>
}

// CHECK:      buffers {
// CHECK-NEXT:   dtype: F32
// CHECK-NEXT:   shape: 4
// CHECK-NEXT:   shape: 8
// CHECK-NEXT:   size_bytes: 128
// CHECK:        size_bytes: 48
// CHECK-NEXT:   name: "layer"
// CHECK:      parameters {
// CHECK-NEXT:   name: "layer.weight"
// CHECK-NEXT:   buffer: 0
// CHECK-NEXT:   trainable: false
// CHECK-NEXT:   init {
// CHECK-NEXT:     kind: NORMAL
// CHECK-NEXT:     std: 0.02
// CHECK-NEXT:     stream: 5
// CHECK:      parameters {
// CHECK-NEXT:   name: "layer.lora_A.weight"
// CHECK-NEXT:   buffer: 1
// CHECK-NEXT:   trainable: true
// CHECK-NEXT:   init {
// CHECK-NEXT:     kind: KAIMING_UNIFORM
// CHECK-NEXT:     std: 0
// CHECK-NEXT:     stream: 7
// CHECK-NEXT:   }
// CHECK-NEXT:   adapter {
// CHECK-NEXT:     part: LORA_A
// CHECK-NEXT:     of: "layer.weight"
// CHECK-NEXT:   }
// CHECK:      inputs {
// CHECK-NEXT:   name: "x"
// CHECK-NEXT:   buffer: 2
// CHECK-NEXT:   role: TOKENS
// CHECK:      entry_points {
// CHECK-NEXT:   name: "forward"
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     opcode: MATMUL
// CHECK-NEXT:     operands: 2
// CHECK-NEXT:     operands: 0
// CHECK-NEXT:     results: 4
// CHECK-NEXT:     layer: 3
// CHECK-NEXT:     matmul {
// CHECK-NEXT:       transpose_lhs: false
// CHECK-NEXT:       transpose_rhs: true
// CHECK-NEXT:       alpha: 1
// CHECK:        instructions {
// CHECK-NEXT:     opcode: SCALE
// CHECK-NEXT:     operands: 4
// CHECK-NEXT:     results: 5
// CHECK-NEXT:     layer: 2
// CHECK-NEXT:     scale {
// CHECK-NEXT:       factor: 0.5
// CHECK:        instructions {
// CHECK-NEXT:     opcode: TRANSPOSE
// CHECK-NOT:      layer:
// CHECK:          transpose {
// CHECK-NEXT:       permutation: 1
// CHECK-NEXT:       permutation: 0
// CHECK:        outputs: 7
// CHECK-NEXT:   outputs: 8
// CHECK-NEXT:   output_names: "y"
// CHECK-NEXT:   output_names: "step"
// CHECK-NEXT:   role: FORWARD
// CHECK-NEXT:   output_roles: LOSS_SUM
// CHECK-NEXT:   output_roles: VALUE_UNSPECIFIED
// CHECK-NEXT:   output_updates: -1
// CHECK-NEXT:   output_updates: 3
// CHECK:      states {
// CHECK-NEXT:   name: "step"
// CHECK-NEXT:   buffer: 3
// CHECK-NEXT:   kind: STEP
// CHECK-NEXT: }
// CHECK:      format_version: 14

// -----

// expected-error @+1 {{argument 0 is neither a parameter (twill.param), a state (twill.state) nor an input (twill.input)}}
func.func @unnamed(%x: tensor<3x8xf32>) -> tensor<3x8xf32> {
  return %x : tensor<3x8xf32>
}

// -----

twill.mesh @mesh {axes = ["tp"], shape = [2]}
// expected-error @+1 {{cannot emit a value with a placement}}
func.func @unpartitioned(%x: tensor<3x8xf32, #twill.placement<@mesh, [shard<0>]>> {twill.input = "x"}) {
  return
}
