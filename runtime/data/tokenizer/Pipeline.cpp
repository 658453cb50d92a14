//===- Pipeline.cpp - a tokenizer's text before and after its model -------===//

#include "runtime/data/tokenizer/Pipeline.h"

#include "runtime/data/tokenizer/Unicode.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"

#include <unicode/uchar.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

using namespace twill;

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

/// The matches of `literal` in `text`.
static std::vector<std::pair<size_t, size_t>>
literalMatches(llvm::StringRef text, llvm::StringRef literal) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t at = text.find(literal); at != llvm::StringRef::npos;
       at = text.find(literal, at + literal.size()))
    matches.push_back({at, at + literal.size()});
  return matches;
}

struct TextPattern::Compiled {
  pcre2_code *code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

TextPattern::TextPattern(TextPattern &&) noexcept = default;
TextPattern &TextPattern::operator=(TextPattern &&) noexcept = default;
TextPattern::~TextPattern() = default;

llvm::Expected<TextPattern> TextPattern::literal(llvm::StringRef text) {
  TextPattern pattern;
  pattern.text = text.str();
  return std::move(pattern);
}

llvm::Expected<TextPattern> TextPattern::regex(llvm::StringRef source) {
  TextPattern pattern;
  pattern.text = source.str();
  pattern.compiled = std::make_unique<Compiled>();
  int errorCode;
  PCRE2_SIZE errorOffset;
  pattern.compiled->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                    PCRE2_UTF | PCRE2_UCP, &errorCode, &errorOffset, nullptr);
  if (!pattern.compiled->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(errorCode, message, sizeof(message));
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "regex '" + source +
                                       "' does not compile at offset " +
                                       llvm::Twine(errorOffset) + ": " +
                                       reinterpret_cast<const char *>(message));
  }
  pcre2_jit_compile(pattern.compiled->code, PCRE2_JIT_COMPLETE);
  return std::move(pattern);
}

llvm::Expected<std::vector<std::pair<size_t, size_t>>>
TextPattern::matches(llvm::StringRef subject) const {
  std::vector<std::pair<size_t, size_t>> found;
  if (!compiled)
    return text.empty() ? found : literalMatches(subject, text);
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data *)> match(
      pcre2_match_data_create_from_pattern(compiled->code, nullptr),
      pcre2_match_data_free);
  // The subject is valid UTF-8 (replaceInvalid made it so).
  auto matchAt = [&](size_t offset, uint32_t options) {
    return pcre2_match(compiled->code,
                       reinterpret_cast<PCRE2_SPTR>(subject.data()),
                       subject.size(), offset, PCRE2_NO_UTF_CHECK | options,
                       match.get(), nullptr);
  };
  for (size_t offset = 0; offset <= subject.size();) {
    int result = matchAt(offset, 0);
    // The JIT backtracks on a stack of 32 KiB, which a group repeated over
    // some thousand characters outgrows; the interpreter backtracks on the
    // heap, as Oniguruma does, and matches what tokenizers matches.
    if (result == PCRE2_ERROR_JIT_STACKLIMIT)
      result = matchAt(offset, PCRE2_NO_JIT);
    if (result == PCRE2_ERROR_NOMATCH)
      break;
    if (result < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(result, message, sizeof(message));
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("regex '{0}' gives up matching from byte {1} of a "
                        "{2}-byte text: {3} (Oniguruma, tokenizers' engine, "
                        "has such a limit too)",
                        text, offset, subject.size(),
                        reinterpret_cast<const char *>(message)));
    }
    PCRE2_SIZE *range = pcre2_get_ovector_pointer(match.get());
    found.push_back({range[0], range[1]});
    if (range[1] > range[0])
      offset = range[1];
    else if (range[1] < subject.size())
      offset = range[1] + unicode::charLength(subject, range[1]);
    else
      break;
  }
  return found;
}

