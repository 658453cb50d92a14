// What the frontend states of a model's structure: #twill.tp on parameters
// (how tensor parallelism splits them), #twill.stored_rows on a block of a
// fused tensor, and twill.layer on ops and parameters. They round-trip; the dialect refuses malformed ones.
// RUN: twill-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @styles(
// CHECK-SAME: twill.tp = #twill.tp<column, heads = 32>
// CHECK-SAME: twill.tp = #twill.tp<row>
// CHECK-SAME: twill.tp = #twill.tp<vocab>
// CHECK-SAME: twill.layer = 3 : i64, twill.tp = #twill.tp<replicate>
func.func @styles(%q: tensor<8x8xf32> {twill.tp = #twill.tp<column, heads = 32>},
                  %o: tensor<8x8xf32> {twill.tp = #twill.tp<row>},
                  %e: tensor<8x8xf32> {twill.tp = #twill.tp<vocab>},
                  %n: tensor<8xf32> {twill.layer = 3 : i64, twill.tp = #twill.tp<replicate>}) -> tensor<8x8xf32> {
  // CHECK: twill.add {{.*}} {twill.layer = 3 : i64}
  %s = twill.add %q, %o {twill.layer = 3 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

// expected-error @+1 {{heads must not be negative, got -2}}
func.func @negative_heads(%w: tensor<8x8xf32> {twill.tp = #twill.tp<column, heads = -2>}) {
  return
}

// -----

// expected-error @+1 {{a replicated weight splits into no heads}}
func.func @replicated_heads(%w: tensor<8x8xf32> {twill.tp = #twill.tp<replicate, heads = 4>}) {
  return
}

// -----

// expected-error @+1 {{argument 0: 'twill.tp' must be a #twill.tp<...> style}}
func.func @not_a_style(%w: tensor<8x8xf32> {twill.tp = "column"}) {
  return
}

// -----

// expected-error @+1 {{argument 0: 'twill.layer' must be a non-negative integer layer index}}
func.func @bad_parameter_layer(%w: tensor<8x8xf32> {twill.layer = -1 : i64}) {
  return
}

// -----

func.func @bad_op_layer(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'twill.layer' must be a non-negative integer layer index}}
  %y = twill.scale %x by 2.0 {twill.layer = "first"} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @bad_grad_layer(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'twill.grad_layer' must be a non-negative integer layer index}}
  %y = twill.scale %x by 2.0 {twill.grad_layer = -3 : i64} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @style_on_an_op(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'twill.tp' belongs on a parameter, not an op}}
  %y = twill.scale %x by 2.0 {twill.tp = #twill.tp<row>} : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// expected-error @+1 {{a grad_sum state names the parameter it is kept for (of)}}
func.func @grad_sum_of_nothing(%g: tensor<8xf32> {twill.state = "g", twill.state_role = #twill.state_role<grad_sum>}) {
  return
}

// -----

// expected-error @+1 {{a step state is kept for no one parameter}}
func.func @step_of_a_parameter(%n: tensor<i64> {twill.state = "step", twill.state_role = #twill.state_role<step, of = "w">}) {
  return
}

// -----

// expected-error @+1 {{argument 0: 'twill.state_role' must be a #twill.state_role<...>}}
func.func @state_role_by_name(%n: tensor<i64> {twill.state = "step", twill.state_role = "step"}) {
  return
}

// -----

// CHECK-LABEL: func.func @stored(
// CHECK-SAME: twill.stored = #twill.stored_rows<tensor = "qkv.weight", first_row = 8, tensor_rows = 24>
func.func @stored(%k: tensor<8x8xf32> {twill.stored = #twill.stored_rows<tensor = "qkv.weight", first_row = 8, tensor_rows = 24>}) {
  return
}

// -----

// expected-error @+1 {{stored rows start at row 24, outside the tensor's 24}}
func.func @stored_past_the_end(%k: tensor<8x8xf32> {twill.stored = #twill.stored_rows<tensor = "qkv.weight", first_row = 24, tensor_rows = 24>}) {
  return
}

// -----

// expected-error @+1 {{stored rows name the tensor holding them}}
func.func @stored_nowhere(%k: tensor<8x8xf32> {twill.stored = #twill.stored_rows<tensor = "", first_row = 0, tensor_rows = 8>}) {
  return
}

// -----

// expected-error @+1 {{argument 0: 'twill.stored' must be a #twill.stored_rows<...>}}
func.func @stored_as_a_name(%k: tensor<8x8xf32> {twill.stored = "qkv.weight"}) {
  return
}

// -----

func.func @stored_on_an_op(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'twill.stored' belongs on a parameter, not an op}}
  %y = twill.scale %x by 2.0 {twill.stored = #twill.stored_rows<tensor = "w", first_row = 0, tensor_rows = 8>} : tensor<8xf32>
  return %y : tensor<8xf32>
}
