//===- ShardingRule.cpp - einsum-like factor rules of ops -----------------===//

#include "dialects/twill/ShardingRule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::twill;

ShardingRule::Tensor ShardingRule::freshFactors(ArrayRef<int64_t> shape) {
  Tensor dims;
  for (int64_t size : shape)
    dims.push_back({addFactor(size)});
  return dims;
}

ShardingRule::Tensor ShardingRule::tensor(ArrayRef<int> factors) {
  Tensor dims;
  for (int factor : factors)
    dims.push_back({factor});
  return dims;
}

/// Factor names: i, j, k, ..., z, then z1, z2, ...
static std::string factorName(int factor) {
  static constexpr llvm::StringLiteral letters = "ijklmnopqrstuvwxyz";
  if (factor < (int)letters.size())
    return std::string(1, letters[factor]);
  return "z" + std::to_string(factor - letters.size() + 1);
}

std::string ShardingRule::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto printTensors = [&](ArrayRef<Tensor> tensors) {
    os << "(";
    llvm::interleaveComma(tensors, os, [&](const Tensor &tensor) {
      os << "[";
      llvm::interleaveComma(tensor, os, [&](const Dim &dim) {
        if (dim.size() == 1) {
          os << factorName(dim.front());
          return;
        }
        os << "(";
        llvm::interleave(
            dim, os, [&](int factor) { os << factorName(factor); }, " ");
        os << ")";
      });
      os << "]";
    });
    os << ")";
  };
  auto printFactors = [&](llvm::StringRef label, ArrayRef<int> factors) {
    if (factors.empty())
      return;
    os << " " << label << "={";
    llvm::interleaveComma(factors, os,
                          [&](int factor) { os << factorName(factor); });
    os << "}";
  };
  printTensors(operands);
  os << " -> ";
  printTensors(results);
  os << " {";
  llvm::interleaveComma(llvm::seq<int>(0, factorSizes.size()), os, [&](int f) {
    os << factorName(f) << "=" << factorSizes[f];
  });
  os << "}";
  if (!internals.empty()) {
    os << " internal=";
    printTensors(internals);
  }
  printFactors("reduction", reductions);
  printFactors("replicated", replicated);
  printFactors("self-reduced", selfReduced);
  printFactors("exact", exact);
  printFactors("divisible", divisible);
  return text;
}
