// twill-schedule: every collective becomes a start and a wait; the wait
// right before the first reader (or, when the readers only make the
// function's results, at the end with them), the start as early as its
// input allows but at most prefetch-layers layers ahead; a wait right after
// its start gets the work that does not need its result moved before it.
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

// A collective waited right after its start (a tensor-parallel gather of
// the local rows, read at once by the base matmul) has work moved in
// between that does not need its result: the LoRA A product reads the
// local rows, and its own gather starts before the first wait. Work that
// depends on the result stays after it, as does the next layer's.
// CHECK-LABEL: func.func @lora_column
// CHECK-NEXT: %[[HX:.*]] = twill.all_gather_start %arg0
// CHECK-NEXT: %[[XA:.*]] = twill.matmul %arg0, %arg2
// CHECK-NEXT: %[[HA:.*]] = twill.all_gather_start %[[XA]]
// CHECK-NEXT: %[[X:.*]] = twill.wait %[[HX]]
// CHECK-NEXT: %[[Y:.*]] = twill.matmul %[[X]], %arg1
// CHECK-NEXT: %[[A:.*]] = twill.wait %[[HA]]
// CHECK-NEXT: %[[OUT:.*]] = twill.matmul %[[A]], %arg3 plus %[[Y]]
// CHECK-NEXT: twill.scale %arg0 by 2.0{{.*}}twill.layer = 1
func.func @lora_column(%x: tensor<4x8xf32>, %w: tensor<6x8xf32>, %a: tensor<2x8xf32>, %b: tensor<6x2xf32>) -> (tensor<8x6xf32>, tensor<4x8xf32>) {
  %g = twill.all_gather %x over @mesh["dp"] dim 0 {twill.layer = 0 : i64} : tensor<4x8xf32> -> tensor<8x8xf32>
  %y = twill.matmul %g, %w {transpose_rhs, twill.layer = 0 : i64} : (tensor<8x8xf32>, tensor<6x8xf32>) -> tensor<8x6xf32>
  %xa = twill.matmul %x, %a {transpose_rhs, twill.layer = 0 : i64} : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x2xf32>
  %ga = twill.all_gather %xa over @mesh["dp"] dim 0 {twill.layer = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
  %out = twill.matmul %ga, %b plus %y {transpose_rhs, twill.layer = 0 : i64} : (tensor<8x2xf32>, tensor<6x2xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %next = twill.scale %x by 2.0 {twill.layer = 1 : i64} : tensor<4x8xf32>
  %z = twill.scale %out by 3.0 {twill.layer = 1 : i64} : tensor<8x6xf32>
  return %z, %next : tensor<8x6xf32>, tensor<4x8xf32>
}

// Copies to and from host memory (twill-offload's) run one at a time: an
// offload starts where it was and is waited before the next copy starts
// (its input stays on the device until then); a reload starts once the
// previous copy is waited, at most a layer ahead, and is waited before
// its reader.
// CHECK-LABEL: func.func @copies
// CHECK-NEXT: %[[H0:.*]] = twill.scale %arg0
// CHECK-NEXT: %[[O0:.*]] = twill.offload_start %[[H0]]
// CHECK-NEXT: %[[H1:.*]] = twill.scale %[[H0]]
// CHECK-NEXT: %[[HOST0:.*]] = twill.wait %[[O0]]
// CHECK-NEXT: %[[O1:.*]] = twill.offload_start %[[H1]]
// CHECK-NEXT: twill.scale %[[H1]]
// CHECK-NEXT: %[[G2:.*]] = twill.scale
// CHECK-NEXT: %[[HOST1:.*]] = twill.wait %[[O1]]
// CHECK-NEXT: %[[R1:.*]] = twill.reload_start %[[HOST1]]
// CHECK-NEXT: %[[B1:.*]] = twill.wait %[[R1]]
// CHECK-NEXT: %[[R0:.*]] = twill.reload_start %[[HOST0]]
// CHECK-NEXT: %[[G1:.*]] = twill.mul %[[G2]], %[[B1]]
// CHECK-NEXT: %[[B0:.*]] = twill.wait %[[R0]]
// CHECK-NEXT: twill.mul %[[G1]], %[[B0]]
func.func @copies(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %h0 = twill.scale %x by 2.0 {twill.layer = 0 : i64} : tensor<4x8xf32>
  %o0 = twill.offload %h0 {twill.layer = 0 : i64} : tensor<4x8xf32>
  %h1 = twill.scale %h0 by 2.0 {twill.layer = 1 : i64} : tensor<4x8xf32>
  %o1 = twill.offload %h1 {twill.layer = 1 : i64} : tensor<4x8xf32>
  %h2 = twill.scale %h1 by 2.0 {twill.layer = 2 : i64} : tensor<4x8xf32>
  %g2 = twill.scale %h2 by 3.0 {twill.layer = 2 : i64} : tensor<4x8xf32>
  %r1 = twill.reload %o1 {twill.layer = 1 : i64} : tensor<4x8xf32>
  %g1 = twill.mul %g2, %r1 {twill.layer = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r0 = twill.reload %o0 {twill.layer = 0 : i64} : tensor<4x8xf32>
  %g0 = twill.mul %g1, %r0 {twill.layer = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %g0 : tensor<4x8xf32>
}

// Work hoisted above a wait that has nothing to overlap stays within a
// tile: above the wait of tile 0's small gather (a LoRA A product) go
// tile 1's piece wait and compute, not tile 2's gather or anything after
// it, so no more than two tiles' values are alive at once (and a layer of
// many tiles is scheduled in time linear in its size).
// CHECK-LABEL: func.func @tile_boundary
// CHECK: %[[L0:.*]] = twill.all_gather_start %{{.*}} : tensor<1x2x2xf32>
// CHECK-NEXT: %[[W1:.*]] = twill.wait
// CHECK-NEXT: twill.wait %[[L0]]
// CHECK-NEXT: twill.matmul
// CHECK-NEXT: %[[G2:.*]] = twill.all_gather_start %{{.*}}#2
// CHECK-NEXT: twill.matmul %[[W1]]
func.func @tile_boundary(%x: tensor<1x6x8xf32>, %a: tensor<2x8xf32>, %w: tensor<6x8xf32>, %b: tensor<6x2xf32>) -> tensor<1x12x6xf32> {
  %p:3 = twill.split %x {dim = 1 : i64, twill.layer = 0 : i64} : tensor<1x6x8xf32> -> tensor<1x2x8xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>
  %g0 = twill.all_gather %p#0 over @mesh["dp"] dim 1 {twill.layer = 0 : i64} : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
  %y0 = twill.matmul %g0, %w {transpose_rhs, twill.layer = 0 : i64} : (tensor<1x4x8xf32>, tensor<6x8xf32>) -> tensor<1x4x6xf32>
  %l0 = twill.matmul %p#0, %a {transpose_rhs, twill.layer = 0 : i64} : (tensor<1x2x8xf32>, tensor<2x8xf32>) -> tensor<1x2x2xf32>
  %lg0 = twill.all_gather %l0 over @mesh["dp"] dim 1 {twill.layer = 0 : i64} : tensor<1x2x2xf32> -> tensor<1x4x2xf32>
  %z0 = twill.matmul %lg0, %b plus %y0 {transpose_rhs, twill.layer = 0 : i64} : (tensor<1x4x2xf32>, tensor<6x2xf32>, tensor<1x4x6xf32>) -> tensor<1x4x6xf32>
  %g1 = twill.all_gather %p#1 over @mesh["dp"] dim 1 {twill.layer = 0 : i64} : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
  %y1 = twill.matmul %g1, %w {transpose_rhs, twill.layer = 0 : i64} : (tensor<1x4x8xf32>, tensor<6x8xf32>) -> tensor<1x4x6xf32>
  %l1 = twill.matmul %p#1, %a {transpose_rhs, twill.layer = 0 : i64} : (tensor<1x2x8xf32>, tensor<2x8xf32>) -> tensor<1x2x2xf32>
  %lg1 = twill.all_gather %l1 over @mesh["dp"] dim 1 {twill.layer = 0 : i64} : tensor<1x2x2xf32> -> tensor<1x4x2xf32>
  %z1 = twill.matmul %lg1, %b plus %y1 {transpose_rhs, twill.layer = 0 : i64} : (tensor<1x4x2xf32>, tensor<6x2xf32>, tensor<1x4x6xf32>) -> tensor<1x4x6xf32>
  %g2 = twill.all_gather %p#2 over @mesh["dp"] dim 1 {twill.layer = 0 : i64} : tensor<1x2x8xf32> -> tensor<1x4x8xf32>
  %y2 = twill.matmul %g2, %w {transpose_rhs, twill.layer = 0 : i64} : (tensor<1x4x8xf32>, tensor<6x8xf32>) -> tensor<1x4x6xf32>
  %l2 = twill.matmul %p#2, %a {transpose_rhs, twill.layer = 0 : i64} : (tensor<1x2x8xf32>, tensor<2x8xf32>) -> tensor<1x2x2xf32>
  %lg2 = twill.all_gather %l2 over @mesh["dp"] dim 1 {twill.layer = 0 : i64} : tensor<1x2x2xf32> -> tensor<1x4x2xf32>
  %z2 = twill.matmul %lg2, %b plus %y2 {transpose_rhs, twill.layer = 0 : i64} : (tensor<1x4x2xf32>, tensor<6x2xf32>, tensor<1x4x6xf32>) -> tensor<1x4x6xf32>
  %z = twill.concat %z0, %z1, %z2 {dim = 1 : i64, twill.layer = 0 : i64} : tensor<1x4x6xf32>, tensor<1x4x6xf32>, tensor<1x4x6xf32> -> tensor<1x12x6xf32>
  return %z : tensor<1x12x6xf32>
}
