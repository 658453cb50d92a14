//===- Unicode.cpp - the text a tokenizer sees ----------------------------===//

#include "runtime/data/tokenizer/Unicode.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <vector>

using namespace twill;

/// The bytes that may follow lead byte `lead` as its second byte; its
/// others are 0x80-0xBF. Empty for a byte that starts no character.
struct LeadByte {
  unsigned length;
  unsigned char low, high;
};
static LeadByte leadByte(unsigned char lead) {
  if (lead < 0x80)
    return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF)
    return {2, 0x80, 0xBF};
  if (lead == 0xE0)
    return {3, 0xA0, 0xBF};
  if (lead == 0xED)
    return {3, 0x80, 0x9F}; // no surrogates
  if (lead >= 0xE1 && lead <= 0xEF)
    return {3, 0x80, 0xBF};
  if (lead == 0xF0)
    return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3)
    return {4, 0x80, 0xBF};
  if (lead == 0xF4)
    return {4, 0x80, 0x8F}; // up to U+10FFFF
  return {0, 0, 0};
}

std::string unicode::replaceInvalid(llvm::StringRef text) {
  static constexpr llvm::StringLiteral kReplacement = "\xEF\xBF\xBD";
  std::string out;
  size_t at = 0, n = text.size();
  bool valid = true;
  while (at < n) {
    auto lead = (unsigned char)text[at];
    LeadByte rule = leadByte(lead);
    size_t good = rule.length ? 1 : 0; // the bytes of the character so far
    while (good && good < rule.length && at + good < n) {
      auto byte = (unsigned char)text[at + good];
      unsigned char low = good == 1 ? rule.low : 0x80;
      unsigned char high = good == 1 ? rule.high : 0xBF;
      if (byte < low || byte > high)
        break;
      ++good;
    }
    if (good == rule.length && good) {
      if (!valid)
        out.append(text.data() + at, good);
      at += good;
      continue;
    }
    // An ill-formed subsequence: its maximal subpart (at least a byte)
    // becomes one U+FFFD.
    if (valid) {
      out.assign(text.data(), at);
      valid = false;
    }
    out += kReplacement;
    at += std::max<size_t>(good, 1);
  }
  return valid ? text.str() : out;
}

unsigned unicode::charLength(llvm::StringRef text, size_t at) {
  unsigned length = leadByte((unsigned char)text[at]).length;
  return length ? length : 1;
}

uint32_t unicode::codePoint(llvm::StringRef text, size_t at) {
  auto byte = [&](size_t i) { return uint32_t((unsigned char)text[at + i]); };
  switch (charLength(text, at)) {
  case 2:
    return (byte(0) & 0x1F) << 6 | (byte(1) & 0x3F);
  case 3:
    return (byte(0) & 0x0F) << 12 | (byte(1) & 0x3F) << 6 | (byte(2) & 0x3F);
  case 4:
    return (byte(0) & 0x07) << 18 | (byte(1) & 0x3F) << 12 |
           (byte(2) & 0x3F) << 6 | (byte(3) & 0x3F);
  default:
    return byte(0);
  }
}

void unicode::append(uint32_t c, std::string &out) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | c >> 6);
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | c >> 12);
    out += char(0x80 | (c >> 6 & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | c >> 18);
    out += char(0x80 | (c >> 12 & 0x3F));
    out += char(0x80 | (c >> 6 & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

/// `text` normalized by `form` (ICU works in UTF-16).
static std::string normalize(llvm::StringRef text, const UNormalizer2 *form) {
  UErrorCode status = U_ZERO_ERROR;
  int32_t length = 0;
  u_strFromUTF8(nullptr, 0, &length, text.data(), int32_t(text.size()),
                &status);
  status = U_ZERO_ERROR;
  std::vector<UChar> wide(length + 1);
  u_strFromUTF8(wide.data(), length + 1, nullptr, text.data(),
                int32_t(text.size()), &status);
  // Text already normalized (most) is returned as it is.
  if (unorm2_isNormalized(form, wide.data(), length, &status) &&
      U_SUCCESS(status))
    return text.str();
  status = U_ZERO_ERROR;
  int32_t normalizedLength =
      unorm2_normalize(form, wide.data(), length, nullptr, 0, &status);
  status = U_ZERO_ERROR;
  std::vector<UChar> normalized(normalizedLength + 1);
  unorm2_normalize(form, wide.data(), length, normalized.data(),
                   normalizedLength + 1, &status);
  status = U_ZERO_ERROR;
  int32_t bytes = 0;
  u_strToUTF8(nullptr, 0, &bytes, normalized.data(), normalizedLength, &status);
  status = U_ZERO_ERROR;
  std::string out(bytes + 1, '\0');
  u_strToUTF8(out.data(), bytes + 1, nullptr, normalized.data(),
              normalizedLength, &status);
  out.resize(bytes);
  return out;
}

std::string unicode::nfc(llvm::StringRef text) {
  UErrorCode status = U_ZERO_ERROR;
  return normalize(text, unorm2_getNFCInstance(&status));
}

std::string unicode::nfkc(llvm::StringRef text) {
  UErrorCode status = U_ZERO_ERROR;
  return normalize(text, unorm2_getNFKCInstance(&status));
}

bool unicode::isWhitespace(uint32_t c) {
  return u_hasBinaryProperty(UChar32(c), UCHAR_WHITE_SPACE);
}

bool unicode::isAlphanumeric(uint32_t c) {
  if (u_hasBinaryProperty(UChar32(c), UCHAR_ALPHABETIC))
    return true;
  int8_t type = u_charType(UChar32(c));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER ||
         type == U_OTHER_NUMBER;
}
