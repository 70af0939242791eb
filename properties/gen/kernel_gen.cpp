// SPDX-License-Identifier: Apache-2.0
#include "properties/gen/kernel_gen.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/limits.hpp"
#include "properties/case/counter_rng.hpp"
#include "properties/gen/gate_gen.hpp"

namespace pav::props {

using adapters::Feature;
using adapters::KernelDescription;
using adapters::Scales;
using adapters::Split;
using kernels::Clause;
using kernels::DType;
using kernels::CacheLayout;
using kernels::PageTable;
using kernels::VLayout;

namespace {

// Longest context (tokens) for head dims above 256: keeps one case cheap.
inline constexpr int32_t kWideHeadMaxLen = 2048;
inline constexpr int kQLenSpan = 4;  // q_len drawn from min .. min+3, and max
inline constexpr int64_t kTinyTokens = 2000;   // limits at or below this draw small shapes only
inline constexpr int64_t kWideRow = 4096;      // G * D of a modest call
inline constexpr int64_t kWideCall = 65536;    // q_len * G * D past which q_len drops to its minimum

template <class T>
bool has(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Block sizes pav builds in a layout: multiples of 16 for the packed one, any
// listed size (1 to 4096) for nhd and hnd.
std::vector<int64_t> buildable_block_sizes(const KernelDescription& d, CacheLayout layout = CacheLayout::packed) {
  std::vector<int64_t> v;
  for (int64_t b : d.block_sizes)
    if (layout != CacheLayout::packed || (b >= 16 && b % 16 == 0)) v.push_back(b);
  return v;
}

// The layouts pav can build for a description (packed only with a size it builds).
std::vector<CacheLayout> buildable_layouts(const KernelDescription& d) {
  std::vector<CacheLayout> v;
  for (CacheLayout l : d.cache_layouts)
    if (!buildable_block_sizes(d, l).empty()) v.push_back(l);
  return v;
}

// A kernel that declares anything past the version-2 cache (a layout other
// than packed, CSR, a combined tensor, strides, per-head or mixed scales, a
// cache dtype other than e4m3) knows the format fields: it must refuse the
// formats it does not declare. One that declares none of them is never sent
// another format (it may predate them).
bool knows_formats(const KernelDescription& d) {
  if (d.cache_layouts != std::vector{CacheLayout::packed} || d.page_tables != std::vector{PageTable::block_table} ||
      d.kv_storage != std::vector{adapters::KvStorage::separate} || d.strided_cache || d.mixed_scales ||
      has(d.scale_kinds, Scales::per_head))
    return true;
  for (DType t : d.cache_dtypes)
    if (!kernels::is_fp8(t)) return true;
  return false;
}

std::vector<int64_t> at_most(const std::vector<int64_t>& v, int64_t cap) {
  std::vector<int64_t> out;
  for (int64_t x : v)
    if (x <= cap) out.push_back(x);
  return out.empty() ? v : out;
}

// Mostly the cheap values of a list, sometimes any of them.
rc::Gen<int64_t> mostly_small(const std::vector<int64_t>& all, int64_t cap) {
  return rc::gen::weightedOneOf<int64_t>({{4, rc::gen::elementOf(at_most(all, cap))}, {1, rc::gen::elementOf(all)}});
}

kernels::Arch arch_for(DType flavour) {
  return flavour == DType::fp8_e4m3fnuz ? kernels::Arch::gfx942 : kernels::Arch::sm90;
}


// Plan compute-unit counts pav draws for split = plan kernels.
std::vector<int64_t> plan_cus(const KernelDescription& d) {
  std::vector<int64_t> v;
  for (int64_t cu : {8, 32, 132})
    if (d.max_split_ceiling == 0 || cu <= d.max_split_ceiling) v.push_back(cu);
  if (v.empty()) v.push_back(d.max_split_ceiling);
  return v;
}

// The largest split ceiling a case may hand the kernel, 0 when it takes none.
int64_t split_cap(const KernelDescription& d) {
  if (d.split == Split::plan) return 0;
  if (!d.split_ceiling) return 0;
  return d.max_split_ceiling > 0 ? std::min<int64_t>(d.max_split_ceiling, 64) : 64;
}

// A length within the generator's caps: a wide head's (or an MLA call's)
// contexts kept short, and the description's longest context.
int32_t within_caps(int32_t len, const CaseSpec& s, const KernelDescription& d) {
  if (s.head_dim > 256 || s.v_head_dim > 0) len = std::min(len, kWideHeadMaxLen);
  if (d.max_context_len > 0 && len > d.max_context_len) len = int32_t(d.max_context_len);  // the limit itself
  return len;
}

adapters::KvStorage storage_of(const CaseSpec& s) {
  return s.v_head_dim > 0 ? adapters::KvStorage::latent
         : s.kv_combined  ? adapters::KvStorage::combined
                          : adapters::KvStorage::separate;
}

// The nearest multiple of 16 in [lo, hi] from x not listed, stepping out both ways.
std::optional<int64_t> unlisted_near(int64_t x, const std::vector<int64_t>& listed, int64_t step, int64_t lo,
                                     int64_t hi) {
  for (int64_t k = 1; k <= 64; ++k)
    for (int64_t cand : {x + k * step, x - k * step})
      if (cand >= lo && cand <= hi && !has(listed, cand)) return cand;
  return std::nullopt;
}

}  // namespace

std::vector<int64_t> rare_gqa_ratios(const KernelDescription& d) {
  std::vector<int64_t> v;
  for (int64_t g : d.gqa_ratios)
    if (g > 16 || (g & (g - 1)) != 0) v.push_back(g);
  return v;
}

std::optional<std::string> generation_problem(const KernelDescription& d) {
  if (buildable_layouts(d).empty())
    return "pav builds packed caches with block sizes that are multiples of 16; the kernel lists none (" +
           fmt::format("{}", d.block_sizes.empty() ? 0 : d.block_sizes.front()) + "...)";
  if (has(d.cache_layouts, CacheLayout::packed) && !has(d.v_layouts, VLayout::plain) && !has(d.v_layouts, VLayout::trans))
    return "no V layout";
  return std::nullopt;
}

void draw_cache_format(CaseSpec& s, const KernelDescription& d) {
  s.layout = *rc::gen::elementOf(buildable_layouts(d));
  const bool packed = s.layout == CacheLayout::packed;
  s.v_layout = packed ? *rc::gen::elementOf(d.v_layouts) : VLayout::plain;
  // Page sizes: 1 (token-level indices) and the small ones are cheap; the
  // largest listed one sometimes.
  s.block_size = int(*mostly_small(buildable_block_sizes(d, s.layout), 64));
  s.cache_dtype = *rc::gen::elementOf(d.cache_dtypes);
  s.opt.arch = arch_for(s.cache_dtype);
  s.opt.compute = kernels::is_fp8(s.cache_dtype) ? s.cache_dtype : DType::bf16;
  const adapters::KvStorage storage = packed ? adapters::KvStorage::separate : *rc::gen::elementOf(d.kv_storage);
  s.kv_combined = storage == adapters::KvStorage::combined;
  if (storage == adapters::KvStorage::latent) {
    // MLA: one latent KV head; a declared (latent, rope) pair, the one of the
    // drawn head dim where there is one.
    std::vector<adapters::MlaDims> fit;
    for (const adapters::MlaDims& m : d.mla_dims)
      if (m.latent + m.rope == s.head_dim) fit.push_back(m);
    const adapters::MlaDims m = *rc::gen::elementOf(fit.empty() ? d.mla_dims : fit);
    s.head_dim = int(m.latent + m.rope);
    s.v_head_dim = int(m.latent);
    s.hkv = 1;
  }
  if (!packed && d.strided_cache) {
    s.page_pad = *rc::gen::element<int64_t>(0, 0, 16, 1000);
    s.row_pad = *rc::gen::element<int64_t>(0, 0, 8, 64);
  }
  s.page_table = *rc::gen::elementOf(d.page_tables);
  s.scales = *rc::gen::elementOf(d.scale_kinds);
  if (d.mixed_scales && s.v_head_dim == 0) {  // an MLA cache has one scale
    const Scales v = *rc::gen::elementOf(d.scale_kinds);
    if (v != s.scales) s.v_scales = v;
  }
}

rc::Gen<CaseSpec> gen_kernel_case(const KernelDescription& d, DecodeGenLimits lim) {
  return rc::gen::exec([d, lim]() {
    CaseSpec s;
    int max_batch = lim.max_batch;
    if (d.max_num_seqs > 0) max_batch = int(std::min<int64_t>(max_batch, d.max_num_seqs));
    const int batch = *rc::gen::inRange(1, max_batch + 1);
    s.head_dim = int(lim.max_total_tokens <= kTinyTokens ? *rc::gen::elementOf(at_most(d.head_dims, 256))
                                                         : *mostly_small(d.head_dims, 256));
    const bool allow_long = lim.allow_long && s.head_dim <= 256 && (d.max_context_len == 0 || d.max_context_len > 6000);
    int64_t total = 0;
    bool had_long = false;
    for (int i = 0; i < batch; ++i) {
      int32_t len = std::max<int32_t>(*gen_decode_length(allow_long && !had_long), 0);
      if (len > 6000) had_long = true;
      if (total + len > lim.max_total_tokens && len > 6000) len = 4099;
      len = within_caps(len, s, d);  // no MLA yet: its format is drawn below
      total += len;
      s.lens.push_back(len);
    }
    // Wide calls (many query rows of long heads) cost in proportion to
    // q_len * G * D: mostly modest ones, the description's extremes sometimes.
    const bool tiny = lim.max_total_tokens <= kTinyTokens;
    const int64_t max_g = tiny ? 8 : 17;
    std::vector<int64_t> groups;
    for (int64_t g : at_most(d.gqa_ratios, max_g))
      if (g * s.head_dim <= kWideRow || g == at_most(d.gqa_ratios, max_g).front()) groups.push_back(g);
    // The rare ratios (above 16, or not a power of two: 20, 48) that a kernel
    // declares are weighted up: drawn from the whole list alone they came up
    // about once in 160 cases, and their tiling is where the bugs sit.
    const std::vector<int64_t> rare = rare_gqa_ratios(d);
    s.group = int(*rc::gen::weightedOneOf<int64_t>({{4, rc::gen::elementOf(groups)},
                                                    {tiny ? 0u : 1u, rc::gen::elementOf(d.gqa_ratios)},
                                                    {rare.empty() ? 0u : 2u, rc::gen::elementOf(rare.empty() ? groups : rare)}}));
    const int64_t qmin = d.min_q_len, qmax = std::min<int64_t>(d.max_q_len, tiny ? qmin + 1 : 16);
    s.q_len = qmin == qmax ? int(qmin)
                           : *rc::gen::weightedOneOf<int>({{4, rc::gen::just(int(qmin))},
                                                           {2, rc::gen::inRange(int(qmin), int(std::min(qmax, qmin + kQLenSpan - 1)) + 1)},
                                                           {1, rc::gen::just(int(qmax))}});
    if (int64_t(s.q_len) * s.group * s.head_dim > kWideCall) s.q_len = int(qmin);
    const int max_h = d.max_kv_heads > 0 ? int(std::min<int64_t>(3, d.max_kv_heads)) : 3;
    s.hkv = *rc::gen::weightedOneOf<int>({{3, rc::gen::just(1)}, {1, rc::gen::inRange(1, max_h + 1)}});
    draw_cache_format(s, d);
    if (s.v_head_dim > 0) {  // an MLA call's head dim came with its format: keep its cost modest
      for (int32_t& len : s.lens) len = within_caps(len, s, d);
      if (int64_t(s.q_len) * s.group * s.head_dim > kWideCall) s.q_len = int(qmin);
    }
    s.q_dtype = *rc::gen::elementOf(d.q_dtypes);
    s.opt.partial = DType::f32;
    if (d.split == Split::plan) {
      s.path = Path::planned;
      s.opt.cu = int(*rc::gen::elementOf(plan_cus(d)));
      s.max_partitions = *rc::gen::weightedOneOf<int64_t>(
          {{3, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, s.opt.cu + 1)}});
    } else {
      s.path = Path::uniform;
      if (d.split_ceiling) {
        const int64_t cap = split_cap(d);
        s.max_partitions = *rc::gen::weightedOneOf<int64_t>(
            {{3, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, cap + 1)}});
      }
    }
    if (d.strided_q)
      s.q_row_pad = *rc::gen::weightedOneOf<int64_t>({{4, rc::gen::just<int64_t>(0)}, {1, rc::gen::just<int64_t>(64)}});
    s.spare_blocks = *rc::gen::inRange<int64_t>(1, 3);
    s.seed = *rc::gen::arbitrary<uint32_t>();
    if (*rc::gen::weightedOneOf<bool>({{2, rc::gen::just(true)}, {1, rc::gen::just(false)}}))
      s.sentinels = boundary_sentinels(s.lens);
    // The softmax scale is the call's: mostly the default, sometimes another
    // multiple of 1/sqrt(D) (a kernel that ignores it is caught).
    const float unit = 1.0f / std::sqrt(float(s.head_dim));
    s.softmax_scale = *rc::gen::weightedOneOf<float>(
        {{6, rc::gen::just(0.0f)}, {1, rc::gen::element(0.25f * unit, 0.5f * unit, 2.0f * unit)}});
    // Sometimes extreme logits: every scaled score near -6e4 or +6e4 (q and K
    // share a component, the scale makes q.k ~ -+16 D into -+6e4). Sentinels
    // would stand out of the pack, so there are none.
    s.extreme_logits = *rc::gen::weightedOneOf<int>({{18, rc::gen::just(0)}, {1, rc::gen::just(-1)}, {1, rc::gen::just(1)}});
    if (s.extreme_logits != 0) {
      s.softmax_scale = extreme_logit_scale(s.head_dim, s.scales);
      s.sentinels.clear();
    }
    // Sometimes every row's logits tie (every key of a sequence's head one
    // vector) or near-tie (within about 1 of each other, near 16 sqrt(D)).
    // Sentinels would stand out of the ties, so there are none.
    if (s.extreme_logits == 0)
      s.logit_ties = *rc::gen::weightedOneOf<int>({{14, rc::gen::just(0)}, {1, rc::gen::just(1)}, {1, rc::gen::just(2)}});
    if (s.logit_ties != 0) s.sentinels.clear();
    if (s.logit_ties == 2 && s.scales == ScaleKind::none) s.softmax_scale = near_tie_scale(s.head_dim, s.scales);
    // Sometimes query head 0 is all zeros (exact ties, and a row absmax of 0)
    // or a constant (every element at a per-row quantization's largest code).
    const int head0 = *rc::gen::weightedOneOf<int>({{8, rc::gen::just(0)}, {1, rc::gen::just(1)}, {1, rc::gen::just(2)}});
    s.zero_q_head = head0 == 1;
    s.constant_q_head = head0 == 2;
    // Sometimes block 0 is the engines' null block: poisoned, and where every
    // padded table entry points (a masked lane that reads block 0 reads NaN).
    s.null_block = *rc::gen::weightedOneOf<bool>({{2, rc::gen::just(false)}, {1, rc::gen::just(true)}});
    draw_variant(s, d);
    // A kernel that declares large caches sometimes gets one: blocks before
    // the used ones put every page its contexts read past element 2^31 of the
    // cache (int32 offsets overflow there). The contexts stay short, so only
    // the host buffers are large.
    if (d.large_cache && s.layout != CacheLayout::packed &&
        *rc::gen::weightedOneOf<bool>({{15, rc::gen::just(false)}, {1, rc::gen::just(true)}})) {
      s.lens.resize(std::min<size_t>(s.lens.size(), 2));
      for (int32_t& len : s.lens) len = std::min(len, 600);
      if (!s.sentinels.empty()) s.sentinels = boundary_sentinels(s.lens);
      s.low_spare_blocks = large_cache_low_blocks(s);
    }
    return s;
  });
}

