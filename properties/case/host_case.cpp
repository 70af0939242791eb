// SPDX-License-Identifier: Apache-2.0
#include "properties/case/host_case.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <tuple>

#include "kernels/codecs.hpp"
#include "kernels/validate.hpp"
#include "properties/case/counter_rng.hpp"

namespace pav::props {

using namespace pav::kernels;

namespace {

constexpr uint32_t kF32Nan = 0x7fc00000u;

// The cache buffers of a spec: elements from one page to the next in the K
// buffer (the combined tensor when kv_combined) and in the V buffer (0 when
// combined or MLA), and the stride of a D-long row (nhd, hnd).
struct Storage {
  int64_t k_page = 0, v_page = 0, row = 0, half = 0;  // half: [:, 0] to [:, 1] of a combined tensor
};
Storage storage_of(const CaseSpec& s) {
  Storage st;
  const int64_t per = int64_t(s.hkv) * s.head_dim * s.block_size;
  if (s.layout == CacheLayout::packed) {
    st.k_page = st.v_page = per;
    return st;
  }
  st.row = s.head_dim + s.row_pad;
  const int64_t page = int64_t(s.hkv) * s.block_size * st.row;
  if (s.kv_combined) {
    st.half = page;
    st.k_page = 2 * page + s.page_pad;
  } else if (s.v_head_dim > 0) {
    st.k_page = page + s.page_pad;
  } else {
    st.k_page = st.v_page = page + s.page_pad;
  }
  return st;
}

}  // namespace

void lazy_zero_huge_pages(void* p, size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  if (bytes < (size_t(64) << 20)) return;
  const uintptr_t from = (uintptr_t(p) + kHuge - 1) / kHuge * kHuge, to = (uintptr_t(p) + bytes) / kHuge * kHuge;
  if (to > from) (void)::madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);  // advice only
}

namespace {

// Poisons bytes [from, to) of a cache (whole elements; from on an element).
void poison(uint8_t* buf, size_t from, size_t to, DType t, Poison with) {
  if (to <= from) return;
  if (with == Poison::zero) {
    std::memset(buf + from, 0, to - from);  // 0.0 in every cache dtype
    return;
  }
  // One element's NaN bytes, then the filled prefix copied onto the rest,
  // doubling: a cache of 2^31 elements is poisoned at memcpy's speed, not one
  // element's store at a time.
  const size_t es = size_t(dtype_size(t));
  uint8_t nan[2] = {0, 0};
  put_cache_nan(t, nan);
  if (es == 1) {
    std::memset(buf + from, nan[0], to - from);
    return;
  }
  uint8_t* p = buf + from;
  const size_t n = (to - from) - (to - from) % es;
  if (n == 0) return;
  std::memcpy(p, nan, es);
  for (size_t done = es; done < n;) {
    const size_t k = std::min(done, n - done);
    std::memcpy(p + done, p, k);
    done += k;
  }
}

// Poisons a cache buffer of blocks of `page` bytes. A large cache's
// low blocks (`low` of them, before the used ones) are poisoned only at their
// edges (kLowBlockPoisonBand blocks each side) and stay zero between, untouched
// (CacheBytes): a kernel that reads its first blocks or those next to the used
// ones reads NaN, and the gigabytes between cost nothing.
void poison(CacheBytes& buf, DType t, Poison with, int64_t page, int64_t low) {
  if (low <= 2 * kLowBlockPoisonBand) {
    poison(buf.data(), 0, buf.size(), t, with);
    return;
  }
  poison(buf.data(), 0, size_t(kLowBlockPoisonBand * page), t, with);
  poison(buf.data(), size_t((low - kLowBlockPoisonBand) * page), buf.size(), t, with);
}

// Writes one cache element: value x at (page, h, slot, d) of K or V.
void put_element(const TensorView& view, const CacheShape& cs, bool is_v, int64_t page, int64_t h, int64_t slot,
                 int64_t d, float x) {
  const int64_t off = cache_offset(view, cs, is_v, page, h, slot, d);
  put_cache_element(cs.dtype, x, static_cast<uint8_t*>(view.data) + off * dtype_size(cs.dtype));
}
// Writes rows of a cache: the D (or D_v) values of one (page, head, slot) of K
// or V. cache_offset is a sum of one term per index, so an element's offset is
// the row's (d = 0) plus its d's at the origin: those are taken once per
// case, and a row costs one offset and one encoding per element.
class RowWriter {
 public:
  RowWriter(const TensorView& view, const CacheShape& cs, bool is_v, int64_t n)
      : view_(view), cs_(cs), is_v_(is_v), es_(dtype_size(cs.dtype)), delta_(size_t(std::max<int64_t>(n, 0))) {
    for (int64_t d = 0; d < n; ++d) delta_[size_t(d)] = cache_offset(view, cs, is_v, 0, 0, 0, d);
  }
  // Element d of the row is x[d].
  void put(int64_t page, int64_t h, int64_t slot, const float* x) const {
    uint8_t* row = static_cast<uint8_t*>(view_.data) + cache_offset(view_, cs_, is_v_, page, h, slot, 0) * es_;
    for (size_t d = 0; d < delta_.size(); ++d) put_cache_element(cs_.dtype, x[d], row + delta_[d] * es_);
  }

