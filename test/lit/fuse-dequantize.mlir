// twill-fuse-dequantize: a quantized weight that only products read as
// their rhs is formed inside each of them (twill.quantized_matmul), never
// as a value of its own.
// RUN: twill-opt %s --twill-fuse-dequantize -split-input-file | FileCheck %s
// RUN: twill-opt %s --twill-fuse-dequantize -split-input-file | twill-opt -split-input-file | FileCheck %s

// The forward's x W^T (with LoRA's product as its addend) and the
// backward's dy W read one NF4 weight: two fused products, the dequantize
// gone; what is said of a product (its layer) stays on it.
// CHECK-LABEL: func.func @nf4(
// CHECK-SAME: %[[C:[^:]*]]: tensor<8x64xi8>, %[[S:[^:]*]]: tensor<8x2xi8>, %[[N:[^:]*]]: tensor<1xf32>, %[[O:[^:]*]]: tensor<f32>, %[[X:[^:]*]]: tensor<3x128xf32>, %[[U:[^:]*]]: tensor<3x8xf32>, %[[D:[^:]*]]: tensor<3x8xf32>
// CHECK-NOT: dequantize_nf4
// CHECK: %[[Y:.*]] = twill.quantized_matmul %[[X]], weight(%[[C]], %[[S]], %[[N]], %[[O]]) plus %[[U]] {alpha = 2.000000e+00 : f64, block_size = 64 : i64, columns = 128 : i64, nested_block_size = 256 : i64, rows = 8 : i64, transpose_rhs, twill.layer = 0 : i64} : (tensor<3x128xf32>, tensor<8x64xi8>, tensor<8x2xi8>, tensor<1xf32>, tensor<f32>, tensor<3x8xf32>) -> tensor<3x8xf32>
// CHECK: %[[G:.*]] = twill.quantized_matmul %[[D]], weight(%[[C]], %[[S]], %[[N]], %[[O]]) {block_size = 64 : i64, columns = 128 : i64, nested_block_size = 256 : i64, rows = 8 : i64} : (tensor<3x8xf32>, tensor<8x64xi8>, tensor<8x2xi8>, tensor<1xf32>, tensor<f32>) -> tensor<3x128xf32>
// CHECK: return %[[Y]], %[[G]]
func.func @nf4(%codes: tensor<8x64xi8>, %absmax: tensor<8x2xi8>, %nested: tensor<1xf32>, %offset: tensor<f32>, %x: tensor<3x128xf32>, %u: tensor<3x8xf32>, %dy: tensor<3x8xf32>) -> (tensor<3x8xf32>, tensor<3x128xf32>) {
  %w = twill.dequantize_nf4 %codes absmax(%absmax) nested(%nested, %offset) {block_size = 64 : i64, nested_block_size = 256 : i64, rows = 8 : i64, columns = 128 : i64} : (tensor<8x64xi8>, tensor<8x2xi8>, tensor<1xf32>, tensor<f32>) -> tensor<8x128xf32>
  %y = twill.matmul %x, %w plus %u {alpha = 2.0 : f64, transpose_rhs, twill.layer = 0 : i64} : (tensor<3x128xf32>, tensor<8x128xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
  %g = twill.matmul %dy, %w : (tensor<3x8xf32>, tensor<8x128xf32>) -> tensor<3x128xf32>
  return %y, %g : tensor<3x8xf32>, tensor<3x128xf32>
}

// -----

// An FP8 weight in bf16: no block attributes.
// CHECK-LABEL: func.func @fp8(
// CHECK-NOT: dequantize_fp8
// CHECK: twill.quantized_matmul %arg2, weight(%arg0, %arg1) {transpose_rhs} : (tensor<2x4x16xbf16>, tensor<8x16xi8>, tensor<8xf32>) -> tensor<2x4x8xbf16>
func.func @fp8(%values: tensor<8x16xi8>, %scales: tensor<8xf32>, %x: tensor<2x4x16xbf16>) -> tensor<2x4x8xbf16> {
  %w = twill.dequantize_fp8 %values scales(%scales) : (tensor<8x16xi8>, tensor<8xf32>) -> tensor<8x16xbf16>
  %y = twill.matmul %x, %w {transpose_rhs} : (tensor<2x4x16xbf16>, tensor<8x16xbf16>) -> tensor<2x4x8xbf16>
  return %y : tensor<2x4x8xbf16>
}

// -----

// A weight something else reads (DoRA's norms) is formed whole, and so is
// one a product reads as its lhs.
// CHECK-LABEL: func.func @kept(
// CHECK: %[[W:.*]] = twill.dequantize_fp8
// CHECK-NEXT: twill.matmul %arg2, %[[W]] {transpose_rhs}
// CHECK-NEXT: twill.row_sum_squares %[[W]]
// CHECK: %[[V:.*]] = twill.dequantize_fp8
// CHECK-NEXT: twill.matmul %[[V]], %arg3
// CHECK-NOT: quantized_matmul
func.func @kept(%values: tensor<8x16xi8>, %scales: tensor<8xf32>, %x: tensor<3x16xf32>, %y: tensor<16x4xf32>) -> (tensor<3x8xf32>, tensor<8xf32>, tensor<8x4xf32>) {
  %w = twill.dequantize_fp8 %values scales(%scales) : (tensor<8x16xi8>, tensor<8xf32>) -> tensor<8x16xf32>
  %p = twill.matmul %x, %w {transpose_rhs} : (tensor<3x16xf32>, tensor<8x16xf32>) -> tensor<3x8xf32>
  %n = twill.row_sum_squares %w : tensor<8x16xf32> -> tensor<8xf32>
  %v = twill.dequantize_fp8 %values scales(%scales) : (tensor<8x16xi8>, tensor<8xf32>) -> tensor<8x16xf32>
  %q = twill.matmul %v, %y : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %p, %n, %q : tensor<3x8xf32>, tensor<8xf32>, tensor<8x4xf32>
}

// -----

// An FP8 weight's x W^T whose x is rounded to e4m3 in blocks says so
// (lhs_fp8_block_size), also through a gather of the rounded positions;
// not where a slice of the last dim may cut a block, nor for the backward's
// dy W.
twill.mesh @mesh {axes = ["dp", "tp"], shape = [1, 2]}
// CHECK-LABEL: func.func @rounded(
// CHECK: %[[R:.*]] = twill.round_to_fp8 %arg2 block 128
// CHECK: twill.quantized_matmul %[[R]], weight(%arg0, %arg1) {lhs_fp8_block_size = 128 : i64, transpose_rhs}
// CHECK: %[[G:.*]] = twill.all_gather %[[R]]
// CHECK: twill.quantized_matmul %[[G]], weight(%arg0, %arg1) {lhs_fp8_block_size = 128 : i64, transpose_rhs}
// CHECK: %[[S:.*]] = twill.local_slice
// CHECK: twill.quantized_matmul %[[S]], weight(%arg3, %arg4) {transpose_rhs}
// CHECK: twill.quantized_matmul %arg5, weight(%arg0, %arg1) :
func.func @rounded(%values: tensor<8x256xi8>, %scales: tensor<8xf32>, %x: tensor<2x4x256xbf16>, %halfValues: tensor<8x128xi8>, %halfScales: tensor<8xf32>, %dy: tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x8x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x256xbf16>) {
  %r = twill.round_to_fp8 %x block 128 : (tensor<2x4x256xbf16>) -> tensor<2x4x256xbf16>
  %w = twill.dequantize_fp8 %values scales(%scales) : (tensor<8x256xi8>, tensor<8xf32>) -> tensor<8x256xbf16>
  %y = twill.matmul %r, %w {transpose_rhs} : (tensor<2x4x256xbf16>, tensor<8x256xbf16>) -> tensor<2x4x8xbf16>
  %g = twill.all_gather %r over @mesh["tp"] dim 1 : tensor<2x4x256xbf16> -> tensor<2x8x256xbf16>
  %z = twill.matmul %g, %w {transpose_rhs} : (tensor<2x8x256xbf16>, tensor<8x256xbf16>) -> tensor<2x8x8xbf16>
  %s = twill.local_slice %r over @mesh["tp"] dim 2 : tensor<2x4x256xbf16> -> tensor<2x4x128xbf16>
  %v = twill.dequantize_fp8 %halfValues scales(%halfScales) : (tensor<8x128xi8>, tensor<8xf32>) -> tensor<8x128xbf16>
  %u = twill.matmul %s, %v {transpose_rhs} : (tensor<2x4x128xbf16>, tensor<8x128xbf16>) -> tensor<2x4x8xbf16>
  %dx = twill.matmul %dy, %w : (tensor<2x4x8xbf16>, tensor<8x256xbf16>) -> tensor<2x4x256xbf16>
  return %y, %z, %u, %dx : tensor<2x4x8xbf16>, tensor<2x8x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x256xbf16>
}
