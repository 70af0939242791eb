// SPDX-License-Identifier: Apache-2.0
#pragma once
// Helpers shared by the .hip sources of the backend (device code and error
// checks). Not part of the host API.
#include <cstdint>
#include <string>

// The runtime header comes first: on AMD it declares the device memcpy that
// <cstring>'s std::memcpy (used by the shared codecs) must see.
#include "kernels/hip/platform.hpp"
#include "kernels/codecs.hpp"
#include "kernels/planner.hpp"

namespace pav::kernels::gpu {

// Throws gpu::Error naming `what` and the runtime's message.
void check(hipError_t e, const char* what);

inline void check_launch(const char* what) { check(hipGetLastError(), what); }

__device__ inline float neg_inf() { return -INFINITY; }
__device__ inline float quiet_nan() { return f32_from_bits(0x7fc00000u); }

// Butterfly reductions over one warp; every lane gets the result. The step
// count follows kWarpSize, so the same code serves wave64 and warp32.
__device__ inline float warp_max(float v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v = fmaxf(v, PAV_SHFL_XOR(v, o));
  return v;
}
__device__ inline float warp_sum(float v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += PAV_SHFL_XOR(v, o);
  return v;
}

__device__ inline float load_half(const uint16_t* p, int64_t i, bool bf16) {
  return bf16 ? bf16_to_f32(p[i]) : f16_to_f32(p[i]);
}
__device__ inline uint16_t to_half(float v, bool bf16) { return bf16 ? f32_to_bf16(v) : f32_to_f16(v); }

// Partial dtype codes used on the device (f32, bf16, f16).
enum class PartialKind : int { f32 = 0, bf16 = 1, f16 = 2 };

__device__ inline float load_partial(const void* base, int64_t i, PartialKind k) {
  if (k == PartialKind::f32) return static_cast<const float*>(base)[i];
  const uint16_t h = static_cast<const uint16_t*>(base)[i];
  return k == PartialKind::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}
__device__ inline void store_partial(void* base, int64_t i, float v, PartialKind k) {
  if (k == PartialKind::f32)
    static_cast<float*>(base)[i] = v;
  else
    static_cast<uint16_t*>(base)[i] = k == PartialKind::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
}

}  // namespace pav::kernels::gpu
