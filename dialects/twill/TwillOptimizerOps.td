//===- TwillOptimizerOps.td - optimizer step ops -----------*- tablegen -*-===//
//
// What twill-optimizer emits: the global gradient norm and clipping, the
// learning-rate schedule and AdamW, all as ops of the program, so a step's
// update runs on the device beside the gradients and is sharded with them.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_OPTIMIZER_OPS_TD
#define TWILL_OPTIMIZER_OPS_TD

def Twill_DivOp : Twill_ElementwiseBinaryOp<"div", "lhs / rhs"> {
  let opcode = 8;
  let summary = "Elementwise quotient";
}

def Twill_GlobalNormOp : Twill_ComputeOp<"global_norm", [Pure]> {
  let opcode = 23;
  let runner = "runSquares";
  let cudaRunsBf16 = 0;
  let summary = "L2 norm of several tensors taken together";
  let description = [{
    `sqrt(sum over every element of every input of x^2)`, as PyTorch's
    `clip_grad_norm_` computes it over all gradients.

    ```mlir
    %n = twill.global_norm %ga, %gb : (tensor<8x64xf32>, tensor<64x8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Twill_FloatTensor>:$inputs);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_SumSquaresOp : Twill_ComputeOp<"sum_squares", [Pure]> {
  let opcode = 24;
  let runner = "runSquares";
  let cudaRunsBf16 = 0;
  let summary = "Sum of squares of every element of several tensors";
  let description = [{
    `sum over every element of every input of x^2`: the square of their
    global norm. Partitioning turns a global norm over shards into sums of
    squares, an all_reduce over the axes they are split on, and a sqrt.

    ```mlir
    %s = twill.sum_squares %ga, %gb : (tensor<8x64xf32>, tensor<64x8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Twill_FloatTensor>:$inputs);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_SqrtOp : Twill_ComputeOp<"sqrt", [Pure]> {
  let opcode = 25;
  let shardingRule = "elementwiseRule";
  let runner = "runElementwise";
  let shapeRule = "unary";
  let sameElementType = ["input", "result"];
  let verifier = "verifyShapeRule";
  let summary = "Elementwise square root";
  let description = [{
    The global norm's, of a scalar; DoRA's weight norm, of a row's sum of
    squares.

    ```mlir
    %n = twill.sqrt %s : tensor<f32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Twill_ClipCoefficientOp : Twill_ComputeOp<"clip_coefficient", [Pure,
    AllTypesMatch<["norm", "result"]>]> {
  let opcode = 26;
  let shardingRule = "scalarRule";
  let executableAttributes = Twill_ClipCoefficientAttributes;
  let runner = "runScalar";
  let cudaRunsBf16 = 0;
  let summary = "Gradient clipping factor for a global norm";
  let description = [{
    `min(1, max_norm / (norm + 1e-6))`: PyTorch's `clip_grad_norm_` factor.

    ```mlir
    %c = twill.clip_coefficient %norm {max_norm = 1.0 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$norm, F64Attr:$max_norm);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$norm attr-dict `:` type($result)";
}

def Twill_LrScheduleOp : Twill_ComputeOp<"lr_schedule", [Pure]> {
  let opcode = 27;
  let shardingRule = "scalarRule";
  let executableAttributes = Twill_LrScheduleAttributes;
  let runner = "runScalar";
  let cudaRunsBf16 = 0;
  let summary = "Learning rate of an optimizer step: warmup, then cosine";
  let description = [{
    For `step` optimizer steps already taken (0 for the first):
    `lr * step / warmup_steps` during warmup, then
    `lr * 0.5 * (1 + cos(pi * progress))` with `progress` going from 0 to 1
    over the remaining `total_steps - warmup_steps` steps; torchtune's and
    Hugging Face's `get_cosine_schedule_with_warmup`. `total_steps` is an
    operand: the runtime knows it once it has seen the data.

    ```mlir
    %lr = twill.lr_schedule %step, %total {lr = 2.0e-04 : f64, warmup_steps = 100 : i64}
        : (tensor<i64>, tensor<i64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$step, 0DTensorOf<[I64]>:$total_steps,
                       F64Attr:$lr, I64Attr:$warmup_steps);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $step `,` $total_steps attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_AdamWOp : Twill_ComputeOp<"adamw", [Twill_ElementwiseInPlace, Pure]> {
  let opcode = 28;
  let executableAttributes = Twill_AdamwAttributes;
  let runner = "runAdamW";
  let cudaRunsBf16 = 0;
  let summary = "One AdamW update of a parameter";
  let description = [{
    PyTorch's `torch.optim.AdamW` for one parameter, with the gradient
    first multiplied by `grad_scale` (normalisation and clipping):

        g = grad * grad_scale
        param = param * (1 - lr * weight_decay)
        exp_avg = beta1 * exp_avg + (1 - beta1) * g
        exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g^2
        param -= lr / (1 - beta1^t) * exp_avg
                 / (sqrt(exp_avg_sq) / sqrt(1 - beta2^t) + eps)

    where `t = step + 1`. Returns the new parameter and moments.

    ```mlir
    %p2, %m2, %v2 = twill.adamw %p, %g, %m, %v, %lr, %scale, %step
        {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.01 : f64}
        : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>,
           tensor<f32>, tensor<f32>, tensor<i64>)
        -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>)
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$param, Twill_FloatTensor:$grad,
                       Twill_FloatTensor:$exp_avg, Twill_FloatTensor:$exp_avg_sq,
                       0DTensorOf<[F32]>:$lr, 0DTensorOf<[F32]>:$grad_scale,
                       0DTensorOf<[I64]>:$step, F64Attr:$beta1,
                       F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs Twill_FloatTensor:$new_param,
                      Twill_FloatTensor:$new_exp_avg,
                      Twill_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $grad_scale `,`
    $step attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_IncrementOp : Twill_ComputeOp<"increment", [Twill_ElementwiseInPlace, Pure,
    AllTypesMatch<["input", "result"]>]> {
  let opcode = 29;
  let shardingRule = "scalarRule";
  let runner = "runScalar";
  let cudaRunsBf16 = 0;
  let summary = "An integer counter plus one";
  let description = [{
    ```mlir
    %next = twill.increment %step : tensor<i64>
    ```
  }];
  let arguments = (ins 0DTensorOf<[I64]>:$input);
  let results = (outs 0DTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

#endif // TWILL_OPTIMIZER_OPS_TD