namespace {


bool takes_splits(const KernelDescription& d) { return d.split == Split::plan || split_cap(d) > 0; }

// The most splits the call may get: pav's plan on the most compute units, or
// the largest ceiling.
void most_splits(CaseSpec& s, const KernelDescription& d) {
  if (d.split == Split::plan) {
    s.opt.cu = int(plan_cus(d).back());
    s.max_partitions = s.opt.cu;
  } else if (const int64_t cap = split_cap(d); cap > 0) {
    s.max_partitions = cap;
  }
}

int32_t unaligned(int32_t len, int block) { return block > 1 && len % block == 0 ? len + 1 : len; }

void fit_lengths(CaseSpec& s, const KernelDescription& d, const DecodeGenLimits& lim);

// A drawn region's spec made whole again: lengths within the description and
// the generator's caps, the variant drawn for the new lengths and heads (each
// region that sets one sets it after), sentinels at the new boundaries.
void refit(CaseSpec& s, const KernelDescription& d, const DecodeGenLimits& lim) {
  fit_lengths(s, d, lim);
  s.window_left = -1;
  s.soft_cap = 0.0f;
  s.sinks.reset();
  s.alibi_slopes.reset();
  draw_variant(s, d);
}

// Lengths within the description, the generator's caps and its token total.
void fit_lengths(CaseSpec& s, const KernelDescription& d, const DecodeGenLimits& lim) {
  if (d.max_num_seqs > 0 && int64_t(s.lens.size()) > d.max_num_seqs) s.lens.resize(size_t(d.max_num_seqs));
  for (int32_t& len : s.lens) {
    len = within_caps(std::max<int32_t>(len, 0), s, d);
  }
  int64_t total = 0;
  for (int32_t len : s.lens) total += len;
  while (total > lim.max_total_tokens) {
    auto longest = std::max_element(s.lens.begin(), s.lens.end());
    const int32_t cut = int32_t(std::min<int64_t>(*longest, total - lim.max_total_tokens));
    *longest -= cut;
    total -= cut;
  }
}

void boundary_sentinels_again(CaseSpec& s) {
  s.sentinels = s.extreme_logits == 0 && s.logit_ties == 0 ? boundary_sentinels(s.lens) : std::vector<Sentinel>{};
}

// Applies one region to a general draw; false when it does not apply to it.
bool apply_region(CaseSpec& s, const KernelDescription& d, const DecodeGenLimits& lim, const std::string& r) {
  const int max_batch = d.max_num_seqs > 0 ? int(std::min<int64_t>(5, d.max_num_seqs)) : 5;
  if (r == "uneven-window") {
    if (max_batch < 2) return false;
    const int batch = *rc::gen::inRange(2, max_batch + 1);
    s.lens.assign(size_t(batch), 0);
    const int32_t L = *rc::gen::inRange(1500, 6001);
    const size_t at = size_t(*rc::gen::inRange(0, batch));
    for (size_t i = 0; i < s.lens.size(); ++i)
      s.lens[i] = i == at ? L : unaligned(*rc::gen::inRange(1, 300), s.block_size);
    refit(s, d, lim);
    const int32_t longest = *std::max_element(s.lens.begin(), s.lens.end());
    s.window_left = *rc::gen::element<int32_t>(0, 1, 63, 255, 256, 257, std::max(longest / 3, 1), std::max(longest - 1, 0));
    if (*rc::gen::arbitrary<bool>()) most_splits(s, d);
  } else if (r == "empty-splits") {
    if (max_batch < 2) return false;
    const int batch = *rc::gen::inRange(2, max_batch + 1);
    s.lens.assign(size_t(batch), 0);
    const size_t at = size_t(*rc::gen::inRange(0, batch));
    for (size_t i = 0; i < s.lens.size(); ++i)
      s.lens[i] = i == at ? *rc::gen::inRange(1000, 8001) : *rc::gen::element<int32_t>(0, 0, 1, 2);
    most_splits(s, d);
    refit(s, d, lim);
  } else if (r == "short-vs-splits") {
    if (!takes_splits(d)) return false;
    for (int32_t& len : s.lens) len = *rc::gen::inRange(1, 41);
    most_splits(s, d);
    refit(s, d, lim);
  } else if (r == "q-len") {
    const int64_t lo = std::max<int64_t>(2, d.min_q_len), hi = std::min<int64_t>(5, d.max_q_len);
    if (lo > hi) return false;
    s.q_len = *rc::gen::inRange(int(lo), int(hi) + 1);
    if (int64_t(s.q_len) * s.group * s.head_dim > kWideCall) return false;
    refit(s, d, lim);
  } else if (r == "extreme-logits") {
    s.extreme_logits = *rc::gen::element(-1, 1);
    s.logit_ties = 0;
    s.softmax_scale = extreme_logit_scale(s.head_dim, s.scales);
  } else if (r == "sinks") {
    if (!d.declares(Feature::sinks)) return false;
    refit(s, d, lim);
    const int mode = *rc::gen::inRange(0, 3);  // dominant, negligible, one head each way
    std::vector<float> v(size_t(int64_t(s.hkv) * s.group), mode == 1 ? -50.0f : 50.0f);
    if (mode == 2)
      for (size_t h = 1; h < v.size(); h += 2) v[h] = -50.0f;
    s.sinks = std::move(v);
  } else if (r == "gqa-rare") {
    const std::vector<int64_t> rare = rare_gqa_ratios(d);
    if (rare.empty()) return false;
    s.group = int(*rc::gen::elementOf(rare));
    if (int64_t(s.q_len) * s.group * s.head_dim > kWideCall) s.q_len = int(d.min_q_len);
    if (int64_t(s.q_len) * s.group * s.head_dim > kWideCall) return false;
    refit(s, d, lim);
  } else if (r == "boundary-lengths") {
    for (int32_t& len : s.lens) {
      const int32_t unit = *rc::gen::element<int32_t>(int32_t(s.block_size), 16, 64, 256);
      len = unit * *rc::gen::inRange(1, 9) + *rc::gen::element(-1, 0, 1);
    }
    refit(s, d, lim);
  } else {
    throw std::invalid_argument("no decode region '" + r + "'");
  }
  boundary_sentinels_again(s);
  return true;
}

}  // namespace

