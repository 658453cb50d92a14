//===- CudaDevice.h - what the cuda backend's kernels share -----*- C++ -*-===//
//
// The streams, cuBLAS handle, NCCL communicators and scratch memory of one
// GPU, and the error checks of the CUDA calls that use them.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDADEVICE_H
#define TWILL_RUNTIME_BACKEND_CUDA_CUDADEVICE_H

#include "runtime/backend/cuda/NcclComm.h"
#include "runtime/profile/Profiler.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace twill {

class FusedAttention;

inline llvm::Error checkCuda(cudaError_t result, const llvm::Twine &call) {
  if (result == cudaSuccess)
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 call +
                                     " failed: " + cudaGetErrorString(result));
}

inline llvm::Error checkBlas(cublasStatus_t status, llvm::StringRef call) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      call + " failed: " + cublasGetStatusString(status));
}

/// CUDA events that time a run's work on both streams when profiling:
/// taken from a pool that every run reuses, read once the run has ended,
/// so timing never makes the host wait for the GPU.
struct Timeline {
  struct Mark {
    Profiler::Track track;
    int instruction;
    cudaEvent_t start, end;
  };
  bool enabled = false;
  int instruction = -1;       // the instruction being queued
  cudaEvent_t base = nullptr; // the run's start, which marks are timed from
  std::vector<Mark> marks;
  std::vector<cudaEvent_t> pool;
  size_t used = 0;

  /// Starts a run on `stream` (the pool's events are free again), timed or
  /// not.
  llvm::Error restart(bool timing, cudaStream_t stream) {
    enabled = timing;
    marks.clear();
    used = 0;
    llvm::Expected<cudaEvent_t> start = record(stream);
    if (!start)
      return start.takeError();
    base = *start;
    return llvm::Error::success();
  }
  /// An event recorded on `stream` now, or none when not timing.
  llvm::Expected<cudaEvent_t> record(cudaStream_t stream) {
    if (!enabled)
      return nullptr;
    if (used == pool.size()) {
      cudaEvent_t event = nullptr;
      if (auto error = checkCuda(cudaEventCreate(&event), "cudaEventCreate"))
        return std::move(error);
      pool.push_back(event);
    }
    cudaEvent_t event = pool[used++];
    if (auto error =
            checkCuda(cudaEventRecord(event, stream), "cudaEventRecord"))
      return std::move(error);
    return event;
  }
  /// The span between two recorded events, on `track`, for the current
  /// instruction.
  void add(Profiler::Track track, cudaEvent_t start, cudaEvent_t end) {
    if (enabled)
      marks.push_back({track, instruction, start, end});
  }
};

/// What the kernels of one run share.
struct Device {
  cudaStream_t stream = nullptr;     // compute
  cudaStream_t commStream = nullptr; // NCCL
  cudaStream_t copyStream = nullptr; // offload_start, reload_start
  cudaEvent_t inputsReady = nullptr;
  cublasHandle_t blas = nullptr; // attention's batched GEMMs
  cublasLtHandle_t lt = nullptr; // matmuls, with their epilogues
  static constexpr size_t kMatmulWorkspaceBytes = 32 << 20;
  void *matmulWorkspace = nullptr;
  /// cuBLASLt's choice per matmul problem (sizes, transposes, dtype).
  std::map<std::vector<int64_t>, cublasLtMatmulAlgo_t> matmulAlgorithms;
  /// The same for products of e4m3 codes; none where cuBLASLt has none
  /// (the weight is then formed in the compute dtype).
  std::map<std::vector<int64_t>, std::optional<cublasLtMatmulAlgo_t>>
      fp8Algorithms;
  int *errors = nullptr;       // ErrorBit flags raised by kernels
  int *errorsOnHost = nullptr; // pinned: where a run copies them back
  /// How NCCL's communicators are made, where the mesh has an axis of
  /// several ranks (none: NCCL is never needed).
  std::function<llvm::Expected<std::unique_ptr<NcclComm>>()> makeNccl;
  std::unique_ptr<NcclComm> ncclComms;
  std::string ncclFailure; // why making them failed, said again after
  using Pool = std::vector<std::pair<void *, size_t>>;
  Pool scratch; // kernels' own temporaries, reused between ops
  /// A collective in flight: the event its work on the communication
  /// stream ends with, and its slot in `flightStaging`.
  struct Flight {
    cudaEvent_t done = nullptr;
    size_t slot = 0;
  };
  std::map<int, Flight> inFlight; // by the buffer each writes
  std::vector<cudaEvent_t> spareEvents;
  Pool flightStaging; // each collective in flight's own staging memory
  Pool widened; // fp32 copies of bf16 values, for kernels without bf16 form
  /// Rope frequency tables on the device, by (head dim, theta, scaling):
  /// made once, not at every rope.
  std::map<std::vector<double>, double *> ropeTables;
  // cuDNN's fused attention (FusedAttention.h), made at its first use.
  std::shared_ptr<FusedAttention> fusedAttention;
  /// Which attention kernel runs a shape (TWILL_CUDA_ATTENTION): cuDNN's
  /// where it takes it, else the chunked kernel with a note (auto, the
  /// default); cuDNN's wherever Twill maps the shape onto it, a refusal
  /// being an error (fused); the chunked kernel everywhere (chunked).
  enum class AttentionKernel { Auto, Fused, Chunked };
  AttentionKernel attentionKernel = AttentionKernel::Auto;
  /// The shapes whose chunked fallback stderr has named (once each).
  std::set<std::string> namedFallbacks;
  Timeline timeline;
  /// Device memory the backend holds (buffers, scratch, workspace), now
  /// and at most.
  size_t allocatedBytes = 0, peakAllocatedBytes = 0;

