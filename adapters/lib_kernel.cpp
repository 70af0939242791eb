// SPDX-License-Identifier: Apache-2.0
#include "adapters/lib_kernel.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <fmt/core.h>

#include <atomic>
#include <filesystem>
#include <mutex>

#include "adapters/abi.hpp"
#include "adapters/worker_kernel.hpp"
#ifdef PAV_HAVE_GPU
#include "kernels/hip/gpu_backend.hpp"
#endif

namespace pav::adapters {

namespace {

struct Entries {
  pav_kernel_abi_version_fn abi_version = nullptr;
  pav_kernel_init_fn init = nullptr;
  pav_kernel_fini_fn fini = nullptr;
  pav_kernel_describe_fn describe = nullptr;
  pav_kernel_check_fn check = nullptr;
  pav_kernel_decode_fn decode = nullptr;
};

CallResult from_status(int rc, const char* message, const char* entry) {
  const std::string text = message[0] ? std::string(message) : std::string("(no message)");
  switch (rc) {
    case PAV_OK: return CallResult::success();
    case PAV_REJECT: return {Outcome::rejected, text};
    case PAV_STALE_PLAN: return {Outcome::stale_plan, text};
    case PAV_ERROR: return {Outcome::kernel_error, text};
    default: return {Outcome::kernel_error, fmt::format("{} returned {}, not a pav_status: {}", entry, rc, text)};
  }
}

#ifdef PAV_HAVE_GPU
// Device copies of a request's tensors for a memory = device kernel: inputs
// copied in (the NaN poison in out travels too), out and lse copied back.
class DeviceStage {
 public:
  explicit DeviceStage(const DecodeRequest& r) : host_(r), args_(abi::make_args(r, false)) {
    stage(r.call.q, args_.q);
    stage(r.call.out, args_.out);
    stage(r.call.k_cache, args_.k_cache);
    stage(r.call.v_cache, args_.v_cache);
    stage(r.call.block_tables, args_.block_tables);
    stage(r.call.context_lens, args_.context_lens);
    stage(r.call.k_scale, args_.k_scale);
    stage(r.call.v_scale, args_.v_scale);
    stage(r.lse, args_.lse);
    if (r.plan) {
      stage(kernels::TensorView::contiguous_of(r.plan->work_info, kernels::DType::i32, {r.plan->capacity, 4}),
            args_.work_info);
      stage(kernels::TensorView::contiguous_of(r.plan->reduce_info, kernels::DType::i32, {r.plan->num_seqs, 2}),
            args_.reduce_info);
    }
    args_.stream = stream_.get();
  }
  pav_decode_args& args() { return args_; }
  void copy_back() {
    stream_.synchronize();
    fetch(host_.call.out, args_.out);
    if (host_.lse.present()) fetch(host_.lse, args_.lse);
  }

 private:
  static size_t bytes_of(const kernels::TensorView& v) {
    return size_t(v.span()) * size_t(std::max(kernels::dtype_size(v.dtype), 1));
  }
  void stage(const kernels::TensorView& v, pav_tensor& t) {
    if (!v.present() || !v.data) return;
    buffers_.emplace_back(std::max<size_t>(bytes_of(v), 1));
    kernels::gpu::copy_to_device(buffers_.back().data(), v.data, bytes_of(v), stream_.get());
    t.data = buffers_.back().data();
  }
  void fetch(const kernels::TensorView& v, const pav_tensor& t) {
    kernels::gpu::copy_to_host(v.data, t.data, bytes_of(v), stream_.get());
  }
  const DecodeRequest& host_;
  kernels::gpu::Stream stream_;
  std::vector<kernels::gpu::DeviceBuffer> buffers_;
  pav_decode_args args_;
};
#endif

class LibKernel final : public KernelUnderTest {
 public:
  LibKernel(std::string path, void* handle, Entries e, void* instance, KernelDescription d, std::string spec)
      : path_(std::move(path)), handle_(handle), e_(e), instance_(instance), description_(std::move(d)),
        spec_(std::move(spec)) {}
  ~LibKernel() override {
    if (e_.fini) e_.fini(instance_);
    // The library stays loaded: a kernel's runtime (thread pools, device
    // contexts) may not survive being unloaded while the process runs on.
    (void)handle_;
  }
  const KernelDescription& description() const override { return description_; }
  std::string adapter() const override { return "lib"; }
  std::string spec() const override { return spec_; }

  CallResult check(const DecodeRequest& r) override {
    if (!e_.check) return {Outcome::kernel_error, "the library has no pav_kernel_check"};
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!description_.thread_safe) lock.lock();
    const pav_decode_args a = abi::make_args(r, /*for_check=*/true);
    char reason[abi::kMessageBytes] = {0};
    const int rc = e_.check(instance_, &a, reason, sizeof reason);
    if (rc == PAV_OK) return CallResult::success();
    if (rc == PAV_REJECT) return {Outcome::rejected, reason[0] ? reason : "(no reason given)"};
    return {Outcome::kernel_error, fmt::format("pav_kernel_check returned {} (expected PAV_OK or PAV_REJECT): {}", rc,
                                               reason[0] ? reason : "(no message)")};
  }

