//===- ConformanceSuite.cpp - the cases of twill-conformance --------------===//

#include "tools/twill-conformance/ConformanceSuite.h"

#include "runtime/executable/Executable.h"
#include "runtime/executable/Opcodes.h"
#include "support/BlockedPieces.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace twill;
using namespace twill::conformance;

namespace {

// Tolerances: the largest |cuda - cpu| over the largest |cpu| of a result.
// Copies, casts and integer arithmetic must agree bit for bit (kExact).
// fp32 kernels agree to a few ulps of the largest term: libraries sum in
// another order, and exp or rsqrt differ in their last bit (kSummed). A
// bf16 result is rounded once from fp32, so two fp32 values a hair apart
// may land one bf16 step (2^-8 of the value) apart (kBF16); attention in
// bf16 also rounds its probabilities for the second GEMM (kBF16Attention).
constexpr double kExact = 0, kSummed = 1e-5, kBF16 = 1e-2,
                 kBF16Attention = 3e-2;

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case F32:
    return "f32";
  case BF16:
    return "bf16";
  case F16:
    return "f16";
  case I32:
    return "i32";
  case I64:
    return "i64";
  }
  return "?";
}

using Shape = std::vector<int64_t>;

Fill normal(double sigma = 1) { return {Fill::Normal, sigma}; }
Fill uniform(double low, double high) { return {Fill::Uniform, low, high}; }
Fill integers(int64_t low, int64_t high) {
  return {Fill::Integers, double(low), double(high)};
}
Fill labels(int64_t vocab) { return {Fill::Labels, double(vocab), -100}; }
Fill positions(int64_t seq) { return {Fill::Positions, 0, double(seq)}; }
Fill segments(int64_t seq) { return {Fill::Segments, 0, double(seq)}; }
Fill value(double v) { return {Fill::Value, v}; }

/// Builds one case: its operands and results in instruction order, its
/// attributes; add() makes it an entry point of the suite.
class CaseBuilder {
public:
  CaseBuilder(Suite &suite, Opcode opcode, DType type, double tolerance)
      : suite(suite), type(type) {
    current.opcode = opcode;
    current.dtype = dtypeName(type);
    // A bf16 result computed in fp32 is rounded; a copy is not.
    current.tolerance =
        type == BF16 && tolerance > 0 ? std::max(tolerance, kBF16) : tolerance;
    instruction.set_opcode(opcode);
  }

  /// The instruction, to set its attributes.
  Instruction *operator->() { return &instruction; }

  /// An operand or result of the case's float type.
  int in(Shape shape, Fill fill = normal()) {
    return operand(type, shape, fill);
  }
  int out(Shape shape) { return result(type, shape); }

  int operand(DType dtype, Shape shape, Fill fill = normal()) {
    int id = buffer(dtype, shape, shapes);
    Input &input = *suite.executable.add_inputs();
    input.set_name(llvm::formatv("case {0} operand {1}", suite.cases.size(),
                                 instruction.operands_size())
                       .str());
    input.set_buffer(id);
    instruction.add_operands(id);
    current.operands.push_back({id, fill});
    return id;
  }
  int result(DType dtype, Shape shape) {
    int id = buffer(dtype, shape, resultShapes);
    instruction.add_results(id);
    current.results.push_back(id);
    return id;
  }

  CaseBuilder &note(llvm::StringRef text) {
    current.note = text.str();
    return *this;
  }
  CaseBuilder &refused() {
    current.refused = true;
    return *this;
  }

  void add() {
    current.entry = suite.executable.entry_points_size();
    current.shapes = shapes + " ->" + resultShapes;
    EntryPoint &entry = *suite.executable.add_entry_points();
    entry.set_name(llvm::formatv("case {0}: {1}", suite.cases.size(),
                                 opcodeName(current.opcode))
                       .str());
    *entry.add_instructions() = instruction;
    if (isStart(current.opcode)) { // and the wait that ends it
      Instruction &wait = *entry.add_instructions();
      wait.set_opcode(WAIT);
      wait.add_operands(current.results.front());
    }
    for (int id : current.results) {
      entry.add_outputs(id);
      entry.add_output_roles(VALUE_UNSPECIFIED);
      entry.add_output_updates(-1);
    }
    suite.cases.push_back(std::move(current));
  }

private:
  int buffer(DType dtype, const Shape &shape, std::string &described) {
    Buffer &buffer = *suite.executable.add_buffers();
    buffer.set_dtype(dtype);
    for (int64_t dim : shape)
      buffer.add_shape(dim);
    buffer.set_size_bytes(numElements(buffer) * bytesPerElement(dtype));
    described +=
        " [" +
        llvm::join(llvm::map_range(
                       shape, [](int64_t dim) { return std::to_string(dim); }),
                   ",") +
        "]";
    if (dtype != type)
      described += dtypeName(dtype);
    return suite.executable.buffers_size() - 1;
  }

