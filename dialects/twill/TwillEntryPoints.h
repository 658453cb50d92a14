//===- TwillEntryPoints.h - entry points by their role ----------*- C++ -*-===//
//
// The functions the runtime runs, each stating what it is for
// (#twill.entry): passes and the emitter find them by that role alone.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_DIALECTS_TWILL_TWILLENTRYPOINTS_H
#define TWILL_DIALECTS_TWILL_TWILLENTRYPOINTS_H

#include "dialects/twill/TwillAttrs.h"
#include "dialects/twill/TwillDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace mlir::twill {

/// What `function` is for, if it is an entry point.
inline std::optional<EntryRole> entryRoleOf(func::FuncOp function) {
  if (auto role = function->getAttrOfType<EntryRoleAttr>(kEntryAttrName))
    return role.getValue();
  return std::nullopt;
}

/// Marks `function` as the entry point for `role`.
inline void setEntryRole(func::FuncOp function, EntryRole role) {
  function->setAttr(kEntryAttrName,
                    EntryRoleAttr::get(function.getContext(), role));
}

/// For each result of `function`, the parameter or state argument whose
/// new value it is (named after it), or null.
inline SmallVector<BlockArgument> updatedArguments(func::FuncOp function) {
  llvm::StringMap<BlockArgument> byName;
  for (BlockArgument argument : function.getArguments())
    for (StringRef kind : {kParamAttrName, kStateAttrName})
      if (auto name = function.getArgAttrOfType<StringAttr>(
              argument.getArgNumber(), kind))
        byName[name.getValue()] = argument;
  SmallVector<BlockArgument> updated;
  for (unsigned index = 0; index < function.getNumResults(); ++index) {
    auto name =
        function.getResultAttrOfType<StringAttr>(index, kOutputAttrName);
    updated.push_back(name ? byName.lookup(name.getValue()) : BlockArgument());
  }
  return updated;
}

/// The module's entry point for `role`, or null.
inline func::FuncOp entryPoint(ModuleOp module, EntryRole role) {
  for (auto function : module.getOps<func::FuncOp>())
    if (entryRoleOf(function) == role)
      return function;
  return nullptr;
}

} // namespace mlir::twill

#endif // TWILL_DIALECTS_TWILL_TWILLENTRYPOINTS_H
