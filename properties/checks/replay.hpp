// SPDX-License-Identifier: Apache-2.0
#pragma once
// Replay of a saved case (pav fuzz --replay, pav replay, the regression
// suite): one path whatever the kernel. A case about pav's planner or gate
// replays through that property; every other case runs on a kernel under test
// through the property of that kernel its meta names (decode by default).
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "adapters/kernel.hpp"
#include "properties/engine/fuzz_engine.hpp"

namespace pav::props::fuzz {

// The kernel a saved case runs on when the caller gives none: the pav kernel
// its meta.kernel.spec records (pav:cpu|gpu WORDS), or, for a case that
// records no kernel, pav's kernel with the settings its recipe holds, on
// `backend` (pav_kernel_for_case; a uniform case's split count becomes its
// split ceiling in `spec`). A case that records a kernel of another adapter
// (lib:, exec:, inproc:) is CaseError naming meta.kernel.spec: it replays only
// on that kernel, never on pav's in its place. KernelSpecError or
// KernelUnavailable (pav:gpu without a device) as adapters::open_kernel throws.
std::unique_ptr<adapters::KernelUnderTest> case_kernel(CaseSpec& spec, const nlohmann::json& meta,
                                                       kernels::Backend backend);

// The kernel property a case replays through: the one its meta names (decode
// for a file without a property). A property the kernel does not have (stale
// on a kernel that splits by itself, reject without a check entry,
// batch-invariance on any kernel but pav's self-splitting one) or no property
// of that name is CaseError naming meta.property: replayed through another,
// the case would pass or fail for a reason it was not saved for.
const Property& kernel_property_named(const std::vector<Property>& props, const std::string& named,
                                      const adapters::KernelUnderTest& k);

// Re-runs a saved case through the property its meta names (decode for a file
// without a property: pav replay's decode files, other suites' saved decode
// cases), on ctx.kernel or, without one, on case_kernel(). *property_out gets
// the property run. Throws CaseError (naming the file and field) for a case
// that cannot be read or rebuilt, or whose kernel is missing: bad input, not a
// verdict.
Verdict replay_case_file(const std::string& path, const CheckContext& ctx, std::string* property_out = nullptr);
Verdict replay_case(const CaseSpec& spec, const nlohmann::json& meta, const CheckContext& ctx,
                    std::string* property_out = nullptr);

}  // namespace pav::props::fuzz
