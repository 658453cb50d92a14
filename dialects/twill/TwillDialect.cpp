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

/// twill.layer (on an op or a parameter) and twill.grad_layer (on an op): a
/// layer index.
static LogicalResult verifyLayer(NamedAttribute attribute,
                                 function_ref<InFlightDiagnostic()> emitError) {
  auto layer = dyn_cast<IntegerAttr>(attribute.getValue());
  if (!layer || layer.getInt() < 0)
    return emitError() << "'" << attribute.getName().getValue()
                       << "' must be a non-negative integer layer index";
  return success();
}

/// Fails unless `attribute`, where it is the one named `name`, is an
/// `AttrT` (written `what`).
template <typename AttrT>
static LogicalResult expectKind(NamedAttribute attribute, StringRef name,
                                StringRef what,
                                function_ref<InFlightDiagnostic()> emitError) {
  if (attribute.getName() != name || isa<AttrT>(attribute.getValue()))
    return success();
  return emitError() << "'" << name << "' must be " << what;
}

LogicalResult TwillDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attribute) {
  if (attribute.getName() == kLayerAttrName ||
      attribute.getName() == kGradLayerAttrName)
    return verifyLayer(attribute, [&] { return op->emitOpError(); });
  for (llvm::StringLiteral onParameters :
       {kTensorParallelAttrName, kInitAttrName, kAdapterAttrName,
        kStoredAttrName, kStackedAttrName})
    if (attribute.getName() == onParameters)
      return op->emitOpError() << "'" << onParameters
                               << "' belongs on a parameter, not an op";
  if (attribute.getName() == kArenaBytesAttrName)
    return verifyFlightsInPlannedMemory(op);
  return expectKind<EntryRoleAttr>(attribute, kEntryAttrName,
                                  "a #twill.entry<...>",
                                  [&] { return op->emitOpError(); });
}

LogicalResult TwillDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                     unsigned argIndex,
                                                     NamedAttribute attribute) {
  auto emitError = [&] {
    return op->emitOpError() << "argument " << argIndex << ": ";
  };
  if (attribute.getName() == kLayerAttrName)
    return verifyLayer(attribute, emitError);
  return success(
      succeeded(expectKind<TensorParallelAttr>(
          attribute, kTensorParallelAttrName, "a #twill.tp<...> style",
          emitError)) &&
      succeeded(expectKind<InitAttr>(attribute, kInitAttrName,
                                     "a #twill.init<...>", emitError)) &&
      succeeded(expectKind<AdapterAttr>(attribute, kAdapterAttrName,
                                        "a #twill.adapter<...>", emitError)) &&
      succeeded(expectKind<StoredRowsAttr>(attribute, kStoredAttrName,
                                           "a #twill.stored_rows<...>",
                                           emitError)) &&
      succeeded(expectKind<ArrayAttr>(attribute, kStackedAttrName,
                                      "an array of tensor names", emitError)) &&
      succeeded(expectKind<ValueRoleAttr>(attribute, kRoleAttrName,
                                          "a #twill.role<...>", emitError)) &&
      succeeded(expectKind<StateRoleAttr>(attribute, kStateRoleAttrName,
                                          "a #twill.state_role<...>",
                                          emitError)));
}

LogicalResult TwillDialect::verifyRegionResultAttribute(
    Operation *op, unsigned, unsigned resultIndex, NamedAttribute attribute) {
  return expectKind<ValueRoleAttr>(attribute, kRoleAttrName,
                                  "a #twill.role<...>", [&] {
                                    return op->emitOpError()
                                           << "result " << resultIndex << ": ";
                                  });
}