std::vector<std::string> decode_regions(const KernelDescription& d) {
  std::vector<std::string> v;
  const bool batches = d.max_num_seqs == 0 || d.max_num_seqs >= 2;
  if (batches && d.declares(Feature::window)) v.push_back("uneven-window");
  if (batches) v.push_back("empty-splits");
  if (takes_splits(d)) v.push_back("short-vs-splits");
  if (std::max<int64_t>(2, d.min_q_len) <= std::min<int64_t>(5, d.max_q_len)) v.push_back("q-len");
  v.push_back("extreme-logits");
  if (d.declares(Feature::sinks)) v.push_back("sinks");
  if (!rare_gqa_ratios(d).empty()) v.push_back("gqa-rare");
  v.push_back("boundary-lengths");
  return v;
}

rc::Gen<CaseSpec> gen_kernel_case_in(const KernelDescription& d, const std::string& region, DecodeGenLimits lim) {
  if (region != kRegionGeneral) {
    const std::vector<std::string> all = decode_regions(d);
    if (std::find(all.begin(), all.end(), region) == all.end())
      throw std::invalid_argument("the decode region '" + region + "' does not apply to this description");
  }
  return rc::gen::exec([d, region, lim]() {
    CaseSpec base = *gen_kernel_case(d, lim);
    base.region = kRegionGeneral;
    // A large-cache draw keeps its own short lengths and low blocks.
    if (region == kRegionGeneral || base.low_spare_blocks != 0) return base;
    CaseSpec s = base;
    if (!apply_region(s, d, lim, region) || !spec_within(s, d)) return base;
    s.region = region;
    return s;
  });
}

