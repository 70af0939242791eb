// SPDX-License-Identifier: Apache-2.0
#pragma once
// Physical device index of a logical device, for NUMA binding (docs/lifecycle.md,
// section 8). ROCR_VISIBLE_DEVICES filters and renumbers the device table
// first; HIP_VISIBLE_DEVICES (or, when that is unset, CUDA_VISIBLE_DEVICES)
// then indexes into the result. Reading only the HIP variable puts every rank on
// one NUMA node when a recipe sets ROCR alone.
#include <optional>
#include <string>
#include <vector>

namespace pav::kernels::dispatch {

// The variables' values; nullopt = unset (an empty string is set: no devices).
struct VisibilityEnv {
  std::optional<std::string> rocr;  // ROCR_VISIBLE_DEVICES
  std::optional<std::string> hip;   // HIP_VISIBLE_DEVICES
  std::optional<std::string> cuda;  // CUDA_VISIBLE_DEVICES (used only when HIP is unset)
};

// Physical indices of the visible devices in logical order; nullopt when no
// variable restricts visibility (logical index == physical index). Entries of
// HIP/CUDA past the end of the ROCR list end the list there, as the runtime
// does. Throws std::invalid_argument naming the variable and its value on a
// malformed list (an entry that is not a non-negative integer, a repeat).
std::optional<std::vector<int>> visible_devices(const VisibilityEnv& env);

// Physical index of logical device `logical`. Throws std::invalid_argument on a
// malformed list, or when `logical` is negative or not visible.
int physical_device_index(int logical, const VisibilityEnv& env);

// The process's variables, read once on first use.
const VisibilityEnv& process_visibility_env();
inline int physical_device_index(int logical) {
  return physical_device_index(logical, process_visibility_env());
}

}  // namespace pav::kernels::dispatch
