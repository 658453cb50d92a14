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
  }
}
