// SPDX-License-Identifier: Apache-2.0
#pragma once
// --backend cpu|gpu|auto, shared by the commands that run kernels.
#include <string>

#include "kernels/launch.hpp"
#include "tools/command.hpp"

namespace pav::cli {

// Registers the GPU backend (host-staged entries) when this build has one and a
// device is present; false otherwise. Defined in main.cpp; the device is probed
// only by commands that run kernels.
bool register_gpu();

// The device a backend runs on, for reports: the GPU's name (and the visible
// devices the process was given) or "host CPU". Defined in main.cpp.
std::string device_description(kernels::Backend backend);

inline CLI::Option* add_backend_option(CLI::App& app, std::string& name) {
  return app.add_option("--backend", name, "cpu, gpu, or auto (gpu when a device is present)")
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}));
}

// The backend to run; CannotRun (exit 3) when gpu is asked for and there is none.
inline kernels::Backend pick_backend(const std::string& name) {
  if (name == "cpu") return kernels::Backend::cpu;
  register_gpu();
  if (name == "gpu") {
    if (!kernels::gpu_backend_available())
      throw CannotRun("--backend gpu: no GPU backend in this build or no device present");
    return kernels::Backend::gpu;
  }
  return kernels::gpu_backend_available() ? kernels::Backend::gpu : kernels::Backend::cpu;
}

inline const char* backend_name(kernels::Backend b) { return b == kernels::Backend::gpu ? "gpu" : "cpu"; }

}  // namespace pav::cli
