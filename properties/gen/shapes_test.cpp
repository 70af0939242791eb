// SPDX-License-Identifier: Apache-2.0
// Shapes, for kernels that compile per shape: a run's few shapes are drawn
// from their seed alone, distinct, inside the description, and together have
// what decode bugs need (several KV heads, grouped queries, q_len > 1, a rare
// ratio, each variant); every call of a shaped run is in one of them, its
// regions placed only in shapes that fit, and shrinking stays in them.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "properties/case/host_case.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/gen/kernel_gen.hpp"
#include "reference/decode.hpp"

namespace pav::props {
namespace {

using adapters::Feature;
using adapters::KernelDescription;
using kernels::CacheLayout;
using kernels::DType;
using kernels::PageTable;
using kernels::ScaleKind;

// Much like the Triton example: several dtypes, formats and page sizes,
// every GQA ratio to 32, q_len to 16, every variant.
KernelDescription jit() {
  KernelDescription d;
  d.name = "jit";
  d.q_dtypes = {DType::bf16, DType::f16};
  d.cache_dtypes = {DType::bf16, DType::f16, DType::fp8_e4m3fn};
  d.cache_layouts = {CacheLayout::nhd};
  d.kv_storage = {adapters::KvStorage::separate};
  d.page_tables = {PageTable::block_table, PageTable::csr};
  d.strided_cache = true;
  d.scale_kinds = {ScaleKind::none, ScaleKind::per_tensor};
  d.mixed_scales = true;
  d.block_sizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  d.head_dims = {64, 128, 256};
  for (int64_t g = 1; g <= 32; ++g) d.gqa_ratios.push_back(g);
  d.min_q_len = 1;
  d.max_q_len = 16;
  d.features = {Feature::window, Feature::soft_cap, Feature::sinks, Feature::alibi};
  d.profile = {pav::reference::QQuant::none, pav::reference::PRound::none, DType::none};
  d.compiles_per_shape = true;
  adapters::canonicalize(d);
  return d;
}

// One shape only: one of each, q_len 1, one KV head, no variant.
KernelDescription single() {
  KernelDescription d = jit();
  d.name = "single";
  d.q_dtypes = {DType::bf16};
  d.cache_dtypes = {DType::bf16};
  d.page_tables = {PageTable::block_table};
  d.strided_cache = false;
  d.scale_kinds = {ScaleKind::none};
  d.mixed_scales = false;
  d.block_sizes = {16};
  d.head_dims = {128};
  d.gqa_ratios = {4};
  d.max_q_len = 1;
  d.max_kv_heads = 1;
  d.strided_q = false;
  d.features.clear();
  adapters::canonicalize(d);
  return d;
}

// Every cache format, as the NumPy example worker declares.
KernelDescription every_format() {
  KernelDescription d = jit();
  d.name = "every-format";
  d.cache_dtypes = {DType::bf16, DType::f16, DType::fp8_e4m3fn, DType::fp8_e4m3fnuz, DType::fp8_e5m2};
  d.cache_layouts = {CacheLayout::packed, CacheLayout::nhd, CacheLayout::hnd};
  d.v_layouts = {kernels::VLayout::plain, kernels::VLayout::trans};
  d.kv_storage = {adapters::KvStorage::separate, adapters::KvStorage::combined, adapters::KvStorage::latent};
  d.mla_dims = {{512, 64}, {128, 64}};
  d.scale_kinds = {ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_head, ScaleKind::per_token};
  d.block_sizes = {1, 2, 8, 16, 32, 64, 128, 256};
  d.head_dims = {64, 80, 96, 128, 192, 256, 512, 576};
  d.max_q_len = 8;
  adapters::canonicalize(d);
  return d;
}

// The shapes of 20 base seeds spread as bench/find/find_rate.py spreads them,
// each handed to check with the seed in the trace.
template <class F>
void for_spread_seeds(const KernelDescription& d, int n, F check) {
  for (uint64_t i = 0; i < 20; ++i) {
    const uint64_t seed = 1 + 1000003 * i;
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    check(draw_shapes(d, n, seed, true));
  }
}

std::set<std::string> keys_of(const std::vector<CaseSpec>& shapes) {
  std::set<std::string> k;
  for (const CaseSpec& s : shapes) k.insert(shape_of(s));
  return k;
}

TEST(Shapes, AShapeIsWhatAKernelCompilesForNotItsLengthsOrValues) {
  CaseSpec a;
  a.lens = {100, 7};
  a.window_left = 3;
  a.seed = 1;
  CaseSpec b = a;
  b.lens = {5000};            // the batch and lengths vary within a shape
  b.window_left = 900;        // so does a variant's value
  b.seed = 99;                // and the data
  b.max_partitions = 8;       // and the split ceiling
  EXPECT_EQ(shape_of(a), shape_of(b));
  // Each of these is another shape.
  std::vector<CaseSpec> other(10, a);
  other[0].head_dim = 64;
  other[1].hkv = 2;
  other[2].group = 3;
  other[3].q_len = 2;
  other[4].block_size = 32;
  other[5].cache_dtype = DType::bf16;
  other[6].page_table = PageTable::csr;
  other[7].window_left = -1;  // the variant off
  other[8].sinks = std::vector<float>{1.0f};
  other[9].q_row_pad = 64;
  std::set<std::string> seen = {shape_of(a)};
  for (size_t i = 0; i < other.size(); ++i) EXPECT_TRUE(seen.insert(shape_of(other[i])).second) << i;
}

TEST(Shapes, ARunsShapesAreDrawnFromTheirSeedAloneDistinctAndInside) {
  const KernelDescription d = jit();
  for (const bool regions : {false, true})
    for (uint64_t seed : {1ull, 2ull, 1000003ull, 0xffffffffffffffffull}) {
      SCOPED_TRACE(::testing::Message() << "regions " << regions << " seed " << seed);
      const std::vector<CaseSpec> shapes = draw_shapes(d, 6, seed, regions);
      ASSERT_EQ(shapes.size(), 6u);
      EXPECT_EQ(keys_of(shapes).size(), 6u);
      for (const CaseSpec& s : shapes) {
        EXPECT_TRUE(spec_within(s, d)) << shape_of(s);
        EXPECT_NO_THROW(check_case_spec(s));
      }
      EXPECT_EQ(keys_of(draw_shapes(d, 6, seed, regions)), keys_of(shapes));  // the same seed, the same shapes
    }
  EXPECT_NE(keys_of(draw_shapes(d, 6, 1, true)), keys_of(draw_shapes(d, 6, 2, true)));
  // n on both sides of its limits: 1 gives one; a description of one shape
  // gives one however many are asked; 0 is refused.
  EXPECT_EQ(draw_shapes(d, 1, 5, true).size(), 1u);
  EXPECT_EQ(draw_shapes(single(), 1, 5, false).size(), 1u);
  EXPECT_EQ(draw_shapes(single(), 6, 5, false).size(), 1u);
  EXPECT_THROW(draw_shapes(d, 0, 5, true), std::invalid_argument);
  EXPECT_THROW(gen_kernel_case_shaped(d, {}, true), std::invalid_argument);
}

// The reach: n draws alone leave out whole classes of bugs at some seeds
// (every shape one KV head: GQA indexing is never exercised). The chosen
// shapes have, between them, what those bugs need, at every seed.
TEST(Shapes, SixShapesHaveBetweenThemWhatDecodeBugsNeed) {
  const KernelDescription d = jit();
  for_spread_seeds(d, 6, [&](const std::vector<CaseSpec>& shapes) {
    auto any = [&](auto pred) { return std::any_of(shapes.begin(), shapes.end(), pred); };
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.hkv >= 2 && s.group >= 2; })) << "no grouped shape of 2+ KV heads";
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.q_len >= 2; })) << "no q_len > 1";
    EXPECT_TRUE(any([&](const CaseSpec& s) {
      const auto rare = rare_gqa_ratios(d);
      return std::find(rare.begin(), rare.end(), int64_t(s.group)) != rare.end();
    })) << "no rare GQA ratio";
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.window_left >= 0; })) << "no window";
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.soft_cap != 0.0f; })) << "no soft cap";
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.sinks.has_value(); })) << "no sinks";
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.alibi_slopes.has_value(); })) << "no ALiBi";
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.page_table == PageTable::csr; })) << "no CSR pages";
    EXPECT_TRUE(any([](const CaseSpec& s) { return kernels::is_fp8(s.cache_dtype); })) << "no fp8 cache";
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.block_size > 1 && s.block_size < 256; })) << "no page of 2..128";
    // And the variants off: a soft cap keeps every logit within it.
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.soft_cap == 0.0f; })) << "every shape soft-capped";
    // What interacts, together: a soft cap with masked keys (a window, or q_len > 1).
    EXPECT_TRUE(any([](const CaseSpec& s) { return s.soft_cap != 0.0f && (s.window_left >= 0 || s.q_len >= 2); }))
        << "no soft cap beside masked keys";
    EXPECT_TRUE(any([](const CaseSpec& s) {
      return s.soft_cap == 0.0f && s.window_left < 0 && !s.sinks && !s.alibi_slopes;
    })) << "no shape without a variant";
  });
}