llvm::Expected<std::string>
TextPattern::replaceAll(llvm::StringRef subject,
                        llvm::StringRef content) const {
  llvm::Expected<std::vector<std::pair<size_t, size_t>>> found =
      matches(subject);
  if (!found)
    return found.takeError();
  std::string out;
  size_t at = 0;
  for (auto [begin, end] : *found) {
    out.append(subject.data() + at, begin - at);
    out += content;
    at = end;
  }
  out.append(subject.data() + at, subject.size() - at);
  return out;
}

//===----------------------------------------------------------------------===//
// Normalizers
//===----------------------------------------------------------------------===//

llvm::Expected<std::string>
twill::normalize(llvm::ArrayRef<NormalizerStep> steps, llvm::StringRef input) {
  std::string text = input.str();
  for (const NormalizerStep &step : steps) {
    switch (step.kind) {
    case NormalizerStep::Nfc:
      text = unicode::nfc(text);
      break;
    case NormalizerStep::Nfkc:
      text = unicode::nfkc(text);
      break;
    case NormalizerStep::Prepend:
      if (!text.empty())
        text = step.content + text;
      break;
    case NormalizerStep::Replace: {
      llvm::Expected<std::string> replaced =
          step.pattern->replaceAll(text, step.content);
      if (!replaced)
        return replaced.takeError();
      text = std::move(*replaced);
      break;
    }
    }
  }
  return text;
}

//===----------------------------------------------------------------------===//
// Pre-tokenizers
//===----------------------------------------------------------------------===//

/// The pieces of `text` cut at the `matches` of a pattern, kept as
/// tokenizers' split keeps them, to `sink`; empty ones dropped.
static llvm::Error splitPiece(llvm::StringRef text, bool atStart,
                              llvm::ArrayRef<std::pair<size_t, size_t>> matches,
                              SplitBehavior behavior, bool invert,
                              PieceSink sink) {
  struct Part {
    size_t begin, end;
    bool match;
  };
  std::vector<Part> parts;
  parts.reserve(2 * matches.size() + 1);
  size_t at = 0;
  for (auto [begin, end] : matches) {
    if (begin > at)
      parts.push_back({at, begin, invert});
    parts.push_back({begin, end, !invert});
    at = end;
  }
  if (at < text.size() || parts.empty())
    parts.push_back({at, text.size(), invert});

  // What each part joins: merged parts grow, removed ones go.
  std::vector<Part> kept;
  kept.reserve(parts.size());
  bool previousMatch = false;
  switch (behavior) {
  case SplitBehavior::Removed:
    for (const Part &part : parts)
      if (!part.match)
        kept.push_back(part);
    break;
  case SplitBehavior::Isolated:
    kept = std::move(parts);
    break;
  case SplitBehavior::Contiguous:
    for (const Part &part : parts) {
      if (!kept.empty() && part.match == previousMatch)
        kept.back().end = part.end;
      else
        kept.push_back(part);
      previousMatch = part.match;
    }
    break;
  case SplitBehavior::MergedWithPrevious:
    for (const Part &part : parts) {
      if (!kept.empty() && part.match && !previousMatch)
        kept.back().end = part.end;
      else
        kept.push_back(part);
      previousMatch = part.match;
    }
    break;
  case SplitBehavior::MergedWithNext:
    for (const Part &part : llvm::reverse(parts)) {
      if (!kept.empty() && part.match && !previousMatch)
        kept.back().begin = part.begin;
      else
        kept.push_back(part);
      previousMatch = part.match;
    }
    std::reverse(kept.begin(), kept.end());
    break;
  }
  for (const Part &part : kept)
    if (part.end > part.begin)
      if (llvm::Error error = sink(text.slice(part.begin, part.end),
                                   atStart && part.begin == 0))
        return error;
  return llvm::Error::success();
}

/// splitPiece at the matches of `pattern`.
static llvm::Error splitByPattern(const TextPattern &pattern,
                                  llvm::StringRef text, bool atStart,
                                  SplitBehavior behavior, bool invert,
                                  PieceSink sink) {
  llvm::Expected<std::vector<std::pair<size_t, size_t>>> found =
      pattern.matches(text);
  if (!found)
    return found.takeError();
  return splitPiece(text, atStart, *found, behavior, invert, sink);
}

