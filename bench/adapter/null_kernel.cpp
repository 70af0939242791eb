// SPDX-License-Identifier: Apache-2.0
// A kernel of the ABI that does no attention: it writes zeros to out (and -inf
// to lse). The adapter benchmark runs it so that what it times is the adapter's
// own cost per call, not a kernel's.
#include <pav/kernel_abi.h>

#include <cmath>
#include <cstdio>
#include <cstring>

namespace {
void zero(const pav_tensor& t, float value) {
  if (t.rank == 0 || t.data == nullptr) return;
  const int size = t.dtype == PAV_DTYPE_F32 ? 4 : 2;
  // out and lse come contiguous from pav's benchmark case; rows may be strided.
  const long rows = t.shape[0], row = t.rank > 1 ? t.shape[1] * (t.rank > 2 ? t.shape[2] : 1) : 1;
  for (long r = 0; r < rows; ++r) {
    char* p = static_cast<char*>(t.data) + r * t.stride[0] * size;
    if (size == 4) {
      for (long i = 0; i < row; ++i) std::memcpy(p + i * 4, &value, 4);
    } else {
      std::memset(p, 0, size_t(row) * 2);
    }
  }
}
}  // namespace

extern "C" {
PAV_KERNEL_EXPORT uint32_t pav_kernel_abi_version(void) { return PAV_KERNEL_ABI_VERSION; }

PAV_KERNEL_EXPORT int pav_kernel_describe(void*, pav_kernel_desc* d, char*, size_t) {
  std::snprintf(d->name, sizeof d->name, "null");
  std::snprintf(d->version, sizeof d->version, "1");
  d->memory = PAV_MEMORY_HOST;
  d->q_dtypes = PAV_BIT(PAV_DTYPE_BF16) | PAV_BIT(PAV_DTYPE_F16);
  d->out_dtype = PAV_DTYPE_NONE;
  d->cache_dtypes = PAV_BIT(PAV_DTYPE_FP8_E4M3FN) | PAV_BIT(PAV_DTYPE_FP8_E4M3FNUZ);
  d->v_layouts = PAV_BIT(PAV_V_LAYOUT_PLAIN) | PAV_BIT(PAV_V_LAYOUT_TRANS);
  d->scale_kinds = PAV_BIT(PAV_SCALE_NONE) | PAV_BIT(PAV_SCALE_PER_TENSOR) | PAV_BIT(PAV_SCALE_PER_TOKEN);
  d->num_block_sizes = 3;
  d->block_sizes[0] = 16, d->block_sizes[1] = 64, d->block_sizes[2] = 128;
  d->num_head_dims = 3;
  d->head_dims[0] = 64, d->head_dims[1] = 128, d->head_dims[2] = 256;
  d->num_gqa_ratios = 16;
  for (int g = 1; g <= 16; ++g) d->gqa_ratios[g - 1] = g;
  d->min_q_len = 1;
  d->max_q_len = 4;
  d->split = PAV_SPLIT_SELF;
  d->writes_lse = 1;
  d->thread_safe = 1;
  d->q_quant = PAV_Q_QUANT_NONE;
  d->p_round = PAV_P_ROUND_NONE;
  d->partial_dtype = PAV_DTYPE_NONE;
  return PAV_OK;
}

PAV_KERNEL_EXPORT int pav_kernel_decode(void*, const pav_decode_args* a, char*, size_t) {
  zero(a->out, 0.0f);
  zero(a->lse, -INFINITY);
  return PAV_OK;
}
}
