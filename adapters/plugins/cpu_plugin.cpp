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

PAV_PLUGIN_ENTRY_POINTS(make)
