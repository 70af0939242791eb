// SPDX-License-Identifier: Apache-2.0
#include "properties/gen/gate_gen.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "kernels/split_rules.hpp"
#include "properties/gen/gen.hpp"

namespace pav::props {

using namespace pav::kernels;

namespace {

// Near-boundary values per clause: how many apply_violation() knows.
int variants_of(Clause c) {
  switch (c) {
    case Clause::none: return 0;
    case Clause::q_prequantized: case Clause::arch: return 1;
    case Clause::alibi: case Clause::sinks: return 2;
    case Clause::sliding_window: return 5;
    case Clause::soft_cap: return 3;
    case Clause::compute_dtype: return 4;
    case Clause::k_dtype: return 3;
    case Clause::v_dtype: return 2;
    case Clause::q_rank: return 2;
    case Clause::q_dtype: return 3;
    case Clause::out_dtype: return 2;
    case Clause::out_shape: return 4;
    case Clause::q_head_dim_stride: case Clause::out_head_dim_stride: return 2;
    case Clause::k_rank: return 2;
    case Clause::k_last_dim: return 2;
    case Clause::block_size: return 5;
    case Clause::head_dim: return 9;
    case Clause::num_hgroups: return 3;
    case Clause::v_heads: return 2;
    case Clause::v_layout: return 5;
    case Clause::v_blocks: return 2;
    case Clause::head_ratio: return 3;
    case Clause::k_contiguous: case Clause::v_contiguous: return 1;
    case Clause::block_tables_dtype: return 2;
    case Clause::block_tables_rank: return 2;
    case Clause::block_tables_contiguous: return 1;
    case Clause::context_lens_dtype: return 2;
    case Clause::context_lens_rank: return 2;
    case Clause::context_lens_contiguous: return 1;
    case Clause::num_seqs: return 2;
    case Clause::q_len: return 2;
    case Clause::q_rows: return 2;
    case Clause::block_tables_rows: return 2;
    case Clause::partition_size: return 5;
    case Clause::partition_count: return 3;
    case Clause::plan_ceiling: return 3;
    case Clause::scale_pairing: return 2;
    case Clause::scale_dtype: return 3;
    case Clause::scale_shape: return 4;
    case Clause::scratch_dtype: return 3;
    case Clause::scratch_shape: return 5;
    case Clause::plan_shape: return 2;
    case Clause::plan_invalid: return 3;
  }
  return 0;
}

template <class T>
T pick(std::initializer_list<T> values, int v) {
  return values.begin()[v];
}

DType other_fp8(DType d) { return d == DType::fp8_e4m3fn ? DType::fp8_e4m3fnuz : DType::fp8_e4m3fn; }

int64_t splits_without_plan(const CaseSpec& b) {
  if (b.opt.uniform_partitions > 0) return b.opt.uniform_partitions;
  return dense_decode_splits(int64_t(b.lens.size()), b.hkv, b.opt.cu);
}

// Makes the base satisfy what a clause's variant needs to be the only clause
// broken (a second sequence for a row stride to matter, scales to break, ...).
void adjust(GateSpec& s) {
  CaseSpec& b = s.base;
  auto at_least_two_seqs = [&] {
    if (b.lens.size() < 2) b.lens.push_back(17);
  };
  switch (s.violate) {
    case Clause::head_ratio: b.hkv = std::max(b.hkv, 2); break;
    case Clause::block_tables_contiguous:
    case Clause::context_lens_contiguous: at_least_two_seqs(); break;
    case Clause::block_tables_rows:
      if (s.variant == 0) at_least_two_seqs();
      break;
    case Clause::partition_count: s.with_plan = false; break;
    case Clause::plan_ceiling:
    case Clause::plan_shape:
    case Clause::plan_invalid: s.with_plan = true; break;
    case Clause::scratch_dtype:
    case Clause::scratch_shape:
      if (!s.with_plan && splits_without_plan(b) < 2) b.opt.uniform_partitions = 2;
      break;
    case Clause::scale_pairing:
    case Clause::scale_dtype:
      if (b.scales == ScaleKind::none) b.scales = ScaleKind::per_tensor;
      break;
    case Clause::scale_shape:
      if (s.variant >= 2) b.scales = ScaleKind::per_token;
      else if (b.scales == ScaleKind::none) b.scales = ScaleKind::per_tensor;
      break;
    default: break;
  }
}

}  // namespace

// Edits a GateCase's views; every reshaped view gets its own zeroed buffer, at
// least as large as the view's extent.
struct GateCaseEditor {
  GateCase& g;

