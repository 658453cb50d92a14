//===- TwillCollectiveOps.cpp - collectives on a mesh axis ----------------===//

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"

using namespace mlir;
using namespace mlir::twill;

/// Fails unless `dim` is a dim of `value`.
static LogicalResult expectDim(Operation *op, StringRef name, int64_t dim,
                               Value value) {
  if (dim >= 0 && dim < (int64_t)shapeOf(value).size())
    return success();
  return op->emitOpError() << name << " " << dim << " is not a dim of a "
                           << shapeOf(value).size() << "-d tensor";
}

LogicalResult AllGatherOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return expectDim(*this, "dim", getDim(), getInput());
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return expectDim(*this, "dim", getDim(), getInput());
}

LogicalResult LocalSliceOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return expectDim(*this, "dim", getDim(), getInput());
}

LogicalResult AllToAllOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getResult()})) ||
      failed(expectDim(*this, "split", getSplitDim(), getInput())))
    return failure();
  return expectDim(*this, "concat", getConcatDim(), getInput());
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

  // A block is ceil(whole / ranks) long: the last one may be padded.
  auto block = [&](int64_t whole) { return (whole + size - 1) / size; };
  auto dimAttr = [&](StringRef name) {
    return op->getAttrOfType<IntegerAttr>(name).getInt();
  };
  ArrayRef<int64_t> input = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> result = collectiveResultType(op).getShape();
  SmallVector<int64_t> expected(input);
  if (isa<AllGatherOp, AllGatherStartOp>(op)) {
    int64_t dim = dimAttr("dim");
    if (result.size() == input.size() && block(result[dim]) == input[dim])
      expected[dim] = result[dim];
    else
      expected[dim] *= size;
  } else if (isa<ReduceScatterOp, ReduceScatterStartOp, LocalSliceOp>(op)) {
    int64_t dim = dimAttr("dim");
    expected[dim] = block(expected[dim]);
  } else if (isa<AllToAllOp, AllToAllStartOp>(op)) {
    int64_t split = dimAttr("split_dim"), concat = dimAttr("concat_dim");
    if (expected[split] % size != 0)
      return op->emitOpError()
             << "split dim " << split << " of size " << expected[split]
             << " does not split over the " << size << " ranks of " << axisName;
    expected[split] /= size;
    expected[concat] *= size;
  }
  return expectShape(op, "result", result, expected);
}
