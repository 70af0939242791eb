// SPDX-License-Identifier: Apache-2.0
#include "adapters/lib_kernel.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "adapters/abi.hpp"
#include "adapters/worker_kernel.hpp"
#include "common/utf8_text.hpp"
#include "kernels/limits.hpp"
#ifdef PAV_HAVE_GPU
#include "adapters/device_copies.hpp"
#include "kernels/hip/gpu_backend.hpp"
#endif

namespace pav::adapters {

namespace {

// ---- a library that calls exit() ---------------------------------------------------
//
// In process, a library that calls exit() (from a constructor while it loads,
// or during any call, on any thread) would end pav with the library's status,
// 0 included: a gate that "passes". An on_exit handler, installed before the
// first library is loaded, turns every exit() into exit 3 with a message naming
// the library while pav is inside one of its entries or any instance of it is
// alive (its run is incomplete). _exit() cannot be caught: --isolate is the
// answer to a library that may do that.
namespace exit_guard {

std::atomic<int> g_inside{0};  // entries (dlopen included) in progress
std::atomic<int> g_alive{0};   // instances not yet finished
std::atomic<const char*> g_library{nullptr};  // the library last entered (a string that outlives the guard's use)
std::atomic<const char*> g_entry{nullptr};

void write_all(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= size_t(w);
  }
}

extern "C" void on_exit_handler(int status, void*) {
  const int inside = g_inside.load(), alive = g_alive.load();
  if (inside == 0 && alive == 0) return;
  const char* lib = g_library.load();
  const char* entry = g_entry.load();
  char code[16];
  std::snprintf(code, sizeof code, "%d", status);
  write_all("pav: could not run: the kernel library ");
  write_all(lib ? lib : "(unknown)");
  write_all(" called exit(");
  write_all(code);
  write_all(inside > 0 ? ") inside " : ") while its run was incomplete (last entry ");
  write_all(entry ? entry : "?");
  write_all(inside > 0 ? "" : ")");
  write_all("; no verdict (exit 3). --isolate runs a library in a child process\n");
  ::_exit(3);
}

void install() {
  static const bool installed = [] {
    ::on_exit(on_exit_handler, nullptr);
    return true;
  }();
  (void)installed;
}

// While alive, pav is inside an entry of the library.
class Inside {
 public:
  Inside(const std::string& library, const char* entry) {
    g_library.store(library.c_str());
    g_entry.store(entry);
    ++g_inside;
  }
  ~Inside() { --g_inside; }
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;
};

}  // namespace exit_guard

// ---- the file before dlopen ---------------------------------------------------------

// Why the file cannot be a shared library dlopen may map safely: not an ELF
// file of this machine, or headers or a loadable segment past the end of the
// file (a truncated copy: mapping it would end pav with SIGBUS). Empty when
// it looks whole.
std::string elf_problem(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fmt::format("cannot open: {}", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "not a regular file";
  }
  const uint64_t size = uint64_t(st.st_size);
  auto read_at = [&](void* dst, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, static_cast<char*>(dst) + got, n - got, off_t(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += size_t(r);
    }
    return true;
  };
  std::string why;
  Elf64_Ehdr eh{};
  if (size < sizeof eh || !read_at(&eh, sizeof eh, 0))
    why = fmt::format("{} bytes, shorter than an ELF header", size);
  else if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    why = "not an ELF file (bad magic)";
  else if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    why = "not a 64-bit little-endian ELF file";
  else if (eh.e_type != ET_DYN)
    why = fmt::format("ELF type {} is not a shared object", eh.e_type);
  else if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0)
    why = fmt::format("ELF program headers of {} bytes x {} (expected {}-byte entries)", eh.e_phentsize, eh.e_phnum,
                      sizeof(Elf64_Phdr));
  else if (eh.e_phoff > size || uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr) > size - eh.e_phoff)
    why = fmt::format("truncated: the program headers end past the file's {} bytes", size);
  else {
    for (int i = 0; i < eh.e_phnum && why.empty(); ++i) {
      Elf64_Phdr ph{};
      if (!read_at(&ph, sizeof ph, eh.e_phoff + uint64_t(i) * sizeof ph)) {
        why = "cannot read its program headers";
        break;
      }
      if (ph.p_type != PT_LOAD) continue;
      if (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
        why = fmt::format("truncated: loadable segment {} covers bytes {}..{}, the file has {}", i, ph.p_offset,
                          ph.p_offset + ph.p_filesz, size);
    }
  }
  ::close(fd);
  return why;
}

