//===- Flops.cpp - the floating-point operations of an op -----------------===//

#include "opmodel/Flops.h"

using namespace twill;

static double elements(llvm::ArrayRef<int64_t> shape) {
  double count = 1;
  for (int64_t dim : shape)
    count *= double(dim);
  return count;
}

double twill::flopsOf(const Instruction &instruction,
                      llvm::ArrayRef<llvm::ArrayRef<int64_t>> operandShapes,
                      llvm::ArrayRef<int64_t> resultShape) {
  switch (instruction.opcode()) {
  case MATMUL: {
    // Every result element sums k products, k the lhs's contracted dim.
    llvm::ArrayRef<int64_t> lhs = operandShapes[0];
    if (lhs.size() < 2)
      return 0;
    double k = instruction.matmul().transpose_lhs() ? lhs[lhs.size() - 2]
                                                    : lhs.back();
    return 2 * elements(resultShape) * k;
  }
  case QUANTIZED_MATMUL: // a matmul whose lhs is never transposed
    return operandShapes.empty() || operandShapes[0].empty()
               ? 0
               : 2 * elements(resultShape) * double(operandShapes[0].back());
  case ATTENTION:
  case ATTENTION_GRAD: {
    llvm::ArrayRef<int64_t> query = operandShapes[0]; // [batch, seq, heads, dim]
    if (query.size() != 4)
      return 0;
    // The (query, key) pairs a head sees: about half of seq^2, or with a
    // window w shorter than the sequence, seq w - w^2 / 2.
    double seq = double(query[1]);
    double window = double(instruction.attention().window());
    double pairs = window > 0 && window < seq
                       ? seq * window - window * window / 2
                       : seq * seq / 2;
    double forward = 4.0 * query[0] * query[2] * pairs * query[3];
    return instruction.opcode() == ATTENTION ? forward : 2.5 * forward;
  }
  case GROUPED_MATMUL:
  case GROUPED_MATMUL_WEIGHT_GRAD: {
    // Each of the [groups, rows, k] rows (dropless: every routed token)
    // times its expert's [k, n], n the result's last dim, or the
    // gradient's (operand 1: [groups, rows, n]).
    if (operandShapes.size() < 2 || operandShapes[0].size() != 3)
      return 0;
    double n = instruction.opcode() == GROUPED_MATMUL
                   ? double(resultShape.back())
                   : double(operandShapes[1].back());
    return 2 * elements(operandShapes[0]) * n;
  }
  case LINEAR_CROSS_ENTROPY:
  case LINEAR_CROSS_ENTROPY_GRAD: {
    // Operands input, weight [vocab block, hidden], labels (one per row).
    llvm::ArrayRef<int64_t> weight = operandShapes[1];
    if (weight.size() != 2)
      return 0;
    double logits = 2.0 * weight[0] * weight[1] * elements(operandShapes[2]);
    return instruction.opcode() == LINEAR_CROSS_ENTROPY ? logits : 2 * logits;
  }
  default:
    return 0;
  }
}
