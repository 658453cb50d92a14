// twill-fuse-epilogues: a scale and an add that follow a matmul become its
// alpha and addend, when nothing else reads the product.
// RUN: twill-opt %s --twill-fuse-epilogues -split-input-file -verify-diagnostics | FileCheck %s

// LoRA's W x + 2 B(A x): the base product is the second GEMM's addend.
// CHECK-LABEL: func.func @lora(
// CHECK-SAME: %[[X:[^:]*]]: tensor<3x8xf32>, %[[W:[^:]*]]: tensor<16x8xf32>, %[[A:[^:]*]]: tensor<2x8xf32>, %[[B:[^:]*]]: tensor<16x2xf32>
// CHECK-NEXT: %[[Y:.*]] = twill.matmul %[[X]], %[[W]] {transpose_rhs}
// CHECK-NEXT: %[[D:.*]] = twill.matmul %[[X]], %[[A]] {transpose_rhs}
// CHECK-NEXT: %[[Z:.*]] = twill.matmul %[[D]], %[[B]] plus %[[Y]] {alpha = 2.000000e+00 : f64, transpose_rhs} : (tensor<3x2xf32>, tensor<16x2xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
// CHECK-NEXT: return %[[Z]]
func.func @lora(%x: tensor<3x8xf32>, %w: tensor<16x8xf32>, %a: tensor<2x8xf32>, %b: tensor<16x2xf32>) -> tensor<3x16xf32> {
  %y = twill.matmul %x, %w {transpose_rhs} : (tensor<3x8xf32>, tensor<16x8xf32>) -> tensor<3x16xf32>
  %d = twill.matmul %x, %a {transpose_rhs} : (tensor<3x8xf32>, tensor<2x8xf32>) -> tensor<3x2xf32>
  %u = twill.matmul %d, %b {transpose_rhs} : (tensor<3x2xf32>, tensor<16x2xf32>) -> tensor<3x16xf32>
  %s = twill.scale %u by 2.0 : tensor<3x16xf32>
  %z = twill.add %y, %s : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
  return %z : tensor<3x16xf32>
}

// -----

// A product read twice keeps its own value; an add of a non-product, or of
// a value with itself, stays an add. What marks the add (host_read) moves
// to the fused matmul.
// CHECK-LABEL: func.func @kept(
// CHECK: %[[P:.*]] = twill.matmul %arg0, %arg1 :
// CHECK-NEXT: %[[S:.*]] = twill.scale %[[P]] by 3.000000e+00
// CHECK-NEXT: %[[T:.*]] = twill.add %[[P]], %[[S]]
// CHECK-NEXT: %[[Q:.*]] = twill.matmul %arg0, %arg1 plus %[[T]] {twill.host_read} :
// CHECK-NEXT: %[[R:.*]] = twill.add %arg2, %arg2
// CHECK-NEXT: return %[[Q]], %[[R]]
func.func @kept(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %v: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %p = twill.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = twill.scale %p by 3.0 : tensor<4x4xf32>
  %t = twill.add %p, %s : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %q = twill.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %u = twill.add %q, %t {twill.host_read} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = twill.add %v, %v : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %u, %r : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A scale that only matmuls read, as an operand, moves into their alphas
// (LoRA's backward: the scaled output gradient feeds B's gradient and the
// product through B). A scale read as an addend or as both operands stays,
// as does one that anything else reads (@kept).
// CHECK-LABEL: func.func @readers(
// CHECK-NEXT: %[[P:.*]] = twill.matmul %arg0, %arg1 {alpha = 2.000000e+00 : f64} :
// CHECK-NEXT: %[[Q:.*]] = twill.matmul %arg2, %arg0 {alpha = 6.000000e+00 : f64, transpose_lhs} :
// CHECK-NEXT: %[[S:.*]] = twill.scale %arg0 by 5.000000e-01
// CHECK-NEXT: %[[R:.*]] = twill.matmul %arg1, %arg1 plus %[[S]] :
// CHECK-NEXT: %[[T:.*]] = twill.scale %arg0 by 4.000000e+00
// CHECK-NEXT: %[[U:.*]] = twill.matmul %[[T]], %[[T]] :
// CHECK-NEXT: return %[[P]], %[[Q]], %[[R]], %[[U]]
func.func @readers(%g: tensor<4x4xf32>, %b: tensor<4x4xf32>, %x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %s = twill.scale %g by 2.0 : tensor<4x4xf32>
  %p = twill.matmul %s, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %q = twill.matmul %x, %s {transpose_lhs, alpha = 3.0 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %h = twill.scale %g by 0.5 : tensor<4x4xf32>
  %r = twill.matmul %b, %b plus %h : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t = twill.scale %g by 4.0 : tensor<4x4xf32>
  %u = twill.matmul %t, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %p, %q, %r, %u : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// The addend must have the result's type.
func.func @bad(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %c: tensor<4x5xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{addend must have the result's type}}
  %p = twill.matmul %x, %w plus %c : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x5xf32>) -> tensor<4x4xf32>
  return %p : tensor<4x4xf32>
}
