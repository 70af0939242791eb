// SPDX-License-Identifier: Apache-2.0
#pragma once
// Host API of the HIP backend (built by nvcc for NVIDIA or hipcc for AMD).
// Plain C++: no HIP or CUDA type appears here, so the launch layer, tools and
// tests include it from ordinary .cpp files. Streams travel as opaque handles.
//
// Like the CPU backend, the decode entry points trust their inputs: the launch
// layer validates a call before it gets here. They only refuse (with
// std::invalid_argument) geometry these kernels cannot run at all. Runtime
// failures throw gpu::Error carrying the runtime's message.
//
// Every entry point that takes a stream only enqueues work on it (no
// allocation, no host synchronisation), so refresh_plan, uniform_decode and
// planned_decode can be captured in a graph and replayed.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/call.hpp"
#include "kernels/planner.hpp"

namespace pav::kernels::gpu {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stream: cudaStream_t / hipStream_t behind a void*. nullptr is the default stream.
using StreamHandle = void*;

// ---- devices -----------------------------------------------------------------
// Number of usable devices; 0 (never an exception or a crash) when there is no
// driver, no device, or the driver is too old for this build.
int device_count() noexcept;
// True when at least one device is usable.
bool available() noexcept;
void set_device(int device);
int current_device();
int multiprocessor_count();  // of the current device
std::string device_name();   // of the current device
// True in an AMD (ROCm) build, false in an NVIDIA (CUDA) one.
bool amd_platform() noexcept;

// ---- memory --------------------------------------------------------------------
// Owns device memory; move-only. Allocation is the only call here that may not
// run during graph capture.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Copies enqueued on `stream`. copy_to_host waits for the stream to finish.
void copy_to_device(void* dst, const void* src, size_t bytes, StreamHandle stream = nullptr);
void copy_to_host(void* dst, const void* src, size_t bytes, StreamHandle stream = nullptr);
void copy_on_device(void* dst, const void* src, size_t bytes, StreamHandle stream = nullptr);
void fill_bytes(void* dst, uint8_t value, size_t bytes, StreamHandle stream = nullptr);
void synchronize(StreamHandle stream);
// Waits for all work on the current device, whatever stream (or other
// runtime in this process) enqueued it.
void synchronize_device();

// ---- streams and graphs ----------------------------------------------------------
class Stream {
 public:
  Stream();  // a non-blocking stream on the current device
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  StreamHandle get() const { return handle_; }
  void synchronize() const;

 private:
  StreamHandle handle_ = nullptr;
};

// An instantiated graph: what was enqueued on a stream between begin_capture
// and end_capture, replayable with launch().
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch(StreamHandle stream) const;
  bool valid() const { return exec_ != nullptr; }

 private:
  friend Graph end_capture(StreamHandle stream);
  void* graph_ = nullptr;
  void* exec_ = nullptr;
};
void begin_capture(StreamHandle stream);  // thread-local capture mode
Graph end_capture(StreamHandle stream);

// ---- the planner -------------------------------------------------------------------
// Rewrites a plan in place from device lengths, with one launch: work_info
// [capacity, 4] and reduce_info [num_seqs, 2], exactly what plan_fill() writes
// on the host (bit for bit, padding zeroed). num_seqs in 1..kMaxPlanBatch;
// capacity >= num_seqs as plan_capacity() gives; max_partitions >= 1.
void refresh_plan(const int32_t* dev_lens, int64_t num_seqs, int64_t max_partitions,
                  int64_t capacity, int32_t* dev_work, int32_t* dev_reduce, StreamHandle stream);

// The balanced policy's refresh (kernels/planner_balanced.hpp), one launch, in
// place: exactly what WorkPlan::refresh writes for a balanced plan of these
// parameters. capacity >= num_seqs as balanced_capacity() gives; task_budget =
// balanced_task_budget(workgroup_budget, Hkv) >= 1; split_cost >= 0;
// min_chunk >= 1.
void refresh_balanced_plan(const int32_t* dev_lens, int64_t num_seqs, int64_t max_partitions, int64_t capacity,
                           int64_t task_budget, int64_t split_cost, int64_t min_chunk, int32_t* dev_work,
                           int32_t* dev_reduce, StreamHandle stream);

// The refresh of a plan of resolved params (resolve()), whichever its policy;
// capacity must be plan_capacity_of(resolved).
void refresh_plan(const int32_t* dev_lens, const PlanParams& resolved, int64_t capacity, int32_t* dev_work,
                  int32_t* dev_reduce, StreamHandle stream);

// ---- decode ----------------------------------------------------------------------------
// All tensors of `call` and `scratch` are device memory. Numerics are the CPU
// backend's (kernels/cpu/decode_cpu.hpp): per-row fp8 Q, 256-token tiles with
// an online max, P quantized per tile, normalized partials in the partial dtype.
// Supported here: head_dim a multiple of 16 in 64..1024; rows (q_len * G) any.

// Which attention body a decode launched (chosen per call from the arch the
// backend was built for and the call's shapes and dtypes):
//   matrix       tensor-core products (NVIDIA: fp8 e4m3fn compute and cache,
//                head_dim 64/128/256, per-tensor or no V scale, aligned caches);
//   fast_scalar  fp32 FMA products, K/V straight to registers (fp8 compute,
//                head_dim 64/128/256, aligned caches);
//   general      any other call (every head_dim, bf16 compute, any alignment).
// All three compute the same numerics (see uniform_decode).
enum class AttentionBody : uint8_t { matrix, fast_scalar, general };
const char* to_string(AttentionBody b);

// What a decode call enqueued: the launch record.
struct LaunchRecord {
  AttentionBody body = AttentionBody::general;
  int64_t attention_blocks = 0;  // one per (partition, KV head)
  bool reduce = false;           // a reduce was launched (not for a one-split uniform call)
};

// Uniform split: splits = uniform_splits(call) (kernels/split_rules.hpp); with one split the output
// is written directly and scratch is not touched.
LaunchRecord uniform_decode(const DecodeCall& call, const Scratch& scratch, StreamHandle stream);

// Status words a planned decode writes (device memory, kStatusWords uint32):
//   [0] stale flag (a DecodeStatus value), [1] stale tasks, [2] stale rows,
//   [3] stale sequences (whose output is NaN).
// The counts follow the CPU backend's rules exactly: a task (non-padding slot
// below the plan's active count) is stale when its recorded length differs
// from the live one or names no sequence; a row is stale when its count is 0
// and its live length is > 0.
inline constexpr int kStatusWords = 4;

// Planned split over the plan's tasks, then the reduce (bounded variant for
// plan.max_partitions <= 64). A stale sequence is not attended and its output
// is NaN; whether a sequence is stale is judged over its own task range, which
// for a plan that passes check_plan_structure() is the CPU backend's rule.
// dev_status: kStatusWords uint32 of device memory, rewritten by every call.
LaunchRecord planned_decode(const DecodeCall& call, const PlanView& plan, const Scratch& scratch,
                            uint32_t* dev_status, StreamHandle stream);

// Reads the status words back (waits for the stream) as a DecodeResult.
DecodeResult read_status(const uint32_t* dev_status, StreamHandle stream);
DecodeResult status_from_words(const uint32_t words[kStatusWords]);

}  // namespace pav::kernels::gpu
