//===- ElementwiseCases.cpp - elementwise ops and layouts -------------------===//

#include "test/conformance/CaseBuilder.h"

#include "support/BlockedPieces.h"

using namespace twill;
using namespace twill::conformance;

void conformance::elementwiseCases(Suite &suite) {
  for (DType type : kFloats)
    for (Shape shape : {Shape{1001}, Shape{3, 7, 45}}) {
      for (Opcode op : {ADD, MUL, SWIGLU, GEGLU, SIGMOID_GATE, DIV}) {
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
      // Gemma 2's final logits: N(0, 4^2) against a cap of 3 reaches the
      // saturated ends.
      CaseBuilder softcap(suite, SOFTCAP, type, kSummed);
      softcap.in(shape, normal(4));
      softcap.out(shape);
      softcap->mutable_softcap()->set_cap(3);
      softcap.add();
      CaseBuilder softcapGrad(suite, SOFTCAP_GRAD, type, kSummed);
      softcapGrad.in(shape, normal(4));
      softcapGrad.in(shape);
      softcapGrad.out(shape);
      softcapGrad->mutable_softcap()->set_cap(3);
      softcapGrad.add();

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
        // A linear layer's bias and its gradient.
        CaseBuilder bias(suite, ADD_COLUMNS, type, kSummed);
        bias.in(shape);
        bias.in(columns);
        bias.out(shape);
        bias.add();
        CaseBuilder sums(suite, COLUMN_SUMS, type, kSummed);
        sums.in(shape);
        sums.out(columns);
        sums.add();
      }

      for (Opcode op : {SWIGLU_GRAD, GEGLU_GRAD, SIGMOID_GATE_GRAD}) {
        CaseBuilder gated(suite, op, type, kSummed);
        for (int i = 0; i < 3; ++i)
          gated.in(shape);
        gated.out(shape);
        gated.out(shape);
        gated.add();
      }
    }
  // Token counts (a tiled loss's tiles', or their sequences') add as
  // integers.
  CaseBuilder counts(suite, ADD, I64, kExact);
  counts.operand(I64, {}, value(8191));
  counts.operand(I64, {}, value(4097));
  counts.result(I64, {});
  counts.note("counts").add();
  CaseBuilder sequenceCounts(suite, ADD, I64, kExact);
  sequenceCounts.operand(I64, {37, 2}, integers(0, 5000));
  sequenceCounts.operand(I64, {37, 2}, integers(0, 5000));
  sequenceCounts.result(I64, {37, 2});
  sequenceCounts.note("counts per sequence").add();
}

void conformance::layoutCases(Suite &suite) {
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
