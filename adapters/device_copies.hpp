// SPDX-License-Identifier: Apache-2.0
#pragma once
// Device copies of a call's tensors, for a kernel that works on device memory
// (memory = device): each host view copied in on one stream of pav's, and the
// outputs copied back after the call. Used by the lib: adapter (the ABI's
// device pointers) and by in-process kernels (DLPack tensors). Only in a build
// with the HIP backend.
#ifdef PAV_HAVE_GPU
#include <cstddef>
#include <vector>

#include "kernels/hip/gpu_backend.hpp"
#include "kernels/types.hpp"

namespace pav::adapters {

class DeviceCopies {
 public:
  DeviceCopies() = default;
  DeviceCopies(const DeviceCopies&) = delete;
  DeviceCopies& operator=(const DeviceCopies&) = delete;

  // Bytes a view spans (its span times its element size).
  static size_t bytes_of(const kernels::TensorView& v);
  // Copies v's span to new device memory (enqueued on the stream); the device
  // address of its first element, or nullptr when v is absent.
  void* stage(const kernels::TensorView& v);
  // Copies a staged view's span back from dev into v's own memory; waits.
  void fetch(const kernels::TensorView& v, const void* dev);
  kernels::gpu::StreamHandle stream() const { return stream_.get(); }
  void synchronize() const { stream_.synchronize(); }
  // Waits for every stream of the current device: work a kernel enqueued
  // through its own runtime (a Python kernel's framework) is done after it.
  static void wait_for_device();
  // The current device's ordinal and whether it is an AMD one (ROCm) rather
  // than an NVIDIA one (CUDA): where DLPack tensors over the copies live.
  static int device();
  // True when a device is usable here (a driver and at least one device).
  static bool usable() noexcept;
  static bool rocm();

 private:
  kernels::gpu::Stream stream_;
  std::vector<kernels::gpu::DeviceBuffer> buffers_;
};

}  // namespace pav::adapters
#endif
