// SPDX-License-Identifier: Apache-2.0
// Test fixture: pav's CPU kernel as a plugin with one fault compiled in.
//   PAV_FAULT_MISSING_DECODE  no pav_kernel_decode symbol
//   PAV_FAULT_ABI_VERSION     reports an ABI version pav does not speak
//   PAV_FAULT_ABI_OLD=N       (not a fault) a library of the older ABI version N (1 to 3): it
//                             reports version N, expects the version-N desc and the version-N
//                             prefix of the decode arguments, and leaves the later fields alone
//   PAV_FAULT_SEGV            decode dereferences NULL when a context reaches 300 tokens
//   PAV_FAULT_DESCRIBE        describes an empty head_dims list
//   PAV_FAULT_UNAVAILABLE     init says the kernel cannot run on this machine
//   PAV_FAULT_CHATTY          decode prints a line on stdout, as a kernel with debug output does
//                             (not a fault: pav must keep its own channels clean of it)
//   PAV_FAULT_EXIT_LOAD       a constructor calls exit(0) while the library loads
//   PAV_FAULT_EXIT_DECODE     decode calls exit(0) when a context reaches 300 tokens
//   PAV_FAULT_BAD_TEXT        a name that is not UTF-8, and at 300 tokens a decode error whose
//                             message is not UTF-8 and fills the buffer without a NUL
//   PAV_FAULT_ABI_TOO_OLD     reports an ABI version older than pav still loads
//   PAV_FAULT_MISSING_DESCRIBE, PAV_FAULT_MISSING_ABI_VERSION   that required symbol is absent
//   PAV_FAULT_NO_INIT         no pav_kernel_init: pav refuses words, and describe then fails
//                             (the glue has no instance to describe)
//   PAV_FAULT_NO_FINI         (not a fault) no pav_kernel_fini, which the ABI leaves optional:
//                             the library keeps its instances until the process ends (built
//                             with PAV_FAULT_MODES: a describe that fails then leaves pav an
//                             instance it cannot finish)
//   PAV_FAULT_SCRATCH         (not a fault) exports pav_kernel_poison_scratch, so it is described
//                             as keeping scratch; a decode that pav did not poison the scratch
//                             for since the last decode is an error; with PAV_FAULT_SCRATCH_FAILS
//                             in the environment the poison itself fails
//   PAV_FAULT_MODES           the fault is chosen at init by the words --fault MODE (one of
//                             fixture::kPluginFaults, fault_modes.hpp) ahead of the kernel's own:
//                             init-error, init-unavailable, init-bad-status (returns 9),
//                             describe-error, describe-device (memory = device),
//                             check-reject (with a reason), check-reject-silent (without),
//                             check-error, check-stale-plan, check-bad-status (returns 7),
//                             decode-reject, decode-stale-plan, decode-error,
//                             decode-unavailable, decode-bad-status (returns 42),
//                             decode-stale-silent (a stale plan's call answered PAV_OK, its
//                             stale rows attended over nothing: pav's kernel leaves them NaN)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "adapters/pav_kernel.hpp"
#include "adapters/plugins/plugin_glue.hpp"
#include "adapters/testdata/fault_modes.hpp"