  Suite &suite;
  DType type;
  Case current;
  Instruction instruction;
  std::string shapes, resultShapes;
};

constexpr DType kFloats[] = {F32, BF16};

//===----------------------------------------------------------------------===//
// The forward pass
//===----------------------------------------------------------------------===//

void embeddingCases(Suite &suite) {
  // A 97-token vocab: whole, and the middle and the padded last of three
  // blocks of 33 rows (ids anywhere in the vocab; other blocks' are zero).
  for (DType type : kFloats) {
    for (const char *axis : {"", "mid", "last"}) {
      CaseBuilder c(suite, EMBEDDING, type, kExact);
      c.in({*axis ? 33 : 97, 45});
      c.operand(I32, {3, 11}, integers(0, 97));
      c.out({3, 11, 45});
      c->mutable_embedding()->set_shard_axis(axis);
      if (*axis)
        c.note(std::string("vocab block of ") + axis);
      c.add();
    }
    CaseBuilder c(suite, EMBEDDING, type, kExact);
    c.in({97, 45});
    c.operand(I32, {2, 5}, integers(97, 100)); // ids past the vocab
    c.out({2, 5, 45});
    c->mutable_embedding()->set_shard_axis("");
    c.note("token outside the vocab").refused().add();
  }
}

/// A matmul of lhs and rhs (and an addend) with its flags.
enum Transposed { kNeither, kLhs, kRhs, kBoth };

void matmul(Suite &suite, DType type, Shape lhs, Shape rhs, Shape result,
            Transposed transposed, const char *note, bool addend = false,
            double alpha = 1) {
  CaseBuilder c(suite, MATMUL, type, kSummed);
  c.in(lhs);
  c.in(rhs);
  if (addend)
    c.in(result);
  c.out(result);
  MatmulAttributes &attributes = *c->mutable_matmul();
  attributes.set_transpose_lhs(transposed == kLhs || transposed == kBoth);
  attributes.set_transpose_rhs(transposed == kRhs || transposed == kBoth);
  attributes.set_alpha(alpha);
  c.note(note).add();
}

void matmulCases(Suite &suite) {
  for (DType type : kFloats) {
    matmul(suite, type, {37, 53}, {53, 29}, {37, 29}, kNeither, "plain");
    matmul(suite, type, {3, 13, 45}, {29, 45}, {3, 13, 29}, kRhs,
           "weight shared by the batch");
    matmul(suite, type, {53, 37}, {53, 29}, {37, 29}, kLhs, "transposed lhs");
    matmul(suite, type, {53, 37}, {29, 53}, {37, 29}, kBoth, "both transposed");
    matmul(suite, type, {3, 11, 19}, {3, 19, 7}, {3, 11, 7}, kNeither,
           "batched rhs");
    matmul(suite, type, {3, 13, 45}, {3, 13, 29}, {45, 29}, kLhs,
           "sum over the batch (weight gradient)");
    matmul(suite, type, {3, 13, 5}, {29, 5}, {3, 13, 29}, kRhs,
           "addend and alpha (LoRA's B)", /*addend=*/true, 0.37);
    matmul(suite, type, {515, 1027}, {771, 1027}, {515, 771}, kRhs, "large");
    matmul(suite, type, {7, 0}, {0, 9}, {7, 9}, kNeither, "empty sum (k = 0)");
    matmul(suite, type, {7, 0}, {0, 9}, {7, 9}, kNeither,
           "empty sum with an addend", /*addend=*/true, 2.0);
    matmul(suite, type, {0, 5}, {5, 3}, {0, 3}, kNeither, "no rows (m = 0)");
  }
}

