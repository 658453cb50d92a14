// Every twill op round-trips: printed, parsed back, printed the same.
// RUN: twill-opt %s | twill-opt | FileCheck %s

// CHECK-LABEL: func.func @embedding
func.func @embedding(%table: tensor<512x64xf32>, %ids: tensor<2x8xi32>) -> tensor<2x8x64xf32> {
  // CHECK: twill.embedding %{{.*}}, %{{.*}} : (tensor<512x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  %0 = twill.embedding %table, %ids : (tensor<512x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}

// CHECK-LABEL: func.func @matmul_linear
func.func @matmul_linear(%x: tensor<2x8x64xbf16>, %w: tensor<96x64xbf16>) -> tensor<2x8x96xbf16> {
  // CHECK: twill.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x8x64xbf16>, tensor<96x64xbf16>) -> tensor<2x8x96xbf16>
  %0 = twill.matmul %x, %w {transpose_rhs} : (tensor<2x8x64xbf16>, tensor<96x64xbf16>) -> tensor<2x8x96xbf16>
  return %0 : tensor<2x8x96xbf16>
}

// CHECK-LABEL: func.func @matmul_batched_transposed_lhs
func.func @matmul_batched_transposed_lhs(%a: tensor<3x16x8xf32>, %b: tensor<3x16x4xf32>) -> tensor<3x8x4xf32> {
  // CHECK: twill.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<3x16x8xf32>, tensor<3x16x4xf32>) -> tensor<3x8x4xf32>
  %0 = twill.matmul %a, %b {transpose_lhs} : (tensor<3x16x8xf32>, tensor<3x16x4xf32>) -> tensor<3x8x4xf32>
  return %0 : tensor<3x8x4xf32>
}

// CHECK-LABEL: func.func @rms_norm
func.func @rms_norm(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) -> tensor<2x8x64xf32> {
  // CHECK: twill.rms_norm %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %0 = twill.rms_norm %x, %w {epsilon = 1.0e-05 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return %0 : tensor<2x8x64xf32>
}

// CHECK-LABEL: func.func @rope
func.func @rope(%q: tensor<2x8x4x16xf32>, %pos: tensor<2x8xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) {
  // CHECK: twill.rope %{{.*}}, %{{.*}} {theta = 1.000000e+04 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  %0 = twill.rope %q, %pos {theta = 1.0e+04 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  // CHECK: twill.rope %{{.*}}, %{{.*}} {high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, original_max_position = 8192 : i64, scaling_factor = 8.000000e+00 : f64, theta = 5.000000e+05 : f64}
  %1 = twill.rope %q, %pos {theta = 5.0e+05 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  // Linear scaling: the factor alone.
  // CHECK: twill.rope %{{.*}}, %{{.*}} {scaling_factor = 8.000000e+00 : f64, theta = 1.000000e+06 : f64}
  %2 = twill.rope %q, %pos {theta = 1.0e+06 : f64, scaling_factor = 8.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  return %0, %1, %2 : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x8x4x16xf32>, %kv: tensor<2x8x2x16xf32>, %doc: tensor<2x8xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) {
  // CHECK: twill.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  %0, %lse_0 = twill.attention %q, %kv, %kv {scale = 2.5e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  // CHECK: twill.attention %{{.*}}, %{{.*}}, %{{.*}} segments(%{{.*}}) {scale = 2.500000e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  %1, %lse_1 = twill.attention %q, %kv, %kv segments(%doc) {scale = 2.5e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  // A sliding window of 3 positions.
  // CHECK: twill.attention %{{.*}}, %{{.*}}, %{{.*}} segments(%{{.*}}) {scale = 2.500000e-01 : f64, window = 3 : i64}
  %2, %lse_2 = twill.attention %q, %kv, %kv segments(%doc) {scale = 2.5e-01 : f64, window = 3 : i64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return %0, %1, %2 : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x8x160xf32>, %b: tensor<2x8x160xf32>) -> tensor<2x8x160xf32> {
  // CHECK: twill.swiglu %{{.*}}, %{{.*}} : (tensor<2x8x160xf32>, tensor<2x8x160xf32>) -> tensor<2x8x160xf32>
  %s = twill.swiglu %a, %b : (tensor<2x8x160xf32>, tensor<2x8x160xf32>) -> tensor<2x8x160xf32>
  // CHECK: twill.geglu %{{.*}}, %{{.*}} : (tensor<2x8x160xf32>, tensor<2x8x160xf32>) -> tensor<2x8x160xf32>
  %0 = twill.geglu %s, %b : (tensor<2x8x160xf32>, tensor<2x8x160xf32>) -> tensor<2x8x160xf32>
  // CHECK: twill.add %{{.*}}, %{{.*}} : (tensor<2x8x160xf32>, tensor<2x8x160xf32>) -> tensor<2x8x160xf32>
  %1 = twill.add %0, %a : (tensor<2x8x160xf32>, tensor<2x8x160xf32>) -> tensor<2x8x160xf32>
  // CHECK: twill.mul %{{.*}}, %{{.*}} : (tensor<2x8x160xf32>, tensor<2x8x160xf32>) -> tensor<2x8x160xf32>
  %2 = twill.mul %1, %b : (tensor<2x8x160xf32>, tensor<2x8x160xf32>) -> tensor<2x8x160xf32>
  // CHECK: twill.scale %{{.*}} by 2.000000e+00 : tensor<2x8x160xf32>
  %c = twill.scale %2 by 2.0 : tensor<2x8x160xf32>
  // CHECK: twill.softcap %{{.*}} cap 3.000000e+01 : tensor<2x8x160xf32>
  %3 = twill.softcap %c cap 30.0 : tensor<2x8x160xf32>
  return %3 : tensor<2x8x160xf32>
}

// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%logits: tensor<2x8x512xf32>, %labels: tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>) {
  // CHECK: twill.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x512xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>)
  %loss, %count = twill.cross_entropy %logits, %labels : (tensor<2x8x512xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>)
  // CHECK: twill.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -1 : i64}
  %l2, %c2 = twill.cross_entropy %logits, %labels {ignore_index = -1 : i64} : (tensor<2x8x512xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// CHECK-LABEL: func.func @shape_ops
func.func @shape_ops(%x: tensor<2x8x64xbf16>, %n: tensor<i64>) -> (tensor<8x2x4x16xf32>, tensor<f32>) {
  // CHECK: twill.reshape %{{.*}} : tensor<2x8x64xbf16> -> tensor<2x8x4x16xbf16>
  %0 = twill.reshape %x : tensor<2x8x64xbf16> -> tensor<2x8x4x16xbf16>
  // CHECK: twill.transpose %{{.*}}, [1, 0, 2, 3] : tensor<2x8x4x16xbf16> -> tensor<8x2x4x16xbf16>
  %1 = twill.transpose %0, [1, 0, 2, 3] : tensor<2x8x4x16xbf16> -> tensor<8x2x4x16xbf16>
  // CHECK: twill.cast %{{.*}} : tensor<8x2x4x16xbf16> -> tensor<8x2x4x16xf32>
  %2 = twill.cast %1 : tensor<8x2x4x16xbf16> -> tensor<8x2x4x16xf32>
  // CHECK: twill.cast %{{.*}} : tensor<i64> -> tensor<f32>
  %3 = twill.cast %n : tensor<i64> -> tensor<f32>
  return %2, %3 : tensor<8x2x4x16xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @linear_cross_entropy
func.func @linear_cross_entropy(%h: tensor<2x8x64xf32>, %w: tensor<512x64xf32>, %labels: tensor<2x8xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<2x8x64xf32>, tensor<512x64xf32>) {
  // CHECK: twill.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>, tensor<5x512xf32>)
  %loss, %count, %tile = twill.linear_cross_entropy %h, %w, %labels : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>, tensor<5x512xf32>)
  // CHECK: twill.linear_cross_entropy_grad {{.*}} : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<2x8x64xf32>, tensor<5x512xf32>)
  %dh, %t1 = twill.linear_cross_entropy_grad %h, %w, %labels, %g : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<2x8x64xf32>, tensor<5x512xf32>)
  // CHECK: twill.linear_cross_entropy_grad {{.*}} {wrt_weight} : {{.*}} -> (tensor<512x64xf32>, tensor<5x512xf32>)
  %dw, %t2 = twill.linear_cross_entropy_grad %h, %w, %labels, %g {wrt_weight} : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<512x64xf32>, tensor<5x512xf32>)
  return %loss, %dh, %dw : tensor<f32>, tensor<2x8x64xf32>, tensor<512x64xf32>
}

// Gemma 2's logits, capped a tile at a time.
// CHECK-LABEL: func.func @linear_cross_entropy_capped
func.func @linear_cross_entropy_capped(%h: tensor<2x8x64xf32>, %w: tensor<512x64xf32>, %labels: tensor<2x8xi32>, %g: tensor<f32>) -> (tensor<f32>, tensor<2x8x64xf32>) {
  // CHECK: twill.linear_cross_entropy {{.*}} {softcap = 3.000000e+01 : f64}
  %loss, %count, %tile = twill.linear_cross_entropy %h, %w, %labels {softcap = 30.0 : f64} : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>, tensor<5x512xf32>)
  // CHECK: twill.linear_cross_entropy_grad {{.*}} {softcap = 3.000000e+01 : f64}
  %dh, %t1 = twill.linear_cross_entropy_grad %h, %w, %labels, %g {softcap = 30.0 : f64} : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<2x8x64xf32>, tensor<5x512xf32>)
  return %loss, %dh : tensor<f32>, tensor<2x8x64xf32>
}

// CHECK-LABEL: func.func @offload
func.func @offload(%h: tensor<2x8x64xbf16>) -> tensor<2x8x64xbf16> {
  // CHECK: %[[HOST:.*]] = twill.offload %{{.*}} : tensor<2x8x64xbf16>
  // CHECK-NEXT: twill.reload %[[HOST]] : tensor<2x8x64xbf16>
  %host = twill.offload %h : tensor<2x8x64xbf16>
  %back = twill.reload %host : tensor<2x8x64xbf16>
  return %back : tensor<2x8x64xbf16>
}

// CHECK-LABEL: func.func @copies_in_flight
func.func @copies_in_flight(%h: tensor<2x8x64xbf16>) -> tensor<2x8x64xbf16> {
  // CHECK: %[[O:.*]] = twill.offload_start %{{.*}} : tensor<2x8x64xbf16> -> <tensor<2x8x64xbf16>>
  // CHECK-NEXT: %[[HOST:.*]] = twill.wait %[[O]]
  // CHECK-NEXT: %[[R:.*]] = twill.reload_start %[[HOST]] : tensor<2x8x64xbf16> -> <tensor<2x8x64xbf16>>
  // CHECK-NEXT: twill.wait %[[R]]
  %o = twill.offload_start %h : tensor<2x8x64xbf16> -> !twill.pending<tensor<2x8x64xbf16>>
  %host = twill.wait %o : !twill.pending<tensor<2x8x64xbf16>>
  %r = twill.reload_start %host : tensor<2x8x64xbf16> -> !twill.pending<tensor<2x8x64xbf16>>
  %back = twill.wait %r : !twill.pending<tensor<2x8x64xbf16>>
  return %back : tensor<2x8x64xbf16>
}

// CHECK-LABEL: func.func @split_concat
func.func @split_concat(%x: tensor<2x7x4xf32>) -> tensor<2x7x4xf32> {
  // CHECK: %[[P:.*]]:2 = twill.split %{{.*}} {dim = 1 : i64} : tensor<2x7x4xf32> -> tensor<2x4x4xf32>, tensor<2x3x4xf32>
  // CHECK-NEXT: twill.concat %[[P]]#0, %[[P]]#1 {dim = 1 : i64} : tensor<2x4x4xf32>, tensor<2x3x4xf32> -> tensor<2x7x4xf32>
  %a, %b = twill.split %x {dim = 1 : i64} : tensor<2x7x4xf32> -> tensor<2x4x4xf32>, tensor<2x3x4xf32>
  %y = twill.concat %a, %b {dim = 1 : i64} : tensor<2x4x4xf32>, tensor<2x3x4xf32> -> tensor<2x7x4xf32>
  return %y : tensor<2x7x4xf32>
}

// Blocked: 4 blocks of 8 of the 30 positions (the last of 6), each cut
// 5 + 3: the pieces hold 5 + 5 + 5 + 5 and 3 + 3 + 3 + 1 positions.
// CHECK-LABEL: func.func @split_concat_blocks
func.func @split_concat_blocks(%x: tensor<2x30x4xf32>) -> tensor<2x30x4xf32> {
  // CHECK: %[[P:.*]]:2 = twill.split %{{.*}} {blocks = 4 : i64, dim = 1 : i64} : tensor<2x30x4xf32> -> tensor<2x20x4xf32>, tensor<2x10x4xf32>
  // CHECK-NEXT: twill.concat %[[P]]#0, %[[P]]#1 {blocks = 4 : i64, dim = 1 : i64}
  %a, %b = twill.split %x {dim = 1 : i64, blocks = 4 : i64} : tensor<2x30x4xf32> -> tensor<2x20x4xf32>, tensor<2x10x4xf32>
  %y = twill.concat %a, %b {dim = 1 : i64, blocks = 4 : i64} : tensor<2x20x4xf32>, tensor<2x10x4xf32> -> tensor<2x30x4xf32>
  return %y : tensor<2x30x4xf32>
}

// Each token's 2 of 8 experts, and the gradient back to the logits.
// CHECK-LABEL: func.func @route
func.func @route(%logits: tensor<2x5x8xf32>, %g: tensor<2x5x2xf32>) -> tensor<2x5x8xf32> {
  // CHECK: %[[W:.*]], %[[E:.*]] = twill.route %{{.*}} {normalize} : (tensor<2x5x8xf32>) -> (tensor<2x5x2xf32>, tensor<2x5x2xi32>)
  // CHECK-NEXT: twill.route_grad %{{.*}}, %[[E]], %{{.*}} {normalize} : (tensor<2x5x8xf32>, tensor<2x5x2xi32>, tensor<2x5x2xf32>) -> tensor<2x5x8xf32>
  %w, %e = twill.route %logits {normalize} : (tensor<2x5x8xf32>) -> (tensor<2x5x2xf32>, tensor<2x5x2xi32>)
  %d = twill.route_grad %logits, %e, %g {normalize} : (tensor<2x5x8xf32>, tensor<2x5x2xi32>, tensor<2x5x2xf32>) -> tensor<2x5x8xf32>
  return %d : tensor<2x5x8xf32>
}

// What a router sends each expert, the load-balancing loss of it, and
// their gradients.
// CHECK-LABEL: func.func @load_balancing
func.func @load_balancing(%logits: tensor<2x5x8xf32>, %e: tensor<2x5x2xi32>, %mask: tensor<2x5xi32>, %g: tensor<f32>) -> tensor<2x5x8xf32> {
  // CHECK: %[[P:.*]], %[[C:.*]], %[[N:.*]] = twill.expert_load %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x5x8xf32>, tensor<2x5x2xi32>, tensor<2x5xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<f32>)
  // CHECK-NEXT: twill.load_balancing_loss %[[P]], %[[C]], %[[N]] : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<f32>
  // CHECK-NEXT: %[[DP:.*]] = twill.load_balancing_loss_grad %[[C]], %[[N]], %{{.*}} : (tensor<8xf32>, tensor<f32>, tensor<f32>) -> tensor<8xf32>
  // CHECK-NEXT: twill.expert_load_grad %{{.*}}, %{{.*}}, %[[DP]] : (tensor<2x5x8xf32>, tensor<2x5xi32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %p, %c, %n = twill.expert_load %logits, %e, %mask : (tensor<2x5x8xf32>, tensor<2x5x2xi32>, tensor<2x5xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<f32>)
  %loss = twill.load_balancing_loss %p, %c, %n : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<f32>
  %dp = twill.load_balancing_loss_grad %c, %n, %g : (tensor<8xf32>, tensor<f32>, tensor<f32>) -> tensor<8xf32>
  %d = twill.expert_load_grad %logits, %mask, %dp : (tensor<2x5x8xf32>, tensor<2x5xi32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  return %d : tensor<2x5x8xf32>
}

// A group's tokens sorted by expert, through their rows and back.
// CHECK-LABEL: func.func @dispatch_combine
func.func @dispatch_combine(%x: tensor<2x5x8xf32>, %e: tensor<2x5x2xi32>, %w: tensor<2x5x2xf32>) -> tensor<2x5x2xf32> {
  // CHECK: %[[P:.*]], %{{.*}} = twill.expert_positions %{{.*}} : (tensor<2x5x2xi32>) -> (tensor<2x5x2xi32>, tensor<2x4xi32>)
  // CHECK-NEXT: %[[R:.*]] = twill.dispatch %{{.*}}, %[[P]] : (tensor<2x5x8xf32>, tensor<2x5x2xi32>) -> tensor<2x10x8xf32>
  // CHECK-NEXT: %[[Y:.*]] = twill.combine %[[R]], %[[P]] weights(%{{.*}}) : (tensor<2x10x8xf32>, tensor<2x5x2xi32>, tensor<2x5x2xf32>) -> tensor<2x5x8xf32>
  // CHECK-NEXT: twill.combine_weights_grad %[[R]], %[[P]], %[[Y]] : (tensor<2x10x8xf32>, tensor<2x5x2xi32>, tensor<2x5x8xf32>) -> tensor<2x5x2xf32>
  %p, %counts = twill.expert_positions %e : (tensor<2x5x2xi32>) -> (tensor<2x5x2xi32>, tensor<2x4xi32>)
  %rows = twill.dispatch %x, %p : (tensor<2x5x8xf32>, tensor<2x5x2xi32>) -> tensor<2x10x8xf32>
  %y = twill.combine %rows, %p weights(%w) : (tensor<2x10x8xf32>, tensor<2x5x2xi32>, tensor<2x5x2xf32>) -> tensor<2x5x8xf32>
  %dw = twill.combine_weights_grad %rows, %p, %y : (tensor<2x10x8xf32>, tensor<2x5x2xi32>, tensor<2x5x8xf32>) -> tensor<2x5x2xf32>
  return %dw : tensor<2x5x2xf32>
}

// Each expert's rows times its weight, and the weight's gradient.
// CHECK-LABEL: func.func @grouped_matmul
func.func @grouped_matmul(%rows: tensor<2x10x8xf32>, %w: tensor<4x6x8xf32>, %counts: tensor<2x4xi32>) -> tensor<4x6x8xf32> {
  // CHECK: %[[Y:.*]] = twill.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x10x8xf32>, tensor<4x6x8xf32>, tensor<2x4xi32>) -> tensor<2x10x6xf32>
  // CHECK-NEXT: twill.grouped_matmul_weight_grad %{{.*}}, %[[Y]], %{{.*}} {transpose_rhs} : (tensor<2x10x8xf32>, tensor<2x10x6xf32>, tensor<2x4xi32>) -> tensor<4x6x8xf32>
  %y = twill.grouped_matmul %rows, %w, %counts {transpose_rhs} : (tensor<2x10x8xf32>, tensor<4x6x8xf32>, tensor<2x4xi32>) -> tensor<2x10x6xf32>
  %dw = twill.grouped_matmul_weight_grad %rows, %y, %counts {transpose_rhs} : (tensor<2x10x8xf32>, tensor<2x10x6xf32>, tensor<2x4xi32>) -> tensor<4x6x8xf32>
  return %dw : tensor<4x6x8xf32>
}
