//===- Passes.td - Twill's compiler passes -----------------*- tablegen -*-===//

#ifndef TWILL_PASSES_TD
#define TWILL_PASSES_TD

include "mlir/Pass/PassBase.td"

def MixedPrecision : Pass<"twill-mixed-precision", "mlir::ModuleOp"> {
  let summary = "bf16 weights and activations, fp32 where training accumulates";
  let description = [{
    Runs on the traced `@forward`, before twill-autodiff, for jobs with
    `train.precision: BF16`. Frozen parameters become bf16 arguments (the
    runtime stores the checkpoint's weights in bf16); each trainable
    parameter stays an fp32 master copy (and a float input as the runtime
    gives it) and is cast to bf16 once, where the function starts; every floating-point value the model computes becomes
    bf16, except the cross-entropy's loss sum, which stays fp32. Kernels load
    bf16, accumulate in fp32 and round their results once.

    Because it runs before differentiation, the backward follows by
    construction: cotangents take their primal's type, so activation
    gradients are bf16, and the cast's own gradient brings each trainable
    parameter's gradient back to fp32, where the optimizer accumulates it,
    clips it and updates the fp32 master and AdamW moments. Sharding treats
    the cast of a parameter as the parameter: it is cast on its FSDP shard
    and gathered in bf16.

    ```mlir
    // before
    func.func @forward(%w: tensor<16x8xf32> {twill.param = "proj.weight"},
                       %a: tensor<2x8xf32> {twill.param = "proj.lora_A.weight", twill.trainable}, ...)
    // after
    func.func @forward(%w: tensor<16x8xbf16> {twill.param = "proj.weight"},
                       %a: tensor<2x8xf32> {twill.param = "proj.lora_A.weight", twill.trainable}, ...) {
      %a16 = twill.cast %a : tensor<2x8xf32> -> tensor<2x8xbf16>
    ```
  }];
}

def Autodiff : Pass<"twill-autodiff", "mlir::ModuleOp"> {
  let summary = "Adds @train_step: the loss and its gradients";
  let description = [{
    Clones `@forward` into `@train_step` and appends its reverse pass: from
    the loss sum (cotangent 1) back to every trainable parameter, through
    each op's VJPOpInterface rule. Only values that depend on a trainable
    parameter get cotangents, so frozen base weights cost no weight-gradient
    matmul: LoRA's backward is cheap by construction. Full fine-tuning is the
    same pass with every parameter trainable. LoRA's dropout stays in
    `@train_step` only: `@forward` evaluates, so it drops nothing. A
    `twill.detach`ed value (DoRA's weight norm) passes no gradient; the pass
    then removes every detach.

    `@train_step` returns the loss sum, the token count and one gradient per
    trainable parameter, in argument order, each named by a
    `twill.output = "<parameter>.grad"` result attribute.
  }];
}

def Optimizer : Pass<"twill-optimizer", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation, clipping and AdamW in the program";
  let description = [{
    Runs after twill-autodiff. Makes `@train_step` accumulate: each
    gradient is added to a `twill.state = "<parameter>.grad_sum"`, so
    several micro-batches make one step. Adds `@optimizer_step`, which
    divides the summed gradients by its `gradient_divisor` input (the host's
    count: the step's labelled tokens, or under DPO its micro-batches, each
    already a mean), clips them to `max-grad-norm` (global
    norm, as `torch.nn.utils.clip_grad_norm_`), takes the learning rate from
    the warmup + cosine schedule and applies AdamW with PyTorch's semantics
    to every trainable parameter; then it resets the sums and counts the
    step. Results named after a parameter or state (`twill.output`) update
    it; `grad_norm` and `lr` are reported.
  }];
  let options = [
    Option<"lr", "lr", "double", /*default=*/"2e-4", "Peak learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "Decoupled weight decay">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Steps of linear warmup">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"1.0",
           "Global gradient norm clipping; 0 disables it">
  ];
}

def PropagateSharding : Pass<"twill-propagate-sharding", "mlir::ModuleOp"> {
  let summary = "Gives every value a placement on the dp x tp mesh";
  let description = [{
    Seeds the placements of the job's parallel plan and propagates them
    through every op's ShardingRuleOpInterface rule, in program order:

    - parameters, and state carrying a parameter's `twill.tp` (optimizer
      moments, gradient sums): FSDP `shard<0>` on `dp` (storage only:
      compute sees them whole on dp, partitioning gathers them before use);
      on `tp` what their `#twill.tp` says, which the frontend states (the
      Megatron plan for Llama): `column` and `vocab` split `shard<0>`,
      `row` `shard<1>`, `replicate` nothing; a weight whose split dim holds
      `heads` that tp does not divide stays whole (k/v when the KV heads do
      not divide, everything of attention when the query heads do not).
      LoRA factors carry their own styles, so the rank never splits;
    - other state (counts, the step): whole;
    - per-step inputs: the batch `shard<0>` on dp.

    The pass knows no model: no parameter name is read.

    Conflict rule (passes/ShardingPlan.cpp, shared with twill-partition):
    per op and axis, the factor of a parameter's sharded dim wins (its
    activation is gathered; FSDP storage on dp never claims), else the
    earliest operand's; other operands' factors are claimed too when no
    tensor of the rule holds them together with a claimed one (attention's
    key heads beside its query heads). A result holding a claimed factor is
    sharded on that dim; one without it is `partial<sum>` when a claimed
    factor is a reduction (matmul's k, the embedding's vocab, attention's
    query heads for the key gradient), whole when the op reduces it itself
    (vocab-parallel cross-entropy). Partial sums flow through linear ops
    (matmul, add of partials, scale, reshape, transpose, cast); before any
    other op an activation's partial sum becomes `shard<1>` under sequence
    parallelism (reduce-scatter), anything else `replicate` (all-reduce).
    Query heads that do not divide over tp keep attention whole on tp; key
    and value heads that do not are replicated while the query heads split.
  }];
  let options = [
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"true",
           "Resolve tp partial sums into sequence shards">
  ];
}

