//===- JinjaLex.h - a chat template cut into pieces and tokens --*- C++ -*-===//
//
// The template is cut into text and tags as Jinja's lexer cuts it with
// transformers' settings (trim_blocks: a block tag eats the newline after
// it; lstrip_blocks: the spaces before it on its line; `-` inside a tag's
// braces strips all whitespace on that side), and each tag into tokens, for
// JinjaParse.cpp to parse.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TEMPLATE_JINJALEX_H
#define TWILL_RUNTIME_DATA_TEMPLATE_JINJALEX_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace twill::jinja {

struct Token {
  enum Kind { Name, Number, String, Op, End } kind;
  std::string text;
  int line;
};

/// A tag's text cut into tokens (numbers as Jinja reads them: a fraction
/// where digits follow the point, an exponent where digits follow the e).
llvm::Expected<std::vector<Token>> tokenize(llvm::StringRef text, int line,
                                            llvm::StringRef name);

/// One piece of the template: text, or a tag's contents.
struct Piece {
  enum Kind { Text, Output, Statement } kind;
  std::string text;
  int line;
};

/// The template cut into text and tags, whitespace controlled as Jinja's
/// lexer does with trim_blocks and lstrip_blocks.
llvm::Expected<std::vector<Piece>> cut(llvm::StringRef source,
                                       llvm::StringRef name);

} // namespace twill::jinja

#endif // TWILL_RUNTIME_DATA_TEMPLATE_JINJALEX_H
