//===- TwillCollectiveOps.cpp - collectives on a mesh axis ----------------===//

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"
#include "opmodel/Shapes.h"

#include <tuple>

using namespace mlir;
using namespace mlir::twill;
namespace shapes = ::twill::shapes;

/// The collective `op` is (or starts), with the dims it names (all_to_all:
/// its concat dim, then its split dim).
static std::tuple<shapes::Collective, int64_t, int64_t>
collectiveOf(Operation *op) {
  auto dimAttr = [&](StringRef name) {
    auto attr = op->getAttrOfType<IntegerAttr>(name);
    return attr ? attr.getInt() : 0;
  };
  using shapes::Collective;
  Collective kind = *collectiveKindOf(op);
  if (kind == Collective::AllToAll)
    return {kind, dimAttr("concat_dim"), dimAttr("split_dim")};
  return {kind, dimAttr("dim"), 0};
}

LogicalResult mlir::twill::verifyCollectiveDims(Operation *op) {
  auto [kind, dim, splitDim] = collectiveOf(op);
  return check(op, shapes::collectiveDims(kind, shapeOf(op->getOperand(0)), dim,
                                          splitDim));
}

LogicalResult mlir::twill::verifyBlocking(Operation *op) {
  if (failed(expectSameElementType(op, {op->getOperand(0), op->getResult(0)})))
    return failure();
  return verifyCollectiveDims(op);
}

LogicalResult
mlir::twill::verifyCollective(Operation *op,
                              SymbolTableCollection &symbolTable) {
  if (failed(verifyPlacementSymbols(op, symbolTable)))
    return failure();
  auto meshName = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  auto axisName = op->getAttrOfType<StringAttr>("axis");
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(op, meshName);
  if (!mesh)
    return op->emitOpError("refers to unknown mesh ") << meshName;
  int64_t size = -1;
  for (auto [axis, axisSize] :
       llvm::zip_equal(mesh.getAxes(), mesh.getAxisSizes()))
    if (cast<StringAttr>(axis) == axisName)
      size = axisSize;
  if (size < 0)
    return op->emitOpError("mesh ") << meshName << " has no axis " << axisName
                                    << " (it has " << mesh.getAxes() << ")";

  auto [kind, dim, splitDim] = collectiveOf(op);
  return check(op, shapes::collective(kind, shapeOf(op->getOperand(0)),
                                      collectiveResultType(op).getShape(), dim,
                                      splitDim, size, axisName.getValue()));
}
