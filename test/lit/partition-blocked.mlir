// A sequence-parallel layer tiled before its all-gather (twill.split and
// twill.concat with blocks = the tp ranks, as the frontend's
// parallel.mlp_tile_tokens makes them): the split's pieces stay sequence
// shards, so each rank cuts its own block (a local split, no blocks); each
// piece is gathered on its own, and each tile's row-parallel partial sum is
// reduce-scattered right after it is made, before the next tile runs. No
// rank holds the whole sequence of the layer's input or output.
// RUN: twill-opt %s --twill-propagate-sharding --twill-partition -split-input-file | FileCheck %s
// In flight (twill-schedule), a piece's gather starts once the previous
// piece's is waited, and a tile's scatter is waited before the next starts:
// at most two tiles' collectives at a time.
// RUN: twill-opt %s --twill-propagate-sharding --twill-partition --twill-schedule -split-input-file | FileCheck %s --check-prefix=FLIGHT

twill.mesh @mesh {axes = ["tp"], shape = [2], roles = [#twill.axis<tensor>]}

// 10 positions in 2 sequence blocks of 5, each cut 3 + 2: the pieces hold
// 6 and 4 positions, 3 and 2 on each rank.
// CHECK-LABEL: func.func @tiled_mlp
// CHECK: %[[H:.*]] = twill.add {{.*}} -> tensor<1x5x8xf32>
// CHECK-NEXT: %[[P:.*]]:2 = twill.split %[[H]] {dim = 1 : i64} : tensor<1x5x8xf32> -> tensor<1x3x8xf32>, tensor<1x2x8xf32>
// CHECK-NEXT: %[[G0:.*]] = twill.all_gather %[[P]]#0 over @mesh["tp"] dim 1 : tensor<1x3x8xf32> -> tensor<1x6x8xf32>
// CHECK-NEXT: %[[U0:.*]] = twill.matmul %[[G0]]
// CHECK-NEXT: %[[D0:.*]] = twill.matmul %[[U0]]
// CHECK-NEXT: %[[S0:.*]] = twill.reduce_scatter %[[D0]] over @mesh["tp"] dim 1 : tensor<1x6x8xf32> -> tensor<1x3x8xf32>
// CHECK-NEXT: %[[G1:.*]] = twill.all_gather %[[P]]#1 over @mesh["tp"] dim 1 : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT: %[[U1:.*]] = twill.matmul %[[G1]]
// CHECK-NEXT: %[[D1:.*]] = twill.matmul %[[U1]]
// CHECK-NEXT: %[[S1:.*]] = twill.reduce_scatter %[[D1]] over @mesh["tp"] dim 1 : tensor<1x4x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %[[Y:.*]] = twill.concat %[[S0]], %[[S1]] {dim = 1 : i64} : tensor<1x3x8xf32>, tensor<1x2x8xf32> -> tensor<1x5x8xf32>
// CHECK-NEXT: twill.add %[[H]], %[[Y]] : (tensor<1x5x8xf32>, tensor<1x5x8xf32>) -> tensor<1x5x8xf32>

// FLIGHT-LABEL: func.func @tiled_mlp
// FLIGHT: %[[P:.*]]:2 = twill.split
// FLIGHT-NEXT: %[[G0:.*]] = twill.all_gather_start %[[P]]#0
// FLIGHT-NEXT: %[[W0:.*]] = twill.wait %[[G0]]
// FLIGHT-NEXT: %[[G1:.*]] = twill.all_gather_start %[[P]]#1
// FLIGHT-NEXT: twill.matmul %[[W0]]
// FLIGHT-NEXT: %[[D0:.*]] = twill.matmul
// FLIGHT-NEXT: %[[S0:.*]] = twill.reduce_scatter_start %[[D0]]
// FLIGHT-NEXT: %[[W1:.*]] = twill.wait %[[G1]]
// FLIGHT-NEXT: twill.matmul %[[W1]]
// FLIGHT-NEXT: %[[D1:.*]] = twill.matmul
// FLIGHT-NEXT: %[[V0:.*]] = twill.wait %[[S0]]
// FLIGHT-NEXT: %[[S1:.*]] = twill.reduce_scatter_start %[[D1]]
// FLIGHT-NEXT: %[[V1:.*]] = twill.wait %[[S1]]
// FLIGHT-NEXT: twill.concat %[[V0]], %[[V1]] {dim = 1 : i64}
func.func @tiled_mlp(%w0: tensor<8x8xf32> {twill.param = "in.weight", twill.tp = #twill.tp<row>},
                     %w1: tensor<16x8xf32> {twill.param = "up.weight", twill.tp = #twill.tp<column>},
                     %w2: tensor<8x16xf32> {twill.param = "down.weight", twill.tp = #twill.tp<row>},
                     %x: tensor<1x10x8xf32> {twill.input = "x"}) -> tensor<1x10x8xf32> {
  // The residual stream: a row layer's partial sum added to its input,
  // scattered over the sequence.
  %x0 = twill.matmul %x, %w0 {transpose_rhs} : (tensor<1x10x8xf32>, tensor<8x8xf32>) -> tensor<1x10x8xf32>
  %h = twill.add %x0, %x : (tensor<1x10x8xf32>, tensor<1x10x8xf32>) -> tensor<1x10x8xf32>
  %p:2 = twill.split %h {dim = 1 : i64, blocks = 2 : i64} : tensor<1x10x8xf32> -> tensor<1x6x8xf32>, tensor<1x4x8xf32>
  %a0 = twill.matmul %p#0, %w1 {transpose_rhs} : (tensor<1x6x8xf32>, tensor<16x8xf32>) -> tensor<1x6x16xf32>
  %y0 = twill.matmul %a0, %w2 {transpose_rhs} : (tensor<1x6x16xf32>, tensor<8x16xf32>) -> tensor<1x6x8xf32>
  %a1 = twill.matmul %p#1, %w1 {transpose_rhs} : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  %y1 = twill.matmul %a1, %w2 {transpose_rhs} : (tensor<1x4x16xf32>, tensor<8x16xf32>) -> tensor<1x4x8xf32>
  %y = twill.concat %y0, %y1 {dim = 1 : i64, blocks = 2 : i64} : tensor<1x6x8xf32>, tensor<1x4x8xf32> -> tensor<1x10x8xf32>
  %z = twill.add %h, %y : (tensor<1x10x8xf32>, tensor<1x10x8xf32>) -> tensor<1x10x8xf32>
  return %z : tensor<1x10x8xf32>
}

// -----

// Blocks that are not the axis's ranks (3 on tp = 2) never split: the
// split runs on the gathered whole.
twill.mesh @mesh {axes = ["tp"], shape = [2], roles = [#twill.axis<tensor>]}
// CHECK-LABEL: func.func @other_blocks
// CHECK: %[[W:.*]] = twill.all_gather {{.*}} over @mesh["tp"] dim 1 : tensor<1x3x8xf32> -> tensor<1x6x8xf32>
// CHECK-NEXT: twill.split %[[W]] {blocks = 3 : i64, dim = 1 : i64} : tensor<1x6x8xf32> -> tensor<1x3x8xf32>, tensor<1x3x8xf32>
func.func @other_blocks(%w0: tensor<8x8xf32> {twill.param = "in.weight", twill.tp = #twill.tp<row>},
                        %x: tensor<1x6x8xf32> {twill.input = "x"}) -> tensor<1x3x8xf32> {
  %x0 = twill.matmul %x, %w0 {transpose_rhs} : (tensor<1x6x8xf32>, tensor<8x8xf32>) -> tensor<1x6x8xf32>
  %h = twill.add %x0, %x : (tensor<1x6x8xf32>, tensor<1x6x8xf32>) -> tensor<1x6x8xf32>
  %p:2 = twill.split %h {dim = 1 : i64, blocks = 3 : i64} : tensor<1x6x8xf32> -> tensor<1x3x8xf32>, tensor<1x3x8xf32>
  %y = twill.mul %p#0, %p#1 : (tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<1x3x8xf32>
  return %y : tensor<1x3x8xf32>
}
