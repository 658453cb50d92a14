// Every compute op's factor rule (ShardingRuleOpInterface), as propagation
// and partitioning will read it.
// RUN: twill-opt %s --twill-test-sharding-rules | FileCheck %s

// CHECK-LABEL: func.func @forward_ops
func.func @forward_ops(%table: tensor<512x64xf32>, %ids: tensor<2x8xi32>, %w: tensor<96x64xf32>,
                       %g: tensor<64xf32>, %q: tensor<2x8x4x16xf32>, %kv: tensor<2x8x2x16xf32>,
                       %logits: tensor<2x8x512xf32>, %b: tensor<3x16x8xf32>, %c: tensor<3x16x4xf32>) {
  // The vocab of a sharded table gives partial sums.
  // CHECK: twill.embedding {{.*}}twill.sharding_rule = "([k, l], [i, j]) -> ([i, j, l]) {i=2, j=8, k=512, l=64} reduction={k}"
  %h = twill.embedding %table, %ids : (tensor<512x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  // A linear layer x W^T: ([b, s, k], [n, k]) -> ([b, s, n]), k reduced.
  // CHECK: twill.matmul {{.*}}twill.sharding_rule = "([i, j, k], [l, k]) -> ([i, j, l]) {i=2, j=8, k=64, l=96} reduction={k}"
  %y = twill.matmul %h, %w {transpose_rhs} : (tensor<2x8x64xf32>, tensor<96x64xf32>) -> tensor<2x8x96xf32>
  // Batched with a transposed lhs: the batch factor is shared.
  // CHECK: twill.matmul {{.*}}twill.sharding_rule = "([i, k, j], [i, k, l]) -> ([i, j, l]) {i=3, j=8, k=16, l=4} reduction={k}"
  %bm = twill.matmul %b, %c {transpose_lhs} : (tensor<3x16x8xf32>, tensor<3x16x4xf32>) -> tensor<3x8x4xf32>
  // A shared weight's gradient: the batch dims are reductions too.
  // CHECK: twill.matmul {{.*}}twill.sharding_rule = "([i, k, j], [i, k, l]) -> ([j, l]) {i=3, j=8, k=16, l=4} reduction={k, i}"
  %wg = twill.matmul %b, %c {transpose_lhs} : (tensor<3x16x8xf32>, tensor<3x16x4xf32>) -> tensor<8x4xf32>
  // Norms need whole rows.
  // CHECK: twill.rms_norm {{.*}}twill.sharding_rule = "([i, j, k], [k]) -> ([i, j, k]) {i=2, j=8, k=64} replicated={k}"
  %n = twill.rms_norm %h, %g {epsilon = 1.0e-05 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  // CHECK: twill.rope {{.*}}twill.sharding_rule = "([i, j, k, l], [i, j]) -> ([i, j, k, l]) {i=2, j=8, k=4, l=16} replicated={l}"
  %r = twill.rope %q, %ids {theta = 1.0e+04 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  // Heads shard; KV heads are their own factor; the sequence stays whole.
  // CHECK: twill.attention {{.*}}twill.sharding_rule = "([i, j, k, m], [i, j, l, m], [i, j, l, m], [i, j]) -> ([i, j, k, m], [i, k, j]) {i=2, j=8, k=4, l=2, m=16} replicated={j, m}"
  %a, %lse_a = twill.attention %r, %kv, %kv segments(%ids) {scale = 0.25 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  // CHECK: twill.reshape {{.*}}twill.sharding_rule = "([i, j, k, l]) -> ([i, j, (k l)]) {i=2, j=8, k=4, l=16}"
  %m = twill.reshape %a : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
  // CHECK: twill.reshape {{.*}}twill.sharding_rule = "([(i j), k]) -> ([i, j, k]) {i=2, j=8, k=64}"
  %flat = twill.reshape %m : tensor<2x8x64xf32> -> tensor<16x64xf32>
  %unflat = twill.reshape %flat : tensor<16x64xf32> -> tensor<2x8x64xf32>
  // CHECK: twill.transpose {{.*}}twill.sharding_rule = "([i, j, k]) -> ([k, i, j]) {i=2, j=8, k=64}"
  %t = twill.transpose %h, [2, 0, 1] : tensor<2x8x64xf32> -> tensor<64x2x8xf32>
  // CHECK: twill.add {{.*}}twill.sharding_rule = "([i, j, k], [i, j, k]) -> ([i, j, k]) {i=2, j=8, k=64}"
  %s = twill.add %h, %m : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  // The loss sums over positions: sharded positions give partial sums.
  // CHECK: twill.cross_entropy {{.*}}twill.sharding_rule = "([i, j, k], [i, j]) -> ([], []) {i=2, j=8, k=512} reduction={i, j} self-reduced={k}"
  %loss, %count = twill.cross_entropy %logits, %ids : (tensor<2x8x512xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>)
  // The tiled loss: its logits [i, j, l] are formed inside, so one axis
  // splits positions or the vocab, not both; the hidden dim and the tile's
  // rows are whole.
  // CHECK: twill.linear_cross_entropy {{.*}}twill.sharding_rule = "([i, j, k], [l, k], [i, j]) -> ([], [], [m, l]) {i=2, j=8, k=64, l=512, m=5} internal=([i, j, l]) reduction={i, j} replicated={k, m} self-reduced={l}"
  %tl, %tc, %tile = twill.linear_cross_entropy %h, %table, %ids : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>, tensor<5x512xf32>)
  // Its input gradient sums over the vocab (reduced); the weight's over
  // the positions.
  // CHECK: twill.linear_cross_entropy_grad {{.*}}twill.sharding_rule = "([i, j, k], [l, k], [i, j], []) -> ([i, j, k], [m, l]) {i=2, j=8, k=64, l=512, m=5} internal=([i, j, l]) reduction={l} replicated={k, m} self-reduced={l}"
  %dh, %t1 = twill.linear_cross_entropy_grad %h, %table, %ids, %loss : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<2x8x64xf32>, tensor<5x512xf32>)
  // Pieces along a dim share the others; the cut dim is whole everywhere.
  // CHECK: twill.split {{.*}}twill.sharding_rule = "([i, j, k]) -> ([i, l, k], [i, m, k]) {i=2, j=8, k=64, l=5, m=3} replicated={j, l, m}"
  %p0, %p1 = twill.split %h {dim = 1 : i64} : tensor<2x8x64xf32> -> tensor<2x5x64xf32>, tensor<2x3x64xf32>
  // CHECK: twill.concat {{.*}}twill.sharding_rule = "([i, l, k], [i, m, k]) -> ([i, j, k]) {i=2, j=8, k=64, l=5, m=3} replicated={j, l, m}"
  %whole = twill.concat %p0, %p1 {dim = 1 : i64} : tensor<2x5x64xf32>, tensor<2x3x64xf32> -> tensor<2x8x64xf32>
  // In 2 blocks of 4, cut 3 + 1: the cut dim is the blocks (l), which only
  // an axis of 2 ranks may split (exact), then each one's part of a block.
  // CHECK: twill.split {{.*}}twill.sharding_rule = "([i, (l j), k]) -> ([i, (l m), k], [i, (l n), k]) {i=2, j=4, k=64, l=2, m=3, n=1} replicated={j, m, n} exact={l}"
  %b0, %b1 = twill.split %h {dim = 1 : i64, blocks = 2 : i64} : tensor<2x8x64xf32> -> tensor<2x6x64xf32>, tensor<2x2x64xf32>
  // CHECK: twill.concat {{.*}}twill.sharding_rule = "([i, (l m), k], [i, (l n), k]) -> ([i, (l j), k]) {i=2, j=4, k=64, l=2, m=3, n=1} replicated={j, m, n} exact={l}"
  %joined = twill.concat %b0, %b1 {dim = 1 : i64, blocks = 2 : i64} : tensor<2x6x64xf32>, tensor<2x2x64xf32> -> tensor<2x8x64xf32>
  // CHECK: twill.linear_cross_entropy_grad {{.*}}twill.sharding_rule = "([i, j, k], [l, k], [i, j], []) -> ([l, k], [m, l]) {i=2, j=8, k=64, l=512, m=5} internal=([i, j, l]) reduction={i, j} replicated={k, m} self-reduced={l}"
  %dw, %t2 = twill.linear_cross_entropy_grad %h, %table, %ids, %loss {wrt_weight} : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<512x64xf32>, tensor<5x512xf32>)
  return
}

// CHECK-LABEL: func.func @gradient_and_optimizer_ops
func.func @gradient_and_optimizer_ops(%ids: tensor<2x8xi32>, %dh: tensor<2x8x64xf32>, %p: tensor<8x64xf32>,
                                      %s: tensor<f32>, %step: tensor<i64>) {
  // CHECK: twill.embedding_grad {{.*}}twill.sharding_rule = "([i, j], [i, j, l]) -> ([k, l]) {i=2, j=8, k=512, l=64} reduction={i, j}"
  %0 = twill.embedding_grad %ids, %dh : (tensor<2x8xi32>, tensor<2x8x64xf32>) -> tensor<512x64xf32>
  // CHECK: twill.rms_norm_weight_grad {{.*}}twill.sharding_rule = "([i, j, k], [i, j, k]) -> ([k]) {i=2, j=8, k=64} reduction={i, j} replicated={k}"
  %1 = twill.rms_norm_weight_grad %dh, %dh {epsilon = 1.0e-05 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<64xf32>
  // CHECK: twill.adamw {{.*}}twill.sharding_rule = "([i, j], [i, j], [i, j], [i, j], [], [], []) -> ([i, j], [i, j], [i, j]) {i=8, j=64}"
  %p2, %m2, %v2 = twill.adamw %p, %p, %p, %p, %s, %s, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.01 : f64}
      : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<f32>, tensor<f32>, tensor<i64>) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>)
  // CHECK: twill.global_norm {{.*}}twill.sharding_rule = "([i, j], [k, l]) -> ([]) {i=8, j=64, k=8, l=64} replicated={i, j, k, l}"
  %2 = twill.global_norm %p, %p2 : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<f32>
  // CHECK: twill.lr_schedule {{.*}}twill.sharding_rule = "([], []) -> ([]) {}"
  %3 = twill.lr_schedule %step, %step {lr = 1.0e-3 : f64, warmup_steps = 1 : i64} : (tensor<i64>, tensor<i64>) -> tensor<f32>
  return
}