void normCases(Suite &suite) {
  for (DType type : kFloats)
    for (Shape x : {Shape{3, 7, 45}, Shape{2, 4097}}) {
      int64_t dim = x.back();
      CaseBuilder norm(suite, RMS_NORM, type, kSummed);
      norm.in(x);
      norm.in({dim});
      norm.out(x);
      norm->mutable_rms_norm()->set_epsilon(1e-5);
      norm.add();

      CaseBuilder grad(suite, RMS_NORM_GRAD, type, kSummed);
      grad.in(x);
      grad.in({dim});
      grad.in(x);
      grad.out(x);
      grad->mutable_rms_norm()->set_epsilon(1e-5);
      grad.add();

      CaseBuilder weight(suite, RMS_NORM_WEIGHT_GRAD, type, kSummed);
      weight.in(x);
      weight.in(x);
      weight.out({dim});
      weight->mutable_rms_norm()->set_epsilon(1e-5);
      weight.add();
    }
}

void ropeCases(Suite &suite) {
  for (DType type : kFloats)
    for (Opcode op : {ROPE, ROPE_GRAD}) {
      // Llama 3.1's scaled frequencies, packed documents.
      CaseBuilder scaled(suite, op, type, kSummed);
      scaled.in({2, 17, 3, 10});
      scaled.operand(I32, {2, 17}, positions(17));
      scaled.out({2, 17, 3, 10});
      RopeAttributes &llama31 = *scaled->mutable_rope();
      llama31.set_theta(500000);
      llama31.set_scaling_factor(8);
      llama31.set_low_freq_factor(1);
      llama31.set_high_freq_factor(4);
      llama31.set_original_max_position(8192);
      scaled.note("Llama 3.1 scaling, packed positions").add();
      // Positions far along a 128k context, where angles are large.
      CaseBuilder far(suite, op, type, kSummed);
      far.in({1, 5, 2, 128});
      far.operand(I32, {1, 5}, integers(100000, 131072));
      far.out({1, 5, 2, 128});
      RopeAttributes &unscaled = *far->mutable_rope();
      unscaled.set_theta(10000);
      unscaled.set_scaling_factor(0);
      unscaled.set_low_freq_factor(0);
      unscaled.set_high_freq_factor(0);
      unscaled.set_original_max_position(0);
      far.note("positions past 100k").add();
    }
}

/// attention and attention_grad over q [batch, seq, heads, dim] and k, v
/// [batch, seq, kvHeads, dim], with packed documents or not, on one rank's
/// block of heads (`axis`) or all of them.
void attention(Suite &suite, DType type, int64_t batch, int64_t seq,
               int64_t heads, int64_t kvHeads, int64_t dim, bool packed,
               const char *axis, const char *note) {
  Shape q = {batch, seq, heads, dim}, kv = {batch, seq, kvHeads, dim};
  double tolerance = type == BF16 ? kBF16Attention : kSummed;
  for (bool gradient : {false, true}) {
    CaseBuilder c(suite, gradient ? ATTENTION_GRAD : ATTENTION, type,
                  tolerance);
    c.in(q);
    c.in(kv);
    c.in(kv);
    if (gradient) {
      c.in(q); // the forward's output: both backends recompute it
      c.in(q);
    }
    if (packed)
      c.operand(I32, {batch, seq}, segments(seq));
    c.out(q);
    if (gradient) {
      c.out(kv);
      c.out(kv);
    }
    c->mutable_attention()->set_scale(1 / std::sqrt(double(dim)));
    c->mutable_attention()->set_shard_axis(axis);
    c.note(note).add();
  }
}

void attentionCases(Suite &suite) {
  for (DType type : kFloats) {
    attention(suite, type, 2, 17, 3, 3, 10, false, "", "MHA");
    attention(suite, type, 3, 1, 6, 2, 12, false, "", "GQA, seq 1");
    attention(suite, type, 2, 17, 6, 2, 12, true, "", "GQA, packed");
    attention(suite, type, 1, 513, 4, 2, 20, true, "",
              "GQA, packed, two chunks");
    // Query heads 2-3 of 6 (middle block): they straddle two KV heads.
    attention(suite, type, 2, 17, 2, 2, 12, true, "mid", "heads 2-3 of 6, GQA");
    // Query head 2 of 3 over all 3 KV heads: KV heads replicated.
    attention(suite, type, 2, 17, 1, 3, 12, false, "last",
              "head 2 of 3, replicated KV heads");
    attention(suite, type, 1, 4096, 2, 1, 16, true, "",
              "seq 4096, MQA, packed");
  }
}

