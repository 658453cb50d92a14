//===- Unicode.h - the text a tokenizer sees --------------------*- C++ -*-===//
//
// UTF-8 as Hugging Face tokenizers sees it: valid text (bytes that are not
// UTF-8 become U+FFFD, as Python's decode(errors="replace") makes them),
// walked a character at a time, normalized (NFC, NFKC) and classified as
// Rust's char does it (whitespace, alphanumeric). ICU does the Unicode.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TOKENIZER_UNICODE_H
#define TWILL_RUNTIME_DATA_TOKENIZER_UNICODE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace twill::unicode {

/// `text` with each maximal ill-formed subsequence replaced by U+FFFD
/// (Unicode's "maximal subpart" practice, CPython's); well-formed text is
/// returned as it is.
std::string replaceInvalid(llvm::StringRef text);

/// The length in bytes of the character starting at `text[at]` (valid
/// UTF-8), and its code point.
unsigned charLength(llvm::StringRef text, size_t at);
uint32_t codePoint(llvm::StringRef text, size_t at);
/// `c` as UTF-8, appended to `out`.
void append(uint32_t c, std::string &out);

/// Unicode normalization forms C and KC.
std::string nfc(llvm::StringRef text);
std::string nfkc(llvm::StringRef text);

/// Rust's char::is_whitespace (White_Space) and char::is_alphanumeric
/// (Alphabetic or a number).
bool isWhitespace(uint32_t c);
bool isAlphanumeric(uint32_t c);

} // namespace twill::unicode

#endif // TWILL_RUNTIME_DATA_TOKENIZER_UNICODE_H
