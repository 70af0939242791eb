// SPDX-License-Identifier: Apache-2.0
#pragma once
// Fuzz reports across runs and machines: the seed-stream position a report
// records (so a later run continues it), and the merge of shard reports into
// one fleet result (`pav report merge`).
//
// A report (pav fuzz --report FILE) describes one run of one shard I/N. A shard
// may run in several segments, each resumed from the report of the one before
// (pav fuzz --resume); the segments of a shard form a chain in which each
// starts every property's stream where the previous one stopped. The merge
// accepts a set of reports only when it is exactly one complete campaign: one
// pav build, one kernel, one base seed, one property list, shards 0..N-1 each
// present, each shard's segments one unbroken chain from case 0. Anything else
// is refused with a ReportError naming the shard and the file at fault.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "properties/fuzz.hpp"

namespace pav::props::fuzz {

inline constexpr const char* kFuzzReportFormat = "pav-fuzz-report/1";
inline constexpr const char* kFleetReportFormat = "pav-fleet-report/1";

// A report that cannot be used as asked (malformed, or not of the same
// campaign): bad input. what() names the file, and the shard when known.
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

nlohmann::ordered_json stream_point_json(const StreamPoint& p);
// `where` names the value in errors ("a.json: resume.planner").
StreamPoint stream_point_from_json(const nlohmann::json& j, const std::string& where);

// What --resume takes from a report: the campaign it belongs to and where each
// property's stream stopped.
struct ResumeSource {
  uint64_t base_seed = 0;
  int shard_index = 0, shard_count = 1;
  std::vector<std::string> properties;
  std::string backend;
  nlohmann::json kernel;  // null without a kernel under test
  std::map<std::string, StreamPoint> points;
};
// Reads a fuzz report for resuming; ReportError names the file and field.
ResumeSource read_resume_source(const nlohmann::json& report, const std::string& path);

struct ReportFile {
  std::string path;
  nlohmann::json report;
};

struct FleetResult {
  nlohmann::ordered_json merged;  // kFleetReportFormat
  int exit_code = 0;              // 1 a failure found; 3 a shard stopped early or lost a case; else 0
};

// Merges shard reports (see above). Per property: cases and CPU time summed,
// cases/s summed over shards (they run side by side), and the seed prefix: the
// number of seeds from the base seed on that all ran, as an unsharded run of
// that many cases would have. Failures are deduplicated by their shrunk case
// (the same minimal case found by several shards is one failure), lowest seed
// first.
FleetResult merge_reports(const std::vector<ReportFile>& reports);

}  // namespace pav::props::fuzz
