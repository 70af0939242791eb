// SPDX-License-Identifier: Apache-2.0
// Numerics profiles: the stable names, their parsers, and pav's own profile.
#include "kernels/numerics_profile.hpp"

#include <gtest/gtest.h>

namespace pav::kernels {
namespace {

TEST(NumericsProfile, NamesAreStable) {
  // These spellings are written to case files and cross the kernel ABI and the
  // worker protocol: a rename breaks every saved file.
  EXPECT_EQ(to_string(QQuant::fp8_per_row), "fp8_per_row");
  EXPECT_EQ(to_string(QQuant::none), "none");
  EXPECT_EQ(to_string(PRound::fp8_running_max), "fp8_running_max");
  EXPECT_EQ(to_string(PRound::bf16), "bf16");
  EXPECT_EQ(to_string(PRound::f16), "f16");
  EXPECT_EQ(to_string(PRound::none), "none");
  EXPECT_EQ(to_string(NumericsProfile{}), "q=fp8_per_row p=fp8_running_max partial=bf16");
  EXPECT_EQ(to_string(NumericsProfile{QQuant::none, PRound::f16, DType::f32}), "q=none p=f16 partial=f32");
}

TEST(NumericsProfile, ParsersRoundTripAndRefuseUnknownNames) {
  for (QQuant q : {QQuant::fp8_per_row, QQuant::none}) {
    QQuant got = q == QQuant::none ? QQuant::fp8_per_row : QQuant::none;
    ASSERT_TRUE(parse_q_quant(to_string(q), got));
    EXPECT_EQ(got, q);
  }
  for (PRound p : {PRound::fp8_running_max, PRound::bf16, PRound::f16, PRound::none}) {
    PRound got = p == PRound::none ? PRound::bf16 : PRound::none;
    ASSERT_TRUE(parse_p_round(to_string(p), got));
    EXPECT_EQ(got, p);
  }
  // Partial dtypes are spelled as the kernels' dtype names.
  for (DType d : {DType::bf16, DType::f16, DType::f32, DType::fp8_e4m3fn, DType::fp8_e4m3fnuz, DType::fp8_e5m2,
                  DType::none}) {
    DType got = d == DType::none ? DType::bf16 : DType::none;
    ASSERT_TRUE(parse_partial_dtype(kernels::to_string(d), got)) << kernels::to_string(d);
    EXPECT_EQ(got, d);
  }
  QQuant q = QQuant::none;
  PRound p = PRound::bf16;
  DType d = DType::f16;
  for (const char* bad : {"", "fp8", "FP8_PER_ROW", "none ", "per_row", "fp8_e4m3fn"}) {
    EXPECT_FALSE(parse_q_quant(bad, q)) << bad;
  }
  for (const char* bad : {"", "fp8_scaled", "FP8", "bfloat16", "BF16", "f32", "fp8_running_max "}) {
    EXPECT_FALSE(parse_p_round(bad, p)) << bad;
  }
  for (const char* bad : {"", "fp8", "fp8_e4m3", "e5m2", "i32", "i64", "float32", "F32", "None"}) {
    EXPECT_FALSE(parse_partial_dtype(bad, d)) << bad;
  }
  // A failed parse leaves the value as it was.
  EXPECT_EQ(q, QQuant::none);
  EXPECT_EQ(p, PRound::bf16);
  EXPECT_EQ(d, DType::f16);
}

TEST(NumericsProfile, PavProfileFollowsComputeAndPartial) {
  kernels::DecodeOptions o;
  o.compute = DType::fp8_e4m3fn;
  o.partial = DType::bf16;
  EXPECT_EQ(pav_profile(o), (NumericsProfile{QQuant::fp8_per_row, PRound::fp8_running_max, DType::bf16}));
  o.compute = DType::fp8_e4m3fnuz;
  o.partial = DType::f32;
  EXPECT_EQ(pav_profile(o), (NumericsProfile{QQuant::fp8_per_row, PRound::fp8_running_max, DType::f32}));
  o.compute = DType::bf16;
  o.partial = DType::f16;
  EXPECT_EQ(pav_profile(o), (NumericsProfile{QQuant::none, PRound::none, DType::f16}));
}

TEST(NumericsProfile, ErrorNamesABadPartialDtype) {
  EXPECT_FALSE(profile_error(NumericsProfile{}).has_value());
  for (DType d : {DType::bf16, DType::f16, DType::f32, DType::fp8_e4m3fn, DType::fp8_e4m3fnuz, DType::fp8_e5m2,
                  DType::none})
    EXPECT_FALSE(profile_error(NumericsProfile{QQuant::none, PRound::none, d}).has_value());
  for (DType d : {DType::i32, DType::i64, DType(77)}) {
    const auto e = profile_error(NumericsProfile{QQuant::none, PRound::none, d});
    ASSERT_TRUE(e.has_value());
    EXPECT_NE(e->find("partial"), std::string::npos) << *e;
  }
  // Enum values outside the names are refused too.
  EXPECT_TRUE(profile_error(NumericsProfile{QQuant(7), PRound::none, DType::f32}).has_value());
  EXPECT_TRUE(profile_error(NumericsProfile{QQuant::none, PRound(9), DType::f32}).has_value());
}

}  // namespace
}  // namespace pav::kernels