  CallResult decode(const DecodeRequest& r) override {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!description_.thread_safe) lock.lock();
    ++decode_calls_;
    char message[abi::kMessageBytes] = {0};
    if (description_.memory == Memory::device) {
#ifdef PAV_HAVE_GPU
      try {
        DeviceStage stage(r);
        const int rc = e_.decode(instance_, &stage.args(), message, sizeof message);
        stage.copy_back();
        return from_status(rc, message, "pav_kernel_decode");
      } catch (const kernels::gpu::Error& e) {
        return {Outcome::kernel_error, std::string("device error around the call: ") + e.what()};
      }
#else
      return {Outcome::kernel_error, "device memory kernels need a GPU build"};
#endif
    }
    const pav_decode_args a = abi::make_args(r, /*for_check=*/false);
    return from_status(e_.decode(instance_, &a, message, sizeof message), message, "pav_kernel_decode");
  }
  int64_t decode_calls() const override { return decode_calls_.load(); }

 private:
  std::string path_;
  void* handle_;
  Entries e_;
  void* instance_;
  KernelDescription description_;
  std::string spec_;
  std::mutex mu_;
  std::atomic<int64_t> decode_calls_{0};
};

template <class F>
F symbol(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

}  // namespace

std::unique_ptr<KernelUnderTest> open_lib_kernel(const std::string& path, const std::vector<std::string>& words,
                                                 const std::string& spec) {
  const std::string where = "lib:" + path;
  // dlopen searches the library path for a bare name; a file next to us is meant.
  std::string load = path;
  if (path.find('/') == std::string::npos && std::filesystem::exists(path)) load = "./" + path;
  if (!std::filesystem::exists(load) && path.find('/') != std::string::npos)
    throw KernelSpecError(where + ": no such file");
  void* h = dlopen(load.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* err = dlerror();
    throw KernelSpecError(where + ": cannot load: " + (err ? err : "unknown dlopen error"));
  }
  Entries e;
  e.abi_version = symbol<pav_kernel_abi_version_fn>(h, "pav_kernel_abi_version");
  e.describe = symbol<pav_kernel_describe_fn>(h, "pav_kernel_describe");
  e.decode = symbol<pav_kernel_decode_fn>(h, "pav_kernel_decode");
  e.init = symbol<pav_kernel_init_fn>(h, "pav_kernel_init");
  e.fini = symbol<pav_kernel_fini_fn>(h, "pav_kernel_fini");
  e.check = symbol<pav_kernel_check_fn>(h, "pav_kernel_check");
  for (auto [ptr, name] : {std::pair<const void*, const char*>{reinterpret_cast<const void*>(e.abi_version),
                                                               "pav_kernel_abi_version"},
                           {reinterpret_cast<const void*>(e.describe), "pav_kernel_describe"},
                           {reinterpret_cast<const void*>(e.decode), "pav_kernel_decode"}})
    if (!ptr)
      throw KernelSpecError(fmt::format(
          "{}: missing required symbol {} (export it with extern \"C\" and PAV_KERNEL_EXPORT; see "
          "include/pav/kernel_abi.h)",
          where, name));
  const uint32_t version = e.abi_version();
  if (version != PAV_KERNEL_ABI_VERSION)
    throw KernelSpecError(fmt::format("{}: kernel ABI version {}, this pav speaks version {}; rebuild the library "
                                      "against this pav's include/pav/kernel_abi.h",
                                      where, version, PAV_KERNEL_ABI_VERSION));
  if (!words.empty() && !e.init)
    throw KernelSpecError(fmt::format("{}: configuration words given ({}) but the library has no pav_kernel_init",
                                      where, words.front()));
  void* instance = nullptr;
  char message[abi::kMessageBytes] = {0};
  if (e.init) {
    std::vector<const char*> argv;
    for (const auto& w : words) argv.push_back(w.c_str());
    argv.push_back(nullptr);
    const int rc = e.init(int(words.size()), argv.data(), &instance, message, sizeof message);
    if (rc == PAV_UNAVAILABLE)
      throw KernelUnavailable(fmt::format("{}: the kernel cannot run on this machine: {}", where, message));
    if (rc != PAV_OK) throw KernelSpecError(fmt::format("{}: pav_kernel_init failed ({}): {}", where, rc, message));
  }
  pav_kernel_desc desc{};
  desc.struct_size = sizeof desc;
  desc.abi_version = PAV_KERNEL_ABI_VERSION;
  message[0] = 0;
  const int rc = e.describe(instance, &desc, message, sizeof message);
  if (rc != PAV_OK) {
    if (e.fini) e.fini(instance);
    throw KernelSpecError(fmt::format("{}: pav_kernel_describe failed ({}): {}", where, rc, message));
  }
  KernelDescription d;
  try {
    d = abi::from_abi(desc);
  } catch (const KernelSpecError& err) {
    if (e.fini) e.fini(instance);
    throw KernelSpecError(where + ": " + err.what());
  }
  d.has_check = e.check != nullptr;
#ifndef PAV_HAVE_GPU
  if (d.memory == Memory::device) {
    if (e.fini) e.fini(instance);
    throw KernelUnavailable(where + ": the kernel works on device memory; this pav build has no GPU support");
  }
#endif
  return std::make_unique<LibKernel>(path, h, e, instance, std::move(d), spec);
}

std::unique_ptr<KernelUnderTest> open_isolated_kernel(const std::string& spec, const OpenOptions& options) {
  std::string exe = options.self_exe;
  if (exe.empty()) {
    std::error_code ec;
    exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) throw KernelUnavailable("--isolate: cannot find the pav executable: " + ec.message());
  }
  const std::string command = shell_quote(exe) + " kernel-worker --kernel " + shell_quote(spec);
  return open_worker_kernel(command, spec, options, "lib (isolated)");
}

}  // namespace pav::adapters
