//===- ConformanceSuite.cpp - the cases of twill-conformance --------------===//

#include "test/conformance/CaseBuilder.h"

using namespace twill;
using namespace twill::conformance;

Suite conformance::conformanceSuite() {
  Suite suite;
  suite.executable.set_format_version(EXECUTABLE_FORMAT);
  Mesh &mesh = *suite.executable.add_meshes();
  mesh.set_name("mesh");
  for (auto [axis, size] : llvm::zip_equal(kMeshAxes, kMeshShape)) {
    mesh.add_axes(axis);
    mesh.add_shape(size);
  }
  // The collectives first: their NCCL communicators are what a GPU window
  // has checked least, and a window cut short still has them.
  collectiveCases(suite);
  embeddingCases(suite);
  matmulCases(suite);
  normCases(suite);
  ropeCases(suite);
  attentionCases(suite);
  elementwiseCases(suite);
  crossEntropyCases(suite);
  linearCrossEntropyCases(suite);
  dpoLossCases(suite);
  sequenceLossCases(suite);
  layoutCases(suite);
  embeddingGradCases(suite);
  optimizerCases(suite);
  routeCases(suite);
  dispatchCases(suite);
  groupedMatmulCases(suite);
  loadBalancingCases(suite);
  return suite;
}
