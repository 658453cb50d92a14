//===- CaseBuilder.h - how twill-conformance's cases are made ---*- C++ -*-===//
//
// The tolerances, the fills and the builder the case files share, and the
// case files' families (one file each, as the backends' runners are).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_TEST_CONFORMANCE_CASEBUILDER_H
#define TWILL_TEST_CONFORMANCE_CASEBUILDER_H

#include "test/conformance/ConformanceSuite.h"

#include "runtime/executable/Executable.h"
#include "runtime/executable/Opcodes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <string>

namespace twill::conformance {

// Tolerances: the largest |cuda - cpu| over the largest |cpu| of a result.
// Copies, casts and integer arithmetic must agree bit for bit (kExact).
// fp32 kernels agree to a few ulps of the largest term: libraries sum in
// another order, and exp or rsqrt differ in their last bit (kSummed). A
// bf16 result is rounded once from fp32, so two fp32 values a hair apart
// may land one bf16 step (2^-8 of the value) apart (kBF16); attention in
// bf16 also rounds its probabilities for the second GEMM (kBF16Attention).
inline constexpr double kExact = 0, kSummed = 1e-5, kBF16 = 1e-2,
                 kBF16Attention = 3e-2;

inline const char *dtypeName(DType dtype) {
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
  case U8:
    return "u8";
  }
  return "?";
}

using Shape = std::vector<int64_t>;

inline Fill normal(double sigma = 1) { return {Fill::Normal, sigma}; }
inline Fill uniform(double low, double high) { return {Fill::Uniform, low, high}; }
inline Fill integers(int64_t low, int64_t high) {
  return {Fill::Integers, double(low), double(high)};
}
inline Fill labels(int64_t vocab) { return {Fill::Labels, double(vocab), -100}; }
inline Fill positions(int64_t seq) { return {Fill::Positions, 0, double(seq)}; }
inline Fill segments(int64_t seq) { return {Fill::Segments, 0, double(seq)}; }
inline Fill value(double v) { return {Fill::Value, v}; }
inline Fill fp8Blocks(int64_t block) {
  return {Fill::Fp8Blocks, double(block)};
}

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
    int id = filled(dtype, shape, fill);
    instruction.add_operands(id);
    return id;
  }
  /// A filled value only the instructions run before the case's read
  /// (before()).
  int filled(DType dtype, Shape shape, Fill fill = normal()) {
    int id = buffer(dtype, shape, shapes);
    Input &input = *suite.executable.add_inputs();
    input.set_name(llvm::formatv("case {0} input {1}", suite.cases.size(),
                                 current.operands.size())
                       .str());
    input.set_buffer(id);
    current.operands.push_back({id, fill});
    return id;
  }
  int result(DType dtype, Shape shape) {
    int id = buffer(dtype, shape, resultShapes);
    instruction.add_results(id);
    current.results.push_back(id);
    return id;
  }
  /// An operand that an instruction run before the case's computes
  /// (before()): neither filled nor compared.
  int computed(DType dtype, Shape shape) {
    int id = scratch(dtype, shape);
    instruction.add_operands(id);
    return id;
  }
  /// A value only an instruction run before the case's writes.
  int scratch(DType dtype, Shape shape) { return buffer(dtype, shape, shapes); }
  /// An instruction the case's entry point runs first, to compute its
  /// computed() operands from its filled ones (each backend its own).
  CaseBuilder &before(Instruction first) {
    prelude.push_back(std::move(first));
    return *this;
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
    for (const Instruction &first : prelude)
      *entry.add_instructions() = first;
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
  std::vector<Instruction> prelude;
  Instruction instruction;
  std::string shapes, resultShapes;
};

inline constexpr DType kFloats[] = {F32, BF16};

/// The cases of each family, in the order of the suite (a case's number,
/// --first=N, counts in it).
void collectiveCases(Suite &suite);     // CollectiveCases.cpp
void embeddingCases(Suite &suite);      // LayerCases.cpp
void matmulCases(Suite &suite);         // MatmulCases.cpp
void normCases(Suite &suite);           // LayerCases.cpp
void ropeCases(Suite &suite);           // LayerCases.cpp
void attentionCases(Suite &suite);      // AttentionCases.cpp
void elementwiseCases(Suite &suite);    // ElementwiseCases.cpp
void crossEntropyCases(Suite &suite);   // CrossEntropyCases.cpp
void linearCrossEntropyCases(Suite &suite); // CrossEntropyCases.cpp
void dpoLossCases(Suite &suite);            // CrossEntropyCases.cpp
void sequenceLossCases(Suite &suite);       // CrossEntropyCases.cpp
void layoutCases(Suite &suite);         // ElementwiseCases.cpp
void embeddingGradCases(Suite &suite);  // LayerCases.cpp
void optimizerCases(Suite &suite);      // OptimizerCases.cpp
void routeCases(Suite &suite);          // MoeCases.cpp
void dispatchCases(Suite &suite);       // MoeCases.cpp
void groupedMatmulCases(Suite &suite);  // MoeCases.cpp
void loadBalancingCases(Suite &suite);  // MoeCases.cpp

} // namespace twill::conformance

#endif // TWILL_TEST_CONFORMANCE_CASEBUILDER_H
