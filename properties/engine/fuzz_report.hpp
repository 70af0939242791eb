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
//
// Every report is also checked against itself before it is believed: each
// field of its type and range (no negative count, no non-finite time), each
// run's cases the sum of its per-job counts and exactly the cases between the
// stream points it started and stopped at, the runs in property order, a
// property without a run left where it was, and exit_code, passed and
// interrupted the verdict pav fuzz derives from the runs (1 a failure, else 3
// a stop, else 0; no other code). A report that contradicts itself is a
// ReportError (bad input) naming the file and the field; a consistent report
// of a failure or of a run stopped early makes the merge fail (exit 1), named
// in FleetResult::not_passed.
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "properties/engine/fuzz_engine.hpp"

namespace pav::props::fuzz {

inline constexpr const char* kFuzzReportFormat = "pav-fuzz-report/1";
inline constexpr const char* kFleetReportFormat = "pav-fleet-report/1";
// The most cases one report may count per property and run (pav fuzz --cases's
// limit; a time budget reaches far fewer).
inline constexpr int64_t kMaxReportCases = int64_t(1) << 40;

// A report that cannot be used as asked (malformed, or not of the same
// campaign): bad input. what() names the file, and the shard when known.
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

nlohmann::ordered_json stream_point_json(const StreamPoint& p);

// What --resume takes from a report: the campaign it belongs to and where each
// property's stream stopped.
struct ResumeSource {
  uint64_t base_seed = 0;
  int shard_index = 0, shard_count = 1;
  std::vector<std::string> properties;
  std::string backend;
  nlohmann::json kernel;  // null without a kernel under test
  bool regions = false;   // the decode property drew by region (--regions)
  int shapes = 0;         // in that many shapes (--shapes; 0: each call its own)
  uint64_t shape_seed = 0;
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
  int exit_code = 0;              // 0 every shard passed and completed; 1 otherwise
  // Per shard report that keeps the campaign from passing: "shard I/N (FILE):
  // found a failure: ..." or "...: did not complete: stopped by SIGTERM ...".
  std::vector<std::string> not_passed;
};

// Merges shard reports (see above). The campaign passes only when no segment
// found a failure and the last segment of every shard's chain completed its
// budget (an earlier segment stopped early is continued by the next). Per
// property: cases and CPU time summed,
// cases/s summed over shards (they run side by side), and the seed prefix: the
// number of seeds from the base seed on that all ran, as an unsharded run of
// that many cases would have. Failures are deduplicated by their shrunk case
// (the same minimal case found by several shards is one failure), lowest seed
// first.
FleetResult merge_reports(const std::vector<ReportFile>& reports);

}  // namespace pav::props::fuzz