  void* buffer(int64_t bytes) {
    g.extra_.emplace_back(size_t(std::max<int64_t>(bytes, 64)), std::byte{0});
    return g.extra_.back().data();
  }
  // Reshapes v as a contiguous view over a new buffer.
  void reshape(TensorView& v, std::initializer_list<int64_t> shape) {
    const TensorView shaped = TensorView::contiguous_of(nullptr, v.dtype, shape);
    v.rank = shaped.rank;
    v.shape = shaped.shape;
    v.stride = shaped.stride;
    v.data = buffer(std::max<int64_t>(v.numel(), 1) * std::max(dtype_size(v.dtype), 1));
  }
  // Gives v these strides over a new buffer covering its extent.
  void restride(TensorView& v, std::initializer_list<int64_t> strides) {
    int i = 0;
    for (int64_t s : strides) v.stride[i++] = s;
    v.data = buffer(v.span() * std::max(dtype_size(v.dtype), 1) + 64);
  }
  // Pads the second-to-last dim's stride: a non-contiguous view of the same shape.
  // Breaks contiguity: a gap after each row; when every dim but the last has
  // size 1 (one row, whose stride contiguity ignores), elements two apart.
  void pad_rows(TensorView& v) {
    const int r = v.rank;
    int64_t leading = 1;
    for (int i = 0; i < r - 1; ++i) leading *= v.shape[i];
    v.stride[r - 1] = leading == 1 ? 2 : 1;
    v.stride[r - 2] = v.shape[r - 1] * v.stride[r - 1] + 16;
    for (int i = r - 3; i >= 0; --i) v.stride[i] = v.stride[i + 1] * v.shape[i + 1];
    v.data = buffer(v.span() * dtype_size(v.dtype) + 64);
  }
  void retype(TensorView& v, DType t) {
    // A wider element type needs a wider buffer for the same shape.
    v.dtype = t;
    v.data = buffer(std::max<int64_t>(v.span(), 1) * std::max(dtype_size(t), 1) + 64);
  }

  // A new plan for other params; scratch follows its capacity (planned layout).
  void replan(PlanParams p, const std::vector<int32_t>& lens) {
    g.work_plan_.emplace(p);
    g.work_plan_->refresh(lens.data());
    g.plan_view_ = g.work_plan_->view();
    rescratch(g.plan_view_.capacity);
  }
  void rescratch(int64_t capacity) {
    const CallDims d = dims_of(g.call);
    g.host_scratch_ = make_scratch(g.call, d.hkv * capacity, d.hkv);
    g.scratch = g.host_scratch_.view;
  }

