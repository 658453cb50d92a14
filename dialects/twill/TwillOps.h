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

#include "dialects/twill/TwillInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/twill/TwillOps.h.inc"

#endif // TWILL_DIALECTS_TWILL_TWILLOPS_H
