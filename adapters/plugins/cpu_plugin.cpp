// SPDX-License-Identifier: Apache-2.0
// libpav_cpu_kernel.so: pav's CPU decode kernels behind the C ABI of
// include/pav/kernel_abi.h, so the contract is exercised by real kernels.
// Configuration words: see adapters/pav_kernel.hpp (--path, --partial, --arch, --cu).
#include "adapters/pav_kernel.hpp"
#include "adapters/plugins/plugin_glue.hpp"

namespace {

std::unique_ptr<pav::adapters::KernelUnderTest> make(const std::vector<std::string>& words) {
  pav::adapters::PavKernelOptions o = pav::adapters::parse_pav_kernel_words(words);
  o.backend = pav::kernels::Backend::cpu;
  return pav::adapters::make_pav_kernel(o, "libpav_cpu_kernel.so");
}

}  // namespace

extern "C" {

PAV_KERNEL_EXPORT uint32_t pav_kernel_abi_version(void) { return PAV_KERNEL_ABI_VERSION; }

PAV_KERNEL_EXPORT int pav_kernel_init(int argc, const char* const* argv, void** instance, char* err,
                                      size_t err_size) {
  return pav::adapters::plugin::init(make, argc, argv, instance, err, err_size);
}

PAV_KERNEL_EXPORT void pav_kernel_fini(void* instance) { pav::adapters::plugin::fini(instance); }

PAV_KERNEL_EXPORT int pav_kernel_describe(void* instance, pav_kernel_desc* desc, char* err, size_t err_size) {
  return pav::adapters::plugin::describe(instance, desc, err, err_size);
}

PAV_KERNEL_EXPORT int pav_kernel_check(void* instance, const pav_decode_args* args, char* reason,
                                       size_t reason_size) {
  return pav::adapters::plugin::check(instance, args, reason, reason_size);
}

PAV_KERNEL_EXPORT int pav_kernel_decode(void* instance, const pav_decode_args* args, char* err, size_t err_size) {
  return pav::adapters::plugin::decode(instance, args, err, err_size);
}

}  // extern "C"
