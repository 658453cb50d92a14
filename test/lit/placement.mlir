// Meshes and placements round-trip; a placement is part of the tensor type.
// RUN: twill-opt %s | twill-opt | FileCheck %s

// CHECK: twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
// CHECK: twill.mesh @line {axes = ["tp"], shape = [8]}
twill.mesh @line {axes = ["tp"], shape = [8]}

// CHECK-LABEL: func.func @column_parallel
// CHECK-SAME: tensor<2x8x64xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>
// CHECK-SAME: tensor<96x64xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>>
// CHECK-SAME: tensor<2x8x96xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>
func.func @column_parallel(
    %x: tensor<2x8x64xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>,
    %w: tensor<96x64xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>>)
    -> tensor<2x8x96xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>> {
  // CHECK: twill.matmul
  // CHECK-SAME: -> tensor<2x8x96xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>
  %0 = twill.matmul %x, %w {transpose_rhs}
      : (tensor<2x8x64xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>,
         tensor<96x64xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>>)
      -> tensor<2x8x96xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>
  return %0 : tensor<2x8x96xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>
}

// CHECK-LABEL: func.func @replicated_on_a_line
// CHECK-SAME: tensor<7x3xf32, #twill.placement<@line, [replicate]>>
func.func @replicated_on_a_line(%x: tensor<7x3xf32, #twill.placement<@line, [replicate]>>)
    -> tensor<7x3xf32, #twill.placement<@line, [replicate]>> {
  // Sizes need not divide the axis (7 rows over 8 devices): no divisibility traps.
  %0 = twill.scale %x by 5.000000e-01 : tensor<7x3xf32, #twill.placement<@line, [replicate]>>
  return %0 : tensor<7x3xf32, #twill.placement<@line, [replicate]>>
}
