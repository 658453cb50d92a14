//===- CudaBackend.cpp - runs an Executable on a GPU ----------------------===//
//
// Every buffer lives in device memory; instructions run in order on the
// compute stream, each through its runner (CudaOps.h: cuBLASLt for
// matmuls, the kernels of Cuda*Kernels.cu for the rest); NCCL
// collectives run on a communication stream, started by an event once
// their inputs are written; the compute stream waits for each (its own
// event) at its wait, right after a blocking one, so no collective's result
// is read unwaited and compute runs while a started one is in flight.
// Shapes are checked on the host with the cpu backend's decoders before
// anything is launched.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/Backend.h"

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/cuda/CudaDevice.h"
#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/cuda/CudaOps.h"
#include "runtime/backend/cuda/CudaStartup.h"
#include "runtime/backend/cuda/NcclComm.h"
#include "runtime/executable/Opcodes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thread>

using namespace twill;
using namespace twill::cuda;

namespace {

class CudaBackend : public Backend {
public:
  CudaBackend(BufferSet &host, Communicator *comm) : host(host), comm(comm) {}
  ~CudaBackend() override;
  llvm::Error initialise();

  llvm::StringRef name() const override { return "cuda"; }
  llvm::Error run(const EntryPoint &entry,
                  llvm::ArrayRef<WriteBack> writeBacks) override;
  llvm::Error upload(llvm::ArrayRef<int> ids) override;
  llvm::Error download(llvm::ArrayRef<int> ids) override;
  llvm::Error usable() override;
  std::string memoryReport() const override;
  PeakMemory peakMemory() const override {
    return {peakDeviceUsed, "GPU memory in use"};
  }

private:
  /// The GPU of this rank (by its place on its node), and the settings
  /// read from the environment.
  llvm::Error selectDevice();
  /// Streams, events, cuBLAS and cuBLASLt, the matmul workspace and the
  /// kernels' error flag.
  llvm::Error createLibraries();
  /// The memory plan's arenas and every other buffer's memory.
  llvm::Error allocateBuffers();
  /// `bytes` of zeroed device memory of the backend's own, for `what`.
  llvm::Error allocate(size_t bytes, const llvm::Twine &what, void *&pointer);
  /// Memory for the values `entry` computes for the host to read, at the
  /// first run that computes them: a training run never holds the forward
  /// pass's logits.
  llvm::Error holdHostReadValues(const EntryPoint &entry);
  llvm::Error runKernel(const Kernel &kernel, const Instruction &instruction);
  llvm::Error runInstructions(const EntryPoint &entry);
  /// Waits for the work queued on `streams`; with NCCL, no longer than the
  /// collective timeout (past it, or at an error NCCL reports, its
  /// communicators are aborted and the wait fails).
  llvm::Error waitFor(llvm::ArrayRef<cudaStream_t> streams,
                      const llvm::Twine &what);
  /// After a run: its timeline into the profiler, from `hostStart` (the
  /// host's clock when the idle GPU got the run's first event).
  llvm::Error recordTimeline(const EntryPoint &entry, double hostStart);
  /// Samples the device's memory in use (every process's, as
  /// cudaMemGetInfo sees it) after a run.
  void sampleDeviceMemory();

  BufferSet &host;
  Communicator *comm;
  Device device;
  std::vector<void *> memory; // where each buffer is
  std::vector<void *> owned;  // what was allocated
  void *hostArena = nullptr;  // pinned, for the offloaded values
  size_t plannedBytes = 0;    // the buffers' memory, as the plan lays it out
  size_t peakDeviceUsed = 0;  // cudaMemGetInfo's total - free, at most
  /// Under CUDA_LAUNCH_BLOCKING=1 (debugging), each instruction's work is
  /// waited for before the next is queued, so a kernel's fault (an illegal
  /// address) fails the instruction that made it, not a later one.
  bool waitEachInstruction = false;
};

} // namespace

