// Device helpers of the GPU benchmark (see bench_device.hpp). CUDA only: the
// benchmark is built in the nvidia preset alone.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "bench/gpu/bench_device.hpp"
#include "kernels/planner_balanced.hpp"

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

// ---- balanced refresh ----------------------------------------------------------------
constexpr int kRefreshMaxThreads = 1024;
constexpr int kRefreshWarps = kRefreshMaxThreads / 32;
constexpr int kSeqsPerThread = (kernels::kMaxPlanBatch + kRefreshMaxThreads - 1) / kRefreshMaxThreads;

// Block-wide sum / max; every thread gets the result. red holds kRefreshWarps + 1.
template <bool kMax>
__device__ int64_t block_reduce(int64_t v, int64_t* red) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int o = 16; o > 0; o >>= 1) {
    const int64_t u = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? (u > v ? u : v) : v + u;
  }
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int64_t w = lane < warps ? red[lane] : 0;
    for (int o = 16; o > 0; o >>= 1) {
      const int64_t u = __shfl_xor_sync(0xffffffffu, w, o);
      w = kMax ? (u > w ? u : w) : w + u;
    }
    if (lane == 0) red[kRefreshWarps] = w;
  }
  __syncthreads();
  const int64_t out = red[kRefreshWarps];
  __syncthreads();  // red is reused by the next reduction
  return out;
}

// Exclusive prefix sum over the block in thread order; *total gets the sum.
__device__ int64_t block_exclusive_scan(int64_t v, int64_t* red, int64_t* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int64_t inc = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t u = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += u;
  }
  if (lane == 31) red[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    const int64_t w = lane < warps ? red[lane] : 0;
    int64_t winc = w;
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t u = __shfl_up_sync(0xffffffffu, winc, o);
      if (lane >= o) winc += u;
    }
    if (lane < warps) red[lane] = winc - w;  // exclusive prefix of the warp totals
    if (lane == warps - 1) red[kRefreshWarps] = winc;
  }
  __syncthreads();
  const int64_t out = red[warp] + inc - v;
  *total = red[kRefreshWarps];
  __syncthreads();
  return out;
}

