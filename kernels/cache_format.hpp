// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one home of a call's cache format: which layouts, dtypes, page tables
// and scales a DecodeCall may carry, how a (page, head, slot, d) element is
// found in a cache view, and which page holds a sequence's i-th page. The
// reference reads every cache through these functions and the contract checks
// every call against them, so the two cannot disagree on a layout.
// docs/verify-your-kernel.md ("Cache formats") is the spec in prose.
//
// Header-only: every layer (reference, adapters, properties) uses it without
// linking pav's kernels.
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/call.hpp"

namespace pav::kernels {

// K and V scales, each its own kind: absent, one f32 value per tensor ([1]),
// one per KV head ([Hkv]) or one per cached token ([pages, Hkv, page_size],
// any non-negative strides). per_head comes last so the older values keep
// their numbers.
enum class ScaleKind : uint8_t { none, per_tensor, per_token, per_head };

inline std::string_view to_string(CacheLayout l) {
  return l == CacheLayout::packed ? "packed" : l == CacheLayout::nhd ? "nhd" : "hnd";
}
inline std::string_view to_string(PageTable p) { return p == PageTable::block_table ? "block_table" : "csr"; }
inline std::string_view to_string(ScaleKind s) {
  switch (s) {
    case ScaleKind::none: return "none";
    case ScaleKind::per_tensor: return "per_tensor";
    case ScaleKind::per_token: return "per_token";
    case ScaleKind::per_head: return "per_head";
  }
  return "?";
}
inline bool parse_cache_layout(std::string_view s, CacheLayout& out) {
  for (CacheLayout l : {CacheLayout::packed, CacheLayout::nhd, CacheLayout::hnd})
    if (to_string(l) == s) return out = l, true;
  return false;
}
inline bool parse_page_table(std::string_view s, PageTable& out) {
  for (PageTable p : {PageTable::block_table, PageTable::csr})
    if (to_string(p) == s) return out = p, true;
  return false;
}
inline bool parse_scale_kind(std::string_view s, ScaleKind& out) {
  for (ScaleKind k : {ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_token, ScaleKind::per_head})
    if (to_string(k) == s) return out = k, true;
  return false;
}

// What a call's cache views are, read off their shapes.
struct CacheShape {
  CacheLayout layout = CacheLayout::packed;
  DType dtype = DType::none;
  VLayout v_layout = VLayout::unknown;  // packed only
  int64_t pages = 0, page_size = 0, hkv = 0, head_dim = 0;
  int64_t v_head_dim = 0;  // D_v: head_dim but for an MLA cache
  bool combined = false;
  bool latent = false;     // MLA: V is K's first v_head_dim dims
};

// The logical dims of a K view (and of V but packed): [pages, a, b, D] with
// (a, b) = (page_size, Hkv) for nhd, (Hkv, page_size) for hnd.
inline int64_t cache_offset_nhd_hnd(const TensorView& t, int64_t page, int64_t h, int64_t slot, int64_t d,
                                    bool nhd) {
  return page * t.stride[0] + (nhd ? slot * t.stride[1] + h * t.stride[2] : h * t.stride[1] + slot * t.stride[2]) +
         d * t.stride[3];
}

// Elements a view spans: one past its farthest element's offset (0 when absent).
inline int64_t view_span(const TensorView& t) {
  if (!t.present()) return 0;
  int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) last += (t.shape[i] - 1) * t.stride[i];
  return last + 1;
}
// A cache whose views span this many elements or more has offsets past int32:
// only a kernel that declares large_cache is handed one.
inline constexpr int64_t kLargeCacheElements = int64_t(1) << 31;
// The elements the call's cache spans (the combined tensor, else K's or V's,
// the larger).
inline int64_t cache_span(const DecodeCall& c) {
  return c.kv_cache.present() ? view_span(c.kv_cache) : std::max(view_span(c.k_cache), view_span(c.v_cache));
}

// The [:, which] half of a combined [pages, 2, ...] tensor: K (0) or V (1).
inline TensorView kv_half(const TensorView& kv, int which) {
  TensorView h;
  h.dtype = kv.dtype;
  h.rank = kv.rank - 1;
  h.shape[0] = kv.shape[0];
  h.stride[0] = kv.stride[0];
  for (int i = 2; i < kv.rank; ++i) {
    h.shape[size_t(i - 1)] = kv.shape[size_t(i)];
    h.stride[size_t(i - 1)] = kv.stride[size_t(i)];
  }
  if (kv.data) h.data = static_cast<uint8_t*>(kv.data) + which * kv.stride[1] * dtype_size(kv.dtype);
  return h;
}