void elementwiseCases(Suite &suite) {
  for (DType type : kFloats)
    for (Shape shape : {Shape{1001}, Shape{3, 7, 45}}) {
      for (Opcode op : {ADD, MUL, SWIGLU, DIV}) {
        CaseBuilder c(suite, op, type, kSummed);
        c.in(shape);
        c.in(shape, op == DIV ? uniform(0.5, 2) : normal());
        c.out(shape);
        c.add();
      }
      CaseBuilder scale(suite, SCALE, type, kSummed);
      scale.in(shape);
      scale.out(shape);
      scale->mutable_scale()->set_factor(0.37);
      scale.add();

      // LoRA's dropout of [tokens..., features]: this rank's features,
      // or its block along "mid" (features 1 x 45 on: each Philox group of
      // four straddles the block's start), a micro-batch past 2^32.
      for (std::string axis : {"", "mid"}) {
        if (shape.size() < 2)
          break;
        CaseBuilder dropout(suite, DROPOUT, type, kSummed);
        dropout.in(shape);
        dropout.operand(I32, Shape(shape.begin(), shape.end() - 1),
                        integers(0, 1 << 20));
        dropout.operand(I64, {}, value(double((int64_t(1) << 32) + 7)));
        dropout.out(shape);
        DropoutAttributes &a = *dropout->mutable_dropout();
        a.set_rate(0.3);
        a.set_seed(11);
        a.set_stream(0xdeadbeef);
        a.set_shard_axis(axis);
        dropout.note(axis.empty() ? "" : "features of the mid block").add();
      }

      // DoRA's: row norms' squares and roots, columns scaled, and their
      // gradients (the scale's summed over every row).
      if (shape.size() >= 2) {
        Shape columns(shape.end() - 1, shape.end());
        Shape rows(shape.begin(), shape.end() - 1);
        CaseBuilder squares(suite, ROW_SUM_SQUARES, type, kSummed);
        squares.in(shape);
        squares.out(rows);
        squares.add();
        CaseBuilder root(suite, SQRT, type, kSummed);
        root.in(rows, uniform(0.5, 20));
        root.out(rows);
        root.add();
        CaseBuilder scaled(suite, SCALE_COLUMNS, type, kSummed);
        scaled.in(shape);
        scaled.in(columns, uniform(0.5, 2));
        scaled.out(shape);
        scaled.add();
        CaseBuilder grad(suite, SCALE_COLUMNS_GRAD, type, kSummed);
        grad.in(shape);
        grad.in(columns, uniform(0.5, 2));
        grad.in(shape);
        grad.out(shape);
        grad.out(columns);
        grad.add();
      }

      CaseBuilder swiglu(suite, SWIGLU_GRAD, type, kSummed);
      for (int i = 0; i < 3; ++i)
        swiglu.in(shape);
      swiglu.out(shape);
      swiglu.out(shape);
      swiglu.add();
    }
  // Token counts (a tiled loss's tiles') add as integers.
  CaseBuilder counts(suite, ADD, I64, kExact);
  counts.operand(I64, {}, value(8191));
  counts.operand(I64, {}, value(4097));
  counts.result(I64, {});
  counts.note("counts").add();
}

void crossEntropyCases(Suite &suite) {
  // A 97-token vocab, whole or in blocks of 33 columns (the last padded);
  // about a fifth of the labels ignored (-100); and a wide vocab.
  struct Logits {
    int64_t rows, columns, vocab;
    const char *axis;
  };
  for (DType type : kFloats)
    for (Logits logits :
         {Logits{23, 97, 97, ""}, Logits{23, 33, 97, "mid"},
          Logits{23, 33, 97, "last"}, Logits{7, 4099, 4099, ""}})
      for (bool gradient : {false, true}) {
        CaseBuilder c(suite, gradient ? CROSS_ENTROPY_GRAD : CROSS_ENTROPY,
                      type, kSummed);
        c.in({logits.rows, logits.columns}, normal(3));
        c.operand(I32, {logits.rows}, labels(logits.vocab));
        if (gradient) {
          c.operand(F32, {}, value(0.37));
          c.out({logits.rows, logits.columns});
        } else {
          c.result(F32, {});
          c.result(I64, {});
        }
        CrossEntropyAttributes &attributes = *c->mutable_cross_entropy();
        attributes.set_ignore_index(-100);
        attributes.set_shard_axis(logits.axis);
        attributes.set_vocab_size(*logits.axis ? logits.vocab : 0);
        attributes.set_wrt_weight(false);
        if (*logits.axis)
          c.note(std::string("vocab block of ") + logits.axis);
        c.add();
      }
  for (bool gradient : {false, true}) {
    CaseBuilder c(suite, gradient ? CROSS_ENTROPY_GRAD : CROSS_ENTROPY, F32,
                  kSummed);
    c.in({5, 97});
    c.operand(I32, {5}, integers(97, 100)); // labels past the vocab
    if (gradient) {
      c.operand(F32, {}, value(1));
      c.out({5, 97});
    } else {
      c.result(F32, {});
      c.result(I64, {});
    }
    CrossEntropyAttributes &attributes = *c->mutable_cross_entropy();
    attributes.set_ignore_index(-100);
    attributes.set_shard_axis("");
    attributes.set_vocab_size(0);
    attributes.set_wrt_weight(false);
    c.note("label outside the vocab").refused().add();
  }
}

