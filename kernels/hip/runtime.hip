// SPDX-License-Identifier: Apache-2.0
// Devices, memory, streams and graphs of the host API (gpu_backend.hpp).
// device_common.hpp first: on AMD the runtime header must precede <cstring>.
#include "kernels/hip/device_common.hpp"
#include "kernels/hip/gpu_backend.hpp"

namespace pav::kernels::gpu {

void check(hipError_t e, const char* what) {
  if (e != hipSuccess) {
    // Clear a sticky launch error so the next call reports its own.
    (void)hipGetLastError();
    throw Error(std::string(what) + ": " + hipGetErrorString(e));
  }
}

int device_count() noexcept {
  int n = 0;
  // No driver, no device or an old driver all come back as an error code here.
  if (hipGetDeviceCount(&n) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return n > 0 ? n : 0;
}

bool available() noexcept { return device_count() > 0; }

void set_device(int device) { check(hipSetDevice(device), "set_device"); }

int current_device() {
  int d = 0;
  check(hipGetDevice(&d), "current_device");
  return d;
}

int multiprocessor_count() {
  int n = 0;
  check(hipDeviceGetAttribute(&n, hipDeviceAttributeMultiprocessorCount, current_device()),
        "multiprocessor_count");
  return n;
}

std::string device_name() {
#if defined(PAV_HIP_NVIDIA)
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, current_device()), "device_name");
#else
  hipDeviceProp_t p{};
  check(hipGetDeviceProperties(&p, current_device()), "device_name");
#endif
  return p.name;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) check(hipMalloc(&ptr_, bytes), "DeviceBuffer allocation");
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)hipFree(ptr_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) (void)hipFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

static hipStream_t as_stream(StreamHandle s) { return static_cast<hipStream_t>(s); }

void copy_to_device(void* dst, const void* src, size_t bytes, StreamHandle stream) {
  if (bytes == 0) return;
  check(hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, as_stream(stream)), "copy_to_device");
}
void copy_to_host(void* dst, const void* src, size_t bytes, StreamHandle stream) {
  if (bytes > 0)
    check(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, as_stream(stream)), "copy_to_host");
  check(hipStreamSynchronize(as_stream(stream)), "copy_to_host (synchronize)");
}
void copy_on_device(void* dst, const void* src, size_t bytes, StreamHandle stream) {
  if (bytes == 0) return;
  check(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, as_stream(stream)), "copy_on_device");
}
void fill_bytes(void* dst, uint8_t value, size_t bytes, StreamHandle stream) {
  if (bytes == 0) return;
  check(hipMemsetAsync(dst, value, bytes, as_stream(stream)), "fill_bytes");
}
void synchronize(StreamHandle stream) { check(hipStreamSynchronize(as_stream(stream)), "synchronize"); }
void synchronize_device() { check(hipDeviceSynchronize(), "synchronize_device"); }

bool amd_platform() noexcept {
#if defined(PAV_HIP_AMD)
  return true;
#else
  return false;
#endif
}

Stream::Stream() {
  hipStream_t s = nullptr;
  check(hipStreamCreateWithFlags(&s, hipStreamNonBlocking), "Stream");
  handle_ = s;
}
Stream::~Stream() {
  if (handle_) (void)hipStreamDestroy(as_stream(handle_));
}
void Stream::synchronize() const { gpu::synchronize(handle_); }

Graph::~Graph() {
  if (exec_) (void)hipGraphExecDestroy(static_cast<hipGraphExec_t>(exec_));
  if (graph_) (void)hipGraphDestroy(static_cast<hipGraph_t>(graph_));
}
Graph::Graph(Graph&& o) noexcept : graph_(o.graph_), exec_(o.exec_) {
  o.graph_ = nullptr;
  o.exec_ = nullptr;
}
Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    this->~Graph();
    graph_ = o.graph_;
    exec_ = o.exec_;
    o.graph_ = nullptr;
    o.exec_ = nullptr;
  }
  return *this;
}
void Graph::launch(StreamHandle stream) const {
  if (!exec_) throw Error("Graph::launch: empty graph");
  check(hipGraphLaunch(static_cast<hipGraphExec_t>(exec_), as_stream(stream)), "Graph::launch");
}

void begin_capture(StreamHandle stream) {
  check(hipStreamBeginCapture(as_stream(stream), hipStreamCaptureModeThreadLocal), "begin_capture");
}

Graph end_capture(StreamHandle stream) {
  hipGraph_t g = nullptr;
  check(hipStreamEndCapture(as_stream(stream), &g), "end_capture");
  Graph out;
  out.graph_ = g;
  hipGraphExec_t e = nullptr;
  check(pav_graph_instantiate(&e, g), "graph instantiate");
  out.exec_ = e;
  return out;
}

}  // namespace pav::kernels::gpu