def Partition : Pass<"twill-partition", "mlir::ModuleOp"> {
  let summary = "Turns the placed program into one rank's program with collectives";
  let description = [{
    Runs after twill-propagate-sharding. For every op it decides, with the
    same rule-driven decision propagation made, where each operand must be,
    and inserts the collective for every change of placement: shard ->
    replicate `all_gather`, partial -> replicate `all_reduce`, partial ->
    shard `reduce_scatter`, shard(i) -> shard(j) `all_to_all` (an
    all_gather and a local_slice when the sizes do not divide), replicate ->
    shard `local_slice`. Function results go where their buffer lives (a
    parameter's or state's placement) or whole. Then every type becomes the
    local block (ceil blocks; the last rank's is padded with zeros, which
    every op keeps zero or masks), without a placement.

    So FSDP follows from the placements: a parameter stored `shard<0>` on
    dp is gathered right before its use, its gradient reduce-scattered into
    the sharded gradient sum, and the optimizer runs on the shard. Ops that
    need their rank's offset get `shard_axis` (vocab-parallel embedding and
    cross-entropy, attention with query heads split over whole key/value
    heads); a global norm over shards becomes sums of squares all-reduced
    over the axes they are split on. Each parameter, state and input keeps
    its global type and placement in `twill.global`, for loading slices.
  }];
  let options = [
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"true",
           "As given to twill-propagate-sharding">
  ];
}

