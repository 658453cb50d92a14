//===- Json.h - JSON from untrusted files -----------------------*- C++ -*-===//
//
// The one way Twill reads JSON, in the compiler and the runtime alike: the
// nesting and the count of objects are bounded before the (recursive)
// parser runs, so a file nested 100,000 deep is an error that names it,
// not a stack overflow, and one of millions of small objects is not an
// abort for lack of memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_JSON_H
#define TWILL_SUPPORT_JSON_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <vector>

namespace twill {

/// Deeper than any JSON Twill reads needs, far from what overflows a stack.
inline constexpr int kMaxJsonDepth = 256;
/// A parsed object takes kilobytes however small its text (its map starts
/// at 64 entries): 2 million of `{"a":0}` in a 16 MB line took 8 GB.
/// More objects than any file Twill reads holds (tokenizer.json has
/// thousands), and at most about a gigabyte parsed.
inline constexpr int64_t kMaxJsonObjects = int64_t(1) << 18;

/// Parses `text`; errors are "what: not valid JSON: ...", "what: JSON
/// nested deeper than ..." or "what: JSON of more than `maxObjects`
/// objects".
llvm::Expected<llvm::json::Value>
parseJson(llvm::StringRef text, const llvm::Twine &what,
          int64_t maxObjects = kMaxJsonObjects);

/// The JSON document in the regular file `path` of at most `maxBytes`
/// (ReadFile.h); errors name the path.
llvm::Expected<llvm::json::Value>
readJsonFile(llvm::StringRef path, uint64_t maxBytes = uint64_t(64) << 20);

/// The source text of top-level member `key` of the object `text` (valid
/// JSON, as parseJson took it), its keys in their order as written: what a
/// reader that keeps that order (a chat template's) reads; the last of
/// that key, as the parser keeps; "" if there is no such member.
llvm::StringRef jsonMemberText(llvm::StringRef text, llvm::StringRef key);
/// The source text of each element of the array `text` (valid JSON).
std::vector<llvm::StringRef> jsonElementTexts(llvm::StringRef text);

} // namespace twill

#endif // TWILL_SUPPORT_JSON_H
