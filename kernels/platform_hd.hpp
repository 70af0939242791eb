// SPDX-License-Identifier: Apache-2.0
#pragma once
// PAV_HD marks code shared by the host and the GPU kernels (planner arithmetic,
// codecs, partition maths), so each rule has one source for both backends.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define PAV_HD __host__ __device__
#define PAV_DEVICE_COMPILE 1
#else
#define PAV_HD
#endif
