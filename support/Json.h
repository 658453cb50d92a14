//===- Json.h - JSON from untrusted files -----------------------*- C++ -*-===//
//
// The one way Twill reads JSON, in the compiler and the runtime alike: the
// nesting is bounded before the (recursive) parser runs, so a file nested
// 100,000 deep is an error that names it, not a stack overflow.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_JSON_H
#define TWILL_SUPPORT_JSON_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace twill {

/// Deeper than any JSON Twill reads needs, far from what overflows a stack.
inline constexpr int kMaxJsonDepth = 256;

/// Parses `text`; errors are "what: not valid JSON: ..." or "what: JSON
/// nested deeper than ...".
llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text,
                                            const llvm::Twine &what);

/// The JSON document in the regular file `path` of at most `maxBytes`
/// (ReadFile.h); errors name the path.
llvm::Expected<llvm::json::Value>
readJsonFile(llvm::StringRef path, uint64_t maxBytes = uint64_t(64) << 20);

} // namespace twill

#endif // TWILL_SUPPORT_JSON_H
