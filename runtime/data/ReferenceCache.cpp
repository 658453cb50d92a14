//===- ReferenceCache.cpp - DPO's reference as a file keeps it ------------===//

#include "runtime/data/ReferenceCache.h"

#include "support/Json.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

#include <cmath>

using namespace twill;

static llvm::Error cacheError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

/// How a fingerprint is written: 0x and 16 hex digits.
static std::string hex(uint64_t fingerprint) {
  return llvm::formatv("{0:x16}", fingerprint).str();
}

uint64_t twill::referenceFingerprint(llvm::ArrayRef<Row> rows,
                                     llvm::StringRef base) {
  std::vector<uint64_t> parts;
  for (const Row &row : rows)
    for (const std::vector<int32_t> *field :
         {&row.tokens, &row.labels, &row.positions, &row.segments})
      parts.push_back(llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(
          reinterpret_cast<const uint8_t *>(field->data()),
          field->size() * sizeof(int32_t))));
  parts.push_back(llvm::xxh3_64bits(base));
  return llvm::xxh3_64bits(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(parts.data()),
                              parts.size() * sizeof(uint64_t)));
}

std::string
twill::printReferenceCache(llvm::ArrayRef<std::array<float, 2>> values,
                           uint64_t fingerprint) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(llvm::json::Object{{"fingerprint", hex(fingerprint)},
                                             {"rows", int64_t(values.size())}})
     << "\n";
  // Doubles print with every digit: each float reads back exactly.
  for (const std::array<float, 2> &pair : values)
    os << llvm::json::Value(llvm::json::Object{{"chosen", double(pair[0])},
                                               {"rejected", double(pair[1])}})
       << "\n";
  return text;
}

llvm::Expected<std::vector<std::array<float, 2>>>
twill::parseReferenceCache(llvm::StringRef text, int64_t rows,
                           uint64_t fingerprint) {
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n', -1, /*KeepEmpty=*/false);
  if (lines.empty())
    return cacheError("empty");
  llvm::Expected<llvm::json::Value> header = parseJson(lines[0], "line 1");
  if (!header)
    return header.takeError();
  const llvm::json::Object *fields = header->getAsObject();
  std::optional<llvm::StringRef> written =
      fields ? fields->getString("fingerprint") : std::nullopt;
  std::optional<int64_t> count =
      fields ? fields->getInteger("rows") : std::nullopt;
  if (!written || !count)
    return cacheError("line 1 is no header (\"fingerprint\", \"rows\")");
  if (*written != hex(fingerprint))
    return cacheError("made for other rows or another base");
  if (*count != rows || (int64_t)lines.size() - 1 != rows)
    return cacheError(
        llvm::formatv("holds {0} rows (header: {1}), not the {2} of the data",
                      lines.size() - 1, *count, rows));
  std::vector<std::array<float, 2>> values;
  values.reserve(rows);
  for (auto [index, line] : llvm::enumerate(llvm::drop_begin(lines))) {
    std::string where = llvm::formatv("line {0}", index + 2).str();
    llvm::Expected<llvm::json::Value> value = parseJson(line, where);
    if (!value)
      return value.takeError();
    const llvm::json::Object *pair = value->getAsObject();
    std::optional<double> chosen =
        pair ? pair->getNumber("chosen") : std::nullopt;
    std::optional<double> rejected =
        pair ? pair->getNumber("rejected") : std::nullopt;
    if (!chosen || !rejected)
      return cacheError(where + ": no \"chosen\" and \"rejected\"");
    std::array<float, 2> logps = {float(*chosen), float(*rejected)};
    if (!std::isfinite(logps[0]) || !std::isfinite(logps[1]))
      return cacheError(where + ": a log-probability beyond float's range");
    values.push_back(logps);
  }
  return values;
}