const cuda::Kernels &cuda::kernelTable() {
  static const Kernels table = [] {
    Kernels table;
#define TWILL_RUNNER(opcode, function, bf16)                                   \
  table.add(opcode, {function, bf16});
#include "runtime/backend/cuda/CudaRunners.inc"
    return table;
  }();
  return table;
}

llvm::Error CudaBackend::selectDevice() {
  int devices = 0;
  DeviceCount count = countDevices(devices);
  if (count.verdict == DeviceCount::NoGpu)
    return llvm::make_error<NoGpuError>(count.message);
  if (count.verdict == DeviceCount::Broken)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   count.message);
  // One GPU per rank of a node, by the rank's place on its node: the
  // launcher may place ranks round-robin, so the world rank would give two
  // ranks of a node one GPU.
  int local = Communicator::rankOnThisNode();
  if (auto error = checkCuda(cudaSetDevice(local % devices), "cudaSetDevice"))
    return error;
  const char *blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
  waitEachInstruction = blocking && std::strcmp(blocking, "1") == 0;
  // Attention through cuDNN's fused kernels where they take the shape (the
  // default); where Twill maps a shape onto them, theirs or an error (what
  // proves a shape ran fused); or the chunked kernel everywhere: the
  // reference, and what a cuDNN that fails on this machine is set aside for.
  if (const char *attention = std::getenv("TWILL_CUDA_ATTENTION")) {
    using Kernel = Device::AttentionKernel;
    std::optional<Kernel> kernel =
        llvm::StringSwitch<std::optional<Kernel>>(attention)
            .Case("auto", Kernel::Auto)
            .Case("fused", Kernel::Fused)
            .Case("chunked", Kernel::Chunked)
            .Default(std::nullopt);
    if (!kernel)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::Twine("TWILL_CUDA_ATTENTION is '") + attention +
              "': auto (cuDNN's fused attention where it takes the shape, "
              "else the chunked kernel; the default), fused (cuDNN's for "
              "every shape it is mapped to, a refusal an error) or chunked "
              "(the chunked kernel everywhere)");
    device.attentionKernel = *kernel;
  }
  return llvm::Error::success();
}

llvm::Error CudaBackend::createLibraries() {
  for (cudaStream_t *stream :
       {&device.stream, &device.commStream, &device.copyStream})
    if (auto error = checkCuda(cudaStreamCreate(stream), "cudaStreamCreate"))
      return error;
  if (auto error = checkCuda(
          cudaEventCreateWithFlags(&device.inputsReady, cudaEventDisableTiming),
          "cudaEventCreate"))
    return error;
  if (auto error = checkBlas(cublasCreate(&device.blas), "cublasCreate"))
    return error;
  if (auto error = checkBlas(cublasSetStream(device.blas, device.stream),
                             "cublasSetStream"))
    return error;
  if (auto error = checkBlas(cublasLtCreate(&device.lt), "cublasLtCreate"))
    return error;
  if (auto error = checkCuda(
          cudaMalloc(&device.matmulWorkspace, Device::kMatmulWorkspaceBytes),
          "cudaMalloc"))
    return error;
  device.allocated(Device::kMatmulWorkspaceBytes);
  if (auto error =
          checkCuda(cudaMalloc(&device.errors, sizeof(int)), "cudaMalloc"))
    return error;
  if (auto error =
          checkCuda(cudaMemset(device.errors, 0, sizeof(int)), "cudaMemset"))
    return error;
  // Pinned, so that copying the flags back queues like any other work: a
  // copy into pageable memory would block the host until the stream ends.
  if (auto error = checkCuda(cudaMallocHost(&device.errorsOnHost, sizeof(int)),
                             "cudaMallocHost"))
    return error;
  return llvm::Error::success();
}

