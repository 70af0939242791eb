// SPDX-License-Identifier: Apache-2.0
#include "adapters/device_copies.hpp"

#ifdef PAV_HAVE_GPU
#include <algorithm>

namespace pav::adapters {

size_t DeviceCopies::bytes_of(const kernels::TensorView& v) {
  return size_t(v.span()) * size_t(std::max(kernels::dtype_size(v.dtype), 1));
}

void* DeviceCopies::stage(const kernels::TensorView& v) {
  if (!v.present() || !v.data) return nullptr;
  buffers_.emplace_back(std::max<size_t>(bytes_of(v), 1));
  kernels::gpu::copy_to_device(buffers_.back().data(), v.data, bytes_of(v), stream_.get());
  return buffers_.back().data();
}

void DeviceCopies::fetch(const kernels::TensorView& v, const void* dev) {
  kernels::gpu::copy_to_host(v.data, dev, bytes_of(v), stream_.get());
}

void DeviceCopies::wait_for_device() { kernels::gpu::synchronize_device(); }

bool DeviceCopies::usable() noexcept { return kernels::gpu::available(); }

int DeviceCopies::device() { return kernels::gpu::current_device(); }

bool DeviceCopies::rocm() { return kernels::gpu::amd_platform(); }

}  // namespace pav::adapters
#endif