 private:
  const TensorView& view_;
  const CacheShape& cs_;
  bool is_v_;
  int64_t es_;
  std::vector<int64_t> delta_;
};

float nanf_() { float f; std::memcpy(&f, &kF32Nan, 4); return f; }

void bad(const std::string& field, const std::string& why) {
  throw std::invalid_argument(field + ": " + why);
}

std::vector<int64_t> blocks_per_sequence(const CaseSpec& s) {
  std::vector<int64_t> n(s.lens.size());
  for (size_t b = 0; b < n.size(); ++b) n[b] = s.lens[b] > 0 ? (int64_t(s.lens[b]) + s.block_size - 1) / s.block_size : 0;
  return n;
}

// The random inputs of a case. Generator 2 (rng::kGeneratorVersion) draws each
// value from its coordinates: the same bytes on every platform, and a
// sequence's data does not depend on the other sequences. Generator 1 replays
// case files saved before it: one std::mt19937_64 stream through the standard
// library's distributions, consumed in build_case's loop order (its bytes are
// only reproducible with the standard library that saved the file).
class Draws {
 public:
  enum Tag : uint64_t { blocks = 1, q = 2, tensor_scales = 3, token_scales = 4, k = 5, v = 6, head_scales = 7 };

  explicit Draws(const CaseSpec& s) : counter_(s.generator != rng::kLegacyGenerator), seed_(s.seed), mt_(s.seed) {}

  void permute(std::vector<int32_t>& ids) {
    if (counter_) rng::shuffle(ids, rng::key(seed_, blocks));
    else std::shuffle(ids.begin(), ids.end(), mt_);
  }
  // A row of values: the key of (tag, a, b, c) under generator 2.
  uint64_t row(Tag tag, int64_t a, int64_t b = 0, int64_t c = 0) const {
    return counter_ ? rng::key(seed_, tag, uint64_t(a), uint64_t(b), uint64_t(c)) : 0;
  }
  float normal(uint64_t row, int64_t i) { return counter_ ? rng::normal(row, uint64_t(i)) : normal_(mt_); }
  // n values of the K row and of the V row of one (sequence, token, head).
  // The legacy stream drew them interleaved (K then V, element by element).
  void kv_normals(uint64_t krow, uint64_t vrow, int64_t n, float* k, float* v) {
    if (counter_) {
      for (int64_t i = 0; i < n; ++i) k[i] = rng::normal(krow, uint64_t(i));
      for (int64_t i = 0; i < n; ++i) v[i] = rng::normal(vrow, uint64_t(i));
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      k[i] = normal_(mt_);
      v[i] = normal_(mt_);
    }
  }
  float uniform(uint64_t row, int64_t i) { return counter_ ? rng::uniform(row, uint64_t(i)) : unif_(mt_); }

 private:
  bool counter_;
  uint64_t seed_;
  std::mt19937_64 mt_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
  std::uniform_real_distribution<float> unif_{0.0f, 1.0f};
};

}  // namespace

PlanParams plan_params(const CaseSpec& s) {
  PlanParams p;
  p.num_seqs = int64_t(s.lens.size());
  p.kv_heads = s.hkv;
  p.cu = s.opt.cu;
  p.max_partitions = s.max_partitions;
  p.workgroup_budget = s.workgroup_budget;
  return p;
}

int64_t large_cache_low_blocks(const CaseSpec& s) {
  const int64_t page = storage_of(s).k_page;
  return (kLargeCacheElements + page - 1) / page;
}

void fit_derived_fields(CaseSpec& s) {
  const size_t hq = size_t(std::max(s.hkv, 1)) * size_t(std::max(s.group, 1));
  for (auto* v : {&s.sinks, &s.alibi_slopes})
    if (*v && !(*v)->empty()) (*v)->resize(hq, (*v)->back());
  if (s.low_spare_blocks > 0 && s.block_size > 0 && s.head_dim > 0 && s.hkv > 0)
    s.low_spare_blocks = large_cache_low_blocks(s);
}

float extreme_logit_scale(int head_dim, ScaleKind scales) {
  // q.k ~ kExtremeShift^2 * D in the scaled values.
  constexpr float shift2 = CaseSpec::kExtremeShift * CaseSpec::kExtremeShift;
  return 6e4f / (shift2 * float(head_dim)) / (scales == ScaleKind::none ? 32.0f : 1.0f);
}

float near_tie_scale(int head_dim, ScaleKind scales) {
  return scales == ScaleKind::none ? 1.0f / (32.0f * std::sqrt(float(head_dim))) : 0.0f;
}

bool row_has_visible_token(const CaseSpec& s, int64_t seq, int64_t pos) {
  return int64_t(s.lens[seq]) - s.q_len + 1 + pos > 0;
}

namespace {

// Host bytes the case's buffers and its path's scratch will take, each term
// computed in 128 bits so no shape overflows; the largest term names the field
// to blame.
struct HostBytes {
  __int128 total = 0, largest = 0;
  const char* field = "lens";
  void add(__int128 bytes, const char* f) {
    total += bytes;
    if (bytes > largest) {
      largest = bytes;
      field = f;
    }
  }
};

__int128 scratch_bytes(const CaseSpec& s, int64_t rows) {
  const __int128 H = s.hkv, D = s.head_dim, B = int64_t(s.lens.size());
  const __int128 per_slot = rows * (D * dtype_size(DType::f32) + 2 * int64_t(sizeof(float)));
  if (s.path == Path::planned) {
    try {
      return H * plan_capacity_of(resolve(plan_params(s))) * per_slot;
    } catch (const std::invalid_argument&) {
      return 0;  // no plan: the call is refused before any scratch is sized
    }
  }
  // Split counts past the kernel's range are refused before scratch is sized.
  const int64_t splits = s.opt.uniform_partitions > 0
                             ? std::min<int64_t>(s.opt.uniform_partitions, kMaxUniformPartitions)
                             : dense_decode_splits(int64_t(B), s.hkv, s.opt.cu);
  return B * H * splits * per_slot;
}

}  // namespace

