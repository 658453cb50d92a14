// twill.dequantize_nf4, a frozen weight stored in NF4 (quantization.base): its
// syntax, its factor rule (columns split only in whole blocks), the
// backward's second dequantization (never the forward's copy held), its
// placement (FSDP gathers the bytes; tp splits a row layer's columns where
// it divides the blocks, else the weight stays whole), mixed precision
// (the scales stay fp32) and the instruction and parameters it becomes.
// RUN: twill-opt %s -split-input-file | twill-opt -split-input-file | FileCheck %s --check-prefix=ROUND
// RUN: twill-opt %s -split-input-file --twill-test-sharding-rules | FileCheck %s --check-prefix=RULE
// RUN: twill-opt %s -split-input-file --twill-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: twill-opt %s -split-input-file --twill-mixed-precision | FileCheck %s --check-prefix=BF16
// RUN: twill-opt %s -split-input-file --twill-autodiff --twill-propagate-sharding --twill-partition | FileCheck %s --check-prefix=PART
// RUN: twill-opt %s -split-input-file --twill-autodiff --twill-propagate-sharding --twill-partition --twill-emit-executable=output=%t.txtpb
// RUN: FileCheck %s --check-prefix=EMIT < %t.txtpb

// (The last case's Executable is what the emitter leaves in the file.)

