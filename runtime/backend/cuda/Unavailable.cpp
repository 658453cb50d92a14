//===- Unavailable.cpp - the cuda backend of a build without CUDA ---------===//

#include "runtime/backend/Backend.h"

llvm::Expected<std::unique_ptr<twill::Backend>>
twill::createCudaBackend(BufferSet &, Communicator *) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "this twill-train was built without CUDA (no nvcc was found when it "
      "was configured): rebuild with the CUDA toolkit, or use --backend=cpu");
}
