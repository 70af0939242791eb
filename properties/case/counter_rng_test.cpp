// SPDX-License-Identifier: Apache-2.0
// Generated test data is the same bytes everywhere: generator 2's primitives
// and build_case's tensors against values pinned by an independent Python
// implementation (fixtures/generator-pins.json, properties/case/rng_reference.py);
// the legacy generator still replays files saved before it; a sequence's data
// does not depend on the rest of the batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_paths.hpp"
#include "kernels/codecs.hpp"
#include "properties/case/case_format.hpp"
#include "properties/case/counter_rng.hpp"
#include "properties/case/host_case.hpp"

namespace pav::props {
namespace {

using nlohmann::json;

json pins() {
  std::ifstream f(std::string(PAV_SOURCE_DIR) + "/fixtures/generator-pins.json");
  EXPECT_TRUE(f.good()) << "fixtures/generator-pins.json is missing";
  return json::parse(f);
}

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

TEST(GeneratorPins, PrimitivesMatchTheIndependentImplementation) {
  const json p = pins();
  const json& want = p.at("primitives");
  const uint64_t seed = p.at("primitives_seed").get<uint64_t>();
  const uint64_t k = rng::key(seed, 9, 1, 2, 3);
  EXPECT_EQ(k, want.at("key").get<uint64_t>());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(rng::bits(k, i), want.at("bits")[i].get<uint64_t>()) << i;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(bits_of(rng::normal(k, i)), want.at("normal_bits")[i].get<uint32_t>()) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bits_of(rng::uniform(k, i)), want.at("uniform_bits")[i].get<uint32_t>()) << i;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(rng::below(k, i, 1000), want.at("below_1000")[i].get<uint64_t>()) << i;
  std::vector<int> perm(10);
  std::iota(perm.begin(), perm.end(), 0);
  rng::shuffle(perm, k);
  EXPECT_EQ(perm, want.at("shuffle_10").get<std::vector<int>>());
}

template <class T, class U, class A>
std::vector<U> first(const std::vector<T, A>& v, size_t n) {
  std::vector<U> out;
  for (size_t i = 0; i < std::min(n, v.size()); ++i) out.push_back(U(v[i]));
  return out;
}
std::vector<uint32_t> first_bits(const std::vector<float>& v, size_t n) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < std::min(n, v.size()); ++i) out.push_back(bits_of(v[i]));
  return out;
}

TEST(GeneratorPins, CaseTensorsMatchTheIndependentImplementation) {
  const json p = pins();
  int cases = 0;
  for (const json& c : p.at("cases")) {
    SCOPED_TRACE(c.at("spec").dump());
    const CaseSpec spec = case_from_json(c.at("spec"));  // through the case reader, generator field included
    ASSERT_EQ(spec.generator, 2);
    const HostCase h = build_case(spec);
    const json& e = c.at("expect");
    const json& n = c.at("first");
    auto count = [&](const char* name) { return n.at(name).get<size_t>(); };
    EXPECT_EQ((first<int32_t, int64_t>(h.block_tables, count("block_tables"))), e.at("block_tables").get<std::vector<int64_t>>());
    EXPECT_EQ((first<uint16_t, int64_t>(h.q, count("q_bits"))), e.at("q_bits").get<std::vector<int64_t>>());
    EXPECT_EQ((first<uint8_t, int64_t>(h.k, count("k_codes"))), e.at("k_codes").get<std::vector<int64_t>>());
    EXPECT_EQ((first<uint8_t, int64_t>(h.v, count("v_codes"))), e.at("v_codes").get<std::vector<int64_t>>());
    EXPECT_EQ(first_bits(h.k_scale, count("k_scale_bits")), e.at("k_scale_bits").get<std::vector<uint32_t>>());
    EXPECT_EQ(first_bits(h.v_scale, count("v_scale_bits")), e.at("v_scale_bits").get<std::vector<uint32_t>>());
    ++cases;
  }
  EXPECT_EQ(cases, 2);
}

// normal() has mean 0, variance 1 and the bounded support of a sum of four
// uniforms; uniform() stays in [0, 1); below() in [0, n); shuffle() permutes.
TEST(CounterRng, Distributions) {
  const uint64_t k = rng::key(1, 2, 3);
  double sum = 0, sum2 = 0, lo = 0, hi = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = rng::normal(k, i);
    sum += x;
    sum2 += x * x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum2 / n, 1.0, 0.01);
  EXPECT_LE(hi, 3.4642);
  EXPECT_GE(lo, -3.4642);
  EXPECT_GT(hi, 2.8);  // the tails are drawn
  EXPECT_LT(lo, -2.8);
  for (int i = 0; i < 10000; ++i) {
    const float u = rng::uniform(k, i);
    ASSERT_TRUE(u >= 0.0f && u < 1.0f) << u;
    ASSERT_LT(rng::below(k, i, 7), 7u);
  }
  std::vector<int> v(1000);
  std::iota(v.begin(), v.end(), 0);
  rng::shuffle(v, k);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  int fixed = 0;
  for (int i = 0; i < 1000; ++i) fixed += v[i] == i;
  EXPECT_LT(fixed, 10);  // about 1 expected
  // Every position can stay put (Fisher-Yates, not a cyclic shuffle): over many keys each does.
  std::vector<int> stays(5, 0);
  for (uint64_t s = 0; s < 400; ++s) {
    std::vector<int> w = {0, 1, 2, 3, 4};
    rng::shuffle(w, rng::key(s, 1));
    for (int i = 0; i < 5; ++i) stays[i] += w[i] == i;
  }
  for (int i = 0; i < 5; ++i) EXPECT_GT(stays[i], 40) << "position " << i;  // 80 expected
}

