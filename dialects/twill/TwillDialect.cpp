//===- TwillDialect.cpp - the twill dialect -------------------------------===//

#include "dialects/twill/TwillDialect.h"

#include "dialects/twill/TwillOps.h"

using namespace mlir;
using namespace mlir::twill;

#include "dialects/twill/TwillDialect.cpp.inc"
#include "dialects/twill/TwillInterfaces.cpp.inc"

void TwillDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "dialects/twill/TwillOps.cpp.inc"
      >();
}

/// twill.layer: a layer index, on an op or a parameter.
static LogicalResult verifyLayer(NamedAttribute attribute,
                                 function_ref<InFlightDiagnostic()> emitError) {
  auto layer = dyn_cast<IntegerAttr>(attribute.getValue());
  if (!layer || layer.getInt() < 0)
    return emitError() << "'" << kLayerAttrName
                       << "' must be a non-negative integer layer index";
  return success();
}

LogicalResult TwillDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attribute) {
  if (attribute.getName() == kLayerAttrName)
    return verifyLayer(attribute, [&] { return op->emitOpError(); });
  for (llvm::StringLiteral onParameters :
       {kTensorParallelAttrName, kInitAttrName, kAdapterAttrName})
    if (attribute.getName() == onParameters)
      return op->emitOpError() << "'" << onParameters
                               << "' belongs on a parameter, not an op";
  if (attribute.getName() == kArenaBytesAttrName)
    return verifyFlightsInPlannedMemory(op);
  if (attribute.getName() == kEntryAttrName &&
      !isa<EntryRoleAttr>(attribute.getValue()))
    return op->emitOpError() << "'" << kEntryAttrName
                             << "' must be a #twill.entry<...>";
  return success();
}

LogicalResult TwillDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                     unsigned argIndex,
                                                     NamedAttribute attribute) {
  auto emitError = [&] {
    return op->emitOpError() << "argument " << argIndex << ": ";
  };
  if (attribute.getName() == kLayerAttrName)
    return verifyLayer(attribute, emitError);
  if (attribute.getName() == kTensorParallelAttrName &&
      !isa<TensorParallelAttr>(attribute.getValue()))
    return emitError() << "'" << kTensorParallelAttrName
                       << "' must be a #twill.tp<...> style";
  if (attribute.getName() == kInitAttrName &&
      !isa<InitAttr>(attribute.getValue()))
    return emitError() << "'" << kInitAttrName << "' must be a #twill.init<...>";
  if (attribute.getName() == kAdapterAttrName &&
      !isa<AdapterAttr>(attribute.getValue()))
    return emitError() << "'" << kAdapterAttrName
                       << "' must be a #twill.adapter<...>";
  if (attribute.getName() == kRoleAttrName &&
      !isa<ValueRoleAttr>(attribute.getValue()))
    return emitError() << "'" << kRoleAttrName << "' must be a #twill.role<...>";
  return success();
}

LogicalResult TwillDialect::verifyRegionResultAttribute(
    Operation *op, unsigned, unsigned resultIndex, NamedAttribute attribute) {
  if (attribute.getName() == kRoleAttrName &&
      !isa<ValueRoleAttr>(attribute.getValue()))
    return op->emitOpError() << "result " << resultIndex << ": '"
                             << kRoleAttrName << "' must be a #twill.role<...>";
  return success();
}
