//===- CpuBackend.cpp - runs an Executable on the CPU ---------------------===//
//
// The run loop, and the table of every family's runners (CpuOps.h, in the
// families of the cuda backend's); collectives through CpuCollectives.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuBackend.h"

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/cpu/CpuCollectives.h"
#include "runtime/backend/cpu/CpuOps.h"
#include "runtime/backend/cpu/WideCopies.h"
#include "runtime/executable/Opcodes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <omp.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

using namespace twill;

const cpu::Kernels &cpu::kernelTable() {
  static const Kernels table = [] {
    Kernels table;
#define TWILL_RUNNER(opcode, function, bf16) table.add(opcode, function);
#include "runtime/backend/cpu/CpuRunners.inc"
    return table;
  }();
  return table;
}

bool cpu::runByCollectives(Opcode opcode) {
  switch (opcode) {
#define TWILL_RUN_BY_LOOP(opcode) case opcode:
#include "runtime/backend/cpu/CpuRunners.inc"
    return true;
  default:
    return false;
  }
}

/// Runs `kernel` on fp32 copies of the instruction's bf16 values: every
/// kernel computes in fp32, and each bf16 result is rounded once.
static llvm::Error runWidened(cpu::Kernel kernel,
                              const Instruction &instruction,
                              BufferSet &buffers, Communicator *comm) {
  WideCopies wide(buffers, instruction);
  auto address = [&](int id) { return wide.address(id); };
  if (llvm::Error error =
          kernel(InstructionView(buffers.executable(), instruction, address,
                                 comm, /*widened=*/wide.any())))
    return error;
  for (int id : wide.bf16.written)
    wide.narrow(id);
  return llvm::Error::success();
}

/// Runs one instruction that is not a collective, its start or its wait.
static llvm::Error runKernel(const Instruction &instruction, BufferSet &buffers,
                             Communicator *comm) {
  const cpu::Kernel *kernel = cpu::kernelTable().find(instruction.opcode());
  if (!kernel)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the cpu backend has no kernel for " +
                                       opcodeName(instruction.opcode()));
  return runWidened(*kernel, instruction, buffers, comm);
}

Backend::PeakMemory CpuBackend::peakMemory() const {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return {uint64_t(usage.ru_maxrss) * 1024, "the process's resident set"};
}

llvm::Error CpuBackend::run(const EntryPoint &entry, BufferSet &buffers,
                            Communicator *comm, Profiler *profiler) {
  CpuCollectives collectives(buffers, comm);
  // When each collective in flight started, by its result, for the
  // profile: its span on the communication track runs to its wait.
  llvm::DenseMap<int, std::pair<int, double>> started;
  // The results of copies started (to or from the host arena): made at the
  // start, as a plain copy, so that their waits have nothing to do.
  llvm::DenseSet<int> copied;
  return forEachInstruction(
      entry, [&](int index, const Instruction &instruction) -> llvm::Error {
        Opcode opcode = instruction.opcode();
        double start = profiler ? profiler->now() : 0;
        llvm::Error error = llvm::Error::success();
        if (opcode == WAIT && instruction.operands_size() == 1 &&
            copied.erase(instruction.operands(0))) {
          // A copy's wait.
        } else if (cpu::runByCollectives(opcode)) {
          // The result in flight: a start's, or the one a wait ends.
          const auto &ids =
              opcode == WAIT ? instruction.operands() : instruction.results();
          if (ids.size() != 1)
            return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                           opcodeName(opcode) +
                                               ": needs one result in flight");
          int result = ids[0];
          if (opcode != WAIT) {
            error = collectives.start(instruction);
            if (profiler)
              started[result] = {index, start};
          }
          if (!error && !isStart(opcode))
            error = collectives.wait(result);
          if (profiler && !isStart(opcode)) {
            auto [first, since] = started.lookup(result);
            profiler->record({Profiler::Communication, &entry, first, since,
                              profiler->now()});
          }
        } else {
          error = runKernel(instruction, buffers, comm);
          if (!error && isStart(opcode))
            copied.insert(instruction.results(0));
        }
        if (!error)
          error = collectives.progress();
        if (profiler)
          profiler->record(
              {Profiler::Compute, &entry, index, start, profiler->now()});
        return error;
      });
}

llvm::Error CpuBackend::run(const EntryPoint &entry,
                            llvm::ArrayRef<WriteBack> writeBacks) {
  double start = profiler ? profiler->now() : 0;
  if (llvm::Error error = run(entry, buffers, comm, profiler))
    return error;
  for (auto [source, target] : writeBacks)
    std::memcpy(buffers.data(target), buffers.data(source),
                buffers.info(target).size_bytes());
  if (profiler)
    profiler->record(
        {Profiler::EntryPoints, &entry, -1, start, profiler->now()});
  return llvm::Error::success();
}

/// The threads of this rank's kernels and GEMMs (one OpenMP pool: oneDNN
/// runs on OpenMP too): OMP_NUM_THREADS if set; else the cores the
/// launcher bound this rank to; else the machine's cores shared among the
/// ranks on it, so that ranks never oversubscribe them.
static int threadsPerRank() {
  if (std::getenv("OMP_NUM_THREADS"))
    return omp_get_max_threads();
  cpu_set_t allowed;
  int usable = sched_getaffinity(0, sizeof(allowed), &allowed) == 0
                   ? CPU_COUNT(&allowed)
                   : int(sysconf(_SC_NPROCESSORS_ONLN));
  if (usable < sysconf(_SC_NPROCESSORS_ONLN))
    return std::max(usable, 1);
  return std::max(usable / Communicator::ranksOnThisNode(), 1);
}

void twill::useRankThreads() {
  static std::once_flag threadsSet;
  std::call_once(threadsSet, [] { omp_set_num_threads(threadsPerRank()); });
}

std::unique_ptr<Backend> twill::createCpuBackend(BufferSet &buffers,
                                                 Communicator *comm) {
  useRankThreads();
  return std::make_unique<CpuBackend>(buffers, comm);
}