rc::Gen<CaseSpec> gen_kernel_case_weighted(const KernelDescription& d, DecodeGenLimits lim) {
  const std::vector<std::string> regions = decode_regions(d);
  // Picks 0..R-1 are the general generator, R..2R-1 one region each;
  // shrinking moves the pick toward the general draw.
  return rc::gen::exec([d, lim, regions]() {
    const size_t r = regions.size();
    // At full size: RapidCheck narrows inRange at small sizes, which would
    // keep the small cases in the general draw.
    const size_t pick = size_t(*rc::gen::resize(100, rc::gen::inRange<int>(0, int(2 * r))));
    return *gen_kernel_case_in(d, pick < r ? std::string(kRegionGeneral) : regions[pick - r], lim);
  });
}

namespace {

bool sometimes() { return *rc::gen::weightedOneOf<bool>({{1, rc::gen::just(true)}, {1, rc::gen::just(false)}}); }

// The values of each variant, drawn for the spec's lengths and heads.
int32_t draw_window(const CaseSpec& s) {
  // The edges: the row itself only, one more, the whole context and past it.
  const int32_t L = std::max<int32_t>(*std::max_element(s.lens.begin(), s.lens.end()), 1);
  return *rc::gen::element<int32_t>(0, 1, L - 1, L, L + 1, L + 100, std::max<int32_t>(L / 3, 1));
}

float draw_soft_cap() {
  return *rc::gen::weightedOneOf<float>({{2, rc::gen::element(1.0f, 5.0f, 30.0f, 50.0f)},
                                         {1, rc::gen::map(rc::gen::inRange(10, 501), [](int x) { return float(x) / 10.0f; })}});
}

std::vector<float> draw_sinks(int64_t hq) {
  // A dominant sink, a negligible one, or per-head logits near the scores.
  const int mode = *rc::gen::inRange(0, 3);
  std::vector<float> v(static_cast<size_t>(hq), 0.0f);
  for (int64_t h = 0; h < hq; ++h)
    v[size_t(h)] = mode == 0 ? 50.0f : mode == 1 ? -50.0f : float(*rc::gen::inRange(-40, 41)) / 8.0f;
  return v;
}

std::vector<float> draw_alibi(int64_t hq) {
  // The usual geometric slopes 2^(-8(h+1)/Hq), or drawn ones in (0, 1].
  const bool geometric = sometimes();
  std::vector<float> v(static_cast<size_t>(hq), 0.0f);
  for (int64_t h = 0; h < hq; ++h)
    v[size_t(h)] = geometric ? std::exp2(-8.0f * float(h + 1) / float(hq)) : float(*rc::gen::inRange(1, 1001)) / 1000.0f;
  return v;
}

}  // namespace

void draw_variant(CaseSpec& s, const KernelDescription& d) {
  const int64_t hq = int64_t(s.hkv) * s.group;
  if (d.declares(Feature::window) && sometimes()) s.window_left = draw_window(s);
  if (d.declares(Feature::soft_cap) && sometimes()) s.soft_cap = draw_soft_cap();
  if (d.declares(Feature::sinks) && sometimes()) s.sinks = draw_sinks(hq);
  if (d.declares(Feature::alibi) && sometimes()) s.alibi_slopes = draw_alibi(hq);
}

// ---- shapes --------------------------------------------------------------------

std::string shape_of(const CaseSpec& s) {
  std::string format = s.layout == CacheLayout::packed
                           ? fmt::format("packed {} V", s.v_layout == VLayout::trans ? "trans" : "plain")
                           : std::string(kernels::to_string(s.layout));
  if (s.kv_combined) format += " combined";
  if (s.v_head_dim > 0) format += fmt::format(" MLA (D_v {})", s.v_head_dim);
  if (s.page_pad != 0 || s.row_pad != 0) format += fmt::format(" strided {}/{}", s.page_pad, s.row_pad);
  format += s.page_table == PageTable::csr ? " csr" : " table";
  std::string scales(kernels::to_string(s.scales));
  if (s.v_scales && *s.v_scales != s.scales) scales += fmt::format(" (V {})", kernels::to_string(*s.v_scales));
  std::string variants;
  if (s.window_left >= 0) variants += "+window";
  if (s.soft_cap != 0.0f) variants += "+soft_cap";
  if (s.sinks) variants += "+sinks";
  if (s.alibi_slopes) variants += "+alibi";
  return fmt::format("q_len {} hkv {} G {} D {} block {} {}, q {}{}, cache {}, scales {}{}", s.q_len, s.hkv, s.group,
                     s.head_dim, s.block_size, format, kernels::to_string(s.q_dtype),
                     s.q_row_pad ? fmt::format(" (row pad {})", s.q_row_pad) : std::string(),
                     kernels::to_string(s.cache_dtype), scales, variants.empty() ? "" : ", " + variants);
}

