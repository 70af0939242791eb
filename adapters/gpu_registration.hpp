// SPDX-License-Identifier: Apache-2.0
#pragma once
// pav's own GPU backend, for the faces that run pav's kernels (the command
// line, the Python package): registering it with the launch entries, and
// naming the device a run uses.
#include <string>

#include "kernels/launch.hpp"

namespace pav::adapters {

// Registers the GPU backend (host-staged entries) when this build has one and
// a device is present, once per process; false otherwise. The device is probed
// only by the runs that use pav's kernels.
bool register_gpu();

// The device a backend runs on, for reports: the GPU's name (and the visible
// devices the process was given) or "host CPU".
std::string device_description(kernels::Backend backend);

}  // namespace pav::adapters
