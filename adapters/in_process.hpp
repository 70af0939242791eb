// SPDX-License-Identifier: Apache-2.0
#pragma once
// Kernels that live in pav's own process beside it (the Python module's
// callables): registered under a key and opened as "inproc:KEY" by every
// command that takes --kernel, so they run through the same properties,
// shrinking, saving and replay as any other kernel under test.
#include <functional>
#include <memory>
#include <string>

#include "adapters/kernel.hpp"

namespace pav::adapters {

// What bounds one call of an in-process kernel, from the run that opened it:
// how long pav waits for the call (--timeout) and the run's stop (a signal).
struct InProcessCallLimits {
  double timeout_seconds = 60;
  std::function<bool()> should_stop;  // empty: never
};

// An in-process kernel: each call bounded by the limits of the run that
// opened it (a run's options are not the kernel's: one registered kernel may
// be opened by runs of different timeouts).
class InProcessKernel : public KernelUnderTest {
 public:
  virtual CallResult check_within(const DecodeRequest& r, const InProcessCallLimits& limits) = 0;
  virtual CallResult decode_within(const DecodeRequest& r, const InProcessCallLimits& limits) = 0;
  CallResult check(const DecodeRequest& r) override { return check_within(r, {}); }
  CallResult decode(const DecodeRequest& r) override { return decode_within(r, {}); }
};

// Registers k under key (a key already registered is replaced).
void register_in_process_kernel(const std::string& key, std::shared_ptr<InProcessKernel> k);
// Removes the key; a kernel already opened from it stays usable.
void unregister_in_process_kernel(const std::string& key);
// The kernel registered under key, opened (shared with the registry), its
// calls bounded by `limits`. Throws KernelSpecError naming the key when none is.
std::unique_ptr<KernelUnderTest> open_in_process_kernel(const std::string& key, const InProcessCallLimits& limits);

}  // namespace pav::adapters
