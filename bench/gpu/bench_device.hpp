// SPDX-License-Identifier: Apache-2.0
#pragma once
// Device helpers of the GPU benchmark (bench_device.cu, compiled as CUDA):
// event timing, L2 flush, a read-bandwidth probe, random fills, and
// per-kernel replay of what a host-API call enqueues. Plain C++ here so
// gpu_bench.cpp stays an ordinary C++ file.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pav::bench {

using StreamHandle = void*;

// Two events on one stream; ms() waits for the stop event.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(StreamHandle s);
  void stop(StreamHandle s);
  double ms() const;

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// Writes `bytes` (>= 4x the L2) so no earlier data stays cached.
class L2Flusher {
 public:
  explicit L2Flusher(size_t bytes);
  ~L2Flusher();
  void flush(StreamHandle s);

 private:
  void* buf_ = nullptr;
  size_t bytes_ = 0;
  uint32_t round_ = 0;
};

struct DeviceInfo {
  std::string name;
  int sms = 0;
  size_t l2_bytes = 0;
  int sm_clock_khz = 0, mem_clock_khz = 0, bus_bits = 0;
};
DeviceInfo device_info();

// Median read bandwidth (GB/s, 1e9 bytes) of a 16-byte-load kernel over a
// `bytes` buffer, L2 flushed before each of `iters` runs. Also fills *samples.
double read_bandwidth_gbps(size_t bytes, int iters, std::vector<double>* samples_ms, StreamHandle s);

// Random finite fp8 e4m3fn codes (0x7f / 0xff avoided) and bf16 in [-1, 1).
void fill_fp8(void* dst, size_t bytes, uint64_t seed, StreamHandle s);
void fill_bf16(void* dst, size_t count, uint64_t seed, StreamHandle s);

// What `enqueue` puts on a stream, captured once; each kernel can then be
// launched on its own (for per-kernel timing) with the captured arguments.
struct KernelInfo {
  std::string name;
  unsigned grid = 0, block = 0;
  int regs = 0;
  size_t static_smem = 0;
  int local_bytes = 0;
  int blocks_per_sm = 0;  // occupancy the runtime computes for this launch
};
class CapturedKernels {
 public:
  CapturedKernels(const std::function<void(StreamHandle)>& enqueue, StreamHandle capture_stream);
  ~CapturedKernels();
  CapturedKernels(const CapturedKernels&) = delete;
  CapturedKernels& operator=(const CapturedKernels&) = delete;
  size_t size() const { return info_.size(); }
  const KernelInfo& info(size_t i) const { return info_[i]; }
  void launch(size_t i, StreamHandle s) const;

 private:
  void* graph_ = nullptr;
  std::vector<void*> nodes_;
  std::vector<KernelInfo> info_;
};

void device_synchronize();
void check_last(const char* what);  // throws on a pending device error

}  // namespace pav::bench
