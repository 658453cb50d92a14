//===- ReferenceCacheTest.cpp - DPO's reference as a file keeps it --------===//

#include "runtime/data/ReferenceCache.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace twill;

namespace {

std::vector<Row> someRows() {
  Row a{{1, 2, 3}, {2, 3, -100}, {0, 1, 2}, {0, 0, 1}};
  Row b{{4, 5, 6}, {5, 6, -100}, {0, 1, 2}, {0, 1, 1}};
  return {a, b};
}

TEST(ReferenceCache, EveryFloatReadsBackExactly) {
  std::vector<KeptPair> values = {
      std::array<float, 2>{-43.591983795166016f, -1e-30f},
      std::nullopt, // a row the pass did not read
      std::array<float, 2>{std::nextafter(-7.0f, 0.0f), -123456.789f}};
  std::string text = printReferenceCache(values, 0x0123456789abcdefULL, 42);
  auto read = parseReferenceCache(text, 3, 0x0123456789abcdefULL);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->start, 42u);
  ASSERT_EQ(read->values.size(), 3u);
  EXPECT_FALSE(read->values[1]);
  for (int r : {0, 2})
    for (int s = 0; s < 2; ++s)
      EXPECT_EQ((*read->values[r])[s], (*values[r])[s]); // bit for bit
  EXPECT_LE(text.size(), maxReferenceCacheBytes(3));
}

std::string errorOf(llvm::StringRef text, int64_t rows, uint64_t fingerprint) {
  auto read = parseReferenceCache(text, rows, fingerprint);
  return read ? std::string("none") : llvm::toString(read.takeError());
}

std::vector<KeptPair> pairs(std::vector<std::array<float, 2>> values) {
  return {values.begin(), values.end()};
}

TEST(ReferenceCache, HoldsNothingForOtherRowsOrMalformedLines) {
  std::string text =
      printReferenceCache(pairs({{-1.0f, -2.0f}, {-3.0f, -4.0f}}), 7, 0);
  EXPECT_EQ(errorOf(text, 2, 8), "made for other rows or another base");
  EXPECT_EQ(errorOf(text, 3, 7),
            "holds 2 rows (header: 2), not the 3 of the data");
  // Cut short after its header.
  EXPECT_EQ(errorOf(text.substr(0, text.find('\n') + 1), 2, 7),
            "holds 0 rows (header: 2), not the 2 of the data");
  EXPECT_EQ(errorOf("", 2, 7), "empty");
  EXPECT_EQ(errorOf("[1, 2]\n", 2, 7),
            "line 1 is no header (\"fingerprint\", \"rows\", \"start\", "
            "\"checksum\")");
  std::string header = text.substr(0, text.find('\n') + 1);
  EXPECT_EQ(errorOf(header + "{\"chosen\": -1}\n{\"chosen\": -1, "
                             "\"rejected\": -2}\n",
                    2, 7),
            "line 2: no \"chosen\" and \"rejected\"");
  EXPECT_NE(
      errorOf(header + "{\"chosen\": -1, \"rejected\": -2}\nnot json\n", 2, 7)
          .find("line 3: not valid JSON"),
      std::string::npos);
  EXPECT_EQ(errorOf(header + "{\"chosen\": -1, \"rejected\": -2}\n"
                             "{\"chosen\": -1e39, \"rejected\": -2}\n",
                    2, 7),
            "line 3: a log-probability beyond float's range");
  // A sequence's probability is at most 1.
  EXPECT_EQ(errorOf(header + "{\"chosen\": -1, \"rejected\": -2}\n"
                             "{\"chosen\": -3, \"rejected\": 0.5}\n",
                    2, 7),
            "line 3: a log-probability above 0");
}

TEST(ReferenceCache, EditedValuesAreRefused) {
  std::string text =
      printReferenceCache(pairs({{-1.0f, -2.0f}, {-3.0f, -4.0f}}), 7, 0);
  std::string edited = text;
  edited.replace(edited.find("-3"), 2, "-5");
  EXPECT_EQ(errorOf(edited, 2, 7),
            "its lines are not those it was written with (their checksum is "
            "not the header's): edited");
  std::string dropped = text;
  dropped.replace(dropped.rfind("{"), std::string::npos, "null\n");
  EXPECT_NE(errorOf(dropped, 2, 7).find("edited"), std::string::npos);
}

TEST(ReferenceCache, TheFingerprintIsTheRowsAndTheBase) {
  std::vector<Row> rows = someRows();
  uint64_t fingerprint = referenceFingerprint(rows, "base");
  EXPECT_EQ(referenceFingerprint(someRows(), "base"), fingerprint);
  EXPECT_NE(referenceFingerprint(rows, "another base"), fingerprint);
  // Any field of any row, or their order.
  for (int field = 0; field < 4; ++field) {
    std::vector<Row> changed = someRows();
    std::vector<int32_t> *fields[] = {&changed[1].tokens, &changed[1].labels,
                                      &changed[1].positions,
                                      &changed[1].segments};
    fields[field]->back() += 1;
    EXPECT_NE(referenceFingerprint(changed, "base"), fingerprint) << field;
  }
  std::vector<Row> swapped = {rows[1], rows[0]};
  EXPECT_NE(referenceFingerprint(swapped, "base"), fingerprint);
  // A row's reference itself is not what it is computed for.
  rows[0].reference = {{-1.0f, -2.0f}};
  EXPECT_EQ(referenceFingerprint(rows, "base"), fingerprint);
}

} // namespace
