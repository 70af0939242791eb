// SPDX-License-Identifier: Apache-2.0
#pragma once
// The drift report writers: JSON (format pav-drift-report/1) for machines,
// Markdown for people.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "properties/drift/run.hpp"

namespace pav::props {

inline constexpr const char* kDriftReportFormat = "pav-drift-report/1";

nlohmann::json report_json(const DriftReport& r);
std::string report_markdown(const DriftReport& r);

// One error figure summarized over the data seeds (0 for no seeds).
double mean_of(const std::vector<ErrorFigures>& f, double ErrorFigures::*m);
double min_of(const std::vector<ErrorFigures>& f, double ErrorFigures::*m);
double max_of(const std::vector<ErrorFigures>& f, double ErrorFigures::*m);

}  // namespace pav::props