// A router's choice is its group's (a batch row's), as dispatch's is:
// groups shard, a group's tokens, experts and choices stay whole (under
// sequence parallelism the logits are gathered, a few values a token).
// CHECK-LABEL: func.func @moe_ops
func.func @moe_ops(%logits: tensor<2x5x8xf32>, %g: tensor<2x5x2xf32>) {
  // CHECK: twill.route {{.*}}twill.sharding_rule = "([i, j, k]) -> ([i, l, m], [i, n, o]) {i=2, j=5, k=8, l=5, m=2, n=5, o=2} replicated={j, k, l, m, n, o}"
  %w, %e = twill.route %logits : (tensor<2x5x8xf32>) -> (tensor<2x5x2xf32>, tensor<2x5x2xi32>)
  // CHECK: twill.route_grad {{.*}}twill.sharding_rule = "([i, j, k], [i, l, m], [i, n, o]) -> ([i, p, q]) {i=2, j=5, k=8, l=5, m=2, n=5, o=2, p=5, q=8} replicated={j, k, l, m, n, o, p, q}"
  %d = twill.route_grad %logits, %e, %g : (tensor<2x5x8xf32>, tensor<2x5x2xi32>, tensor<2x5x2xf32>) -> tensor<2x5x8xf32>
  return
}