// The values of an MLA cache: K's [..., :dv] view (nhd, hnd), the same
// memory at K's strides.
inline TensorView latent_v(const TensorView& k, int64_t dv) {
  TensorView v = k;
  v.shape[3] = dv;
  return v;
}

// Element offset of (page, head h, slot, d) in a K (is_v false) or V view.
inline int64_t cache_offset(const TensorView& t, const CacheShape& s, bool is_v, int64_t page, int64_t h,
                            int64_t slot, int64_t d) {
  if (s.layout != CacheLayout::packed) return cache_offset_nhd_hnd(t, page, h, slot, d, s.layout == CacheLayout::nhd);
  const int64_t base = page * t.stride[0] + h * t.stride[1];
  if (!is_v) return base + (d / 16) * t.stride[2] + slot * t.stride[3] + (d % 16) * t.stride[4];
  if (s.v_layout == VLayout::plain) return base + d * t.stride[2] + slot * t.stride[3];
  return base + (slot / 16) * t.stride[2] + d * t.stride[3] + (slot % 16) * t.stride[4];
}

namespace cache_detail {

inline std::string shape_text(const TensorView& v) { return v.present() ? v.shape_string() : "absent"; }

inline bool same_view(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i)
    if (a.shape[i] != b.shape[i] || a.stride[i] != b.stride[i]) return false;
  return true;
}

// Strides that keep the dims in row-major order without overlap, the last
// stride 1: stride[i] >= extent[i+1] * stride[i+1]. (Gaps are allowed: a page
// or a row padded, a half of a combined tensor.)
inline bool ordered_strides(const TensorView& v) {
  if (v.rank == 0 || v.stride[v.rank - 1] != 1) return false;
  for (int i = v.rank - 2; i >= 0; --i)
    if (v.shape[i] > 1 && v.stride[i] < v.shape[i + 1] * v.stride[i + 1]) return false;
  return true;
}

}  // namespace cache_detail

// How a cache view's strides may differ from the contiguous ones:
//   contiguous: not at all;
//   ordered:    padded pages and rows (nhd, hnd), the dims kept in the
//               layout's order without overlap, the head-dim stride 1 (what a
//               kernel that declares strided_cache is handed);
//   any:        any non-negative strides (what the reference reads).
enum class StrideRule : uint8_t { contiguous, ordered, any };