struct Entries {
  pav_kernel_abi_version_fn abi_version = nullptr;
  uint32_t version = PAV_KERNEL_ABI_VERSION;  // what the library reported
  pav_kernel_init_fn init = nullptr;
  pav_kernel_fini_fn fini = nullptr;
  pav_kernel_describe_fn describe = nullptr;
  pav_kernel_check_fn check = nullptr;
  pav_kernel_decode_fn decode = nullptr;
  pav_kernel_poison_scratch_fn poison_scratch = nullptr;
};

// A message buffer the library filled: read no further than its size (a
// library may leave it without a NUL), valid UTF-8, bounded.
std::string text_of(const char* buf, size_t size, const char* none = "(no message)") {
  const size_t n = ::strnlen(buf, size);
  if (n == 0) return none;
  return utf8_clean(std::string_view(buf, n), size_t(kernels::kMaxKernelMessageBytes));
}

CallResult from_status(int rc, const char* message, size_t size, const char* entry) {
  const std::string text = text_of(message, size);
  switch (rc) {
    case PAV_OK: return CallResult::success();
    case PAV_REJECT: return {Outcome::rejected, text};
    case PAV_STALE_PLAN: return {Outcome::stale_plan, text};
    case PAV_ERROR: return {Outcome::kernel_error, text};
    case PAV_UNAVAILABLE:
      return {Outcome::kernel_error, fmt::format("{} returned PAV_UNAVAILABLE, which only pav_kernel_init may: {}", entry, text)};
    default: return {Outcome::kernel_error, fmt::format("{} returned {}, not a pav_status: {}", entry, rc, text)};
  }
}

#ifdef PAV_HAVE_GPU
// Device copies of a request's tensors for a memory = device kernel: inputs
// copied in (the NaN poison in out travels too), out and lse copied back.
class DeviceStage {
 public:
  DeviceStage(const DecodeRequest& r, uint32_t version) : host_(r), args_(abi::make_args(r, false, version)) {
    stage(r.call.q, args_.q);
    stage(r.call.out, args_.out);
    if (r.call.kv_cache.present() && args_.kv_cache.rank > 0) {
      // One device copy of the combined tensor; K and V are its halves there too.
      stage(r.call.kv_cache, args_.kv_cache);
      const auto* base = static_cast<uint8_t*>(args_.kv_cache.data);
      args_.k_cache.data = args_.kv_cache.data;
      args_.v_cache.data = const_cast<uint8_t*>(base) + (static_cast<const uint8_t*>(r.call.v_cache.data) -
                                                          static_cast<const uint8_t*>(r.call.k_cache.data));
    } else {
      stage(r.call.k_cache, args_.k_cache);
      stage(r.call.v_cache, args_.v_cache);
    }
    stage(r.call.block_tables, args_.block_tables);
    if (args_.kv_indptr.rank > 0) {
      stage(r.call.kv_indptr, args_.kv_indptr);
      stage(r.call.kv_indices, args_.kv_indices);
      stage(r.call.kv_last_page_len, args_.kv_last_page_len);
    }
    stage(r.call.context_lens, args_.context_lens);
    stage(r.call.k_scale, args_.k_scale);
    stage(r.call.v_scale, args_.v_scale);
    stage(r.lse, args_.lse);
    stage(r.call.variant.sinks, args_.sinks);
    stage(r.call.variant.alibi_slopes, args_.alibi_slopes);
    if (r.plan) {
      stage(kernels::TensorView::contiguous_of(r.plan->work_info, kernels::DType::i32, {r.plan->capacity, 4}),
            args_.work_info);
      stage(kernels::TensorView::contiguous_of(r.plan->reduce_info, kernels::DType::i32, {r.plan->num_seqs, 2}),
            args_.reduce_info);
    }
    args_.stream = copies_.stream();
  }
  pav_decode_args& args() { return args_; }
  void copy_back() {
    copies_.synchronize();
    copies_.fetch(host_.call.out, args_.out.data);
    if (host_.lse.present()) copies_.fetch(host_.lse, args_.lse.data);
  }

 private:
  void stage(const kernels::TensorView& v, pav_tensor& t) {
    if (void* dev = copies_.stage(v)) t.data = dev;
  }
  const DecodeRequest& host_;
  DeviceCopies copies_;
  pav_decode_args args_;
};
#endif

