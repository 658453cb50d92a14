//===- Pipelines.cpp - the pass pipeline twillc runs ----------------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"

void mlir::twill::buildCompilePipeline(OpPassManager &pm) {
  pm.addPass(createAutodiff());
}
