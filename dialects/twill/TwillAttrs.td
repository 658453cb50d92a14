//===- TwillAttrs.td - placements and parameter roles ------*- tablegen -*-===//

#ifndef TWILL_ATTRS_TD
#define TWILL_ATTRS_TD

include "dialects/twill/TwillDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/TensorEncoding.td"

class Twill_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Twill_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Twill_PlacementAttr : Twill_Attr<"Placement", "placement",
    [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let summary = "Where a tensor lives on a device mesh (DTensor placements)";
  let description = [{
    A tensor encoding with one entry per axis of the mesh `@mesh`:

    - `shard<d>`: the tensor's dim `d` is split in contiguous blocks over the
      axis (the last block may be shorter: no size has to divide evenly);
    - `replicate`: every device of the axis holds the whole tensor;
    - `partial<sum>`: every device of the axis holds a summand; the value is
      their sum.

    When two axes shard the same dim, the later mesh axis splits it first
    and the earlier one splits each of those blocks: `[shard<0>, shard<0>]`
    on (dp, tp) is tp's column block, stored split over dp, so that FSDP's
    gather over dp gives back exactly the tp block a rank computes with
    (DTensor's default order is the opposite and FSDP2 needs its
    `_StridedShard` for this case).

    Example, a weight FSDP-sharded on `dp` and column-parallel on `tp`:

    ```mlir
    tensor<4096x4096xbf16, #twill.placement<@mesh, [shard<0>, shard<0>]>>
    ```
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    ArrayRefParameter<"::mlir::twill::AxisPlacement",
                      "one placement per mesh axis">:$axes
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Twill_TensorParallelStyle : I32EnumAttr<"TensorParallelStyle",
    "how tensor parallelism splits a weight", [
      I32EnumAttrCase<"Column", 0, "column">,
      I32EnumAttrCase<"Row", 1, "row">,
      I32EnumAttrCase<"Vocab", 2, "vocab">,
      I32EnumAttrCase<"Replicate", 3, "replicate">]> {
  let cppNamespace = "::mlir::twill";
  let genSpecializedAttr = 0;
}

def Twill_TensorParallelAttr : Twill_Attr<"TensorParallel", "tp"> {
  let summary = "How tensor parallelism splits a parameter (Megatron's plan)";
  let description = [{
    What the model's author knows of a `[out, in]` weight, stated by the
    frontend on the parameter (`twill.tp`), so that the sharding passes need
    no model's names:

    - `column`: the output dim splits over tp (q, k, v, gate, up);
    - `row`: the input dim splits (o, down), and the product is a partial
      sum;
    - `vocab`: the rows of an embedding or output table split (vocab
      parallel);
    - `replicate`: every rank holds it whole (norms).

    `heads`, when not 0, is how many attention heads the dim splits into:
    where tp does not divide them, the weight stays whole. `blocks`, when
    not 0, is how many quantized blocks the dim holds (a quantized
    weight's, whose blocks run along its rows): where tp does not divide
    them, it stays whole too, so that no block is cut. LoRA factors
    state their own: a column layer's A is `replicate` and its B `column`; a
    row layer's A is `row` and its B `replicate`; so the rank never splits.

    ```mlir
    %wq: tensor<4096x4096xf32> {twill.param = "...q_proj.weight", twill.tp = #twill.tp<column, heads = 32>}
    ```
  }];
  let parameters = (ins
    EnumParameter<Twill_TensorParallelStyle>:$style,
    DefaultValuedParameter<"int64_t", "0">:$heads,
    DefaultValuedParameter<"int64_t", "0">:$blocks
  );
  let assemblyFormat = "`<` $style (`,` struct($heads, $blocks)^)? `>`";
  let genVerifyDecl = 1;
}

def Twill_InitKind : I32EnumAttr<"InitKind",
    "how a parameter no checkpoint gives starts", [
      I32EnumAttrCase<"Zeros", 0, "zeros">,
      I32EnumAttrCase<"Ones", 1, "ones">,
      I32EnumAttrCase<"Normal", 2, "normal">,
      I32EnumAttrCase<"KaimingUniform", 3, "kaiming_uniform">,
      I32EnumAttrCase<"RowNorms", 4, "row_norms">]> {
  let cppNamespace = "::mlir::twill";
  let genSpecializedAttr = 0;
}

// A double (held as an APFloat) in an attribute's assembly, a plain number
// printed in the shortest form that reads back exactly.
class Twill_DoubleParameter<string value>
    : AttrOrTypeParameter<"::llvm::APFloat", "a double"> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let defaultValue = "::llvm::APFloat(" # value # ")";
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double value;
    if ($_parser.parseFloat(value))
      return ::mlir::failure();
    return ::llvm::APFloat(value);
  }() }];
  let printer = [{ $_printer.printFloat($_self) }];
}

