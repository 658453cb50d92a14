// RUN: twill-tblgen -gen-executable-proto %ods_includes %s | FileCheck %s --check-prefix=PROTO
// RUN: twill-tblgen -gen-opcode-table %ods_includes %s | FileCheck %s --check-prefix=TABLE
// RUN: twill-tblgen -gen-cpu-runners %ods_includes %s | FileCheck %s --check-prefix=CPU
// RUN: twill-tblgen -gen-cuda-runners %ods_includes %s | FileCheck %s --check-prefix=CUDA
// RUN: twill-tblgen -gen-attribute-writers %ods_includes %s | FileCheck %s --check-prefix=WRITE
// RUN: twill-tblgen -gen-op-delegations %ods_includes %s | FileCheck %s --check-prefix=DELEGATE
// RUN: twill-tblgen -gen-shape-rules %ods_includes %s | FileCheck %s --check-prefix=RULES
// RUN: twill-tblgen -gen-instruction-shape-rules %ods_includes %s | FileCheck %s --check-prefix=CHECKS

// What twill-tblgen makes of Twill_Op's fields, on ops of its own.

include "dialects/twill/TwillDialect.td"

def Twill_ScaleLikeAttributes : Twill_Attributes<"scale_like", 40, [
    Twill_Field<"factor", 1, "what it scales by">,
    Twill_EnumField<"mode", 2, ["NEAREST", "EVEN"]>,
    Twill_Field<"dims", 3>,
    Twill_Field<"axis", 4>]>;

def Twill_ScaleLikeOp : Twill_Op<"scale_like"> {
  let summary = "A scale";
  let opcode = 3;
  let arguments = (ins F64Attr:$factor, StrAttr:$mode,
                       DenseI64ArrayAttr:$dims, OptionalAttr<StrAttr>:$axis);
  let executableAttributes = Twill_ScaleLikeAttributes;
  let runner = "runElementwise";
  let verifier = "verifyScaled";
  let shardingRule = "elementwiseRule";
}
def Twill_ScaleLikeGradOp : Twill_Op<"scale_like_grad"> {
  let opcode = 4;
  let arguments = (ins F64Attr:$factor, StrAttr:$mode,
                       DenseI64ArrayAttr:$dims);
  let executableAttributes = Twill_ScaleLikeAttributes;
  let runner = "runElementwise";
}
def Twill_SumOp : Twill_Op<"sum"> {
  let opcode = 1;
  let arguments = (ins AnyTensor:$first, Variadic<AnyTensor>:$rest);
  let results = (outs AnyTensor:$total);
  let cpuRunner = "runSquares";
  let cudaRunner = "runReduce";
  let cudaRunsBf16 = 0;
  let collective = "AllReduce";
}
def Twill_SumStartOp : Twill_Op<"sum_start"> {
  let opcode = 2;
  let arguments = (ins AnyTensor:$input, Optional<AnyTensor>:$scale);
  let results = (outs AnyTensor:$handle);
  let shapeRule = "scaled";
  let sameElementType = ["input", "handle"];
  let writesResults = 0;
  let starts = "sum";
  let betweenRanks = 1;
  let cpuRunner = "";
  let cudaRunner = "runReduce";
}
def Twill_SquareOp : Twill_Op<"square"> {
  let opcode = 0;
  let runner = "";
  let arguments = (ins AnyTensor:$input, AnyTensor:$scale, F64Attr:$factor);
  let results = (outs AnyTensor:$result);
  let gradients = [Twill_GradientOf<"input", "Twill_SquareGradOp">,
                   Twill_GradientOf<"scale", "Twill_SquareGradOp">];
}
def Twill_SquareGradOp : Twill_Op<"square_grad"> {
  let opcode = 0;
  let runner = "";
  let arguments = (ins AnyTensor:$grad, AnyTensor:$result, F64Attr:$factor,
                       AnyTensor:$input);
  let results = (outs AnyTensor:$input_grad);
}
def Twill_GoneOp : Twill_Op<"gone"> {
  let opcode = 0;
  let runner = "";
  let arguments = (ins AnyTensor:$log_sum_exp, Optional<AnyTensor>:$by);
  let results = (outs AnyTensor:$result);
  let shapeRule = "scaled";
  let verifier = "verifyShapeRule";
}

// In opcode order, named as the op; no value for an op of opcode 0.
// PROTO:      enum Opcode {
// PROTO-NEXT:   OPCODE_UNSPECIFIED = 0;
// PROTO-NEXT:   // twill.sum
// PROTO-NEXT:   SUM = 1;
// PROTO-NEXT:   // twill.sum_start
// PROTO-NEXT:   SUM_START = 2;
// PROTO-NEXT:   // twill.scale_like: A scale
// PROTO-NEXT:   SCALE_LIKE = 3;
// PROTO-NEXT:   // twill.scale_like_grad
// PROTO-NEXT:   SCALE_LIKE_GRAD = 4;
// PROTO-NEXT: }
// PROTO-NOT: GONE

