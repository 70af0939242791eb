// SPDX-License-Identifier: Apache-2.0
#include "adapters/pav_kernel.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cache_format.hpp"
#include "kernels/codecs.hpp"
#include "kernels/validate.hpp"

namespace pav::adapters {

using kernels::DType;
using kernels::TensorView;

namespace {

inline constexpr int64_t kMaxGroup = 64;   // GQA ratios described (the kernels take any)
inline constexpr int64_t kMaxQLen = 16;    // MTP positions described (the kernels take any)
inline constexpr int64_t kUniformBlockSizes[] = {1, 8, 16, 32, 48, 64, 128, 256};

}  // namespace

PavKernelOptions parse_pav_kernel_words(const std::vector<std::string>& words) {
  PavKernelOptions o;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= words.size()) throw KernelSpecError("pav kernel: " + w + " needs a value");
      return words[++i];
    };
    if (w == "--path") {
      const std::string& v = value();
      if (v != "planned" && v != "uniform") throw KernelSpecError("pav kernel: --path " + v + " (planned or uniform)");
      o.planned = v == "planned";
    } else if (w == "--partial") {
      const std::string& v = value();
      if (!kernels::parse_dtype(v, o.partial) || !kernels::partial_dtype_ok(o.partial))
        throw KernelSpecError("pav kernel: --partial " + v + " (bf16, f16 or f32)");
    } else if (w == "--arch") {
      const std::string& v = value();
      if (!kernels::parse_arch(v, o.arch) || !kernels::planned_arch_supported(o.arch))
        throw KernelSpecError("pav kernel: --arch " + v + " (sm90, gfx950 or gfx942)");
    } else if (w == "--cu") {
      const std::string& v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1 || n > 4096) throw KernelSpecError("pav kernel: --cu " + v + " (1..4096)");
      o.cu = int(n);
    } else {
      throw KernelSpecError("pav kernel: unknown word '" + w + "' (--path, --partial, --arch, --cu)");
    }
  }
  return o;
}

std::string pav_kernel_words(const PavKernelOptions& o) {
  return fmt::format("--path {} --partial {} --arch {} --cu {}", o.planned ? "planned" : "uniform",
                     kernels::to_string(o.partial), kernels::to_string(o.arch), o.cu);
}

std::string pav_kernel_spec(const PavKernelOptions& o) {
  return fmt::format("pav:{} {}", o.backend == kernels::Backend::gpu ? "gpu" : "cpu", pav_kernel_words(o));
}

KernelDescription pav_kernel_description(const PavKernelOptions& o) {
  KernelDescription d;
  d.name = o.backend == kernels::Backend::gpu ? "pav-gpu" : "pav-cpu";
  d.name += o.planned ? "-planned" : "-uniform";
  d.version = "1";
  d.memory = Memory::host;
  d.q_dtypes = {DType::bf16, DType::f16};
  d.cache_dtypes = {kernels::arch_fp8(o.arch)};
  d.v_layouts = {kernels::VLayout::plain, kernels::VLayout::trans};
  d.scale_kinds = {Scales::none, Scales::per_tensor, Scales::per_token};
  if (o.planned) {
    d.block_sizes.assign(kernels::kPlannedBlockSizes.begin(), kernels::kPlannedBlockSizes.end());
    d.head_dims.push_back(kernels::kPlannedHeadDimSmall);
    for (int64_t h = kernels::kPlannedHeadDimStep; h <= kernels::kPlannedHeadDimMax; h += kernels::kPlannedHeadDimStep)
      d.head_dims.push_back(h);
    d.split = Split::plan;
    d.max_split_ceiling = o.cu;
  } else {
    d.block_sizes.assign(std::begin(kUniformBlockSizes), std::end(kUniformBlockSizes));
    // The GPU decode runs fewer head dims than the CPU one.
    const bool gpu = o.backend == kernels::Backend::gpu;
    for (int64_t h = gpu ? kernels::kGpuMinHeadDim : 16; h <= (gpu ? kernels::kGpuMaxHeadDim : 1024); h += 16)
      d.head_dims.push_back(h);
    d.split = Split::self;
    d.split_ceiling = true;
    d.max_split_ceiling = kernels::kMaxUniformPartitions;
  }
  for (int64_t g = 1; g <= kMaxGroup; ++g) d.gqa_ratios.push_back(g);
  d.min_q_len = 1;
  d.max_q_len = kMaxQLen;
  d.max_num_seqs = kernels::kMaxPlanBatch;
  d.strided_q = true;
  d.thread_safe = true;
  d.has_check = true;
  kernels::DecodeOptions opt;
  opt.compute = kernels::arch_fp8(o.arch);
  opt.partial = o.partial;
  const kernels::NumericsProfile p = kernels::pav_profile(opt);
  d.profile = {p.q_quant, p.p_round, p.partial};
  canonicalize(d);
  return d;
}

