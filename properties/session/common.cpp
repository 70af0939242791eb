// SPDX-License-Identifier: Apache-2.0
// What every run of the session shares: opening kernels, choosing the
// backend, where cases are saved.
#include <fmt/core.h>

#include "adapters/gpu_registration.hpp"
#include "properties/engine/counterexample.hpp"
#include "properties/gen/kernel_gen.hpp"
#include "properties/session/session.hpp"
#include "properties/session/stop.hpp"

namespace pav::session {

std::unique_ptr<adapters::KernelUnderTest> open_kernel(const std::string& spec, const KernelOptions& o,
                                                       bool for_cases) {
  adapters::OpenOptions opt;
  opt.isolate = o.isolate;
  opt.timeout_seconds = o.timeout;
  opt.exchange_dir = o.exchange_dir;
  opt.should_stop = stop_requested;
  try {
    std::unique_ptr<adapters::KernelUnderTest> k = adapters::open_kernel(spec, opt);
    if (for_cases)
      if (auto why = props::generation_problem(k->description()))
        throw BadInput("--kernel " + spec + ": pav cannot generate calls for this kernel: " + *why);
    return k;
  } catch (const adapters::KernelSpecError& e) {
    throw BadInput(e.what());
  } catch (const adapters::KernelUnavailable& e) {
    throw CannotRun(e.what());
  }
}

kernels::Backend pick_backend(const std::string& name) {
  if (name == "cpu") return kernels::Backend::cpu;
  if (name != "gpu" && name != "auto")
    throw BadInput("--backend: expected cpu, gpu or auto, got '" + name.substr(0, 40) + "'");
  adapters::register_gpu();
  if (name == "gpu") {
    if (!kernels::gpu_backend_available())
      throw CannotRun("--backend gpu: no GPU backend in this build or no device present");
    return kernels::Backend::gpu;
  }
  return kernels::gpu_backend_available() ? kernels::Backend::gpu : kernels::Backend::cpu;
}

const char* backend_name(kernels::Backend b) { return b == kernels::Backend::gpu ? "gpu" : "cpu"; }

std::string default_save_dir() { return props::default_counterexample_dir(); }

}  // namespace pav::session
