// twill-plan-memory: values share one arena when their lives do not
// overlap; a result never shares its operands' memory (but for a matmul
// computing in place over its addend); arguments, returned values and
// host-read values keep memory of their own.
// RUN: twill-opt %s --twill-plan-memory -split-input-file | FileCheck %s

// A chain of 1 KiB values where %v1 is read again at the end: %v1 keeps
// offset 0, the others take turns at 1024 and 2048.
// CHECK: module attributes {twill.arena_bytes = 3072 : i64}
// CHECK-LABEL: func.func @chain
func.func @chain(%x: tensor<256xf32> {twill.input = "x"}) -> tensor<256xf32> {
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 0>}
  %v1 = twill.scale %x by 2.0 : tensor<256xf32>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 1024>}
  %v2 = twill.scale %v1 by 2.0 : tensor<256xf32>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 2048>}
  %v3 = twill.scale %v2 by 2.0 : tensor<256xf32>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 1024>}
  %v4 = twill.scale %v3 by 2.0 : tensor<256xf32>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 2048>}
  %v5 = twill.scale %v4 by 2.0 : tensor<256xf32>
  // CHECK: twill.add {{.*}} {twill.arena_offsets = array<i64: -1>}
  %out = twill.add %v5, %v1 : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  return %out : tensor<256xf32>
}

// -----

// A value nothing reads is freed at once; a value the host reads after the
// run keeps its own memory; a value read twice by one op is freed once.
// Sizes round up to 64 bytes. Entry points plan the same arena from empty:
// the module's is the larger of the two.
// CHECK: module attributes {twill.arena_bytes = 192 : i64}
// CHECK-LABEL: func.func @dead_and_host_read
func.func @dead_and_host_read(%x: tensor<8xf32> {twill.input = "x"}) -> tensor<8xf32> {
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 0>}
  %dead = twill.scale %x by 2.0 : tensor<8xf32>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: -1>, twill.host_read}
  %logits = twill.scale %x by 3.0 {twill.host_read} : tensor<8xf32>
  // CHECK: twill.mul {{.*}} {twill.arena_offsets = array<i64: 0>}
  %square = twill.mul %logits, %logits : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  // CHECK: twill.mul {{.*}} {twill.arena_offsets = array<i64: 64>}
  %fourth = twill.mul %square, %square : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  // CHECK: twill.add {{.*}} {twill.arena_offsets = array<i64: -1>}
  %out = twill.add %fourth, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %out : tensor<8xf32>
}
// CHECK-LABEL: func.func @other_entry
func.func @other_entry(%x: tensor<40xf32> {twill.input = "y"}) -> tensor<40xf32> {
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 0>}
  %a = twill.scale %x by 2.0 : tensor<40xf32>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: -1>}
  %b = twill.scale %a by 2.0 : tensor<40xf32>
  return %b : tensor<40xf32>
}

// -----

// A matmul computes in place over an addend it reads for the last time (and
// not as a factor): its result takes the addend's offset. An addend read
// again later, or also a factor, keeps its own.
// CHECK: module attributes {twill.arena_bytes = 192 : i64}
// CHECK-LABEL: func.func @in_place
func.func @in_place(%x: tensor<4x4xf32> {twill.input = "x"}) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 0>}
  %a = twill.scale %x by 2.0 : tensor<4x4xf32>
  // CHECK: twill.matmul {{.*}} {twill.arena_offsets = array<i64: 0>}
  %b = twill.matmul %x, %x plus %a : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  // CHECK: twill.matmul {{.*}} {twill.arena_offsets = array<i64: 64>}
  %c = twill.matmul %x, %x plus %b : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  // CHECK: twill.matmul {{.*}} {twill.arena_offsets = array<i64: 128>}
  %d = twill.matmul %c, %x plus %c : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  // CHECK: twill.add {{.*}} {twill.arena_offsets = array<i64: -1>}
  %e = twill.add %d, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: -1>}
  %f = twill.scale %d by 2.0 : tensor<4x4xf32>
  return %e, %f : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A quantized matmul too: its result takes the offset of an addend it
// reads for the last time.
// CHECK: module attributes {twill.arena_bytes = 64 : i64}
// CHECK-LABEL: func.func @quantized_in_place
func.func @quantized_in_place(%x: tensor<4x4xf32> {twill.input = "x"}, %v: tensor<4x4xi8> {twill.input = "v"}, %s: tensor<4xf32> {twill.input = "s"}) -> tensor<4x4xf32> {
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 0>}
  %a = twill.scale %x by 2.0 : tensor<4x4xf32>
  // CHECK: twill.quantized_matmul {{.*}} {transpose_rhs, twill.arena_offsets = array<i64: 0>}
  %b = twill.quantized_matmul %x, weight(%v, %s) plus %a {transpose_rhs} : (tensor<4x4xf32>, tensor<4x4xi8>, tensor<4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: -1>}
  %c = twill.scale %b by 2.0 : tensor<4x4xf32>
  return %c : tensor<4x4xf32>
}

// -----

// A collective in flight: its result is placed at the start (written until
// the wait) and its input kept until the wait, so the scales in between
// take other memory. The handle has none of its own.
// CHECK: module attributes {twill.arena_bytes = 256 : i64}
// CHECK-LABEL: func.func @in_flight
twill.mesh @mesh {axes = ["dp"], shape = [2]}
func.func @in_flight(%x: tensor<16xf32> {twill.input = "x"}) -> tensor<16xf32> {
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 0>}
  %in = twill.scale %x by 2.0 : tensor<16xf32>
  // CHECK: twill.all_reduce_start {{.*}} {twill.arena_offsets = array<i64: 64>}
  %h = twill.all_reduce_start %in over @mesh["dp"] : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 128>}
  %a = twill.scale %x by 3.0 : tensor<16xf32>
  // CHECK: twill.scale {{.*}} {twill.arena_offsets = array<i64: 192>}
  %b = twill.scale %a by 3.0 : tensor<16xf32>
  // CHECK: twill.wait {{.*}} {twill.arena_offsets = array<i64: 64>}
  %sum = twill.wait %h : !twill.pending<tensor<16xf32>>
  // CHECK: twill.add {{.*}} {twill.arena_offsets = array<i64: 0>}
  %c = twill.add %sum, %b : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  // CHECK: twill.add {{.*}} {twill.arena_offsets = array<i64: -1>}
  %d = twill.add %c, %x : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %d : tensor<16xf32>
}
