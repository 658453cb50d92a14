//===- ClusterConfig.cpp - the machines a plan is for ---------------------===//

#include "frontend/config/ClusterConfig.h"

#include "frontend/config/JobConfig.h"
#include "support/ReadFile.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace twill;

llvm::Expected<ClusterConfig> twill::loadClusterConfig(llvm::StringRef path) {
  auto buffer = readRegularFile(path, kMaxConfigBytes, "cluster");
  if (!buffer)
    return buffer.takeError();
  ClusterConfig cluster;
  if (llvm::Error error = parseTextproto((*buffer)->getBuffer(), path, cluster))
    return std::move(error);
  // Every figure finite and within what a machine could have: inf or nan
  // would enter the plan, and a cluster of 1e12 nodes a search that runs
  // for minutes.
  std::string problems;
  auto within = [&](llvm::StringRef field, double value, bool needed,
                    double least, double most) {
    if (needed && !(value >= least && value <= most))
      problems +=
          llvm::formatv("\n{0} must be {1} and at most {2}, got {3}", field,
                        least > 0 ? "positive" : "0 or more",
                        llvm::format("%g", most), llvm::format("%g", value))
              .str();
  };
  bool nodeLinks = cluster.devices_per_node() > 1,
       clusterLinks = cluster.nodes() > 1;
  const double tiny = 1e-9; // positive
  within("nodes", cluster.nodes(), true, 1, 1e5);
  within("devices_per_node", cluster.devices_per_node(), true, 1, 1024);
  within("device_memory_gb", cluster.device_memory_gb(), true, tiny, 1e6);
  within("matmul_tflops", cluster.matmul_tflops(), true, tiny, 1e6);
  within("memory_gbps", cluster.memory_gbps(), true, tiny, 1e6);
  within("intra_node_gbps (a node has several devices)",
         cluster.intra_node_gbps(), nodeLinks, tiny, 1e6);
  within("inter_node_gbps (there are several nodes)", cluster.inter_node_gbps(),
         clusterLinks, tiny, 1e6);
  within("intra_node_latency_us", cluster.intra_node_latency_us(), true, 0,
         1e6);
  within("inter_node_latency_us", cluster.inter_node_latency_us(), true, 0,
         1e6);
  within("fp32_matmul_tflops", cluster.fp32_matmul_tflops(), true, 0, 1e6);
  within("attention_tflops", cluster.attention_tflops(), true, 0, 1e6);
  within("fp32_attention_tflops", cluster.fp32_attention_tflops(), true, 0,
         1e6);
  if (!problems.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "invalid cluster " + path + ":" + problems);
  return cluster;
}
