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
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "adapters/pav_kernel.hpp"
#include "adapters/plugins/plugin_glue.hpp"

namespace {

std::unique_ptr<pav::adapters::KernelUnderTest> make(const std::vector<std::string>& words) {
#ifdef PAV_FAULT_UNAVAILABLE
  throw pav::adapters::plugin::Unavailable("no usable GPU device (fault fixture)");
#endif
  pav::adapters::PavKernelOptions o = pav::adapters::parse_pav_kernel_words(words);
  return pav::adapters::make_pav_kernel(o, "fault plugin");
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

PAV_KERNEL_EXPORT uint32_t pav_kernel_abi_version(void) {
#ifdef PAV_FAULT_ABI_VERSION
  return PAV_KERNEL_ABI_VERSION + 1;
#elif defined(PAV_FAULT_ABI_OLD)
  return PAV_FAULT_ABI_OLD;
#else
  return PAV_KERNEL_ABI_VERSION;
#endif
}

PAV_KERNEL_EXPORT int pav_kernel_init(int argc, const char* const* argv, void** instance, char* err,
                                      size_t err_size) {
  return pav::adapters::plugin::init(make, argc, argv, instance, err, err_size);
}

PAV_KERNEL_EXPORT void pav_kernel_fini(void* instance) { pav::adapters::plugin::fini(instance); }

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

PAV_KERNEL_EXPORT int pav_kernel_describe(void* instance, pav_kernel_desc* desc, char* err, size_t err_size) {
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
  return rc;
}

PAV_KERNEL_EXPORT int pav_kernel_check(void* instance, const pav_decode_args* args, char* reason,
                                       size_t reason_size) {
#ifdef PAV_FAULT_ABI_OLD
  pav_decode_args whole;
  args = as_current(args, whole, reason, reason_size);
  if (!args) return PAV_ERROR;
#endif
  return pav::adapters::plugin::check(instance, args, reason, reason_size);
}

#ifndef PAV_FAULT_MISSING_DECODE
PAV_KERNEL_EXPORT int pav_kernel_decode(void* instance, const pav_decode_args* args, char* err, size_t err_size) {
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
  return pav::adapters::plugin::decode(instance, args, err, err_size);
}
#endif

}  // extern "C"
