//===- DialectEmitters.cpp - the ops' delegations from ODS ----------------===//
//
// -gen-op-delegations: verify() and getShardingRule() of each op whose ODS
// entry names the dialect's helper that does it all (`verifier`,
// `shardingRule`), so an op that is checked or sharded as others are
// writes no function of its own.
//
//===----------------------------------------------------------------------===//

#include "tblgen/OpRecords.h"

#include "llvm/Support/raw_ostream.h"
#include "llvm/TableGen/TableGenBackend.h"

using namespace llvm;
using namespace twill::tblgen;

static void emitDelegations(const RecordKeeper &records, raw_ostream &os) {
  emitSourceFileHeader("Each op's verifier and sharding rule, where a helper "
                       "of the dialect is",
                       os, records);
  for (const OpRecord &op : readOps(records)) {
    // Not "::mlir::...": after a return type, that would continue its name.
    StringRef cppClass = StringRef(op.cppClass).ltrim(':');
    if (!op.verifier.empty())
      os << "::llvm::LogicalResult " << cppClass << "::verify() {\n"
         << "  return " << op.verifier << "(*this);\n}\n";
    if (!op.shardingRule.empty())
      os << "::mlir::twill::ShardingRule " << cppClass
         << "::getShardingRule() {\n  return " << op.shardingRule
         << "(*this);\n}\n";
  }
}

static TableGen::Emitter::Opt
    delegations("gen-op-delegations", emitDelegations,
                "verify() and getShardingRule() of the ops whose ODS names "
                "a helper for them");
