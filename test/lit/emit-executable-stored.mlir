// A parameter that is some rows of a checkpoint's tensor (a block of a
// fused projection, #twill.stored_rows) says so in the Executable, where
// the runtime reads it from and writes it to.
// RUN: twill-opt %s --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s < %t.txtpb

func.func @forward(%q: tensor<4x8xf32> {twill.param = "qkv.weight[0:4]", twill.init = #twill.init<kind = normal, std = 0.02, stream = 1>, twill.stored = #twill.stored_rows<tensor = "qkv.weight", first_row = 0, tensor_rows = 6>},
                   %k: tensor<2x8xf32> {twill.param = "qkv.weight[4:6]", twill.init = #twill.init<kind = normal, std = 0.02, stream = 2>, twill.stored = #twill.stored_rows<tensor = "qkv.weight", first_row = 4, tensor_rows = 6>},
                   %x: tensor<3x8xf32> {twill.input = "x", twill.role = #twill.role<tokens>})
    -> (tensor<3x4xf32> {twill.output = "q"}, tensor<3x2xf32> {twill.output = "k"}) attributes {twill.entry = #twill.entry<forward>} {
  %0 = twill.matmul %x, %q {transpose_rhs} : (tensor<3x8xf32>, tensor<4x8xf32>) -> tensor<3x4xf32>
  %1 = twill.matmul %x, %k {transpose_rhs} : (tensor<3x8xf32>, tensor<2x8xf32>) -> tensor<3x2xf32>
  return %0, %1 : tensor<3x4xf32>, tensor<3x2xf32>
}

// CHECK:      parameters {
// CHECK-NEXT:   name: "qkv.weight[0:4]"
// CHECK:        stored {
// CHECK-NEXT:     tensor: "qkv.weight"
// CHECK-NEXT:     first_row: 0
// CHECK-NEXT:     tensor_rows: 6
// CHECK-NEXT:   }
// CHECK:      parameters {
// CHECK-NEXT:   name: "qkv.weight[4:6]"
// CHECK:        stored {
// CHECK-NEXT:     tensor: "qkv.weight"
// CHECK-NEXT:     first_row: 4
// CHECK-NEXT:     tensor_rows: 6
// CHECK-NEXT:   }
