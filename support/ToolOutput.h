//===- ToolOutput.h - a tool's standard output, checked ---------*- C++ -*-===//

#ifndef TWILL_SUPPORT_TOOLOUTPUT_H
#define TWILL_SUPPORT_TOOLOUTPUT_H

namespace twill {

/// Has the process's exit, however it comes (main's return, exit() after
/// --help), flush standard output first: an error writing it (a full disk,
/// a closed file) is said on stderr, naming it, and ends the tool with
/// status 1, instead of LLVM's fatal error ("IO failure on output stream")
/// when the stream is destroyed. Every tool's main calls it first.
void checkStandardOutputAtExit(const char *tool);

} // namespace twill

#endif // TWILL_SUPPORT_TOOLOUTPUT_H
