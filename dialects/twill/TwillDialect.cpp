//===- TwillDialect.cpp - the twill dialect -------------------------------===//

#include "dialects/twill/TwillDialect.h"

#include "dialects/twill/TwillOps.h"

using namespace mlir;
using namespace mlir::twill;

#include "dialects/twill/TwillDialect.cpp.inc"
#include "dialects/twill/TwillInterfaces.cpp.inc"

void TwillDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialects/twill/TwillOps.cpp.inc"
      >();
}
