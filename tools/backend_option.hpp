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

inline kernels::Backend pick_backend(const std::string& name) {
  if (name == "cpu") return kernels::Backend::cpu;
  register_gpu();
  if (name == "gpu") {
    if (!kernels::gpu_backend_available())
      throw BadInput("--backend gpu: no GPU backend in this build or no device present");
    return kernels::Backend::gpu;
  }
  return kernels::gpu_backend_available() ? kernels::Backend::gpu : kernels::Backend::cpu;
}

inline const char* backend_name(kernels::Backend b) { return b == kernels::Backend::gpu ? "gpu" : "cpu"; }

}  // namespace pav::cli
