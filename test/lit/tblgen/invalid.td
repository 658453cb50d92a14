// RUN: split-file %s %t
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/no-opcode.td 2>&1 | FileCheck %s --check-prefix=NO-OPCODE
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/twice.td 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not twill-tblgen -gen-cpu-runners %ods_includes %t/no-runner.td 2>&1 | FileCheck %s --check-prefix=NO-RUNNER
// RUN: not twill-tblgen -gen-cuda-runners %ods_includes %t/no-cuda.td 2>&1 | FileCheck %s --check-prefix=NO-CUDA
// RUN: not twill-tblgen -gen-opcode-table %ods_includes %t/starts-nothing.td 2>&1 | FileCheck %s --check-prefix=STARTS
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/no-attribute.td 2>&1 | FileCheck %s --check-prefix=NO-ATTRIBUTE
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/odd-kind.td 2>&1 | FileCheck %s --check-prefix=ODD-KIND
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/types-differ.td 2>&1 | FileCheck %s --check-prefix=TYPES-DIFFER
// RUN: not twill-tblgen -gen-shape-rules %ods_includes %t/rule-differs.td 2>&1 | FileCheck %s --check-prefix=RULE-DIFFERS
// RUN: not twill-tblgen -gen-shape-rules %ods_includes %t/rule-variadic.td 2>&1 | FileCheck %s --check-prefix=RULE-VARIADIC
// RUN: not twill-tblgen -gen-op-delegations %ods_includes %t/same-no-rule.td 2>&1 | FileCheck %s --check-prefix=SAME-NO-RULE
// RUN: not twill-tblgen -gen-op-delegations %ods_includes %t/same-unknown.td 2>&1 | FileCheck %s --check-prefix=SAME-UNKNOWN
// RUN: not twill-tblgen -gen-op-delegations %ods_includes %t/gradient-unknown.td 2>&1 | FileCheck %s --check-prefix=GRADIENT-UNKNOWN
// RUN: not twill-tblgen -gen-op-delegations %ods_includes %t/gradient-takes.td 2>&1 | FileCheck %s --check-prefix=GRADIENT-TAKES

// An op that leaves out what the Executable needs of it does not build.

//--- no-opcode.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> { let runner = "runA"; }
// NO-OPCODE: error: twill op 'a' has no opcode (0: it is never emitted)

//--- twice.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> { let opcode = 4; let runner = "runA"; }
def Twill_BOp : Twill_Op<"b"> { let opcode = 4; let runner = "runB"; }
// TWICE: error: opcode 4 is also a's

//--- no-runner.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> { let opcode = 1; let cudaRunner = "runA"; }
// NO-RUNNER: error: {{.*}}'cpuRunner'{{.*}}could not be fully resolved: runner

//--- no-cuda.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> { let opcode = 1; let runner = ""; }
// NO-CUDA: error: twill op 'a' has no cuda runner: every op runs on cuda

//--- starts-nothing.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a_start"> {
  let opcode = 1;
  let runner = "runA";
  let starts = "a";
}
// STARTS: error: 'a_start' starts 'a', which is no op the Executable carries

//--- no-attribute.td
include "dialects/twill/TwillDialect.td"
def Twill_AAttributes : Twill_Attributes<"a", 10, [Twill_Field<"size", 1>]>;
def Twill_AOp : Twill_Op<"a"> {
  let opcode = 1;
  let runner = "runA";
  let arguments = (ins I64Attr:$sizes);
  let executableAttributes = Twill_AAttributes;
}
// NO-ATTRIBUTE: error: no op that carries AAttributes has an attribute 'size'

//--- odd-kind.td
include "dialects/twill/TwillDialect.td"
def Twill_AAttributes : Twill_Attributes<"a", 10, [Twill_Field<"sizes", 1>]>;
def Twill_AOp : Twill_Op<"a"> {
  let opcode = 1;
  let runner = "runA";
  let arguments = (ins I64ArrayAttr:$sizes);
  let executableAttributes = Twill_AAttributes;
}
// ODD-KIND: error: attribute 'sizes' of 'a' is of kind I64ArrayAttr, which no attributes field takes

//--- types-differ.td
include "dialects/twill/TwillDialect.td"
def Twill_AAttributes : Twill_Attributes<"a", 10, [Twill_Field<"size", 1>]>;
def Twill_AOp : Twill_Op<"a"> {
  let opcode = 1;
  let runner = "runA";
  let arguments = (ins I64Attr:$size);
  let executableAttributes = Twill_AAttributes;
}
def Twill_BOp : Twill_Op<"b"> {
  let opcode = 2;
  let runner = "runB";
  let arguments = (ins F64Attr:$size);
  let executableAttributes = Twill_AAttributes;
}
// TYPES-DIFFER: error: attribute 'size' of 'b' is not of 'a's type

//--- rule-differs.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> {
  let opcode = 1;
  let runner = "runA";
  let arguments = (ins AnyTensor:$x, AnyTensor:$y);
  let results = (outs AnyTensor:$z);
  let shapeRule = "pair";
}
def Twill_BOp : Twill_Op<"b"> {
  let opcode = 2;
  let runner = "runB";
  let arguments = (ins AnyTensor:$x);
  let results = (outs AnyTensor:$y, AnyTensor:$z);
  let shapeRule = "pair";
}
// RULE-DIFFERS: error: 'b' names shape rule 'pair', whose values are a's: not its

//--- rule-variadic.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> {
  let opcode = 1;
  let runner = "runA";
  let arguments = (ins Variadic<AnyTensor>:$xs);
  let shapeRule = "many";
}
// RULE-VARIADIC: error: 'a' has a shape rule, which takes no variadic value ('xs')

//--- same-no-rule.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> {
  let opcode = 1;
  let runner = "runA";
  let arguments = (ins AnyTensor:$x);
  let sameElementType = ["x"];
}
// SAME-NO-RULE: error: 'a' names sameElementType values but no shape rule

//--- same-unknown.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> {
  let opcode = 1;
  let runner = "runA";
  let arguments = (ins AnyTensor:$x, Optional<AnyTensor>:$y);
  let shapeRule = "xy";
  let sameElementType = ["x", "y"];
}
// SAME-UNKNOWN: error: 'a' has no required value 'y' (sameElementType)

//--- gradient-unknown.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> {
  let opcode = 0;
  let runner = "";
  let arguments = (ins AnyTensor:$x);
  let gradients = [Twill_GradientOf<"x", "Twill_AGradOp">];
}
// GRADIENT-UNKNOWN: error: 'a''s gradient names 'Twill_AGradOp', which is no twill op

//--- gradient-takes.td
include "dialects/twill/TwillDialect.td"
def Twill_AOp : Twill_Op<"a"> {
  let opcode = 0;
  let runner = "";
  let arguments = (ins AnyTensor:$x);
  let results = (outs AnyTensor:$y);
  let gradients = [Twill_GradientOf<"x", "Twill_AGradOp">];
}
def Twill_AGradOp : Twill_Op<"a_grad"> {
  let opcode = 0;
  let runner = "";
  let arguments = (ins AnyTensor:$grad, AnyTensor:$z);
  let results = (outs AnyTensor:$x_grad);
}
// GRADIENT-TAKES: error: 'a''s gradient op Twill_AGradOp takes 'z', which it has not
