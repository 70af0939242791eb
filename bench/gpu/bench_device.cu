// SPDX-License-Identifier: Apache-2.0
// Device helpers of the GPU benchmark (see bench_device.hpp). CUDA only: the
// benchmark is built in the nvidia preset alone.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "bench/gpu/bench_device.hpp"

namespace pav::bench {
namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }
}
cudaStream_t as_stream(StreamHandle s) { return static_cast<cudaStream_t>(s); }

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_fp8_kernel(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint8_t c = uint8_t(mix64(seed ^ (i * 0x2545f4914f6cdd1dull)));
    if ((c & 0x7f) == 0x7f) c ^= 1;  // 0x7f / 0xff are NaN in e4m3fn
    p[i] = c;
  }
}

__global__ void fill_bf16_kernel(uint16_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint64_t r = mix64(seed ^ (i * 0x2545f4914f6cdd1dull));
    const float f = float(r >> 40) / float(1ull << 24) * 2.0f - 1.0f;  // [-1, 1)
    const uint32_t bits = __float_as_uint(f);
    p[i] = uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);  // round to nearest even
  }
}

// Reads every 16 bytes once, four loads in flight per thread; the sink store
// depends on all of them so nothing is optimised away.
__global__ void __launch_bounds__(512) read_kernel(const uint4* __restrict__ p, size_t n, uint4* sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
                d = __ldcs(p + i + 3 * stride);
    acc.x ^= a.x ^ b.x ^ c.x ^ d.x;
    acc.y ^= a.y ^ b.y ^ c.y ^ d.y;
    acc.z ^= a.z ^ b.z ^ c.z ^ d.z;
    acc.w ^= a.w ^ b.w ^ c.w ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc.x ^= a.x;
    acc.y ^= a.y;
    acc.z ^= a.z;
    acc.w ^= a.w;
  }
  if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u && acc.z == acc.w) sink[0] = acc;
}

}  // namespace

// ---- timing ------------------------------------------------------------------------------
EventTimer::EventTimer() {
  cudaEvent_t a, b;
  ck(cudaEventCreate(&a), "cudaEventCreate");
  ck(cudaEventCreate(&b), "cudaEventCreate");
  start_ = a;
  stop_ = b;
}
EventTimer::~EventTimer() {
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}
void EventTimer::start(StreamHandle s) { ck(cudaEventRecord(static_cast<cudaEvent_t>(start_), as_stream(s)), "event record"); }
void EventTimer::stop(StreamHandle s) { ck(cudaEventRecord(static_cast<cudaEvent_t>(stop_), as_stream(s)), "event record"); }
double EventTimer::ms() const {
  ck(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "event synchronize");
  float ms = 0;
  ck(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)), "event elapsed");
  return ms;
}

L2Flusher::L2Flusher(size_t bytes) : bytes_(bytes) { ck(cudaMalloc(&buf_, bytes), "L2Flusher allocation"); }
L2Flusher::~L2Flusher() { (void)cudaFree(buf_); }
void L2Flusher::flush(StreamHandle s) {
  ++round_;
  ck(cudaMemsetAsync(buf_, int(round_ & 0xff), bytes_, as_stream(s)), "L2 flush");
}

