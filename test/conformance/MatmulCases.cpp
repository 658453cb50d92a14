//===- MatmulCases.cpp - matmuls and their epilogues ------------------------===//

#include "test/conformance/CaseBuilder.h"

using namespace twill;
using namespace twill::conformance;

namespace {
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

/// A block of a [wholeRows, wholeColumns] NF4 weight (its rows, or whole
/// blocks of its columns along "mid"), every byte and scale code drawn.
void dequantize(Suite &suite, DType type, Shape block, int64_t wholeRows,
                int64_t wholeColumns, int64_t blockSize,
                int64_t nestedBlockSize, const std::string &axis,
                const char *note) {
  CaseBuilder c(suite, DEQUANTIZE_NF4, type, kExact);
  int64_t rows = block[0], columns = block[1];
  int64_t blocks = wholeRows * (wholeColumns / blockSize);
  c.operand(U8, {rows, columns / 2}, integers(0, 256));
  c.operand(U8, {rows, columns / blockSize}, integers(0, 256));
  c.operand(F32, {(blocks + nestedBlockSize - 1) / nestedBlockSize},
            uniform(0.01, 2));
  c.operand(F32, {}, value(0.125));
  c.out(block);
  DequantizeNf4Attributes &a = *c->mutable_dequantize_nf4();
  a.set_block_size(blockSize);
  a.set_nested_block_size(nestedBlockSize);
  a.set_rows(wholeRows);
  a.set_columns(wholeColumns);
  a.set_shard_axis(axis);
  c.note(note).add();
}
/// A quantized matmul: lhs [.., k] times the [rows, columns] weight NF4
/// `blockSize` blocks (or, at 0, FP8) form (a block of a [wholeRows,
/// wholeColumns] one along `axis`), transposed (the forward's x W^T) or
/// not (the backward's dy W), with an addend and alpha.
void quantizedMatmul(Suite &suite, DType type, Shape lhs, Shape weight,
                     bool transposed, int64_t blockSize, int64_t wholeRows,
                     const std::string &axis, const char *note,
                     bool addend = false, double alpha = 1,
                     int64_t lhsFp8Block = 0) {
  CaseBuilder c(suite, QUANTIZED_MATMUL, type, kSummed);
  int64_t rows = weight[0], columns = weight[1];
  Shape result = lhs;
  result.back() = transposed ? rows : columns;
  // An lhs round_to_fp8 rounded: blocks of e4m3 values times a scale.
  c.in(lhs, lhsFp8Block ? fp8Blocks(lhsFp8Block) : normal());
  if (blockSize) {
    int64_t blocks = wholeRows * (columns / blockSize);
    c.operand(U8, {rows, columns / 2}, integers(0, 256));
    c.operand(U8, {rows, columns / blockSize}, integers(0, 256));
    c.operand(F32, {(blocks + 2) / 3}, uniform(0.01, 2));
    c.operand(F32, {}, value(0.125));
  } else {
    c.operand(U8, weight, integers(0, 127));
    c.operand(F32, {rows}, uniform(-2, 2));
  }
  if (addend)
    c.in(result);
  c.out(result);
  QuantizedMatmulAttributes &a = *c->mutable_quantized_matmul();
  a.set_transpose_rhs(transposed);
  a.set_alpha(alpha);
  a.set_block_size(blockSize);
  a.set_nested_block_size(blockSize ? 3 : 0);
  a.set_rows(blockSize ? wholeRows : 0);
  a.set_columns(blockSize ? columns : 0);
  a.set_shard_axis(axis);
  a.set_lhs_fp8_block_size(lhsFp8Block);
  c.note(note).add();
}

/// round_to_fp8 of `shape`'s rows in blocks of `block`.
void roundToFp8(Suite &suite, DType type, Shape shape, int64_t block, Fill fill,
                const char *note) {
  CaseBuilder c(suite, ROUND_TO_FP8, type, kExact);
  c.in(shape, fill);
  c.out(shape);
  c->mutable_round_to_fp8()->set_block_size(block);
  c.note(note).add();
}
} // namespace