CaseBlocks check_case_spec(const CaseSpec& spec, bool check_memory, bool large_cache) {
  CaseBlocks c;
  const int64_t B = int64_t(spec.lens.size());
  if (B < 1 || B > kMaxPlanBatch) bad("lens", "needs 1.." + std::to_string(kMaxPlanBatch) + " sequences, got " + std::to_string(B));
  if (spec.q_len < 1) bad("q_len", "must be >= 1, got " + std::to_string(spec.q_len));
  if (spec.hkv < 1 || spec.hkv > kMaxKvHeads) bad("hkv", "must be in 1.." + std::to_string(kMaxKvHeads) + ", got " + std::to_string(spec.hkv));
  if (spec.group < 1) bad("group", "must be >= 1, got " + std::to_string(spec.group));
  if (spec.head_dim < 16 || spec.head_dim % 16) bad("head_dim", "must be a positive multiple of 16, got " + std::to_string(spec.head_dim));
  if (spec.layout == CacheLayout::packed) {
    if (spec.block_size < 16 || spec.block_size % 16)
      bad("block_size", "must be a positive multiple of 16 in the packed layout, got " + std::to_string(spec.block_size));
    if (spec.kv_combined) bad("cache.kv", "a combined K/V tensor is for the nhd and hnd layouts");
    if (spec.page_pad != 0 || spec.row_pad != 0) bad("cache.page_pad", "padding is for the nhd and hnd layouts");
    if (spec.v_head_dim != 0) bad("cache.kv", "an MLA (latent) cache is for the nhd and hnd layouts");
  } else if (spec.block_size < 1 || spec.block_size > kMaxBlockSize) {
    bad("block_size", "must be in 1.." + std::to_string(kMaxBlockSize) + ", got " + std::to_string(spec.block_size));
  }
  if (spec.page_pad < 0 || spec.page_pad > kMaxBlockSize * 16)
    bad("cache.page_pad", "must be in 0.." + std::to_string(kMaxBlockSize * 16) + ", got " + std::to_string(spec.page_pad));
  if (spec.row_pad < 0 || spec.row_pad > kMaxHeadDim)
    bad("cache.row_pad", "must be in 0.." + std::to_string(kMaxHeadDim) + ", got " + std::to_string(spec.row_pad));
  if (!is_cache_dtype(spec.cache_dtype)) bad("cache_dtype", "must be bf16, f16, fp8_e4m3fn, fp8_e4m3fnuz or fp8_e5m2");
  if (spec.q_dtype != DType::bf16 && spec.q_dtype != DType::f16) bad("q_dtype", "must be bf16 or f16");
  if (spec.spare_blocks < 1) bad("spare_blocks", "must be >= 1 (unused table entries point at a poisoned block)");
  if (spec.low_spare_blocks < 0 || spec.low_spare_blocks > kLargeCacheElements)
    bad("low_spare_blocks", "must be in 0..2^31, got " + std::to_string(spec.low_spare_blocks));
  if (spec.low_spare_blocks > 0 && spec.block_tables)
    bad("low_spare_blocks", "given with inline block tables (their ids place the blocks)");
  if (spec.null_block && spec.block_tables)
    bad("null_block", "given with inline block tables (their ids place the blocks)");
  if (spec.extreme_logits < -1 || spec.extreme_logits > 1)
    bad("extreme_logits", "must be -1, 0 or 1, got " + std::to_string(spec.extreme_logits));
  if (spec.logit_ties < 0 || spec.logit_ties > 2)
    bad("logit_ties", "must be 0, 1 or 2, got " + std::to_string(spec.logit_ties));
  if (spec.logit_ties != 0 && spec.extreme_logits != 0)
    bad("logit_ties", "cannot go with extreme_logits (both shift q and the keys)");
  if (spec.constant_q_head && spec.zero_q_head) bad("constant_q_head", "cannot go with zero_q_head");
  if (spec.q_row_pad < 0) bad("q_row_pad", "must be >= 0, got " + std::to_string(spec.q_row_pad));
  if (spec.generator != rng::kGeneratorVersion && spec.generator != rng::kLegacyGenerator)
    bad("generator", "must be " + std::to_string(rng::kLegacyGenerator) + " or " +
                         std::to_string(rng::kGeneratorVersion) + ", got " + std::to_string(spec.generator));
  const int64_t D = spec.head_dim, H = spec.hkv, G = spec.group, Hq = H * G, bs = spec.block_size;

  const std::vector<int64_t> nblk = blocks_per_sequence(spec);
  const int64_t needed = std::accumulate(nblk.begin(), nblk.end(), int64_t(0));
  c.used = needed;
  c.max_blocks = std::max<int64_t>(1, *std::max_element(nblk.begin(), nblk.end()));

  // Block counts, and every inline tensor's length against them, before any
  // buffer is sized.
  const Storage store = storage_of(spec);
  const int64_t per_block = store.k_page * dtype_size(spec.cache_dtype);  // K buffer bytes per block
  // Low blocks only move the used pages past element 2^31: pav writes exactly
  // the count that does (large_cache_low_blocks, refitted by every edit); any
  // other count is no case pav saved, and a larger one only asks for memory
  // (2^31 of them at any page size would be terabytes).
  if (spec.low_spare_blocks != 0 && spec.low_spare_blocks != large_cache_low_blocks(spec))
    bad("low_spare_blocks", "must be 0 or " + std::to_string(large_cache_low_blocks(spec)) +
                                " (the blocks of " + std::to_string(store.k_page) +
                                " elements that put the used pages at element 2^31), got " +
                                std::to_string(spec.low_spare_blocks));
  if (spec.block_tables) {
    const int64_t n = int64_t(spec.block_tables->size());
    if (n == 0 || n % B != 0) bad("tensors.block_tables", std::to_string(n) + " entries is not a whole number of rows for " + std::to_string(B) + " sequences");
    c.max_blocks = n / B;
    int32_t mx = 0;
    for (int32_t id : *spec.block_tables) {
      if (id < 0) bad("tensors.block_tables", "block id " + std::to_string(id) + " is negative");
      mx = std::max(mx, id);
    }
    c.num_blocks = int64_t(mx) + 1;
    if (spec.k_codes) {  // inline caches fix the block count
      if (int64_t(spec.k_codes->size()) % per_block != 0) bad("tensors.k_codes", std::to_string(spec.k_codes->size()) + " codes is not a whole number of blocks of " + std::to_string(per_block));
      if (int64_t(spec.k_codes->size()) / per_block < c.num_blocks) bad("tensors.block_tables", "refers past the inline k_codes");
      c.num_blocks = int64_t(spec.k_codes->size()) / per_block;
    }
    for (int64_t b = 0; b < B; ++b)
      if (nblk[b] > c.max_blocks) bad("tensors.block_tables", "sequence " + std::to_string(b) + " needs " + std::to_string(nblk[b]) + " blocks, its row has " + std::to_string(c.max_blocks));
  } else {
    c.num_blocks = spec.low_spare_blocks + int64_t(spec.null_block) + needed + spec.spare_blocks;
  }
  const int64_t qrows = B * spec.q_len, qstride = Hq * D + spec.q_row_pad;
  HostBytes bytes;
  bytes.add(__int128(qrows) * qstride * 2, spec.q_row_pad > Hq * D ? "q_row_pad" : "q_len");
  bytes.add(__int128(qrows) * Hq * D * 2, "group");
  const char* blocks_field = spec.block_tables ? "tensors.block_tables" : needed >= spec.spare_blocks ? "lens" : "spare_blocks";
  bytes.add(__int128(c.num_blocks) * (store.k_page + store.v_page) * dtype_size(spec.cache_dtype), blocks_field);
  const ScaleKind v_kind = spec.v_scales.value_or(spec.scales);
  for (ScaleKind kind : {spec.scales, v_kind})
    if (kind == ScaleKind::per_token) bytes.add(__int128(c.num_blocks) * H * bs * int64_t(sizeof(float)), blocks_field);
  bytes.add(__int128(B) * c.max_blocks * int64_t(sizeof(int32_t)), blocks_field);
  bytes.add(scratch_bytes(spec, int64_t(spec.q_len) * G), spec.path == Path::planned ? "workgroup_budget" : "options.uniform_partitions");
  // A cache past element 2^31 takes gigabytes by design; it may only where the
  // caller runs a kernel that declares large_cache. Everywhere else (pav gate,
  // a kernel without it) the case is held to the 1 GiB of every case, so a
  // small case file never makes pav allocate more.
  const bool large = spec.low_spare_blocks > 0 && large_cache;
  const int64_t limit = large ? kMaxLargeCaseHostBytes : kMaxCaseHostBytes;
  if (check_memory && bytes.total > limit)
    bad(spec.low_spare_blocks > 0 ? "low_spare_blocks" : bytes.field,
        "the case needs " + std::to_string(int64_t(std::min<__int128>(bytes.total, INT64_MAX))) +
            " bytes of host memory (q, caches, tables, scratch), more than the limit of " + std::to_string(limit) +
            (spec.low_spare_blocks > 0 && !large
                 ? " (a cache past element 2^31 may take up to " + std::to_string(kMaxLargeCaseHostBytes) +
                       " only on a kernel that declares large_cache)"
                 : std::string()));
  const int64_t k_bytes = c.num_blocks * per_block, v_bytes = c.num_blocks * store.v_page * dtype_size(spec.cache_dtype);
  if (spec.q_bits && int64_t(spec.q_bits->size()) != qrows * Hq * D)
    bad("tensors.q_bits", "needs " + std::to_string(qrows * Hq * D) + " values, got " + std::to_string(spec.q_bits->size()));
  if (spec.k_codes && int64_t(spec.k_codes->size()) != k_bytes)
    bad("tensors.k_codes", "needs " + std::to_string(k_bytes) + " bytes, got " + std::to_string(spec.k_codes->size()));
  if (spec.v_codes && spec.kv_combined) bad("tensors.v_codes", "given with a combined K/V tensor (k_codes holds both)");
  const bool latent = spec.v_head_dim != 0;
  if (latent) {
    // MLA: V is K's first v_head_dim dims, under K's one scale.
    if (spec.v_head_dim < 16 || spec.v_head_dim % 16 || spec.v_head_dim >= D)
      bad("cache.v_head_dim", "must be a multiple of 16 in 16.." + std::to_string(D - 16) + " (below head_dim), got " +
                                  std::to_string(spec.v_head_dim));
    if (spec.kv_combined) bad("cache.kv", "an MLA cache is not a combined K/V tensor");
    if (spec.v_codes) bad("tensors.v_codes", "given with an MLA cache (k_codes holds its values)");
    if (spec.v_scales && *spec.v_scales != spec.scales) bad("cache.v_scales", "an MLA cache has one scale (K's)");
    if (spec.v_scale_values) bad("tensors.v_scale", "given with an MLA cache (its one scale is tensors.k_scale)");
  }
  if (spec.v_codes && int64_t(spec.v_codes->size()) != v_bytes)
    bad("tensors.v_codes", "needs " + std::to_string(v_bytes) + " bytes, got " + std::to_string(spec.v_codes->size()));
  // Inline scales: once any is given, each scale whose kind is not 'none' is
  // given and holds as many values as its kind; leftover generated values must
  // never stand in for missing ones.
  if (spec.k_scale_values || spec.v_scale_values) {
    for (const auto& [v, kind, name] : {std::tuple{&spec.k_scale_values, spec.scales, "tensors.k_scale"},
                                        std::tuple{&spec.v_scale_values, latent ? ScaleKind::none : v_kind, "tensors.v_scale"}}) {
      const int64_t want = kind == ScaleKind::per_tensor ? 1
                           : kind == ScaleKind::per_head ? H
                           : kind == ScaleKind::per_token ? c.num_blocks * H * bs
                                                          : 0;
      if (want == 0 && *v) bad(name, "given, but its scale kind is 'none'");
      if (want > 0 && !*v) bad(name, "missing: the inline scales come together");
      if (*v && int64_t((*v)->size()) != want)
        bad(name, "needs " + std::to_string(want) + " values for " + std::string(to_string(kind)) + " scales, got " +
                      std::to_string((*v)->size()));
    }
  }
  // The attention variant: a window of -1 (off) or more, a finite soft cap of
  // 0 (off) or more, sink logits and ALiBi slopes finite, one per query head.
  const kernels::AttentionVariant scalars{spec.window_left, spec.soft_cap, {}, {}};
  if (!scalars.window_valid()) bad("variant.window_left", "must be -1 (off) or >= 0, got " + std::to_string(spec.window_left));
  if (!scalars.soft_cap_valid())
    bad("variant.soft_cap", "must be 0 (off) or a finite positive cap, got " + std::to_string(spec.soft_cap));
  for (const auto& [name, values] : {std::pair{"variant.sinks", &spec.sinks}, std::pair{"variant.alibi_slopes", &spec.alibi_slopes}}) {
    if (!*values) continue;
    if (int64_t((*values)->size()) != Hq)
      bad(name, "needs " + std::to_string(Hq) + " values (one per query head), got " + std::to_string((*values)->size()));
    for (float x : **values)
      if (!std::isfinite(x)) bad(name, "holds a value that is not finite");
  }

  return c;
}