def Twill_InitAttr : Twill_Attr<"Init", "init"> {
  let summary = "How a parameter starts where no checkpoint gives it";
  let description = [{
    Stated by the frontend on each parameter (`twill.init`), so that the
    runtime starts an untrained weight (a LoRA factor, or any weight under
    `checkpoint.random_base`) knowing no model's names:

    - `zeros`, `ones`;
    - `normal`: mean 0, deviation `std`;
    - `kaiming_uniform`: uniform within +-1/sqrt(fan in), fan in the last
      dim (PEFT's `kaiming_uniform_(a=sqrt(5))` for LoRA A);
    - `row_norms`: the norm of each row of the weight its `twill.adapter`
      adapts (DoRA's magnitudes, as PEFT starts them).

    `stream` keys its random values (with `train.seed`), one per element, so
    every rank and mesh draws the same, whatever the parameter is named.

    ```mlir
    %a: tensor<8x64xf32> {twill.init = #twill.init<kind = kaiming_uniform, stream = 77>, ...}
    ```
  }];
  let parameters = (ins
    EnumParameter<Twill_InitKind>:$kind,
    Twill_DoubleParameter<"0.0">:$std,
    DefaultValuedParameter<"uint64_t", "0">:$stream
  );
  // Keyed, in any order; std and stream may be left out where 0.
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Twill_AdapterPart : I32EnumAttr<"AdapterPart",
    "which part of an adapter a parameter is", [
      I32EnumAttrCase<"A", 0, "a">,
      I32EnumAttrCase<"B", 1, "b">,
      I32EnumAttrCase<"Magnitude", 2, "magnitude">]> {
  let cppNamespace = "::mlir::twill";
  let genSpecializedAttr = 0;
}

def Twill_AdapterAttr : Twill_Attr<"Adapter", "adapter"> {
  let summary = "The part of a LoRA adapter a parameter is, and what it adapts";
  let description = [{
    Stated by the frontend on each adapter parameter (`twill.adapter`):
    LoRA's `a` and `b`, or DoRA's `magnitude`, of the weight named `of`
    (by its checkpoint name, as a merged model names it: a fused
    projection's block adapts the fused weight, whose rows its
    `twill.stored` names). Where `of` is no parameter of the program (an
    output layer tied to the embedding), `tied` names the parameter whose
    values it has. The runtime reads and writes adapters, and merges them,
    by this alone.

    ```mlir
    %b: tensor<64x8xf32> {twill.adapter = #twill.adapter<b, of = "model.layers.0.self_attn.q_proj.weight">, ...}
    ```
  }];
  let parameters = (ins
    EnumParameter<Twill_AdapterPart>:$part,
    StringRefParameter<"the weight it adapts">:$of,
    StringRefParameter<"the parameter `of` is tied to", "\"\"">:$tied
  );
  let assemblyFormat =
      "`<` $part `,` `of` `=` $of (`,` `tied` `=` $tied^)? `>`";
  let genVerifyDecl = 1;
}

def Twill_QuantizedPart : I32EnumAttr<"QuantizedPart",
    "which part of a quantized weight a parameter is", [
      I32EnumAttrCase<"Codes", 0, "codes">,
      I32EnumAttrCase<"Absmax", 1, "absmax">,
      I32EnumAttrCase<"NestedAbsmax", 2, "nested_absmax">,
      I32EnumAttrCase<"NestedOffset", 3, "nested_offset">,
      I32EnumAttrCase<"Fp8Values", 4, "fp8_values">,
      I32EnumAttrCase<"Fp8RowScales", 5, "fp8_row_scales">]> {
  let cppNamespace = "::mlir::twill";
  let genSpecializedAttr = 0;
}

def Twill_QuantizedAttr : Twill_Attr<"Quantized", "quantized"> {
  let summary = "The part of a quantized frozen weight a parameter is";
  let description = [{
    Stated by the frontend (`twill.quantized`) on each parameter that holds
    part of a frozen weight `of` (its checkpoint name) stored quantized:
    in bitsandbytes' NF4 with double quantization, cut into blocks of
    `block_size` values along its rows, each block's 4-bit `codes` and
    8-bit scale (`absmax`), the scales quantized again in blocks of
    `nested_block_size` (`nested_absmax`, plus one `nested_offset`), which
    `twill.dequantize_nf4` reads and the runtime fills from a bitsandbytes
    4-bit checkpoint or by quantizing the weight; or in FP8, its e4m3
    `fp8_values` and `fp8_row_scales` (no block sizes), which
    `twill.dequantize_fp8` reads and the runtime quantizes on load. A
    mixture of experts' weight `[experts, rows / experts, columns]` is
    quantized as its rows `[rows, columns]` (bitsandbytes' flattening),
    `experts` saying so.

    ```mlir
    %codes: tensor<64x48xi8> {twill.param = "...q_proj.weight", twill.quantized = #twill.quantized<codes, of = "...q_proj.weight", block_size = 64, nested_block_size = 256>}
    ```
  }];
  let parameters = (ins
    EnumParameter<Twill_QuantizedPart>:$part,
    StringRefParameter<"the weight it holds part of">:$of,
    DefaultValuedParameter<"int64_t", "0">:$block_size,
    DefaultValuedParameter<"int64_t", "0">:$nested_block_size,
    DefaultValuedParameter<"int64_t", "0">:$experts
  );
  let assemblyFormat = [{
    `<` $part `,` `of` `=` $of
    (`,` struct($block_size, $nested_block_size, $experts)^)? `>`
  }];
  let genVerifyDecl = 1;
}

def Twill_StoredRowsAttr : Twill_Attr<"StoredRows", "stored_rows"> {
  let summary = "The rows of a checkpoint's tensor a parameter is";
  let description = [{
    Stated by the frontend (`twill.stored`) on a parameter that the
    checkpoint holds inside a larger tensor: rows `first_row` on of
    `tensor`, which has `tensor_rows` rows. A fused projection (Phi-3's
    `qkv_proj`, `gate_up_proj`) is traced as one parameter per block of
    rows, each split by tensor parallelism as its own projection would be;
    the runtime reads each block from the tensor, and writes the tensor
    (an adapter's, a merged model's) put together from them.

    ```mlir
    %wk: tensor<32x96xf32> {twill.param = "...qkv_proj.weight[96:128]", twill.stored = #twill.stored_rows<tensor = "...qkv_proj.weight", first_row = 96, tensor_rows = 160>}
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the checkpoint's tensor">:$tensor,
    "int64_t":$first_row,
    "int64_t":$tensor_rows
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Twill_StateKind : I32EnumAttr<"StateKind",
    "what a state kept between entry points and steps is", [
      I32EnumAttrCase<"GradSum", 0, "grad_sum">,
      I32EnumAttrCase<"ExpAvg", 1, "exp_avg">,
      I32EnumAttrCase<"ExpAvgSq", 2, "exp_avg_sq">,
      I32EnumAttrCase<"Step", 3, "step">]> {
  let cppNamespace = "::mlir::twill";
  let genSpecializedAttr = 0;
}

def Twill_StateRoleAttr : Twill_Attr<"StateRole", "state_role"> {
  let summary = "What a state is, and the parameter it is kept for";
  let description = [{
    Stated by twill-optimizer on each state it adds (`twill.state_role`):
    a trainable parameter's gradient sum and AdamW moments, each `of` the
    parameter (by name), and the step counter and token count sum, of no
    parameter. The cost report and the runtime (`--gradients`) know the
    states by this alone.

    ```mlir
    %g: tensor<8x64xf32> {twill.state = "a.lora_A.weight.grad_sum", twill.state_role = #twill.state_role<grad_sum, of = "a.lora_A.weight">}
    ```
  }];
  let parameters = (ins
    EnumParameter<Twill_StateKind>:$kind,
    StringRefParameter<"the parameter it is kept for", "\"\"">:$of
  );
  let assemblyFormat = "`<` $kind (`,` `of` `=` $of^)? `>`";
  let genVerifyDecl = 1;
}

def Twill_EntryRole : I32EnumAttr<"EntryRole", "what an entry point is for", [
      I32EnumAttrCase<"Forward", 0, "forward">,
      I32EnumAttrCase<"TrainStep", 1, "train_step">,
      I32EnumAttrCase<"OptimizerStep", 2, "optimizer_step">,
      I32EnumAttrCase<"Reference", 3, "reference">]> {
  let cppNamespace = "::mlir::twill";
  let genSpecializedAttr = 0;
}

def Twill_EntryRoleAttr : EnumAttr<Twill_Dialect, Twill_EntryRole, "entry"> {
  let summary = "What an entry point is for";
  let description = [{
    On each function the runtime runs (`twill.entry`), stated by whoever
    makes it: the frontend's `forward` (the loss and logits of a batch),
    twill-autodiff's `train_step` (forward and backward, summing
    gradients), twill-optimizer's `optimizer_step`, and under DPO with a
    precomputed reference the frontend's `reference` (the adapter-off
    model's log-probabilities of a batch's sequences, which the runtime
    runs over the data before training). Passes and the emitter
    find entry points by it, never by their symbol names.

    ```mlir
    func.func @forward(...) attributes {twill.entry = #twill.entry<forward>}
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Twill_ValueRole : I32EnumAttr<"ValueRole",
    "what a per-step input or an entry point's output is", [
      I32EnumAttrCase<"Tokens", 0, "tokens">,
      I32EnumAttrCase<"Labels", 1, "labels">,
      I32EnumAttrCase<"Positions", 2, "positions">,
      I32EnumAttrCase<"Segments", 3, "segments">,
      I32EnumAttrCase<"TokenIndex", 4, "token_index">,
      I32EnumAttrCase<"MicroBatch", 5, "micro_batch">,
      I32EnumAttrCase<"TotalSteps", 6, "total_steps">,
      I32EnumAttrCase<"ScheduleStep", 7, "schedule_step">,
      I32EnumAttrCase<"LossSum", 8, "loss_sum">,
      I32EnumAttrCase<"TokenCount", 9, "token_count">,
      I32EnumAttrCase<"GradNorm", 10, "grad_norm">,
      I32EnumAttrCase<"Lr", 11, "lr">,
      I32EnumAttrCase<"DpoMetrics", 12, "dpo_metrics">,
      I32EnumAttrCase<"ReferenceLogps", 13, "reference_logps">,
      I32EnumAttrCase<"LossWeight", 14, "loss_weight">,
      I32EnumAttrCase<"GradientDivisor", 15, "gradient_divisor">,
      I32EnumAttrCase<"AttentionMask", 16, "attention_mask">,
      I32EnumAttrCase<"StepTokens", 17, "step_tokens">,
      I32EnumAttrCase<"RouterAuxLoss", 18, "router_aux_loss">]> {
  let cppNamespace = "::mlir::twill";
  let genSpecializedAttr = 0;
}

def Twill_ValueRoleAttr : EnumAttr<Twill_Dialect, Twill_ValueRole, "role"> {
  let summary = "What a per-step input or an output is, for the runtime";
  let description = [{
    On an entry point's argument or result that the runtime fills or reads
    (`twill.role`), stated by whoever makes it: the frontend's batch inputs
    (tokens, labels, positions, segments; with LoRA dropout token_index and
    micro_batch; with the router's load-balancing loss attention_mask, 1
    for an example's token and 0 for padding, and step_tokens, the labelled
    tokens of the whole step that weight it) and its loss_sum and
    token_count (under DPO the pairs', and dpo_metrics, dpo_loss's metric
    sums; with the load-balancing loss router_aux_loss); twill-optimizer's
    total_steps and schedule_step inputs and its grad_norm and lr outputs.
    The runtime finds them by role; their names (`twill.input`,
    `twill.output`) are for reading.

    ```mlir
    %tokens: tensor<4x64xi32> {twill.input = "tokens", twill.role = #twill.role<tokens>}
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Twill_AxisRole : I32EnumAttr<"AxisRole", "what a mesh axis parallelises", [
      I32EnumAttrCase<"Data", 0, "data">,
      I32EnumAttrCase<"Tensor", 1, "tensor">]> {
  let cppNamespace = "::mlir::twill";
  let genSpecializedAttr = 0;
}

def Twill_AxisRoleAttr : EnumAttr<Twill_Dialect, Twill_AxisRole, "axis"> {
  let summary = "What a mesh axis parallelises";
  let description = [{
    On each axis of a `twill.mesh` (its `roles`), stated by the frontend:
    `data` (fully sharded data parallel: the batch and every weight's FSDP
    blocks split over it) or `tensor` (tensor and sequence parallel, as
    each parameter's `#twill.tp` says). The sharding plan finds its axes by
    role, whatever they are named.
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // TWILL_ATTRS_TD
