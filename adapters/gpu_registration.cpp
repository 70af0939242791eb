// SPDX-License-Identifier: Apache-2.0
#include "adapters/gpu_registration.hpp"

#include <cstdlib>

#ifdef PAV_HAVE_GPU
#include "kernels/hip/gpu_backend.hpp"
#include "kernels/hip/host_staged.hpp"
#endif

namespace pav::adapters {

bool register_gpu() {
#ifdef PAV_HAVE_GPU
  static const bool registered = kernels::gpu::register_host_staged_backend();
  return registered;
#else
  return false;
#endif
}

std::string device_description(kernels::Backend backend) {
  std::string out = "host CPU";
#ifdef PAV_HAVE_GPU
  if (backend == kernels::Backend::gpu) out = kernels::gpu::device_name();
#endif
  if (backend == kernels::Backend::gpu)
    for (const char* var : {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"})
      if (const char* v = std::getenv(var)) out += std::string(" (") + var + "=" + v + ")";
  return out;
}

}  // namespace pav::adapters