// A kernel has a code path for each cache layout, K/V storage, page table,
// cache dtype and scale kind: eight shapes take every one a description lists
// (at most five values each), at every seed.
TEST(Shapes, EightShapesTakeEveryFormatPathADescriptionLists) {
  for_spread_seeds(every_format(), 8, [&](const std::vector<CaseSpec>& shapes) {
    std::set<CacheLayout> layouts;
    std::set<bool> combined, latent;
    std::set<PageTable> pages;
    std::set<DType> dtypes;
    std::set<ScaleKind> scales;
    for (const CaseSpec& s : shapes) {
      layouts.insert(s.layout);
      combined.insert(s.kv_combined);
      latent.insert(s.v_head_dim > 0);
      pages.insert(s.page_table);
      dtypes.insert(s.cache_dtype);
      scales.insert(s.scales);
    }
    EXPECT_EQ(layouts.size(), 3u);
    // Scales by head and by token, each with several KV heads (a scale read for the wrong head).
    for (const ScaleKind k : {ScaleKind::per_head, ScaleKind::per_token})
      EXPECT_TRUE(std::any_of(shapes.begin(), shapes.end(), [k](const CaseSpec& s) {
        return s.hkv >= 2 && (s.scales == k || s.v_scales.value_or(s.scales) == k);
      })) << "no shape of 2+ KV heads with scales " << kernels::to_string(k);
    // hnd with several KV heads and pages of several tokens: otherwise its pages hold nhd's bytes.
    EXPECT_TRUE(std::any_of(shapes.begin(), shapes.end(),
                            [](const CaseSpec& s) {
                              return s.layout == CacheLayout::hnd && s.hkv >= 2 && s.block_size >= 2;
                            }))
        << "no hnd shape of 2+ KV heads and pages of 2+ tokens";
    EXPECT_EQ(combined.size(), 2u) << "combined K/V";
    EXPECT_EQ(latent.size(), 2u) << "MLA";
    EXPECT_EQ(pages.size(), 2u);
    EXPECT_EQ(dtypes.size(), 5u);
    EXPECT_EQ(scales.size(), 4u);
  });
}

