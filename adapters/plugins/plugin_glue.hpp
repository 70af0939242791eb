// SPDX-License-Identifier: Apache-2.0
#pragma once
// The C entry points of a plugin whose instances are kernels under test made
// from configuration words: a plugin's .cpp defines the exported symbols by
// forwarding to these. No exception crosses the C boundary.
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "pav/kernel_abi.h"

namespace pav::adapters::plugin {

// Thrown by a factory when the kernel cannot run on this machine (no device):
// pav_kernel_init returns PAV_UNAVAILABLE with the message.
class Unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using Factory = std::function<std::unique_ptr<KernelUnderTest>(const std::vector<std::string>& words)>;

int init(const Factory& make, int argc, const char* const* argv, void** instance, char* err, size_t err_size);
void fini(void* instance);
int describe(void* instance, pav_kernel_desc* desc, char* err, size_t err_size);
int check(void* instance, const pav_decode_args* args, char* reason, size_t reason_size);
int decode(void* instance, const pav_decode_args* args, char* err, size_t err_size);

// The kernel behind an instance (for plugins that wrap decode).
KernelUnderTest* kernel_of(void* instance);

}  // namespace pav::adapters::plugin

// Defines a plugin's exported C entry points, forwarding to the functions above
// with MAKE as the factory of its instances. Use once, at namespace scope.
#define PAV_PLUGIN_ENTRY_POINTS(MAKE)                                                                           \
  extern "C" {                                                                                                  \
  PAV_KERNEL_EXPORT uint32_t pav_kernel_abi_version(void) { return PAV_KERNEL_ABI_VERSION; }                    \
  PAV_KERNEL_EXPORT int pav_kernel_init(int argc, const char* const* argv, void** instance, char* err,          \
                                        size_t err_size) {                                                      \
    return pav::adapters::plugin::init(MAKE, argc, argv, instance, err, err_size);                              \
  }                                                                                                             \
  PAV_KERNEL_EXPORT void pav_kernel_fini(void* instance) { pav::adapters::plugin::fini(instance); }             \
  PAV_KERNEL_EXPORT int pav_kernel_describe(void* instance, pav_kernel_desc* desc, char* err, size_t err_size) { \
    return pav::adapters::plugin::describe(instance, desc, err, err_size);                                      \
  }                                                                                                             \
  PAV_KERNEL_EXPORT int pav_kernel_check(void* instance, const pav_decode_args* args, char* reason,             \
                                         size_t reason_size) {                                                  \
    return pav::adapters::plugin::check(instance, args, reason, reason_size);                                   \
  }                                                                                                             \
  PAV_KERNEL_EXPORT int pav_kernel_decode(void* instance, const pav_decode_args* args, char* err,               \
                                          size_t err_size) {                                                    \
    return pav::adapters::plugin::decode(instance, args, err, err_size);                                        \
  }                                                                                                             \
  }
