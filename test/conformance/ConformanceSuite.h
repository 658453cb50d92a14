//===- ConformanceSuite.h - one-instruction programs for every op -*- C++ -*-===//
//
// twill-conformance's cases: each is one instruction, its own entry point
// of a single Executable, with operands the harness fills with random
// values and results it compares between two backends. Every instruction
// kind (every Opcode) has cases, in fp32 and bf16 where it takes
// floats, at sizes that are multiples of nothing in particular.
//
// The program's mesh has three axes for the one process that runs it:
// `one` (a single rank: the collectives run, through NCCL on a GPU), and
// `mid` and `last`, three ranks each, on which this process stands in for
// the middle and the last rank (Communicator::standIn): sharded kernels see
// a block that starts past zero, or the padded last block.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_TEST_CONFORMANCE_CONFORMANCESUITE_H
#define TWILL_TEST_CONFORMANCE_CONFORMANCESUITE_H

#include "proto/executable.pb.h"

#include <string>
#include <vector>

namespace twill::conformance {

/// The stand-in mesh: axis names, sizes and this process's coordinates.
inline const std::vector<std::string> kMeshAxes = {"one", "mid", "last"};
inline const std::vector<int64_t> kMeshShape = {1, 3, 3};
inline const std::vector<int64_t> kMeshCoordinates = {0, 1, 2};

/// How an operand is filled: random values of a distribution, drawn alike
/// for both backends.
struct Fill {
  enum Kind {
    Normal,    // N(0, a^2)
    Uniform,   // uniform in [a, b): positive denominators, second moments
    Integers,  // integers uniform in [a, b)
    Labels,    // integers in [0, a), about a fifth of them b (ignored)
    Positions, // rows of b positions, restarting at 0 at random documents
    Segments,  // rows of b document ids, a new one at random boundaries
    Value,     // every element a
    // Rows in blocks of a: e4m3 values times the block's power of two, the
    // first one +-448 times it (what round_to_fp8 leaves as it is).
    Fp8Blocks,
  } kind = Normal;
  double a = 1, b = 0;
};

struct Case {
  Opcode opcode = OPCODE_UNSPECIFIED;
  std::string dtype; // the float type it computes in ("f32", "bf16", "i64")
  std::string shapes, note;
  /// The largest |test - reference| allowed, over the largest |reference|
  /// of the result.
  double tolerance = 0;
  /// Both backends must refuse the instruction (a token outside the vocab,
  /// a gather over absent ranks): nothing to compare.
  bool refused = false;
  int entry = 0; // its entry point
  std::vector<std::pair<int, Fill>> operands;
  std::vector<int> results;
};

struct Suite {
  Executable executable;
  std::vector<Case> cases;
};

/// Every case, in one Executable whose inputs are the cases' operands.
Suite conformanceSuite();

} // namespace twill::conformance

#endif // TWILL_TEST_CONFORMANCE_CONFORMANCESUITE_H
