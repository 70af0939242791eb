// SPDX-License-Identifier: Apache-2.0
#include "kernels/launch.hpp"

#include <atomic>
#include <stdexcept>

#include "kernels/cpu/decode_cpu.hpp"

namespace pav::kernels {
namespace {

std::atomic<DecodeResult (*)(const DecodeCall&, const PlanView*, const Scratch&)> g_gpu_planned{nullptr};
std::atomic<void (*)(const DecodeCall&, const Scratch&)> g_gpu_uniform{nullptr};

[[noreturn]] void no_gpu() {
  throw std::runtime_error("Backend::gpu requested but no GPU backend is registered in this build");
}

}  // namespace

void register_gpu_backend(const GpuBackendEntries& entries) {
  g_gpu_planned.store(entries.planned);
  g_gpu_uniform.store(entries.uniform);
}

bool gpu_backend_available() { return g_gpu_planned.load() != nullptr && g_gpu_uniform.load() != nullptr; }

DecodeResult launch_planned(const DecodeCall& call, const PlanView* plan, const Scratch& scratch,
                            Backend backend) {
  validate_planned(call, plan, scratch);
  if (backend == Backend::gpu) {
    auto fn = g_gpu_planned.load();
    if (!fn) no_gpu();
    return fn(call, plan, scratch);
  }
  if (plan) return cpu::planned_decode(call, *plan, scratch);
  cpu::uniform_decode(call, scratch);
  return {};
}

void launch_uniform(const DecodeCall& call, const Scratch& scratch, Backend backend) {
  validate_uniform(call, scratch);
  if (backend == Backend::gpu) {
    auto fn = g_gpu_uniform.load();
    if (!fn) no_gpu();
    fn(call, scratch);
    return;
  }
  cpu::uniform_decode(call, scratch);
}

}  // namespace pav::kernels