// 3 blocks a row do not split over tp = 2: the weight stays whole on every
// rank, formed whole, and the product takes its rank's columns of it.
twill.mesh @mesh {axes = ["dp", "tp"], shape = [1, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @forward(%codes: tensor<8x96xi8> {twill.param = "down.weight", twill.tp = #twill.tp<row, blocks = 3>, twill.init = #twill.init<kind = normal, std = 2.000000e-02, stream = 1>, twill.quantized = #twill.quantized<codes, of = "down.weight", block_size = 64, nested_block_size = 256>},
                   %absmax: tensor<8x3xi8> {twill.param = "down.weight.absmax", twill.tp = #twill.tp<row, blocks = 3>, twill.init = #twill.init<kind = zeros, stream = 2>, twill.quantized = #twill.quantized<absmax, of = "down.weight", block_size = 64, nested_block_size = 256>},
                   %nested: tensor<1xf32> {twill.param = "down.weight.nested_absmax", twill.tp = #twill.tp<replicate>, twill.init = #twill.init<kind = zeros, stream = 3>, twill.quantized = #twill.quantized<nested_absmax, of = "down.weight", block_size = 64, nested_block_size = 256>},
                   %offset: tensor<f32> {twill.param = "down.weight.nested_offset", twill.tp = #twill.tp<replicate>, twill.init = #twill.init<kind = zeros, stream = 4>, twill.quantized = #twill.quantized<nested_offset, of = "down.weight", block_size = 64, nested_block_size = 256>},
                   %a: tensor<2x192xf32> {twill.param = "down.lora_A.weight", twill.tp = #twill.tp<row>, twill.init = #twill.init<kind = kaiming_uniform, stream = 5>, twill.trainable},
                   %b: tensor<8x2xf32> {twill.param = "down.lora_B.weight", twill.tp = #twill.tp<replicate>, twill.init = #twill.init<kind = zeros, stream = 6>, twill.trainable},
                   %up: tensor<192x16xf32> {twill.param = "up.weight", twill.tp = #twill.tp<column>, twill.init = #twill.init<kind = zeros, stream = 7>, twill.trainable},
                   %x: tensor<2x4x16xf32> {twill.input = "x"},
                   %labels: tensor<2x4xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %w = twill.dequantize_nf4 %codes absmax(%absmax) nested(%nested, %offset) {block_size = 64 : i64, nested_block_size = 256 : i64, rows = 8 : i64, columns = 192 : i64} : (tensor<8x96xi8>, tensor<8x3xi8>, tensor<1xf32>, tensor<f32>) -> tensor<8x192xf32>
  %h = twill.matmul %x, %up {transpose_rhs} : (tensor<2x4x16xf32>, tensor<192x16xf32>) -> tensor<2x4x192xf32>
  %y = twill.matmul %h, %w {transpose_rhs} : (tensor<2x4x192xf32>, tensor<8x192xf32>) -> tensor<2x4x8xf32>
  %d = twill.matmul %h, %a {transpose_rhs} : (tensor<2x4x192xf32>, tensor<2x192xf32>) -> tensor<2x4x2xf32>
  %u = twill.matmul %d, %b {transpose_rhs} : (tensor<2x4x2xf32>, tensor<8x2xf32>) -> tensor<2x4x8xf32>
  %z = twill.add %y, %u : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %loss, %count = twill.cross_entropy %z, %labels : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// ROUND-LABEL: func.func @forward(
// ROUND-SAME: twill.quantized = #twill.quantized<codes, of = "down.weight", block_size = 64, nested_block_size = 256>, twill.tp = #twill.tp<row, blocks = 3>
// ROUND: twill.dequantize_nf4 %{{.*}} absmax(%{{.*}}) nested(%{{.*}}, %{{.*}}) {block_size = 64 : i64, columns = 192 : i64, nested_block_size = 256 : i64, rows = 8 : i64} : (tensor<8x96xi8>, tensor<8x3xi8>, tensor<1xf32>, tensor<f32>) -> tensor<8x192xf32>

// RULE-LABEL: func.func @forward(
// RULE: twill.dequantize_nf4 {{.*}}twill.sharding_rule = "([i, (j k)], [i, j], [m], []) -> ([i, (j l)]) {i=8, j=3, k=32, l=64, m=1} replicated={k, l, m} divisible={j}"

// The step dequantizes once for the forward and again, after the loss, for
// the backward's product with the weight.
// GRAD-LABEL: func.func @train_step(
// GRAD: %[[W:.*]] = twill.dequantize_nf4
// GRAD: twill.matmul %{{.*}}, %[[W]] {transpose_rhs}
// GRAD: twill.cross_entropy_grad
// GRAD-NOT: %[[W]]
// GRAD: %[[AGAIN:.*]] = twill.dequantize_nf4
// GRAD-NEXT: twill.matmul %{{.*}}, %[[AGAIN]] :

// The codes and scales' codes stay bytes and the nested scales fp32; the
// weight is formed in bf16.
// BF16-LABEL: func.func @forward(
// BF16-SAME: tensor<8x96xi8>
// BF16-SAME: tensor<8x3xi8>
// BF16-SAME: tensor<1xf32>
// BF16-SAME: tensor<f32>
// BF16: twill.dequantize_nf4 {{.*}} -> tensor<8x192xbf16>

// PART-LABEL: func.func @train_step(
// PART-SAME: %arg0: tensor<8x96xi8> {twill.global = tensor<8x96xi8, #twill.placement<@mesh, [shard<0>, replicate]>>
// PART: %[[W:.*]] = twill.dequantize_nf4 {{.*}} {block_size = 64 : i64, columns = 192 : i64, nested_block_size = 256 : i64, rows = 8 : i64} : (tensor<8x96xi8>, tensor<8x3xi8>, tensor<1xf32>, tensor<f32>) -> tensor<8x192xf32>
// PART: twill.local_slice %[[W]] over @mesh["tp"] dim 1 : tensor<8x192xf32> -> tensor<8x96xf32>

// -----

// A row layer's weight of 2 blocks a row on a 2 x 2 mesh.
twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 2], roles = [#twill.axis<data>, #twill.axis<tensor>]}
func.func @forward(%codes: tensor<8x64xi8> {twill.param = "down.weight", twill.tp = #twill.tp<row, blocks = 2>, twill.init = #twill.init<kind = normal, std = 2.000000e-02, stream = 1>, twill.quantized = #twill.quantized<codes, of = "down.weight", block_size = 64, nested_block_size = 256>},
                   %absmax: tensor<8x2xi8> {twill.param = "down.weight.absmax", twill.tp = #twill.tp<row, blocks = 2>, twill.init = #twill.init<kind = zeros, stream = 2>, twill.quantized = #twill.quantized<absmax, of = "down.weight", block_size = 64, nested_block_size = 256>},
                   %nested: tensor<1xf32> {twill.param = "down.weight.nested_absmax", twill.tp = #twill.tp<replicate>, twill.init = #twill.init<kind = zeros, stream = 3>, twill.quantized = #twill.quantized<nested_absmax, of = "down.weight", block_size = 64, nested_block_size = 256>},
                   %offset: tensor<f32> {twill.param = "down.weight.nested_offset", twill.tp = #twill.tp<replicate>, twill.init = #twill.init<kind = zeros, stream = 4>, twill.quantized = #twill.quantized<nested_offset, of = "down.weight", block_size = 64, nested_block_size = 256>},
                   %a: tensor<2x128xf32> {twill.param = "down.lora_A.weight", twill.tp = #twill.tp<row>, twill.init = #twill.init<kind = kaiming_uniform, stream = 5>, twill.trainable},
                   %b: tensor<8x2xf32> {twill.param = "down.lora_B.weight", twill.tp = #twill.tp<replicate>, twill.init = #twill.init<kind = zeros, stream = 6>, twill.trainable},
                   %up: tensor<128x16xf32> {twill.param = "up.weight", twill.tp = #twill.tp<column>, twill.init = #twill.init<kind = zeros, stream = 7>, twill.trainable},
                   %x: tensor<2x4x16xf32> {twill.input = "x"},
                   %labels: tensor<2x4xi32> {twill.input = "labels"})
    -> (tensor<f32> {twill.output = "loss_sum"}, tensor<i64> {twill.output = "token_count"}) attributes {twill.entry = #twill.entry<forward>} {
  %w = twill.dequantize_nf4 %codes absmax(%absmax) nested(%nested, %offset) {block_size = 64 : i64, nested_block_size = 256 : i64, rows = 8 : i64, columns = 128 : i64} : (tensor<8x64xi8>, tensor<8x2xi8>, tensor<1xf32>, tensor<f32>) -> tensor<8x128xf32>
  %h = twill.matmul %x, %up {transpose_rhs} : (tensor<2x4x16xf32>, tensor<128x16xf32>) -> tensor<2x4x128xf32>
  %y = twill.matmul %h, %w {transpose_rhs} : (tensor<2x4x128xf32>, tensor<8x128xf32>) -> tensor<2x4x8xf32>
  %d = twill.matmul %h, %a {transpose_rhs} : (tensor<2x4x128xf32>, tensor<2x128xf32>) -> tensor<2x4x2xf32>
  %u = twill.matmul %d, %b {transpose_rhs} : (tensor<2x4x2xf32>, tensor<8x2xf32>) -> tensor<2x4x8xf32>
  %z = twill.add %y, %u : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %loss, %count = twill.cross_entropy %z, %labels : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<i64>)
  return %loss, %count : tensor<f32>, tensor<i64>
}

// FSDP gathers the bytes; each tp rank forms its block of whole blocks of
// columns (shard_axis), in the forward and again in the backward, which
// gathers the incoming gradient, never the formed weight.
// PART-LABEL: func.func @train_step(
// PART: %[[C:.*]] = twill.all_gather %arg0 over @mesh["dp"] dim 0 : tensor<4x32xi8> -> tensor<8x32xi8>
// PART: %[[A:.*]] = twill.all_gather %arg1 over @mesh["dp"] dim 0 : tensor<4x1xi8> -> tensor<8x1xi8>
// PART: %[[N:.*]] = twill.all_gather %arg2 over @mesh["dp"] dim 0 : tensor<1xf32> -> tensor<1xf32>
// PART: twill.dequantize_nf4 %[[C]] absmax(%[[A]]) nested(%[[N]], %arg3) {{{.*}}shard_axis = "tp"} : (tensor<8x32xi8>, tensor<8x1xi8>, tensor<1xf32>, tensor<f32>) -> tensor<8x64xf32>
// PART: twill.cross_entropy_grad
// PART: twill.all_gather %arg0 over @mesh["dp"] dim 0 : tensor<4x32xi8> -> tensor<8x32xi8>
// PART: twill.dequantize_nf4 {{.*}}shard_axis = "tp"
// PART-NOT: twill.all_gather {{.*}} : tensor<8x64xf32>
// PART: return

// EMIT: dtype: U8
// EMIT: name: "down.weight"
// EMIT: quantized {
// EMIT-NEXT: part: CODES
// EMIT-NEXT: of: "down.weight"
// EMIT-NEXT: block_size: 64
// EMIT-NEXT: nested_block_size: 256
// EMIT: quantized {
// EMIT-NEXT: part: ABSMAX
// EMIT: quantized {
// EMIT-NEXT: part: NESTED_ABSMAX
// EMIT: quantized {
// EMIT-NEXT: part: NESTED_OFFSET
// EMIT: opcode: DEQUANTIZE_NF4
// EMIT: dequantize_nf4 {
// EMIT-NEXT: block_size: 64
// EMIT-NEXT: nested_block_size: 256
// EMIT-NEXT: rows: 8
// EMIT-NEXT: columns: 128
// EMIT-NEXT: shard_axis: "tp"