class LibKernel final : public KernelUnderTest {
 public:
  // where: the library as messages name it ("lib:PATH"), alive as long as the
  // process (the exit guard may name it at any time).
  LibKernel(const std::string* where, void* handle, Entries e, void* instance, KernelDescription d, std::string spec)
      : where_(where), handle_(handle), e_(e), instance_(instance), description_(std::move(d)),
        spec_(std::move(spec)) {}
  ~LibKernel() override {
    if (e_.fini) {
      exit_guard::Inside in(*where_, "pav_kernel_fini");
      e_.fini(instance_);
    }
    --exit_guard::g_alive;
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
    const pav_decode_args a = abi::make_args(r, /*for_check=*/true, e_.version);
    char reason[abi::kMessageBytes] = {0};
    int rc;
    {
      exit_guard::Inside in(*where_, "pav_kernel_check");
      rc = e_.check(instance_, &a, reason, sizeof reason);
    }
    if (rc == PAV_OK) return CallResult::success();
    if (rc == PAV_REJECT) return {Outcome::rejected, text_of(reason, sizeof reason, "(no reason given)")};
    return {Outcome::kernel_error, fmt::format("pav_kernel_check returned {} (expected PAV_OK or PAV_REJECT): {}", rc,
                                               text_of(reason, sizeof reason))};
  }

