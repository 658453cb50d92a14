//===- Unavailable.cpp - the cuda backend of a build without CUDA ---------===//

#include "runtime/backend/Backend.h"

char twill::NoGpuError::ID = 0;

llvm::Expected<std::unique_ptr<twill::Backend>>
twill::createCudaBackend(BufferSet &, Communicator *) {
  return llvm::make_error<NoGpuError>(
      "this twill-train was built without CUDA (no nvcc was found when it "
      "was configured): rebuild with the CUDA toolkit, or use --backend=cpu");
}