namespace {

// The regions that need a shape of their own: a call of the region is placed
// only in a shape that has it.
bool shape_fits_region(const CaseSpec& shape, const std::string& region, const KernelDescription& d) {
  if (region == "q-len") return shape.q_len >= 2;
  if (region == "gqa-rare") return has(rare_gqa_ratios(d), int64_t(shape.group));
  if (region == "sinks") return shape.sinks.has_value();
  if (region == "uneven-window") return shape.window_left >= 0;
  if (region == "extreme-logits") return shape.soft_cap == 0.0f;  // a cap keeps every logit within it
  return true;
}

// Moves a drawn call into a shape: the shape's fields, then what depends on
// them (lengths within the caps, a variant's values for the shape's heads,
// the softmax scale's multiple of 1/sqrt(D), low blocks, sentinels). A call
// already of the shape is left as it is.
void take_shape(CaseSpec& s, const CaseSpec& t, const KernelDescription& d, const DecodeGenLimits& lim) {
  const bool special_scale = s.extreme_logits != 0 || (s.logit_ties == 2 && s.scales == ScaleKind::none);
  const float unit_multiple = special_scale ? 0.0f : s.softmax_scale * std::sqrt(float(s.head_dim));
  s.q_dtype = t.q_dtype;
  s.cache_dtype = t.cache_dtype;
  s.opt.arch = t.opt.arch;
  s.opt.compute = t.opt.compute;
  s.layout = t.layout;
  s.v_layout = t.v_layout;
  s.kv_combined = t.kv_combined;
  s.head_dim = t.head_dim;
  s.v_head_dim = t.v_head_dim;
  s.hkv = t.hkv;
  s.group = t.group;
  s.q_len = t.q_len;
  s.block_size = t.block_size;
  s.page_table = t.page_table;
  s.scales = t.scales;
  s.v_scales = t.v_scales;
  s.page_pad = t.page_pad;
  s.row_pad = t.row_pad;
  s.q_row_pad = t.q_row_pad;
  fit_lengths(s, d, lim);
  const int64_t hq = int64_t(s.hkv) * s.group;
  if (t.window_left < 0) s.window_left = -1;
  else if (s.window_left < 0) s.window_left = draw_window(s);
  if (t.soft_cap == 0.0f) s.soft_cap = 0.0f;
  else if (s.soft_cap == 0.0f) s.soft_cap = draw_soft_cap();
  if (!t.sinks) s.sinks.reset();
  else if (!s.sinks || int64_t(s.sinks->size()) != hq) s.sinks = draw_sinks(hq);
  if (!t.alibi_slopes) s.alibi_slopes.reset();
  else if (!s.alibi_slopes || int64_t(s.alibi_slopes->size()) != hq) s.alibi_slopes = draw_alibi(hq);
  if (s.extreme_logits != 0) s.softmax_scale = extreme_logit_scale(s.head_dim, s.scales);
  else if (s.logit_ties == 2 && s.scales == ScaleKind::none) s.softmax_scale = near_tie_scale(s.head_dim, s.scales);
  else s.softmax_scale = unit_multiple == 0.0f ? 0.0f : unit_multiple / std::sqrt(float(s.head_dim));
  if (s.low_spare_blocks != 0) {
    if (s.layout == CacheLayout::packed) s.low_spare_blocks = 0;
    else s.low_spare_blocks = large_cache_low_blocks(s);
  }
  if (!s.sentinels.empty()) s.sentinels = boundary_sentinels(s.lens);
}

}  // namespace

namespace {

// What a shape brings to a run's set of shapes: the features decode bugs
// hang on, each with its weight. A kernel has a code path for each cache
// layout (hnd only with two KV heads or more and pages of two tokens or more:
// otherwise its pages hold nhd's bytes), K/V storage, page table, cache dtype and K scale kind; a soft cap
// keeps every logit within it (extreme logits need a shape without one):
// each of these counts three. Then several KV heads (in each layout), grouped
// queries (and both: head h's KV head is h / G, not h % Hkv), a rare ratio,
// q_len > 1, the V layout, q's dtype, mixed scale kinds, strides, padded q
// rows, page sizes of 1, small and large, narrow and wide heads, each variant,
// a shape without any, and each pair of what interacts (several KV heads,
// grouped queries, q_len > 1, each variant, scales per head, per token).
struct ShapeFeature {
  std::string name;
  int weight;
};
std::vector<ShapeFeature> shape_features(const CaseSpec& s, const KernelDescription& d) {
  constexpr int kPath = 3;
  // With one KV head, or one token a page, an hnd page holds nhd's bytes at
  // nhd's strides: its own path needs two of each.
  const CacheLayout layout =
      s.layout == CacheLayout::hnd && (s.hkv == 1 || s.block_size == 1) ? CacheLayout::nhd : s.layout;
  std::vector<ShapeFeature> f = {
      {fmt::format("layout {}", kernels::to_string(layout)), kPath},
      {fmt::format("storage {}", adapters::to_string(storage_of(s))), kPath},
      {fmt::format("pages {}", kernels::to_string(s.page_table)), kPath},
      {fmt::format("cache {}", kernels::to_string(s.cache_dtype)), kPath},
      {fmt::format("scales {}", kernels::to_string(s.scales)), kPath},
      {fmt::format("q {}", kernels::to_string(s.q_dtype)), 1},
      {s.block_size == 1 ? "page 1" : s.block_size < 16 ? "page <16" : s.block_size <= 64 ? "page 16-64" : "page >64", 1},
      {s.head_dim < 128 ? "D <128" : s.head_dim == 128 ? "D 128" : "D >128", 1},
  };
  if (s.hkv >= 2) f.push_back({fmt::format("hkv>1 {}", kernels::to_string(s.layout)), 1});
  if (s.soft_cap == 0.0f) f.push_back({"no soft cap", kPath});
  if (s.hkv >= 2) f.push_back({"hkv>1", 1});
  if (s.group >= 2) f.push_back({"G>1", 1});
  if (s.hkv >= 2 && s.group >= 2) f.push_back({"hkv>1 and G>1", 1});
  if (has(rare_gqa_ratios(d), int64_t(s.group))) f.push_back({"G rare", 1});
  if (s.q_len >= 2) f.push_back({"q_len>1", 1});
  if (s.layout == CacheLayout::packed) f.push_back({s.v_layout == VLayout::trans ? "V trans" : "V plain", 1});
  if (s.v_scales && *s.v_scales != s.scales) f.push_back({"scales mixed", 1});
  if (s.page_pad != 0 || s.row_pad != 0) f.push_back({"strided", 1});
  if (s.q_row_pad != 0) f.push_back({"q rows padded", 1});
  if (s.window_left >= 0) f.push_back({"window", 1});
  if (s.soft_cap != 0.0f) f.push_back({"soft cap", 1});
  if (s.sinks) f.push_back({"sinks", 1});
  if (s.alibi_slopes) f.push_back({"alibi", 1});
  if (s.window_left < 0 && s.soft_cap == 0.0f && !s.sinks && !s.alibi_slopes) f.push_back({"no variant", 1});
  // Pairs of what interacts: a bug of one often shows only with another (a
  // scale read for the wrong head needs several KV heads and scales per head,
  // or per token; a soft cap applied after the mask needs masked keys,
  // from a window or q_len > 1).
  const auto scales_are = [&](ScaleKind k) { return s.scales == k || s.v_scales.value_or(s.scales) == k; };
  const std::pair<const char*, bool> axes[] = {
      {"hkv>1", s.hkv >= 2},           {"G>1", s.group >= 2},
      {"q_len>1", s.q_len >= 2},       {"window", s.window_left >= 0},
      {"soft cap", s.soft_cap != 0.0f}, {"sinks", s.sinks.has_value()},
      {"alibi", s.alibi_slopes.has_value()},
      {"scales per head", scales_are(ScaleKind::per_head)},
      {"scales per token", scales_are(ScaleKind::per_token)},
  };
  for (size_t a = 0; a < std::size(axes); ++a)
    for (size_t b = a + 1; b < std::size(axes); ++b)
      if (axes[a].second && axes[b].second) f.push_back({fmt::format("{} with {}", axes[a].first, axes[b].first), 1});
  return f;
}

}  // namespace

