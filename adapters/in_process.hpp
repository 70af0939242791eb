// SPDX-License-Identifier: Apache-2.0
#pragma once
// Kernels that live in pav's own process beside it (the Python module's
// callables): registered under a key and opened as "inproc:KEY" by every
// command that takes --kernel, so they run through the same properties,
// shrinking, saving and replay as any other kernel under test.
#include <memory>
#include <string>

#include "adapters/kernel.hpp"

namespace pav::adapters {

// Registers k under key (a key already registered is replaced).
void register_in_process_kernel(const std::string& key, std::shared_ptr<KernelUnderTest> k);
// Removes the key; a kernel already opened from it stays usable.
void unregister_in_process_kernel(const std::string& key);
// The kernel registered under key, opened (shared with the registry). Throws
// KernelSpecError naming the key when none is.
std::unique_ptr<KernelUnderTest> open_in_process_kernel(const std::string& key);

}  // namespace pav::adapters
