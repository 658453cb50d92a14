//===- CollectiveCases.cpp - collectives and their starts -------------------===//

#include "test/conformance/CaseBuilder.h"

using namespace twill;
using namespace twill::conformance;

void conformance::collectiveCases(Suite &suite) {
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
  // A quantized weight's bytes, gathered as they are.
  for (Opcode op : {ALL_GATHER, ALL_GATHER_START}) {
    CaseBuilder bytes(suite, op, U8, kExact);
    bytes.operand(U8, {7, 45}, integers(0, 256));
    bytes.result(U8, {7, 45});
    bytes->mutable_gather()->set_axis("one");
    bytes->mutable_gather()->set_dim(0);
    bytes.note("bytes, one rank").add();
  }
  CaseBuilder counts(suite, ALL_REDUCE, I64, kExact);
  counts.operand(I64, {3}, integers(0, 1000));
  counts.result(I64, {3});
  counts->mutable_all_reduce()->set_axis("one");
  counts.note("token counts").add();
  // This rank's block of 10 along dim 1 over 3 ranks: 4, 4 and 2 + padding.
  for (DType type : {F32, BF16, I32, U8})
    for (const char *axis : {"mid", "last"}) {
      CaseBuilder c(suite, LOCAL_SLICE, type, kExact);
      c.operand(type, {3, 10, 5},
                type == I32  ? integers(0, 1000)
                : type == U8 ? integers(0, 256)
                             : normal());
      c.result(type, {3, 4, 5});
      c->mutable_gather()->set_axis(axis);
      c->mutable_gather()->set_dim(1);
      c.note(std::string("block of ") + axis).add();
    }
}
