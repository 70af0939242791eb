// SPDX-License-Identifier: Apache-2.0
#pragma once
// The C entry points of a plugin whose instances are kernels under test made
// from configuration words: a plugin's .cpp defines the exported symbols by
// forwarding to these. No exception crosses the C boundary.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "pav/kernel_abi.h"

namespace pav::adapters::plugin {

using Factory = std::function<std::unique_ptr<KernelUnderTest>(const std::vector<std::string>& words)>;

int init(const Factory& make, int argc, const char* const* argv, void** instance, char* err, size_t err_size);
void fini(void* instance);
int describe(void* instance, pav_kernel_desc* desc, char* err, size_t err_size);
int check(void* instance, const pav_decode_args* args, char* reason, size_t reason_size);
int decode(void* instance, const pav_decode_args* args, char* err, size_t err_size);

// The kernel behind an instance (for plugins that wrap decode).
KernelUnderTest* kernel_of(void* instance);

}  // namespace pav::adapters::plugin