HostCase build_case(const CaseSpec& spec, bool fill_values, Poison with, bool large_cache) {
  const CaseBlocks blocks = check_case_spec(spec, true, large_cache);
  HostCase c;
  c.spec = spec;
  c.num_blocks = blocks.num_blocks;
  c.max_blocks = blocks.max_blocks;
  const int64_t B = int64_t(spec.lens.size());
  const int64_t D = spec.head_dim, H = spec.hkv, G = spec.group, Hq = H * G, bs = spec.block_size;
  const DType fl = spec.cache_dtype;
  const std::vector<int64_t> nblk = blocks_per_sequence(spec);
  const int64_t needed = blocks.used;
  const int64_t qrows = B * spec.q_len, qstride = Hq * D + spec.q_row_pad;

  Draws draw(spec);

  // Block tables: used entries take shuffled ids; the rest point at a spare
  // (poisoned) block after them, or at the null block 0 before them, which a
  // kernel must never read.
  const int64_t first_used = spec.low_spare_blocks + int64_t(spec.null_block);
  const int32_t padding = spec.null_block ? 0 : int32_t(first_used + needed);
  if (spec.block_tables) {
    c.block_tables = *spec.block_tables;
  } else {
    std::vector<int32_t> ids(needed);
    std::iota(ids.begin(), ids.end(), int32_t(first_used));
    draw.permute(ids);
    c.block_tables.assign(B * c.max_blocks, padding);
    int64_t k = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < nblk[b]; ++i) c.block_tables[b * c.max_blocks + i] = ids[k++];
  }
  c.lens = spec.lens;
  if (spec.sinks) c.sinks = *spec.sinks;
  if (spec.alibi_slopes) c.alibi_slopes = *spec.alibi_slopes;

  // Q: N(0, 1) rows, strided by q_row_pad.
  const uint16_t qnan = spec.q_dtype == DType::bf16 ? 0x7fc0 : 0x7e00;
  c.q.assign(qrows * qstride, qnan);
  // Extreme logits and near ties: q and the keys share a component (keys on
  // the side of the sign).
  const bool near_ties = spec.logit_ties == 2;
  const float q_shift = spec.extreme_logits != 0 || near_ties ? CaseSpec::kExtremeShift : 0.0f;
  const float key_shift = CaseSpec::kExtremeShift * float(near_ties ? 1 : spec.extreme_logits);
  for (int64_t r = 0; r < qrows && fill_values; ++r)
    for (int64_t i = 0, row = draw.row(Draws::q, r); i < Hq * D; ++i) {
      const float v = draw.normal(row, i) + q_shift;
      c.q[r * qstride + i] = spec.q_dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
    }
  if (spec.zero_q_head || spec.constant_q_head) {
    const float v = spec.zero_q_head ? 0.0f : 1.0f + q_shift;
    const uint16_t bits = spec.q_dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
    for (int64_t r = 0; r < qrows && fill_values; ++r) std::fill_n(c.q.begin() + r * qstride, D, bits);
  }
  if (spec.q_bits) {
    for (int64_t r = 0; r < qrows; ++r)
      std::copy_n(spec.q_bits->begin() + r * Hq * D, Hq * D, c.q.begin() + r * qstride);
  }
  c.out.assign(qrows * Hq * spec.out_head_dim(), qnan);

  // CSR page lists: each sequence's pages of the block table, listed.
  if (spec.page_table == PageTable::csr) {
    c.kv_indptr.assign(1, 0);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t L = std::max<int32_t>(spec.lens[b], 0), n = (L + bs - 1) / bs;
      for (int64_t i = 0; i < n; ++i) c.kv_indices.push_back(c.block_tables[b * c.max_blocks + i]);
      c.kv_indptr.push_back(int32_t(c.kv_indices.size()));
      c.kv_last_page_len.push_back(int32_t(n == 0 ? 0 : L - (n - 1) * bs));
    }
    if (c.kv_indices.empty())  // a list is never empty: a spare page (the null block where there is one)
      c.kv_indices.push_back(spec.null_block ? padding : int32_t(needed));
  }

  // Caches, all poisoned first.
  const Storage store = storage_of(spec);
  const int es = dtype_size(fl);
  c.k.resize(size_t(c.num_blocks * store.k_page * es));
  c.v.resize(size_t(c.num_blocks * store.v_page * es));
  poison(c.k, fl, with, store.k_page * es, spec.low_spare_blocks);
  poison(c.v, fl, with, store.v_page * es, spec.low_spare_blocks);
  const ScaleKind v_kind = c.v_scale_kind();
  // Scales: per tensor a value near 1/32, per head and per token 1/32 times a
  // factor t in [0.5, 1.5) that the stored values are divided by.
  auto init_scale = [&](ScaleKind kind, std::vector<float>& dst, int64_t which) {
    if (kind == ScaleKind::per_tensor) {
      const uint64_t row = draw.row(Draws::tensor_scales, 0);
      dst = {0.03125f * (0.75f + 0.5f * draw.uniform(row, which))};
    } else if (kind == ScaleKind::per_head) {
      dst.resize(size_t(H));
      for (int64_t h = 0; h < H; ++h) dst[size_t(h)] = 0.03125f * (0.5f + draw.uniform(draw.row(Draws::head_scales, h), which));
    } else if (kind == ScaleKind::per_token) {
      dst.assign(c.num_blocks * H * bs, with == Poison::zero ? 0.0f : nanf_());
    }
  };
  const bool latent = spec.v_head_dim > 0;  // MLA: V is K's prefix, under K's scale
  init_scale(spec.scales, c.k_scale, 0);
  if (!latent) init_scale(v_kind, c.v_scale, 1);
  const DecodeCall views = c.call();
  const CacheShape cs = c.cache_shape();
  // Codes ~ N(0, 1) * 32 so per-tensor scales near 1/32 give values near N(0, 1).
  std::vector<float> kval(D), vval(D);
  const RowWriter k_rows(views.k_cache, cs, false, D), v_rows(views.v_cache, cs, true, latent ? 0 : D);
  // Ties: each (sequence, KV head)'s token-0 key, which every key repeats (1)
  // or stays near (2).
  std::vector<float> k0(size_t(H * D));
  for (int64_t b = 0; b < B && fill_values; ++b) {
    for (int64_t h = 0; h < H && spec.logit_ties != 0; ++h)
      for (int64_t d = 0; d < D; ++d) k0[size_t(h * D + d)] = draw.normal(draw.row(Draws::k, b, 0, h), d);
    for (int64_t t = 0; t < std::max<int32_t>(spec.lens[b], 0); ++t) {
      const int64_t blk = c.block_tables[b * c.max_blocks + t / bs], off = t % bs;
      for (int64_t h = 0; h < H; ++h) {
        float tk = 1.0f, tv = 1.0f;
        if (spec.scales == ScaleKind::per_token || v_kind == ScaleKind::per_token) {
          const uint64_t row = draw.row(Draws::token_scales, b, t, h);
          if (spec.scales == ScaleKind::per_token) {
            // Exact ties: every key token 0's, its scale too (the stored codes then agree).
            tk = 0.5f + draw.uniform(spec.logit_ties == 1 ? draw.row(Draws::token_scales, b, 0, h) : row, 0);
            c.k_scale[(blk * H + h) * bs + off] = 0.03125f * tk;
          }
          if (v_kind == ScaleKind::per_token && !latent) {
            tv = 0.5f + draw.uniform(row, 1);
            c.v_scale[(blk * H + h) * bs + off] = 0.03125f * tv;
          }
        }
        if (spec.scales == ScaleKind::per_head) tk = c.k_scale[size_t(h)] / 0.03125f;
        if (v_kind == ScaleKind::per_head && !latent) tv = c.v_scale[size_t(h)] / 0.03125f;
        draw.kv_normals(draw.row(Draws::k, b, t, h), draw.row(Draws::v, b, t, h), D, kval.data(), vval.data());
        if (spec.logit_ties != 0) {
          const float spread = spec.logit_ties == 1 ? 0.0f : CaseSpec::kNearTieSpread;
          for (int64_t d = 0; d < D; ++d) kval[d] = k0[size_t(h * D + d)] + spread * kval[d];
        }
        for (int64_t d = 0; d < D; ++d) {
          kval[d] = (kval[d] + key_shift) * 32.0f / tk;
          vval[d] = vval[d] * 32.0f / tv;
        }
        k_rows.put(blk, h, off, kval.data());
        if (!latent) v_rows.put(blk, h, off, vval.data());
      }
    }
  }
  if (spec.k_codes) c.k.assign(spec.k_codes->begin(), spec.k_codes->end());
  if (spec.v_codes) c.v.assign(spec.v_codes->begin(), spec.v_codes->end());
  if (spec.k_scale_values) c.k_scale = *spec.k_scale_values;
  if (spec.v_scale_values) c.v_scale = *spec.v_scale_values;

  // Sentinels: key codes follow the sign of the group's summed queries, value
  // codes are a large alternating pattern.
  for (size_t si = 0; si < spec.sentinels.size() && fill_values; ++si) {
    const Sentinel& s = spec.sentinels[si];
    if (s.seq < 0 || s.seq >= B) bad("sentinels", "seq " + std::to_string(s.seq) + " out of range");
    if (s.token < 0 || s.token >= spec.lens[s.seq]) continue;  // outside the context: nothing to plant
    const int64_t blk = c.block_tables[s.seq * c.max_blocks + s.token / bs], off = s.token % bs;
    for (int64_t h = 0; h < H; ++h) {
      if (spec.scales == ScaleKind::per_token) c.k_scale[(blk * H + h) * bs + off] = 0.03125f;
      if (v_kind == ScaleKind::per_token && !latent) c.v_scale[(blk * H + h) * bs + off] = 0.03125f;
      for (int64_t d = 0; d < D && !latent; ++d) {  // MLA: the aligned key below is its value too
        const float pattern = ((d + int64_t(si)) % 2 ? 1.0f : -1.0f) * (96.0f + 16.0f * float(si % 4));
        put_element(views.v_cache, cs, true, blk, h, off, d, pattern);
      }
    }
    plant_query_aligned_key(c, s.seq, s.token, 224.0f);
  }
  return c;
}

