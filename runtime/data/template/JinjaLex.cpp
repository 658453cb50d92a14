//===- JinjaLex.cpp - a chat template cut into pieces and tokens ----------===//

#include "runtime/data/template/JinjaLex.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace twill;
using namespace twill::jinja;

llvm::Expected<std::vector<Token>>
jinja::tokenize(llvm::StringRef text, int line, llvm::StringRef name) {
  std::vector<Token> tokens;
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        llvm::formatv("{0}:{1}: ", name, line).str() + what);
  };
  for (size_t at = 0; at < text.size();) {
    char c = text[at];
    if (c == '\n')
      ++line;
    if (llvm::isSpace(c)) {
      ++at;
      continue;
    }
    if (llvm::isAlpha(c) || c == '_') {
      size_t end = at;
      while (end < text.size() &&
             (llvm::isAlnum(text[end]) || text[end] == '_'))
        ++end;
      tokens.push_back({Token::Name, text.slice(at, end).str(), line});
      at = end;
      continue;
    }
    if (llvm::isDigit(c)) {
      // As Jinja's lexer: digits (with _), then a fraction where digits
      // follow the point, then an exponent where digits follow the e.
      auto digitsFrom = [&](size_t from) {
        while (from < text.size() &&
               (llvm::isDigit(text[from]) || text[from] == '_'))
          ++from;
        return from;
      };
      size_t end = digitsFrom(at);
      if (end + 1 < text.size() && text[end] == '.' &&
          llvm::isDigit(text[end + 1]))
        end = digitsFrom(end + 1);
      if (end < text.size() && (text[end] == 'e' || text[end] == 'E')) {
        size_t power = end + 1;
        if (power < text.size() && (text[power] == '+' || text[power] == '-'))
          ++power;
        if (power < text.size() && llvm::isDigit(text[power]))
          end = digitsFrom(power);
      }
      tokens.push_back({Token::Number, text.slice(at, end).str(), line});
      at = end;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string value;
      size_t end = at + 1;
      for (; end < text.size() && text[end] != c; ++end) {
        if (text[end] != '\\' || end + 1 == text.size()) {
          value += text[end];
          continue;
        }
        char escaped = text[++end];
        switch (escaped) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        default:
          value += escaped; // \\, \', \"
        }
      }
      if (end >= text.size())
        return fail("a string is not closed");
      tokens.push_back({Token::String, std::move(value), line});
      at = end + 1;
      continue;
    }
    static const char *twoChar[] = {"==", "!=", "<=", ">=", "//", "**"};
    std::string op(1, c);
    for (const char *candidate : twoChar)
      if (text.substr(at).starts_with(candidate))
        op = candidate;
    if (op.size() == 1 && !llvm::StringRef("+-*/%~<>()[]{},:.|=").contains(c))
      return fail(llvm::formatv("unexpected character '{0}'", c).str());
    tokens.push_back({Token::Op, op, line});
    at += op.size();
  }
  tokens.push_back({Token::End, "", line});
  return tokens;
}

llvm::Expected<std::vector<Piece>> jinja::cut(llvm::StringRef source,
                                              llvm::StringRef name) {
  std::vector<Piece> pieces;
  int line = 1;
  // What the last tag asks of the text after it: all its leading
  // whitespace gone (`-`), or its first newline (trim_blocks); and whether
  // that text starts a line (the template's start, or a newline eaten).
  bool stripNext = false, trimNewline = false, lineStarting = true;
  for (size_t at = 0;;) {
    size_t open = at;
    while ((open = source.find('{', open)) != llvm::StringRef::npos &&
           (open + 1 >= source.size() ||
            !llvm::StringRef("{%#").contains(source[open + 1])))
      ++open;
    llvm::StringRef raw = source.slice(at, open);
    int textLine = line;
    line += int(llvm::count(raw, '\n'));
    std::string text = raw.str();
    if (stripNext) {
      text = llvm::StringRef(text).ltrim().str();
    } else if (trimNewline && llvm::StringRef(text).starts_with("\n")) {
      text.erase(0, 1);
      lineStarting = true;
    }
    if (open == llvm::StringRef::npos) {
      if (!text.empty())
        pieces.push_back({Piece::Text, text, textLine});
      break;
    }
    char kind = source[open + 1];
    char sign = open + 2 < source.size() ? source[open + 2] : 0;
    if (sign == '-') {
      text = llvm::StringRef(text).rtrim().str();
    } else if (kind != '{' && sign != '+') {
      // lstrip_blocks: spaces and tabs between a line's start and a block.
      size_t newline = text.rfind('\n');
      size_t from = newline == std::string::npos ? 0 : newline + 1;
      if ((newline != std::string::npos || lineStarting) &&
          llvm::all_of(llvm::StringRef(text).drop_front(from),
                       [](char c) { return c == ' ' || c == '\t'; }))
        text.erase(from);
    }
    if (!text.empty())
      pieces.push_back({Piece::Text, text, textLine});
    llvm::StringRef closing = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t contentStart = open + 2 + (sign == '-' || sign == '+' ? 1 : 0);
    // The closing braces, outside string literals.
    size_t close = contentStart;
    char quote = 0;
    for (; close + 1 < source.size(); ++close) {
      char c = source[close];
      if (quote) {
        if (c == '\\')
          ++close;
        else if (c == quote)
          quote = 0;
      } else if (kind != '#' && (c == '\'' || c == '"')) {
        quote = c;
      } else if (source.substr(close).starts_with(closing)) {
        break;
      }
    }
    if (close + 1 >= source.size())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}:{1}: a tag is not closed", name, line).str());
    size_t contentEnd = close;
    char endSign = contentEnd > contentStart ? source[contentEnd - 1] : 0;
    stripNext = endSign == '-';
    if (endSign == '-' || endSign == '+')
      --contentEnd;
    llvm::StringRef content = source.slice(contentStart, contentEnd);
    if (kind != '#')
      pieces.push_back({kind == '{' ? Piece::Output : Piece::Statement,
                        content.str(), line});
    line += int(llvm::count(content, '\n'));
    trimNewline = kind != '{' && endSign != '+'; // trim_blocks
    lineStarting = false;
    at = close + 2;
  }
  return pieces;
}