// The first reason the cache views of c are not a cache of its layout, empty
// when they are (filling `out`). head_dim is q's D. A combined K/V tensor
// must have k_cache and v_cache as its [:, 0] and [:, 1] halves. The packed
// layout is contiguous unless the rule is `any`.
inline std::string cache_views_problem(const DecodeCall& c, int64_t head_dim, StrideRule rule, CacheShape& out) {
  auto strides_problem = [&](const TensorView& t, const char* name) -> std::string {
    if (rule == StrideRule::any) return {};
    if (rule == StrideRule::ordered && !cache_detail::ordered_strides(t))
      return fmt::format("{}: strides of {} overlap or the head-dim stride is not 1", name, cache_detail::shape_text(t));
    if (rule == StrideRule::contiguous && !t.contiguous())
      return fmt::format("{}: not contiguous (the kernel takes no strided cache)", name);
    return {};
  };
  using cache_detail::shape_text;
  const TensorView& k = c.k_cache;
  const TensorView& v = c.v_cache;
  CacheShape s;
  s.layout = c.layout;
  s.dtype = k.dtype;
  for (const auto& [name, t] : {std::pair{"k_cache", &k}, std::pair{"v_cache", &v}}) {
    if (!t->present()) return fmt::format("{}: absent", name);
    for (int i = 0; i < t->rank; ++i)
      if (t->shape[i] < 1 || t->stride[i] < 0)
        return fmt::format("{}: shape {} has an extent < 1 or a negative stride", name, shape_text(*t));
  }
  if (!is_cache_dtype(k.dtype))
    return fmt::format("k_cache: dtype {} is not a cache dtype (bf16, f16, fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2)",
                       to_string(k.dtype));
  if (v.dtype != k.dtype)
    return fmt::format("v_cache: dtype {} differs from k_cache's {}", to_string(v.dtype), to_string(k.dtype));
  if (c.layout == CacheLayout::packed) {
    if (c.kv_cache.present()) return "kv_cache: a combined K/V tensor is for the nhd and hnd layouts";
    if (c.v_latent) return "v_latent: an MLA cache is for the nhd and hnd layouts";
    if (k.rank != 5 || k.shape[4] != 16)
      return fmt::format("k_cache: shape {} (expected packed [pages, Hkv, D/16, page_size, 16])", shape_text(k));
    if (k.shape[2] * 16 != head_dim)
      return fmt::format("k_cache: dim 2 is {}, so D = {}, but q has D = {}", k.shape[2], k.shape[2] * 16, head_dim);
    s.pages = k.shape[0];
    s.hkv = k.shape[1];
    s.page_size = k.shape[3];
    s.head_dim = s.v_head_dim = head_dim;
    s.v_layout = v_layout_of(k, v);
    if (s.v_layout == VLayout::unknown || !holds_num_blocks(v.shape[0], s.pages))
      return fmt::format("v_cache: shape {} is neither plain [{}, {}, {}, {}] nor trans [{}, {}, {}, {}, 16]",
                         shape_text(v), s.pages, s.hkv, head_dim, s.page_size, s.pages, s.hkv, s.page_size / 16,
                         head_dim);
    if (rule != StrideRule::any && !k.contiguous()) return "k_cache: not contiguous";
    if (rule != StrideRule::any && !v.contiguous()) return "v_cache: not contiguous";
    out = s;
    return {};
  }
  const bool nhd = c.layout == CacheLayout::nhd;
  const char* form = nhd ? "[pages, page_size, Hkv, D]" : "[pages, Hkv, page_size, D]";
  if (k.rank != 4) return fmt::format("k_cache: rank {} (expected {} for {})", k.rank, form, to_string(c.layout));
  s.pages = k.shape[0];
  s.page_size = k.shape[nhd ? 1 : 2];
  s.hkv = k.shape[nhd ? 2 : 1];
  s.head_dim = k.shape[3];
  if (s.head_dim != head_dim) return fmt::format("k_cache: D = {}, but q has D = {}", s.head_dim, head_dim);
  s.v_head_dim = s.head_dim;
  if (c.v_latent) {
    // MLA: V is K's first D_v dims, 16 <= D_v < D a multiple of 16, and one
    // scale serves both.
    if (c.kv_cache.present()) return "kv_cache: given with an MLA cache (V is part of K)";
    const int64_t dv = v.rank == 4 ? v.shape[3] : 0;
    if (dv < 16 || dv >= head_dim || dv % 16 != 0)
      return fmt::format("v_cache: shape {}: an MLA cache's D_v must be a multiple of 16 in 16..{}", shape_text(v),
                         head_dim - 16);
    if (!cache_detail::same_view(v, latent_v(k, dv)))
      return fmt::format("v_cache: not k_cache's [..., :{}] view (an MLA cache's values are its keys' first D_v dims)", dv);
    if (!cache_detail::same_view(c.k_scale, c.v_scale))
      return "v_scale: differs from k_scale (an MLA cache has one scale for its keys and values)";
    if (auto why = strides_problem(k, "k_cache"); !why.empty()) return why;
    s.v_head_dim = dv;
    s.latent = true;
    out = s;
    return {};
  }
  if (v.rank != 4 || v.shape != k.shape) return fmt::format("v_cache: shape {} differs from k_cache's {}", shape_text(v), shape_text(k));
  if (c.kv_cache.present()) {
    const TensorView& kv = c.kv_cache;
    if (kv.rank != 5 || kv.dtype != k.dtype || kv.shape[0] != s.pages || kv.shape[1] != 2)
      return fmt::format("kv_cache: {} {} (expected {} [{}, 2, ...])", to_string(kv.dtype), shape_text(kv),
                         to_string(k.dtype), s.pages);
    if (!cache_detail::same_view(k, kv_half(kv, 0))) return "kv_cache: k_cache is not its [:, 0] half";
    if (!cache_detail::same_view(v, kv_half(kv, 1)))
      return "kv_cache: k_cache and v_cache are not its [:, 0] and [:, 1] halves";
    if (auto why = strides_problem(kv, "kv_cache"); !why.empty()) return why;
    s.combined = true;
    out = s;
    return {};
  }
  for (const auto& [name, t] : {std::pair{"k_cache", &k}, std::pair{"v_cache", &v}})
    if (auto why = strides_problem(*t, name); !why.empty()) return why;
  out = s;
  return {};
}

