// Collectives in flight: a start returns a handle (!twill.pending<T>, printed
// <T> after the op's colon), the one twill.wait ends it. The verifier
// refuses every unsafe schedule, each case below. (A wait outside the
// start's block is refused too; twill-opt registers no dialect with
// branches to write one.)
// RUN: twill-opt %s -split-input-file -verify-diagnostics | twill-opt | FileCheck %s

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}

// Every collective can start; compute that does not read the result runs
// before the wait.
// CHECK-LABEL: func.func @overlap
func.func @overlap(%x: tensor<2x16x8xf32>, %big: tensor<2x64x8xf32>) -> (tensor<2x64x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x64x2xf32>, tensor<2x16x8xf32>) {
  // CHECK: %[[G:.*]] = twill.all_gather_start %{{.*}} over @mesh["tp"] dim 1 : tensor<2x16x8xf32> -> <tensor<2x64x8xf32>>
  %g = twill.all_gather_start %x over @mesh["tp"] dim 1 : tensor<2x16x8xf32> -> !twill.pending<tensor<2x64x8xf32>>
  // CHECK: twill.reduce_scatter_start %{{.*}} over @mesh["tp"] dim 1 : tensor<2x64x8xf32> -> <tensor<2x16x8xf32>>
  %r = twill.reduce_scatter_start %big over @mesh["tp"] dim 1 : tensor<2x64x8xf32> -> !twill.pending<tensor<2x16x8xf32>>
  // CHECK: twill.all_reduce_start %{{.*}} over @mesh["dp"] : tensor<2x16x8xf32> -> <tensor<2x16x8xf32>>
  %a = twill.all_reduce_start %x over @mesh["dp"] : tensor<2x16x8xf32> -> !twill.pending<tensor<2x16x8xf32>>
  // CHECK: twill.all_to_all_start %{{.*}} over @mesh["tp"] split 2 concat 1 : tensor<2x16x8xf32> -> <tensor<2x64x2xf32>>
  %t = twill.all_to_all_start %x over @mesh["tp"] split 2 concat 1 : tensor<2x16x8xf32> -> !twill.pending<tensor<2x64x2xf32>>
  %s = twill.scale %x by 2.0 : tensor<2x16x8xf32>
  // CHECK: twill.wait %[[G]] : <tensor<2x64x8xf32>>
  %gathered = twill.wait %g : !twill.pending<tensor<2x64x8xf32>>
  %scattered = twill.wait %r : !twill.pending<tensor<2x16x8xf32>>
  %reduced = twill.wait %a : !twill.pending<tensor<2x16x8xf32>>
  %exchanged = twill.wait %t : !twill.pending<tensor<2x64x2xf32>>
  return %gathered, %scattered, %reduced, %exchanged, %s : tensor<2x64x8xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>, tensor<2x64x2xf32>, tensor<2x16x8xf32>
}

// -----

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
func.func @never_waited(%x: tensor<8xf32>) {
  // expected-error @+1 {{is never waited: every start needs one twill.wait}}
  %h = twill.all_reduce_start %x over @mesh["dp"] : tensor<8xf32> -> !twill.pending<tensor<8xf32>>
  return
}

// -----

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
func.func @waited_twice(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{is waited 2 times: a collective ends once}}
  %h = twill.all_reduce_start %x over @mesh["dp"] : tensor<8xf32> -> !twill.pending<tensor<8xf32>>
  %a = twill.wait %h : !twill.pending<tensor<8xf32>>
  %b = twill.wait %h : !twill.pending<tensor<8xf32>>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
func.func @handle_escapes(%x: tensor<8xf32>) -> !twill.pending<tensor<8xf32>> {
  // expected-error @+1 {{hands its handle to func.return: only twill.wait may take it}}
  %h = twill.all_reduce_start %x over @mesh["dp"] : tensor<8xf32> -> !twill.pending<tensor<8xf32>>
  return %h : !twill.pending<tensor<8xf32>>
}

// -----

// The shape rules are the blocking collective's.
twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
func.func @bad_shape(%x: tensor<2x16x8xf32>) -> tensor<2x32x8xf32> {
  // expected-error @+1 {{result must have shape [2, 64, 8], got [2, 32, 8]}}
  %h = twill.all_gather_start %x over @mesh["tp"] dim 1 : tensor<2x16x8xf32> -> !twill.pending<tensor<2x32x8xf32>>
  %y = twill.wait %h : !twill.pending<tensor<2x32x8xf32>>
  return %y : tensor<2x32x8xf32>
}

// -----

