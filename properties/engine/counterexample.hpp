// SPDX-License-Identifier: Apache-2.0
#pragma once
// Saving failing cases, for `pav verify`, `pav fuzz` and the property suites
// alike: one default folder, one naming rule, one durable write.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "properties/case/host_case.hpp"

namespace pav::props {

// The folder saved cases go to when none is named: $PAV_COUNTEREXAMPLE_DIR when
// set and not empty, else "counterexamples" under the current directory. CI's
// fixture folder (fixtures/counterexamples) is written only when named.
std::string default_counterexample_dir();

// The file name of a saved case: "<property>-seed<seed>-<hash>.json", or
// "<property>-<hash>.json" without a seed. Characters of the property outside
// [A-Za-z0-9._-] become '_'. <hash> is 8 hex digits of a hash of the case's
// JSON (everything but its meta), so the name is stable (the same case always
// gets the same name) and two different cases do not share one.
std::string counterexample_name(const std::string& property, std::optional<uint64_t> seed, const CaseSpec& spec);

// An id of a shrunk case independent of the seed that found it:
// "<property>-<hash>", the hash over the case's JSON and `value_meta` (the
// property's own fields of the value, without the run's facts). The same
// minimal case found from two seeds, or by two shards, has one id.
std::string case_id(const std::string& property, const CaseSpec& spec, const nlohmann::json& value_meta);

// Writes the case under `dir` (created if missing) with that name, durably
// (see save_case). meta gets "property" and, with a seed, "seed". Returns the
// path written; throws pav::IoError naming the path and the reason when the
// case could not be written.
std::string save_counterexample(const std::string& dir, const std::string& property, std::optional<uint64_t> seed,
                                const CaseSpec& spec, nlohmann::json meta = nlohmann::json::object());

}  // namespace pav::props