namespace {

#ifdef PAV_FAULT_NO_FINI
// Every instance init made, kept reachable until the process ends (there is no
// fini, and pav never unloads a library). Never destroyed: a static vector
// would be torn down at exit while the process may still hold its instances.
std::vector<void*>& instances() {
  static auto* made = new std::vector<void*>;
  return *made;
}
#endif

#ifdef PAV_FAULT_MODES
using pav::adapters::CallResult;
using pav::adapters::Outcome;

// pav's kernel, with the outcome of its check or decode replaced as the mode says.
class ModeKernel final : public pav::adapters::KernelUnderTest {
 public:
  ModeKernel(std::string mode, std::unique_ptr<KernelUnderTest> inner) : mode_(std::move(mode)), inner_(std::move(inner)) {}
  const std::string& mode() const { return mode_; }
  const pav::adapters::KernelDescription& description() const override { return inner_->description(); }
  std::string adapter() const override { return "fault plugin"; }
  std::string spec() const override { return "fault plugin " + mode_; }
  int64_t decode_calls() const override { return inner_->decode_calls(); }
  CallResult check(const pav::adapters::DecodeRequest& r) override {
    if (mode_ == "check-reject") return {Outcome::rejected, "fault plugin refuses: check-reject"};
    if (mode_ == "check-reject-silent") return {Outcome::rejected, ""};
    if (mode_ == "check-error") return {Outcome::kernel_error, "fault plugin fails: check-error"};
    return inner_->check(r);
  }
  CallResult decode(const pav::adapters::DecodeRequest& r) override {
    if (mode_ == "decode-reject") return {Outcome::rejected, "fault plugin refuses: decode-reject"};
    if (mode_ == "decode-stale-plan") return {Outcome::stale_plan, "fault plugin's plan is stale: decode-stale-plan"};
    if (mode_ == "decode-error") return {Outcome::kernel_error, "fault plugin fails: decode-error"};
    CallResult res = inner_->decode(r);
    if (mode_ == "decode-stale-silent" && res.outcome == Outcome::stale_plan) return CallResult::success();
    return res;
  }