// Each field's type from the ops' attribute of its name.
// PROTO:      message ScaleLikeAttributes {
// PROTO-NEXT:   enum Mode {
// PROTO-NEXT:     NEAREST = 0;
// PROTO-NEXT:     EVEN = 1;
// PROTO-NEXT:   }
// PROTO-NEXT:   // what it scales by
// PROTO-NEXT:   optional double factor = 1;
// PROTO-NEXT:   optional Mode mode = 2;
// PROTO-NEXT:   repeated int64 dims = 3;
// PROTO-NEXT:   optional string axis = 4;
// PROTO-NEXT: }
// PROTO:      message Instruction {
// PROTO:        oneof attributes {
// PROTO-NEXT:     ScaleLikeAttributes scale_like = 40;
// PROTO-NEXT:   }

// Every field written, from the attribute of its name or as absent.
// WRITE-LABEL: .Case([&](::mlir::twill::ScaleLikeOp op) {
// WRITE-NEXT:    ::twill::ScaleLikeAttributes &a = *out.mutable_scale_like();
// WRITE-NEXT:    a.set_factor(toProto(op.getFactor()));
// WRITE:         ::twill::ScaleLikeAttributes::Mode_Parse(::llvm::StringRef(toProto(op.getMode())).upper(), &value);
// WRITE:         for (auto value : op.getDims())
// WRITE-NEXT:      a.add_dims(value);
// WRITE-NEXT:    a.set_axis(toProto(op.getAxis()));
// WRITE-LABEL: .Case([&](::mlir::twill::ScaleLikeGradOp op) {
// WRITE:         a.set_axis(std::string());

// TABLE:      #ifdef TWILL_OPCODE_ATTRIBUTES
// TABLE-NEXT: TWILL_OPCODE_ATTRIBUTES(SCALE_LIKE, kScaleLike)
// TABLE-NEXT: TWILL_OPCODE_ATTRIBUTES(SCALE_LIKE_GRAD, kScaleLike)
// TABLE-NEXT: #undef TWILL_OPCODE_ATTRIBUTES
// TABLE:      #ifdef TWILL_OPCODE_START
// TABLE-NEXT: TWILL_OPCODE_START(SUM_START, SUM)
// TABLE-NEXT: #undef TWILL_OPCODE_START
// TABLE:      #ifdef TWILL_OPCODE_BETWEEN_RANKS
// TABLE-NEXT: TWILL_OPCODE_BETWEEN_RANKS(SUM_START)
// TABLE-NEXT: #undef TWILL_OPCODE_BETWEEN_RANKS
// A start is its blocking op's kind, found by blockingOf.
// TABLE:      #ifdef TWILL_OPCODE_COLLECTIVE
// TABLE-NEXT: TWILL_OPCODE_COLLECTIVE(SUM, AllReduce)
// TABLE-NEXT: #undef TWILL_OPCODE_COLLECTIVE
// Operands and results counted, attributes aside: variadic is unbounded
// (-1), optional raises the most, and an instruction that writes none has
// no results.
// TABLE:      #ifdef TWILL_OPCODE_ARITY
// TABLE-NEXT: TWILL_OPCODE_ARITY(SUM, 1, -1, 1, 1)
// TABLE-NEXT: TWILL_OPCODE_ARITY(SUM_START, 1, 2, 0, 0)
// TABLE-NEXT: TWILL_OPCODE_ARITY(SCALE_LIKE, 0, 0, 0, 0)

// Each function once; the run loop's own opcodes apart.
// CPU:      #ifdef TWILL_RUNNER_FUNCTION
// CPU-NEXT: TWILL_RUNNER_FUNCTION(runSquares)
// CPU-NEXT: TWILL_RUNNER_FUNCTION(runElementwise)
// CPU-NEXT: #undef TWILL_RUNNER_FUNCTION
// CPU:      #ifdef TWILL_RUNNER
// CPU-NEXT: TWILL_RUNNER(SUM, runSquares, false)
// CPU-NEXT: TWILL_RUNNER(SCALE_LIKE, runElementwise, false)
// CPU-NEXT: TWILL_RUNNER(SCALE_LIKE_GRAD, runElementwise, false)
// CPU-NEXT: #undef TWILL_RUNNER
// CPU:      #ifdef TWILL_RUN_BY_LOOP
// CPU-NEXT: TWILL_RUN_BY_LOOP(SUM_START)
// CPU-NEXT: #undef TWILL_RUN_BY_LOOP

// CUDA:      #ifdef TWILL_RUNNER_FUNCTION
// CUDA-NEXT: TWILL_RUNNER_FUNCTION(runReduce)
// CUDA-NEXT: TWILL_RUNNER_FUNCTION(runElementwise)
// CUDA-NEXT: #undef TWILL_RUNNER_FUNCTION
// CUDA:      #ifdef TWILL_RUNNER
// CUDA-NEXT: TWILL_RUNNER(SUM, runReduce, false)
// CUDA-NEXT: TWILL_RUNNER(SUM_START, runReduce, true)
// CUDA-NEXT: TWILL_RUNNER(SCALE_LIKE, runElementwise, true)
// CUDA-NEXT: TWILL_RUNNER(SCALE_LIKE_GRAD, runElementwise, true)
// CUDA-NEXT: #undef TWILL_RUNNER

