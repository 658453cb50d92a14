// twill-propagate-sharding on small functions that are not Llama: every
// parameter placed as its #twill.tp says (FSDP shard<0> on dp), per-step
// inputs split over the batch on dp, and placements carried through each
// op's sharding rule. No name is read.
// RUN: twill-opt %s --twill-propagate-sharding -split-input-file | FileCheck %s

// A two-layer MLP with a residual on 2x2: the column layer's output is
// split over its hidden dim, the row layer's product is a partial sum on
// tp, which the residual add resolves into a sequence shard.
twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: tensor<16x8xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>> {twill.param = "up.weight"
// CHECK-SAME: tensor<8x16xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>> {twill.param = "down.weight"
// CHECK-SAME: tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, replicate]>> {twill.input = "x"}
func.func @mlp(%w1: tensor<16x8xf32> {twill.param = "up.weight", twill.tp = #twill.tp<column>},
               %w2: tensor<8x16xf32> {twill.param = "down.weight", twill.tp = #twill.tp<row>},
               %x: tensor<4x6x8xf32> {twill.input = "x"}) -> tensor<4x6x8xf32> {
  // CHECK: twill.matmul {{.*}} -> tensor<4x6x16xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>
  %h = twill.matmul %x, %w1 {transpose_rhs} : (tensor<4x6x8xf32>, tensor<16x8xf32>) -> tensor<4x6x16xf32>
  // CHECK: twill.mul {{.*}} -> tensor<4x6x16xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>
  %a = twill.mul %h, %h : (tensor<4x6x16xf32>, tensor<4x6x16xf32>) -> tensor<4x6x16xf32>
  // CHECK: twill.matmul {{.*}} -> tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>
  %y = twill.matmul %a, %w2 {transpose_rhs} : (tensor<4x6x16xf32>, tensor<8x16xf32>) -> tensor<4x6x8xf32>
  // CHECK: twill.add {{.*}} -> tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>
  %z = twill.add %y, %x : (tensor<4x6x8xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
  return %z : tensor<4x6x8xf32>
}

// -----

// Weights whose split dim holds attention heads: 3 heads do not split over
// tp = 2, so those weights stay whole on tp (the product too); 2 heads do.
twill.mesh @mesh {axes = ["dp", "tp"], shape = [1, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
// CHECK-LABEL: func.func @heads(
// CHECK-SAME: tensor<24x8xf32, #twill.placement<@mesh, [shard<0>, replicate]>> {twill.param = "q3.weight"
// CHECK-SAME: tensor<16x8xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>> {twill.param = "q2.weight"
// CHECK-SAME: tensor<8x24xf32, #twill.placement<@mesh, [shard<0>, replicate]>> {twill.param = "o3.weight"
func.func @heads(%q3: tensor<24x8xf32> {twill.param = "q3.weight", twill.tp = #twill.tp<column, heads = 3>},
                 %q2: tensor<16x8xf32> {twill.param = "q2.weight", twill.tp = #twill.tp<column, heads = 2>},
                 %o3: tensor<8x24xf32> {twill.param = "o3.weight", twill.tp = #twill.tp<row, heads = 3>},
                 %x: tensor<4x6x8xf32> {twill.input = "x"}) -> (tensor<4x6x24xf32>, tensor<4x6x16xf32>) {
  // CHECK: twill.matmul {{.*}} -> tensor<4x6x24xf32, #twill.placement<@mesh, [shard<0>, replicate]>>
  %a = twill.matmul %x, %q3 {transpose_rhs} : (tensor<4x6x8xf32>, tensor<24x8xf32>) -> tensor<4x6x24xf32>
  // CHECK: twill.matmul {{.*}} -> tensor<4x6x16xf32, #twill.placement<@mesh, [shard<0>, shard<2>]>>
  %b = twill.matmul %x, %q2 {transpose_rhs} : (tensor<4x6x8xf32>, tensor<16x8xf32>) -> tensor<4x6x16xf32>
  return %a, %b : tensor<4x6x24xf32>, tensor<4x6x16xf32>
}

// -----

// A low-rank adapter beside a column layer: A whole on tp, B split like its
// base, so the rank (3) never splits and the two products add shard to
// shard. The mesh's axes are found by their roles, whatever their names and
// order: here the tensor axis comes first.
twill.mesh @mesh {axes = ["model", "batch"], shape = [2, 2], roles = [#twill.axis<tensor>, #twill.axis<data>]}
// CHECK-LABEL: func.func @adapter(
// CHECK-SAME: tensor<3x8xf32, #twill.placement<@mesh, [replicate, shard<0>]>> {twill.param = "proj.lora_A.weight"
// CHECK-SAME: tensor<16x3xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>> {twill.param = "proj.lora_B.weight"
func.func @adapter(%w: tensor<16x8xf32> {twill.param = "proj.weight", twill.tp = #twill.tp<column>},
                   %a: tensor<3x8xf32> {twill.param = "proj.lora_A.weight", twill.tp = #twill.tp<replicate>, twill.trainable},
                   %b: tensor<16x3xf32> {twill.param = "proj.lora_B.weight", twill.tp = #twill.tp<column>, twill.trainable},
                   %x: tensor<4x6x8xf32> {twill.input = "x"}) -> tensor<4x6x16xf32> {
  %y = twill.matmul %x, %w {transpose_rhs} : (tensor<4x6x8xf32>, tensor<16x8xf32>) -> tensor<4x6x16xf32>
  // CHECK: twill.matmul {{.*}} -> tensor<4x6x3xf32, #twill.placement<@mesh, [replicate, shard<0>]>>
  %d = twill.matmul %x, %a {transpose_rhs} : (tensor<4x6x8xf32>, tensor<3x8xf32>) -> tensor<4x6x3xf32>
  // CHECK: twill.matmul {{.*}} -> tensor<4x6x16xf32, #twill.placement<@mesh, [shard<2>, shard<0>]>>
  %u = twill.matmul %d, %b {transpose_rhs} : (tensor<4x6x3xf32>, tensor<16x3xf32>) -> tensor<4x6x16xf32>
  // CHECK: twill.add {{.*}} -> tensor<4x6x16xf32, #twill.placement<@mesh, [shard<2>, shard<0>]>>
  %z = twill.add %y, %u : (tensor<4x6x16xf32>, tensor<4x6x16xf32>) -> tensor<4x6x16xf32>
  return %z : tensor<4x6x16xf32>
}

// -----

// A vocab-split table and its optimizer moment (state carrying the
// parameter's #twill.tp) live alike; a replicated norm weight is only
// FSDP-split; a scalar state is whole. The table's lookup is a partial sum
// over the vocab blocks, resolved by the norm into a sequence shard.
twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
// CHECK-LABEL: func.func @table(
// CHECK-SAME: tensor<10x8xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>> {twill.param = "table"
// CHECK-SAME: tensor<8xf32, #twill.placement<@mesh, [shard<0>, replicate]>> {twill.param = "norm"
// CHECK-SAME: tensor<10x8xf32, #twill.placement<@mesh, [shard<0>, shard<0>]>> {twill.state = "table.moment"
// CHECK-SAME: tensor<f32, #twill.placement<@mesh, [replicate, replicate]>> {twill.state = "count"}
func.func @table(%table: tensor<10x8xf32> {twill.param = "table", twill.tp = #twill.tp<vocab>},
                 %norm: tensor<8xf32> {twill.param = "norm", twill.tp = #twill.tp<replicate>},
                 %moment: tensor<10x8xf32> {twill.state = "table.moment", twill.tp = #twill.tp<vocab>},
                 %count: tensor<f32> {twill.state = "count"},
                 %ids: tensor<4x6xi32> {twill.input = "ids"}) -> (tensor<4x6x8xf32>, tensor<10x8xf32>, tensor<f32>) {
  // CHECK: twill.embedding {{.*}} -> tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, partial<sum>]>>
  %e = twill.embedding %table, %ids : (tensor<10x8xf32>, tensor<4x6xi32>) -> tensor<4x6x8xf32>
  // CHECK: twill.rms_norm {{.*}} -> tensor<4x6x8xf32, #twill.placement<@mesh, [shard<0>, shard<1>]>>
  %n = twill.rms_norm %e, %norm {epsilon = 1.0e-5 : f64} : (tensor<4x6x8xf32>, tensor<8xf32>) -> tensor<4x6x8xf32>
  return %n, %moment, %count : tensor<4x6x8xf32>, tensor<10x8xf32>, tensor<f32>
}
