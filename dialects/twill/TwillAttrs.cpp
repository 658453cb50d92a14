//===- TwillAttrs.cpp - placements and tensor-parallel styles -------------===//

#include "dialects/twill/TwillAttrs.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::twill;

#include "dialects/twill/TwillEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/twill/TwillAttrs.cpp.inc"

void TwillDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/twill/TwillAttrs.cpp.inc"
      >();
}

llvm::hash_code mlir::twill::hash_value(const AxisPlacement &placement) {
  return llvm::hash_combine(placement.kind,
                            placement.isShard() ? placement.dim : int64_t{0});
}

llvm::raw_ostream &mlir::twill::operator<<(llvm::raw_ostream &os,
                                           const AxisPlacement &placement) {
  switch (placement.kind) {
  case AxisPlacement::Kind::Replicate:
    return os << "replicate";
  case AxisPlacement::Kind::Shard:
    return os << "shard<" << placement.dim << ">";
  case AxisPlacement::Kind::PartialSum:
    return os << "partial<sum>";
  }
  llvm_unreachable("unknown placement kind");
}

//===----------------------------------------------------------------------===//
// PlacementAttr: #twill.placement<@mesh, [shard<0>, replicate, partial<sum>]>
//===----------------------------------------------------------------------===//

static ParseResult parseAxisPlacement(AsmParser &parser,
                                      AxisPlacement &placement) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  if (keyword == "replicate") {
    placement = AxisPlacement::replicate();
    return success();
  }
  if (keyword == "shard") {
    int64_t dim;
    if (parser.parseLess() || parser.parseInteger(dim) || parser.parseGreater())
      return failure();
    placement = AxisPlacement::shard(dim);
    return success();
  }
  if (keyword == "partial") {
    StringRef reduction;
    SMLoc reductionLoc = parser.getCurrentLocation();
    if (parser.parseLess() || parser.parseKeyword(&reduction))
      return failure();
    if (reduction != "sum")
      return parser.emitError(reductionLoc, "unknown partial reduction '")
             << reduction << "'; expected 'sum'";
    placement = AxisPlacement::partialSum();
    return parser.parseGreater();
  }
  return parser.emitError(loc, "unknown placement '")
         << keyword << "'; expected 'shard<dim>', 'replicate' or "
         << "'partial<sum>'";
}

Attribute PlacementAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  SmallVector<AxisPlacement> axes;
  if (parser.parseLess() || parser.parseAttribute(mesh) ||
      parser.parseComma() ||
      parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square,
          [&] { return parseAxisPlacement(parser, axes.emplace_back()); }) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); },
                    parser.getContext(), mesh, axes);
}

void PlacementAttr::print(AsmPrinter &printer) const {
  printer << "<" << getMesh() << ", [";
  llvm::interleaveComma(getAxes(), printer.getStream());
  printer << "]>";
}

LogicalResult
PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      FlatSymbolRefAttr mesh, ArrayRef<AxisPlacement> axes) {
  if (!mesh)
    return emitError() << "placement needs a mesh symbol";
  if (axes.empty())
    return emitError() << "placement needs one entry per mesh axis";
  for (const AxisPlacement &axis : axes)
    if (axis.isShard() && axis.dim < 0)
      return emitError() << "shard dim must be non-negative, got " << axis.dim;
  return success();
}

LogicalResult PlacementAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type,
    function_ref<InFlightDiagnostic()> emitError) const {
  for (auto [axis, placement] : llvm::enumerate(getAxes()))
    if (placement.isShard() && placement.dim >= (int64_t)shape.size())
      return emitError() << "placement entry " << axis << " shards dim "
                         << placement.dim << " of a tensor of rank "
                         << shape.size();
  return success();
}