DeviceInfo device_info() {
  int dev = 0;
  ck(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp p{};
  ck(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  DeviceInfo d;
  d.name = p.name;
  d.sms = p.multiProcessorCount;
  d.l2_bytes = size_t(p.l2CacheSize);
  d.bus_bits = p.memoryBusWidth;
  (void)cudaDeviceGetAttribute(&d.sm_clock_khz, cudaDevAttrClockRate, dev);
  (void)cudaDeviceGetAttribute(&d.mem_clock_khz, cudaDevAttrMemoryClockRate, dev);
  return d;
}

double read_bandwidth_gbps(size_t bytes, int iters, std::vector<double>* samples_ms, StreamHandle s) {
  const size_t n = bytes / 16;
  void* buf = nullptr;
  void* sink = nullptr;
  ck(cudaMalloc(&buf, n * 16), "bandwidth buffer");
  ck(cudaMalloc(&sink, 16), "bandwidth sink");
  fill_fp8(buf, n * 16, 7, s);
  const DeviceInfo d = device_info();
  L2Flusher flusher(std::max<size_t>(d.l2_bytes * 4, size_t(256) << 20));
  EventTimer timer;
  std::vector<double> ms;
  const unsigned grid = unsigned(d.sms) * 4;
  for (int i = -2; i < iters; ++i) {
    flusher.flush(s);
    timer.start(s);
    read_kernel<<<grid, 512, 0, as_stream(s)>>>(static_cast<const uint4*>(buf), n, static_cast<uint4*>(sink));
    timer.stop(s);
    ck(cudaGetLastError(), "read_kernel");
    const double t = timer.ms();
    if (i >= 0) ms.push_back(t);
  }
  (void)cudaFree(buf);
  (void)cudaFree(sink);
  if (samples_ms) *samples_ms = ms;
  std::sort(ms.begin(), ms.end());
  return double(n * 16) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

void fill_fp8(void* dst, size_t bytes, uint64_t seed, StreamHandle s) {
  fill_fp8_kernel<<<2048, 256, 0, as_stream(s)>>>(static_cast<uint8_t*>(dst), bytes, seed);
  ck(cudaGetLastError(), "fill_fp8");
}
void fill_bf16(void* dst, size_t count, uint64_t seed, StreamHandle s) {
  fill_bf16_kernel<<<1024, 256, 0, as_stream(s)>>>(static_cast<uint16_t*>(dst), count, seed);
  ck(cudaGetLastError(), "fill_bf16");
}

// ---- captured kernels ----------------------------------------------------------------------
CapturedKernels::CapturedKernels(const std::function<void(StreamHandle)>& enqueue, StreamHandle capture_stream) {
  cudaStream_t s = as_stream(capture_stream);
  ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  try {
    enqueue(capture_stream);
  } catch (...) {
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(s, &g);
    if (g) (void)cudaGraphDestroy(g);
    throw;
  }
  cudaGraph_t g = nullptr;
  ck(cudaStreamEndCapture(s, &g), "end capture");
  graph_ = g;
  size_t n = 0;
  ck(cudaGraphGetNodes(g, nullptr, &n), "graph nodes");
  std::vector<cudaGraphNode_t> nodes(n);
  ck(cudaGraphGetNodes(g, nodes.data(), &n), "graph nodes");
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    ck(cudaGraphNodeGetType(node, &type), "node type");
    if (type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams p{};
    ck(cudaGraphKernelNodeGetParams(node, &p), "kernel node params");
    KernelInfo k;
    const char* name = nullptr;
    if (cudaFuncGetName(&name, p.func) == cudaSuccess && name) k.name = name;
    (void)cudaGetLastError();
    k.grid = p.gridDim.x * p.gridDim.y * p.gridDim.z;
    k.block = p.blockDim.x * p.blockDim.y * p.blockDim.z;
    cudaFuncAttributes a{};
    if (cudaFuncGetAttributes(&a, p.func) == cudaSuccess) {
      k.regs = a.numRegs;
      k.static_smem = a.sharedSizeBytes;
      k.local_bytes = int(a.localSizeBytes);
    }
    (void)cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.blocks_per_sm, p.func, int(k.block), p.sharedMemBytes);
    (void)cudaGetLastError();
    nodes_.push_back(node);
    info_.push_back(k);
  }
}

CapturedKernels::~CapturedKernels() {
  if (graph_) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

void CapturedKernels::launch(size_t i, StreamHandle s) const {
  cudaKernelNodeParams p{};
  ck(cudaGraphKernelNodeGetParams(static_cast<cudaGraphNode_t>(nodes_.at(i)), &p), "kernel node params");
  ck(cudaLaunchKernel(p.func, p.gridDim, p.blockDim, p.kernelParams, p.sharedMemBytes, as_stream(s)),
     "captured kernel launch");
}

void device_synchronize() { ck(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
void check_last(const char* what) { ck(cudaGetLastError(), what); }

}  // namespace pav::bench