 private:
  std::string mode_;
  std::unique_ptr<KernelUnderTest> inner_;
};

// The mode of an instance ("none" for one that is not a ModeKernel).
std::string mode_of(void* instance) {
  const auto* k = dynamic_cast<const ModeKernel*>(pav::adapters::plugin::kernel_of(instance));
  return k ? k->mode() : "none";
}

// The entry's status and message, for a mode that returns what the glue never does.
int status_with(int rc, const std::string& mode, char* err, size_t err_size) {
  std::snprintf(err, err_size, "fault plugin returns %d: %s", rc, mode.c_str());
  return rc;
}
#endif

[[maybe_unused]] std::unique_ptr<pav::adapters::KernelUnderTest> make(const std::vector<std::string>& words) {
#ifdef PAV_FAULT_UNAVAILABLE
  throw pav::adapters::plugin::Unavailable("no usable GPU device (fault fixture)");
#endif
#ifdef PAV_FAULT_MODES
  std::string mode = "none";
  std::vector<std::string> rest = words;
  if (rest.size() >= 2 && rest[0] == "--fault") {
    mode = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (!pav::adapters::fixture::listed(pav::adapters::fixture::kPluginFaults, mode))
    throw std::invalid_argument("fault plugin: unknown fault " + mode);
  if (mode == "init-unavailable") throw pav::adapters::plugin::Unavailable("fault plugin: init-unavailable");
  if (mode == "init-error") throw std::runtime_error("fault plugin refuses to start: init-error");
  return std::make_unique<ModeKernel>(mode, pav::adapters::make_pav_kernel(pav::adapters::parse_pav_kernel_words(rest),
                                                                           "fault plugin"));
#else
  pav::adapters::PavKernelOptions o = pav::adapters::parse_pav_kernel_words(words);
  return pav::adapters::make_pav_kernel(o, "fault plugin");
#endif
}

#ifdef PAV_FAULT_EXIT_LOAD
__attribute__((constructor)) void exit_while_loading() { std::exit(0); }
#endif

#ifdef PAV_FAULT_SEGV
// The fault itself: a real store through a null pointer, left uninstrumented so
// that a sanitizer build (ci/sanitize.sh) sees the same signal 11 as any other.
__attribute__((no_sanitize("address", "undefined"), noinline)) void store_through_null() {
  volatile int* volatile nowhere = nullptr;  // opaque: no trap in place of the store
  *nowhere = 1;
}
#endif

}  // namespace

extern "C" {

#ifndef PAV_FAULT_MISSING_ABI_VERSION
PAV_KERNEL_EXPORT uint32_t pav_kernel_abi_version(void) {
#ifdef PAV_FAULT_ABI_VERSION
  return PAV_KERNEL_ABI_VERSION + 1;
#elif defined(PAV_FAULT_ABI_TOO_OLD)
  return PAV_KERNEL_ABI_OLDEST - 1;
#elif defined(PAV_FAULT_ABI_OLD)
  return PAV_FAULT_ABI_OLD;
#else
  return PAV_KERNEL_ABI_VERSION;
#endif
}
#endif

#ifndef PAV_FAULT_NO_INIT
PAV_KERNEL_EXPORT int pav_kernel_init(int argc, const char* const* argv, void** instance, char* err,
                                      size_t err_size) {
#ifdef PAV_FAULT_MODES
  for (int i = 0; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--fault") == 0 && std::strcmp(argv[i + 1], "init-bad-status") == 0)
      return status_with(9, argv[i + 1], err, err_size);
#endif
  const int rc = pav::adapters::plugin::init(make, argc, argv, instance, err, err_size);
#ifdef PAV_FAULT_NO_FINI
  if (rc == PAV_OK) instances().push_back(*instance);
#endif
  return rc;
}
#endif

#ifndef PAV_FAULT_NO_FINI
PAV_KERNEL_EXPORT void pav_kernel_fini(void* instance) { pav::adapters::plugin::fini(instance); }
#endif

#ifdef PAV_FAULT_ABI_OLD
namespace {
constexpr size_t kOldArgsSize = PAV_FAULT_ABI_OLD == 1   ? PAV_DECODE_ARGS_V1_SIZE
                                : PAV_FAULT_ABI_OLD == 2 ? PAV_DECODE_ARGS_V2_SIZE
                                                         : PAV_DECODE_ARGS_V3_SIZE;
// What an older library sees of the arguments: exactly its version's prefix.
// The glue below speaks the current version, so the prefix is copied into a
// whole struct with the later fields absent.
const pav_decode_args* as_current(const pav_decode_args* args, pav_decode_args& whole, char* err, size_t err_size) {
  if (!args || args->struct_size != kOldArgsSize) {
    std::snprintf(err, err_size, "version-%d library: pav_decode_args.struct_size %u, expected %zu", PAV_FAULT_ABI_OLD,
                  args ? args->struct_size : 0u, kOldArgsSize);
    return nullptr;
  }
  whole = pav_decode_args{};
  std::memcpy(&whole, args, kOldArgsSize);
  whole.struct_size = sizeof whole;
  if (PAV_FAULT_ABI_OLD == 1) whole.window_left = -1;
  return &whole;
}
}  // namespace
#endif

#ifndef PAV_FAULT_MISSING_DESCRIBE
PAV_KERNEL_EXPORT int pav_kernel_describe(void* instance, pav_kernel_desc* desc, char* err, size_t err_size) {
#ifdef PAV_FAULT_MODES
  if (mode_of(instance) == "describe-error") {
    std::snprintf(err, err_size, "fault plugin cannot describe itself: describe-error");
    return PAV_ERROR;
  }
#endif
#ifdef PAV_FAULT_ABI_OLD
  if (!desc || desc->abi_version != PAV_FAULT_ABI_OLD) {
    std::snprintf(err, err_size, "version-%d library: pav_kernel_desc.abi_version %u, expected %d", PAV_FAULT_ABI_OLD,
                  desc ? desc->abi_version : 0u, PAV_FAULT_ABI_OLD);
    return PAV_ERROR;
  }
  desc->abi_version = PAV_KERNEL_ABI_VERSION;
  const int rc = pav::adapters::plugin::describe(instance, desc, err, err_size);
  desc->abi_version = PAV_FAULT_ABI_OLD;
  if (PAV_FAULT_ABI_OLD < 2) {  // reserved bytes in version 1
    desc->variants = 0;
    desc->lse_base = 0;
  }
  if (PAV_FAULT_ABI_OLD < 3) {  // reserved bytes before version 3
    desc->cache_layouts = desc->kv_storage = desc->page_tables = 0;
    desc->strided_cache = desc->mixed_scales = 0;
  }
  // Reserved bytes before version 4.
  desc->large_cache = desc->num_mla_dims = 0;
  std::memset(desc->mla_dims, 0, sizeof desc->mla_dims);
#else
  const int rc = pav::adapters::plugin::describe(instance, desc, err, err_size);
#endif
#ifdef PAV_FAULT_DESCRIBE
  desc->num_head_dims = 0;
#endif
#ifdef PAV_FAULT_BAD_TEXT
  std::snprintf(desc->name, sizeof desc->name, "bad\xff\xfetext\xe2\x82");
#endif
#ifdef PAV_FAULT_MODES
  if (mode_of(instance) == "describe-device") desc->memory = PAV_MEMORY_DEVICE;
#endif
  return rc;
}
#endif

PAV_KERNEL_EXPORT int pav_kernel_check(void* instance, const pav_decode_args* args, char* reason,
                                       size_t reason_size) {
#ifdef PAV_FAULT_ABI_OLD
  pav_decode_args whole;
  args = as_current(args, whole, reason, reason_size);
  if (!args) return PAV_ERROR;
#endif
#ifdef PAV_FAULT_MODES
  const std::string mode = mode_of(instance);
  if (mode == "check-stale-plan") return status_with(PAV_STALE_PLAN, mode, reason, reason_size);
  if (mode == "check-bad-status") return status_with(7, mode, reason, reason_size);
#endif
  return pav::adapters::plugin::check(instance, args, reason, reason_size);
}

#ifdef PAV_FAULT_SCRATCH
// Poisons of the scratch not yet taken by a decode (one process, one instance).
static long scratch_poisons_pending = 0;

PAV_KERNEL_EXPORT int pav_kernel_poison_scratch(void*, char* err, size_t err_size) {
  if (std::getenv("PAV_FAULT_SCRATCH_FAILS")) {
    std::snprintf(err, err_size, "the scratch could not be poisoned (PAV_FAULT_SCRATCH_FAILS)");
    return PAV_ERROR;
  }
  ++scratch_poisons_pending;
  return PAV_OK;
}
#endif

#ifndef PAV_FAULT_MISSING_DECODE
PAV_KERNEL_EXPORT int pav_kernel_decode(void* instance, const pav_decode_args* args, char* err, size_t err_size) {
#ifdef PAV_FAULT_SCRATCH
  if (scratch_poisons_pending != 1) {
    std::snprintf(err, err_size, "%ld poisons of the scratch since the last decode, expected 1",
                  scratch_poisons_pending);
    return PAV_ERROR;
  }
  scratch_poisons_pending = 0;
#endif
#ifdef PAV_FAULT_SEGV
  const auto* lens = static_cast<const int32_t*>(args->context_lens.data);
  for (int64_t s = 0; s < args->context_lens.shape[0]; ++s)
    if (lens[s] >= 300) store_through_null();
#endif
#if defined(PAV_FAULT_EXIT_DECODE) || defined(PAV_FAULT_BAD_TEXT)
  {
    const auto* lens = static_cast<const int32_t*>(args->context_lens.data);
    for (int64_t s = 0; s < args->context_lens.shape[0]; ++s)
      if (lens[s] >= 300) {
#ifdef PAV_FAULT_EXIT_DECODE
        std::exit(0);
#else
        // "fault plugin says " then bytes that are not UTF-8, to the last byte: no NUL.
        const char head[] = "fault plugin says ";
        std::memset(err, 0xff, err_size);
        std::memcpy(err, head, std::min(err_size, sizeof head - 1));
        return PAV_ERROR;
#endif
      }
  }
#endif
#ifdef PAV_FAULT_CHATTY
  std::printf("fault plugin: decoding %lld sequence(s)\n", (long long)args->context_lens.shape[0]);
  std::fflush(stdout);
#endif
#ifdef PAV_FAULT_ABI_OLD
  pav_decode_args whole;
  args = as_current(args, whole, err, err_size);
  if (!args) return PAV_ERROR;
#endif
#ifdef PAV_FAULT_MODES
  const std::string mode = mode_of(instance);
  if (mode == "decode-unavailable") return status_with(PAV_UNAVAILABLE, mode, err, err_size);
  if (mode == "decode-bad-status") return status_with(42, mode, err, err_size);
#endif
  return pav::adapters::plugin::decode(instance, args, err, err_size);
}
#endif

}  // extern "C"