// Each shape rule verifier declared, then defined before the delegations.
// DELEGATE:       #ifdef GET_SHAPE_RULE_VERIFIER_DECLS
// DELEGATE-NEXT:  #undef GET_SHAPE_RULE_VERIFIER_DECLS
// DELEGATE-NEXT:  ::llvm::LogicalResult verifyShapeRule(GoneOp op);
// DELEGATE-NEXT:  ::llvm::LogicalResult verifyShapeRule(SumStartOp op);
// DELEGATE-NEXT:  #else
// DELEGATE-NEXT:  ::llvm::LogicalResult mlir::twill::verifyShapeRule(mlir::twill::GoneOp op) {
// DELEGATE-NEXT:    return check(op, ::twill::shapes::scaled(shapeOf(op.getLogSumExp()), shapeIfAny(op.getBy()), shapeOf(op.getResult())));
// DELEGATE-NEXT:  }
// DELEGATE-NEXT:  ::llvm::LogicalResult mlir::twill::GoneOp::verify() {
// DELEGATE-NEXT:    return verifyShapeRule(*this);
// DELEGATE-NEXT:  }

// An op whose ODS names its helpers calls them; the others write their own.
// DELEGATE:      ::llvm::LogicalResult mlir::twill::ScaleLikeOp::verify() {
// DELEGATE-NEXT:   return verifyScaled(*this);
// DELEGATE-NEXT: }
// DELEGATE-NEXT: ::mlir::twill::ShardingRule mlir::twill::ScaleLikeOp::getShardingRule() {
// DELEGATE-NEXT:   return elementwiseRule(*this);
// DELEGATE-NEXT: }
// DELEGATE-NOT:  ScaleLikeGradOp

// A shape rule that ops share is declared once, in its first op's names;
// the verifier checks the element types named, then calls the rule.
// RULES:      /// gone, sum_start: (log_sum_exp, by?) -> (result).
// RULES-NEXT: llvm::Error scaled(Shape logSumExp, std::optional<Shape> by, Shape result);
// RULES-NOT:  llvm::Error
// A gradient op's arguments are the forward op's of their names, grad the
// cotangent; made where asked for.
// DELEGATE:       mlir::twill::SquareOp::buildVJP(::mlir::OpBuilder &builder, ::mlir::ValueRange cotangents, ::llvm::ArrayRef<bool> needed) {
// DELEGATE-NEXT:    ::llvm::SmallVector<::mlir::Value> grads(getOperation()->getNumOperands());
// DELEGATE-NEXT:    if (needed[0] && cotangents[0])
// DELEGATE-NEXT:      grads[0] = SquareGradOp::create(builder, getLoc(), getInput().getType(), cotangents[0], getResult(), getFactorAttr(), getInput());
// DELEGATE-NEXT:    if (needed[1] && cotangents[0])
// DELEGATE-NEXT:      grads[1] = SquareGradOp::create(builder, getLoc(), getScale().getType(), cotangents[0], getResult(), getFactorAttr(), getInput());
// DELEGATE-NEXT:    return grads;
// DELEGATE-NEXT:  }
// DELEGATE:       ::llvm::LogicalResult mlir::twill::verifyShapeRule(mlir::twill::SumStartOp op) {
// DELEGATE-NEXT:    if (::mlir::failed(expectSameElementType(op, {op.getInput(), op.getHandle()})))
// DELEGATE-NEXT:      return ::mlir::failure();
// DELEGATE-NEXT:    return check(op, ::twill::shapes::scaled(shapeOf(op.getInput()), shapeIfAny(op.getScale()), shapeOf(op.getHandle())));
// DELEGATE-NEXT:  }

// The runtime's check of an opcode: results after the operands, an
// optional operand where the instruction has it; none for an op no
// program carries.
// CHECKS:      case SUM_START:
// CHECKS-NEXT:   return in.check(shapes::scaled(in.shape(0), optionalShape(1), resultShape(0)));
// CHECKS-NOT:  case

// The collective kinds, a start's its blocking op's, and the ops started.
// DELEGATE:      mlir::twill::collectiveKindOf(::mlir::Operation *op) {
// DELEGATE-NEXT:   if (::llvm::isa<::mlir::twill::SumOp, ::mlir::twill::SumStartOp>(op))
// DELEGATE-NEXT:     return ::twill::shapes::Collective::AllReduce;
// DELEGATE-NEXT:   return std::nullopt;
// DELEGATE-NEXT: }
// DELEGATE-NEXT: bool mlir::twill::hasStartOp(::mlir::Operation *op) {
// DELEGATE-NEXT:   return ::llvm::isa<::mlir::twill::SumOp>(op);
// DELEGATE-NEXT: }
