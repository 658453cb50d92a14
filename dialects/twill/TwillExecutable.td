//===- TwillExecutable.td - what instructions carry --------*- tablegen -*-===//
//
// The attribute messages of the Executable's instructions, from which
// twill-tblgen generates executable_ops.proto (with the Opcode enum and
// the Instruction message) and the emitter's describeAttributes. A field
// is written from the ODS attribute of its name of the op (its type says
// the field's; 0, false or "" where the op has none or an OptionalAttr is
// absent), so the runtime never supplies a default. A field's number and
// an attributes message's place in Instruction.attributes never change.
// An op family may define its own beside its ops.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_EXECUTABLE_TD
#define TWILL_EXECUTABLE_TD

// A field of an attributes message, and what it says (for the .proto).
class Twill_Field<string fieldName, int fieldNumber, string fieldDoc = ""> {
  string name = fieldName;
  int number = fieldNumber;
  string doc = fieldDoc;
  // A proto enum of these values (an enum named as the field, nested in
  // its message), which the op's string attribute names in lower case.
  list<string> enumValues = [];
}
class Twill_EnumField<string fieldName, int fieldNumber, list<string> values,
                      string fieldDoc = "">
    : Twill_Field<fieldName, fieldNumber, fieldDoc> {
  let enumValues = values;
}

// An attributes message: `instructionField`, its field of Instruction.attributes
// (the message is named as it is: "rms_norm", RmsNormAttributes), numbered
// `number` there.
class Twill_Attributes<string oneofField, int oneofNumber,
                       list<Twill_Field> messageFields, string messageDoc = ""> {
  string instructionField = oneofField;
  int number = oneofNumber;
  list<Twill_Field> fields = messageFields;
  string doc = messageDoc;
}

// An op whose instructions carry no attributes.
def Twill_NoAttributes : Twill_Attributes<"", 0, []>;

def Twill_EmbeddingAttributes : Twill_Attributes<"embedding", 10, [
    Twill_Field<"shard_axis", 1, "vocab-parallel: this rank's rows">]>;
def Twill_MatmulAttributes : Twill_Attributes<"matmul", 11, [
    Twill_Field<"transpose_lhs", 1>,
    Twill_Field<"transpose_rhs", 2>,
    Twill_Field<"alpha", 3, "result = alpha * product (+ the addend)">]>;
def Twill_RmsNormAttributes : Twill_Attributes<"rms_norm", 12, [
    Twill_Field<"epsilon", 1>], "rms_norm and its two gradients">;
def Twill_RopeAttributes : Twill_Attributes<"rope", 13, [
    Twill_Field<"theta", 1>,
    Twill_Field<"scaling_factor", 2, "0: unscaled">,
    Twill_Field<"low_freq_factor", 3>,
    Twill_Field<"high_freq_factor", 4>,
    Twill_Field<"original_max_position", 5>], "rope and rope_grad">;
def Twill_AttentionAttributes : Twill_Attributes<"attention", 14, [
    Twill_Field<"scale", 1>,
    Twill_Field<"shard_axis", 2, "this rank's block of query heads">,
    Twill_Field<"window", 3, "a query sees the keys less than `window` "
                             "positions before it; 0: every earlier key">,
    Twill_Field<"softcap", 4, "Gemma 2's: each scaled score s is softcap "
                              "tanh(s / softcap); 0: none">],
    "attention and attention_grad">;
def Twill_CrossEntropyAttributes : Twill_Attributes<"cross_entropy", 15, [
    Twill_Field<"ignore_index", 1>,
    Twill_Field<"shard_axis", 2, "vocab-parallel: this rank's columns">,
    Twill_Field<"vocab_size", 3, "the whole vocab (0 without shard_axis)">,
    Twill_Field<"wrt_weight", 4, "linear_cross_entropy_grad: the weight's">,
    Twill_Field<"softcap", 5, "linear_cross_entropy's cap (0: none)">,
    Twill_Field<"sequence_count", 6, "with a sequences operand: how many "
                "sequences a row's sums are per (0: one sum of every "
                "position)">],
    "(linear_)cross_entropy and their gradients">;
def Twill_ScaleAttributes : Twill_Attributes<"scale", 16, [
    Twill_Field<"factor", 1>]>;
