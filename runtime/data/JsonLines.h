//===- JsonLines.h - reading JSON and JSONL files ---------------*- C++ -*-===//

#ifndef TWILL_RUNTIME_DATA_JSONLINES_H
#define TWILL_RUNTIME_DATA_JSONLINES_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace twill {

/// The JSON document in `path`; errors "path: cannot read: ..." or
/// "path: not valid JSON: ...".
llvm::Expected<llvm::json::Value> readJsonFile(llvm::StringRef path);

/// Calls `read` with each non-blank line of `path` parsed as a JSON object.
/// A line that is no JSON object, or whose `read` fails, is an error
/// "path:line: what".
llvm::Error
readJsonLines(llvm::StringRef path,
              llvm::function_ref<llvm::Error(const llvm::json::Object &)> read);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_JSONLINES_H
