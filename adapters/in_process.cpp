// SPDX-License-Identifier: Apache-2.0
#include "adapters/in_process.hpp"

#include <map>
#include <mutex>

namespace pav::adapters {

namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, std::shared_ptr<InProcessKernel>>& registry() {
  static std::map<std::string, std::shared_ptr<InProcessKernel>> r;
  return r;
}

// An opened in-process kernel: the registered one, shared, its calls bounded
// by the limits of the run that opened it.
class SharedKernel final : public KernelUnderTest {
 public:
  SharedKernel(std::shared_ptr<InProcessKernel> k, InProcessCallLimits limits)
      : k_(std::move(k)), limits_(std::move(limits)) {}
  const KernelDescription& description() const override { return k_->description(); }
  std::string adapter() const override { return k_->adapter(); }
  std::string spec() const override { return k_->spec(); }
  CallResult check(const DecodeRequest& r) override { return k_->check_within(r, limits_); }
  CallResult decode(const DecodeRequest& r) override { return k_->decode_within(r, limits_); }
  int64_t decode_calls() const override { return k_->decode_calls(); }

 private:
  std::shared_ptr<InProcessKernel> k_;
  InProcessCallLimits limits_;
};

}  // namespace

void register_in_process_kernel(const std::string& key, std::shared_ptr<InProcessKernel> k) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[key] = std::move(k);
}

void unregister_in_process_kernel(const std::string& key) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(key);
}

std::unique_ptr<KernelUnderTest> open_in_process_kernel(const std::string& key, const InProcessCallLimits& limits) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const auto it = registry().find(key);
  if (it == registry().end())
    throw KernelSpecError("--kernel inproc:" + key + ": no kernel of that name in this process (in-process kernels "
                          "are registered by the Python module)");
  return std::make_unique<SharedKernel>(it->second, limits);
}

}  // namespace pav::adapters
