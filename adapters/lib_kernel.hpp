// SPDX-License-Identifier: Apache-2.0
#pragma once
// The shared-library adapter: a kernel behind include/pav/kernel_abi.h, loaded
// with dlopen into pav's process (lib:PATH.so), or run in a child process
// behind the worker protocol (--isolate), so that a crash inside it is a
// verdict on the case that caused it instead of the end of pav.
#include <memory>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"

namespace pav::adapters {

// Loads the library, checks its ABI version and required symbols, hands the
// configuration words to its init entry and reads its description. Throws
// KernelSpecError (missing file or symbol, other ABI version, words without an
// init entry, init or describe failing, a description breaking the contract's
// rules) or KernelUnavailable (a device-memory kernel in a build without GPU
// support).
std::unique_ptr<KernelUnderTest> open_lib_kernel(const std::string& path, const std::vector<std::string>& words,
                                                 const std::string& spec);

// The same kernel (lib: or pav: text) served by `pav kernel-worker` in a child
// process and reached through the worker adapter.
std::unique_ptr<KernelUnderTest> open_isolated_kernel(const std::string& spec, const OpenOptions& options);

}  // namespace pav::adapters
