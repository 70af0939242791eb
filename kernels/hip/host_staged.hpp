// SPDX-License-Identifier: Apache-2.0
#pragma once
// The GPU backend behind the launch layer's Backend::gpu, for callers whose
// tensors live in host memory: pav replay / verify / drift / fuzz and the
// property runner. Each call copies every tensor of the call (output, scratch
// and plan included, so NaN poison and sentinels travel with them) to device
// buffers, runs the GPU entry on a per-thread stream, and copies the output,
// the scratch and the status back. Serving code with device-resident tensors
// calls kernels/hip/gpu_backend.hpp directly.
namespace pav::kernels::gpu {

// Registers the host-staged entries with register_gpu_backend() when a device
// is usable; returns whether it did. Safe to call more than once.
bool register_host_staged_backend();

}  // namespace pav::kernels::gpu
