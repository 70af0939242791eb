// SPDX-License-Identifier: Apache-2.0
// libpav_gpu_kernel.so (nvidia preset): pav's GPU decode kernels behind the C
// ABI, on the device memory side: pav stages every tensor on the device and
// passes its stream; the plugin allocates its scratch there, launches, and
// (for a planned call) reads the stale-plan status back. Configuration words:
// see adapters/pav_kernel.hpp (--path, --partial, --arch, --cu).
#include <fmt/core.h>

#include <atomic>

#include "adapters/pav_kernel.hpp"
#include "adapters/plugins/plugin_glue.hpp"
#include "kernels/hip/gpu_backend.hpp"
#include "kernels/validate.hpp"

namespace {

using namespace pav;
using adapters::CallResult;
using adapters::Outcome;

class DeviceKernel final : public adapters::KernelUnderTest {
 public:
  explicit DeviceKernel(adapters::PavKernelOptions o) : o_(o), d_(adapters::pav_kernel_description(o)) {
    d_.name = o.planned ? "pav-gpu-device-planned" : "pav-gpu-device-uniform";
    d_.memory = adapters::Memory::device;
    d_.thread_safe = false;  // one stream's scratch at a time
  }
  const adapters::KernelDescription& description() const override { return d_; }
  std::string adapter() const override { return "plugin"; }
  std::string spec() const override { return "libpav_gpu_kernel.so"; }
  int64_t decode_calls() const override { return calls_.load(); }

  // The check sees host tables: pav's kernels' own refusal, as on the CPU.
  CallResult check(const adapters::DecodeRequest& r) override {
    std::string why = adapters::pav_kernel_refusal(o_, r);
    return why.empty() ? CallResult::success() : CallResult{Outcome::rejected, why};
  }

  // Every tensor is device memory here: only shapes are read on the host.
  CallResult decode(const adapters::DecodeRequest& r) override {
    ++calls_;
    const kernels::DecodeCall c = adapters::pav_kernel_call(o_, r);
    const kernels::KernelKind kind = o_.planned ? kernels::KernelKind::planned : kernels::KernelKind::uniform;
    if (o_.planned && !r.plan) return {Outcome::rejected, "the planned kernel runs pav's work plan: none given"};
    const kernels::PlanView* plan = o_.planned ? r.plan : nullptr;
    if (const kernels::Finding f = kernels::first_violation(c, kind, plan, nullptr))
      return {Outcome::rejected, kernels::describe(f, kind)};
    try {
      const kernels::ScratchGeometry g = kernels::scratch_geometry(c, plan);
      const int64_t rows_total = std::max<int64_t>(g.slots, 1) * g.rows;
      kernels::gpu::DeviceBuffer partial(size_t(rows_total * g.head_dim * kernels::dtype_size(g.partial)));
      kernels::gpu::DeviceBuffer m(size_t(rows_total) * sizeof(float)), l(size_t(rows_total) * sizeof(float));
      kernels::Scratch s;
      if (g.needed) {
        if (g.rank == 4) {
          const int64_t h = g.partial_shape[0], cap = g.partial_shape[1];
          s.partial = kernels::TensorView::contiguous_of(partial.data(), g.partial, {h, cap, g.rows, g.head_dim});
          s.m = kernels::TensorView::contiguous_of(m.data(), kernels::DType::f32, {h, cap, g.rows});
          s.l = kernels::TensorView::contiguous_of(l.data(), kernels::DType::f32, {h, cap, g.rows});
        } else {
          s.partial = kernels::TensorView::contiguous_of(partial.data(), g.partial, {g.slots, g.rows, g.head_dim});
          s.m = kernels::TensorView::contiguous_of(m.data(), kernels::DType::f32, {g.slots, g.rows});
          s.l = kernels::TensorView::contiguous_of(l.data(), kernels::DType::f32, {g.slots, g.rows});
        }
      }
      void* stream = r.stream;
      if (plan) {
        kernels::gpu::DeviceBuffer status(kernels::gpu::kStatusWords * sizeof(uint32_t));
        kernels::gpu::planned_decode(c, *plan, s, status.as<uint32_t>(), stream);
        const kernels::DecodeResult res = kernels::gpu::read_status(status.as<uint32_t>(), stream);
        if (res.status == kernels::DecodeStatus::stale_plan)
          return {Outcome::stale_plan, fmt::format("{} plan tasks and {} rows do not match the live lengths",
                                                   res.stale_tasks, res.stale_rows)};
      } else {
        kernels::gpu::uniform_decode(c, s, stream);
        kernels::gpu::synchronize(stream);  // scratch is freed on return
      }
    } catch (const std::exception& e) {
      return {Outcome::kernel_error, e.what()};
    }
    return CallResult::success();
  }

 private:
  adapters::PavKernelOptions o_;
  adapters::KernelDescription d_;
  std::atomic<int64_t> calls_{0};
};

std::unique_ptr<adapters::KernelUnderTest> make(const std::vector<std::string>& words) {
  if (!kernels::gpu::available()) throw adapters::plugin::Unavailable("no usable GPU device");
  adapters::PavKernelOptions o = adapters::parse_pav_kernel_words(words);
  o.backend = kernels::Backend::gpu;
  return std::make_unique<DeviceKernel>(o);
}

}  // namespace

PAV_PLUGIN_ENTRY_POINTS(make)