/// Checks one type's placement against the mesh it names.
static LogicalResult verifyPlacementOf(Operation *op, Type type,
                                       SymbolTableCollection &symbolTable) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  auto placement =
      tensor ? dyn_cast_or_null<PlacementAttr>(tensor.getEncoding()) : nullptr;
  if (!placement)
    return success();
  auto mesh =
      symbolTable.lookupNearestSymbolFrom<MeshOp>(op, placement.getMesh());
  if (!mesh)
    return op->emitOpError("placement refers to unknown mesh ")
           << placement.getMesh();
  size_t meshRank = mesh.getAxes().size();
  if (placement.getAxes().size() != meshRank)
    return op->emitOpError("placement has ")
           << placement.getAxes().size() << " entries but mesh "
           << placement.getMesh() << " has " << meshRank << " axes "
           << mesh.getAxes();
  return success();
}

LogicalResult
mlir::twill::verifyPlacementSymbols(Operation *op,
                                    SymbolTableCollection &symbolTable) {
  for (Type type :
       llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()))
    if (failed(verifyPlacementOf(op, type, symbolTable)))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// TensorParallelAttr: #twill.tp<column, heads = 32>
//===----------------------------------------------------------------------===//

LogicalResult
TensorParallelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           TensorParallelStyle style, int64_t heads,
                           int64_t blocks) {
  if (heads < 0)
    return emitError() << "heads must not be negative, got " << heads;
  if (blocks < 0)
    return emitError() << "blocks must not be negative, got " << blocks;
  if (heads > 0 && style == TensorParallelStyle::Replicate)
    return emitError() << "a replicated weight splits into no heads";
  return success();
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, llvm::APFloat std,
                               uint64_t stream) {
  double deviation = std.convertToDouble();
  if (kind == InitKind::Normal ? !(deviation > 0) : deviation != 0)
    return emitError() << "std is the deviation of a normal init, and "
                          "positive there; got "
                       << deviation;
  return success();
}

LogicalResult StateRoleAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, StateKind kind,
    StringRef of) {
  bool perParameter = kind == StateKind::GradSum ||
                      kind == StateKind::ExpAvg || kind == StateKind::ExpAvgSq;
  if (perParameter && of.empty())
    return emitError() << "a " << stringifyStateKind(kind)
                       << " state names the parameter it is kept for (of)";
  if (!perParameter && !of.empty())
    return emitError() << "a " << stringifyStateKind(kind)
                       << " state is kept for no one parameter";
  return success();
}

LogicalResult
StoredRowsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       StringRef tensor, int64_t firstRow, int64_t tensorRows) {
  if (tensor.empty())
    return emitError() << "stored rows name the tensor holding them";
  if (firstRow < 0 || firstRow >= tensorRows)
    return emitError() << "stored rows start at row " << firstRow
                       << ", outside the tensor's " << tensorRows;
  return success();
}

LogicalResult
QuantizedAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      QuantizedPart part, StringRef of, int64_t blockSize,
                      int64_t nestedBlockSize, int64_t experts) {
  if (of.empty())
    return emitError() << "a quantized part names its weight (of)";
  if (experts < 0)
    return emitError() << "experts must be 0 or more, got " << experts;
  if (part == QuantizedPart::Fp8Values || part == QuantizedPart::Fp8RowScales) {
    if (blockSize || nestedBlockSize)
      return emitError() << "an FP8 weight has no blocks";
    return success();
  }
  // bitsandbytes' blocks: two codes a byte, and a power of two it supports.
  if (blockSize < 2 || blockSize % 2 || nestedBlockSize < 1 ||
      blockSize > 4096 || nestedBlockSize > 4096)
    return emitError() << "block_size must be even and in [2, 4096] and "
                          "nested_block_size in [1, 4096], got "
                       << blockSize << " and " << nestedBlockSize;
  return success();
}

LogicalResult AdapterAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  AdapterPart part, StringRef of,
                                  StringRef tied) {
  if (of.empty())
    return emitError() << "an adapter names the weight it adapts (of)";
  if (tied == of)
    return emitError() << "a weight is not tied to itself";
  return success();
}
