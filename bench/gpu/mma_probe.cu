// SPDX-License-Identifier: Apache-2.0
// pav_mma_probe: how the H200's tensor cores sum exact products, for the two
// matrix instructions an fp8 attention body could use. For k = 1..24 it asks
// each instruction for 1 * 1 + x * y with x * y = 2^-k (both products exact
// in either operand type) and prints how much of 2^-k survives in the fp32
// result: an fp32 sum keeps it down to 2^-23 (2^-24 rounds to even).
//   fp8 : mma.m16n8k32 e4m3 x e4m3 -> f32   (x, y e4m3 codes)
//   f16 : mma.m16n8k16 f16 x f16 -> f32     (the same values as f16)
// Both from a zero accumulator, and once more with the 1 in the accumulator
// (C = 1, A * B = x * y alone). Exit 0; the table is the result.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>

namespace {

__global__ void probe(const uint32_t* a, const uint32_t* b, float c_in, int fp8, float* d) {
  const int lane = threadIdx.x;
  float c0 = lane == 0 ? c_in : 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
  if (fp8)
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a[4 * lane]), "r"(a[4 * lane + 1]), "r"(a[4 * lane + 2]), "r"(a[4 * lane + 3]), "r"(b[2 * lane]),
          "r"(b[2 * lane + 1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a[4 * lane]), "r"(a[4 * lane + 1]), "r"(a[4 * lane + 2]), "r"(a[4 * lane + 3]), "r"(b[2 * lane]),
          "r"(b[2 * lane + 1]));
  if (lane == 0) *d = c0;  // D[0][0]
}

uint8_t e4m3(float v) { return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); }
uint16_t f16(float v) { return static_cast<__half_raw>(__float2half_rn(v)).x; }

// D[0][0] of one instruction: A row 0 = (one, x, 0...), B column 0 = (one, y, 0...)
// (lane 0 holds k = 0 and 1 of row 0 / column 0 in the low bytes of its first
// registers in both layouts), C[0][0] = c.
float run(bool fp8, float one_a, float one_b, float x, float y, float c) {
  uint32_t ha[128] = {}, hb[64] = {};
  if (fp8) {
    ha[0] = uint32_t(e4m3(one_a)) | uint32_t(e4m3(x)) << 8;
    hb[0] = uint32_t(e4m3(one_b)) | uint32_t(e4m3(y)) << 8;
  } else {
    ha[0] = uint32_t(f16(one_a)) | uint32_t(f16(x)) << 16;
    hb[0] = uint32_t(f16(one_b)) | uint32_t(f16(y)) << 16;
  }
  uint32_t *da, *db;
  float* dd;
  float out = NAN;
  if (cudaMalloc(&da, sizeof(ha)) || cudaMalloc(&db, sizeof(hb)) || cudaMalloc(&dd, 4)) return NAN;
  cudaMemcpy(da, ha, sizeof(ha), cudaMemcpyHostToDevice);
  cudaMemcpy(db, hb, sizeof(hb), cudaMemcpyHostToDevice);
  probe<<<1, 32>>>(da, db, c, fp8 ? 1 : 0, dd);
  cudaMemcpy(&out, dd, 4, cudaMemcpyDeviceToHost);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
  return out;
}

float run8(float one_a, float one_b, float x, float y, float c) { return run(true, one_a, one_b, x, y, c); }

}  // namespace

int main() {
  std::printf("| k | x * y | fp8 1+xy | fp8 C=1 | f16 1+xy | f16 C=1 |\n|---|---|---|---|---|---|\n");
  for (int k = 1; k <= 24; ++k) {
    // x * y = 2^-k with both factors representable: e4m3 reaches 2^-9
    // (subnormal), f16 2^-24; split k between them.
    const int kx = k / 2, ky = k - kx;
    const float x = std::ldexp(1.0f, -kx), y = std::ldexp(1.0f, -ky);
    auto cell = [&](float r, double big) {
      static char buf[64];
      const double kept = (double(r) - big) / (big * std::ldexp(1.0, -k));
      std::snprintf(buf, sizeof buf, "%.3g", kept);
      return buf;
    };
    std::printf("| %d | 2^-%d |", k, k);
    // e4m3 reaches 2^-9: past 2^-18 the large term grows instead (1 -> 2^(k-18),
    // split between its two factors), the ratio is what counts.
    const int kb = k > 18 ? k - 18 : 0, kbx = kb / 2, kby = kb - kbx;
    const float one8 = std::ldexp(1.0f, kbx), one8y = std::ldexp(1.0f, kby);
    const float x8 = std::ldexp(1.0f, -std::min(kx, 9)), y8 = std::ldexp(1.0f, -std::min(ky, 9));
    const double big8 = std::ldexp(1.0, kb);
    std::printf(" %s |", cell(run8(one8, one8y, x8, y8, 0.0f), big8));
    std::printf(" %s |", cell(run8(0.0f, 0.0f, x8, y8, float(big8)), big8));
    std::printf(" %s |", cell(run(false, 1.0f, 1.0f, x, y, 0.0f), 1.0));
    std::printf(" %s |\n", cell(run(false, 0.0f, 0.0f, x, y, 1.0f), 1.0));
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "pav_mma_probe: %s\n", cudaGetErrorString(e));
    return 3;
  }
  std::printf("(fraction of x * y kept in D[0][0] - 1: 1 = exact, 0 = lost)\n");
  return 0;
}
