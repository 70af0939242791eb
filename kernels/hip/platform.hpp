// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one platform header of the HIP backend. Kernel sources are HIP C++:
// - built by hipcc for AMD it includes hip/hip_runtime.h;
// - built by nvcc for NVIDIA (CUDA 13; the Debian HIP headers are too old for
//   it) it maps exactly the HIP runtime names pav uses onto CUDA.
// Only .hip sources include this header; the host API (gpu_backend.hpp) has no
// HIP types, so tests and tools are plain C++.
//
// Warp width is the compile-time constant kWarpSize: 64 on CDNA (gfx90a,
// gfx94x are wave64), 32 on NVIDIA. Kernels size warp-level steps by it and
// never assume either value.

#if defined(__HIP__) || defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)

#include <hip/hip_runtime.h>
#define PAV_HIP_AMD 1
#define PAV_WARP_SIZE 64

// HIP 5.2 has no *_sync shuffles; every lane of the wavefront takes part.
#define PAV_SHFL_XOR(v, mask) __shfl_xor((v), (mask))
#define PAV_SHFL_UP(v, delta) __shfl_up((v), (delta))
#define PAV_SHFL(v, lane) __shfl((v), (lane))
// Lanes whose predicate holds, as a bit mask (bit i = lane i).
#define PAV_BALLOT(pred) static_cast<unsigned long long>(__ballot(pred))
// Orders shared-memory accesses among the lanes of one wavefront.
#define PAV_SYNC_WARP() __builtin_amdgcn_wave_barrier()

inline hipError_t pav_graph_instantiate(hipGraphExec_t* exec, hipGraph_t graph) {
  return hipGraphInstantiate(exec, graph, nullptr, nullptr, 0);
}

#elif defined(__CUDACC__)

#include <cuda_runtime.h>
#define PAV_HIP_NVIDIA 1
#define PAV_WARP_SIZE 32

#define PAV_SHFL_XOR(v, mask) __shfl_xor_sync(0xffffffffu, (v), (mask))
#define PAV_SHFL_UP(v, delta) __shfl_up_sync(0xffffffffu, (v), (delta))
#define PAV_SHFL(v, lane) __shfl_sync(0xffffffffu, (v), (lane))
#define PAV_BALLOT(pred) static_cast<unsigned long long>(__ballot_sync(0xffffffffu, (pred)))
// Orders shared-memory accesses among the lanes of one warp (independent
// thread scheduling: a shuffle is not a memory barrier).
#define PAV_SYNC_WARP() __syncwarp()

// The HIP runtime names pav uses, and nothing else.
using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipStreamCaptureStatus = cudaStreamCaptureStatus;
#define hipSuccess cudaSuccess
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamCaptureStatusActive cudaStreamCaptureStatusActive
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemsetAsync cudaMemsetAsync
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamIsCapturing cudaStreamIsCapturing
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy

inline hipError_t pav_graph_instantiate(hipGraphExec_t* exec, hipGraph_t graph) {
  return cudaGraphInstantiate(exec, graph, 0);
}

#else
#error "kernels/hip/platform.hpp is for HIP sources built by hipcc or nvcc"
#endif

namespace pav::kernels::gpu {
inline constexpr int kWarpSize = PAV_WARP_SIZE;
}  // namespace pav::kernels::gpu