// A router's load sums over its tokens (a sharded token is a partial
// sum), each token's experts whole; the loss of the sums is whole.
// CHECK-LABEL: func.func @load_balancing_ops
func.func @load_balancing_ops(%logits: tensor<2x5x8xf32>, %e: tensor<2x5x2xi32>, %mask: tensor<2x5xi32>, %g: tensor<f32>) {
  // CHECK: twill.expert_load {{.*}}twill.sharding_rule = "([i, j, k], [i, j, l], [i, j]) -> ([k], [k], []) {i=2, j=5, k=8, l=2} reduction={i, j} replicated={k, l}"
  %p, %c, %n = twill.expert_load %logits, %e, %mask : (tensor<2x5x8xf32>, tensor<2x5x2xi32>, tensor<2x5xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<f32>)
  // CHECK: twill.expert_load_grad {{.*}}twill.sharding_rule = "([i, j, k], [i, j], [k]) -> ([i, j, k]) {i=2, j=5, k=8} replicated={k}"
  %d = twill.expert_load_grad %logits, %mask, %p : (tensor<2x5x8xf32>, tensor<2x5xi32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  // CHECK: twill.load_balancing_loss {{.*}}twill.sharding_rule = "([i], [j], []) -> ([]) {i=8, j=8} replicated={i, j}"
  %l = twill.load_balancing_loss %p, %c, %n : (tensor<8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<f32>
  return
}

// dispatch and combine sort a group's tokens among themselves: groups
// shard, the rest stays whole.
// CHECK-LABEL: func.func @dispatch_ops
func.func @dispatch_ops(%x: tensor<2x5x8xf32>, %e: tensor<2x5x2xi32>, %w: tensor<2x5x2xf32>) {
  // CHECK: twill.expert_positions {{.*}}twill.sharding_rule = "([i, j, k]) -> ([i, l, m], [i, n]) {i=2, j=5, k=2, l=5, m=2, n=4} replicated={j, k, l, m, n}"
  %p, %c = twill.expert_positions %e : (tensor<2x5x2xi32>) -> (tensor<2x5x2xi32>, tensor<2x4xi32>)
  // CHECK: twill.dispatch {{.*}}twill.sharding_rule = "([i, j, k], [i, l, m]) -> ([i, n, o]) {i=2, j=5, k=8, l=5, m=2, n=10, o=8} replicated={j, k, l, m, n, o}"
  %r = twill.dispatch %x, %p : (tensor<2x5x8xf32>, tensor<2x5x2xi32>) -> tensor<2x10x8xf32>
  // CHECK: twill.combine {{.*}}twill.sharding_rule = "([i, j, k], [i, l, m], [i, n, o]) -> ([i, p, q]) {i=2, j=10, k=8, l=5, m=2, n=5, o=2, p=5, q=8} replicated={j, k, l, m, n, o, p, q}"
  %y = twill.combine %r, %p weights(%w) : (tensor<2x10x8xf32>, tensor<2x5x2xi32>, tensor<2x5x2xf32>) -> tensor<2x5x8xf32>
  return
}

// A grouped matmul: groups shard, rows and experts stay whole, k is
// summed over; its weight's gradient sums over the groups and rows too.
// CHECK-LABEL: func.func @grouped_matmul_ops
func.func @grouped_matmul_ops(%rows: tensor<2x10x8xf32>, %w: tensor<4x6x8xf32>, %counts: tensor<2x4xi32>) {
  // CHECK: twill.grouped_matmul {{.*}}twill.sharding_rule = "([i, j, k], [l, m, k], [i, l]) -> ([i, j, m]) {i=2, j=10, k=8, l=4, m=6} reduction={k} replicated={j, l}"
  %y = twill.grouped_matmul %rows, %w, %counts {transpose_rhs} : (tensor<2x10x8xf32>, tensor<4x6x8xf32>, tensor<2x4xi32>) -> tensor<2x10x6xf32>
  // CHECK: twill.grouped_matmul_weight_grad {{.*}}twill.sharding_rule = "([i, j, k], [i, j, m], [i, l]) -> ([l, m, k]) {i=2, j=10, k=8, l=4, m=6} reduction={i, j} replicated={j, l}"
  %dw = twill.grouped_matmul_weight_grad %rows, %y, %counts {transpose_rhs} : (tensor<2x10x8xf32>, tensor<2x10x6xf32>, tensor<2x4xi32>) -> tensor<4x6x8xf32>
  return
}