void plant_query_aligned_key(HostCase& c, int64_t seq, int64_t token, float magnitude) {
  const CaseSpec& spec = c.spec;
  const int64_t D = spec.head_dim, H = spec.hkv, G = spec.group, bs = spec.block_size;
  const int64_t qstride = H * G * D + spec.q_row_pad;
  const int64_t blk = c.block_tables[seq * c.max_blocks + token / bs], off = token % bs;
  const DecodeCall views = c.call();
  const CacheShape cs = c.cache_shape();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < D; ++d) {
      float sum = 0.0f;
      for (int64_t p = 0; p < spec.q_len; ++p)
        for (int64_t g = 0; g < G; ++g) {
          const uint16_t bits = c.q[(seq * spec.q_len + p) * qstride + (h * G + g) * D + d];
          sum += spec.q_dtype == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
        }
      put_element(views.k_cache, cs, false, blk, h, off, d, sum >= 0 ? magnitude : -magnitude);
    }
}

CaseSpec single_sequence_spec(const HostCase& c, int64_t seq) {
  CaseSpec s = c.spec;
  s.lens = {c.lens[size_t(seq)]};
  s.sentinels.clear();
  s.null_block = false;  // the inline table's ids place the blocks, block 0 (poisoned) among them
  s.block_tables = std::vector<int32_t>(c.block_tables.begin() + seq * c.max_blocks,
                                        c.block_tables.begin() + (seq + 1) * c.max_blocks);
  const int64_t row_elems = int64_t(s.hkv) * s.group * s.head_dim;
  const int64_t stride = row_elems + s.q_row_pad;
  std::vector<uint16_t> q;
  for (int64_t p = 0; p < s.q_len; ++p) {
    const uint16_t* row = &c.q[size_t((seq * s.q_len + p) * stride)];
    q.insert(q.end(), row, row + row_elems);
  }
  s.q_bits = std::move(q);
  s.k_codes.emplace(c.k.begin(), c.k.end());
  if (!s.kv_combined && s.v_head_dim == 0) s.v_codes.emplace(c.v.begin(), c.v.end());  // a combined tensor and an MLA cache are all in k
  if (!c.k_scale.empty()) {
    s.k_scale_values = c.k_scale;
    if (s.v_head_dim == 0) s.v_scale_values = c.v_scale;
  }
  return s;
}