TEST(Shapes, EveryCallOfAShapedRunIsInOneOfItsShapes) {
  const KernelDescription d = jit();
  for (const bool regions : {false, true}) {
    SCOPED_TRACE(regions ? "regions" : "general");
    const std::vector<CaseSpec> shapes = draw_shapes(d, 4, 77, regions);
    const std::set<std::string> keys = keys_of(shapes);
    const rc::Gen<CaseSpec> gen = gen_kernel_case_shaped(d, shapes, regions);
    std::map<std::string, int> regions_seen;
    std::set<std::string> lens_seen;
    for (uint64_t seed = 1; seed <= 400; ++seed) {
      const CaseSpec s = sample(gen, seed, fuzz::case_size(seed));
      ASSERT_TRUE(keys.count(shape_of(s))) << "seed " << seed << ": " << shape_of(s);
      ASSERT_TRUE(spec_within(s, d)) << "seed " << seed;
      ASSERT_NO_THROW(check_case_spec(s)) << "seed " << seed;
      ++regions_seen[s.region];
      if (s.region == "extreme-logits") {
        ASSERT_EQ(s.soft_cap, 0.0f) << "seed " << seed << ": extreme logits under a cap";
      }
      std::string l;
      for (int32_t x : s.lens) l += std::to_string(x) + ",";
      lens_seen.insert(l);
    }
    // Lengths and batches vary within the shapes.
    EXPECT_GE(lens_seen.size(), 300u);
    if (regions) {
      // Half general; every region that a shape fits has calls.
      EXPECT_GE(regions_seen[kRegionGeneral], 160);
      for (const char* r : {"q-len", "sinks", "uneven-window", "gqa-rare", "extreme-logits", "empty-splits"})
        EXPECT_GE(regions_seen[r], 8) << r;
    } else {
      EXPECT_EQ(regions_seen.size(), 1u);
    }
  }
}