// The kind of a K or V scale view for a cache of shape s, or the reason it is
// none of them.
inline std::string scale_view_problem(const TensorView& t, const CacheShape& s, ScaleKind& kind, const char* name) {
  kind = ScaleKind::none;
  if (!t.present()) return {};
  if (t.dtype != DType::f32 || t.data == nullptr)
    return fmt::format("{}: dtype {} (expected f32 with data)", name, to_string(t.dtype));
  for (int i = 0; i < t.rank; ++i)
    if (t.stride[i] < 0) return fmt::format("{}: a negative stride", name);
  if (t.rank == 1 && t.shape[0] == 1) kind = ScaleKind::per_tensor;
  else if (t.rank == 1 && t.shape[0] == s.hkv) kind = ScaleKind::per_head;
  else if (t.rank == 3 && t.shape[0] >= s.pages && t.shape[1] == s.hkv && t.shape[2] == s.page_size)
    kind = ScaleKind::per_token;
  else
    return fmt::format("{}: shape {} is neither [1], [{}] nor [{}, {}, {}]", name, cache_detail::shape_text(t), s.hkv,
                       s.pages, s.hkv, s.page_size);
  return {};
}

// A scale's value for (page, h, slot); 1 for an absent one.
inline float scale_at(const TensorView& t, ScaleKind kind, int64_t page, int64_t h, int64_t slot) {
  const float* p = t.as<const float>();
  switch (kind) {
    case ScaleKind::none: return 1.0f;
    case ScaleKind::per_tensor: return p[0];
    case ScaleKind::per_head: return p[h * t.stride[0]];
    case ScaleKind::per_token: return p[page * t.stride[0] + h * t.stride[1] + slot * t.stride[2]];
  }
  return 1.0f;
}

inline int32_t i32_at(const TensorView& t, int64_t i) { return t.as<const int32_t>()[i * t.stride[0]]; }

// The i-th page of sequence s (no checks: after page_table_problem).
inline int64_t page_of(const DecodeCall& c, int64_t s, int64_t i) {
  if (c.page_table == PageTable::block_table)
    return c.block_tables.as<const int32_t>()[s * c.block_tables.stride[0] + i * c.block_tables.stride[1]];
  return i32_at(c.kv_indices, i32_at(c.kv_indptr, s) + i);
}

