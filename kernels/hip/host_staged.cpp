// SPDX-License-Identifier: Apache-2.0
#include "kernels/hip/host_staged.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/hip/gpu_backend.hpp"
#include "kernels/launch.hpp"

namespace pav::kernels::gpu {
namespace {

// Bytes a strided view spans from its data pointer (0 for an absent or empty view).
size_t span_bytes(const TensorView& t, const char* name) {
  if (t.data == nullptr || t.span() == 0) return 0;
  for (int i = 0; i < t.rank; ++i)
    if (t.stride[i] < 0)
      throw std::invalid_argument(std::string("host-staged GPU call: ") + name + " has a negative stride");
  return size_t(t.span()) * size_t(dtype_size(t.dtype));
}

// Device buffers reused across calls of one thread, grown on demand.
class Staging {
 public:
  // A device copy of `t` (same shape and strides, device pointer).
  TensorView stage(const TensorView& t, const char* name) {
    TensorView d = t;
    const size_t bytes = span_bytes(t, name);
    if (bytes == 0) return d;
    d.data = buffer(bytes);
    copy_to_device(d.data, t.data, bytes, stream_.get());
    return d;
  }
  void* buffer(size_t bytes) {
    if (next_ == pool_.size()) pool_.emplace_back();
    DeviceBuffer& b = pool_[next_++];
    if (b.bytes() < bytes) b = DeviceBuffer(bytes);
    return b.data();
  }
  // Copies a staged view back into its host view (waits for the stream).
  void fetch(const TensorView& host, const TensorView& dev, const char* name) {
    const size_t bytes = span_bytes(host, name);
    if (bytes != 0) copy_to_host(host.data, dev.data, bytes, stream_.get());
  }
  void begin() { next_ = 0; }
  StreamHandle stream() const { return stream_.get(); }

 private:
  Stream stream_;
  std::vector<DeviceBuffer> pool_;
  size_t next_ = 0;
};

Staging& staging() {
  thread_local std::unique_ptr<Staging> s;
  if (!s) s = std::make_unique<Staging>();
  s->begin();
  return *s;
}

struct Staged {
  DecodeCall call;
  Scratch scratch;
};

Staged stage_call(Staging& st, const DecodeCall& c, const Scratch& s) {
  Staged d{c, s};
  d.call.q = st.stage(c.q, "q");
  d.call.out = st.stage(c.out, "out");  // poisoned host output travels too
  d.call.k_cache = st.stage(c.k_cache, "k_cache");
  d.call.v_cache = st.stage(c.v_cache, "v_cache");
  d.call.block_tables = st.stage(c.block_tables, "block_tables");
  d.call.context_lens = st.stage(c.context_lens, "context_lens");
  d.call.k_scale = st.stage(c.k_scale, "k_scale");
  d.call.v_scale = st.stage(c.v_scale, "v_scale");
  d.scratch.partial = st.stage(s.partial, "scratch.partial");
  d.scratch.m = st.stage(s.m, "scratch.m");
  d.scratch.l = st.stage(s.l, "scratch.l");
  return d;
}

void fetch_results(Staging& st, const DecodeCall& c, const Scratch& s, const Staged& d) {
  st.fetch(s.partial, d.scratch.partial, "scratch.partial");
  st.fetch(s.m, d.scratch.m, "scratch.m");
  st.fetch(s.l, d.scratch.l, "scratch.l");
  st.fetch(c.out, d.call.out, "out");
}

void uniform_entry(const DecodeCall& call, const Scratch& scratch) {
  Staging& st = staging();
  const Staged d = stage_call(st, call, scratch);
  uniform_decode(d.call, d.scratch, st.stream());
  fetch_results(st, call, scratch, d);
}

DecodeResult planned_entry(const DecodeCall& call, const PlanView* plan, const Scratch& scratch) {
  if (plan == nullptr) {
    uniform_entry(call, scratch);
    return {};
  }
  Staging& st = staging();
  const Staged d = stage_call(st, call, scratch);
  PlanView dp = *plan;
  const size_t work_bytes = size_t(plan->capacity) * 4 * sizeof(int32_t);
  const size_t reduce_bytes = size_t(plan->num_seqs) * 2 * sizeof(int32_t);
  dp.work_info = static_cast<int32_t*>(st.buffer(work_bytes));
  dp.reduce_info = static_cast<int32_t*>(st.buffer(reduce_bytes));
  copy_to_device(dp.work_info, plan->work_info, work_bytes, st.stream());
  copy_to_device(dp.reduce_info, plan->reduce_info, reduce_bytes, st.stream());
  auto* status = static_cast<uint32_t*>(st.buffer(kStatusWords * sizeof(uint32_t)));
  planned_decode(d.call, dp, d.scratch, status, st.stream());
  const DecodeResult r = read_status(status, st.stream());
  fetch_results(st, call, scratch, d);
  return r;
}

}  // namespace

bool register_host_staged_backend() {
  if (!available()) return false;
  register_gpu_backend({&planned_entry, &uniform_entry});
  return true;
}

}  // namespace pav::kernels::gpu
