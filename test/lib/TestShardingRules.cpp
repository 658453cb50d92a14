//===- TestShardingRules.cpp - print every op's sharding rule -------------===//
//
// `twill-opt --twill-test-sharding-rules` sets `twill.sharding_rule` on
// every op that has one to the rule's text, so lit tests can check rules.
//
//===----------------------------------------------------------------------===//

#include "dialects/twill/TwillOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::twill;

namespace {
struct TestShardingRules
    : public PassWrapper<TestShardingRules, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestShardingRules)

  StringRef getArgument() const final { return "twill-test-sharding-rules"; }
  StringRef getDescription() const final {
    return "Annotate every op with its sharding rule";
  }
  void runOnOperation() override {
    Builder builder(&getContext());
    getOperation()->walk([&](ShardingRuleOpInterface op) {
      op->setAttr("twill.sharding_rule",
                  builder.getStringAttr(op.getShardingRule().str()));
    });
  }
};
} // namespace

namespace mlir::twill {
void registerTestPasses() { PassRegistration<TestShardingRules>(); }
} // namespace mlir::twill
