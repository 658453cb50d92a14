// twill-partition on small placed functions that are not Llama: one
// rank's program, where every change of placement is a collective on its
// axis and types are local blocks. Collectives made for an op belong to its
// layer (twill.layer), so activation checkpointing recomputes them with it.
// RUN: twill-opt %s --twill-partition -split-input-file | FileCheck %s

// A two-layer MLP with a residual on 2x2 (twill-propagate-sharding's
// placements): FSDP-split weights are gathered on dp right before use; the
// row layer's partial sums are reduce-scattered over tp into sequence
// blocks, and the replicated residual is sliced to match; the result is
// gathered whole for the caller.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[W1:[^:]*]]: tensor<4x8xf32> {twill.global = tensor<16x8xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>>
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x6x8xf32> {twill.global = tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, replicate]>>
// CHECK: %[[G1:.*]] = twill.all_gather %[[W1]] over @mesh["dp"] dim 0 {twill.layer = 0 : i64} : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: twill.matmul %[[X]], %[[G1]] {{.*}} -> tensor<2x6x8xf32>
// CHECK: twill.all_gather {{.*}} over @mesh["dp"] dim 0 {twill.layer = 0 : i64} : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[P:.*]] = twill.matmul
// CHECK-NEXT: %[[S:.*]] = twill.reduce_scatter %[[P]] over @mesh["tp"] dim 1 {twill.layer = 0 : i64} : tensor<2x6x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[R:.*]] = twill.local_slice %[[X]] over @mesh["tp"] dim 1 {twill.layer = 0 : i64} : tensor<2x6x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[Z:.*]] = twill.add %[[S]], %[[R]] {twill.layer = 0 : i64}
// CHECK-NEXT: %[[D:.*]] = twill.all_gather %[[Z]] over @mesh["dp"] dim 0 : tensor<2x3x8xf32> -> tensor<4x3x8xf32>
// CHECK-NEXT: %[[W:.*]] = twill.all_gather %[[D]] over @mesh["tp"] dim 1 : tensor<4x3x8xf32> -> tensor<4x6x8xf32>
// CHECK-NEXT: return %[[W]] : tensor<4x6x8xf32>
twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @mlp(%arg0: tensor<16x8xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>> {twill.param = "up.weight", twill.tp = #twill.tp<column>},
    %arg1: tensor<8x16xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>> {twill.param = "down.weight", twill.tp = #twill.tp<row>},
    %arg2: tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, replicate]>> {twill.input = "x"}) -> tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>> {
  %0 = twill.matmul %arg2, %arg0 {transpose_rhs, twill.layer = 0 : i64} : (tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, replicate]>>, tensor<16x8xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>>) -> tensor<4x6x16xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>
  %1 = twill.mul %0, %0 {twill.layer = 0 : i64} : (tensor<4x6x16xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>, tensor<4x6x16xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>) -> tensor<4x6x16xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>
  %2 = twill.matmul %1, %arg1 {transpose_rhs, twill.layer = 0 : i64} : (tensor<4x6x16xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>, tensor<8x16xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>) -> tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>
  %3 = twill.add %2, %arg2 {twill.layer = 0 : i64} : (tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>, tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, replicate]>>) -> tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>
  return %3 : tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>
}

// -----

// Nothing divides on 1x3: 10 hidden units in blocks of 4 (the last block
// padded), 5 positions in sequence blocks of 2.
// CHECK-LABEL: func.func @uneven(
// CHECK-SAME: tensor<4x8xf32> {twill.global = tensor<10x8xf32
// CHECK-SAME: tensor<8x4xf32> {twill.global = tensor<8x10xf32
// CHECK: twill.matmul {{.*}} -> tensor<2x5x4xf32>
// CHECK: twill.reduce_scatter {{.*}} over @mesh["tp"] dim 1 : tensor<2x5x8xf32> -> tensor<2x2x8xf32>
// CHECK: twill.local_slice {{.*}} over @mesh["tp"] dim 1 : tensor<2x5x8xf32> -> tensor<2x2x8xf32>
// CHECK: twill.all_gather {{.*}} over @mesh["tp"] dim 1 : tensor<2x2x8xf32> -> tensor<2x5x8xf32>
twill.mesh @mesh {axes = ["dp", "tp"], shape = [1, 3], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @uneven(%arg0: tensor<10x8xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>> {twill.param = "up.weight", twill.tp = #twill.tp<column>},
    %arg1: tensor<8x10xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>> {twill.param = "down.weight", twill.tp = #twill.tp<row>},
    %arg2: tensor<2x5x8xf32, #twill.placement<@mesh, [shard<0>, replicate]>> {twill.input = "x"}) -> tensor<2x5x8xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>> {
  %0 = twill.matmul %arg2, %arg0 {transpose_rhs} : (tensor<2x5x8xf32, #twill.placement<@mesh, [shard<0>, replicate]>>, tensor<10x8xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>>) -> tensor<2x5x10xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>
  %1 = twill.matmul %0, %arg1 {transpose_rhs} : (tensor<2x5x10xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>, tensor<8x10xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>) -> tensor<2x5x8xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>
  %2 = twill.add %1, %arg2 : (tensor<2x5x8xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>, tensor<2x5x8xf32, #twill.placement<@mesh, [shard<0>, replicate]>>) -> tensor<2x5x8xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>
  return %2 : tensor<2x5x8xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>
}
