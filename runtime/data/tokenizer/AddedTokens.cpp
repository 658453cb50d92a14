//===- AddedTokens.cpp - tokens found in text before the model ------------===//

#include "runtime/data/tokenizer/AddedTokens.h"

#include "runtime/data/tokenizer/Bpe.h"
#include "runtime/data/tokenizer/Unicode.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace twill;

llvm::Error AddedTokens::add(AddedToken token, std::string normalizedContent) {
  int index = int(tokens.size());
  // A normalized token is its normalized content, as tokenizers keeps it
  // (and decodes it).
  if (token.normalized)
    token.content = std::move(normalizedContent);
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "added token '" + token.content + "' " +
                                       what);
  };
  // An id must mean one token (decoding looks it up), and fit the tables
  // made by id.
  if (token.content.empty())
    return fail("is empty");
  if (byContent.count(token.content))
    return fail("is added twice");
  if (token.id < 0 || token.id >= kMaxTokenIds)
    return fail(llvm::formatv("has id {0}, outside the [0, {1}) a vocabulary "
                              "may have",
                              token.id, kMaxTokenIds));
  if (const AddedToken *other = byId(token.id))
    return fail(
        llvm::formatv("has id {0}, as '{1}' does", token.id, other->content));
  byContent[token.content] = index;
  indexById[token.id] = index;
  tokens.push_back(std::move(token));
  const std::string &pattern = tokens.back().content;
  // Candidates by first byte, the longest first.
  std::vector<int> &candidates = byFirstByte[(unsigned char)pattern[0]];
  candidates.insert(llvm::upper_bound(candidates, index,
                                      [&](int a, int b) {
                                        return tokens[a].content.size() >
                                               tokens[b].content.size();
                                      }),
                    index);
  return llvm::Error::success();
}

/// The character ending at `end` (exclusive, past 0) in `text`.
static uint32_t charBefore(llvm::StringRef text, size_t end) {
  size_t at = end - 1;
  while (at > 0 && ((unsigned char)text[at] & 0xC0) == 0x80)
    --at;
  return unicode::codePoint(text, at);
}

std::vector<Segment> AddedTokens::split(llvm::StringRef text,
                                        bool normalizedText,
                                        bool allowSpecial) const {
  std::vector<Segment> segments;
  size_t start = 0; // where the text not yet cut starts
  for (size_t at = 0; at < text.size();) {
    // The longest token matching here: tokenizers' leftmost-longest.
    int best = -1;
    for (int index : byFirstByte[(unsigned char)text[at]]) {
      const AddedToken &token = tokens[index];
      if (token.normalized == normalizedText &&
          (!token.special || allowSpecial) &&
          text.substr(at).starts_with(tokens[index].content)) {
        best = index; // the longest first
        break;
      }
    }
    if (best < 0) {
      at += unicode::charLength(text, at);
      continue;
    }
    const AddedToken &token = tokens[best];
    size_t begin = at, end = at + tokens[best].content.size();
    // A single word has no word character on either side; a match that
    // is not one is passed over whole, as tokenizers' matcher passes it.
    auto isWordChar = [](uint32_t c) {
      return unicode::isAlphanumeric(c) || c == '_';
    };
    if (token.singleWord &&
        ((begin > 0 && isWordChar(charBefore(text, begin))) ||
         (end < text.size() && isWordChar(unicode::codePoint(text, end))))) {
      at = end;
      continue;
    }
    // lstrip takes the whitespace before it back to the last cut, rstrip
    // the whitespace after it.
    while (token.lstrip && begin > start) {
      size_t previous = begin - 1;
      while (previous > start && ((unsigned char)text[previous] & 0xC0) == 0x80)
        --previous;
      if (!unicode::isWhitespace(unicode::codePoint(text, previous)))
        break;
      begin = previous;
    }
    while (token.rstrip && end < text.size() &&
           unicode::isWhitespace(unicode::codePoint(text, end)))
      end += unicode::charLength(text, end);
    if (begin > start)
      segments.push_back({text.slice(start, begin), -1, start});
    segments.push_back({text.slice(begin, end), token.id, begin});
    start = at = end;
  }
  if (start < text.size() || segments.empty())
    segments.push_back({text.drop_front(start), -1, start});
  return segments;
}