void conformance::matmulCases(Suite &suite) {
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

    dequantize(suite, type, {37, 192}, 37, 192, 64, 256, "",
               "NF4 weight, nested blocks across rows");
    dequantize(suite, type, {13, 128}, 37, 128, 64, 3, "mid",
               "rows of the mid rank");
    dequantize(suite, type, {13, 128}, 37, 128, 64, 3, "last",
               "rows of the last rank, 2 of them padding");
    dequantize(suite, type, {11, 128}, 11, 384, 64, 5, "mid",
               "whole blocks of columns of the mid rank");
    dequantize(suite, type, {5, 16}, 5, 16, 4, 1, "",
               "small blocks, a nested scale each");

    // Every finite positive e4m3 byte (0-126: 127 is NaN), scales of
    // either sign.
    for (Shape shape : {Shape{37, 53}, Shape{3, 129}}) {
      CaseBuilder fp8(suite, DEQUANTIZE_FP8, type, kExact);
      fp8.operand(U8, shape, integers(0, 127));
      fp8.operand(F32, {shape[0]}, uniform(-2, 2));
      fp8.out(shape);
      fp8.note("FP8 weight, a scale per row").add();
    }

    quantizedMatmul(suite, type, {3, 13, 128}, {37, 128}, true, 64, 37, "",
                    "NF4 weight, x W^T");
    quantizedMatmul(suite, type, {3, 13, 37}, {37, 128}, false, 64, 37, "",
                    "NF4 weight, dy W", /*addend=*/true, 0.37);
    quantizedMatmul(suite, type, {2, 7, 128}, {13, 128}, true, 64, 37, "last",
                    "NF4 rows of the last rank, 2 of them padding");
    quantizedMatmul(suite, type, {3, 13, 53}, {37, 53}, true, 0, 0, "",
                    "FP8 weight, x W^T", /*addend=*/true, 2.0);
    quantizedMatmul(suite, type, {3, 13, 37}, {37, 53}, false, 0, 0, "",
                    "FP8 weight, dy W");
    quantizedMatmul(suite, type, {515, 1024}, {1536, 1024}, true, 64, 1536, "",
                    "NF4, large");
    // 9 MiB of fp32 weight: two of the cpu's panels.
    quantizedMatmul(suite, type, {3, 5, 1024}, {2304, 1024}, true, 64, 2304, "",
                    "NF4, two panels of result columns");
    quantizedMatmul(suite, type, {3, 5, 2304}, {2304, 1024}, false, 0, 0, "",
                    "FP8, two panels of the sum", /*addend=*/true, 0.5);
    // Inputs rounded to e4m3 in blocks of 128 (fp8_inputs): on a GPU the
    // e4m3 codes multiplied, where cuBLASLt has an FP8 GEMM for them.
    quantizedMatmul(suite, type, {3, 16, 384}, {64, 384}, true, 0, 0, "",
                    "FP8 weight and input, 3 blocks of the sum",
                    /*addend=*/true, 2.0, /*lhsFp8Block=*/128);
    quantizedMatmul(suite, type, {2, 16, 320}, {48, 320}, true, 0, 0, "",
                    "FP8 weight and input, the last block of 64", false, 1,
                    128);
    quantizedMatmul(suite, type, {3, 5, 40}, {7, 40}, true, 0, 0, "",
                    "FP8 input, a sum of 40 (the weight formed)", false, 1,
                    128);
    quantizedMatmul(suite, type, {128, 1024}, {512, 1024}, true, 0, 0, "",
                    "FP8 weight and input, large", false, 1, 128);

    roundToFp8(suite, type, {3, 5, 300}, 128, normal(),
               "blocks of 128, the last one of 44");
    roundToFp8(suite, type, {6, 10}, 4, uniform(-1e-3, 1e-3),
               "blocks of 4 of small values");
    roundToFp8(suite, type, {2, 256}, 128, fp8Blocks(128),
               "values on the grid stay");
    roundToFp8(suite, type, {3, 16}, 8, value(0), "blocks of zeros");
  }
}