kernels::DecodeCall pav_kernel_call(const PavKernelOptions& o, const DecodeRequest& r) {
  kernels::DecodeCall c = r.call;
  const float scale = c.opt.softmax_scale;
  c.opt = kernels::DecodeOptions{};
  c.opt.arch = o.arch;
  c.opt.compute = kernels::arch_fp8(o.arch);
  c.opt.partial = o.partial;
  c.opt.cu = o.cu;
  c.opt.softmax_scale = scale;
  if (!o.planned) c.opt.uniform_partitions = int(std::min<int64_t>(r.max_partitions, 1 << 30));
  return c;
}

namespace {

bool listed(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

std::string pav_kernel_refusal(const PavKernelOptions& o, const DecodeRequest& r) {
  const kernels::DecodeCall c = pav_kernel_call(o, r);
  const kernels::KernelKind kind = o.planned ? kernels::KernelKind::planned : kernels::KernelKind::uniform;
  if (o.planned && !r.plan) return "the planned kernel runs pav's work plan: none given";
  if (!o.planned && r.plan) return "the uniform kernel takes no plan";
  if (const kernels::Finding f = kernels::first_violation(c, kind, o.planned ? r.plan : nullptr, nullptr))
    return kernels::describe(f, kind);
  // Validation passed, so the geometry below is sound.
  const kernels::CallDims d = kernels::dims_of(c);
  const KernelDescription desc = pav_kernel_description(o);
  if (!listed(desc.block_sizes, d.block_size)) return fmt::format("block size {} is not one this kernel lists", d.block_size);
  if (!listed(desc.head_dims, d.head_dim)) return fmt::format("head dim {} is not one this kernel lists", d.head_dim);
  if (d.group > kMaxGroup) return fmt::format("group {} > {}", d.group, kMaxGroup);
  if (c.q_len > kMaxQLen) return fmt::format("q_len {} > {}", c.q_len, kMaxQLen);
  if (c.q.stride[1] != d.head_dim || c.out.stride[1] != d.head_dim) return "heads of q or out are not dense";
  if (r.lse.present()) return "this kernel writes no lse";
  if (!o.planned && r.max_partitions > kernels::kMaxUniformPartitions)
    return fmt::format("split ceiling {} > {}", r.max_partitions, kernels::kMaxUniformPartitions);
  if (o.planned && r.max_partitions != r.plan->max_partitions)
    return fmt::format("split ceiling {} differs from the plan's {}", r.max_partitions, r.plan->max_partitions);
  // The table's values: the page-table rule the contract check applies too.
  return kernels::page_table_problem(c, d.num_blocks, d.block_size);
}

namespace {

void fill_nan(std::vector<uint8_t>& bytes, DType dtype) {
  if (dtype == DType::f32) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) std::memcpy(&bytes[i], &nan, 4);
    return;
  }
  const uint16_t nan = dtype == DType::bf16 ? 0x7fc0 : 0x7e00;
  for (size_t i = 0; i + 2 <= bytes.size(); i += 2) std::memcpy(&bytes[i], &nan, 2);
}

bool is_nan_at(const std::vector<uint8_t>& bytes, DType dtype, int64_t e) {
  if (dtype == DType::f32) {
    float v;
    std::memcpy(&v, &bytes[size_t(e) * 4], 4);
    return std::isnan(v);
  }
  uint16_t h;
  std::memcpy(&h, &bytes[size_t(e) * 2], 2);
  return std::isnan(dtype == DType::bf16 ? kernels::bf16_to_f32(h) : kernels::f16_to_f32(h));
}

// Scratch elements (m, l and the partial rows) of the slots past the plan's
// active tasks that are no longer NaN, over every KV head.
int64_t touched_past_active(const kernels::PlanView& plan, int64_t rows, int64_t head_dim, DType partial,
                            const std::vector<uint8_t>& p, const std::vector<float>& m, const std::vector<float>& l) {
  int64_t active = 0;
  for (int64_t b = 0; b < plan.num_seqs; ++b)
    active = std::max<int64_t>(active, int64_t(plan.reduce_info[2 * b]) + plan.reduce_info[2 * b + 1]);
  int64_t touched = 0;
  for (int64_t h = 0; h < plan.kv_heads; ++h)
    for (int64_t i = active; i < plan.capacity; ++i)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t row = (h * plan.capacity + i) * rows + r;
        if (!std::isnan(m[size_t(row)]) || !std::isnan(l[size_t(row)])) ++touched;
        for (int64_t d = 0; d < head_dim; ++d) touched += !is_nan_at(p, partial, row * head_dim + d);
      }
  return touched;
}

}  // namespace

