// RUN: split-file %s %t
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/no-opcode.td 2>&1 | FileCheck %s --check-prefix=NO-OPCODE
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/twice.td 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not twill-tblgen -gen-cpu-runners %ods_includes %t/no-runner.td 2>&1 | FileCheck %s --check-prefix=NO-RUNNER
// RUN: not twill-tblgen -gen-cuda-runners %ods_includes %t/no-cuda.td 2>&1 | FileCheck %s --check-prefix=NO-CUDA
// RUN: not twill-tblgen -gen-opcode-table %ods_includes %t/starts-nothing.td 2>&1 | FileCheck %s --check-prefix=STARTS
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/no-attribute.td 2>&1 | FileCheck %s --check-prefix=NO-ATTRIBUTE
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/odd-kind.td 2>&1 | FileCheck %s --check-prefix=ODD-KIND
// RUN: not twill-tblgen -gen-executable-proto %ods_includes %t/types-differ.td 2>&1 | FileCheck %s --check-prefix=TYPES-DIFFER

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