  void allocated(size_t bytes) {
    allocatedBytes += bytes;
    peakAllocatedBytes = std::max(peakAllocatedBytes, allocatedBytes);
  }

  /// NCCL's communicators, made at the first collective that needs them:
  /// a run without collectives never starts NCCL, and a failure to start it
  /// fails the collectives alone. Every rank reaches its first collective
  /// at the same instruction, so they start NCCL together.
  llvm::Expected<NcclComm *> nccl() {
    if (!ncclComms && ncclFailure.empty()) {
      if (!makeNccl)
        ncclFailure = "needs NCCL, and the program's mesh has one rank";
      else if (auto made = makeNccl())
        ncclComms = std::move(*made);
      else
        ncclFailure = llvm::toString(made.takeError());
    }
    if (!ncclComms)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     ncclFailure);
    return ncclComms.get();
  }

  /// A staging slot that no collective in flight holds.
  size_t freeFlightSlot() const {
    for (size_t slot = 0;; ++slot)
      if (std::none_of(
              inFlight.begin(), inFlight.end(),
              [&](const auto &flight) { return flight.second.slot == slot; }))
        return slot;
  }

  /// Queues `collective` on the communication stream (or `on`: a copy's),
  /// to start once the compute stream has written its inputs. It is in
  /// flight, writing buffer `result` (and using staging slot `slot`), until
  /// land(result).
  llvm::Error launch(int result, size_t slot,
                     llvm::function_ref<llvm::Error(cudaStream_t)> collective,
                     cudaStream_t on = nullptr) {
    if (!on)
      on = commStream;
    if (auto error =
            checkCuda(cudaEventRecord(inputsReady, stream), "cudaEventRecord"))
      return error;
    if (auto error = checkCuda(cudaStreamWaitEvent(on, inputsReady),
                               "cudaStreamWaitEvent"))
      return error;
    llvm::Expected<cudaEvent_t> start = timeline.record(on);
    if (!start)
      return start.takeError();
    if (auto error = collective(on))
      return error;
    llvm::Expected<cudaEvent_t> end = timeline.record(on);
    if (!end)
      return end.takeError();
    timeline.add(Profiler::Communication, *start, *end);
    Flight flight{nullptr, slot};
    if (!spareEvents.empty()) {
      flight.done = spareEvents.back();
      spareEvents.pop_back();
    } else if (auto error = checkCuda(cudaEventCreateWithFlags(
                                          &flight.done, cudaEventDisableTiming),
                                      "cudaEventCreate")) {
      return error;
    }
    inFlight[result] = flight;
    return checkCuda(cudaEventRecord(flight.done, on), "cudaEventRecord");
  }

  /// The compute stream waits for the collective that writes `result`
  /// before anything after this runs: no result is read unwaited.
  llvm::Error land(int result) {
    auto found = inFlight.find(result);
    if (found == inFlight.end()) // the loader refuses such a program
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "wait: nothing in flight writes buffer " +
                                         std::to_string(result));
    cudaEvent_t done = found->second.done;
    inFlight.erase(found);
    spareEvents.push_back(done);
    return checkCuda(cudaStreamWaitEvent(stream, done), "cudaStreamWaitEvent");
  }

  /// Runs a kernel's own collective (no buffer of the program's: the
  /// loss's row sums) on the communication stream, waited at once.
  llvm::Error
  communicate(llvm::function_ref<llvm::Error(cudaStream_t)> collective) {
    constexpr int kKernelsOwn = -1;
    if (auto error = launch(kKernelsOwn, freeFlightSlot(), collective))
      return error;
    return land(kKernelsOwn);
  }

  /// After a run that failed part way (its queued work finished): nothing
  /// is in flight any more.
  void forgetFlights() {
    for (auto &[result, flight] : inFlight)
      spareEvents.push_back(flight.done);
    inFlight.clear();
  }

  /// Device scratch slot `slot` of at least `bytes`.
  llvm::Expected<void *> scratchSpace(size_t slot, size_t bytes) {
    return space(scratch, slot, bytes);
  }
  llvm::Expected<void *> space(Pool &pool, size_t slot, size_t bytes) {
    if (pool.size() <= slot)
      pool.resize(slot + 1, {nullptr, 0});
    auto &[pointer, size] = pool[slot];
    if (size < bytes) {
      // The slot holds nothing until the new allocation succeeds: a failed
      // one must not leave the freed pointer for a later, smaller request.
      void *old = pointer;
      allocatedBytes -= size;
      pointer = nullptr;
      size = 0;
      if (old)
        if (auto error = checkCuda(cudaFreeAsync(old, stream), "cudaFree"))
          return std::move(error);
      if (auto error =
              checkCuda(cudaMallocAsync(&pointer, bytes, stream), "cudaMalloc"))
        return std::move(error);
      size = bytes;
      allocated(bytes);
    }
    return pointer;
  }
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDADEVICE_H
