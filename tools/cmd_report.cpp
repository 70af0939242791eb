// SPDX-License-Identifier: Apache-2.0
// pav report merge: the reports of a sharded fuzz campaign (pav fuzz --shard I/N
// --report FILE, one per shard or per resumed segment) as one fleet result.
// See docs/fuzzing.md, "Fleets".
#include <fmt/core.h>

#include <fstream>

#include "properties/fuzz_report.hpp"
#include "tools/command.hpp"

namespace {

using namespace pav;
namespace fz = pav::props::fuzz;
using ojson = nlohmann::ordered_json;

nlohmann::json read_report(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw cli::BadInput(path + ": cannot open the report");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw cli::BadInput(path + ": not JSON (" + e.what() + ")");
  }
}

std::string null_or(const nlohmann::ordered_json& j, const std::string& otherwise) {
  return j.is_string() ? j.get<std::string>() : otherwise;
}

void print_summary(const ojson& m) {
  const std::string kernel = m["kernel"].is_null() ? std::string("backend ") + m["backend"].get<std::string>()
                                                   : "kernel " + m["kernel"].dump();
  fmt::print("fleet: {} shard(s), base seed {}, {}, pav {} (commit {})\n", m["shard_count"].get<int>(),
             m["base_seed"].get<uint64_t>(), kernel, m["pav_version"].get<std::string>(),
             m["source_commit"].get<std::string>());
  fmt::print("{:<8} {:>7} {:>9} {:>9} {:>5}  {}\n", "shard", "segment", "wall s", "CPU s", "exit", "host / device");
  for (const auto& r : m["reports"])
    fmt::print("{:<8} {:>7} {:>9.1f} {:>9.1f} {:>5}  {} / {}\n", r["shard"].get<std::string>(), r["segment"].get<int>(),
               r["wall_seconds"].get<double>(), r["cpu_seconds"].get<double>(), r["exit_code"].get<int>(),
               r["host"].get<std::string>(), r["device"].get<std::string>());
  fmt::print("\n{:<18} {:>10} {:>12} {:>14} {:>14} {:>9}\n", "property", "cases", "cases/s", "cases/CPU-s",
             "seed prefix", "failures");
  for (const auto& p : m["properties"])
    fmt::print("{:<18} {:>10} {:>12.1f} {:>14.1f} {:>14} {:>9}\n", p["property"].get<std::string>(),
               p["cases"].get<int64_t>(), p["cases_per_second"].get<double>(), p["cases_per_cpu_second"].get<double>(),
               p["seed_prefix"].get<uint64_t>(), p["failures"].get<int64_t>());
  fmt::print("(cases/s: summed over the shards, which run side by side; seed prefix: the seeds from the base seed "
             "on that all ran)\n");
  if (m["failures"].empty()) {
    fmt::print("\nno failure in {} shard(s)\n", m["shard_count"].get<int>());
  } else {
    fmt::print("\n{} distinct failure(s) (by shrunk case):\n", m["failures"].size());
    for (const auto& f : m["failures"]) {
      fmt::print("  {} {}: seed {} on shard {} (found {} time(s))\n    {}\n    shrunk case: {}\n    saved: {}\n",
                 f["property"].get<std::string>(), f["case_id"].get<std::string>(), f["seed"].get<uint64_t>(),
                 f["shard"].get<std::string>(), f["found_by"].size(), f["message"].get<std::string>(),
                 f["shrunk_case"].get<std::string>(), null_or(f["saved"], "(not saved)"));
    }
  }
  const int rc = m["exit_code"].get<int>();
  fmt::print("\npav report merge: {}\n", rc == 0 ? "PASS"
                                         : rc == 1 ? "FAIL (a shard found a failure)"
                                                   : "INCOMPLETE (a shard was stopped early or could not save a case)");
}

int run(std::vector<std::string> args) {
  CLI::App app{"Fleet results from per-run fuzz reports (pav fuzz --report).", "report"};
  app.require_subcommand(1, 1);
  CLI::App* merge = app.add_subcommand("merge", "merge the reports of one sharded fuzz campaign into one fleet result");
  merge->footer(
      "The reports must be one campaign: every shard I/N of one base seed, kernel, property list and pav build, "
      "each once (a shard resumed in segments gives each segment's report, chained from case 0). The summary: "
      "cases/s per property across shards, the seed prefix every shard covered, failures deduplicated by shrunk "
      "case.\nExit 0 pass, 1 a shard found a failure, 2 reports that do not make one campaign (the message names "
      "the shard), 3 a shard stopped early or lost a case.");
  std::vector<std::string> files;
  merge->add_option("REPORT", files, "the shards' report files")->required()->check(CLI::ExistingFile);
  cli::ReportOutput output;
  output.add_options(*merge);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();

  std::vector<fz::ReportFile> reports;
  for (const auto& f : files) reports.push_back({f, read_report(f)});
  fz::FleetResult r;
  try {
    r = fz::merge_reports(reports);
  } catch (const fz::ReportError& e) {
    throw cli::BadInput(e.what());
  }
  ojson j = cli::report_header("report");
  j["action"] = "merge";
  for (auto& [key, value] : r.merged.items())
    if (key != "pav_version" && key != "source_commit") j[key] = value;
  // The reports' pav, which may differ from the one merging them.
  j["reports_pav_version"] = r.merged["pav_version"];
  j["reports_source_commit"] = r.merged["source_commit"];
  if (output.text()) print_summary(r.merged);
  return output.finish(j, r.exit_code, "report");
}

}  // namespace

PAV_COMMAND("report", "merge the reports of a sharded fuzz campaign into one fleet result", run);