llvm::Error CudaBackend::allocateBuffers() {
  // The memory plan's values share one arena; the rest have their own
  // (the host-read values' from the first run that computes them).
  const Executable &executable = host.executable();
  const MemoryPlan &plan = host.plan();
  void *arena = nullptr;
  if (plan.arenaBytes)
    if (auto error = allocate(plan.arenaBytes, "the computed values", arena))
      return error;
  // The offloaded values' arena: pinned host memory, which the GPU copies
  // to and from by DMA.
  if (plan.hostArenaBytes)
    if (auto error = checkCuda(cudaMallocHost(&hostArena, plan.hostArenaBytes),
                               "cudaMallocHost"))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "cannot pin " + std::to_string(plan.hostArenaBytes) +
              " bytes of host memory for the offloaded activations (lower "
              "parallel.offload_layers, or set "
              "parallel.offload_activations=false): " +
              llvm::toString(std::move(error)));
  // Buffers by name where they have one, for an allocation that fails.
  llvm::DenseMap<int, std::string> names;
  for (const Parameter &parameter : executable.parameters())
    names[parameter.buffer()] = "parameter " + parameter.name();
  for (const State &state : executable.states())
    names[state.buffer()] = "state " + state.name();
  for (const Input &input : executable.inputs())
    names[input.buffer()] = "input " + input.name();
  for (int id = 0; id < executable.buffers_size(); ++id) {
    int64_t offset = plan.offsets.empty() ? -1 : plan.offsets[id];
    void *pointer = nullptr;
    if (offset >= 0)
      pointer = static_cast<char *>(plan.inHostArena[id] ? hostArena : arena) +
                offset;
    else if (executable.buffers(id).host_read())
      pointer = nullptr;
    else if (auto error = allocate(
                 executable.buffers(id).size_bytes(),
                 names.count(id) ? names[id] : "buffer " + std::to_string(id),
                 pointer))
      return error;
    memory.push_back(pointer);
  }
  return llvm::Error::success();
}

llvm::Error CudaBackend::initialise() {
  if (llvm::Error error = selectDevice())
    return error;
  if (llvm::Error error = createLibraries())
    return error;
  if (llvm::Error error = allocateBuffers())
    return error;
  // NCCL wherever the mesh has an axis of several ranks: across the ranks
  // of a launch, or for a process standing in for one rank (its
  // communicators then hold it alone, as the Communicator's axes do).
  const Executable &executable = host.executable();
  bool meshOfSeveral = executable.meshes_size() &&
                       llvm::any_of(executable.meshes(0).shape(),
                                    [](int64_t size) { return size > 1; });
  if (comm && meshOfSeveral)
    device.makeNccl = [this] {
      return NcclComm::create(*comm, host.executable().meshes(0));
    };
  return llvm::Error::success();
}

llvm::Error CudaBackend::allocate(size_t bytes, const llvm::Twine &what,
                                  void *&pointer) {
  if (auto error = checkCuda(cudaMalloc(&pointer, std::max<size_t>(bytes, 1)),
                             "cudaMalloc"))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "cannot hold " + what + " (" + std::to_string(bytes) +
            " bytes) on the GPU: " + llvm::toString(std::move(error)) +
            " (twillc --report says what a rank needs; less: a shorter "
            "train.seq_len or smaller train.batch_size, "
            "parallel.memory_budget_gb, activation checkpointing or offload, "
            "or a larger parallel.tp)");
  owned.push_back(pointer);
  plannedBytes += bytes;
  device.allocated(bytes);
  return checkCuda(cudaMemset(pointer, 0, bytes), "cudaMemset");
}

llvm::Error CudaBackend::holdHostReadValues(const EntryPoint &entry) {
  const Executable &executable = host.executable();
  for (const Instruction &instruction : entry.instructions())
    for (int id : instruction.results())
      if (!memory[id] && executable.buffers(id).host_read())
        if (auto error = allocate(executable.buffers(id).size_bytes(),
                                  "the values " + entry.name() +
                                      " computes for the host to read",
                                  memory[id]))
          return error;
  return llvm::Error::success();
}

