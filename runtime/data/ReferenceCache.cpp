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

uint64_t twill::maxReferenceCacheBytes(int64_t rows) {
  // A row's line: {"chosen":X,"rejected":Y} with X and Y of at most 24
  // characters each (-1.2345678901234567e-308).
  return 4096 + uint64_t(rows) * 96;
}

/// The lines after the header, as the checksum covers them.
static uint64_t checksumOf(llvm::StringRef body) {
  return llvm::xxh3_64bits(body);
}

std::string twill::printReferenceCache(llvm::ArrayRef<KeptPair> values,
                                       uint64_t fingerprint, uint64_t start) {
  std::string body;
  llvm::raw_string_ostream os(body);
  // Doubles print with every digit: each float reads back exactly.
  for (const KeptPair &pair : values)
    os << (pair ? llvm::json::Value(
                      llvm::json::Object{{"chosen", double((*pair)[0])},
                                         {"rejected", double((*pair)[1])}})
                : llvm::json::Value(nullptr))
       << "\n";
  std::string header;
  llvm::raw_string_ostream(header) << llvm::json::Value(llvm::json::Object{
                                          {"fingerprint", hex(fingerprint)},
                                          {"rows", int64_t(values.size())},
                                          {"start", hex(start)},
                                          {"checksum", hex(checksumOf(body))}})
                                   << "\n";
  return header + body;
}

/// A header field written by hex().
static std::optional<uint64_t> hexField(const llvm::json::Object &fields,
                                        llvm::StringRef name) {
  std::optional<llvm::StringRef> text = fields.getString(name);
  uint64_t value;
  if (!text || !text->consume_front("0x") || text->size() != 16 ||
      text->getAsInteger(16, value))
    return std::nullopt;
  return value;
}

llvm::Expected<KeptReference> twill::parseReferenceCache(llvm::StringRef text,
                                                         int64_t rows,
                                                         uint64_t fingerprint) {
  if (text.empty())
    return cacheError("empty");
  auto [headerLine, body] = text.split('\n');
  llvm::Expected<llvm::json::Value> header = parseJson(headerLine, "line 1");
  if (!header)
    return header.takeError();
  const llvm::json::Object *fields = header->getAsObject();
  std::optional<uint64_t> written, start, checksum;
  std::optional<int64_t> count;
  if (fields) {
    written = hexField(*fields, "fingerprint");
    start = hexField(*fields, "start");
    checksum = hexField(*fields, "checksum");
    count = fields->getInteger("rows");
  }
  if (!written || !count || !start || !checksum)
    return cacheError("line 1 is no header (\"fingerprint\", \"rows\", "
                      "\"start\", \"checksum\")");
  if (*written != fingerprint)
    return cacheError("made for other rows or another base");
  llvm::SmallVector<llvm::StringRef> lines;
  body.split(lines, '\n', -1, /*KeepEmpty=*/false);
  if (*count != rows || (int64_t)lines.size() != rows)
    return cacheError(
        llvm::formatv("holds {0} rows (header: {1}), not the {2} of the data",
                      lines.size(), *count, rows));
  KeptReference kept;
  kept.start = *start;
  kept.values.reserve(rows);
  for (auto [index, line] : llvm::enumerate(lines)) {
    std::string where = llvm::formatv("line {0}", index + 2).str();
    llvm::Expected<llvm::json::Value> value = parseJson(line, where);
    if (!value)
      return value.takeError();
    if (value->getAsNull()) {
      kept.values.push_back(std::nullopt);
      continue;
    }
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
    // A sequence's probability is at most 1.
    if (logps[0] > 0 || logps[1] > 0)
      return cacheError(where + ": a log-probability above 0");
    kept.values.push_back(logps);
  }
  // Well-formed lines that are not those written: edited by hand.
  if (checksumOf(body) != *checksum)
    return cacheError("its lines are not those it was written with (their "
                      "checksum is not the header's): edited");
  return kept;
}