// Planned memory (twill.arena_offsets, checked once the module has
// twill.arena_bytes): the input is read and the result written until the
// wait, so nothing between may lie over either. Here the scale lies
// elsewhere: safe.
module attributes {twill.arena_bytes = 192 : i64} {
  twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
  // CHECK-LABEL: func.func @planned
  func.func @planned(%x: tensor<16xf32>) -> tensor<16xf32> {
    %in = twill.scale %x by 2.0 {twill.arena_offsets = array<i64: 0>} : tensor<16xf32>
    %h = twill.all_reduce_start %in over @mesh["dp"] {twill.arena_offsets = array<i64: 64>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %other = twill.scale %x by 3.0 {twill.arena_offsets = array<i64: 128>} : tensor<16xf32>
    %sum = twill.wait %h {twill.arena_offsets = array<i64: 64>} : !twill.pending<tensor<16xf32>>
    %out = twill.add %sum, %other {twill.arena_offsets = array<i64: -1>} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    return %out : tensor<16xf32>
  }
}

// -----

module attributes {twill.arena_bytes = 192 : i64} {
  twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
  func.func @over_input(%x: tensor<16xf32>) -> tensor<16xf32> {
    %in = twill.scale %x by 2.0 {twill.arena_offsets = array<i64: 0>} : tensor<16xf32>
    // expected-error @+1 {{is in flight while twill.scale (result 0) is written over its input: the input's memory is read until the wait}}
    %h = twill.all_reduce_start %in over @mesh["dp"] {twill.arena_offsets = array<i64: 64>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %other = twill.scale %x by 3.0 {twill.arena_offsets = array<i64: 0>} : tensor<16xf32>
    %sum = twill.wait %h {twill.arena_offsets = array<i64: 64>} : !twill.pending<tensor<16xf32>>
    %out = twill.add %sum, %other {twill.arena_offsets = array<i64: -1>} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    return %out : tensor<16xf32>
  }
}

// -----

module attributes {twill.arena_bytes = 192 : i64} {
  twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
  func.func @over_result(%x: tensor<16xf32>) -> tensor<16xf32> {
    %in = twill.scale %x by 2.0 {twill.arena_offsets = array<i64: 0>} : tensor<16xf32>
    // expected-error @+1 {{is in flight while twill.scale (result 0) is written over its result: the result's memory is written until the wait}}
    %h = twill.all_reduce_start %in over @mesh["dp"] {twill.arena_offsets = array<i64: 64>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %other = twill.scale %x by 3.0 {twill.arena_offsets = array<i64: 64>} : tensor<16xf32>
    %sum = twill.wait %h {twill.arena_offsets = array<i64: 64>} : !twill.pending<tensor<16xf32>>
    %out = twill.add %sum, %other {twill.arena_offsets = array<i64: -1>} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    return %out : tensor<16xf32>
  }
}

// -----

// Two collectives in flight may read one input; a copy to host memory
// holds its input as a collective does.
module attributes {twill.arena_bytes = 256 : i64} {
  twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
  // CHECK-LABEL: func.func @shared_input
  func.func @shared_input(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) {
    %in = twill.scale %x by 2.0 {twill.arena_offsets = array<i64: 0>} : tensor<16xf32>
    %h1 = twill.all_reduce_start %in over @mesh["dp"] {twill.arena_offsets = array<i64: 64>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %h2 = twill.all_reduce_start %in over @mesh["tp"] {twill.arena_offsets = array<i64: 128>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %o = twill.offload_start %in {twill.arena_offsets = array<i64: 0>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %s1 = twill.wait %h1 {twill.arena_offsets = array<i64: 64>} : !twill.pending<tensor<16xf32>>
    %s2 = twill.wait %h2 {twill.arena_offsets = array<i64: 128>} : !twill.pending<tensor<16xf32>>
    %host = twill.wait %o {twill.arena_offsets = array<i64: 0>} : !twill.pending<tensor<16xf32>>
    %r = twill.reload_start %host {twill.arena_offsets = array<i64: 192>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %back = twill.wait %r {twill.arena_offsets = array<i64: 192>} : !twill.pending<tensor<16xf32>>
    return %s1, %s2, %back : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
  }
}

// -----

module attributes {twill.arena_bytes = 192 : i64} {
  twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
  func.func @offload_over_input(%x: tensor<16xf32>) -> tensor<16xf32> {
    %in = twill.scale %x by 2.0 {twill.arena_offsets = array<i64: 0>} : tensor<16xf32>
    // expected-error @+1 {{is in flight while twill.scale (result 0) is written over its input}}
    %o = twill.offload_start %in {twill.arena_offsets = array<i64: 0>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %other = twill.scale %x by 3.0 {twill.arena_offsets = array<i64: 32>} : tensor<16xf32>
    %host = twill.wait %o {twill.arena_offsets = array<i64: 0>} : !twill.pending<tensor<16xf32>>
    %r = twill.reload_start %host {twill.arena_offsets = array<i64: 64>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %back = twill.wait %r {twill.arena_offsets = array<i64: 64>} : !twill.pending<tensor<16xf32>>
    %out = twill.add %back, %other {twill.arena_offsets = array<i64: -1>} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    return %out : tensor<16xf32>
  }
}

// -----

// A start whose input lies over another collective's result in flight.
module attributes {twill.arena_bytes = 192 : i64} {
  twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
  func.func @input_over_flight(%x: tensor<16xf32>, %y: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
    %a = twill.scale %x by 2.0 {twill.arena_offsets = array<i64: 0>} : tensor<16xf32>
    %b = twill.scale %y by 2.0 {twill.arena_offsets = array<i64: 128>} : tensor<16xf32>
    %h1 = twill.all_reduce_start %a over @mesh["dp"] {twill.arena_offsets = array<i64: 128>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    // expected-error @+1 {{reads an input in memory that twill.all_reduce_start holds (its result) until its wait}}
    %h2 = twill.all_reduce_start %b over @mesh["dp"] {twill.arena_offsets = array<i64: -1>} : tensor<16xf32> -> !twill.pending<tensor<16xf32>>
    %s1 = twill.wait %h1 {twill.arena_offsets = array<i64: 128>} : !twill.pending<tensor<16xf32>>
    %s2 = twill.wait %h2 {twill.arena_offsets = array<i64: -1>} : !twill.pending<tensor<16xf32>>
    return %s1, %s2 : tensor<16xf32>, tensor<16xf32>
  }
}