std::vector<CaseSpec> draw_shapes(const KernelDescription& d, int n, uint64_t seed, bool regions, DecodeGenLimits lim) {
  if (n < 1) throw std::invalid_argument("draw_shapes: n must be at least 1, got " + std::to_string(n));
  // Candidates: general draws, and with regions two draws in each region
  // that needs a shape of its own, so that every region has one to fit.
  std::vector<std::string> from;
  if (regions)
    for (const std::string& r : decode_regions(d))
      if (r == "q-len" || r == "gqa-rare" || r == "sinks" || r == "uneven-window") from.insert(from.end(), 2, r);
  const size_t kCandidates = std::max<size_t>(32, size_t(8 * n));
  while (from.size() < kCandidates) from.push_back(kRegionGeneral);
  std::vector<CaseSpec> candidates;
  std::vector<std::vector<ShapeFeature>> features;
  std::vector<std::string> keys;
  for (size_t i = 0; i < from.size(); ++i) {
    const uint64_t at = rng::mix64(rng::mix64(seed ^ 0x5368617065ull) ^ uint64_t(i));
    CaseSpec s = gen_kernel_case_in(d, from[i], lim)(rc::Random(at), 100).value();
    s.region.clear();
    // Every third general draw of one KV head gets two (the draw gives
    // several to about one in six): KV heads apart in each layout.
    if (from[i] == kRegionGeneral && i % 3 == 0 && s.hkv == 1 && s.v_head_dim == 0 &&
        (d.max_kv_heads == 0 || d.max_kv_heads >= 2)) {
      CaseSpec two = s;
      two.hkv = 2;
      fit_derived_fields(two);
      if (spec_within(two, d)) s = std::move(two);
    }
    const std::string key = shape_of(s);
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;  // one candidate per shape
    keys.push_back(key);
    features.push_back(shape_features(s, d));
    candidates.push_back(std::move(s));
  }
  // Greedily the candidate that brings the most features not yet in the set
  // (weighted; the first drawn on a tie), until n shapes or none is left: a few shapes
  // that together have what each bug needs, where n draws alone would often
  // leave out whole classes (every shape one KV head, no q_len > 1).
  std::vector<CaseSpec> shapes;
  std::vector<std::string> covered;
  std::vector<bool> taken(candidates.size(), false);
  while (int(shapes.size()) < n) {
    size_t best = candidates.size();
    int best_new = -1;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (taken[i]) continue;
      int fresh = 0;
      for (const ShapeFeature& f : features[i])
        if (std::find(covered.begin(), covered.end(), f.name) == covered.end()) fresh += f.weight;
      if (fresh > best_new) best_new = fresh, best = i;
    }
    if (best == candidates.size()) break;
    taken[best] = true;
    for (const ShapeFeature& f : features[best])
      if (std::find(covered.begin(), covered.end(), f.name) == covered.end()) covered.push_back(f.name);
    shapes.push_back(candidates[best]);
  }
  return shapes;
}

rc::Gen<CaseSpec> gen_kernel_case_shaped(const KernelDescription& d, std::vector<CaseSpec> shapes, bool regions,
                                         DecodeGenLimits lim) {
  if (shapes.empty()) throw std::invalid_argument("gen_kernel_case_shaped: no shapes");
  const std::vector<std::string> all = regions ? decode_regions(d) : std::vector<std::string>{};
  return rc::gen::exec([d, shapes, all, lim]() {
    // The region as gen_kernel_case_weighted picks it: half the calls general.
    const size_t r = all.size();
    const size_t pick = r == 0 ? 0 : size_t(*rc::gen::resize(100, rc::gen::inRange<int>(0, int(2 * r))));
    std::string region = r == 0 || pick < r ? std::string(kRegionGeneral) : all[pick - r];
    std::vector<size_t> fits;
    for (size_t i = 0; i < shapes.size(); ++i)
      if (shape_fits_region(shapes[i], region, d)) fits.push_back(i);
    if (fits.empty()) {  // no shape of the run has what the region needs
      region = kRegionGeneral;
      for (size_t i = 0; i < shapes.size(); ++i) fits.push_back(i);
    }
    const CaseSpec& shape = shapes[*rc::gen::elementOf(fits)];
    CaseSpec base = *gen_kernel_case(d, lim);
    take_shape(base, shape, d, lim);
    base.region = kRegionGeneral;
    if (region == kRegionGeneral || base.low_spare_blocks != 0) return base;
    CaseSpec s = base;
    if (!apply_region(s, d, lim, region)) return base;
    take_shape(s, shape, d, lim);
    if (!spec_within(s, d)) return base;
    s.region = region;
    return s;
  });
}

bool spec_within(const CaseSpec& s, const KernelDescription& d) {
  if (s.lens.empty() || (d.max_num_seqs > 0 && int64_t(s.lens.size()) > d.max_num_seqs)) return false;
  for (int32_t len : s.lens)
    if (len < 0 || (d.max_context_len > 0 && len > d.max_context_len)) return false;
  if (s.q_len < d.min_q_len || s.q_len > d.max_q_len) return false;
  if (d.max_kv_heads > 0 && s.hkv > d.max_kv_heads) return false;
  if (!has(d.gqa_ratios, int64_t(s.group)) || !has(d.head_dims, int64_t(s.head_dim))) return false;
  if (!has(buildable_layouts(d), s.layout) || !has(buildable_block_sizes(d, s.layout), int64_t(s.block_size))) return false;
  if (s.layout == CacheLayout::packed && !has(d.v_layouts, s.v_layout)) return false;
  if (!has(d.kv_storage, storage_of(s))) return false;
  if (s.v_head_dim > 0 && !has(d.mla_dims, adapters::MlaDims{s.v_head_dim, s.head_dim - s.v_head_dim})) return false;
  if ((s.page_pad != 0 || s.row_pad != 0) && !d.strided_cache) return false;
  if (s.low_spare_blocks != 0 && !d.large_cache) return false;
  if (!has(d.page_tables, s.page_table)) return false;
  if (!has(d.q_dtypes, s.q_dtype) || !has(d.cache_dtypes, s.cache_dtype)) return false;
  if (!has(d.scale_kinds, s.scales) || !has(d.scale_kinds, s.v_scales.value_or(s.scales))) return false;
  if (s.v_scales && *s.v_scales != s.scales && !d.mixed_scales) return false;
  if (s.q_row_pad != 0 && !d.strided_q) return false;
  if ((s.window_left >= 0 && !d.declares(Feature::window)) || (s.soft_cap != 0.0f && !d.declares(Feature::soft_cap)) ||
      (s.sinks && !d.declares(Feature::sinks)) || (s.alibi_slopes && !d.declares(Feature::alibi)))
    return false;
  if (d.split == Split::plan) {
    const int64_t ceiling = s.max_partitions ? s.max_partitions : s.opt.cu;
    if (s.path != Path::planned || ceiling > s.opt.cu || (d.max_split_ceiling > 0 && ceiling > d.max_split_ceiling))
      return false;
  } else {
    if (s.path != Path::uniform) return false;
    if (s.max_partitions != 0 &&
        (!d.split_ceiling || (d.max_split_ceiling > 0 && s.max_partitions > d.max_split_ceiling)))
      return false;
  }
  return true;
}

// ---- stale plans --------------------------------------------------------------------

std::string to_string(const StaleKernelCase& s) {
  std::string lens;
  for (int32_t l : s.plan_lens) lens += (lens.empty() ? "" : ",") + std::to_string(l);
  return s.torn_row >= 0 ? fmt::format("plan torn at row {} (left from a refresh from lens [{}])", s.torn_row, lens)
                         : fmt::format("plan refreshed from lens [{}]", lens);
}

void make_stale_plan(const StaleKernelCase& s, kernels::WorkPlan& plan) {
  if (s.plan_lens.size() != s.spec.lens.size())
    throw std::invalid_argument("plan_lens: " + std::to_string(s.plan_lens.size()) + " lengths for " +
                                std::to_string(s.spec.lens.size()) + " sequences");
  plan.refresh(s.plan_lens.data());
  if (s.torn_row < 0) return;
  if (s.torn_row >= plan.capacity())
    throw std::invalid_argument("torn_row " + std::to_string(s.torn_row) + " past the plan's capacity " +
                                std::to_string(plan.capacity()));
  const std::vector<int32_t> before(plan.work_info().begin() + 4 * s.torn_row,
                                    plan.work_info().begin() + 4 * (s.torn_row + 1));
  plan.refresh(s.spec.lens.data());
  std::copy(before.begin(), before.end(), plan.view().work_info + 4 * s.torn_row);
}