void linearCrossEntropyCases(Suite &suite) {
  // 20 positions in tiles of 6 (the last of 2), hidden 24; the vocab whole
  // or in blocks as for cross_entropy. The tile (the last tile's logits, or
  // their gradient) is compared too.
  struct Vocab {
    int64_t columns, vocab;
    const char *axis;
  };
  for (DType type : kFloats)
    for (Vocab v :
         {Vocab{97, 97, ""}, Vocab{33, 97, "mid"}, Vocab{33, 97, "last"}})
      for (int gradient : {0, 1, 2}) { // none, the input's, the weight's
        CaseBuilder c(
            suite, gradient ? LINEAR_CROSS_ENTROPY_GRAD : LINEAR_CROSS_ENTROPY,
            type, kSummed);
        c.in({5, 4, 24});
        c.in({v.columns, 24}, normal(0.5));
        c.operand(I32, {5, 4}, labels(v.vocab));
        if (gradient) {
          c.operand(F32, {}, value(0.37));
          c.out(gradient == 1 ? Shape{5, 4, 24} : Shape{v.columns, 24});
        } else {
          c.result(F32, {});
          c.result(I64, {});
        }
        c.out({6, v.columns});
        CrossEntropyAttributes &attributes = *c->mutable_cross_entropy();
        attributes.set_ignore_index(-100);
        attributes.set_shard_axis(v.axis);
        attributes.set_vocab_size(*v.axis ? v.vocab : 0);
        attributes.set_wrt_weight(gradient == 2);
        c.note(std::string(gradient == 2 ? "the weight's; " : "") +
               (*v.axis ? std::string("vocab block of ") + v.axis
                        : std::string("whole vocab")));
        c.add();
      }
}

