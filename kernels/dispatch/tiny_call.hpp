// SPDX-License-Identifier: Apache-2.0
#pragma once
// A small owning decode call for the kernels' unit tests: zero-filled fp8
// caches (every score 0, every value 0), identity-ordered block tables, and
// scratch for either kernel. The property suites build richer calls with
// properties/case/host_case.hpp; this one needs nothing outside pav_kernels.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/call.hpp"
#include "kernels/planner.hpp"
#include "kernels/validate.hpp"

namespace pav::kernels::testing {

struct TinySpec {
  std::vector<int32_t> lens{300, 20};
  int64_t hkv = 1, group = 2, head_dim = 64, block_size = 16, q_len = 1;
  Arch arch = Arch::sm90;
  int cu = 8;
  int64_t max_partitions = 0;  // plan ceiling; 0 = cu
  DType partial = DType::f32;
};

class TinyCall {
 public:
  explicit TinyCall(TinySpec s = {}) : spec(std::move(s)) {
    const int64_t B = int64_t(spec.lens.size()), bs = spec.block_size, D = spec.head_dim;
    int64_t max_len = 1;
    for (int32_t l : spec.lens) max_len = l > max_len ? l : max_len;
    max_blocks = (max_len + bs - 1) / bs;
    num_blocks = B * max_blocks;
    const int64_t hq = spec.hkv * spec.group;
    q.assign(size_t(B * spec.q_len * hq * D), 0);
    out.assign(q.size(), 0);
    k.assign(size_t(num_blocks * spec.hkv * D * bs), 0);
    v.assign(k.size(), 0);
    tables.resize(size_t(B * max_blocks));
    for (size_t i = 0; i < tables.size(); ++i) tables[i] = int32_t(i);
    lens = spec.lens;
    const DType fp8 = arch_fp8(spec.arch) == DType::none ? DType::fp8_e4m3fn : arch_fp8(spec.arch);
    call.q = TensorView::contiguous_of(q.data(), DType::bf16, {B * spec.q_len, hq, D});
    call.out = TensorView::contiguous_of(out.data(), DType::bf16, {B * spec.q_len, hq, D});
    call.k_cache = TensorView::contiguous_of(k.data(), fp8, {num_blocks, spec.hkv, D / 16, bs, 16});
    call.v_cache = TensorView::contiguous_of(v.data(), fp8, {num_blocks, spec.hkv, D, bs});
    call.block_tables = TensorView::contiguous_of(tables.data(), DType::i32, {B, max_blocks});
    call.context_lens = TensorView::contiguous_of(lens.data(), DType::i32, {B});
    call.q_len = int(spec.q_len);
    call.opt.arch = spec.arch;
    call.opt.compute = fp8;
    call.opt.cu = spec.cu;
    call.opt.partial = spec.partial;
  }
  TinyCall(const TinyCall&) = delete;
  TinyCall& operator=(const TinyCall&) = delete;

  // A plan refreshed from the current lens, and planned scratch to match.
  PlanView make_plan() {
    PlanParams p;
    p.num_seqs = int64_t(lens.size());
    p.kv_heads = spec.hkv;
    p.cu = spec.cu;
    p.max_partitions = spec.max_partitions;
    plan.emplace(p);
    plan->refresh(lens.data());
    size_scratch(scratch_geometry(call, &plan_view_storage()));
    return plan_view_storage();
  }
  // Scratch for a run without a plan (uniform split count of the call).
  Scratch make_uniform_scratch() {
    size_scratch(scratch_geometry(call, nullptr));
    return scratch;
  }

  TinySpec spec;
  int64_t max_blocks = 0, num_blocks = 0;
  std::vector<uint16_t> q, out;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> tables, lens;
  std::optional<WorkPlan> plan;
  std::vector<float> partial_buf, m_buf, l_buf;
  Scratch scratch;
  DecodeCall call;

 private:
  PlanView& plan_view_storage() {
    view_ = plan->view();
    return view_;
  }
  void size_scratch(const ScratchGeometry& g) {
    scratch = {};
    if (!g.needed) return;
    const int64_t rows = g.slots * g.rows;
    partial_buf.assign(size_t(rows * g.head_dim), 0.0f);  // f32 is the widest partial
    m_buf.assign(size_t(rows), 0.0f);
    l_buf.assign(size_t(rows), 0.0f);
    const auto& s = g.partial_shape;
    if (g.rank == 4) {
      scratch.partial = TensorView::contiguous_of(partial_buf.data(), g.partial, {s[0], s[1], s[2], s[3]});
      scratch.m = TensorView::contiguous_of(m_buf.data(), DType::f32, {s[0], s[1], s[2]});
      scratch.l = TensorView::contiguous_of(l_buf.data(), DType::f32, {s[0], s[1], s[2]});
    } else {
      scratch.partial = TensorView::contiguous_of(partial_buf.data(), g.partial, {s[0], s[1], s[2]});
      scratch.m = TensorView::contiguous_of(m_buf.data(), DType::f32, {s[0], s[1]});
      scratch.l = TensorView::contiguous_of(l_buf.data(), DType::f32, {s[0], s[1]});
    }
  }
  PlanView view_;
};

}  // namespace pav::kernels::testing
