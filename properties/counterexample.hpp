#pragma once
// Saving failing cases: a property that fails writes its case to
// $PAV_COUNTEREXAMPLE_DIR (default ./counterexamples) as <property>.json. During
// shrinking each smaller failing case overwrites the file, so what remains is
// the minimal one; `pav replay` runs it.
#include <string>

#include <nlohmann/json.hpp>

#include "properties/host_case.hpp"

namespace pav::props {

// Writes the case and returns the path written ("" if the directory cannot be made).
std::string save_counterexample(const std::string& property, const CaseSpec& spec,
                                const nlohmann::json& extra_meta = nlohmann::json::object());

}  // namespace pav::props