void layoutCases(Suite &suite) {
  for (DType type : kFloats) {
    CaseBuilder reshape(suite, RESHAPE, type, kExact);
    reshape.in({3, 7, 45});
    reshape.out({21, 45});
    reshape.add();
    // Pieces along the first, a middle and the last dim, consecutive or in
    // blocks (support/BlockedPieces.h): 4 blocks of 8 of the 30 positions
    // (the last of 6), 3 of 15 of the 45, and 2 of 2 of the 3 (the last
    // block too short for its second chunk).
    struct Pieces {
      int64_t dim, blocks, firstChunk;
    };
    for (Pieces p : {Pieces{0, 1, 1}, Pieces{1, 1, 5}, Pieces{2, 1, 43},
                     Pieces{1, 4, 5}, Pieces{2, 3, 7}, Pieces{0, 2, 1}}) {
      Shape whole = {3, 30, 45};
      int64_t block = (whole[p.dim] + p.blocks - 1) / p.blocks;
      std::vector<int64_t> chunks = {p.firstChunk, block - p.firstChunk};
      std::vector<int64_t> sizes =
          blockedPieceSizes(whole[p.dim], p.blocks, chunks);
      std::vector<Shape> pieces;
      for (int64_t size : sizes) {
        pieces.push_back(whole);
        pieces.back()[p.dim] = size;
      }
      CaseBuilder split(suite, SPLIT, type, kExact);
      split.in(whole);
      for (const Shape &piece : pieces)
        split.out(piece);
      split->mutable_split()->set_dim(p.dim);
      split->mutable_split()->set_blocks(p.blocks);
      CaseBuilder concat(suite, CONCAT, type, kExact);
      for (const Shape &piece : pieces)
        concat.in(piece);
      concat.out(whole);
      concat->mutable_split()->set_dim(p.dim);
      concat->mutable_split()->set_blocks(p.blocks);
      if (p.blocks > 1) {
        std::string note = std::to_string(p.blocks) + " blocks";
        split.note(note);
        concat.note(note);
      }
      split.add();
      concat.add();
    }
    // Copies (here between buffers of their own; a program's offloads
    // write its host arena).
    for (Opcode transfer : {OFFLOAD, RELOAD, OFFLOAD_START, RELOAD_START}) {
      CaseBuilder c(suite, transfer, type, kExact);
      c.in({3, 7, 45});
      c.out({3, 7, 45});
      c.add();
    }
    for (auto [shape, permutation] :
         {std::pair(Shape{2, 5, 3, 7}, Shape{0, 2, 1, 3}),
          std::pair(Shape{3, 5, 7}, Shape{2, 0, 1})}) {
      Shape result;
      for (int64_t dim : permutation)
        result.push_back(shape[dim]);
      CaseBuilder c(suite, TRANSPOSE, type, kExact);
      c.in(shape);
      c.out(result);
      for (int64_t dim : permutation)
        c->mutable_transpose()->add_permutation(dim);
      c.add();
    }
    for (Shape shape : {Shape{3, 7, 45}, Shape{}}) {
      CaseBuilder c(suite, CONSTANT, type, kExact);
      c.out(shape);
      c->mutable_constant()->set_value(0.37);
      c.add();
    }
  }
  // Casts between the float types and from the integer ones.
  for (auto [from, to] :
       {std::pair(F32, BF16), std::pair(BF16, F32), std::pair(F32, F32),
        std::pair(I32, F32), std::pair(I64, F32), std::pair(I32, BF16)}) {
    CaseBuilder c(suite, CAST, to, kExact);
    c.operand(from, {1001},
              from == F32 || from == BF16 ? normal(100)
                                          : integers(-5000, 5000));
    c.result(to, {1001});
    c.note(std::string("from ") + dtypeName(from)).add();
  }
}

//===----------------------------------------------------------------------===//
// Gradients of the embedding; the optimizer step
//===----------------------------------------------------------------------===//

void embeddingGradCases(Suite &suite) {
  for (DType type : kFloats) {
    CaseBuilder c(suite, EMBEDDING_GRAD, type, kSummed);
    c.operand(I32, {3, 11}, integers(0, 29)); // repeated ids add up
    c.in({3, 11, 19});
    c.out({29, 19});
    c.add();
  }
  CaseBuilder c(suite, EMBEDDING_GRAD, F32, kSummed);
  c.operand(I32, {2, 5}, integers(29, 32)); // ids past the vocab
  c.in({2, 5, 19});
  c.out({29, 19});
  c.note("token outside the vocab").refused().add();
}

