#pragma once
// --backend cpu|gpu|auto, shared by the commands that run kernels.
#include <string>

#include "kernels/launch.hpp"
#include "tools/command.hpp"

namespace pav::cli {

inline kernels::Backend pick_backend(const std::string& name) {
  if (name == "cpu") return kernels::Backend::cpu;
  if (name == "gpu") {
    if (!kernels::gpu_backend_available())
      throw BadInput("--backend gpu: no GPU backend in this build or no device present");
    return kernels::Backend::gpu;
  }
  return kernels::gpu_backend_available() ? kernels::Backend::gpu : kernels::Backend::cpu;
}

inline const char* backend_name(kernels::Backend b) { return b == kernels::Backend::gpu ? "gpu" : "cpu"; }

}  // namespace pav::cli