  void apply(Clause c, int v) {
    DecodeCall& call = g.call;
    DecodeOptions& o = call.opt;
    const CaseSpec& s = g.host.spec;
    const int64_t B = int64_t(g.host.lens.size()), D = s.head_dim, H = s.hkv, G = s.group, Hq = H * G;
    const int64_t bs = s.block_size, nb = g.host.num_blocks, mb = g.host.max_blocks, rows = B * s.q_len;
    auto v_shape_for = [&](int64_t d, int64_t block) {
      if (s.v_layout == VLayout::trans) return std::vector<int64_t>{nb, H, block / 16, d, 16};
      return std::vector<int64_t>{nb, H, d, block};
    };
    auto reshape_vec = [&](TensorView& t, const std::vector<int64_t>& dims) {
      if (dims.size() == 4) reshape(t, {dims[0], dims[1], dims[2], dims[3]});
      else reshape(t, {dims[0], dims[1], dims[2], dims[3], dims[4]});
    };
    switch (c) {
      case Clause::none: return;
      // The option flags, or the call's attention variant with its tensors.
      case Clause::alibi:
        if (v == 0) o.alibi = true;
        else call.variant.alibi_slopes = TensorView::contiguous_of(buffer(Hq * 4), DType::f32, {Hq});
        return;
      case Clause::sinks:
        if (v == 0) o.sinks = true;
        else call.variant.sinks = TensorView::contiguous_of(buffer(Hq * 4), DType::f32, {Hq});
        return;
      case Clause::q_prequantized: o.q_prequantized = true; return;
      case Clause::sliding_window:
        if (v < 3) o.sliding_window = pick<int>({1, -1, 4096}, v);
        else call.variant.window_left = v == 3 ? 0 : 1 << 30;
        return;
      case Clause::soft_cap: call.variant.soft_cap = pick<float>({1.0f, 50.0f, -1.0f}, v); return;
      case Clause::arch: o.arch = Arch::gfx90a; return;
      case Clause::compute_dtype:
        o.compute = pick<DType>({other_fp8(o.compute), DType::bf16, DType::f16, DType::f32}, v);
        return;
      case Clause::k_dtype: {
        const DType t = pick<DType>({other_fp8(call.k_cache.dtype), DType::bf16, DType::f16}, v);
        retype(call.k_cache, t);
        retype(call.v_cache, t);
        return;
      }
      case Clause::v_dtype: retype(call.v_cache, pick<DType>({other_fp8(call.k_cache.dtype), DType::bf16}, v)); return;
      case Clause::q_rank:
        if (v == 0) {
          reshape(call.q, {rows, Hq, D / 16, 16});
          reshape(call.out, {rows, Hq, D / 16, 16});
        } else {
          reshape(call.q, {rows, Hq * D});
          reshape(call.out, {rows, Hq * D});
        }
        return;
      case Clause::q_dtype: {
        const DType t = pick<DType>({DType::f32, arch_fp8(o.arch), DType::i32}, v);
        retype(call.q, t);
        retype(call.out, t);
        return;
      }
      case Clause::out_dtype:
        retype(call.out, pick<DType>({call.q.dtype == DType::bf16 ? DType::f16 : DType::bf16, DType::f32}, v));
        return;
      case Clause::out_shape:
        if (v == 0) reshape(call.out, {rows + 1, Hq, D});
        if (v == 1) reshape(call.out, {rows, Hq + 1, D});
        if (v == 2) reshape(call.out, {rows, Hq, D + 16});
        if (v == 3) reshape(call.out, {rows, Hq * D});
        return;
      case Clause::q_head_dim_stride:
      case Clause::out_head_dim_stride: {
        TensorView& t = c == Clause::q_head_dim_stride ? call.q : call.out;
        const int64_t e = v == 0 ? 2 : 3;
        restride(t, {Hq * D * e, D * e, e});
        return;
      }
      case Clause::k_rank:
        if (v == 0) reshape(call.k_cache, {nb, H, D / 16, bs * 16});
        else reshape(call.k_cache, {nb, H, D / 16, bs, 2, 8});
        return;
      case Clause::k_last_dim:
        if (v == 0) reshape(call.k_cache, {nb, H, D / 8, bs, 8});
        else reshape(call.k_cache, {nb, H, D / 32, bs, 32});
        return;
      case Clause::block_size: {
        int64_t nbs = pick<int64_t>({32, 48, 256, 8, 1}, v);
        if (s.v_layout == VLayout::trans && nbs % 16 != 0) nbs = nbs == 8 ? 32 : 48;
        reshape(call.k_cache, {nb, H, D / 16, nbs, 16});
        reshape_vec(call.v_cache, v_shape_for(D, nbs));
        for (TensorView* sc : {&call.k_scale, &call.v_scale})
          if (sc->rank == 3) reshape(*sc, {nb, H, nbs});
        return;
      }
      case Clause::head_dim: {
        const int64_t nd = pick<int64_t>({48, 80, 192, 320, 1152, 16, 32, 96, 112}, v);
        reshape(call.q, {rows, Hq, nd});
        reshape(call.out, {rows, Hq, nd});
        reshape(call.k_cache, {nb, H, nd / 16, bs, 16});
        reshape_vec(call.v_cache, v_shape_for(nd, bs));
        return;
      }
      case Clause::num_hgroups: {
        const int64_t groups = pick<int64_t>({D / 16 + 1, D / 16 - 1, D / 32}, v);
        reshape(call.k_cache, {nb, H, groups, bs, 16});
        return;
      }
      case Clause::v_heads: {
        std::vector<int64_t> dims = v_shape_for(D, bs);
        dims[1] = H + 1 + v;
        reshape_vec(call.v_cache, dims);
        return;
      }
      case Clause::v_layout:
        if (v == 0) reshape(call.v_cache, {nb, H, D, 2 * bs});
        if (v == 1) reshape(call.v_cache, {nb, H, D + 16, bs});
        if (v == 2) reshape(call.v_cache, {nb, H, bs / 16, D, 8});
        if (v == 3) reshape(call.v_cache, {nb, H, D * bs});
        if (v == 4) reshape(call.v_cache, {nb, H, bs / 16, D + 16, 16});
        return;
      case Clause::v_blocks: {
        std::vector<int64_t> dims = v_shape_for(D, bs);
        dims[0] = nb + 1 + 3 * v;
        reshape_vec(call.v_cache, dims);
        return;
      }
      case Clause::head_ratio: {
        const int64_t nhq = pick<int64_t>({Hq + 1, Hq - 1, 0}, v);
        reshape(call.q, {rows, nhq, D});
        reshape(call.out, {rows, nhq, D});
        return;
      }
      case Clause::k_contiguous: pad_rows(call.k_cache); return;
      case Clause::v_contiguous: pad_rows(call.v_cache); return;
      case Clause::block_tables_dtype: retype(call.block_tables, pick<DType>({DType::i64, DType::f32}, v)); return;
      case Clause::block_tables_rank:
        if (v == 0) reshape(call.block_tables, {B * mb});
        else reshape(call.block_tables, {B, mb, 1});
        return;
      case Clause::block_tables_contiguous: restride(call.block_tables, {mb + 1, 1}); return;
      case Clause::context_lens_dtype: retype(call.context_lens, pick<DType>({DType::i64, DType::f32}, v)); return;
      case Clause::context_lens_rank:
        if (v == 0) reshape(call.context_lens, {B, 1});
        else reshape(call.context_lens, {1, B});
        return;
      case Clause::context_lens_contiguous: restride(call.context_lens, {2}); return;
      case Clause::num_seqs: reshape(call.context_lens, {v == 0 ? 0 : kMaxPlanBatch + 1}); return;
      case Clause::q_len: call.q_len = v == 0 ? 0 : -1; return;
      case Clause::q_rows: {
        const int64_t n = v == 0 ? rows + 1 : rows - 1;
        reshape(call.q, {n, Hq, D});
        reshape(call.out, {n, Hq, D});
        return;
      }
      case Clause::block_tables_rows: reshape(call.block_tables, {v == 0 ? B - 1 : 0, mb}); return;
      case Clause::partition_size: o.partition_size = pick<int>({128, 512, 255, 257, 0}, v); return;
      case Clause::partition_count: o.uniform_partitions = pick<int>({-1, kMaxUniformPartitions + 1, 1000}, v); return;
      case Clause::plan_ceiling:
        if (v == 0) {
          PlanParams p = plan_params(s);
          p.cu = o.cu + 1;
          p.max_partitions = o.cu + 1;
          replan(p, g.host.lens);
        } else {
          g.plan_view_.max_partitions = v == 1 ? 0 : o.cu + 5;
        }
        return;
      case Clause::scale_pairing:
        (v == 0 ? call.v_scale : call.k_scale) = TensorView{};
        return;
      case Clause::scale_dtype:
        if (v == 0) retype(call.k_scale, DType::f16);
        if (v == 1) retype(call.v_scale, DType::bf16);
        if (v == 2) retype(call.k_scale, DType::i32);
        return;
      case Clause::scale_shape:
        if (v == 0) reshape(call.k_scale, {2});
        if (v == 1) reshape(call.v_scale, {1, 1});
        if (v == 2) reshape(call.v_scale, {nb, H, bs + 1});
        if (v == 3) restride(call.k_scale, {H * bs * 2, bs * 2, 2});
        return;
      case Clause::scratch_dtype:
        if (v == 0) retype(g.scratch.partial, o.partial == DType::f32 ? DType::bf16 : DType::f32);
        if (v == 1) retype(g.scratch.m, DType::f16);
        if (v == 2) {
          o.partial = DType::fp8_e4m3fn;
          retype(g.scratch.partial, DType::fp8_e4m3fn);
        }
        return;
      case Clause::scratch_shape: {
        Scratch& sc = g.scratch;
        if (v == 0) {  // one slot short
          const TensorView& ok = g.host_scratch_.view.partial;
          if (ok.rank == 4) reshape(sc.partial, {ok.shape[0], ok.shape[1] - 1, ok.shape[2], ok.shape[3]});
          else reshape(sc.partial, {ok.shape[0] - 1, ok.shape[1], ok.shape[2]});
        }
        if (v == 1) {
          TensorView m = sc.m;
          if (m.rank == 3) reshape(sc.m, {m.shape[0], m.shape[1], m.shape[2], 1});
          else reshape(sc.m, {m.shape[0], m.shape[1], 1});
        }
        if (v == 2) sc.partial = TensorView{};
        if (v == 3) {
          TensorView l = sc.l;
          if (l.rank == 3) reshape(sc.l, {l.shape[0], l.shape[1], l.shape[2] + 1});
          else reshape(sc.l, {l.shape[0], l.shape[1] + 1});
        }
        if (v == 4) pad_rows(sc.partial);
        return;
      }
      case Clause::plan_shape: {
        PlanParams p = plan_params(s);
        std::vector<int32_t> lens = g.host.lens;
        if (v == 0) {
          lens.push_back(lens[0]);
          p.num_seqs = int64_t(lens.size());
        } else {
          p.kv_heads = H + 1;
        }
        replan(p, lens);
        return;
      }
      case Clause::plan_invalid:
        if (v == 0) g.plan_view_.work_info = nullptr;
        if (v == 1) {
          g.plan_view_.capacity = g.plan_view_.num_seqs * g.plan_view_.max_partitions + 1;
          rescratch(g.plan_view_.capacity);
        }
        if (v == 2) g.plan_view_.reduce_info = nullptr;
        return;
    }
  }
};

std::string to_string(const GateSpec& s) {
  std::ostringstream os;
  const CaseSpec& b = s.base;
  os << "GateSpec{violate=" << clause_name(s.violate) << " variant=" << s.variant
     << " with_plan=" << s.with_plan << " lens=[";
  for (size_t i = 0; i < b.lens.size(); ++i) os << (i ? "," : "") << b.lens[i];
  os << "] q_len=" << b.q_len << " hkv=" << b.hkv << " group=" << b.group << " head_dim=" << b.head_dim
     << " block_size=" << b.block_size << " v_layout=" << (b.v_layout == VLayout::trans ? "trans" : "plain")
     << " q=" << kernels::to_string(b.q_dtype) << " arch=" << kernels::to_string(b.opt.arch)
     << " partial=" << kernels::to_string(b.opt.partial) << " scales=" << int(b.scales) << " cu=" << b.opt.cu
     << " max_partitions=" << b.max_partitions << " budget=" << b.workgroup_budget
     << " uniform_partitions=" << b.opt.uniform_partitions << " seed=" << b.seed << "}";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const GateSpec& s) { return os << to_string(s); }

void adjust_for_violation(GateSpec& spec) { adjust(spec); }

GateCase materialize(const GateSpec& spec, bool fill_values, bool large_cache) {
  if (spec.violate != Clause::none && (spec.variant < 0 || spec.variant >= variants_of(spec.violate)))
    throw std::invalid_argument("variant " + std::to_string(spec.variant) + " out of range for clause " +
                                std::string(clause_name(spec.violate)));
  GateCase g;
  // A call breaking a clause is refused before any kernel reads its values.
  g.host = build_case(spec.base, /*fill_values=*/fill_values || spec.violate == Clause::none, Poison::nan, large_cache);
  g.call = g.host.call();
  GateCaseEditor ed{g};
  if (spec.with_plan) {
    g.has_plan_ = true;
    ed.replan(plan_params(spec.base), g.host.lens);
  } else {
    const CallDims d = dims_of(g.call);
    g.host_scratch_ = make_scratch(g.call, d.num_seqs * d.hkv * uniform_splits(g.call));
    g.scratch = g.host_scratch_.view;
  }
  ed.apply(spec.violate, spec.variant);
  return g;
}

int violation_variants(Clause c) { return variants_of(c); }

std::vector<Clause> clauses_with_generators() {
  std::vector<Clause> out;
  for (const ClauseInfo& ci : clause_table())
    if (variants_of(ci.id) > 0) out.push_back(ci.id);
  return out;
}

rc::Gen<CaseSpec> gen_gate_base() {
  return rc::gen::exec([] {
    CaseSpec s;
    s.head_dim = *rc::gen::weightedOneOf<int>({{4, rc::gen::just(64)}, {4, rc::gen::just(128)},
                                               {1, rc::gen::just(256)}, {1, rc::gen::element(384, 512, 1024)}});
    // Long rows get short contexts: one launch stays around a millisecond.
    const int32_t max_len = s.head_dim >= 384 ? 64 : 600;
    const int batch = *rc::gen::inRange(1, 4);
    for (int i = 0; i < batch; ++i)
      s.lens.push_back(*rc::gen::weightedOneOf<int32_t>(
          {{3, rc::gen::element<int32_t>(0, 1, 2, 17, 255, 256, 257, 511, 512, 513)},
           {2, rc::gen::inRange<int32_t>(0, max_len + 1)}}));
    for (int32_t& l : s.lens) l = std::min(l, max_len);
    s.q_len = *rc::gen::weightedOneOf<int>({{3, rc::gen::just(1)}, {1, rc::gen::just(2)}});
    s.hkv = *rc::gen::weightedOneOf<int>({{3, rc::gen::just(1)}, {2, rc::gen::just(2)}, {1, rc::gen::just(3)}});
    s.group = *rc::gen::inRange(1, 6);
    s.block_size = *rc::gen::element(16, 64, 128);
    s.v_layout = *rc::gen::element(VLayout::plain, VLayout::trans);
    s.q_dtype = *rc::gen::element(DType::bf16, DType::f16);
    s.opt.arch = *rc::gen::element(Arch::sm90, Arch::gfx942, Arch::gfx950);
    s.cache_dtype = arch_fp8(s.opt.arch);
    s.opt.compute = s.cache_dtype;
    s.opt.partial = *rc::gen::element(DType::bf16, DType::f16, DType::f32);
    s.scales = *rc::gen::element(ScaleKind::none, ScaleKind::per_tensor, ScaleKind::per_token);
    s.opt.cu = *rc::gen::element(1, 2, 4, 8, 16);
    s.max_partitions = *rc::gen::weightedOneOf<int64_t>(
        {{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, s.opt.cu + 1)}});
    s.workgroup_budget = *rc::gen::weightedOneOf<int64_t>(
        {{3, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, 4 * s.opt.cu + 1)}});
    s.opt.uniform_partitions = *rc::gen::weightedOneOf<int>(
        {{3, rc::gen::just(0)}, {2, rc::gen::element(1, 2, 3, 5, 8, 32)}, {1, rc::gen::element(64, 255, 256)}});
    // Keep no-plan scratch small: slots * rows * D elements.
    const int64_t slots = int64_t(s.lens.size()) * s.hkv * std::max(s.opt.uniform_partitions, 1);
    if (slots * s.q_len * s.group * s.head_dim > (int64_t(1) << 21)) s.opt.uniform_partitions = 8;
    s.q_row_pad = *rc::gen::weightedOneOf<int64_t>({{4, rc::gen::just<int64_t>(0)}, {1, rc::gen::just<int64_t>(16)}});
    s.seed = *rc::gen::arbitrary<uint32_t>();
    if (*rc::gen::element(true, false)) s.sentinels = boundary_sentinels(s.lens);
    return s;
  });
}