DecodeCall HostCase::call() {
  const CaseSpec& s = spec;
  const int64_t B = int64_t(lens.size()), D = s.head_dim, H = s.hkv, Hq = H * s.group, bs = s.block_size;
  DecodeCall c;
  c.q = TensorView::contiguous_of(q.data(), s.q_dtype, {B * s.q_len, Hq, D});
  c.q.stride[0] = Hq * D + s.q_row_pad;
  c.out = TensorView::contiguous_of(out.data(), s.q_dtype, {B * s.q_len, Hq, s.out_head_dim()});
  c.layout = s.layout;
  if (s.layout == CacheLayout::packed) {
    c.k_cache = TensorView::contiguous_of(k.data(), s.cache_dtype, {num_blocks, H, D / 16, bs, 16});
    if (s.v_layout == VLayout::trans)
      c.v_cache = TensorView::contiguous_of(v.data(), s.cache_dtype, {num_blocks, H, bs / 16, D, 16});
    else
      c.v_cache = TensorView::contiguous_of(v.data(), s.cache_dtype, {num_blocks, H, D, bs});
  } else {
    // [pages, page_size, Hkv, D] (nhd) or [pages, Hkv, page_size, D] (hnd), rows
    // row_pad apart and pages page_pad apart.
    const Storage st = storage_of(s);
    const bool nhd = s.layout == CacheLayout::nhd;
    TensorView kv;
    kv.data = k.data();
    kv.dtype = s.cache_dtype;
    kv.rank = 4;
    kv.shape = {num_blocks, nhd ? bs : H, nhd ? H : bs, D, 0, 0};
    kv.stride = {st.k_page, (nhd ? H : bs) * st.row, st.row, 1, 0, 0};
    c.k_cache = kv;
    c.v_cache = kv;
    if (s.kv_combined) {
      c.kv_cache.data = k.data();
      c.kv_cache.dtype = s.cache_dtype;
      c.kv_cache.rank = 5;
      c.kv_cache.shape = {num_blocks, 2, kv.shape[1], kv.shape[2], D, 0};
      c.kv_cache.stride = {st.k_page, st.half, kv.stride[1], kv.stride[2], 1, 0};
      c.k_cache = kv_half(c.kv_cache, 0);
      c.v_cache = kv_half(c.kv_cache, 1);
    } else if (s.v_head_dim > 0) {
      c.v_latent = true;
      c.v_cache = latent_v(kv, s.v_head_dim);
    } else {
      c.v_cache.data = v.data();
    }
  }
  c.context_lens = TensorView::contiguous_of(lens.data(), DType::i32, {B});
  c.page_table = s.page_table;
  if (s.page_table == PageTable::block_table) {
    c.block_tables = TensorView::contiguous_of(block_tables.data(), DType::i32, {B, max_blocks});
  } else {
    c.kv_indptr = TensorView::contiguous_of(kv_indptr.data(), DType::i32, {int64_t(kv_indptr.size())});
    c.kv_indices = TensorView::contiguous_of(kv_indices.data(), DType::i32, {int64_t(kv_indices.size())});
    c.kv_last_page_len = TensorView::contiguous_of(kv_last_page_len.data(), DType::i32, {int64_t(kv_last_page_len.size())});
  }
  auto scale_view = [&](ScaleKind kind, std::vector<float>& values) {
    switch (kind) {
      case ScaleKind::none: return TensorView{};
      case ScaleKind::per_tensor: return TensorView::contiguous_of(values.data(), DType::f32, {1});
      case ScaleKind::per_head: return TensorView::contiguous_of(values.data(), DType::f32, {H});
      case ScaleKind::per_token: return TensorView::contiguous_of(values.data(), DType::f32, {num_blocks, H, bs});
    }
    return TensorView{};
  };
  c.k_scale = scale_view(s.scales, k_scale);
  c.v_scale = c.v_latent ? c.k_scale : scale_view(v_scale_kind(), v_scale);
  c.q_len = s.q_len;
  c.opt = s.opt;
  c.opt.softmax_scale = s.softmax_scale;
  c.variant.window_left = s.window_left;
  c.variant.soft_cap = s.soft_cap;
  if (!sinks.empty()) c.variant.sinks = TensorView::contiguous_of(sinks.data(), DType::f32, {Hq});
  if (!alibi_slopes.empty())
    c.variant.alibi_slopes = TensorView::contiguous_of(alibi_slopes.data(), DType::f32, {Hq});
  return c;
}

