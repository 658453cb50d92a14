//===- Json.cpp - JSON from untrusted files -------------------------------===//

#include "support/Json.h"
#include "support/ReadFile.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace twill;

namespace {
/// What the parser would build of a text: its deepest nesting of arrays
/// and objects and its count of objects, counting brackets outside
/// strings; the scan stops once either is past its limit.
struct JsonShape {
  int depth = 0;
  int64_t objects = 0;
};
} // namespace

static JsonShape shapeOf(llvm::StringRef text, int64_t maxObjects) {
  JsonShape deepest;
  int depth = 0;
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
    else if (c == '[' || c == '{') {
      deepest.depth = std::max(deepest.depth, ++depth);
      deepest.objects += c == '{';
    } else if (c == ']' || c == '}')
      --depth;
    if (deepest.depth > kMaxJsonDepth || deepest.objects > maxObjects)
      break;
  }
  return deepest;
}

llvm::Expected<llvm::json::Value>
twill::parseJson(llvm::StringRef text, const llvm::Twine &what,
                 int64_t maxObjects) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   what + ": " + why);
  };
  JsonShape shape = shapeOf(text, maxObjects);
  if (shape.depth > kMaxJsonDepth)
    return fail(llvm::formatv("JSON nested deeper than {0} levels",
                              kMaxJsonDepth));
  if (shape.objects > maxObjects)
    return fail(llvm::formatv("JSON of more than {0} objects (each takes "
                              "kilobytes parsed)",
                              maxObjects));
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return fail("not valid JSON: " + llvm::toString(parsed.takeError()));
  return parsed;
}

llvm::Expected<llvm::json::Value> twill::readJsonFile(llvm::StringRef path,
                                                      uint64_t maxBytes) {
  auto file = readRegularFile(path, maxBytes);
  if (!file)
    return file.takeError();
  return parseJson((*file)->getBuffer(), path);
}