rc::Gen<GateSpec> gen_valid_gate_spec() {
  return rc::gen::exec([] {
    GateSpec g;
    g.base = *gen_gate_base();
    g.with_plan = *rc::gen::element(true, false);
    return g;
  });
}

rc::Gen<GateSpec> gen_violating_gate_spec(Clause c) {
  return rc::gen::exec([c] {
    GateSpec g;
    g.base = *gen_gate_base();
    g.with_plan = *rc::gen::element(true, false);
    g.violate = c;
    g.variant = *rc::gen::resize(100, rc::gen::inRange(0, variants_of(c)));
    adjust(g);
    return g;
  });
}

rc::Gen<GateSpec> gen_gate_spec() {
  return rc::gen::weightedOneOf<GateSpec>(
      {{1, gen_valid_gate_spec()},
       // resize: rc's inRange narrows with the size, which would starve later clauses.
       {2, rc::gen::mapcat(rc::gen::resize(100, rc::gen::elementOf(clauses_with_generators())),
                           [](Clause c) { return gen_violating_gate_spec(c); })}});
}

GateSpec fixed_gate_spec(bool with_plan) {
  GateSpec g;
  CaseSpec& s = g.base;
  s.lens = {257, 3};
  s.hkv = 2;
  s.group = 3;
  s.head_dim = 128;
  s.block_size = 16;
  s.scales = ScaleKind::per_token;
  s.opt.cu = 8;
  s.opt.partial = DType::bf16;
  s.seed = 7;
  g.with_plan = with_plan;
  return g;
}

GateSpec fixed_violation_spec(Clause c, int variant, bool with_plan) {
  GateSpec g = fixed_gate_spec(with_plan);
  g.violate = c;
  g.variant = variant;
  adjust(g);
  return g;
}

}  // namespace pav::props
