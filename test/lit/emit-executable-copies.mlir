// Copies to and from host memory in flight: the memory plan puts an
// offload_start's result in the host arena and holds its device input
// until its wait; the Executable has OFFLOAD_START and RELOAD_START, each
// ended by a WAIT that names its result, the offload's result marked in
// the host arena.
// RUN: twill-opt %s --twill-plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: twill-opt %s --twill-plan-memory --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s < %t.txtpb

twill.mesh @mesh {axes = ["dp"], shape = [1]}

// The input %h (64 B at 0) is read by the offload until its wait, so the
// scale between start and wait lies beside it (at 64), not over it; the
// reload's result takes %h's memory back.
// PLAN: module attributes {twill.arena_bytes = 128 : i64, twill.host_arena_bytes = 64 : i64}
// PLAN: twill.scale {{.*}}arena_offsets = array<i64: 0>
// PLAN-NEXT: twill.offload_start {{.*}}arena_offsets = array<i64: 0>
// PLAN-NEXT: twill.scale {{.*}}arena_offsets = array<i64: 64>
// PLAN-NEXT: twill.wait {{.*}}arena_offsets = array<i64: 0>
// PLAN-NEXT: twill.reload_start {{.*}}arena_offsets = array<i64: 0>
func.func @forward(%x: tensor<16xf32> {twill.input = "x"}) -> tensor<16xf32> {
  %h = twill.scale %x by 2.000000e+00 : tensor<16xf32>
  %o = twill.offload_start %h : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
  %y = twill.scale %x by 3.000000e+00 : tensor<16xf32>
  %host = twill.wait %o : !twill.pending<tensor<16xf32>>
  %r = twill.reload_start %host : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
  %back = twill.wait %r : !twill.pending<tensor<16xf32>>
  %out = twill.add %back, %y : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %out : tensor<16xf32>
}

// CHECK:      buffers {
// CHECK:      buffers {
// CHECK:      buffers {
// CHECK-NEXT:   dtype: F32
// CHECK-NEXT:   shape: 16
// CHECK-NEXT:   size_bytes: 64
// CHECK-NEXT:   arena_offset: 0
// CHECK-NEXT:   in_host_arena: true
// CHECK:        opcode: OFFLOAD_START
// CHECK-NEXT:   operands: 1
// CHECK-NEXT:   results: 2
// CHECK:        opcode: WAIT
// CHECK-NEXT:   operands: 2
// CHECK-NEXT: }
// CHECK:        opcode: RELOAD_START
// CHECK-NEXT:   operands: 2
// CHECK-NEXT:   results: 4
// CHECK:        opcode: WAIT
// CHECK-NEXT:   operands: 4
// CHECK-NEXT: }