__global__ void __launch_bounds__(kRefreshMaxThreads)
balanced_refresh_kernel(const int32_t* __restrict__ lens, int num_seqs, int64_t max_partitions, int64_t capacity,
                        int64_t task_budget, int64_t split_cost, int64_t min_chunk, int32_t* __restrict__ work,
                        int32_t* __restrict__ reduce) {
  using namespace kernels;
  __shared__ int64_t red[kRefreshWarps + 1];
  __shared__ int32_t s_tiles[kernels::kMaxPlanBatch], s_most[kernels::kMaxPlanBatch];
  __shared__ int s_fits[kRefreshWarps];
  const int t = threadIdx.x;
  // Thread t owns the contiguous sequences [b0, b1): prefix order is kept.
  const int per = (num_seqs + int(blockDim.x) - 1) / int(blockDim.x);
  const int b0 = min(t * per, num_seqs), b1 = min(b0 + per, num_seqs);
  int64_t tiles[kSeqsPerThread], most[kSeqsPerThread];
  int64_t my_tiles = 0, my_nonempty = 0, my_max = 0;
#pragma unroll
  for (int k = 0; k < kSeqsPerThread; ++k) {
    tiles[k] = b0 + k < b1 ? plan_tiles(lens[b0 + k]) : 0;
    most[k] = balanced_max_count(tiles[k], max_partitions, min_chunk);
    my_tiles += tiles[k];
    my_nonempty += tiles[k] > 0 ? 1 : 0;
    my_max = max64(my_max, tiles[k]);
  }
  const int64_t sum_tiles = block_reduce<false>(my_tiles, red);
  const int64_t nonempty = block_reduce<false>(my_nonempty, red);
  const int64_t max_tiles = block_reduce<true>(my_max, red);
  const int64_t limit = balanced_task_limit(capacity, nonempty, task_budget);
  for (int k = 0; k < kSeqsPerThread; ++k)
    if (b0 + k < b1) {
      s_tiles[b0 + k] = int32_t(tiles[k]);  // <= ceil(INT32_MAX / 256) tiles
      s_most[b0 + k] = int32_t(most[k]);    // <= max_partitions
    }
  __syncthreads();
  // The smallest target in [lo, hi] whose tasks fit `lim` (hi always fits).
  // Each round every warp tests one target of an even spread over the range
  // (warp 0 tests lo), so a round narrows it about warps-fold where a binary
  // step halves it. The task count only falls as the target rises, so this
  // finds the host's binary search's answer. Every thread ends with the same lo.
  const int lane = t % 32, warp = t / 32, warps = int(blockDim.x) / 32;
  auto run = [&](BalancedSearch search, int64_t lim) {
    int64_t lo = search.lo, hi = search.hi;
    while (lo < hi) {
      const int64_t span = hi - lo;
      const int64_t probe = lo + span * warp / warps;
      int64_t mine = 0;
      for (int b = lane; b < num_seqs; b += 32) mine += balanced_count_for(s_tiles[b], probe, split_cost, s_most[b]);
      for (int o = 16; o > 0; o >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, o);
      if (lane == 0) s_fits[warp] = mine <= lim ? 1 : 0;
      __syncthreads();
      int first = warps;  // the first warp whose target fits
      for (int w = 0; w < warps; ++w)
        if (s_fits[w]) {
          first = w;
          break;
        }
      const int64_t next_hi = first < warps ? lo + span * first / warps : hi;
      const int64_t next_lo = first == 0 ? lo : lo + span * (first - 1) / warps + 1;
      __syncthreads();  // s_fits is rewritten by the next round
      lo = next_lo;
      hi = next_hi;
    }
    return lo;
  };
  int64_t target = run(balanced_search_init(sum_tiles, max_tiles, nonempty, limit), limit);
  if (capacity > limit && balanced_use_second_wave(target, sum_tiles, task_budget))
    target = run(balanced_second_wave_search_init(sum_tiles, target, nonempty, task_budget), capacity);
  const bool split = target + split_cost < max_tiles;
  int64_t count[kSeqsPerThread];
  int64_t my_count = 0;
#pragma unroll
  for (int k = 0; k < kSeqsPerThread; ++k) {
    count[k] = split ? balanced_count_for(tiles[k], target, split_cost, most[k]) : (tiles[k] > 0 ? 1 : 0);
    my_count += count[k];
  }
  int64_t all_tasks = 0;
  int64_t first = block_exclusive_scan(my_count, red, &all_tasks);
  // Each sequence's first task, in shared memory (s_most is free now), so the
  // task rows can be written one per thread: a long request's tasks written by
  // its own thread alone would serialize the refresh.
  int32_t* s_first = s_most;
#pragma unroll
  for (int k = 0; k < kSeqsPerThread; ++k) {
    const int b = b0 + k;
    if (b >= b1) break;
    reduce[2 * b] = int32_t(first);
    reduce[2 * b + 1] = int32_t(count[k]);
    s_first[b] = int32_t(first);
    first += count[k];
  }
  __syncthreads();
  for (int64_t i = t; i < all_tasks; i += blockDim.x) {
    // The task's sequence: the last b whose first task is <= i (sequences with
    // no task share the next one's first, so the last of equals owns it).
    int lo = 0, hi = num_seqs - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (s_first[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int64_t end = lo + 1 < num_seqs ? s_first[lo + 1] : all_tasks;
    plan_task(work + 4 * i, int32_t(lo), i - s_first[lo], s_tiles[lo], end - s_first[lo], lens[lo]);
  }
  for (int64_t i = all_tasks * 4 + t; i < capacity * 4; i += blockDim.x) work[i] = 0;
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

void balanced_refresh(const int32_t* dev_lens, int64_t num_seqs, int64_t max_partitions, int64_t capacity,
                      int64_t task_budget, int64_t split_cost, int64_t min_chunk, int32_t* dev_work,
                      int32_t* dev_reduce, StreamHandle s) {
  if (num_seqs < 1 || num_seqs > kernels::kMaxPlanBatch) throw std::invalid_argument("balanced_refresh: num_seqs");
  if (capacity < num_seqs || max_partitions < 1 || min_chunk < 1 || split_cost < 0 || task_budget < 1)
    throw std::invalid_argument("balanced_refresh: parameters");
  // As many whole warps as sequences (up to 1024), and at least 16: each warp
  // tests one target per round of the search.
  const int threads = int(std::min<int64_t>(kRefreshMaxThreads, std::max<int64_t>(512, (num_seqs + 31) / 32 * 32)));
  balanced_refresh_kernel<<<1, threads, 0, as_stream(s)>>>(dev_lens, int(num_seqs), max_partitions, capacity,
                                                            task_budget, split_cost, min_chunk, dev_work, dev_reduce);
  ck(cudaGetLastError(), "balanced_refresh");
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
