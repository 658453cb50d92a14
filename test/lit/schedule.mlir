// twill-schedule: every collective becomes a start and a wait; the wait
// right before the first reader (or, when the readers only make the
// function's results, at the end with them), the start as early as its
// input allows but at most prefetch-layers layers ahead.
// RUN: twill-opt %s --twill-schedule | FileCheck %s
// RUN: twill-opt %s --twill-schedule=prefetch-layers=0 | FileCheck %s --check-prefix=NONE

twill.mesh @mesh {axes = ["dp"], shape = [2]}

// Three layers, each gathering its weight's FSDP shard right before it
// reads it, and a gradient reduce-scatter summed into a result: the sum
// moves after the last compute, the wait with it.
// CHECK-LABEL: func.func @layers
// CHECK-NEXT: %[[H0:.*]] = twill.all_gather_start %arg1 {{.*}}twill.layer = 0
// CHECK-NEXT: %[[H1:.*]] = twill.all_gather_start %arg2 {{.*}}twill.layer = 1
// CHECK-NEXT: %[[W0:.*]] = twill.wait %[[H0]]
// CHECK-NEXT: %[[Y0:.*]] = twill.matmul %arg0, %[[W0]]
// CHECK-NEXT: %[[H2:.*]] = twill.all_gather_start %arg3 {{.*}}twill.layer = 2
// CHECK-NEXT: %[[W1:.*]] = twill.wait %[[H1]]
// CHECK-NEXT: %[[Y1:.*]] = twill.matmul %[[Y0]], %[[W1]]
// CHECK-NEXT: %[[HR:.*]] = twill.reduce_scatter_start %arg4
// CHECK-NEXT: %[[W2:.*]] = twill.wait %[[H2]]
// CHECK-NEXT: %[[Y2:.*]] = twill.matmul %[[Y1]], %[[W2]]
// CHECK-NEXT: %[[S:.*]] = twill.scale %[[Y2]] by 2.0
// CHECK-NEXT: %[[T:.*]] = twill.scale %[[Y2]] by 3.0
// CHECK-NEXT: %[[OUT:.*]] = twill.add %[[T]], %[[Y2]]
// CHECK-NEXT: %[[R:.*]] = twill.wait %[[HR]]
// CHECK-NEXT: %[[SUM:.*]] = twill.add %[[R]], %[[S]]
// CHECK-NEXT: return %[[SUM]], %[[OUT]]

// Without prefetch a layer's gather starts where its layer does: here,
// right before it.
// NONE-LABEL: func.func @layers
// NONE-NEXT: twill.all_gather_start %arg1
// NONE-NEXT: twill.wait
// NONE-NEXT: twill.matmul
// NONE-NEXT: twill.all_gather_start %arg2
// NONE-NEXT: twill.wait
func.func @layers(%x: tensor<4x8xf32>, %w0: tensor<4x8xf32>, %w1: tensor<4x8xf32>, %w2: tensor<4x8xf32>, %g: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a0 = twill.all_gather %w0 over @mesh["dp"] dim 0 {twill.layer = 0 : i64} : tensor<4x8xf32> -> tensor<8x8xf32>
  %y0 = twill.matmul %x, %a0 {transpose_rhs, twill.layer = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a1 = twill.all_gather %w1 over @mesh["dp"] dim 0 {twill.layer = 1 : i64} : tensor<4x8xf32> -> tensor<8x8xf32>
  %y1 = twill.matmul %y0, %a1 {transpose_rhs, twill.layer = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a2 = twill.all_gather %w2 over @mesh["dp"] dim 0 {twill.layer = 2 : i64} : tensor<4x8xf32> -> tensor<8x8xf32>
  %y2 = twill.matmul %y1, %a2 {transpose_rhs, twill.layer = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = twill.reduce_scatter %g over @mesh["dp"] dim 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  %s0 = twill.scale %y2 by 2.0 : tensor<4x8xf32>
  %sum = twill.add %r, %s0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = twill.scale %y2 by 3.0 : tensor<4x8xf32>
  %out = twill.add %s, %y2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %sum, %out : tensor<4x8xf32>, tensor<4x8xf32>
}
