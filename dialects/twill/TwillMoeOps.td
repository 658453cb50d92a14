//===- TwillMoeOps.td - a mixture of experts' ops ---------*- tablegen -*-===//
//
// What a mixture-of-experts layer computes besides its experts' matmuls:
// routing each token to its top-k experts, and its gradient; putting a
// group's tokens in order of expert (dispatch) and summing them back
// (combine), each the other's gradient (support/Dispatch.h). A group is
// the first dim (a batch row): its tokens are routed and sorted among
// themselves, so groups shard as rows do and a group's tokens stay whole
// (under tensor parallelism a sparse layer runs whole on each rank). And the routers' load-balancing loss, from
// what each router sends each expert (support/Routing.h).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_MOE_OPS_TD
#define TWILL_MOE_OPS_TD

def Twill_RouteAttributes : Twill_Attributes<"route", 32, [
    Twill_Field<"normalize", 1, "the k weights divided by their sum">]>;

def Twill_I32Tensor : StaticShapeTensorOf<[I32]>;

def Twill_RouteOp : Twill_ComputeOp<"route", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 64;
  let executableAttributes = Twill_RouteAttributes;
  let runner = "runRoute";
  let cudaRunsBf16 = 0;
  let shapeRule = "route";
  let sameElementType = ["logits", "weights"];
  let verifier = "verifyShapeRule";
  let shardingRule = "groupsRule";
  let gradients = [Twill_GradientOf<"logits", "Twill_RouteGradOp">];
  let summary = "Each token's top-k experts and their weights";
  let description = [{
    A router's choice from its logits `[tokens..., experts]`: the softmax
    over the experts (in fp32), the `k` most probable experts (`k` is the
    results' last dim; the more probable first, a tie to the lower expert)
    as `indices`, and their probabilities as `weights`, divided by their
    sum with `normalize` (`norm_topk_prob`; Mixtral's always). Dropless:
    every token goes to its `k` experts.

    ```mlir
    %w, %e = twill.route %logits {normalize}
        : (tensor<8192x128xf32>) -> (tensor<8192x8xf32>, tensor<8192x8xi32>)
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$logits, UnitAttr:$normalize);
  let results = (outs Twill_FloatTensor:$weights, Twill_I32Tensor:$indices);
  let assemblyFormat = [{
    $logits attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_RouteGradOp : Twill_ComputeOp<"route_grad", [Pure]> {
  let opcode = 65;
  let executableAttributes = Twill_RouteAttributes;
  let runner = "runRouteGrad";
  let cudaRunsBf16 = 0;
  let shapeRule = "routeGrad";
  let sameElementType = ["logits", "grad", "result"];
  let verifier = "verifyShapeRule";
  let shardingRule = "groupsRule";
  let summary = "The gradient of route's weights with respect to its logits";
  let description = [{
    For `route`'s weights of `indices` and `grad` = dL/dweights, returns
    dL/dlogits, from the softmax recomputed.

    ```mlir
    %dl = twill.route_grad %logits, %e, %dw {normalize}
        : (tensor<8192x128xf32>, tensor<8192x8xi32>, tensor<8192x8xf32>)
          -> tensor<8192x128xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$logits, Twill_I32Tensor:$indices,
                       Twill_FloatTensor:$grad, UnitAttr:$normalize);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $indices `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

// Ops over groups of tokens: each value's first dim is the group.
class Twill_GroupsOp<string mnemonic, list<Trait> traits = []>
    : Twill_ComputeOp<mnemonic, !listconcat(traits, [Pure])> {
  let cudaRunsBf16 = 0;
  let verifier = "verifyShapeRule";
  let shardingRule = "groupsRule";
}

def Twill_ExpertPositionsOp : Twill_GroupsOp<"expert_positions"> {
  let opcode = 66;
  let runner = "runExpertPositions";
  let shapeRule = "expertPositions";
  let summary = "Each slot's row once a group's tokens are sorted by expert";
  let description = [{
    For each group's `indices` `[groups, tokens, k]` (route's experts),
    `positions` (the same shape): the row slot (t, j) takes once the
    group's `tokens * k` slots are put in order of expert, expert 0's
    first, each expert's in slot order; and `counts` `[groups, experts]`,
    how many rows each expert gets. Every slot takes a row: dropless.

    ```mlir
    %pos, %counts = twill.expert_positions %e
        : (tensor<2x512x8xi32>) -> (tensor<2x512x8xi32>, tensor<2x128xi32>)
    ```
  }];
  let arguments = (ins Twill_I32Tensor:$indices);
  let results = (outs Twill_I32Tensor:$positions, Twill_I32Tensor:$counts);
  let assemblyFormat = [{
    $indices attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_DispatchOp : Twill_GroupsOp<"dispatch", [DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 67;
  let runner = "runDispatch";
  let shapeRule = "dispatch";
  let sameElementType = ["input", "rows"];
  let summary = "A group's tokens copied into their slots' rows";
  let description = [{
    `rows[g, positions[g, t, j]] = input[g, t] * weights[g, t, j]` (1
    without `weights`): `input` `[groups, tokens, hidden]` put in order of
    expert, `[groups, tokens * k, hidden]`, for the experts' grouped
    matmuls. Its gradient is `combine`'s, and combine's is it.

    ```mlir
    %rows = twill.dispatch %x, %pos : (tensor<2x512x64xf32>, tensor<2x512x8xi32>) -> tensor<2x4096x64xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_I32Tensor:$positions,
                       Optional<Twill_FloatTensor>:$weights);
  let results = (outs Twill_FloatTensor:$rows);
  let assemblyFormat = [{
    $input `,` $positions (`weights` `(` $weights^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_CombineOp : Twill_GroupsOp<"combine", [DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 68;
  let runner = "runCombine";
  let shapeRule = "combine";
  let sameElementType = ["rows", "result"];
  let summary = "Each token's rows summed back, weighted";
  let description = [{
    `result[g, t] = sum_j weights[g, t, j] * rows[g, positions[g, t, j]]`
    (1 without `weights`), in slot order: the experts' outputs
    `[groups, tokens * k, hidden]` back to their tokens.

    ```mlir
    %y = twill.combine %out, %pos weights(%w)
        : (tensor<2x4096x64xf32>, tensor<2x512x8xi32>, tensor<2x512x8xf32>) -> tensor<2x512x64xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$rows, Twill_I32Tensor:$positions,
                       Optional<Twill_FloatTensor>:$weights);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $positions (`weights` `(` $weights^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_CombineWeightsGradOp : Twill_GroupsOp<"combine_weights_grad"> {
  let opcode = 69;
  let runner = "runCombineWeightsGrad";
  let shapeRule = "combineWeightsGrad";
  let sameElementType = ["rows", "grad"];
  let summary = "The gradient of combine (or dispatch) by its weights";
  let description = [{
    `result[g, t, j] = <rows[g, positions[g, t, j]], grad[g, t]>`: for
    combine, its rows and dL/dresult; for dispatch, dL/drows and its
    input.

    ```mlir
    %dw = twill.combine_weights_grad %out, %pos, %dy
        : (tensor<2x4096x64xf32>, tensor<2x512x8xi32>, tensor<2x512x64xf32>) -> tensor<2x512x8xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$rows, Twill_I32Tensor:$positions,
                       Twill_FloatTensor:$grad);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $positions `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_GroupedMatmulAttributes : Twill_Attributes<"grouped_matmul", 33, [
    Twill_Field<"transpose_rhs", 1, "each expert's weight is [n, k]">]>;

def Twill_GroupedMatmulOp : Twill_ComputeOp<"grouped_matmul", [Twill_Costly, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 70;
  let executableAttributes = Twill_GroupedMatmulAttributes;
  let runner = "runGroupedMatmul";
  let summary = "Each expert's rows times its weight";
  let description = [{
    For a group's `rows` `[groups, rows, k]` in order of expert (dispatch's)
    and `counts` `[groups, experts]` (expert_positions'), each expert's
    rows times its weight: `weight` `[experts, k, n]`, or `[experts, n, k]`
    read transposed with `transpose_rhs` (a linear layer's, as
    transformers' fused experts store theirs). Rows past the counts' sum
    are zero. Only the routed rows are multiplied: dropless, no capacity.

    ```mlir
    %h = twill.grouped_matmul %rows, %gate_up, %counts {transpose_rhs}
        : (tensor<2x4096x64xf32>, tensor<128x256x64xf32>, tensor<2x128xi32>) -> tensor<2x4096x256xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$rows, Twill_FloatTensor:$weight,
                       Twill_I32Tensor:$counts, UnitAttr:$transpose_rhs);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $weight `,` $counts attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_GroupedMatmulWeightGradOp : Twill_ComputeOp<"grouped_matmul_weight_grad", [Twill_Costly, Pure]> {
  let opcode = 71;
  let executableAttributes = Twill_GroupedMatmulAttributes;
  let runner = "runGroupedMatmulWeightGrad";
  let cudaRunsBf16 = 0; // summed over the groups in fp32
  let summary = "The gradient of grouped_matmul by its weight";
  let description = [{
    Each expert's `rows^T grad` over its rows of every group, in the
    weight's layout: `[experts, k, n]`, or `[experts, n, k]` (`grad^T
    rows`) with `transpose_rhs`. An expert no row reaches gets zeros.

    ```mlir
    %dw = twill.grouped_matmul_weight_grad %rows, %dh, %counts {transpose_rhs}
        : (tensor<2x4096x64xf32>, tensor<2x4096x256xf32>, tensor<2x128xi32>) -> tensor<128x256x64xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$rows, Twill_FloatTensor:$grad,
                       Twill_I32Tensor:$counts, UnitAttr:$transpose_rhs);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $grad `,` $counts attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_F32Tensor : StaticShapeTensorOf<[F32]>;

def Twill_ExpertLoadOp : Twill_ComputeOp<"expert_load", [Twill_Fp32Sums, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 74;
  let runner = "runExpertLoad";
  let cudaRunsBf16 = 0;
  let shapeRule = "expertLoad";
  let verifier = "verifyShapeRule";
  let gradients = [Twill_GradientOf<"logits", "Twill_ExpertLoadGradOp">];
  let summary = "What a router sends each expert: its probability and tokens";
  let description = [{
    Over the tokens `mask` keeps (nonzero: an example's, not padding), of
    a router's `logits` `[tokens..., experts]` and its choice `indices`
    `[tokens..., k]` (route's): `probabilities`, each expert's softmax
    probability summed over the tokens; `counts`, the tokens that chose
    it (in any of their k places); `tokens`, how many there are. The sums
    of the Switch Transformer's load-balancing loss, as transformers'
    load_balancing_loss_func forms them; fp32 whatever the logits'. Only
    `probabilities` has a gradient.

    ```mlir
    %p, %c, %n = twill.expert_load %logits, %e, %mask
        : (tensor<2x512x128xf32>, tensor<2x512x8xi32>, tensor<2x512xi32>)
          -> (tensor<128xf32>, tensor<128xf32>, tensor<f32>)
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$logits, Twill_I32Tensor:$indices,
                       Twill_I32Tensor:$mask);
  let results = (outs Twill_F32Tensor:$probabilities, Twill_F32Tensor:$counts,
                      Twill_F32Tensor:$tokens);
  let assemblyFormat = [{
    $logits `,` $indices `,` $mask attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_ExpertLoadGradOp : Twill_ComputeOp<"expert_load_grad", [Pure]> {
  let opcode = 75;
  let runner = "runExpertLoadGrad";
  let cudaRunsBf16 = 0;
  let shapeRule = "expertLoadGrad";
  let sameElementType = ["logits", "result"];
  let verifier = "verifyShapeRule";
  let summary = "The gradient of expert_load's probabilities by the logits";
  let description = [{
    For `grad` = dL/dprobabilities `[experts]`, each kept token's
    dL/dlogits through its softmax, `p_e (grad_e - sum_f p_f grad_f)`;
    zeros where `mask` is 0.

    ```mlir
    %dl = twill.expert_load_grad %logits, %mask, %dp
        : (tensor<2x512x128xf32>, tensor<2x512xi32>, tensor<128xf32>)
          -> tensor<2x512x128xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$logits, Twill_I32Tensor:$mask,
                       Twill_F32Tensor:$grad);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $mask `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

// The load-balancing loss and its gradient: small whole values.
class Twill_LoadBalancingOp<string mnemonic, list<Trait> traits = []>
    : Twill_ComputeOp<mnemonic, !listconcat(traits, [Pure])> {
  let cudaRunsBf16 = 0;
  let verifier = "verifyShapeRule";
  let shardingRule = "wholeRule";
}

def Twill_LoadBalancingLossOp : Twill_LoadBalancingOp<"load_balancing_loss", [DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 76;
  let runner = "runLoadBalancingLoss";
  let shapeRule = "loadBalancingLoss";
  let gradients = [Twill_GradientOf<"probabilities",
                                    "Twill_LoadBalancingLossGradOp">];
  let summary = "The Switch Transformer's load-balancing loss of routers";
  let description = [{
    `experts * sum_e (counts_e / tokens) (probabilities_e / tokens)`, 0
    without tokens: expert_load's sums, added over every sparse layer (a
    token counts once a layer, as transformers' load_balancing_loss_func
    concatenates the layers' router logits) and over the ranks that hold
    the batch. Its gradient is by the probabilities alone.

    ```mlir
    %aux = twill.load_balancing_loss %p, %c, %n
        : (tensor<128xf32>, tensor<128xf32>, tensor<f32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Twill_F32Tensor:$probabilities, Twill_F32Tensor:$counts,
                       Twill_F32Tensor:$tokens);
  let results = (outs Twill_F32Tensor:$loss);
  let assemblyFormat = [{
    $probabilities `,` $counts `,` $tokens attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_LoadBalancingLossGradOp : Twill_LoadBalancingOp<"load_balancing_loss_grad"> {
  let opcode = 77;
  let runner = "runLoadBalancingLossGrad";
  let shapeRule = "loadBalancingLossGrad";
  let summary = "The gradient of load_balancing_loss by the probabilities";
  let description = [{
    `grad * experts * counts_e / tokens^2` for `grad` = dL/dloss; zeros
    without tokens.

    ```mlir
    %dp = twill.load_balancing_loss_grad %c, %n, %dl
        : (tensor<128xf32>, tensor<f32>, tensor<f32>) -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Twill_F32Tensor:$counts, Twill_F32Tensor:$tokens,
                       Twill_F32Tensor:$grad);
  let results = (outs Twill_F32Tensor:$result);
  let assemblyFormat = [{
    $counts `,` $tokens `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

#endif // TWILL_MOE_OPS_TD