rc::Gen<StaleKernelCase> gen_stale_kernel_case(const KernelDescription& d, DecodeGenLimits lim) {
  return rc::gen::exec([d, lim]() {
    StaleKernelCase v;
    v.spec = *gen_kernel_case(d, lim);
    const std::vector<int32_t>& live = v.spec.lens;
    v.plan_lens = live;
    const size_t b = *rc::gen::inRange<size_t>(0, live.size());
    switch (*rc::gen::inRange(0, 4)) {
      case 0: {  // draft steps advanced every running sequence in place
        const int32_t steps = *rc::gen::inRange(1, 5);
        for (int32_t& l : v.plan_lens) l = std::max(l - steps, 0);
        break;
      }
      case 1:  // one sequence grew alone, across a tile boundary or within one
        v.plan_lens[b] = std::max(live[b] - *rc::gen::element<int32_t>(1, 255, 256, 257, 1000), 0);
        break;
      case 2:  // one sequence was longer (a shrink, or a finished request's slot reused)
        v.plan_lens[b] = live[b] + *rc::gen::element<int32_t>(1, 256, 300);
        break;
      default:  // one sequence empty in the plan, or emptied since
        v.plan_lens[b] = live[b] > 0 ? 0 : 300;
        break;
    }
    if (v.plan_lens == live) v.plan_lens[b] = live[b] + 1;  // every length unchanged: make one differ
    if (*rc::gen::arbitrary<bool>()) {
      // Torn: a row of the live plan whose value differs between the two refreshes.
      kernels::WorkPlan before(plan_params(v.spec)), after(plan_params(v.spec));
      before.refresh(v.plan_lens.data());
      after.refresh(live.data());
      // Rows inside the live plan's ranges: a padding row left over is read by nobody.
      std::vector<int64_t> differ;
      for (int64_t i = 0; i < std::min(after.active_tasks(), after.capacity()); ++i)
        if (!std::equal(before.work_info().begin() + 4 * i, before.work_info().begin() + 4 * (i + 1),
                        after.work_info().begin() + 4 * i))
          differ.push_back(i);
      if (!differ.empty()) v.torn_row = *rc::gen::elementOf(differ);
    }
    return v;
  });
}

// ---- reject cases ------------------------------------------------------------------

std::string reject_kind(const RejectCase& r) {
  return r.clause != Clause::none ? fmt::format("breaks {} (variant {})", kernels::clause_name(r.clause), r.variant)
         : !r.moved.empty()       ? "moved outside: " + r.moved
                                  : std::string("inside the description");
}

std::vector<Clause> abi_clauses(Split split) {
  std::vector<Clause> v = {
      Clause::k_dtype,          Clause::v_dtype,           Clause::q_rank,
      Clause::q_dtype,          Clause::out_dtype,         Clause::out_shape,
      Clause::q_head_dim_stride, Clause::out_head_dim_stride, Clause::k_rank,
      Clause::k_last_dim,       Clause::block_size,        Clause::head_dim,
      Clause::num_hgroups,      Clause::v_heads,           Clause::v_layout,
      Clause::v_blocks,         Clause::head_ratio,        Clause::k_contiguous,
      Clause::v_contiguous,     Clause::block_tables_dtype, Clause::block_tables_rank,
      Clause::block_tables_contiguous, Clause::context_lens_dtype, Clause::context_lens_rank,
      Clause::context_lens_contiguous, Clause::num_seqs,    Clause::q_len,
      Clause::q_rows,           Clause::block_tables_rows, Clause::scale_pairing,
      Clause::scale_dtype,      Clause::scale_shape};
  if (split == Split::plan)
    for (Clause c : {Clause::plan_ceiling, Clause::plan_shape, Clause::plan_invalid}) v.push_back(c);
  return v;
}

std::vector<std::string> outside_moves(const KernelDescription& d) {
  std::vector<std::string> v = {"head_dim", "block_size", "group", "negative_len"};
  // One past max_q_len only where a case file holds it (a saved case must replay).
  if (d.max_q_len < kernels::kMaxQLen || d.min_q_len > 1) v.push_back("q_len");
  if (d.max_num_seqs > 0 && d.max_num_seqs < 16) v.push_back("num_seqs");
  if (d.max_kv_heads > 0 && d.max_kv_heads < 8) v.push_back("kv_heads");
  if (d.max_context_len > 0 && d.max_context_len < 20000) v.push_back("context_len");
  if (d.q_dtypes.size() < 2) v.push_back("q_dtype");
  const bool formats = knows_formats(d);
  if (d.cache_dtypes.size() < (formats ? 5u : 2u)) v.push_back("cache_dtype");
  if (has(d.cache_layouts, CacheLayout::packed) && d.v_layouts.size() < 2) v.push_back("v_layout");
  if (d.scale_kinds.size() < (formats ? 4u : 3u)) v.push_back("scales");
  if (formats) {
    if (d.cache_layouts.size() < 3) v.push_back("cache_layout");
    if (d.page_tables.size() < 2) v.push_back("page_table");
    if (d.kv_storage.size() < 3 && !(d.cache_layouts == std::vector{CacheLayout::packed})) v.push_back("kv_storage");
    if (!d.mla_dims.empty()) v.push_back("mla_dims");
    if (!d.strided_cache && !(d.cache_layouts == std::vector{CacheLayout::packed})) v.push_back("strided_cache");
    if (!d.mixed_scales) v.push_back("mixed_scales");
  }
  if (!d.strided_q) v.push_back("strided_q");
  if (d.split == Split::self ? (!d.split_ceiling || d.max_split_ceiling > 0) : d.max_split_ceiling > 0)
    v.push_back("split_ceiling");
  // A kernel that declares some attention variant knows the fields: it must
  // refuse the ones it does not declare. One that declares none is never sent
  // any (it may predate them).
  if (!d.features.empty())
    for (Feature f : {Feature::window, Feature::soft_cap, Feature::sinks, Feature::alibi})
      if (!d.declares(f)) v.push_back("variant." + std::string(adapters::to_string(f)));
  return v;
}

