//===- ClusterConfig.h - the machines a plan is for -------------*- C++ -*-===//
//
// A cluster description (proto/cluster.proto): its devices, their memory
// and rates, and its links, as twillc --plan reads them.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_FRONTEND_CONFIG_CLUSTERCONFIG_H
#define TWILL_FRONTEND_CONFIG_CLUSTERCONFIG_H

#include "proto/cluster.pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace twill {

/// Reads and checks the ClusterConfig textproto at `path`: every rate and
/// size a plan uses positive, a node's links where it has several devices
/// and the links between nodes where there are several; the error names
/// the file and each field.
llvm::Expected<ClusterConfig> loadClusterConfig(llvm::StringRef path);

} // namespace twill

#endif // TWILL_FRONTEND_CONFIG_CLUSTERCONFIG_H
