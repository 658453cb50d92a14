//===- ClusterConfig.cpp - the machines a plan is for ---------------------===//

#include "frontend/config/ClusterConfig.h"

#include "frontend/config/JobConfig.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace twill;

llvm::Expected<ClusterConfig> twill::loadClusterConfig(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return llvm::createStringError(
        buffer.getError(), "cannot read cluster %s: %s", path.str().c_str(),
        buffer.getError().message().c_str());
  ClusterConfig cluster;
  if (llvm::Error error = parseTextproto((*buffer)->getBuffer(), path, cluster))
    return std::move(error);
  std::string problems;
  auto positive = [&](llvm::StringRef field, double value, bool needed) {
    if (needed && !(value > 0))
      problems +=
          llvm::formatv("\n{0} must be positive, got {1}", field, value).str();
  };
  bool nodeLinks = cluster.devices_per_node() > 1,
       clusterLinks = cluster.nodes() > 1;
  positive("nodes", cluster.nodes(), true);
  positive("devices_per_node", cluster.devices_per_node(), true);
  positive("device_memory_gb", cluster.device_memory_gb(), true);
  positive("matmul_tflops", cluster.matmul_tflops(), true);
  positive("memory_gbps", cluster.memory_gbps(), true);
  positive("intra_node_gbps (a node has several devices)",
           cluster.intra_node_gbps(), nodeLinks);
  positive("inter_node_gbps (there are several nodes)",
           cluster.inter_node_gbps(), clusterLinks);
  for (auto [field, value] :
       {std::pair<llvm::StringRef, double>{"intra_node_latency_us",
                                           cluster.intra_node_latency_us()},
        {"inter_node_latency_us", cluster.inter_node_latency_us()},
        {"fp32_matmul_tflops", cluster.fp32_matmul_tflops()}})
    if (value < 0)
      problems +=
          llvm::formatv("\n{0} must be 0 or more, got {1}", field, value).str();
  if (!problems.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "invalid cluster " + path + ":" + problems);
  return cluster;
}
