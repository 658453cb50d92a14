// A .twx: loaded (its seal checked), and, since a mutation rarely keeps
// the seal, also parsed and verified without it (every instruction's
// opcode and attributes, buffer ids, the memory plan), then each buffer's
// block found for the first and the last rank of the mesh.
#include "fuzz/FuzzInput.h"
#include "runtime/executable/Executable.h"
#include "runtime/executable/Layout.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto executable = loadExecutable(fuzz::writeFile("job.twx", data, size));
  fuzz::valueOrNull(executable);
  Executable parsed;
  if (!parsed.ParseFromArray(data, int(size)))
    return 0;
  if (llvm::Error error = verifyExecutable(parsed)) {
    fuzz::ignore(std::move(error));
    return 0;
  }
  if (!parsed.meshes_size())
    return 0;
  const Mesh &mesh = parsed.meshes(0);
  std::vector<int> first(mesh.axes_size(), 0), last;
  for (int64_t extent : mesh.shape())
    last.push_back(int(extent) - 1);
  for (const Buffer &buffer : parsed.buffers())
    for (const std::vector<int> &coordinates : {first, last}) {
      auto block = blockOf(buffer, mesh, coordinates);
      fuzz::valueOrNull(block);
    }
  return 0;
}
