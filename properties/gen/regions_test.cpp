// SPDX-License-Identifier: Apache-2.0
// The decode regions: each applies only where the description allows it,
// draws inside the description, and lands where it says; the weighted
// generator draws half its calls from the general generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "reference/decode.hpp"
#include "properties/case/host_case.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/gen/kernel_gen.hpp"

namespace pav::props {
namespace {

using adapters::Feature;
using adapters::KernelDescription;
using kernels::CacheLayout;
using kernels::DType;
using kernels::PageTable;
using kernels::ScaleKind;

// A split-KV kernel that takes a split ceiling and declares every variant.
KernelDescription wide() {
  KernelDescription d;
  d.name = "wide";
  d.q_dtypes = {DType::bf16, DType::f16};
  d.cache_dtypes = {DType::fp8_e4m3fn, DType::bf16};
  d.cache_layouts = {CacheLayout::packed, CacheLayout::nhd};
  d.v_layouts = {kernels::VLayout::plain};
  d.kv_storage = {adapters::KvStorage::separate};
  d.page_tables = {PageTable::block_table};
  d.scale_kinds = {ScaleKind::none, ScaleKind::per_tensor};
  d.block_sizes = {1, 16, 64};
  d.head_dims = {64, 128};
  d.gqa_ratios = {1, 2, 4, 8, 12, 20};
  d.min_q_len = 1;
  d.max_q_len = 8;
  d.split = adapters::Split::self;
  d.split_ceiling = true;
  d.features = {Feature::window, Feature::soft_cap, Feature::sinks, Feature::alibi};
  d.profile = {pav::reference::QQuant::none, pav::reference::PRound::none, DType::none};
  adapters::canonicalize(d);
  return d;
}

// One request at a time, q_len 1, powers of two only, no variants, no ceiling.
KernelDescription narrow() {
  KernelDescription d = wide();
  d.name = "narrow";
  d.gqa_ratios = {1, 2, 4, 8};
  d.max_q_len = 1;
  d.split_ceiling = false;
  d.features.clear();
  d.max_num_seqs = 1;
  adapters::canonicalize(d);
  return d;
}

bool near_multiple(int32_t len, int32_t unit) { return unit > 0 && (len % unit <= 1 || len % unit == unit - 1); }

// What a call drawn in `region` must show.
std::string region_shows(const std::string& region, const CaseSpec& s, const KernelDescription& d) {
  const int32_t longest = *std::max_element(s.lens.begin(), s.lens.end());
  const int32_t shortest = *std::min_element(s.lens.begin(), s.lens.end());
  if (region == "uneven-window") {
    if (s.window_left < 0) return "no window";
    if (s.lens.size() < 2 || longest < 1500) return "no long request beside short ones";
    for (int32_t len : s.lens)
      if (len < 300 && s.block_size > 1 && len % s.block_size == 0) return "a short request ends on a page boundary";
  } else if (region == "empty-splits") {
    if (s.lens.size() < 2 || shortest > 2 || longest < 1000) return "no empty request beside a long one";
    if (s.max_partitions != 64) return "not the most splits";
  } else if (region == "short-vs-splits") {
    if (longest > 40 || s.max_partitions != 64) return "a request not shorter than its splits";
  } else if (region == "q-len") {
    if (s.q_len < 2 || s.q_len > 5) return "q_len " + std::to_string(s.q_len);
  } else if (region == "extreme-logits") {
    if (s.extreme_logits == 0) return "no extreme logits";
  } else if (region == "sinks") {
    if (!s.sinks || s.sinks->size() != size_t(s.hkv * s.group)) return "no sink per head";
    for (float v : *s.sinks)
      if (v != 50.0f && v != -50.0f) return "a sink neither dominant nor negligible";
  } else if (region == "gqa-rare") {
    const std::vector<int64_t> rare = rare_gqa_ratios(d);
    if (std::find(rare.begin(), rare.end(), int64_t(s.group)) == rare.end()) return "G " + std::to_string(s.group);
  } else if (region == "boundary-lengths") {
    for (int32_t len : s.lens)
      if (len > 0 && !near_multiple(len, s.block_size) && !near_multiple(len, 16))
        return "length " + std::to_string(len) + " off every boundary";
  }
  return "";
}

TEST(DecodeRegions, OnlyTheRegionsADescriptionAllowsAreListed) {
  EXPECT_EQ(decode_regions(wide()),
            (std::vector<std::string>{"uneven-window", "empty-splits", "short-vs-splits", "q-len", "extreme-logits",
                                      "sinks", "gqa-rare", "boundary-lengths"}));
  EXPECT_EQ(decode_regions(narrow()), (std::vector<std::string>{"extreme-logits", "boundary-lengths"}));
  // Each feature alone brings its region back.
  KernelDescription two = narrow();
  two.max_num_seqs = 2;
  EXPECT_EQ(decode_regions(two), (std::vector<std::string>{"empty-splits", "extreme-logits", "boundary-lengths"}));
  KernelDescription q2 = narrow();
  q2.max_q_len = 2;
  EXPECT_EQ(decode_regions(q2), (std::vector<std::string>{"q-len", "extreme-logits", "boundary-lengths"}));
  KernelDescription g3 = narrow();
  g3.gqa_ratios = {1, 3};
  EXPECT_EQ(decode_regions(g3), (std::vector<std::string>{"extreme-logits", "gqa-rare", "boundary-lengths"}));
  EXPECT_THROW(gen_kernel_case_in(narrow(), "sinks"), std::invalid_argument);
  EXPECT_THROW(gen_kernel_case_in(wide(), "no-such-region"), std::invalid_argument);
}

TEST(DecodeRegions, EachRegionDrawsInsideTheDescriptionWhereItSays) {
  const KernelDescription d = wide();
  for (const std::string& region : decode_regions(d)) {
    SCOPED_TRACE(region);
    const rc::Gen<CaseSpec> gen = gen_kernel_case_in(d, region);
    int in_region = 0;
    for (uint64_t seed = 1; seed <= 60; ++seed) {
      const CaseSpec s = sample(gen, seed, fuzz::case_size(seed));
      ASSERT_TRUE(spec_within(s, d)) << "seed " << seed;
      ASSERT_NO_THROW(check_case_spec(s)) << "seed " << seed;
      if (s.region == kRegionGeneral) continue;  // a draw the region could not place
      ASSERT_EQ(s.region, region) << "seed " << seed;
      ++in_region;
      EXPECT_EQ(region_shows(region, s, d), "") << "seed " << seed;
    }
    // A fallback is the exception, not the rule.
    EXPECT_GE(in_region, 45);
  }
}

TEST(DecodeRegions, TheWeightedGeneratorDrawsHalfGeneralAndEveryRegion) {
  const KernelDescription d = wide();
  const rc::Gen<CaseSpec> gen = gen_kernel_case_weighted(d);
  std::map<std::string, int> seen;
  const int n = 1600;
  for (uint64_t seed = 1; seed <= uint64_t(n); ++seed) ++seen[sample(gen, seed, fuzz::case_size(seed)).region];
  // 8 regions: half the picks general, 1/16 each region (fallbacks go to general).
  EXPECT_GE(seen[kRegionGeneral], n * 40 / 100);
  EXPECT_LE(seen[kRegionGeneral], n * 65 / 100);
  for (const std::string& region : decode_regions(d)) EXPECT_GE(seen[region], n * 3 / 100) << region;
  // The plain generator names no region but general.
  const CaseSpec plain = sample(gen_kernel_case(d), 7, 50);
  EXPECT_EQ(plain.region, "");
}

}  // namespace
}  // namespace pav::props