// The first reason the page table of c does not describe every sequence's
// pages within a cache of `pages` pages of page_size tokens, empty when it
// does. Reads context_lens and the table's values (host memory). A sequence
// of length L holds ceil(L / page_size) pages; in CSR, kv_indptr starts at 0
// and grows by each sequence's page count, and kv_last_page_len is the tokens
// of its last page (L - (n-1)*page_size; 0 for an empty sequence).
struct PageTableRules {
  int64_t max_context_len = 0;  // 0: no limit
  bool negative_empty = false;  // a negative length is an empty sequence (as pav's kernels take it), else refused
  bool any_strides = false;     // the lists and tables at any non-negative strides (the reference), else contiguous
};
inline std::string page_table_problem(const DecodeCall& c, int64_t pages, int64_t page_size,
                                      const PageTableRules& rules = {}) {
  using cache_detail::shape_text;
  const int64_t max_context_len = rules.max_context_len;
  const bool negative_empty = rules.negative_empty;
  auto dense = [&](const TensorView& t) { return rules.any_strides ? t.stride[0] >= 0 : t.stride[0] == 1; };
  const TensorView& lens = c.context_lens;
  if (lens.rank != 1 || lens.dtype != DType::i32 || lens.shape[0] < 1 || !dense(lens) || !lens.data)
    return fmt::format("context_lens: {} {} (expected a contiguous i32 [num_seqs >= 1])", to_string(lens.dtype),
                       shape_text(lens));
  const int64_t num_seqs = lens.shape[0];
  auto i32_list = [&](const TensorView& t, const char* name, int64_t at_least) -> std::string {
    if (t.rank != 1 || t.dtype != DType::i32 || t.shape[0] < at_least || !dense(t) || !t.data)
      return fmt::format("{}: {} {} (expected a contiguous i32 [>= {}])", name, to_string(t.dtype), shape_text(t),
                         at_least);
    return {};
  };
  if (c.page_table == PageTable::block_table) {
    if (c.kv_indptr.present() || c.kv_indices.present() || c.kv_last_page_len.present())
      return "kv_indptr: CSR lists given with a block table";
    const TensorView& bt = c.block_tables;
    if (bt.rank != 2 || bt.dtype != DType::i32 || !bt.data)
      return fmt::format("block_tables: {} {} (expected i32 [num_seqs, max_blocks])", to_string(bt.dtype), shape_text(bt));
    if (bt.shape[0] < num_seqs || bt.shape[1] < 1 ||
        (rules.any_strides ? bt.stride[0] < 0 || bt.stride[1] < 0 : !bt.contiguous()))
      return fmt::format("block_tables: shape {} strides [{}, {}]: expected contiguous [>= {}, >= 1]", shape_text(bt),
                         bt.stride[0], bt.stride[1], num_seqs);
  } else {
    if (c.block_tables.present()) return "block_tables: given with CSR page lists";
    if (auto why = i32_list(c.kv_indptr, "kv_indptr", num_seqs + 1); !why.empty()) return why;
    if (c.kv_indptr.shape[0] != num_seqs + 1)
      return fmt::format("kv_indptr: {} entries for {} sequences (expected num_seqs + 1)", c.kv_indptr.shape[0], num_seqs);
    if (auto why = i32_list(c.kv_last_page_len, "kv_last_page_len", num_seqs); !why.empty()) return why;
    if (c.kv_last_page_len.shape[0] != num_seqs)
      return fmt::format("kv_last_page_len: {} entries for {} sequences", c.kv_last_page_len.shape[0], num_seqs);
    if (auto why = i32_list(c.kv_indices, "kv_indices", 1); !why.empty()) return why;
    if (i32_at(c.kv_indptr, 0) != 0) return fmt::format("kv_indptr[0] = {} (expected 0)", i32_at(c.kv_indptr, 0));
  }
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int32_t L = std::max<int32_t>(i32_at(lens, s), negative_empty ? 0 : i32_at(lens, s));
    if (L < 0) return fmt::format("context_lens[{}] = {} < 0", s, L);
    if (max_context_len > 0 && L > max_context_len)
      return fmt::format("context_lens[{}] = {} > max_context_len {}", s, L, max_context_len);
    const int64_t n = (int64_t(L) + page_size - 1) / page_size;
    if (c.page_table == PageTable::block_table) {
      if (n > c.block_tables.shape[1])
        return fmt::format("context_lens[{}] = {} needs {} blocks, block_tables has {} columns", s, L, n,
                           c.block_tables.shape[1]);
    } else {
      const int64_t a = i32_at(c.kv_indptr, s), b = i32_at(c.kv_indptr, s + 1);
      if (b - a != n)
        return fmt::format("kv_indptr[{}..{}] = {}..{} holds {} pages, context_lens[{}] = {} needs {}", s, s + 1, a, b,
                           b - a, s, L, n);
      if (b > c.kv_indices.shape[0])
        return fmt::format("kv_indptr[{}] = {} past kv_indices' {} entries", s + 1, b, c.kv_indices.shape[0]);
      const int64_t last = n == 0 ? 0 : L - (n - 1) * page_size;
      if (i32_at(c.kv_last_page_len, s) != last)
        return fmt::format("kv_last_page_len[{}] = {} (context_lens[{}] = {} leaves {} in its last page)", s,
                           i32_at(c.kv_last_page_len, s), s, L, last);
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = page_of(c, s, i);
      if (p < 0 || p >= pages)
        return c.page_table == PageTable::block_table
                   ? fmt::format("block_tables[{}][{}] = {} outside 0..{}", s, i, p, pages - 1)
                   : fmt::format("kv_indices[{}] = {} (page {} of sequence {}) outside 0..{}",
                                 i32_at(c.kv_indptr, s) + i, p, i, s, pages - 1);
    }
  }
  return {};
}

}  // namespace pav::kernels
