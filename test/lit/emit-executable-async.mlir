// A collective in flight becomes its START instruction, which writes the
// buffer of the result, and a WAIT that names that buffer and writes none;
// readers after the wait read the same buffer. The start keeps the
// collective's attributes, and the memory plan's offset for its result.
// RUN: twill-opt %s --twill-plan-memory --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s < %t.txtpb

twill.mesh @mesh {axes = ["dp"], shape = [2]}
func.func @forward(%x: tensor<16xf32> {twill.input = "x"}) -> tensor<32xf32> {
  %h = twill.all_gather_start %x over @mesh["dp"] dim 0 : tensor<16xf32> -> !twill.pending<tensor<32xf32>>
  %y = twill.scale %x by 2.000000e+00 : tensor<16xf32>
  %full = twill.wait %h : !twill.pending<tensor<32xf32>>
  %s = twill.all_reduce_start %y over @mesh["dp"] : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
  %sum = twill.wait %s : !twill.pending<tensor<16xf32>>
  %out = twill.scale %full by 3.000000e+00 : tensor<32xf32>
  %t = twill.transpose %sum, [0] : tensor<16xf32> -> tensor<16xf32>
  return %out : tensor<32xf32>
}

// CHECK:      buffers {
// CHECK:      buffers {
// CHECK-NEXT:   dtype: F32
// CHECK-NEXT:   shape: 32
// CHECK-NEXT:   size_bytes: 128
// CHECK-NEXT:   arena_offset:
// CHECK:      instructions {
// CHECK-NEXT:   opcode: ALL_GATHER_START
// CHECK-NEXT:   operands: 0
// CHECK-NEXT:   results: 1
// CHECK-NEXT:   gather {
// CHECK-NEXT:     axis: "dp"
// CHECK-NEXT:     dim: 0
// CHECK:      instructions {
// CHECK-NEXT:   opcode: SCALE
// CHECK-NEXT:   operands: 0
// CHECK-NEXT:   results: 2
// CHECK:      instructions {
// CHECK-NEXT:   opcode: WAIT
// CHECK-NEXT:   operands: 1
// CHECK-NEXT: }
// CHECK:      instructions {
// CHECK-NEXT:   opcode: ALL_REDUCE_START
// CHECK-NEXT:   operands: 2
// CHECK-NEXT:   results: 3
// CHECK-NEXT:   all_reduce {
// CHECK-NEXT:     axis: "dp"
// CHECK:      instructions {
// CHECK-NEXT:   opcode: WAIT
// CHECK-NEXT:   operands: 3
// CHECK-NEXT: }
// CHECK:      instructions {
// CHECK-NEXT:   opcode: SCALE
// CHECK-NEXT:   operands: 1
// CHECK-NEXT:   results: 4
// CHECK:      instructions {
// CHECK-NEXT:   opcode: TRANSPOSE
// CHECK-NEXT:   operands: 3
// CHECK:      outputs: 4
