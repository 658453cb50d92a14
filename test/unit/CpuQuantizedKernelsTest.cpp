//===- CpuQuantizedKernelsTest.cpp - quantized bases' kernels -------------===//
//
// The cpu kernels of quantized bases (NF4 and FP8 dequantization, inputs
// rounded to e4m3) against naive loops of their definitions.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/MatmulShape.h"
#include "test/unit/RandomValues.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace twill;

namespace {

using test::randomValues;

// The naive reference: each value's level times its block's scale, the
// block found by its place in the whole weight; padded rows zero.
TEST(CpuKernels, DequantizeNf4IsLevelTimesItsBlocksScale) {
  const int64_t wholeRows = 5, wholeColumns = 24, blockSize = 4, nested = 3;
  int64_t blocks = wholeRows * wholeColumns / blockSize;
  std::vector<uint8_t> codes(wholeRows * wholeColumns / 2), absmax(blocks);
  for (size_t i = 0; i < codes.size(); ++i)
    codes[i] = uint8_t(i * 37 + 11);
  for (int64_t b = 0; b < blocks; ++b)
    absmax[b] = uint8_t(b * 53 + 7);
  std::vector<float> nestedScales = {0.5f, 1.25f, 3.0f, 0.75f, 2.0f,
                                     1.5f, 0.25f, 4.0f, 1.0f,  2.5f};
  float offset = 0.0625f;
  nf4::Tables tables = nf4::tables();
  auto expected = [&](int64_t r, int64_t c) {
    if (r >= wholeRows)
      return 0.0f;
    int64_t i = r * wholeColumns + c, block = i / blockSize;
    float scale =
        tables.dynamic[absmax[block]] * nestedScales[block / nested] + offset;
    int code = i % 2 ? codes[i / 2] & 0xf : codes[i / 2] >> 4;
    return nf4::kLevels[code] * scale;
  };
  // The whole weight; rows 3 to 5 of it (row 5 a rank's padding); and
  // columns 8 to 15 (two whole blocks of each row).
  struct Case {
    int64_t rows, columns, firstRow, firstColumn;
  };
  for (Case k : {Case{5, 24, 0, 0}, Case{3, 24, 3, 0}, Case{5, 8, 0, 8}}) {
    std::vector<uint8_t> blockCodes, blockAbsmax;
    for (int64_t r = 0; r < k.rows; ++r)
      for (int64_t c = 0; c < k.columns; ++c) {
        int64_t wr = k.firstRow + r, wc = k.firstColumn + c;
        bool real = wr < wholeRows;
        if (c % 2 == 0)
          blockCodes.push_back(real ? codes[(wr * wholeColumns + wc) / 2] : 0);
        if (c % blockSize == 0)
          blockAbsmax.push_back(
              real ? absmax[(wr * wholeColumns + wc) / blockSize] : 0);
      }
    nf4::Geometry g{k.rows,    k.columns,    k.firstRow, k.firstColumn,
                    wholeRows, wholeColumns, blockSize,  nested};
    std::vector<float> out(k.rows * k.columns, -1.0f);
    cpu::dequantizeNf4(blockCodes.data(), blockAbsmax.data(),
                       nestedScales.data(), offset, g, out.data());
    for (int64_t r = 0; r < k.rows; ++r)
      for (int64_t c = 0; c < k.columns; ++c)
        EXPECT_EQ(out[r * k.columns + c],
                  expected(k.firstRow + r, k.firstColumn + c))
            << k.firstRow + r << ", " << k.firstColumn + c;
    // A quantized matmul's panels of 2 rows (nf4Rows) are the block's rows.
    for (int64_t first = 0; first < k.rows; first += 2) {
      int64_t count = std::min<int64_t>(2, k.rows - first);
      std::vector<float> panel(count * k.columns, -1.0f);
      cpu::dequantizeNf4(blockCodes.data() + first * k.columns / 2,
                         blockAbsmax.data() + first * k.columns / blockSize,
                         nestedScales.data(), offset, nf4Rows(g, first, count),
                         panel.data());
      EXPECT_TRUE(std::equal(panel.begin(), panel.end(),
                             out.begin() + first * k.columns))
          << "rows from " << first;
    }
  }
}

// Every e4m3 byte decodes to its value (sign, 4 exponent bits of bias 7,
// 3 mantissa bits; subnormals below 2^-6; 0x7f and 0xff NaN), and values
// round to the nearest byte, ties to even, past 448 to NaN, as torch's
// float8_e4m3fn cast does.
TEST(CpuKernels, Fp8BytesAndRounding) {
  EXPECT_EQ(fp8::toFloat(0x00), 0.0f);
  EXPECT_EQ(fp8::toFloat(0x01), 0x1p-9f); // least subnormal
  EXPECT_EQ(fp8::toFloat(0x08), 0x1p-6f); // least normal
  EXPECT_EQ(fp8::toFloat(0x38), 1.0f);
  EXPECT_EQ(fp8::toFloat(0x7e), 448.0f); // largest finite
  EXPECT_EQ(fp8::toFloat(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(fp8::toFloat(0x7f)));
  EXPECT_TRUE(std::isnan(fp8::toFloat(0xff)));
  for (int bits = 0; bits < 256; ++bits) {
    if ((bits & 0x7f) != 0x7f && bits != 0x80) { // -0 encodes as 0x80 too
      EXPECT_EQ(fp8::fromFloat(fp8::toFloat(uint8_t(bits))), bits) << bits;
    }
  }
  EXPECT_EQ(fp8::fromFloat(-0.0f), 0x80);
  EXPECT_EQ(fp8::fromFloat(1.0625f), 0x38);    // a tie: to even, 1
  EXPECT_EQ(fp8::fromFloat(1.1875f), 0x3a);    // a tie: to even, 1.25
  EXPECT_EQ(fp8::fromFloat(1.06f), 0x38);      // below the tie: 1
  EXPECT_EQ(fp8::fromFloat(1.07f), 0x39);      // above it: 1.125
  EXPECT_EQ(fp8::fromFloat(0x1.8p-10f), 0x01); // 0.75 of 2^-9: 1 unit
  EXPECT_EQ(fp8::fromFloat(0x1.8p-9f), 0x02);  // 1.5 units, a tie: 2
  EXPECT_EQ(fp8::fromFloat(464.0f), 0x7e);     // a tie at the top: 448
  EXPECT_EQ(fp8::fromFloat(465.0f), 0x7f);
  EXPECT_EQ(fp8::fromFloat(-1e9f), 0xff);
  EXPECT_EQ(fp8::fromFloat(0x1.fp-7f), 0x08); // rounds up into the normals
}

// The naive reference: each byte's value times its row's scale.
TEST(CpuKernels, DequantizeFp8IsValueTimesItsRowsScale) {
  const int64_t rows = 3, columns = 7;
  std::vector<uint8_t> values(rows * columns);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = uint8_t(i * 29 % 127);
  std::vector<float> scales = {0.5f, -3.0f, 0.0078125f}, out(values.size());
  cpu::dequantizeFp8(values.data(), scales.data(), rows, columns, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c)
      EXPECT_EQ(out[r * columns + c],
                fp8::toFloat(values[r * columns + c]) * scales[r]);
}

// roundToE4m3 keeps 3 mantissa bits with bit arithmetic; the reference is
// fromFloat's byte (double arithmetic) and its value, for every value
// half-way between two e4m3 values and either side of it, and at random.
TEST(CpuKernels, RoundToE4m3IsTheNearestE4m3Value) {
  auto reference = [](float v) {
    return fp8::toFloat(
        fp8::fromFloat(std::fmax(std::fmin(v, 448.0f), -448.0f)));
  };
  std::vector<float> values;
  for (int bits = 0; bits < 126; ++bits) {
    float low = fp8::toFloat(uint8_t(bits)),
          high = fp8::toFloat(uint8_t(bits + 1));
    float middle = (low + high) / 2; // exact: a tie
    values.insert(values.end(), {low, middle, std::nextafter(middle, 0.0f),
                                 std::nextafter(middle, 1e9f)});
  }
  for (float v : randomValues(4096, 11))
    values.push_back(v * 300);
  values.insert(values.end(), {500.0f, 464.0f, 1e30f, 0x1p-12f, 0.0f});
  for (float v : values)
    for (float signed_ : {v, -v})
      EXPECT_EQ(fp8::roundToE4m3(signed_), reference(signed_)) << signed_;
  EXPECT_TRUE(std::isnan(fp8::roundToE4m3(NAN)));
}

// The naive reference: each block's largest magnitude over 448 its scale,
// each value its e4m3 byte's value over that scale times it; a short last
// block, and a block of zeros that stays zeros.
TEST(CpuKernels, RoundToFp8RoundsEachBlockOverItsOwnScale) {
  const int64_t rows = 3, columns = 11, block = 4;
  std::vector<float> in = randomValues(rows * columns, 12), out(in.size());
  for (int64_t c = 4; c < 8; ++c)
    in[columns + c] = 0;
  in[5] = 1e-6f; // a block of one large and tiny values: subnormal codes
  cpu::roundToFp8(in.data(), rows, columns, block, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t first = 0; first < columns; first += block) {
      int64_t end = std::min(first + block, columns);
      double amax = 0;
      for (int64_t c = first; c < end; ++c)
        amax = std::max(amax, double(std::fabs(in[r * columns + c])));
      float scale = amax > 0 ? float(amax) / 448.0f : 1.0f;
      for (int64_t c = first; c < end; ++c) {
        float v = in[r * columns + c];
        EXPECT_EQ(out[r * columns + c],
                  fp8::toFloat(fp8::fromFloat(
                      std::fmax(std::fmin(v / scale, 448.0f), -448.0f))) *
                      scale)
            << r << " " << c;
      }
    }
  for (int64_t c = 4; c < 8; ++c)
    EXPECT_EQ(out[columns + c], 0.0f);
}

} // namespace