// The reject property's calls inside the description are decoded by the
// kernel: with shapes they are in them too (a move or a broken clause starts
// from one and is refused by the kernel's check, never compiled).
TEST(Shapes, RejectCallsADescriptionClaimsAreInTheShapes) {
  const KernelDescription d = jit();
  const std::vector<CaseSpec> shapes = draw_shapes(d, 3, 21, true);
  const std::set<std::string> keys = keys_of(shapes);
  const rc::Gen<RejectCase> gen = gen_reject_case(d, shapes);
  int inside = 0, moved = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const RejectCase r = sample(gen, seed, fuzz::case_size(seed));
    if (!r.moved.empty() || r.clause != kernels::Clause::none) {
      ++moved;
      continue;
    }
    ++inside;
    ASSERT_TRUE(keys.count(shape_of(r.spec))) << "seed " << seed << ": " << shape_of(r.spec);
    ASSERT_TRUE(spec_within(r.spec, d)) << "seed " << seed;
  }
  EXPECT_GE(inside, 30);
  EXPECT_GE(moved, 100);
  // Without shapes, they are drawn freely.
  std::set<std::string> free;
  for (uint64_t seed = 1; seed <= 100; ++seed) free.insert(shape_of(sample(gen_reject_case(d), seed, 50).spec));
  EXPECT_GE(free.size(), 50u);
}

// A region that no shape fits draws general: with only q_len 1 shapes, the
// q-len region has no call.
TEST(Shapes, ARegionNoShapeFitsDrawsGeneral) {
  KernelDescription d = jit();
  const std::vector<CaseSpec> shapes = draw_shapes(d, 6, 3, false);
  std::vector<CaseSpec> one_token;
  for (const CaseSpec& s : shapes)
    if (s.q_len == 1) one_token.push_back(s);
  ASSERT_FALSE(one_token.empty());
  const rc::Gen<CaseSpec> gen = gen_kernel_case_shaped(d, one_token, true);
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const CaseSpec s = sample(gen, seed, fuzz::case_size(seed));
    ASSERT_NE(s.region, "q-len") << "seed " << seed;
    ASSERT_EQ(s.q_len, 1) << "seed " << seed;
  }
}

// Shrinking walks the generator's tree: every simpler value is a call of one
// of the shapes too (a shrunk case compiles nothing new).
TEST(Shapes, ShrinkingStaysInTheShapes) {
  const KernelDescription d = jit();
  const std::vector<CaseSpec> shapes = draw_shapes(d, 3, 11, true);
  const std::set<std::string> keys = keys_of(shapes);
  const rc::Gen<CaseSpec> gen = gen_kernel_case_shaped(d, shapes, true);
  int walked = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    rc::Shrinkable<CaseSpec> at = gen(rc::Random(seed), 100);
    // Down the first shrink of each level, and every sibling on the way.
    for (int depth = 0; depth < 8; ++depth) {
      auto children = at.shrinks();
      std::optional<rc::Shrinkable<CaseSpec>> first;
      for (int k = 0; k < 12; ++k) {
        auto c = children.next();
        if (!c) break;
        const CaseSpec v = c->value();
        ASSERT_TRUE(keys.count(shape_of(v))) << "seed " << seed << " depth " << depth << ": " << shape_of(v);
        ++walked;
        if (!first) first = *c;
      }
      if (!first) break;
      at = *first;
    }
  }
  EXPECT_GE(walked, 50);
}

}  // namespace
}  // namespace pav::props
