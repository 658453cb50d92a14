//===- TwillDialect.h - the twill dialect -----------------------*- C++ -*-===//

#ifndef TWILL_DIALECTS_TWILL_TWILLDIALECT_H
#define TWILL_DIALECTS_TWILL_TWILLDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/twill/TwillDialect.h.inc"

#endif // TWILL_DIALECTS_TWILL_TWILLDIALECT_H
