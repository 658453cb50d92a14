//===- JsonLines.h - reading JSONL files ------------------------*- C++ -*-===//

#ifndef TWILL_RUNTIME_DATA_JSONLINES_H
#define TWILL_RUNTIME_DATA_JSONLINES_H

#include "support/Json.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace twill {

/// Calls `read` with each non-blank line of `path` parsed as a JSON object,
/// the line's text and its number (from 1). A line that is no JSON object,
/// or whose `read` fails, is an error "path:line: what".
llvm::Error readJsonLines(
    llvm::StringRef path,
    llvm::function_ref<llvm::Error(const llvm::json::Object &,
                                   llvm::StringRef text, int64_t line)>
        read);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_JSONLINES_H