CudaBackend::~CudaBackend() {
  // Nothing queued may outlive the memory it uses (a run that failed part
  // way leaves work in flight).
  cudaDeviceSynchronize();
  for (void *pointer : owned)
    cudaFree(pointer);
  if (hostArena)
    cudaFreeHost(hostArena);
  for (Device::Pool *pool :
       {&device.scratch, &device.widened, &device.flightStaging})
    for (auto &[pointer, size] : *pool)
      if (pointer)
        cudaFree(pointer);
  for (auto &[key, table] : device.ropeTables)
    cudaFree(table);
  for (cudaEvent_t event : device.timeline.pool)
    cudaEventDestroy(event);
  if (device.errors)
    cudaFree(device.errors);
  if (device.errorsOnHost)
    cudaFreeHost(device.errorsOnHost);
  if (device.blas)
    cublasDestroy(device.blas);
  if (device.lt)
    cublasLtDestroy(device.lt);
  if (device.matmulWorkspace)
    cudaFree(device.matmulWorkspace);
  device.ncclComms.reset();
  device.fusedAttention.reset(); // cuDNN's handle, before its stream
  device.forgetFlights();
  for (cudaEvent_t event : device.spareEvents)
    cudaEventDestroy(event);
  if (device.inputsReady)
    cudaEventDestroy(device.inputsReady);
  for (cudaStream_t stream :
       {device.stream, device.commStream, device.copyStream})
    if (stream)
      cudaStreamDestroy(stream);
}

/// Runs `kernel` on the instruction; a kernel without a bf16 form gets
/// fp32 copies of its bf16 values (in Device::widened) and its bf16 results
/// are rounded once after it.
llvm::Error CudaBackend::runKernel(const Kernel &kernel,
                                   const Instruction &instruction) {
  const Executable &executable = host.executable();
  BF16Buffers bf16;
  if (!kernel.bf16)
    bf16 = bf16Buffers(executable, instruction);
  llvm::SmallDenseMap<int, float *, 4> wide;
  auto widen = [&](int id) -> llvm::Error {
    llvm::Expected<void *> space =
        device.space(device.widened, wide.size(),
                     numElements(executable.buffers(id)) * sizeof(float));
    if (!space)
      return space.takeError();
    wide[id] = static_cast<float *>(*space);
    return llvm::Error::success();
  };
  for (int id : bf16.read) {
    if (auto error = widen(id))
      return error;
    cuda::cast(memory[id], cuda::CastSource::BF16, wide[id], /*toBF16=*/false,
               numElements(executable.buffers(id)), device.stream);
  }
  for (int id : bf16.written)
    if (auto error = widen(id))
      return error;
  if (auto error = kernel.run(InstructionView(
                                  executable, instruction,
                                  [&](int id) -> void * {
                                    auto found = wide.find(id);
                                    if (found == wide.end())
                                      return memory[id];
                                    return found->second;
                                  },
                                  comm, /*widened=*/!bf16.empty()),
                              device))
    return error;
  for (int id : bf16.written)
    cuda::cast(wide[id], cuda::CastSource::F32, memory[id], /*toBF16=*/true,
               numElements(executable.buffers(id)), device.stream);
  return llvm::Error::success();
}

/// Queues every instruction of `entry` on the streams, each between two
/// timing events when profiling.
llvm::Error CudaBackend::runInstructions(const EntryPoint &entry) {
  return forEachInstruction(
      entry, [&](int index, const Instruction &instruction) -> llvm::Error {
        const Kernel *kernel = kernelTable().find(instruction.opcode());
        if (!kernel)
          return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                         "the cuda backend has no kernel for " +
                                             opcodeName(instruction.opcode()));
        device.timeline.instruction = index;
        llvm::Expected<cudaEvent_t> start =
            device.timeline.record(device.stream);
        if (!start)
          return start.takeError();
        if (auto error = runKernel(*kernel, instruction))
          return error;
        if (auto error = checkCuda(cudaGetLastError(), "a kernel launch"))
          return error;
        if (waitEachInstruction)
          if (auto error = waitFor(
                  {device.stream, device.commStream, device.copyStream},
                  llvm::Twine(opcodeName(instruction.opcode())) + "'s work"))
            return error;
        llvm::Expected<cudaEvent_t> end = device.timeline.record(device.stream);
        if (!end)
          return end.takeError();
        device.timeline.add(Profiler::Compute, *start, *end);
        return llvm::Error::success();
      });
}

