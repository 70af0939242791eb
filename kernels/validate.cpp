// SPDX-License-Identifier: Apache-2.0
#include "kernels/validate.hpp"

#include <string>

#include "kernels/split_rules.hpp"

namespace pav::kernels {
namespace {

constexpr ClauseInfo kNone{Clause::none, "none", "no clause violated", ""};

// The table the CLI prints and the docs list. Keep in id order.
constexpr ClauseInfo kClauses[kClauseCount] = {
    {Clause::alibi, "alibi", "ALiBi is not supported", "ALiBi is not supported"},
    {Clause::sinks, "sinks", "attention sinks are not supported", "attention sinks are not supported"},
    {Clause::sliding_window, "sliding_window", "sliding window is not supported (must be 0)",
     "sliding window is not supported (must be 0)"},
    {Clause::q_prequantized, "q_prequantized", "an externally quantized Q is not supported",
     "an externally quantized Q is not supported"},
    {Clause::arch, "arch", "arch must be gfx942, gfx950 or sm90", ""},
    {Clause::compute_dtype, "compute_dtype", "compute type must be the arch's fp8 flavour",
     "compute type must be bf16 or the cache's fp8 flavour"},
    {Clause::k_dtype, "k_dtype", "K cache dtype must be the arch's fp8 flavour",
     "K cache dtype must be an fp8 flavour"},
    {Clause::v_dtype, "v_dtype", "V cache dtype must equal the K cache dtype",
     "V cache dtype must equal the K cache dtype"},
    {Clause::q_rank, "q_rank", "q must be rank 3 [num_seqs*q_len, Hq, D]",
     "q must be rank 3 [num_seqs*q_len, Hq, D]"},
    {Clause::q_dtype, "q_dtype", "q dtype must be bf16 or f16", "q dtype must be bf16 or f16"},
    {Clause::out_dtype, "out_dtype", "out dtype must equal q dtype", "out dtype must equal q dtype"},
    {Clause::out_shape, "out_shape", "out shape must equal q shape", "out shape must equal q shape"},
    {Clause::q_head_dim_stride, "q_head_dim_stride", "q head_dim stride must be 1",
     "q head_dim stride must be 1"},
    {Clause::out_head_dim_stride, "out_head_dim_stride", "out head_dim stride must be 1",
     "out head_dim stride must be 1"},
    {Clause::k_rank, "k_rank", "K cache must be rank 5 [nb, Hkv, D/16, block_size, 16]",
     "K cache must be rank 5 [nb, Hkv, D/16, block_size, 16]"},
    {Clause::k_last_dim, "k_last_dim", "K cache last dim must be 16",
     "K cache last dim must be 16"},
    {Clause::block_size, "block_size", "block_size (K dim -2) must be 16, 64 or 128",
     "block_size (K dim -2) must be >= 1"},
    {Clause::head_dim, "head_dim", "head_dim must be 64 or a multiple of 128 in 128..1024",
     "head_dim must be a positive multiple of 16"},
    {Clause::num_hgroups, "num_hgroups", "num_hgroups (K dim 2) * 16 must equal head_dim",
     "num_hgroups (K dim 2) * 16 must equal head_dim"},
    {Clause::v_heads, "v_heads", "V KV-head count must equal K's", "V KV-head count must equal K's"},
    {Clause::v_layout, "v_layout",
     "V must be [nb, Hkv, D, block_size] or [nb, Hkv, block_size/16, D, 16]",
     "V must be [nb, Hkv, D, block_size] or [nb, Hkv, block_size/16, D, 16]"},
    {Clause::v_blocks, "v_blocks", "V must hold K's block count (num_blocks), no more and no fewer",
     "V must hold K's block count (num_blocks), no more and no fewer"},
    {Clause::head_ratio, "head_ratio", "Hq must be a positive multiple of Hkv",
     "Hq must be a positive multiple of Hkv"},
    {Clause::k_contiguous, "k_contiguous", "K cache must be contiguous", "K cache must be contiguous"},
    {Clause::v_contiguous, "v_contiguous", "V cache must be contiguous", "V cache must be contiguous"},
    {Clause::block_tables_dtype, "block_tables_dtype", "block_tables must be int32",
     "block_tables must be int32"},
    {Clause::block_tables_rank, "block_tables_rank", "block_tables must be rank 2",
     "block_tables must be rank 2"},
    {Clause::block_tables_contiguous, "block_tables_contiguous", "block_tables must be contiguous",
     "block_tables must be contiguous"},
    {Clause::context_lens_dtype, "context_lens_dtype", "context_lens must be int32",
     "context_lens must be int32"},
    {Clause::context_lens_rank, "context_lens_rank", "context_lens must be rank 1",
     "context_lens must be rank 1"},
    {Clause::context_lens_contiguous, "context_lens_contiguous", "context_lens must be contiguous",
     "context_lens must be contiguous"},
    {Clause::num_seqs, "num_seqs", "num_seqs (context_lens rows) must be in 1..4096",
     "num_seqs (context_lens rows) must be >= 1"},
    {Clause::q_len, "q_len", "q_len must be >= 1", "q_len must be >= 1"},
    {Clause::q_rows, "q_rows", "q rows must equal num_seqs * q_len (no padding rows)",
     "q rows must equal num_seqs * q_len (no padding rows)"},
    {Clause::block_tables_rows, "block_tables_rows", "block_tables must have >= num_seqs rows",
     "block_tables must have >= num_seqs rows"},
    {Clause::partition_size, "partition_size", "partition size must be 256",
     "partition size must be 256"},
    {Clause::partition_count, "partition_count",
     "uniform partition count must be 1..256 (0 = default)",
     "uniform partition count must be 1..256 (0 = default)"},
    {Clause::plan_ceiling, "plan_ceiling", "plan max_partitions must be in 1..cu", ""},
    {Clause::scale_pairing, "scale_pairing", "k_scale and v_scale must be given together",
     "k_scale and v_scale must be given together"},
    {Clause::scale_dtype, "scale_dtype", "scales must be f32", "scales must be f32"},
    {Clause::scale_shape, "scale_shape",
     "a scale must be [1] or a contiguous [nb, Hkv, block_size]",
     "a scale must be [1] or a contiguous [nb, Hkv, block_size]"},
    {Clause::scratch_dtype, "scratch_dtype",
     "scratch partial must be opt.partial (f32, bf16 or f16); m and l f32",
     "scratch partial must be opt.partial (f32, bf16 or f16); m and l f32"},
    {Clause::scratch_shape, "scratch_shape",
     "scratch must be contiguous and shaped for the launch (planned: [Hkv, capacity, rows, D])",
     "scratch must be contiguous [num_seqs*Hkv*splits, rows, D] when splits > 1"},
    {Clause::plan_shape, "plan_shape", "plan num_seqs and kv_heads must equal the call's", ""},
    {Clause::plan_invalid, "plan_invalid",
     "plan must have buffers, num_seqs in 1..4096 and num_seqs <= capacity <= "
     "num_seqs*max_partitions",
     ""},
    {Clause::soft_cap, "soft_cap", "a logit soft cap is not supported", "a logit soft cap is not supported"},
};

// Each entry's position must equal its id - 1.
constexpr bool table_in_id_order() {
  for (int i = 0; i < kClauseCount; ++i)
    if (int(kClauses[i].id) != i + 1) return false;
  return true;
}
static_assert(table_in_id_order(), "clause table out of id order");

bool same_shape(const TensorView& a, const TensorView& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

// V in either layout for this head_dim and block size; the KV-head count is its
// own clause (v_heads), so it is not looked at here.
bool v_layout_matches(const TensorView& v, int64_t head_dim, int64_t bs) {
  if (v.rank == 4) return v.shape[2] == head_dim && v.shape[3] == bs;
  if (v.rank == 5)
    return bs % 16 == 0 && v.shape[2] == bs / 16 && v.shape[3] == head_dim && v.shape[4] == 16;
  return false;
}

Finding integer(Clause c, const char* field, int64_t v) {
  Finding f;
  f.clause = c;
  f.field = field;
  f.value = v;
  return f;
}
Finding integer(Clause c, const char* field, int64_t v, int64_t expected) {
  Finding f = integer(c, field, v);
  f.has_expected = true;
  f.expected = expected;
  return f;
}
Finding dtype(Clause c, const char* field, DType v) {
  Finding f = integer(c, field, int64_t(v));
  f.kind = ValueKind::dtype;
  return f;
}
Finding dtype(Clause c, const char* field, DType v, DType expected) {
  Finding f = integer(c, field, int64_t(v), int64_t(expected));
  f.kind = ValueKind::dtype;
  return f;
}
Finding flag(Clause c, const char* field, bool v) {
  Finding f = integer(c, field, v ? 1 : 0);
  f.kind = ValueKind::flag;
  return f;
}
Finding shape(Clause c, const char* field, const TensorView& v, const TensorView* expected = nullptr) {
  Finding f = integer(c, field, 0);
  f.kind = ValueKind::shape;
  f.view = &v;
  f.expected_view = expected;
  return f;
}

#define PAV_REJECT(finding)           \
  do {                                \
    if (!emit(finding)) return false; \
  } while (0)

// ---- The layout of the call's tensors: the one statement of it ----
// Each part returns false once emit asked to stop.

// q's rank, on which every dim read off q waits.
template <class Emit>
bool q_rank_clause(const DecodeCall& c, Emit& emit) {
  if (c.q.rank != 3) PAV_REJECT(integer(Clause::q_rank, "q.rank", c.q.rank, 3));
  return true;
}

// out: q's shape (D_v dims for an MLA cache); q's and out's head-dim stride 1.
template <class Emit>
bool rows_clauses(const DecodeCall& c, Emit& emit) {
  const bool out_ok = c.v_latent && c.q.rank == 3
                          ? c.out.rank == 3 && c.out.shape[0] == c.q.shape[0] && c.out.shape[1] == c.q.shape[1] &&
                                c.out.shape[2] == out_head_dim(c)
                          : same_shape(c.out, c.q);
  if (!out_ok) PAV_REJECT(shape(Clause::out_shape, "out.shape", c.out, &c.q));
  if (c.q.rank >= 1 && c.q.stride[c.q.rank - 1] != 1)
    PAV_REJECT(integer(Clause::q_head_dim_stride, "q.stride[-1]", c.q.stride[c.q.rank - 1], 1));
  if (c.out.rank >= 1 && c.out.stride[c.out.rank - 1] != 1)
    PAV_REJECT(integer(Clause::out_head_dim_stride, "out.stride[-1]", c.out.stride[c.out.rank - 1], 1));
  return true;
}

// What the rest of the layout found, for the clauses that wait on it.
struct LayoutFacts {
  bool heads_ok = false, lens_ok = false, seqs_ok = false, rows_ok = false;
  int64_t num_seqs = 0;
};

// Against the cache: Hq a positive multiple of Hkv; the block table's shape
// (where judged here), the lengths, q_len and q's rows; the K and V scales.
template <class Emit>
bool layout_against_cache(const DecodeCall& c, const LayoutRules& r, LayoutFacts& out, Emit& emit) {
  const bool q_ok = c.q.rank == 3;
  const int64_t nb = r.pages, hkv = r.hkv, bs = r.page_size;
  const int64_t hq = q_ok ? c.q.shape[1] : 0;
  out.heads_ok = hkv >= 1 && hq >= 1 && hq % hkv == 0;
  if (q_ok && r.dims_read && !out.heads_ok) PAV_REJECT(integer(Clause::head_ratio, "q.shape[1]", hq, hkv));

  const TensorView& bt = c.block_tables;
  const TensorView& lens = c.context_lens;
  if (r.block_table) {
    if (bt.dtype != DType::i32)
      PAV_REJECT(dtype(Clause::block_tables_dtype, "block_tables.dtype", bt.dtype, DType::i32));
    if (bt.rank != 2) PAV_REJECT(integer(Clause::block_tables_rank, "block_tables.rank", bt.rank, 2));
    else if (!bt.contiguous()) PAV_REJECT(shape(Clause::block_tables_contiguous, "block_tables.stride", bt));
  }
  if (lens.dtype != DType::i32)
    PAV_REJECT(dtype(Clause::context_lens_dtype, "context_lens.dtype", lens.dtype, DType::i32));
  out.lens_ok = lens.rank == 1;
  if (!out.lens_ok) PAV_REJECT(integer(Clause::context_lens_rank, "context_lens.rank", lens.rank, 1));
  else if (!lens.contiguous()) PAV_REJECT(shape(Clause::context_lens_contiguous, "context_lens.stride", lens));
  const int64_t num_seqs = out.lens_ok ? lens.shape[0] : 0;
  out.num_seqs = num_seqs;
  out.seqs_ok = num_seqs >= 1 && (r.max_num_seqs == 0 || num_seqs <= r.max_num_seqs);
  if (out.lens_ok && !out.seqs_ok) PAV_REJECT(integer(Clause::num_seqs, "context_lens.shape[0]", num_seqs));
  const bool q_len_ok = c.q_len >= 1;
  if (!q_len_ok) PAV_REJECT(integer(Clause::q_len, "q_len", c.q_len));
  const bool judged = q_ok && out.lens_ok && out.seqs_ok && q_len_ok;
  out.rows_ok = judged && c.q.shape[0] == num_seqs * c.q_len;
  if (judged && !out.rows_ok) PAV_REJECT(integer(Clause::q_rows, "q.shape[0]", c.q.shape[0], num_seqs * c.q_len));
  if (r.block_table && bt.rank == 2 && out.lens_ok && out.seqs_ok && bt.shape[0] < num_seqs)
    PAV_REJECT(integer(Clause::block_tables_rows, "block_tables.shape[0]", bt.shape[0], num_seqs));

  const bool kp = c.k_scale.present(), vp = c.v_scale.present();
  if (r.paired_scales && kp != vp) PAV_REJECT(flag(Clause::scale_pairing, kp ? "v_scale" : "k_scale", false));
  struct ScaleField {
    const TensorView& view;
    const char* dtype_field;
    const char* shape_field;
  };
  for (const ScaleField& s : {ScaleField{c.k_scale, "k_scale.dtype", "k_scale.shape"},
                              ScaleField{c.v_scale, "v_scale.dtype", "v_scale.shape"}}) {
    if (!s.view.present()) continue;
    if (s.view.dtype != DType::f32) PAV_REJECT(dtype(Clause::scale_dtype, s.dtype_field, s.view.dtype, DType::f32));
    if (s.view.rank == 1 && s.view.shape[0] == 1) continue;  // per tensor
    if (r.per_head_scales && s.view.rank == 1 && s.view.shape[0] == hkv) continue;  // per head
    if (s.view.rank == 3 && !r.sound) continue;  // a per-token shape is judged against a sound cache
    if (!(s.view.rank == 3 && holds_num_blocks(s.view.shape[0], nb) && s.view.shape[1] == hkv &&
          s.view.shape[2] == bs && s.view.contiguous()))
      PAV_REJECT(shape(Clause::scale_shape, s.shape_field, s.view));
  }
  return true;
}

// The clause walk. emit(Finding) returns false to stop. Clauses that depend on
// a shape another clause checks are evaluated only once that shape is sound, so
// a call breaking one rule reports exactly that rule.
template <class Emit>
bool walk(const DecodeCall& c, KernelKind kind, const PlanView* plan, const Scratch* scratch,
          Emit&& emit) {
  const bool planned = kind == KernelKind::planned;
  const DecodeOptions& o = c.opt;

  const AttentionVariant& av = c.variant;
  if (o.alibi) PAV_REJECT(flag(Clause::alibi, "opt.alibi", true));
  if (av.alibi_slopes.present()) PAV_REJECT(shape(Clause::alibi, "variant.alibi_slopes", av.alibi_slopes));
  if (o.sinks) PAV_REJECT(flag(Clause::sinks, "opt.sinks", true));
  if (av.sinks.present()) PAV_REJECT(shape(Clause::sinks, "variant.sinks", av.sinks));
  if (o.sliding_window != 0)
    PAV_REJECT(integer(Clause::sliding_window, "opt.sliding_window", o.sliding_window));
  if (av.windowed()) PAV_REJECT(integer(Clause::sliding_window, "variant.window_left", av.window_left));
  if (o.q_prequantized) PAV_REJECT(flag(Clause::q_prequantized, "opt.q_prequantized", true));
  if (av.soft_cap != 0.0f) PAV_REJECT(flag(Clause::soft_cap, "variant.soft_cap", true));

  // Arch and element types.
  const DType kd = c.k_cache.dtype;
  if (planned) {
    if (!planned_arch_supported(o.arch)) {
      Finding f = integer(Clause::arch, "opt.arch", int64_t(o.arch));
      f.kind = ValueKind::arch;
      PAV_REJECT(f);
    } else {
      const DType want = arch_fp8(o.arch);
      if (o.compute != want) PAV_REJECT(dtype(Clause::compute_dtype, "opt.compute", o.compute, want));
      if (kd != want) PAV_REJECT(dtype(Clause::k_dtype, "k_cache.dtype", kd, want));
    }
  } else {
    if (!is_fp8(kd)) {
      PAV_REJECT(dtype(Clause::k_dtype, "k_cache.dtype", kd));
    } else if (o.compute != DType::bf16 && o.compute != kd) {
      PAV_REJECT(dtype(Clause::compute_dtype, "opt.compute", o.compute, kd));
    }
  }
  if (c.v_cache.dtype != kd) PAV_REJECT(dtype(Clause::v_dtype, "v_cache.dtype", c.v_cache.dtype, kd));

  // q and out.
  const bool q_ok = c.q.rank == 3;
  if (!q_rank_clause(c, emit)) return false;
  if (c.q.dtype != DType::bf16 && c.q.dtype != DType::f16)
    PAV_REJECT(dtype(Clause::q_dtype, "q.dtype", c.q.dtype));
  if (c.out.dtype != c.q.dtype) PAV_REJECT(dtype(Clause::out_dtype, "out.dtype", c.out.dtype, c.q.dtype));
  if (!rows_clauses(c, emit)) return false;

  // The packed K and V, with the kernel's block sizes and head dims.
  const TensorView& k = c.k_cache;
  const TensorView& v = c.v_cache;
  const bool k_rank_ok = k.rank == 5;
  if (!k_rank_ok) PAV_REJECT(integer(Clause::k_rank, "k_cache.rank", k.rank, 5));
  const bool k_ok = k_rank_ok && k.shape[4] == kKeyPackWidth;
  if (k_rank_ok && !k_ok) PAV_REJECT(integer(Clause::k_last_dim, "k_cache.shape[4]", k.shape[4], kKeyPackWidth));
  const int64_t nb = k_rank_ok ? k.shape[0] : 0;
  const int64_t hkv = k_rank_ok ? k.shape[1] : 0;
  const int64_t bs = k_rank_ok ? k.shape[3] : 0;
  const int64_t head_dim = q_ok ? c.q.shape[2] : 0;
  const bool bs_ok = planned ? planned_block_size_ok(bs) : bs >= 1;
  if (k_rank_ok && !bs_ok) PAV_REJECT(integer(Clause::block_size, "k_cache.shape[3]", bs));
  const bool hd_ok =
      planned ? planned_head_dim_ok(head_dim) : (head_dim >= 16 && head_dim % 16 == 0);
  if (q_ok && !hd_ok) PAV_REJECT(integer(Clause::head_dim, "q.shape[2]", head_dim));
  if (q_ok && k_ok && k.shape[2] * kKeyPackWidth != head_dim)
    PAV_REJECT(integer(Clause::num_hgroups, "k_cache.shape[2]", k.shape[2], head_dim / kKeyPackWidth));
  if (k_rank_ok && v.rank >= 2 && v.shape[1] != hkv)
    PAV_REJECT(integer(Clause::v_heads, "v_cache.shape[1]", v.shape[1], hkv));
  if (k_ok && q_ok && !v_layout_matches(v, head_dim, bs))
    PAV_REJECT(shape(Clause::v_layout, "v_cache.shape", v));
  if (k_rank_ok && v.rank >= 1 && !holds_num_blocks(v.shape[0], nb))
    PAV_REJECT(integer(Clause::v_blocks, "v_cache.shape[0]", v.shape[0], nb));
  if (!k.contiguous()) PAV_REJECT(shape(Clause::k_contiguous, "k_cache.stride", k));
  if (!v.contiguous()) PAV_REJECT(shape(Clause::v_contiguous, "v_cache.stride", v));

  // The rest of the layout, against that cache: heads, tables, lengths, scales.
  const LayoutRules rules{.pages = nb, .hkv = hkv, .page_size = bs, .dims_read = k_rank_ok, .sound = k_ok,
                          .max_num_seqs = planned ? kMaxPlanBatch : 0};
  LayoutFacts lf;
  if (!layout_against_cache(c, rules, lf, emit)) return false;
  const int64_t num_seqs = lf.num_seqs;

  // Partitioning.
  if (o.partition_size != kTileTokens)
    PAV_REJECT(integer(Clause::partition_size, "opt.partition_size", o.partition_size, kTileTokens));
  const bool uses_plan = planned && plan != nullptr;
  const bool count_ok = o.uniform_partitions >= 0 && o.uniform_partitions <= kMaxUniformPartitions;
  if (!uses_plan && !count_ok)
    PAV_REJECT(integer(Clause::partition_count, "opt.uniform_partitions", o.uniform_partitions));
  bool plan_ok = true;
  if (uses_plan && (plan->max_partitions < 1 || plan->max_partitions > o.cu)) {
    plan_ok = false;
    PAV_REJECT(integer(Clause::plan_ceiling, "plan.max_partitions", plan->max_partitions, o.cu));
  }

  // Plan header.
  if (uses_plan) {
    if (!plan->work_info || !plan->reduce_info) {
      plan_ok = false;
      PAV_REJECT(integer(Clause::plan_invalid, "plan.work_info", 0));
    } else if (plan->num_seqs < 1 || plan->num_seqs > kMaxPlanBatch) {
      plan_ok = false;
      PAV_REJECT(integer(Clause::plan_invalid, "plan.num_seqs", plan->num_seqs));
    } else if (plan->max_partitions >= 1 &&
               (plan->capacity < plan->num_seqs || plan->capacity > plan->num_seqs * plan->max_partitions)) {
      plan_ok = false;
      PAV_REJECT(integer(Clause::plan_invalid, "plan.capacity", plan->capacity));
    }
    if (lf.lens_ok && lf.seqs_ok && plan->num_seqs != num_seqs) {
      plan_ok = false;
      PAV_REJECT(integer(Clause::plan_shape, "plan.num_seqs", plan->num_seqs, num_seqs));
    }
    if (k_rank_ok && plan->kv_heads != hkv) {
      plan_ok = false;
      PAV_REJECT(integer(Clause::plan_shape, "plan.kv_heads", plan->kv_heads, hkv));
    }
  }

  // Scratch, once the geometry it is sized from is sound.
  const bool geometry_ok = q_ok && k_ok && hd_ok && lf.heads_ok && lf.lens_ok && lf.seqs_ok && lf.rows_ok;
  if (!scratch || !geometry_ok || (uses_plan && !plan_ok) || (!uses_plan && !count_ok)) return true;
  const ScratchGeometry g = scratch_geometry(c, uses_plan ? plan : nullptr);
  if (!g.needed) return true;
  if (!partial_dtype_ok(o.partial)) PAV_REJECT(dtype(Clause::scratch_dtype, "opt.partial", o.partial));
  else if (scratch->partial.present() && scratch->partial.dtype != o.partial)
    PAV_REJECT(dtype(Clause::scratch_dtype, "scratch.partial.dtype", scratch->partial.dtype, o.partial));
  if (scratch->m.present() && scratch->m.dtype != DType::f32)
    PAV_REJECT(dtype(Clause::scratch_dtype, "scratch.m.dtype", scratch->m.dtype, DType::f32));
  if (scratch->l.present() && scratch->l.dtype != DType::f32)
    PAV_REJECT(dtype(Clause::scratch_dtype, "scratch.l.dtype", scratch->l.dtype, DType::f32));
  auto dims_ok = [&](const TensorView& t, int rank) {
    if (t.rank != rank || !t.contiguous() || t.data == nullptr) return false;
    for (int i = 0; i < rank; ++i)
      if (t.shape[i] != g.partial_shape[i]) return false;
    return true;
  };
  if (!dims_ok(scratch->partial, g.rank)) PAV_REJECT(shape(Clause::scratch_shape, "scratch.partial", scratch->partial));
  if (!dims_ok(scratch->m, g.rank - 1)) PAV_REJECT(shape(Clause::scratch_shape, "scratch.m", scratch->m));
  if (!dims_ok(scratch->l, g.rank - 1)) PAV_REJECT(shape(Clause::scratch_shape, "scratch.l", scratch->l));
  return true;
}

#undef PAV_REJECT

std::string value_string(ValueKind kind, int64_t v, const TensorView* view) {
  switch (kind) {
    case ValueKind::dtype: return std::string(to_string(DType(v)));
    case ValueKind::arch: return std::string(to_string(Arch(v)));
    case ValueKind::flag: return v ? "set" : "absent";
    case ValueKind::shape:
      if (!view) return "?";
      if (!view->present()) return "absent";
      {
        std::string s = view->shape_string() + " strides [";
        for (int i = 0; i < view->rank; ++i) s += (i ? ", " : "") + std::to_string(view->stride[i]);
        return s + "]";
      }
    case ValueKind::integer: break;
  }
  return std::to_string(v);
}

}  // namespace

std::span<const ClauseInfo> clause_table() { return kClauses; }

const ClauseInfo& clause_info(Clause c) {
  const int i = int(c);
  if (i < 1 || i > kClauseCount) return kNone;
  return kClauses[i - 1];
}

std::string_view clause_name(Clause c) { return clause_info(c).name; }

bool parse_clause(std::string_view name, Clause& out) {
  for (const ClauseInfo& ci : kClauses)
    if (ci.name == name) {
      out = ci.id;
      return true;
    }
  return false;
}

std::string describe(const Finding& f, KernelKind kind) {
  if (!f) return "no clause violated";
  const ClauseInfo& ci = clause_info(f.clause);
  const std::string_view rule =
      kind == KernelKind::uniform && !ci.uniform_rule.empty() ? ci.uniform_rule : ci.planned_rule;
  std::string s = std::string(ci.name) + ": " + f.field + " = " + value_string(f.kind, f.value, f.view) +
                  ": " + std::string(rule);
  if (f.kind == ValueKind::shape && f.expected_view)
    s += " (expected " + f.expected_view->shape_string() + ")";
  else if (f.has_expected)
    s += " (expected " + value_string(f.kind, f.expected, nullptr) + ")";
  return s;
}

RejectError::RejectError(const Finding& f, KernelKind kind)
    : std::invalid_argument(std::string(kind == KernelKind::planned ? "planned" : "uniform") +
                            " decode rejects the call: " + describe(f, kind)),
      clause_(f.clause) {}

Finding first_violation(const DecodeCall& call, KernelKind kind, const PlanView* plan,
                        const Scratch* scratch) noexcept {
  Finding first;
  walk(call, kind, plan, scratch, [&](const Finding& f) {
    first = f;
    return false;
  });
  return first;
}

std::vector<Finding> all_violations(const DecodeCall& call, KernelKind kind, const PlanView* plan,
                                    const Scratch* scratch) {
  std::vector<Finding> out;
  walk(call, kind, plan, scratch, [&](const Finding& f) {
    out.push_back(f);
    return true;
  });
  return out;
}

Finding first_rows_violation(const DecodeCall& call) noexcept {
  Finding first;
  auto stop = [&](const Finding& f) {
    first = f;
    return false;
  };
  if (q_rank_clause(call, stop)) rows_clauses(call, stop);
  return first;
}

Finding first_layout_violation(const DecodeCall& call, const LayoutRules& rules) noexcept {
  Finding first;
  auto stop = [&](const Finding& f) {
    first = f;
    return false;
  };
  LayoutFacts facts;
  layout_against_cache(call, rules, facts, stop);
  return first;
}

void validate_planned(const DecodeCall& call, const PlanView* plan, const Scratch& scratch) {
  const Finding f = first_violation(call, KernelKind::planned, plan, &scratch);
  if (f) throw RejectError(f, KernelKind::planned);
}

void validate_uniform(const DecodeCall& call, const Scratch& scratch) {
  const Finding f = first_violation(call, KernelKind::uniform, nullptr, &scratch);
  if (f) throw RejectError(f, KernelKind::uniform);
}

ScratchGeometry scratch_geometry(const DecodeCall& call, const PlanView* plan) {
  ScratchGeometry g;
  const int64_t hkv = call.k_cache.shape[1];
  const int64_t group = hkv > 0 ? call.q.shape[1] / hkv : 0;
  g.rows = call.q_len * group;
  g.head_dim = call.q.shape[2];
  g.partial = call.opt.partial;
  if (plan) {
    g.needed = true;
    g.rank = 4;
    g.partial_shape = {hkv, plan->capacity, g.rows, g.head_dim};
    g.slots = hkv * plan->capacity;
  } else {
    const int64_t splits = uniform_splits(call);
    g.needed = splits > 1;
    g.rank = 3;
    g.slots = call.context_lens.shape[0] * hkv * splits;
    g.partial_shape = {g.slots, g.rows, g.head_dim, 0};
  }
  return g;
}

}  // namespace pav::kernels
