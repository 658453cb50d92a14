// Placements are decided before twill-fuse-epilogues: an addend would be
// added once per rank that holds a partial product.
// RUN: twill-opt %s --twill-propagate-sharding -verify-diagnostics
// RUN: twill-opt %s --twill-partition -verify-diagnostics

twill.mesh @mesh {axes = ["dp", "tp"], shape = [1, 2]}
func.func @forward(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{runs before twill-fuse-epilogues}}
  %p = twill.matmul %x, %w plus %c : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %p : tensor<4x4xf32>
}