bool move_outside(CaseSpec& s, const std::string& f, const KernelDescription& d) {
  if (f == "head_dim") {
    const auto h = unlisted_near(s.head_dim, d.head_dims, 16, s.v_head_dim > 0 ? 32 : 16, 1024);
    if (!h) return false;
    s.head_dim = int(*h);
    s.v_head_dim = std::min(s.v_head_dim, s.head_dim - 16);  // MLA: V stays a part of K
    return true;
  }
  if (f == "block_size") {
    const auto b = unlisted_near(s.block_size, d.block_sizes, 16, 16, 512);
    if (!b) return false;
    s.block_size = int(*b);
    return true;
  }
  if (f == "group") {
    const auto g = unlisted_near(s.group, d.gqa_ratios, 1, 1, 64);
    if (!g) return false;
    s.group = int(*g);
    return true;
  }
  if (f == "negative_len") {
    s.lens[0] = -1;
    return true;
  }
  if (f == "q_len") {
    if (d.max_q_len < kernels::kMaxQLen) s.q_len = int(d.max_q_len + 1);
    else if (d.min_q_len > 1) s.q_len = int(d.min_q_len - 1);
    else return false;
    return true;
  }
  if (f == "num_seqs") {
    s.lens.resize(size_t(d.max_num_seqs + 1), 1);
    if (!s.sentinels.empty()) s.sentinels = boundary_sentinels(s.lens);
    return true;
  }
  if (f == "kv_heads") {
    s.hkv = int(d.max_kv_heads + 1);
    return true;
  }
  if (f == "context_len") {
    s.lens[0] = int32_t(d.max_context_len + 1);
    if (!s.sentinels.empty()) s.sentinels = boundary_sentinels(s.lens);
    return true;
  }
  if (f == "q_dtype") {
    const DType other = d.q_dtypes.front() == DType::bf16 ? DType::f16 : DType::bf16;
    if (has(d.q_dtypes, other)) return false;
    s.q_dtype = other;
    return true;
  }
  if (f == "cache_dtype") {
    // The other e4m3 flavour first (what a version-2 kernel knows), then the rest.
    const DType flavour = d.cache_dtypes.front() == DType::fp8_e4m3fn ? DType::fp8_e4m3fnuz : DType::fp8_e4m3fn;
    for (DType other : {flavour, DType::fp8_e5m2, DType::bf16, DType::f16, DType::fp8_e4m3fn, DType::fp8_e4m3fnuz}) {
      if (has(d.cache_dtypes, other) || (!knows_formats(d) && !kernels::is_fp8(other))) continue;
      s.cache_dtype = other;
      s.opt.arch = arch_for(other);
      s.opt.compute = kernels::is_fp8(other) ? other : DType::bf16;
      return true;
    }
    return false;
  }
  if (f == "cache_layout") {
    for (CacheLayout l : {CacheLayout::nhd, CacheLayout::hnd, CacheLayout::packed}) {
      if (has(d.cache_layouts, l)) continue;
      s.layout = l;
      if (l == CacheLayout::packed) {
        s.block_size = std::max(16, (s.block_size + 15) / 16 * 16);
        s.kv_combined = false;
        s.v_head_dim = 0;
        s.page_pad = s.row_pad = 0;
      }
      return true;
    }
    return false;
  }
  if (f == "page_table") {
    const PageTable other = s.page_table == PageTable::csr ? PageTable::block_table : PageTable::csr;
    if (has(d.page_tables, other)) return false;
    s.page_table = other;
    return true;
  }
  if (f == "kv_storage") {
    if (s.layout == CacheLayout::packed) return false;
    for (adapters::KvStorage other : {adapters::KvStorage::combined, adapters::KvStorage::separate, adapters::KvStorage::latent}) {
      if (other == storage_of(s) || has(d.kv_storage, other)) continue;
      if (other == adapters::KvStorage::latent && s.head_dim < 32) continue;
      s.kv_combined = other == adapters::KvStorage::combined;
      // MLA: V the first dims of K, a multiple of 16 below D, under K's one scale.
      s.v_head_dim = other == adapters::KvStorage::latent ? std::max(16, s.head_dim / 32 * 16) : 0;
      if (other == adapters::KvStorage::latent) s.v_scales.reset();
      return true;
    }
    return false;
  }
  if (f == "mla_dims") {
    // Another split of a declared MLA head dim (so head_dims admits it), else
    // a rope 16 wider.
    if (s.v_head_dim == 0) return false;
    for (int latent = s.head_dim - 16; latent >= 16; latent -= 16)
      if (!has(d.mla_dims, adapters::MlaDims{latent, s.head_dim - latent})) {
        s.v_head_dim = latent;
        return true;
      }
    return false;
  }
  if (f == "strided_cache") {
    if (s.layout == CacheLayout::packed || d.strided_cache) return false;
    s.page_pad = 16;
    return true;
  }
  if (f == "mixed_scales") {
    if (d.mixed_scales || s.v_head_dim > 0) return false;  // an MLA cache has one scale
    for (Scales k : {Scales::none, Scales::per_tensor, Scales::per_head, Scales::per_token})
      if (k != s.scales && has(d.scale_kinds, k)) {
        s.v_scales = k;
        return true;
      }
    return false;
  }
  if (f == "v_layout") {
    const VLayout other = d.v_layouts.front() == VLayout::plain ? VLayout::trans : VLayout::plain;
    if (has(d.v_layouts, other)) return false;
    s.v_layout = other;
    return true;
  }
  if (f == "scales") {
    for (Scales k : {Scales::per_token, Scales::per_tensor, Scales::none, Scales::per_head})
      if (!has(d.scale_kinds, k) && (k != Scales::per_head || knows_formats(d))) {
        s.scales = k;
        s.v_scales.reset();
        return true;
      }
    return false;
  }
  if (f == "strided_q") {
    if (d.strided_q) return false;
    s.q_row_pad = 64;
    return true;
  }
  if (f.rfind("variant.", 0) == 0) {
    const int64_t hq = int64_t(s.hkv) * s.group;
    if (f == "variant.window") s.window_left = 1;
    else if (f == "variant.soft_cap") s.soft_cap = 30.0f;
    else if (f == "variant.sinks") s.sinks = std::vector<float>(size_t(hq), 0.5f);
    else if (f == "variant.alibi") s.alibi_slopes = std::vector<float>(size_t(hq), 0.25f);
    else return false;
    return true;
  }
  if (f == "split_ceiling") {
    if (d.split == Split::self) {
      s.max_partitions = d.split_ceiling ? d.max_split_ceiling + 1 : 2;
      return d.max_split_ceiling > 0 || !d.split_ceiling;
    }
    if (d.max_split_ceiling <= 0) return false;
    s.opt.cu = int(d.max_split_ceiling + 1);
    s.max_partitions = d.max_split_ceiling + 1;
    return true;
  }
  return false;
}

rc::Gen<RejectCase> gen_reject_case(const KernelDescription& d, std::vector<CaseSpec> shapes) {
  return rc::gen::exec([d, shapes]() {
    DecodeGenLimits tiny;
    tiny.max_batch = 3;
    tiny.max_total_tokens = 1500;
    tiny.allow_long = false;
    RejectCase r;
    r.spec = shapes.empty() ? *gen_kernel_case(d, tiny) : *gen_kernel_case_shaped(d, shapes, false, tiny);
    for (int32_t& len : r.spec.lens) len = std::min(len, 600);  // one call stays around a millisecond
    if (!r.spec.sentinels.empty()) r.spec.sentinels = boundary_sentinels(r.spec.lens);
    const std::vector<std::string> moves = outside_moves(d);
    int kind = *rc::gen::weightedOneOf<int>({{1, rc::gen::just(0)}, {2, rc::gen::just(1)}, {2, rc::gen::just(2)}});
    // The gate's clause violations are written for the packed layout and block tables.
    if (kind == 2 && (r.spec.layout != CacheLayout::packed || r.spec.page_table != PageTable::block_table)) kind = 1;
    if (kind == 1) {
      // An MLA call's own move (another split of its head dim) is one of many
      // and only applies to MLA calls: drawn for a third of them.
      const bool mla_move = r.spec.v_head_dim > 0 && has(moves, std::string("mla_dims")) &&
                            *rc::gen::weightedOneOf<bool>({{2, rc::gen::just(false)}, {1, rc::gen::just(true)}});
      const std::string f = mla_move ? std::string("mla_dims") : *rc::gen::elementOf(moves);
      if (move_outside(r.spec, f, d)) r.moved = f;
    } else if (kind == 2) {
      const std::vector<Clause> clauses = abi_clauses(d.split);
      r.clause = *rc::gen::resize(100, rc::gen::elementOf(clauses));
      r.variant = *rc::gen::resize(100, rc::gen::inRange(0, violation_variants(r.clause)));
      GateSpec g{r.spec, d.split == Split::plan, r.clause, r.variant};
      adjust_for_violation(g);
      r.spec = g.base;
    }
    fit_derived_fields(r.spec);  // a move or a clause may change the head count or the page
    return r;
  });
}

}  // namespace pav::props