/// GPT-2's pattern, which ByteLevel's use_regex cuts by.
static const TextPattern &gpt2Pattern() {
  static const TextPattern pattern = llvm::cantFail(TextPattern::regex(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"));
  return pattern;
}

/// The code points GPT-2's alphabet writes each byte as: printable bytes as
/// themselves, the others as 256, 257, ... in byte order.
static const std::array<std::string, 256> &byteLevelAlphabet() {
  static const std::array<std::string, 256> alphabet = [] {
    std::array<std::string, 256> chars;
    uint32_t next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      bool printable = (byte >= 33 && byte <= 126) ||
                       (byte >= 161 && byte <= 172) || byte >= 174;
      unicode::append(printable ? uint32_t(byte) : next++, chars[byte]);
    }
    return chars;
  }();
  return alphabet;
}

llvm::StringRef twill::byteLevelChar(unsigned char byte) {
  return byteLevelAlphabet()[byte];
}

int twill::byteOfByteLevelChar(llvm::StringRef character) {
  static const llvm::StringMap<int> bytes = [] {
    llvm::StringMap<int> map;
    for (int byte = 0; byte < 256; ++byte)
      map[byteLevelAlphabet()[byte]] = byte;
    return map;
  }();
  auto it = bytes.find(character);
  return it == bytes.end() ? -1 : it->second;
}

/// Rust's char::is_numeric: a number of any kind.
static bool isNumeric(uint32_t c) {
  int8_t type = u_charType(UChar32(c));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER ||
         type == U_OTHER_NUMBER;
}

llvm::Error twill::preTokenize(llvm::ArrayRef<PreTokenizerStep> steps,
                               llvm::StringRef text, bool atStart,
                               PieceSink sink) {
  if (steps.empty())
    return sink(text, atStart);
  const PreTokenizerStep &step = steps.front();
  auto rest = [&](llvm::StringRef piece, bool pieceAtStart) {
    return preTokenize(steps.drop_front(), piece, pieceAtStart, sink);
  };
  switch (step.kind) {
  case PreTokenizerStep::ByteLevel: {
    std::string spaced;
    if (step.addPrefixSpace && !text.starts_with(" ")) {
      spaced = (" " + text).str();
      text = spaced;
    }
    auto mapBytes = [&](llvm::StringRef piece, bool pieceAtStart) {
      std::string mapped;
      mapped.reserve(2 * piece.size());
      for (char byte : piece)
        mapped += byteLevelChar((unsigned char)byte);
      return rest(mapped, pieceAtStart);
    };
    if (step.useRegex)
      return splitByPattern(gpt2Pattern(), text, atStart,
                            SplitBehavior::Isolated, false, mapBytes);
    return mapBytes(text, atStart);
  }
  case PreTokenizerStep::Split:
    return splitByPattern(*step.pattern, text, atStart, step.behavior,
                          step.invert, rest);
  case PreTokenizerStep::Metaspace: {
    std::string replaced;
    for (char c : text) {
      if (c == ' ')
        replaced += step.replacement;
      else
        replaced += c;
    }
    bool prepend = step.prepend == PreTokenizerStep::Always ||
                   (step.prepend == PreTokenizerStep::First && atStart);
    if (prepend && !llvm::StringRef(replaced).starts_with(step.replacement))
      replaced.insert(0, step.replacement);
    if (!step.split)
      return rest(replaced, atStart);
    return splitPiece(replaced, atStart,
                      literalMatches(replaced, step.replacement),
                      SplitBehavior::MergedWithNext, false, rest);
  }
  case PreTokenizerStep::Digits: {
    std::vector<std::pair<size_t, size_t>> digits;
    for (size_t at = 0; at < text.size();) {
      unsigned length = unicode::charLength(text, at);
      if (isNumeric(unicode::codePoint(text, at)))
        digits.push_back({at, at + length});
      at += length;
    }
    return splitPiece(text, atStart, digits,
                      step.individualDigits ? SplitBehavior::Isolated
                                            : SplitBehavior::Contiguous,
                      false, rest);
  }
  }
  llvm_unreachable("a pre-tokenizer of no kind");
}

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

/// The byte a "<0xXX>" token stands for, or -1.
static int fallbackByte(llvm::StringRef token) {
  unsigned byte;
  if (token.size() != 6 || !token.starts_with("<0x") || !token.ends_with(">") ||
      token.substr(3, 2).getAsInteger(16, byte))
    return -1;
  return int(byte);
}

static llvm::Error decodeStep(const DecoderStep &step,
                              std::vector<std::string> &tokens) {
  switch (step.kind) {
  case DecoderStep::ByteLevel: {
    std::string bytes;
    for (const std::string &token : tokens) {
      std::string mapped;
      llvm::StringRef text = token;
      bool inAlphabet = true;
      for (size_t at = 0; at < text.size() && inAlphabet;) {
        unsigned length = unicode::charLength(text, at);
        int byte = byteOfByteLevelChar(text.substr(at, length));
        inAlphabet = byte >= 0;
        mapped += char(byte);
        at += length;
      }
      bytes += inAlphabet ? mapped : token;
    }
    tokens = {unicode::replaceInvalid(bytes)};
    return llvm::Error::success();
  }
  case DecoderStep::ByteFallback: {
    std::vector<std::string> out;
    std::string bytes;
    size_t count = 0;
    auto flush = [&] {
      if (!count)
        return;
      if (unicode::replaceInvalid(bytes) == bytes)
        out.push_back(bytes);
      else
        for (size_t i = 0; i < count; ++i)
          out.push_back("\xEF\xBF\xBD");
      bytes.clear();
      count = 0;
    };
    for (std::string &token : tokens) {
      if (int byte = fallbackByte(token); byte >= 0) {
        bytes += char(byte);
        ++count;
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
    return llvm::Error::success();
  }
  case DecoderStep::Metaspace:
    for (auto [index, token] : llvm::enumerate(tokens)) {
      // tokenizers drops every replacement of the first token, not only
      // its first.
      std::string text;
      llvm::StringRef view = token;
      for (size_t at = 0; at < view.size();) {
        if (view.substr(at).starts_with(step.replacement)) {
          if (!(index == 0 && step.prependFirst))
            text += ' ';
          at += step.replacement.size();
          continue;
        }
        text += view[at++];
      }
      token = std::move(text);
    }
    return llvm::Error::success();
  case DecoderStep::Replace:
    for (std::string &token : tokens) {
      llvm::Expected<std::string> replaced =
          step.pattern->replaceAll(token, step.content);
      if (!replaced)
        return replaced.takeError();
      token = std::move(*replaced);
    }
    return llvm::Error::success();
  case DecoderStep::Fuse:
    tokens = {llvm::join(tokens, "")};
    return llvm::Error::success();
  case DecoderStep::Strip:
    // Up to `start` of the character at the start, and up to `stop` of it
    // at the end of what is left.
    for (std::string &token : tokens) {
      llvm::StringRef view = token, content = step.content;
      for (uint64_t i = 0; i < step.start && view.starts_with(content); ++i)
        view = view.drop_front(content.size());
      for (uint64_t i = 0; i < step.stop && view.ends_with(content); ++i)
        view = view.drop_back(content.size());
      token = view.str();
    }
    return llvm::Error::success();
  }
  llvm_unreachable("a decoder of no kind");
}

llvm::Expected<std::string>
twill::decodeTokens(llvm::ArrayRef<DecoderStep> steps,
                    std::vector<std::string> tokens) {
  if (steps.empty())
    return llvm::join(tokens, " ");
  for (const DecoderStep &step : steps)
    if (llvm::Error error = decodeStep(step, tokens))
      return std::move(error);
  return llvm::join(tokens, "");
}