void optimizerCases(Suite &suite) {
  for (Opcode op : {GLOBAL_NORM, SUM_SQUARES}) {
    CaseBuilder c(suite, op, F32, kSummed);
    c.in({1001});
    c.in({3, 7, 45});
    c.in({});
    c.out({});
    c.add();
  }
  CaseBuilder root(suite, SQRT, F32, kSummed);
  root.in({}, uniform(0.5, 20));
  root.out({});
  root.add();
  for (double norm : {3.7, 0.2}) {
    CaseBuilder clip(suite, CLIP_COEFFICIENT, F32, kSummed);
    clip.in({}, value(norm));
    clip.out({});
    clip->mutable_clip_coefficient()->set_max_norm(1);
    clip.note(norm > 1 ? "clipped" : "under the limit").add();
  }
  for (int64_t step : {1, 7}) {
    CaseBuilder lr(suite, LR_SCHEDULE, F32, kSummed);
    lr.operand(I64, {}, value(double(step)));
    lr.operand(I64, {}, value(10));
    lr.out({});
    lr->mutable_lr_schedule()->set_lr(1e-4);
    lr->mutable_lr_schedule()->set_warmup_steps(3);
    lr.note(step < 3 ? "warming up" : "cosine").add();
  }
  CaseBuilder increment(suite, INCREMENT, I64, kExact);
  increment.operand(I64, {}, value(41));
  increment.result(I64, {});
  increment.add();

  CaseBuilder adamw(suite, ADAMW, F32, kSummed);
  adamw.in({1001});                      // param
  adamw.in({1001});                      // grad
  adamw.in({1001}, normal(0.1));         // exp_avg
  adamw.in({1001}, uniform(1e-4, 1e-2)); // exp_avg_sq
  adamw.in({}, value(1e-3));             // lr
  adamw.in({}, value(0.5));              // grad_scale
  adamw.operand(I64, {}, value(4));      // step
  for (int i = 0; i < 3; ++i)
    adamw.out({1001});
  AdamWAttributes &settings = *adamw->mutable_adamw();
  settings.set_beta1(0.9);
  settings.set_beta2(0.999);
  settings.set_eps(1e-8);
  settings.set_weight_decay(0.01);
  adamw.add();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

void collectiveCases(Suite &suite) {
  for (DType type : kFloats) {
    Shape shape = {3, 7, 45};
    // Each collective blocking, and started then waited.
    for (Opcode op :
         {ALL_GATHER, REDUCE_SCATTER, ALL_GATHER_START, REDUCE_SCATTER_START}) {
      CaseBuilder c(suite, op, type, kExact);
      c.in(shape);
      c.out(shape);
      c->mutable_gather()->set_axis("one");
      c->mutable_gather()->set_dim(1);
      c.note("one rank").add();
    }
    for (Opcode op : {ALL_REDUCE, ALL_REDUCE_START}) {
      CaseBuilder reduce(suite, op, type, kExact);
      reduce.in(shape);
      reduce.out(shape);
      reduce->mutable_all_reduce()->set_axis("one");
      reduce.note("one rank").add();
    }

    CaseBuilder mid(suite, ALL_REDUCE, type, kExact);
    mid.in(shape);
    mid.out(shape);
    mid->mutable_all_reduce()->set_axis("mid");
    mid.note("middle of 3, the others absent").add();

    for (Opcode op : {ALL_TO_ALL, ALL_TO_ALL_START}) {
      CaseBuilder exchange(suite, op, type, kExact);
      exchange.in(shape);
      exchange.out(shape);
      AllToAllAttributes &dims = *exchange->mutable_all_to_all();
      dims.set_axis("one");
      dims.set_split_dim(1);
      dims.set_concat_dim(2);
      exchange.note("one rank").add();
    }

    CaseBuilder absent(suite, ALL_GATHER, type, kExact);
    absent.in({3, 3, 45});
    absent.out({3, 7, 45});
    absent->mutable_gather()->set_axis("mid");
    absent->mutable_gather()->set_dim(1);
    absent.note("over 3 ranks, 2 absent").refused().add();
  }
  CaseBuilder counts(suite, ALL_REDUCE, I64, kExact);
  counts.operand(I64, {3}, integers(0, 1000));
  counts.result(I64, {3});
  counts->mutable_all_reduce()->set_axis("one");
  counts.note("token counts").add();
  // This rank's block of 10 along dim 1 over 3 ranks: 4, 4 and 2 + padding.
  for (DType type : {F32, BF16, I32})
    for (const char *axis : {"mid", "last"}) {
      CaseBuilder c(suite, LOCAL_SLICE, type, kExact);
      c.operand(type, {3, 10, 5}, type == I32 ? integers(0, 1000) : normal());
      c.result(type, {3, 4, 5});
      c->mutable_gather()->set_axis(axis);
      c->mutable_gather()->set_dim(1);
      c.note(std::string("block of ") + axis).add();
    }
}

} // namespace

Suite conformance::conformanceSuite() {
  Suite suite;
  suite.executable.set_format_version(EXECUTABLE_FORMAT);
  Mesh &mesh = *suite.executable.add_meshes();
  mesh.set_name("mesh");
  for (auto [axis, size] : llvm::zip_equal(kMeshAxes, kMeshShape)) {
    mesh.add_axes(axis);
    mesh.add_shape(size);
  }
  embeddingCases(suite);
  matmulCases(suite);
  normCases(suite);
  ropeCases(suite);
  attentionCases(suite);
  elementwiseCases(suite);
  crossEntropyCases(suite);
  linearCrossEntropyCases(suite);
  layoutCases(suite);
  embeddingGradCases(suite);
  optimizerCases(suite);
  collectiveCases(suite);
  return suite;
}