  CallResult decode(const DecodeRequest& r) override {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!description_.thread_safe) lock.lock();
    ++decode_calls_;
    char message[abi::kMessageBytes] = {0};
    if (e_.poison_scratch) {  // before every call: a read of scratch this call did not write is NaN
      int rc;
      {
        exit_guard::Inside in(*where_, "pav_kernel_poison_scratch");
        rc = e_.poison_scratch(instance_, message, sizeof message);
      }
      if (rc != PAV_OK)
        return {Outcome::kernel_error, fmt::format("pav_kernel_poison_scratch returned {} (expected PAV_OK): {}", rc,
                                                   text_of(message, sizeof message))};
      std::memset(message, 0, sizeof message);
    }
    if (description_.memory == Memory::device) {
#ifdef PAV_HAVE_GPU
      try {
        DeviceStage stage(r, e_.version);
        int rc;
        {
          exit_guard::Inside in(*where_, "pav_kernel_decode");
          rc = e_.decode(instance_, &stage.args(), message, sizeof message);
        }
        stage.copy_back();
        return from_status(rc, message, sizeof message, "pav_kernel_decode");
      } catch (const kernels::gpu::Error& e) {
        return {Outcome::kernel_error, std::string("device error around the call: ") + e.what()};
      }
#else
      return {Outcome::kernel_error, "device memory kernels need a GPU build"};
#endif
    }
    const pav_decode_args a = abi::make_args(r, /*for_check=*/false, e_.version);
    int rc;
    {
      exit_guard::Inside in(*where_, "pav_kernel_decode");
      rc = e_.decode(instance_, &a, message, sizeof message);
    }
    return from_status(rc, message, sizeof message, "pav_kernel_decode");
  }
  int64_t decode_calls() const override { return decode_calls_.load(); }

 private:
  const std::string* where_;
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
  // The name messages use: valid UTF-8, bounded, kept for the life of the
  // process (the exit guard may print it after the kernel is gone).
  static std::mutex names_mu;
  static std::vector<std::unique_ptr<const std::string>> names;
  const std::string* where_kept;
  {
    std::lock_guard<std::mutex> lock(names_mu);
    names.push_back(std::make_unique<const std::string>("lib:" + utf8_clean(path, 1024)));
    where_kept = names.back().get();
  }
  const std::string& where = *where_kept;
  // dlopen searches the library path for a bare name; a file next to us is meant.
  std::string load = path;
  if (path.find('/') == std::string::npos && std::filesystem::exists(path)) load = "./" + path;
  if (!std::filesystem::exists(load) && path.find('/') != std::string::npos)
    throw KernelSpecError(where + ": no such file");
  // A file pav can read is checked before it is mapped (a bare name that
  // dlopen finds on the library path is the system's).
  if (std::filesystem::exists(load))
    if (const std::string why = elf_problem(load); !why.empty())
      throw KernelSpecError(where + ": not a loadable shared library: " + why);
  exit_guard::install();
  void* h;
  {
    exit_guard::Inside in(where, "its constructors (dlopen)");
    h = dlopen(load.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) {
    const char* err = dlerror();
    throw KernelSpecError(where + ": cannot load: " + utf8_clean(err ? err : "unknown dlopen error", 1024));
  }
  Entries e;
  e.abi_version = symbol<pav_kernel_abi_version_fn>(h, "pav_kernel_abi_version");
  e.describe = symbol<pav_kernel_describe_fn>(h, "pav_kernel_describe");
  e.decode = symbol<pav_kernel_decode_fn>(h, "pav_kernel_decode");
  e.init = symbol<pav_kernel_init_fn>(h, "pav_kernel_init");
  e.fini = symbol<pav_kernel_fini_fn>(h, "pav_kernel_fini");
  e.check = symbol<pav_kernel_check_fn>(h, "pav_kernel_check");
  e.poison_scratch = symbol<pav_kernel_poison_scratch_fn>(h, "pav_kernel_poison_scratch");
  for (auto [ptr, name] : {std::pair<const void*, const char*>{reinterpret_cast<const void*>(e.abi_version),
                                                               "pav_kernel_abi_version"},
                           {reinterpret_cast<const void*>(e.describe), "pav_kernel_describe"},
                           {reinterpret_cast<const void*>(e.decode), "pav_kernel_decode"}})
    if (!ptr)
      throw KernelSpecError(fmt::format(
          "{}: missing required symbol {} (export it with extern \"C\" and PAV_KERNEL_EXPORT; see "
          "include/pav/kernel_abi.h)",
          where, name));
  // From here until the instance is finished, an exit() is caught.
  ++exit_guard::g_alive;
  struct AliveUntilHandedOver {
    bool handed_over = false;
    ~AliveUntilHandedOver() {
      if (!handed_over) --exit_guard::g_alive;
    }
  } alive;
  uint32_t version;
  {
    exit_guard::Inside in(where, "pav_kernel_abi_version");
    version = e.abi_version();
  }
  if (version < PAV_KERNEL_ABI_OLDEST || version > PAV_KERNEL_ABI_VERSION)
    throw KernelSpecError(fmt::format("{}: kernel ABI version {}, this pav speaks versions {} to {}; rebuild the "
                                      "library against this pav's include/pav/kernel_abi.h",
                                      where, version, PAV_KERNEL_ABI_OLDEST, PAV_KERNEL_ABI_VERSION));
  e.version = version;
  if (!words.empty() && !e.init)
    throw KernelSpecError(fmt::format("{}: configuration words given ({}) but the library has no pav_kernel_init",
                                      where, words.front()));
  void* instance = nullptr;
  char message[abi::kMessageBytes] = {0};
  if (e.init) {
    std::vector<const char*> argv;
    for (const auto& w : words) argv.push_back(w.c_str());
    argv.push_back(nullptr);
    int rc;
    {
      exit_guard::Inside in(where, "pav_kernel_init");
      rc = e.init(int(words.size()), argv.data(), &instance, message, sizeof message);
    }
    if (rc == PAV_UNAVAILABLE)
      throw KernelUnavailable(fmt::format("{}: the kernel cannot run on this machine: {}", where,
                                          text_of(message, sizeof message)));
    if (rc != PAV_OK)
      throw KernelSpecError(fmt::format("{}: pav_kernel_init failed ({}): {}", where, rc, text_of(message, sizeof message)));
  }
  pav_kernel_desc desc{};
  desc.struct_size = sizeof desc;
  desc.abi_version = version;  // a version-1 library may check for its own
  message[0] = 0;
  auto finish = [&] {
    if (!e.fini) return;
    exit_guard::Inside in(where, "pav_kernel_fini");
    e.fini(instance);
  };
  int rc;
  {
    exit_guard::Inside in(where, "pav_kernel_describe");
    rc = e.describe(instance, &desc, message, sizeof message);
  }
  if (rc != PAV_OK) {
    finish();
    throw KernelSpecError(fmt::format("{}: pav_kernel_describe failed ({}): {}", where, rc, text_of(message, sizeof message)));
  }
  KernelDescription d;
  try {
    d = abi::from_abi(desc);
  } catch (const KernelSpecError& err) {
    finish();
    throw KernelSpecError(where + ": " + err.what());
  }
  d.has_check = e.check != nullptr;
  d.scratch = e.poison_scratch != nullptr;
#ifndef PAV_HAVE_GPU
  if (d.memory == Memory::device) {
    finish();
    throw KernelUnavailable(where + ": the kernel works on device memory; this pav build has no GPU support");
  }
#endif
  auto kernel = std::make_unique<LibKernel>(where_kept, h, e, instance, std::move(d), spec);
  alive.handed_over = true;  // ~LibKernel counts it down
  return kernel;
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