// The values of a sequence come from its own coordinates: adding a sequence
// to the batch (or dropping one after it) leaves its tokens' K, V and scales
// as they were, wherever the blocks land.
TEST(CounterRng, ASequencesDataDoesNotDependOnTheBatch) {
  CaseSpec a;
  a.lens = {70, 33};
  a.hkv = 2;
  a.group = 2;
  a.head_dim = 32;
  a.scales = ScaleKind::per_token;
  a.seed = 4242;
  CaseSpec b = a;
  b.lens = {70, 33, 500, 12};
  const HostCase x = build_case(a), y = build_case(b);
  const int64_t H = a.hkv, D = a.head_dim, bs = a.block_size;
  int64_t compared = 0;
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t t = 0; t < a.lens[s]; ++t) {
      const int64_t bx = x.block_tables[s * x.max_blocks + t / bs], by = y.block_tables[s * y.max_blocks + t / bs];
      const int64_t off = t % bs;
      for (int64_t h = 0; h < H; ++h) {
        ASSERT_EQ(x.k_scale[(bx * H + h) * bs + off], y.k_scale[(by * H + h) * bs + off]);
        for (int64_t d = 0; d < D; ++d) {
          ASSERT_EQ(x.k[kernels::k_offset(bx, h, d, off, H, D, bs)], y.k[kernels::k_offset(by, h, d, off, H, D, bs)])
              << "seq " << s << " token " << t;
          ASSERT_EQ(x.v[kernels::v_offset(a.v_layout, bx, h, d, off, H, D, bs)],
                    y.v[kernels::v_offset(a.v_layout, by, h, d, off, H, D, bs)]);
          ++compared;
        }
      }
    }
  EXPECT_EQ(compared, (70 + 33) * H * D);
  // Q rows of the shared sequences too.
  const int64_t row = int64_t(a.hkv) * a.group * D;
  EXPECT_TRUE(std::equal(x.q.begin(), x.q.begin() + 2 * row, y.q.begin()));
}

// A case file saved before generator 2 has no "generator" field and meant the
// legacy stream: one std::mt19937_64 through the standard library's normal and
// uniform distributions, block order shuffled first, then Q row by row. It
// still builds those bytes (with the standard library that saved it).
TEST(CounterRng, LegacyFilesReplayTheLegacyStream) {
  json j = case_to_json([] {
    CaseSpec s;
    s.lens = {40, 9};
    s.head_dim = 32;
    s.seed = 99;
    return s;
  }());
  EXPECT_EQ(j.at("generator"), 2);  // written by every save
  j.erase("generator");
  const CaseSpec legacy = case_from_json(j);
  EXPECT_EQ(legacy.generator, rng::kLegacyGenerator);
  const HostCase h = build_case(legacy);
  std::mt19937_64 mt(99);
  std::vector<int32_t> ids(4);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), mt);
  EXPECT_EQ(h.block_tables[0], ids[0]);
  EXPECT_EQ(h.block_tables[3], ids[3]);  // seq 1's block (max_blocks 3)
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < 32; ++i) ASSERT_EQ(h.q[i], kernels::f32_to_bf16(normal(mt))) << i;
  for (int i = 0; i < 32; ++i) normal(mt);  // seq 1's Q row
  std::uniform_real_distribution<float> unif(0.0f, 1.0f);
  EXPECT_EQ(h.k_scale[0], 0.03125f * (0.75f + 0.5f * unif(mt)));
  EXPECT_EQ(h.v_scale[0], 0.03125f * (0.75f + 0.5f * unif(mt)));
  // Token 0 of seq 0, head 0: K and V drawn element by element, interleaved.
  const int64_t blk = h.block_tables[0];
  for (int64_t d = 0; d < 32; ++d) {
    const uint8_t k = kernels::f32_to_fp8(normal(mt) * 32.0f, legacy.cache_dtype);
    const uint8_t v = kernels::f32_to_fp8(normal(mt) * 32.0f, legacy.cache_dtype);
    ASSERT_EQ(h.k[kernels::k_offset(blk, 0, d, 0, 1, 32, 16)], k) << d;
    ASSERT_EQ(h.v[kernels::v_offset(legacy.v_layout, blk, 0, d, 0, 1, 32, 16)], v) << d;
  }
  // The same spec under generator 2 is other data.
  CaseSpec now = legacy;
  now.generator = 2;
  EXPECT_NE(build_case(now).q, h.q);
}

TEST(CounterRng, CaseReaderChecksTheGeneratorField) {
  CaseSpec base;
  base.lens = {10};
  json j = case_to_json(base);
  for (const json& bad : {json(0), json(3), json(-1), json("2"), json(2.5)}) {
    j["generator"] = bad;
    try {
      case_from_json(j);
      ADD_FAILURE() << "generator " << bad.dump() << " accepted";
    } catch (const CaseError& e) {
      EXPECT_NE(std::string(e.what()).find(": generator: "), std::string::npos) << e.what();
    }
  }
  for (int ok : {1, 2}) {
    j["generator"] = ok;
    EXPECT_EQ(case_from_json(j).generator, ok);
    EXPECT_EQ(case_to_json(case_from_json(j)).at("generator"), ok);
  }
  CaseSpec s;
  s.lens = {10};
  EXPECT_NO_THROW(build_case(s));
  s.generator = 5;
  try {
    build_case(s);
    ADD_FAILURE() << "generator 5 built";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("generator: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace pav::props