llvm::Error CudaBackend::recordTimeline(const EntryPoint &entry,
                                        double hostStart) {
  cudaEvent_t base = device.timeline.base;
  for (const Timeline::Mark &mark : device.timeline.marks) {
    float start = 0, end = 0;
    if (auto error = checkCuda(cudaEventElapsedTime(&start, base, mark.start),
                               "cudaEventElapsedTime"))
      return error;
    if (auto error = checkCuda(cudaEventElapsedTime(&end, base, mark.end),
                               "cudaEventElapsedTime"))
      return error;
    profiler->record({mark.track, &entry, mark.instruction,
                      hostStart + start / 1e3, hostStart + end / 1e3});
  }
  return llvm::Error::success();
}

void CudaBackend::sampleDeviceMemory() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess)
    peakDeviceUsed = std::max(peakDeviceUsed, total - free);
}

std::string CudaBackend::memoryReport() const {
  constexpr double GiB = 1 << 30;
  return llvm::formatv(
      "cuda: device memory in use at most {0:f2} GiB (cudaMemGetInfo after "
      "each run, every process on the GPU); Twill's own allocations at most "
      "{1:f2} GiB: {2:f2} GiB of buffers as planned, the rest scratch and "
      "the matmul workspace",
      peakDeviceUsed / GiB, device.peakAllocatedBytes / GiB,
      plannedBytes / GiB);
}

llvm::Error CudaBackend::waitFor(llvm::ArrayRef<cudaStream_t> streams,
                                 const llvm::Twine &what) {
  auto began = std::chrono::steady_clock::now();
  double limit = comm ? comm->timeout() : 600;
  for (cudaStream_t stream : streams) {
    while (device.ncclComms) {
      cudaError_t state = cudaStreamQuery(stream);
      if (state != cudaErrorNotReady)
        break;
      // A collective whose peer failed or never arrives would hold the
      // stream forever: NCCL's error, or the timeout, ends the wait.
      if (auto error = device.ncclComms->asyncError())
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            what + " on the GPU: " + llvm::toString(std::move(error)) +
                "; its NCCL communicators are aborted");
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        began)
              .count() > limit) {
        device.ncclComms->abort();
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            llvm::formatv("{0} did not finish on the GPU within {1} s "
                          "(parallel.collective_timeout_s): a collective "
                          "waits for a rank that does not arrive; its NCCL "
                          "communicators are aborted",
                          what.str(), limit));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (cudaError_t state = cudaStreamSynchronize(stream)) {
      llvm::Error error = checkCuda(state, what + " on the GPU");
      if (waitEachInstruction)
        return error;
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::toString(std::move(error)) +
              " (a kernel's fault shows at the next wait; with "
              "CUDA_LAUNCH_BLOCKING=1 the instruction that made it fails)");
    }
  }
  return llvm::Error::success();
}

