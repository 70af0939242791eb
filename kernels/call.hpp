// SPDX-License-Identifier: Apache-2.0
#pragma once
// The views of one paged-attention decode call (docs/numerics.md, "Tensors and
// layouts") and the
// geometry derived from them. Views do not own memory.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/types.hpp"

namespace pav::kernels {

inline constexpr int kTileTokens = 256;  // partition / planner tile size, in tokens

enum class VLayout : uint8_t { plain, trans, unknown };

// How the cache views are laid out (kernels/cache_format.hpp has the rules):
//   packed: K [pages, Hkv, D/16, page_size, 16], V plain [pages, Hkv, D,
//           page_size] or trans [pages, Hkv, page_size/16, D, 16];
//   nhd:    K and V [pages, page_size, Hkv, D];
//   hnd:    K and V [pages, Hkv, page_size, D].
enum class CacheLayout : uint8_t { packed, nhd, hnd };
// How a sequence's pages are found: a block table [num_seqs, max_pages], or
// CSR lists (kv_indptr [num_seqs + 1], kv_indices [>= indptr[num_seqs]],
// kv_last_page_len [num_seqs]). A page size of 1 makes either token-level.
enum class PageTable : uint8_t { block_table, csr };

struct DecodeOptions {
  Arch arch = Arch::sm90;
  DType compute = DType::fp8_e4m3fn;  // the arch's fp8 flavour, or bf16 ("bf16 compute")
  DType partial = DType::bf16;        // dtype of the normalized partials in scratch
  float softmax_scale = 0.0f;         // 0 means 1/sqrt(head_dim)
  int cu = 132;                       // compute units (SMs) the work is spread over
  int partition_size = kTileTokens;   // tokens per partition tile; must be 256
  int uniform_partitions = 0;         // uniform split count; 0 = dense_decode_splits()
  // Features the kernels do not implement; requesting any is a hard reject.
  bool alibi = false;
  bool sinks = false;
  int sliding_window = 0;
  bool q_prequantized = false;
};

// The attention variant of a call, for kernels that declare it (pav's own
// kernels declare none and the gate rejects each). Row r = p*G + g of a
// sequence of length L sits at position pos = L - q_len + p and sees keys
// t <= pos. With x = scale * q.k_t (the scaled logit):
//   soft cap (soft_cap > 0): x -> soft_cap * tanh(x / soft_cap);
//   ALiBi (alibi_slopes [Hq] f32): x -> x - slope[head] * (pos - t);
//   window (window_left >= 0): only keys pos - window_left <= t <= pos;
//   sinks ([Hq] f32): exp(sink[head]) joins the softmax denominator (and the
//   lse), never the numerator.
// The soft cap comes before the bias and the mask.
struct AttentionVariant {
  int32_t window_left = -1;  // -1: no window
  float soft_cap = 0.0f;     // 0: no cap
  TensorView sinks;          // absent, or [Hq] f32
  TensorView alibi_slopes;   // absent, or [Hq] f32
  bool windowed() const { return window_left >= 0; }
  // The scalar rules: a window of -1 (off) or more, a finite cap of 0 (off) or more.
  bool window_valid() const { return window_left >= -1; }
  bool soft_cap_valid() const { return std::isfinite(soft_cap) && soft_cap >= 0.0f; }
  // The first key a row at position pos sees (0 without a window).
  int64_t first_key(int64_t pos) const { return windowed() ? std::max<int64_t>(0, pos - window_left) : 0; }
  bool any() const { return windowed() || soft_cap != 0.0f || sinks.present() || alibi_slopes.present(); }
};

struct DecodeCall {
  TensorView q;             // [num_seqs*q_len, Hq, D], bf16/f16, head_dim stride 1
  TensorView out;           // like q
  TensorView k_cache;       // packed [nb, Hkv, D/16, bs, 16]; nhd/hnd as `layout` says
  TensorView v_cache;       // packed [nb, Hkv, D, bs] (plain) or [nb, Hkv, bs/16, D, 16] (trans)
  TensorView block_tables;  // [num_seqs, max_blocks], i32 (page_table = block_table)
  TensorView context_lens;  // [num_seqs], i32
  TensorView k_scale;       // absent, [1], [Hkv] or [nb, Hkv, bs], f32
  TensorView v_scale;       // like k_scale (its own kind)
  CacheLayout layout = CacheLayout::packed;
  // K and V as the halves of one [pages, 2, ...] tensor (nhd, hnd): present,
  // with k_cache and v_cache its [:, 0] and [:, 1] views.
  TensorView kv_cache;
  // MLA (nhd, hnd): the values are the first D_v dims of each key row, so
  // v_cache is k_cache's [..., :D_v] view (the same memory, kernels::latent_v)
  // and out has D_v dims; q and K keep D_qk = latent + rope.
  bool v_latent = false;
  PageTable page_table = PageTable::block_table;
  TensorView kv_indptr, kv_indices, kv_last_page_len;  // page_table = csr, i32
  int q_len = 1;            // MTP query positions per sequence
  DecodeOptions opt;
  AttentionVariant variant;
};

// Geometry read off a call. Only meaningful for a call that passed validation.
struct CallDims {
  int64_t num_seqs = 0, q_len = 1, hq = 0, hkv = 0, head_dim = 0, group = 0;
  int64_t v_head_dim = 0;  // D_v: head_dim but for an MLA call
  int64_t block_size = 0, num_blocks = 0, max_blocks = 0;
  int64_t rows = 0;  // q_len * group: query rows per (sequence, KV head)
  VLayout v_layout = VLayout::unknown;
  float softmax_scale = 0.0f;
};

// out's head dim: q's, but D_v (V's last extent) for an MLA call. Read off
// the views before any check (the contract's out-shape rule uses it).
inline int64_t out_head_dim(const DecodeCall& c) {
  return c.v_latent && c.v_cache.rank == 4 ? c.v_cache.shape[3] : c.q.shape[2];
}

// The block count rule of a call's layout, its one home (docs/numerics.md,
// "Tensors and layouts"). One block id names a page of K, of V and of each
// per-token scale, so V and a per-token scale hold exactly K's block count
// (num_blocks, K's dim 0): with fewer, an id K holds would be read past V's
// end (the kernels read no table value before they launch); with more, V holds
// pages no id can name. The kernels' validation (clause v_blocks, the scale
// shape), the contract check (cache_views_problem, the per-token scales) and
// pav's kernels' plugin refusal (through the validation) all ask this.
constexpr bool holds_num_blocks(int64_t blocks, int64_t num_blocks) { return blocks == num_blocks; }

// The V layout of a packed cache (unknown for any other shape).
inline VLayout v_layout_of(const TensorView& k, const TensorView& v) {
  if (k.rank != 5) return VLayout::unknown;
  const int64_t hkv = k.shape[1], d = k.shape[2] * 16, bs = k.shape[3];
  if (v.rank == 4 && v.shape[1] == hkv && v.shape[2] == d && v.shape[3] == bs) return VLayout::plain;
  if (v.rank == 5 && bs % 16 == 0 && v.shape[1] == hkv && v.shape[2] == bs / 16 && v.shape[3] == d &&
      v.shape[4] == 16)
    return VLayout::trans;
  return VLayout::unknown;
}

inline CallDims dims_of(const DecodeCall& c) {
  CallDims d;
  d.num_seqs = c.context_lens.shape[0];
  d.q_len = c.q_len;
  d.hq = c.q.shape[1];
  d.head_dim = c.q.shape[2];
  d.v_head_dim = out_head_dim(c);
  d.hkv = c.k_cache.shape[c.layout == CacheLayout::nhd ? 2 : 1];
  d.group = d.hkv > 0 ? d.hq / d.hkv : 0;
  d.block_size = c.k_cache.shape[c.layout == CacheLayout::packed ? 3 : c.layout == CacheLayout::nhd ? 1 : 2];
  d.num_blocks = c.k_cache.shape[0];
  d.max_blocks = c.page_table == PageTable::block_table ? c.block_tables.shape[1] : 0;
  d.rows = d.q_len * d.group;
  d.v_layout = c.layout == CacheLayout::packed ? v_layout_of(c.k_cache, c.v_cache) : VLayout::unknown;
  d.softmax_scale = c.opt.softmax_scale != 0.0f ? c.opt.softmax_scale
                                                : 1.0f / std::sqrt(float(d.head_dim));
  return d;
}

// Element offsets into the caches (docs/numerics.md, "Tensors and layouts").
inline int64_t k_offset(int64_t blk, int64_t h, int64_t d, int64_t off, int64_t hkv, int64_t hd,
                        int64_t bs) {
  return ((blk * hkv + h) * (hd / 16) + d / 16) * bs * 16 + off * 16 + d % 16;
}
inline int64_t v_offset(VLayout l, int64_t blk, int64_t h, int64_t d, int64_t off, int64_t hkv,
                        int64_t hd, int64_t bs) {
  if (l == VLayout::plain) return ((blk * hkv + h) * hd + d) * bs + off;
  return ((blk * hkv + h) * (bs / 16) + off / 16) * hd * 16 + d * 16 + off % 16;
}

// Scratch the split kernels write: partial [slots..., rows, D] in the partial
// dtype, m and l [slots..., rows] in f32. Planned: slots = [Hkv, capacity];
// uniform: slots = [num_seqs * Hkv * splits].
struct Scratch {
  TensorView partial;
  TensorView m;
  TensorView l;
};

// Result of a planned decode: the plan's recorded lengths are checked against
// the live ones task by task; a stale task is not attended.
enum class DecodeStatus : uint32_t { ok = 0, stale_plan = 1 };
struct DecodeResult {
  DecodeStatus status = DecodeStatus::ok;
  int64_t stale_tasks = 0;     // tasks whose recorded length differs from the live one
  int64_t stale_rows = 0;      // empty plan rows whose live length is now positive
};

}  // namespace pav::kernels