CallResult pav_kernel_decode(const PavKernelOptions& o, const DecodeRequest& r) {
  if (std::string why = pav_kernel_refusal(o, r); !why.empty()) return {Outcome::rejected, why};
  const kernels::DecodeCall c = pav_kernel_call(o, r);
  const kernels::PlanView* plan = o.planned ? r.plan : nullptr;
  const kernels::ScratchGeometry g = kernels::scratch_geometry(c, plan);
  // Scratch the kernel owns; its dtype is the configured partial dtype.
  const int64_t rows_total = std::max<int64_t>(g.slots, 1) * g.rows;
  std::vector<uint8_t> partial(size_t(rows_total * g.head_dim * kernels::dtype_size(g.partial)));
  std::vector<float> m(static_cast<size_t>(rows_total), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> l(m);
  fill_nan(partial, g.partial);
  kernels::Scratch s;
  if (g.needed) {
    if (g.rank == 4) {
      const int64_t h = g.partial_shape[0], cap = g.partial_shape[1];
      s.partial = TensorView::contiguous_of(partial.data(), g.partial, {h, cap, g.rows, g.head_dim});
      s.m = TensorView::contiguous_of(m.data(), DType::f32, {h, cap, g.rows});
      s.l = TensorView::contiguous_of(l.data(), DType::f32, {h, cap, g.rows});
    } else {
      s.partial = TensorView::contiguous_of(partial.data(), g.partial, {g.slots, g.rows, g.head_dim});
      s.m = TensorView::contiguous_of(m.data(), DType::f32, {g.slots, g.rows});
      s.l = TensorView::contiguous_of(l.data(), DType::f32, {g.slots, g.rows});
    }
  }
  try {
    if (o.planned) {
      const kernels::DecodeResult res = kernels::launch_planned(c, plan, s, o.backend);
      if (res.status == kernels::DecodeStatus::stale_plan)
        return {Outcome::stale_plan,
                fmt::format("{} plan tasks and {} rows do not match the live lengths", res.stale_tasks, res.stale_rows)};
      if (g.needed && g.rank == 4)
        if (const int64_t n = touched_past_active(*plan, g.rows, g.head_dim, g.partial, partial, m, l))
          return {Outcome::kernel_error,
                  fmt::format("{} scratch elements past the plan's active tasks were written", n)};
    } else {
      kernels::launch_uniform(c, s, o.backend);
    }
  } catch (const kernels::RejectError& e) {
    return {Outcome::rejected, e.what()};
  } catch (const std::exception& e) {
    return {Outcome::kernel_error, e.what()};
  }
  return CallResult::success();
}

namespace {

class PavKernel final : public KernelUnderTest {
 public:
  PavKernel(PavKernelOptions o, std::string spec)
      : options_(o), description_(pav_kernel_description(o)), spec_(std::move(spec)) {}
  const KernelDescription& description() const override { return description_; }
  std::string adapter() const override { return "pav"; }
  std::string spec() const override { return spec_; }
  CallResult check(const DecodeRequest& r) override {
    std::string why = pav_kernel_refusal(options_, r);
    return why.empty() ? CallResult::success() : CallResult{Outcome::rejected, why};
  }
  CallResult decode(const DecodeRequest& r) override {
    ++decode_calls_;
    return pav_kernel_decode(options_, r);
  }
  int64_t decode_calls() const override { return decode_calls_.load(); }

 private:
  PavKernelOptions options_;
  KernelDescription description_;
  std::string spec_;
  std::atomic<int64_t> decode_calls_{0};
};

}  // namespace

std::unique_ptr<KernelUnderTest> make_pav_kernel(const PavKernelOptions& o, const std::string& spec) {
  return std::make_unique<PavKernel>(o, spec);
}

}  // namespace pav::adapters