CacheShape HostCase::cache_shape() const {
  CacheShape cs;
  cs.layout = spec.layout;
  cs.dtype = spec.cache_dtype;
  cs.v_layout = spec.layout == CacheLayout::packed ? spec.v_layout : VLayout::unknown;
  cs.pages = num_blocks;
  cs.page_size = spec.block_size;
  cs.hkv = spec.hkv;
  cs.head_dim = spec.head_dim;
  cs.combined = spec.kv_combined;
  cs.v_head_dim = spec.out_head_dim();
  cs.latent = spec.v_head_dim > 0;
  return cs;
}

void HostCase::poison_output() {
  std::fill(out.begin(), out.end(), spec.q_dtype == DType::bf16 ? uint16_t(0x7fc0) : uint16_t(0x7e00));
}

HostScratch make_scratch(const DecodeCall& call, int64_t slots, int64_t heads) {
  // The buffers below hold f32 or 16-bit partials only: any other dtype is the
  // kernel's scratch_dtype reject, raised before a byte is sized from it.
  if (!partial_dtype_ok(call.opt.partial)) {
    Finding f;
    f.clause = Clause::scratch_dtype;
    f.field = "opt.partial";
    f.kind = ValueKind::dtype;
    f.value = int64_t(call.opt.partial);
    throw RejectError(f, heads > 0 ? KernelKind::planned : KernelKind::uniform);
  }
  const CallDims d = dims_of(call);
  HostScratch s;
  s.slots = slots;
  const int es = dtype_size(call.opt.partial);
  const int64_t n = std::max<int64_t>(slots, 1) * d.rows * d.head_dim;
  s.partial.resize(n * es);
  if (call.opt.partial == DType::f32) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(&s.partial[i * 4], &kF32Nan, 4);
  } else {
    const uint16_t nan16 = call.opt.partial == DType::bf16 ? 0x7fc0 : 0x7e00;
    for (int64_t i = 0; i < n; ++i) std::memcpy(&s.partial[i * 2], &nan16, 2);
  }
  s.m.assign(std::max<int64_t>(slots, 1) * d.rows, nanf_());
  s.l.assign(std::max<int64_t>(slots, 1) * d.rows, nanf_());
  if (heads > 0) {
    const int64_t per = slots / heads;
    s.view.partial = TensorView::contiguous_of(s.partial.data(), call.opt.partial, {heads, per, d.rows, d.head_dim});
    s.view.m = TensorView::contiguous_of(s.m.data(), DType::f32, {heads, per, d.rows});
    s.view.l = TensorView::contiguous_of(s.l.data(), DType::f32, {heads, per, d.rows});
  } else {
    s.view.partial = TensorView::contiguous_of(s.partial.data(), call.opt.partial, {slots, d.rows, d.head_dim});
    s.view.m = TensorView::contiguous_of(s.m.data(), DType::f32, {slots, d.rows});
    s.view.l = TensorView::contiguous_of(s.l.data(), DType::f32, {slots, d.rows});
  }
  return s;
}

int64_t scratch_touched_past(const HostScratch& s, const DecodeCall& call, int64_t first_unused_slot,
                             int64_t slots_per_head, int64_t heads) {
  const CallDims d = dims_of(call);
  int64_t touched = 0;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = first_unused_slot; i < slots_per_head; ++i) {
      const int64_t slot = h * slots_per_head + i;
      for (int64_t r = 0; r < d.rows; ++r) {
        if (!std::isnan(s.m[slot * d.rows + r]) || !std::isnan(s.l[slot * d.rows + r])) ++touched;
        for (int64_t dd = 0; dd < d.head_dim; ++dd) {
          const int64_t e = (slot * d.rows + r) * d.head_dim + dd;
          float v;
          if (call.opt.partial == DType::f32) std::memcpy(&v, &s.partial[e * 4], 4);
          else {
            uint16_t h16;
            std::memcpy(&h16, &s.partial[e * 2], 2);
            v = call.opt.partial == DType::bf16 ? bf16_to_f32(h16) : f16_to_f32(h16);
          }
          if (!std::isnan(v)) ++touched;
        }
      }
    }
  return touched;
}

}  // namespace pav::props
