// A cluster description (proto/cluster.proto) as twill plan reads it.
#include "frontend/config/ClusterConfig.h"
#include "fuzz/FuzzInput.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::Expected<ClusterConfig> cluster =
      loadClusterConfig(fuzz::writeFile("cluster.textproto", data, size));
  fuzz::valueOrNull(cluster);
  return 0;
}
