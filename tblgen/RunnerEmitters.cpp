//===- RunnerEmitters.cpp - each backend's runners from ODS ---------------===//
//
// -gen-cpu-runners and -gen-cuda-runners: which function of the backend
// runs each opcode (the op's cpuRunner and cudaRunner), as macros the
// backend defines to declare the functions and fill its table. An op that
// names no runner does not build, so every backend runs every opcode.
//
//===----------------------------------------------------------------------===//

#include "tblgen/OpRecords.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TableGen/TableGenBackend.h"

using namespace llvm;
using namespace twill::tblgen;

static void emitRunners(const RecordKeeper &records, raw_ostream &os,
                        Runner OpRecord::*backend, StringRef name) {
  emitSourceFileHeader(
      ("The " + name + " backend's runner of each opcode").str(), os, records);
  std::vector<OpRecord> ops = readExecutableOps(records);
  SetVector<StringRef> functions;
  for (const OpRecord &op : ops)
    if (!(op.*backend).function.empty())
      functions.insert((op.*backend).function);
  os << "// TWILL_RUNNER_FUNCTION(function): each runner once.\n"
        "#ifdef TWILL_RUNNER_FUNCTION\n";
  for (StringRef function : functions)
    os << "TWILL_RUNNER_FUNCTION(" << function << ")\n";
  os << "#undef TWILL_RUNNER_FUNCTION\n#endif\n\n"
        "// TWILL_RUNNER(opcode, function, bf16): `function` runs `opcode`, "
        "on\n// bf16 values as stored where `bf16`.\n"
        "#ifdef TWILL_RUNNER\n";
  for (const OpRecord &op : ops)
    if (!(op.*backend).function.empty())
      os << "TWILL_RUNNER(" << op.opcodeName << ", " << (op.*backend).function
         << ", " << ((op.*backend).bf16 ? "true" : "false") << ")\n";
  os << "#undef TWILL_RUNNER\n#endif\n\n"
        "// TWILL_RUN_BY_LOOP(opcode): no runner; the run loop runs it.\n"
        "#ifdef TWILL_RUN_BY_LOOP\n";
  for (const OpRecord &op : ops)
    if ((op.*backend).function.empty())
      os << "TWILL_RUN_BY_LOOP(" << op.opcodeName << ")\n";
  os << "#undef TWILL_RUN_BY_LOOP\n#endif\n";
}

static void emitCpuRunners(const RecordKeeper &records, raw_ostream &os) {
  emitRunners(records, os, &OpRecord::cpu, "cpu");
}
static void emitCudaRunners(const RecordKeeper &records, raw_ostream &os) {
  emitRunners(records, os, &OpRecord::cuda, "cuda");
}

static TableGen::Emitter::Opt
    cpuRunners("gen-cpu-runners", emitCpuRunners,
               "the cpu backend's runner of each opcode");
static TableGen::Emitter::Opt
    cudaRunners("gen-cuda-runners", emitCudaRunners,
                "the cuda backend's runner of each opcode");