def EmitExecutable : Pass<"twill-emit-executable", "mlir::ModuleOp"> {
  let summary = "Writes the program as an Executable for twill-train";
  let description = [{
    Turns every function of the module into an entry point of an Executable
    (proto/executable.proto): one buffer per tensor value, one instruction
    per op (its name, operand and result buffers, attributes), the parameter
    table (Hugging Face name, trainable), the states and the inputs; a
    parameter, state or input is one buffer for all entry points. It is generic: any
    op without regions and with builtin attributes is emitted as it is, so
    later passes add ops, not cases here. The IR itself is left unchanged.

    Example: `twill-opt --twill-emit-executable=output=job.txtpb in.mlir`.
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the Executable as textproto ('-': stderr)">
  ];
}

def Rematerialize : Pass<"twill-rematerialize", "mlir::ModuleOp"> {
  let summary = "Activation checkpointing: decoder layers recomputed in the backward";
  let description = [{
    Runs on the partitioned `@train_step` (parallel.activation_checkpointing
    FULL). The forward ops of each layer (by their `twill.layer`, which
    the frontend states and partitioning gives the collectives it inserts
    for a layer's ops) are cloned for the backward, which reads the clones:
    each right before the first op that needs it (a backward op, or the
    clone of another), so a recomputed value lives only from where the
    backward first needs it (the MLP's are not held while attention's
    backward runs). Only what
    crosses layers is kept from the forward (each layer's input, the
    residual stream), so a layer's activations live during its forward and
    its backward, not in between. Partitioning ran first, so the clones
    gather their FSDP shards again, and memory does not grow with the
    depth.

    With `selective` (parallel.activation_checkpointing SELECTIVE), matmuls,
    attention and collectives are never recomputed: the backward recomputes
    only the cheap ops whose operands it holds anyway (values it reads
    itself, values from outside the layer, or other recomputed ones): the
    norms and SwiGLU of a Llama layer. It keeps nothing alive that no
    checkpointing would not, at the cost of those elementwise ops.

    With `layers` = N >= 0 (parallel.checkpoint_layers), only layers 0 to
    N - 1 are recomputed; the others keep their activations.

    ```mlir
    // forward: %n = rms_norm %h ...; %q = matmul %n, %w ... (layer 3)
    // backward, before its first use:
    %n2 = twill.rms_norm %h, ...   // recomputed from the kept input %h
    %q2 = twill.matmul %n2, %w ...
    ... = twill.matmul %dq, %q2 ...
    ```
  }];
  let options = [
    Option<"selective", "selective", "bool", "false",
           "Recompute only the cheap ops whose operands the backward holds">,
    Option<"layers", "layers", "int64_t", "-1",
           "How many layers, from the first, are recomputed (-1: all)">
  ];
}

def Offload : Pass<"twill-offload", "mlir::ModuleOp"> {
  let summary = "The activations the backward reads kept in host memory in between";
  let description = [{
    Runs on the partitioned `@train_step`, after twill-rematerialize
    (twillc runs it with parallel.offload_activations). Each value the
    forward computes and the backward reads (with FULL checkpointing, each
    layer's input; without, every activation the backward needs) is
    copied to host memory (`twill.offload`) after its last forward reader
    and back (`twill.reload`) right before its first backward reader,
    which reads the copy from then on. twill-plan-memory places the
    offloaded values in a host arena, so the device holds such a value
    only while the forward or the backward uses it. The values are copied,
    never changed: the losses are the same, bit for bit.

    With `layers` = N >= 0 (parallel.offload_layers), only the values whose
    first backward reader belongs to layers 0 to N - 1 are offloaded (with
    FULL checkpointing, those layers' inputs).

    ```mlir
    %h = twill.add %x, %y {twill.layer = 3 : i64} ...
    %h_host = twill.offload %h {twill.layer = 3 : i64} : tensor<...>
    ... (the rest of the forward, the loss, the backward of later layers)
    %h_back = twill.reload %h_host {twill.layer = 3 : i64} : tensor<...>
    %n = twill.rms_norm %h_back, ...   // the layer's recompute reads it
    ```
  }];
  let options = [
    Option<"layers", "layers", "int64_t", "-1",
           "How many layers, from the first, have their values offloaded "
           "(-1: all, and values of no layer)">
  ];
}

def Schedule : Pass<"twill-schedule", "mlir::ModuleOp"> {
  let summary = "Collectives in flight while compute runs: start early, wait late";
  let description = [{
    Runs on the partitioned program, after twill-rematerialize and
    twill-fuse-epilogues (twillc runs it unless
    parallel.overlap_communication is false). Every
    collective that communicates becomes a start and a wait
    (TwillAsyncOps.td), which the verifier then proves safe:

    - the wait goes right before the first op that reads the result; when
      every reader only feeds the function's results (a gradient summed into
      its state), the readers and the wait move to the end, so a gradient
      reduce-scatter is waited as late as the step allows;
    - the start goes as early as its input allows, but a collective of a
      layer starts no more than `prefetch-layers` layers ahead, counted in
      program order (the backward counts down): an FSDP gather of layer L's
      shard runs while layer L - 1 (forward) or L + 1 (backward) computes,
      and only that many layers' gathered weights are in flight at once;
    - a wait that directly follows its start (nothing to overlap: a
      tensor-parallel gather read at once) gets the work of its layer that
      does not need its result moved before it: the LoRA A products, and
      their own starts.

    twill-plan-memory then keeps a collective's input from its start and
    its result from the start to the last reader. Each op computes what it
    did before, so the losses do not change.

    ```mlir
    // before
    %w = twill.all_gather %shard over @mesh["dp"] dim 0 : ... (layer 3)
    // after: started where layer 2 begins, waited where layer 3 reads it
    %h = twill.all_gather_start %shard over @mesh["dp"] dim 0 : ...
    ...layer 2...
    %w = twill.wait %h : ...
    ```
  }];
  let options = [
    Option<"prefetchLayers", "prefetch-layers", "int64_t", "1",
           "How many layers ahead a layer's collectives may start">
  ];
}

def FuseEpilogues : Pass<"twill-fuse-epilogues", "mlir::ModuleOp"> {
  let summary = "Folds scales and adds into the matmuls around them";
  let description = [{
    Runs on the partitioned program. A `scale` of a matmul's result that
    nothing else reads becomes the matmul's `alpha`; a `scale` that only
    matmuls read, each as one operand, moves into each reader's `alpha`
    instead; an `add` of a matmul's result and another value becomes the
    matmul's `addend`. LoRA's
    `W x + s B(A x)` is then two GEMMs whose second adds `W x` in its
    epilogue, and the backward's summed input gradients likewise: the
    scale and add passes over every projection's output are gone.

    ```mlir
    // before
    %u = twill.matmul %d, %b {transpose_rhs} : ...
    %s = twill.scale %u by 2.0 : ...
    %z = twill.add %y, %s : ...
    // after
    %z = twill.matmul %d, %b plus %y {alpha = 2.0 : f64, transpose_rhs} : ...
    ```
  }];
}

def FuseDequantize : Pass<"twill-fuse-dequantize", "mlir::ModuleOp"> {
  let summary = "Forms a quantized weight inside the products that read it";
  let description = [{
    Runs on the partitioned program. A `dequantize_nf4` or `dequantize_fp8`
    whose every reader is a matmul taking it as the rhs (the lhs not
    transposed: the forward's `x W^T`, the backward's `dy W`) becomes part
    of each: a `quantized_matmul` of the weight's parts, which a backend
    forms a panel of rows at a time. The full-precision weight is then no
    value of the program, and the memory plan holds none. A weight that
    anything else reads (DoRA's norms; a block of its columns, where tp
    keeps it whole) is formed whole, as before. An FP8 weight's `x W^T`
    whose `x` a `round_to_fp8` rounded says so (`lhs_fp8_block_size`): the
    backend may then multiply e4m3 codes.

    ```mlir
    // before
    %w = twill.dequantize_fp8 %v scales(%s) : ...
    %y = twill.matmul %x, %w {transpose_rhs} : ...
    // after
    %y = twill.quantized_matmul %x, weight(%v, %s) {transpose_rhs} : ...
    ```
  }];
}

def PlanMemory : Pass<"twill-plan-memory", "mlir::ModuleOp"> {
  let summary = "Places the values each entry point computes in one arena";
  let description = [{
    The last pass. A value lives from the op that writes it to the last op
    that reads it; values whose lives do not overlap share memory. Each
    entry point (function) plans the one arena of the program from empty,
    since entry points never run at once: first fit, in program order, a
    result placed before the operands read for the last time are freed (so
    a result never shares memory with its own operands), a result nothing
    reads freed at once. The one exception: a matmul whose addend it reads
    for the last time (and not as a factor) computes in place, its result
    over the addend, so the addend is never copied. Function arguments (parameters, states, inputs),
    returned values and `twill.host_read` values keep memory of their own.
    Offsets are multiples of 64 bytes.

    Each op gets `twill.arena_offsets`, one per result (-1: memory of its
    own), and the module `twill.arena_bytes`, the arena's size; the
    Executable carries both, and the runtime checks them before it
    allocates.

    ```mlir
    %0 = twill.scale %x by 2.0 {twill.arena_offsets = array<i64: 0>} : tensor<256xf32>
    %1 = twill.scale %0 by 2.0 {twill.arena_offsets = array<i64: 1024>} : tensor<256xf32>
    ```
  }];
}

#endif // TWILL_PASSES_TD