def Twill_TransposeAttributes : Twill_Attributes<"transpose", 17, [
    Twill_Field<"permutation", 1, "out dim i is in dim permutation[i]">]>;
def Twill_ConstantAttributes : Twill_Attributes<"constant", 18, [
    Twill_Field<"value", 1>]>;
def Twill_ClipCoefficientAttributes : Twill_Attributes<"clip_coefficient", 19, [
    Twill_Field<"max_norm", 1>]>;
def Twill_LrScheduleAttributes : Twill_Attributes<"lr_schedule", 20, [
    Twill_Field<"lr", 1>,
    Twill_Field<"warmup_steps", 2>]>;
def Twill_AdamwAttributes : Twill_Attributes<"adamw", 21, [
    Twill_Field<"beta1", 1>,
    Twill_Field<"beta2", 2>,
    Twill_Field<"eps", 3>,
    Twill_Field<"weight_decay", 4>]>;
def Twill_AllReduceAttributes : Twill_Attributes<"all_reduce", 22, [
    Twill_Field<"axis", 1>], "all_reduce and its start">;
def Twill_GatherAttributes : Twill_Attributes<"gather", 23, [
    Twill_Field<"axis", 1>,
    Twill_Field<"dim", 2, "split into blocks of ceil(size / ranks)">],
    "all_gather, reduce_scatter, their starts, and local_slice">;
def Twill_AllToAllAttributes : Twill_Attributes<"all_to_all", 24, [
    Twill_Field<"axis", 1>,
    Twill_Field<"split_dim", 2>,
    Twill_Field<"concat_dim", 3>], "all_to_all and its start">;
def Twill_SplitAttributes : Twill_Attributes<"split", 25, [
    Twill_Field<"dim", 1>,
    Twill_Field<"blocks", 2, "the blocks the dim is cut in "
                "(support/BlockedPieces.h); 1: the pieces are consecutive">],
    "split and concat">;
def Twill_DropoutAttributes : Twill_Attributes<"dropout", 26, [
    Twill_Field<"rate", 1>,
    Twill_Field<"seed", 2, "the mask's key: the job's seed">,
    Twill_Field<"stream", 3, "and the adapted module's stream">,
    Twill_Field<"shard_axis", 4, "this rank's block of the features">]>;
def Twill_SoftcapAttributes : Twill_Attributes<"softcap", 27, [
    Twill_Field<"cap", 1>], "softcap and softcap_grad">;
def Twill_DequantizeNf4Attributes : Twill_Attributes<"dequantize_nf4", 28, [
    Twill_Field<"block_size", 1>,
    Twill_Field<"nested_block_size", 2>,
    Twill_Field<"rows", 3, "the whole weight's shape: a block's scales are "
                "found by its place in it">,
    Twill_Field<"columns", 4>,
    Twill_Field<"shard_axis", 5, "this rank's block of rows or columns">]>;
def Twill_QuantizedMatmulAttributes : Twill_Attributes<"quantized_matmul", 29, [
    Twill_Field<"transpose_rhs", 1>,
    Twill_Field<"alpha", 2, "result = alpha * product (+ the addend)">,
    Twill_Field<"block_size", 3, "an NF4 weight's (all zero for FP8): its "
                "blocks and the whole weight's shape">,
    Twill_Field<"nested_block_size", 4>,
    Twill_Field<"rows", 5>,
    Twill_Field<"columns", 6>,
    Twill_Field<"shard_axis", 7, "whose block of rows or columns this rank "
                "holds">,
    Twill_Field<"lhs_fp8_block_size", 8, "an FP8 weight's x W^T whose lhs "
                "round_to_fp8 rounded in blocks of this size (0: none)">]>;
def Twill_RoundToFp8Attributes : Twill_Attributes<"round_to_fp8", 30, [
    Twill_Field<"block_size", 1>]>;
def Twill_DpoLossAttributes : Twill_Attributes<"dpo_loss", 31, [
    Twill_EnumField<"loss_type", 1, ["SIGMOID", "IPO", "HINGE", "ROBUST"],
                    "support/Dpo.h's">,
    Twill_Field<"beta", 2>,
    Twill_Field<"label_smoothing", 3>], "dpo_loss and dpo_loss_grad">;

#endif // TWILL_EXECUTABLE_TD
