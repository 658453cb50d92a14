// Every shape verifier of the forward ops rejects bad IR with a located error.
// RUN: twill-opt %s -split-input-file -verify-diagnostics

func.func @embedding_table_rank(%table: tensor<512xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{table must have rank 2, got 1}}
  %0 = twill.embedding %table, %ids : (tensor<512xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @embedding_result_shape(%table: tensor<512x64xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{result must have shape [2, 8, 64], got [2, 8, 32]}}
  %0 = twill.embedding %table, %ids : (tensor<512x64xf32>, tensor<2x8xi32>) -> tensor<2x8x32xf32>
  return
}

// -----

func.func @embedding_float_ids(%table: tensor<512x64xf32>, %ids: tensor<2x8xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of signless integer values}}
  %0 = twill.embedding %table, %ids : (tensor<512x64xf32>, tensor<2x8xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @matmul_contracting(%x: tensor<2x8x64xf32>, %w: tensor<96x32xf32>) {
  // expected-error @+1 {{contracting dims differ: 64 vs 32}}
  %0 = twill.matmul %x, %w {transpose_rhs} : (tensor<2x8x64xf32>, tensor<96x32xf32>) -> tensor<2x8x96xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<3x8x16xf32>, %b: tensor<4x16x8xf32>) {
  // expected-error @+1 {{rhs must have no batch dims or lhs's [3], got [4]}}
  %0 = twill.matmul %a, %b : (tensor<3x8x16xf32>, tensor<4x16x8xf32>) -> tensor<3x8x8xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<16xf32>, %b: tensor<16x8xf32>) {
  // expected-error @+1 {{operands must have rank 2 or more}}
  %0 = twill.matmul %a, %b : (tensor<16xf32>, tensor<16x8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>) {
  // expected-error @+1 {{result must have shape [8, 4], got [4, 8]}}
  %0 = twill.matmul %a, %b : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_element_types(%a: tensor<8x16xbf16>, %b: tensor<16x4xf32>) {
  // expected-error @+1 {{expects one element type, got 'bf16' and 'f32'}}
  %0 = twill.matmul %a, %b : (tensor<8x16xbf16>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x8x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{weight must have shape [64], got [32]}}
  %0 = twill.rms_norm %x, %w {epsilon = 1.0e-05 : f64} : (tensor<2x8x64xf32>, tensor<32xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rms_norm_epsilon(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %0 = twill.rms_norm %x, %w {epsilon = 0.0 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rope_odd_head_dim(%q: tensor<2x8x4x15xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{head dim must be even, got 15}}
  %0 = twill.rope %q, %pos {theta = 1.0e+04 : f64} : (tensor<2x8x4x15xf32>, tensor<2x8xi32>) -> tensor<2x8x4x15xf32>
  return
}

// -----

func.func @rope_positions(%q: tensor<2x8x4x16xf32>, %pos: tensor<2x6xi32>) {
  // expected-error @+1 {{positions must have shape [2, 8], got [2, 6]}}
  %0 = twill.rope %q, %pos {theta = 1.0e+04 : f64} : (tensor<2x8x4x16xf32>, tensor<2x6xi32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @rope_rank(%q: tensor<2x8x64xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{input must have rank 4, got 3}}
  %0 = twill.rope %q, %pos {theta = 1.0e+04 : f64} : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @rope_scaling(%q: tensor<2x8x4x16xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{rope scaling needs 0 < low_freq_factor < high_freq_factor}}
  %0 = twill.rope %q, %pos {theta = 1.0e+04 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 4.0 : f64, high_freq_factor = 1.0 : f64, original_max_position = 8192 : i64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @rope_partial_scaling(%q: tensor<2x8x4x16xf32>, %pos: tensor<2x8xi32>) {
  // expected-error @+1 {{rope scaling needs scaling_factor alone (linear), or scaling_factor, low_freq_factor, high_freq_factor and original_max_position together (llama3)}}
  %0 = twill.rope %q, %pos {theta = 1.0e+04 : f64, scaling_factor = 8.0 : f64, low_freq_factor = 1.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8xi32>) -> tensor<2x8x4x16xf32>
  return
}

// -----

func.func @attention_gqa(%q: tensor<2x8x4x16xf32>, %kv: tensor<2x8x3x16xf32>) {
  // expected-error @+1 {{query heads (4) must be a multiple of key/value heads (3)}}
  %0, %lse_0 = twill.attention %q, %kv, %kv {scale = 2.5e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_log_sum_exp_shape(%q: tensor<2x8x4x16xf32>, %kv: tensor<2x8x2x16xf32>) {
  // expected-error @+1 {{log_sum_exp must have shape [2, 4, 8], got [2, 8, 4]}}
  %0, %lse_0 = twill.attention %q, %kv, %kv {scale = 2.5e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4xf32>)
  return
}

// -----

// The log-sum-exp stays fp32 in a bf16 program (cuDNN's statistics are).
func.func @attention_log_sum_exp_type(%q: tensor<2x8x4x16xbf16>, %kv: tensor<2x8x2x16xbf16>) {
  // expected-error @+1 {{result #1 must be statically shaped tensor of 32-bit float values}}
  %0, %lse_0 = twill.attention %q, %kv, %kv {scale = 2.5e-01 : f64} : (tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xbf16>)
  return
}

// -----

func.func @attention_window(%q: tensor<2x8x4x16xf32>, %kv: tensor<2x8x2x16xf32>) {
  // expected-error @+1 {{window must be at least 1}}
  %0, %lse_0 = twill.attention %q, %kv, %kv {scale = 2.5e-01 : f64, window = 0 : i64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_key_shape(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x8xf32>) {
  // expected-error @+1 {{key must have shape [2, 8, 2, 16], got [2, 8, 2, 8]}}
  %0, %lse_0 = twill.attention %q, %k, %k {scale = 2.5e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_value_shape(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x1x16xf32>) {
  // expected-error @+1 {{value must have shape [2, 8, 2, 16], got [2, 8, 1, 16]}}
  %0, %lse_0 = twill.attention %q, %k, %v {scale = 2.5e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x1x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_segments(%q: tensor<2x8x4x16xf32>, %kv: tensor<2x8x2x16xf32>, %doc: tensor<2x7xi32>) {
  // expected-error @+1 {{segments must have shape [2, 8], got [2, 7]}}
  %0, %lse_0 = twill.attention %q, %kv, %kv segments(%doc) {scale = 2.5e-01 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x7xi32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_scale(%q: tensor<2x8x4x16xf32>, %kv: tensor<2x8x2x16xf32>) {
  // expected-error @+1 {{scale must be positive}}
  %0, %lse_0 = twill.attention %q, %kv, %kv {scale = -1.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @add_shapes(%a: tensor<2x8xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{rhs must have shape [2, 8], got [2, 4]}}
  %0 = twill.add %a, %b : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @mul_result(%a: tensor<2x8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+1 {{result must have shape [2, 8], got [8, 2]}}
  %0 = twill.mul %a, %b : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x2xf32>
  return
}

// -----

func.func @swiglu_element_types(%a: tensor<2x8xf32>, %b: tensor<2x8xbf16>) {
  // expected-error @+1 {{expects one element type, got 'f32' and 'bf16'}}
  %0 = twill.swiglu %a, %b : (tensor<2x8xf32>, tensor<2x8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @linear_cross_entropy_tile(%h: tensor<2x8x64xf32>, %w: tensor<512x64xf32>, %labels: tensor<2x8xi32>) {
  // expected-error @+1 {{tile must have shape [5, 512], got [5, 256]}}
  %loss, %count, %tile = twill.linear_cross_entropy %h, %w, %labels : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>, tensor<5x256xf32>)
  return
}

// -----

func.func @linear_cross_entropy_cap(%h: tensor<2x8x64xf32>, %w: tensor<512x64xf32>, %labels: tensor<2x8xi32>) {
  // expected-error @+1 {{cap must be positive}}
  %loss, %count, %tile = twill.linear_cross_entropy %h, %w, %labels {softcap = 0.0 : f64} : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>, tensor<5x512xf32>)
  return
}

// -----

func.func @linear_cross_entropy_grad_cap(%h: tensor<2x8x64xf32>, %w: tensor<512x64xf32>, %labels: tensor<2x8xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{cap must be positive}}
  %dh, %t1 = twill.linear_cross_entropy_grad %h, %w, %labels, %g {softcap = -1.0 : f64} : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<2x8x64xf32>, tensor<5x512xf32>)
  return
}

// -----

func.func @linear_cross_entropy_hidden(%h: tensor<2x8x32xf32>, %w: tensor<512x64xf32>, %labels: tensor<2x8xi32>) {
  // expected-error @+1 {{weight must have shape [512, 32], got [512, 64]}}
  %loss, %count, %tile = twill.linear_cross_entropy %h, %w, %labels : (tensor<2x8x32xf32>, tensor<512x64xf32>, tensor<2x8xi32>) -> (tensor<f32>, tensor<i64>, tensor<5x512xf32>)
  return
}

// -----

func.func @linear_cross_entropy_grad_wrt(%h: tensor<2x8x64xf32>, %w: tensor<512x64xf32>, %labels: tensor<2x8xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{result must have shape [512, 64], got [2, 8, 64]}}
  %dw, %tile = twill.linear_cross_entropy_grad %h, %w, %labels, %g {wrt_weight} : (tensor<2x8x64xf32>, tensor<512x64xf32>, tensor<2x8xi32>, tensor<f32>) -> (tensor<2x8x64xf32>, tensor<5x512xf32>)
  return
}

// -----

func.func @offload_read_by_a_kernel(%h: tensor<2x8xf32>) {
  // expected-error @+1 {{result lives in host memory: only twill.reload may read it, not twill.add}}
  %host = twill.offload %h : tensor<2x8xf32>
  %0 = twill.add %host, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @reload_of_a_device_value(%h: tensor<2x8xf32>) {
  // expected-error @+1 {{reads what a twill.offload made}}
  %0 = twill.reload %h : tensor<2x8xf32>
  return
}

// -----

func.func @reload_start_of_a_device_value(%h: tensor<2x8xf32>) {
  // expected-error @+1 {{reads what a twill.offload made}}
  %r = twill.reload_start %h : tensor<2x8xf32> -> !twill.pending<tensor<2x8xf32>>
  %0 = twill.wait %r : !twill.pending<tensor<2x8xf32>>
  return
}

// -----

func.func @offload_in_flight_read_by_a_kernel(%h: tensor<2x8xf32>) {
  // expected-error @+1 {{result lives in host memory: only twill.reload may read it, not twill.add}}
  %o = twill.offload_start %h : tensor<2x8xf32> -> !twill.pending<tensor<2x8xf32>>
  %host = twill.wait %o : !twill.pending<tensor<2x8xf32>>
  %0 = twill.add %host, %host : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @offload_start_never_waited(%h: tensor<2x8xf32>) {
  // expected-error @+1 {{is never waited}}
  %o = twill.offload_start %h : tensor<2x8xf32> -> !twill.pending<tensor<2x8xf32>>
  return
}

// -----

func.func @split_short(%x: tensor<2x7x4xf32>) {
  // expected-error @+1 {{pieces do not lay out dim 1: pieces cover 6 of 7 positions}}
  %a, %b = twill.split %x {dim = 1 : i64} : tensor<2x7x4xf32> -> tensor<2x4x4xf32>, tensor<2x2x4xf32>
  return
}

// -----

// 3 blocks of 4 of the 10 positions (4, 4, 2): chunks of ceil(7 / 3) = 3
// and ceil(3 / 3) = 1 cover a block, but the first piece's chunks hold
// 3 + 3 + 2 = 8 positions, not 7.
func.func @split_blocks_miscounted(%x: tensor<10x4xf32>) {
  // expected-error @+1 {{pieces do not lay out dim 0: piece 0 has 7 positions, its chunks 8}}
  %a, %b = twill.split %x {dim = 0 : i64, blocks = 3 : i64} : tensor<10x4xf32> -> tensor<7x4xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @concat_blocks_short(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+1 {{pieces' chunks cover 4 of each block's 5 positions (2 blocks of 10)}}
  %y = twill.concat %a, %b {dim = 0 : i64, blocks = 2 : i64} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<10x4xf32>
  return
}

// -----

func.func @split_no_blocks(%x: tensor<10x4xf32>) {
  // expected-error @+1 {{blocks 0 is not positive}}
  %a = twill.split %x {dim = 0 : i64, blocks = 0 : i64} : tensor<10x4xf32> -> tensor<10x4xf32>
  return
}

// -----

func.func @concat_other_dim(%a: tensor<2x4x4xf32>, %b: tensor<2x3x5xf32>) {
  // expected-error @+1 {{piece must have shape [2, 3, 4], got [2, 3, 5]}}
  %y = twill.concat %a, %b {dim = 1 : i64} : tensor<2x4x4xf32>, tensor<2x3x5xf32> -> tensor<2x7x4xf32>
  return
}

// -----

func.func @cross_entropy_labels(%logits: tensor<2x8x512xf32>, %labels: tensor<2x7xi32>) {
  // expected-error @+1 {{labels must have shape [2, 8], got [2, 7]}}
  %loss, %count = twill.cross_entropy %logits, %labels : (tensor<2x8x512xf32>, tensor<2x7xi32>) -> (tensor<f32>, tensor<i64>)
  return
}

// -----

func.func @reshape_count(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{cannot reshape 1024 elements into 1000}}
  %0 = twill.reshape %x : tensor<2x8x64xf32> -> tensor<10x100xf32>
  return
}

// -----

func.func @transpose_not_a_permutation(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{permutation [0, 0, 2] is not a permutation of the 3 input dims}}
  %0 = twill.transpose %x, [0, 0, 2] : tensor<2x8x64xf32> -> tensor<2x2x64xf32>
  return
}

// -----

func.func @transpose_result(%x: tensor<2x8x64xf32>) {
  // expected-error @+1 {{result must have shape [8, 2, 64], got [2, 8, 64]}}
  %0 = twill.transpose %x, [1, 0, 2] : tensor<2x8x64xf32> -> tensor<2x8x64xf32>
  return
}

// -----

func.func @cast_to_integer(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{cannot cast floats to integers}}
  %0 = twill.cast %x : tensor<2x8xf32> -> tensor<2x8xi32>
  return
}

// -----

func.func @cast_shape(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result must have shape [2, 8], got [16]}}
  %0 = twill.cast %x : tensor<2x8xf32> -> tensor<16xbf16>
  return
}

// -----

func.func @dynamic_shapes(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %0 = twill.scale %x by 2.0 : tensor<?x8xf32>
  return
}

// -----

func.func @dropout_rate(%x: tensor<2x8x16xf32>, %i: tensor<2x8xi32>, %m: tensor<i64>) {
  // expected-error @+1 {{rate must be in (0, 1), got 1}}
  %0 = twill.dropout %x tokens(%i) micro_batch(%m) {rate = 1.0 : f64, seed = 0 : i64, stream = 1 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi32>, tensor<i64>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @dropout_tokens(%x: tensor<2x8x16xf32>, %i: tensor<2x4xi32>, %m: tensor<i64>) {
  // expected-error @+1 {{tokens must have shape [2, 8], got [2, 4]}}
  %0 = twill.dropout %x tokens(%i) micro_batch(%m) {rate = 0.5 : f64, seed = 0 : i64, stream = 1 : i64} : (tensor<2x8x16xf32>, tensor<2x4xi32>, tensor<i64>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @dropout_stream(%x: tensor<2x8x16xf32>, %i: tensor<2x8xi32>, %m: tensor<i64>) {
  // expected-error @+1 {{seed and stream must be 32-bit unsigned values}}
  %0 = twill.dropout %x tokens(%i) micro_batch(%m) {rate = 0.5 : f64, seed = 0 : i64, stream = 4294967296 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi32>, tensor<i64>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @dropout_negative_seed(%x: tensor<2x8x16xf32>, %i: tensor<2x8xi32>, %m: tensor<i64>) {
  // expected-error @+1 {{seed and stream must be 32-bit unsigned values}}
  %0 = twill.dropout %x tokens(%i) micro_batch(%m) {rate = 0.5 : f64, seed = -1 : i64, stream = 1 : i64} : (tensor<2x8x16xf32>, tensor<2x8xi32>, tensor<i64>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @row_sum_squares_shape(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{result must have shape [8], got [16]}}
  %0 = twill.row_sum_squares %x : tensor<8x16xf32> -> tensor<16xf32>
  return
}

// -----

func.func @scale_columns_scale(%x: tensor<2x4x8xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{scale must have shape [8], got [4]}}
  %0 = twill.scale_columns %x, %s : (tensor<2x4x8xf32>, tensor<4xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @add_columns_bias(%x: tensor<2x4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{bias must have shape [8], got [4]}}
  %0 = twill.add_columns %x, %b : (tensor<2x4x8xf32>, tensor<4xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @softcap_cap(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{cap must be positive}}
  %0 = twill.softcap %x cap 0.0 : tensor<2x4xf32>
  return
}

// -----

func.func @attention_softcap(%q: tensor<2x8x4x16xf32>, %kv: tensor<2x8x2x16xf32>) {
  // expected-error @+1 {{softcap must be positive}}
  %0, %lse_0 = twill.attention %q, %kv, %kv {scale = 2.5e-01 : f64, softcap = -1.0 : f64} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @dequantize_block_size(%c: tensor<4x50xi8>, %a: tensor<4x1xi8>, %n: tensor<1xf32>, %o: tensor<f32>) {
  // expected-error @+1 {{block_size 64 does not divide the weight's 100 columns}}
  %0 = twill.dequantize_nf4 %c absmax(%a) nested(%n, %o) {block_size = 64 : i64, nested_block_size = 256 : i64, rows = 4 : i64, columns = 100 : i64} : (tensor<4x50xi8>, tensor<4x1xi8>, tensor<1xf32>, tensor<f32>) -> tensor<4x100xf32>
  return
}

// -----

func.func @dequantize_nested(%c: tensor<4x64xi8>, %a: tensor<4x2xi8>, %n: tensor<2xf32>, %o: tensor<f32>) {
  // expected-error @+1 {{nested_absmax must have shape [1], got [2]}}
  %0 = twill.dequantize_nf4 %c absmax(%a) nested(%n, %o) {block_size = 64 : i64, nested_block_size = 256 : i64, rows = 4 : i64, columns = 128 : i64} : (tensor<4x64xi8>, tensor<4x2xi8>, tensor<2xf32>, tensor<f32>) -> tensor<4x128xf32>
  return
}

// -----

func.func @dequantize_columns_block(%c: tensor<4x48xi8>, %a: tensor<4x2xi8>, %n: tensor<1xf32>, %o: tensor<f32>) {
  // expected-error @+1 {{the result [4, 96] is no block of the [4, 192] weight in whole blocks of 64 columns}}
  %0 = twill.dequantize_nf4 %c absmax(%a) nested(%n, %o) {block_size = 64 : i64, nested_block_size = 256 : i64, rows = 4 : i64, columns = 192 : i64} : (tensor<4x48xi8>, tensor<4x2xi8>, tensor<1xf32>, tensor<f32>) -> tensor<4x96xf32>
  return
}

// -----

func.func @dequantize_fp8_scales(%v: tensor<4x8xi8>, %s: tensor<8xf32>) {
  // expected-error @+1 {{scales must have shape [4], got [8]}}
  %0 = twill.dequantize_fp8 %v scales(%s) : (tensor<4x8xi8>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @quantized_matmul_parts(%x: tensor<3x16xf32>, %v: tensor<8x16xi8>, %s: tensor<8xf32>) {
  // expected-error @+1 {{expects the four parts of an NF4 weight or the two of an FP8 one, got 3}}
  %0 = twill.quantized_matmul %x, weight(%v, %s, %s) {transpose_rhs} : (tensor<3x16xf32>, tensor<8x16xi8>, tensor<8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @quantized_matmul_nf4_blocks(%x: tensor<3x128xf32>, %c: tensor<8x64xi8>, %a: tensor<8x2xi8>, %n: tensor<1xf32>, %o: tensor<f32>) {
  // expected-error @+1 {{an NF4 weight needs block_size, nested_block_size, rows and columns}}
  %0 = twill.quantized_matmul %x, weight(%c, %a, %n, %o) {transpose_rhs} : (tensor<3x128xf32>, tensor<8x64xi8>, tensor<8x2xi8>, tensor<1xf32>, tensor<f32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @quantized_matmul_product(%x: tensor<3x8xf32>, %v: tensor<8x16xi8>, %s: tensor<8xf32>) {
  // expected-error @+1 {{contracting dims differ: 8 vs 16}}
  %0 = twill.quantized_matmul %x, weight(%v, %s) {transpose_rhs} : (tensor<3x8xf32>, tensor<8x16xi8>, tensor<8xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @round_to_fp8_block(%x: tensor<3x16xf32>) {
  // expected-error @+1 {{block_size must be positive, got 0}}
  %0 = twill.round_to_fp8 %x block 0 : (tensor<3x16xf32>) -> tensor<3x16xf32>
  return
}

// -----

func.func @round_to_fp8_shape(%x: tensor<3x16xf32>) {
  // expected-error @+1 {{result must have shape [3, 16], got [3, 8]}}
  %0 = twill.round_to_fp8 %x block 4 : (tensor<3x16xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @quantized_matmul_rounded_lhs(%x: tensor<3x8xf32>, %v: tensor<8x16xi8>, %s: tensor<8xf32>) {
  // expected-error @+1 {{lhs_fp8_block_size marks an FP8 weight's x W^T (transpose_rhs) whose lhs is rounded in blocks of a positive size}}
  %0 = twill.quantized_matmul %x, weight(%v, %s) {lhs_fp8_block_size = 128 : i64} : (tensor<3x8xf32>, tensor<8x16xi8>, tensor<8xf32>) -> tensor<3x16xf32>
  return
}

// -----

func.func @dpo_loss_type(%p: tensor<4x2xf32>, %t: tensor<4x2xi64>) {
  // expected-error @+1 {{loss_type must be sigmoid, ipo, hinge or robust, got kto}}
  %0:3 = twill.dpo_loss %p, %p, %t {loss_type = "kto", beta = 0.1 : f64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
  return
}

// -----

func.func @dpo_loss_smoothing(%p: tensor<4x2xf32>, %t: tensor<4x2xi64>) {
  // expected-error @+1 {{label_smoothing must be in [0, 0.5), got 5.000000e-01}}
  %0:3 = twill.dpo_loss %p, %p, %t {loss_type = "sigmoid", beta = 0.1 : f64, label_smoothing = 0.5 : f64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
  return
}

// -----

func.func @dpo_loss_pairs(%p: tensor<4x3xf32>, %t: tensor<4x3xi64>) {
  // expected-error @+1 {{policy must be [pairs, 2] (chosen, rejected), got [4, 3]}}
  %0:3 = twill.dpo_loss %p, %p, %t {loss_type = "sigmoid", beta = 0.1 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
  return
}

// -----

func.func @dpo_loss_grad_result(%p: tensor<4x2xf32>, %t: tensor<4x2xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{result must have shape [4, 2], got [2, 4]}}
  %0 = twill.dpo_loss_grad %p, %p, %t, %g {loss_type = "hinge", beta = 0.1 : f64} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>, tensor<f32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @cross_entropy_sequences(%z: tensor<4x6x9xf32>, %l: tensor<4x6xi32>) {
  // expected-error @+1 {{the sums must have shape [4, 2], got []}}
  %0:2 = twill.cross_entropy %z, %l sequences(%l) {sequence_count = 2 : i64} : (tensor<4x6x9xf32>, tensor<4x6xi32>, tensor<4x6xi32>) -> (tensor<f32>, tensor<i64>)
  return
}

// -----

func.func @cross_entropy_sequence_count(%z: tensor<4x6x9xf32>, %l: tensor<4x6xi32>) {
  // expected-error @+1 {{sequence_count needs sequences}}
  %0:2 = twill.cross_entropy %z, %l {sequence_count = 2 : i64} : (tensor<4x6x9xf32>, tensor<4x6xi32>) -> (tensor<f32>, tensor<i64>)
  return
}

// -----

func.func @cross_entropy_grad_sequences(%z: tensor<4x6x9xf32>, %l: tensor<4x6xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{the sums must have shape [4, 2], got []}}
  %0 = twill.cross_entropy_grad %z, %l, %g sequences(%l) {sequence_count = 2 : i64} : (tensor<4x6x9xf32>, tensor<4x6xi32>, tensor<f32>, tensor<4x6xi32>) -> tensor<4x6x9xf32>
  return
}

// -----

func.func @route_more_than_the_experts(%logits: tensor<4x8xf32>) {
  // expected-error @+1 {{weights must choose 1 to 8 experts (the logits' last dim) a token, got [4, 9]}}
  %w, %e = twill.route %logits : (tensor<4x8xf32>) -> (tensor<4x9xf32>, tensor<4x9xi32>)
  return
}

// -----

func.func @route_weights_type(%logits: tensor<4x8xf32>) {
  // expected-error @+1 {{expects one element type, got 'f32' and 'bf16'}}
  %w, %e = twill.route %logits : (tensor<4x8xf32>) -> (tensor<4x2xbf16>, tensor<4x2xi32>)
  return
}

// -----

func.func @route_grad_result(%logits: tensor<4x8xf32>, %e: tensor<4x2xi32>, %g: tensor<4x2xf32>) {
  // expected-error @+1 {{result must have shape [4, 8], got [4, 2]}}
  %d = twill.route_grad %logits, %e, %g : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @expert_load_mask(%logits: tensor<2x5x8xf32>, %e: tensor<2x5x2xi32>, %mask: tensor<2x4xi32>) {
  // expected-error @+1 {{mask must have shape [2, 5], got [2, 4]}}
  %p, %c, %n = twill.expert_load %logits, %e, %mask : (tensor<2x5x8xf32>, tensor<2x5x2xi32>, tensor<2x4xi32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<f32>)
  return
}

// -----

func.func @expert_load_sums_f32(%logits: tensor<2x5x8xbf16>, %e: tensor<2x5x2xi32>, %mask: tensor<2x5xi32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float values}}
  %p, %c, %n = twill.expert_load %logits, %e, %mask : (tensor<2x5x8xbf16>, tensor<2x5x2xi32>, tensor<2x5xi32>) -> (tensor<8xbf16>, tensor<8xf32>, tensor<f32>)
  return
}

// -----

func.func @load_balancing_loss_counts(%p: tensor<8xf32>, %c: tensor<4xf32>, %n: tensor<f32>) {
  // expected-error @+1 {{counts must have shape [8], got [4]}}
  %l = twill.load_balancing_loss %p, %c, %n : (tensor<8xf32>, tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @expert_positions_counts(%e: tensor<2x5x2xi32>) {
  // expected-error @+1 {{counts must have shape [2, 4], got [3, 4]}}
  %p, %c = twill.expert_positions %e : (tensor<2x5x2xi32>) -> (tensor<2x5x2xi32>, tensor<3x4xi32>)
  return
}

// -----

func.func @dispatch_rows(%x: tensor<2x5x8xf32>, %p: tensor<2x5x2xi32>) {
  // expected-error @+1 {{rows must have shape [2, 10, 8], got [2, 5, 8]}}
  %r = twill.dispatch %x, %p : (tensor<2x5x8xf32>, tensor<2x5x2xi32>) -> tensor<2x5x8xf32>
  return
}

// -----

func.func @combine_weights(%r: tensor<2x10x8xf32>, %p: tensor<2x5x2xi32>, %w: tensor<2x5x3xf32>) {
  // expected-error @+1 {{weights must have shape [2, 5, 2], got [2, 5, 3]}}
  %y = twill.combine %r, %p weights(%w) : (tensor<2x10x8xf32>, tensor<2x5x2xi32>, tensor<2x5x3xf32>) -> tensor<2x5x8xf32>
  return
}

// -----

func.func @combine_type(%r: tensor<2x10x8xf32>, %p: tensor<2x5x2xi32>) {
  // expected-error @+1 {{expects one element type, got 'f32' and 'bf16'}}
  %y = twill.combine %r, %p : (tensor<2x10x8xf32>, tensor<2x5x2xi32>) -> tensor<2x5x8xbf16>
  return
}

// -----

func.func @combine_weights_grad_grad(%r: tensor<2x10x8xf32>, %p: tensor<2x5x2xi32>, %g: tensor<2x4x8xf32>) {
  // expected-error @+1 {{grad must have shape [2, 5], got [2, 4]}}
  %d = twill.combine_weights_grad %r, %p, %g : (tensor<2x10x8xf32>, tensor<2x5x2xi32>, tensor<2x4x8xf32>) -> tensor<2x5x2xf32>
  return
}

// -----

func.func @grouped_matmul_layout(%rows: tensor<2x10x8xf32>, %w: tensor<4x6x8xf32>, %counts: tensor<2x4xi32>) {
  // expected-error @+1 {{weight must have shape [4, 8, 6], got [4, 6, 8]}}
  %y = twill.grouped_matmul %rows, %w, %counts : (tensor<2x10x8xf32>, tensor<4x6x8xf32>, tensor<2x4xi32>) -> tensor<2x10x6xf32>
  return
}

// -----

func.func @grouped_matmul_counts(%rows: tensor<2x10x8xf32>, %w: tensor<4x6x8xf32>, %counts: tensor<2x5xi32>) {
  // expected-error @+1 {{counts must have shape [2, 4], got [2, 5]}}
  %y = twill.grouped_matmul %rows, %w, %counts {transpose_rhs} : (tensor<2x10x8xf32>, tensor<4x6x8xf32>, tensor<2x5xi32>) -> tensor<2x10x6xf32>
  return
}

// -----

func.func @grouped_matmul_weight_grad_result(%rows: tensor<2x10x8xf32>, %g: tensor<2x10x6xf32>, %counts: tensor<2x4xi32>) {
  // expected-error @+1 {{result must have shape [4, 6, 8], got [4, 8, 6]}}
  %dw = twill.grouped_matmul_weight_grad %rows, %g, %counts {transpose_rhs} : (tensor<2x10x8xf32>, tensor<2x10x6xf32>, tensor<2x4xi32>) -> tensor<4x8x6xf32>
  return
}
