// SPDX-License-Identifier: Apache-2.0
#pragma once
// The properties `pav fuzz` and `pav verify` run without --kernel:
//   planner           pav's work planner on generated uneven batches
//   gate-mirror       pav's routing gate against its planned launch entry
//   decode, batch-invariance, reject, stale
//                     pav's own kernels as kernels under test, through their
//                     adapter, with their settings (path, partial dtype, arch,
//                     compute units) drawn per case (kernel_properties.hpp)
#include <string>
#include <vector>

#include "properties/engine/fuzz_engine.hpp"

namespace pav::props::fuzz {

const std::vector<Property>& properties();
// nullptr when no property has that name.
const Property* find_property(const std::string& name);
// True for the properties about pav's planner and gate (they call no kernel
// under test): planner, gate-mirror.
bool is_host_property(const std::string& name);

}  // namespace pav::props::fuzz
