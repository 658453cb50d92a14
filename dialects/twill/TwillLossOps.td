//===- TwillLossOps.td - the losses ------------------------*- tablegen -*-===//
//
// Cross-entropy (of logits, or tile by tile of a linear layer's) and
// DPO's loss.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_LOSS_OPS_TD
#define TWILL_LOSS_OPS_TD

def Twill_CrossEntropyOp : Twill_ComputeOp<"cross_entropy", [Twill_VocabParallelLossOpInterface, Twill_Fp32Sums, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 11;
  let executableAttributes = Twill_CrossEntropyAttributes;
  let runner = "runCrossEntropyFamily";
  let gradients = [Twill_GradientOf<"logits", "Twill_CrossEntropyGradOp">];
  let summary = "Summed token cross-entropy and the count of counted tokens";
  let description = [{
    For logits `[..., vocab]` and labels `[...]` (the target of each position),
    returns the sum over positions of `logsumexp(logits) - logits[label]` and
    the number of positions summed; positions whose label is `ignore_index`
    count for neither. Returning the sum and the count, not the mean, lets a
    step normalise by all the tokens of its accumulated micro-batches.

    ```mlir
    %loss, %count = twill.cross_entropy %logits, %labels {ignore_index = -100 : i64}
        : (tensor<2x8192x128256xf32>, tensor<2x8192xi32>) -> (tensor<f32>, tensor<i64>)
    ```

    After partitioning, `shard_axis` says the logits hold this rank's block
    of the vocab along that mesh axis and `vocab_size` is the whole vocab
    (columns past it are padding): the op reduces its maxima and sums over
    the axis itself, so the logits are never gathered (vocab-parallel loss).

    With `sequences` (each position's sequence within its row, as labels
    are laid out) and `sequence_count` N, the sums and counts are each
    row's per sequence, `[rows..., N]` (DPO's completions: a position of
    sequence n of row r adds to `[r, n]`; a position whose sequence is not
    in [0, N) counts for none). The negated sums are the sequences'
    log-probabilities.

    ```mlir
    %sums, %counts = twill.cross_entropy %logits, %labels sequences(%segments) {sequence_count = 2 : i64}
        : (tensor<4x256x512xf32>, tensor<4x256xi32>, tensor<4x256xi32>) -> (tensor<4x2xf32>, tensor<4x2xi64>)
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$logits, Twill_IntTensor:$labels,
                       Optional<Twill_IntTensor>:$sequences,
                       DefaultValuedAttr<I64Attr, "::twill::kIgnoreLabel">:$ignore_index,
                       OptionalAttr<StrAttr>:$shard_axis,
                       OptionalAttr<I64Attr>:$vocab_size,
                       OptionalAttr<I64Attr>:$sequence_count);
  let results = (outs StaticShapeTensorOf<[AnyFloat]>:$loss,
                      StaticShapeTensorOf<[AnySignlessInteger]>:$count);
  let assemblyFormat = [{
    $logits `,` $labels (`sequences` `(` $sequences^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logits' last dim is the vocab.
    std::pair<::mlir::Value, unsigned> getVocabSpan() {
      return {getLogits(), getLogits().getType().getRank() - 1};
    }
  }];
}

def Twill_DpoLossOp : Twill_ComputeOp<"dpo_loss", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 62;
  let executableAttributes = Twill_DpoLossAttributes;
  let runner = "runDpoLoss";
  let cudaRunsBf16 = 0;
  let gradients = [Twill_GradientOf<"policy", "Twill_DpoLossGradOp">];
  let summary = "DPO's loss summed over preference pairs, the pairs and the metrics";
  let description = [{
    For `[pairs, 2]` log-probabilities of a pair's chosen (0) and rejected
    (1) completion, each summed over its tokens, under the policy and under
    the reference model, and `tokens` (how many each sums), returns TRL's
    DPO loss (`loss_type` sigmoid, ipo, hinge or robust, with `beta` and
    sigmoid's and robust's `label_smoothing`; support/Dpo.h) summed over
    the pairs with a token in each completion, how many those are, and the
    sums of TRL's metrics over them (`metrics`, 6 values: the chosen and
    rejected rewards, the pairs whose chosen reward is the greater, the
    margins, and the policy's chosen and rejected log-probabilities). Sums,
    not means, as
    `cross_entropy`'s: a step normalises by every pair of its accumulated
    micro-batches. Only `policy` has a gradient.

    ```mlir
    %loss, %pairs, %metrics = twill.dpo_loss %policy, %reference, %tokens
        {loss_type = "sigmoid", beta = 1.0e-01 : f64}
        : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$policy,
                       StaticShapeTensorOf<[F32]>:$reference,
                       StaticShapeTensorOf<[I64]>:$tokens,
                       StrAttr:$loss_type, F64Attr:$beta,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs 0DTensorOf<[F32]>:$loss, 0DTensorOf<[I64]>:$pairs,
                      StaticShapeTensorOf<[F32]>:$metrics);
  let assemblyFormat = [{
    $policy `,` $reference `,` $tokens attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_LinearCrossEntropyOp : Twill_ComputeOp<"linear_cross_entropy", [Twill_VocabParallelLossOpInterface, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 40;
  let executableAttributes = Twill_CrossEntropyAttributes;
  let runner = "runLinearCrossEntropy";
  let summary = "cross_entropy of `input weight^T`, a tile of positions at a time";
  let description = [{
    The loss sum and count of `cross_entropy(matmul(input, weight^T),
    labels)` for `input [..., hidden]` and `weight [vocab, hidden]`, without
    ever holding the logits of every position: the op forms them for
    `tile_rows` positions at a time in `tile`, its workspace (a result so
    that the memory plan holds it; nothing reads it). Per position the
    arithmetic is the untiled program's, so the loss is too.

    ```mlir
    %loss, %count, %tile = twill.linear_cross_entropy %h, %w, %labels {ignore_index = -100 : i64}
        : (tensor<1x65536x4096xbf16>, tensor<128256x4096xbf16>, tensor<1x65536xi32>)
        -> (tensor<f32>, tensor<i64>, tensor<8192x128256xbf16>)
    ```

    `shard_axis` and `vocab_size` are as for cross_entropy: after
    partitioning the weight may hold this rank's block of the vocab. With
    `softcap` (Gemma 2's final logits) the loss is of `softcap *
    tanh(logits / softcap)`, each tile capped where it is formed. With
    `sequences` and `sequence_count` the sums are each row's per sequence,
    as cross_entropy's.
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$weight,
                       Twill_IntTensor:$labels,
                       Optional<Twill_IntTensor>:$sequences,
                       DefaultValuedAttr<I64Attr, "::twill::kIgnoreLabel">:$ignore_index,
                       OptionalAttr<StrAttr>:$shard_axis,
                       OptionalAttr<I64Attr>:$vocab_size,
                       OptionalAttr<F64Attr>:$softcap,
                       OptionalAttr<I64Attr>:$sequence_count);
  let results = (outs StaticShapeTensorOf<[AnyFloat]>:$loss,
                      StaticShapeTensorOf<[AnySignlessInteger]>:$count,
                      Twill_FloatTensor:$tile);
  let assemblyFormat = [{
    $input `,` $weight `,` $labels (`sequences` `(` $sequences^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The weight's rows are the vocab.
    std::pair<::mlir::Value, unsigned> getVocabSpan() { return {getWeight(), 0}; }
  }];
}

#endif // TWILL_LOSS_OPS_TD