llvm::Error CudaBackend::run(const EntryPoint &entry,
                             llvm::ArrayRef<WriteBack> writeBacks) {
  const Executable &executable = host.executable();
  // Every run ends with the GPU idle, so its first event runs at once.
  double hostStart = profiler ? profiler->now() : 0;
  if (auto error = holdHostReadValues(entry))
    return error;
  if (auto error = device.timeline.restart(profiler != nullptr, device.stream))
    return error;
  if (auto error = runInstructions(entry)) {
    // What was queued before the failure finishes (within the timeout), and
    // any flag it raised is dropped: the next run starts clean and idle.
    llvm::Error settled =
        waitFor({device.commStream, device.copyStream, device.stream},
                entry.name() + "'s work before the failure");
    device.forgetFlights();
    if (!settled)
      settled =
          checkCuda(cudaMemset(device.errors, 0, sizeof(int)), "cudaMemset");
    if (settled)
      return llvm::joinErrors(std::move(error), std::move(settled));
    return error;
  }
  // What only the device saw (a token outside the vocabulary) fails the
  // run before any parameter or state is written back, as on the cpu; the
  // flags are cleared for the next run.
  if (auto error = checkCuda(
          cudaMemcpyAsync(device.errorsOnHost, device.errors, sizeof(int),
                          cudaMemcpyDeviceToHost, device.stream),
          "cudaMemcpyAsync"))
    return error;
  if (auto error = waitFor({device.stream}, entry.name()))
    return error;
  if (int errors = *device.errorsOnHost) {
    if (auto error =
            checkCuda(cudaMemset(device.errors, 0, sizeof(int)), "cudaMemset"))
      return error;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        entry.name() + (errors & cuda::kTokenOutsideVocab
                            ? ": a token id is outside the vocabulary"
                            : ": a label is outside the vocabulary"));
  }
  for (auto [source, target] : writeBacks)
    if (auto error =
            checkCuda(cudaMemcpyAsync(memory[target], memory[source],
                                      executable.buffers(target).size_bytes(),
                                      cudaMemcpyDeviceToDevice, device.stream),
                      "cudaMemcpyAsync"))
      return error;
  if (auto error = checkCuda(cudaStreamSynchronize(device.stream),
                             entry.name() + " on the GPU"))
    return error;
  sampleDeviceMemory();
  if (!profiler)
    return llvm::Error::success();
  if (auto error = recordTimeline(entry, hostStart))
    return error;
  profiler->record(
      {Profiler::EntryPoints, &entry, -1, hostStart, profiler->now()});
  return llvm::Error::success();
}

llvm::Error CudaBackend::upload(llvm::ArrayRef<int> ids) {
  for (int id : ids)
    if (host.info(id).size_bytes() == 0)
      continue;
    else if (auto error = checkCuda(cudaMemcpyAsync(memory[id], host.data(id),
                                                    host.info(id).size_bytes(),
                                                    cudaMemcpyHostToDevice,
                                                    device.stream),
                                    "cudaMemcpyAsync"))
      return error;
  return checkCuda(cudaStreamSynchronize(device.stream),
                   "cudaStreamSynchronize");
}

llvm::Error CudaBackend::usable() {
  // A device fault (an illegal address, a trap) leaves the context unable
  // to run anything more, and every later call returns its error.
  return checkCuda(cudaDeviceSynchronize(), "the GPU");
}

llvm::Error CudaBackend::download(llvm::ArrayRef<int> ids) {
  for (int id : ids)
    if (host.info(id).size_bytes() == 0)
      continue;
    else if (!memory[id]) // a host-read value no run has computed yet
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "buffer " + std::to_string(id) +
                                         " was never computed");
    else if (auto error = checkCuda(cudaMemcpyAsync(host.data(id), memory[id],
                                                    host.info(id).size_bytes(),
                                                    cudaMemcpyDeviceToHost,
                                                    device.stream),
                                    "cudaMemcpyAsync"))
      return error;
  return checkCuda(cudaStreamSynchronize(device.stream),
                   "cudaStreamSynchronize");
}

llvm::Expected<std::unique_ptr<Backend>>
twill::createCudaBackend(BufferSet &buffers, Communicator *comm) {
  auto backend = std::make_unique<CudaBackend>(buffers, comm);
  if (llvm::Error error = backend->initialise())
    return std::move(error);
  return std::unique_ptr<Backend>(std::move(backend));
}
