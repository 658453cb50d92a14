//===- TwillMoeOps.td - a mixture of experts' ops ---------*- tablegen -*-===//
//
// What a mixture-of-experts layer computes besides its experts' matmuls:
// routing each token to its top-k experts, and its gradient.
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
  let shardingRule = "rowsRule";
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
  let shardingRule = "rowsRule";
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

#endif // TWILL_MOE_OPS_TD
