//===- TwillOps.h - mesh and forward ops ------------------------*- C++ -*-===//

#ifndef TWILL_DIALECTS_TWILL_TWILLOPS_H
#define TWILL_DIALECTS_TWILL_TWILLOPS_H

#include "dialects/twill/ShardingRule.h"
#include "dialects/twill/TwillAttrs.h"
#include "dialects/twill/TwillDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

#include "dialects/twill/TwillInterfaces.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/twill/TwillTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/twill/TwillOps.h.inc"

namespace mlir::twill {
/// The layer an op belongs to, as the frontend (or the pass that made the
/// op for one of the layer's) says in its twill.layer.
inline std::optional<int64_t> layerOf(Operation *op) {
  auto layer = op->getAttrOfType<IntegerAttr>(kLayerAttrName);
  if (!layer)
    return std::nullopt;
  return layer.getInt();
}

/// The tensor a collective returns: its result's type, or for a start op
/// the tensor its wait yields.
RankedTensorType collectiveResultType(Operation *op);
} // namespace mlir::twill

#endif // TWILL_DIALECTS_TWILL_TWILLOPS_H
