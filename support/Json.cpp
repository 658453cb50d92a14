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

//===----------------------------------------------------------------------===//
// Source texts of valid JSON
//===----------------------------------------------------------------------===//

static size_t skipSpace(llvm::StringRef text, size_t at) {
  while (at < text.size() && llvm::StringRef(" \t\r\n").contains(text[at]))
    ++at;
  return at;
}

/// Past the value starting at `at` (after any space).
static size_t skipValue(llvm::StringRef text, size_t at) {
  at = skipSpace(text, at);
  int depth = 0;
  bool inString = false;
  for (; at < text.size(); ++at) {
    char c = text[at];
    if (inString) {
      if (c == '\\') {
        ++at;
      } else if (c == '"') {
        inString = false;
        if (depth == 0)
          return at + 1;
      }
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{')
      ++depth;
    else if (c == ']' || c == '}') {
      if (depth == 0) // the end of what holds a number, true, false, null
        return at;
      if (--depth == 0)
        return at + 1;
    } else if (depth == 0 &&
               (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n'))
      return at;
  }
  return at;
}

/// Each element (of an array) or member (of an object, key and value) of
/// the container starting at `at`, as [begin, end) of its source.
static std::vector<std::pair<size_t, size_t>> itemsOf(llvm::StringRef text,
                                                      size_t at) {
  std::vector<std::pair<size_t, size_t>> items;
  at = skipSpace(text, at);
  if (at >= text.size() || (text[at] != '[' && text[at] != '{'))
    return items;
  bool object = text[at] == '{';
  for (at = skipSpace(text, at + 1); at < text.size();) {
    if (text[at] == ']' || text[at] == '}')
      break;
    size_t begin = at;
    if (object) // the key and its colon
      at = skipSpace(text, skipValue(text, at)) + 1;
    at = skipValue(text, at);
    items.push_back({begin, at});
    at = skipSpace(text, at);
    if (at < text.size() && text[at] == ',')
      at = skipSpace(text, at + 1);
  }
  return items;
}

llvm::StringRef twill::jsonMemberText(llvm::StringRef text,
                                      llvm::StringRef key) {
  // The last member of that key, as llvm::json keeps the last.
  llvm::StringRef found;
  for (auto [begin, end] : itemsOf(text, 0)) {
    llvm::StringRef member = text.slice(begin, end);
    size_t keyEnd = skipValue(member, 0);
    // A key is compared as written: escapes in it would not match.
    if (member.slice(1, keyEnd - 1) == key)
      found =
          member.drop_front(skipSpace(member, skipSpace(member, keyEnd) + 1));
  }
  return found;
}

std::vector<llvm::StringRef> twill::jsonElementTexts(llvm::StringRef text) {
  std::vector<llvm::StringRef> elements;
  for (auto [begin, end] : itemsOf(text, 0))
    elements.push_back(text.slice(begin, end));
  return elements;
}
