//===- Json.cpp - JSON from untrusted files -------------------------------===//

#include "support/Json.h"
#include "support/ReadFile.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace twill;

/// The deepest nesting of arrays and objects in `text`, counting brackets
/// outside strings, or kMaxJsonDepth + 1 as soon as it goes deeper.
static int nestingDepth(llvm::StringRef text) {
  int depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i; // the escaped character, whatever it is
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}')
      --depth;
    if (deepest > kMaxJsonDepth)
      break;
  }
  return deepest;
}

llvm::Expected<llvm::json::Value> twill::parseJson(llvm::StringRef text,
                                                   const llvm::Twine &what) {
  if (nestingDepth(text) > kMaxJsonDepth)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0}: JSON nested deeper than {1} levels", what.str(),
                      kMaxJsonDepth));
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        what + ": not valid JSON: " + llvm::toString(parsed.takeError()));
  return parsed;
}

llvm::Expected<llvm::json::Value> twill::readJsonFile(llvm::StringRef path,
                                                      uint64_t maxBytes) {
  auto file = readRegularFile(path, maxBytes);
  if (!file)
    return file.takeError();
  return parseJson((*file)->getBuffer(), path);
}
