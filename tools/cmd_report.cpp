// SPDX-License-Identifier: Apache-2.0
// pav report merge: the reports of a sharded fuzz campaign (pav fuzz --shard I/N
// --report FILE, one per shard or per resumed segment) as one fleet result.
// See docs/fuzzing.md, "Fleets".
#include <fmt/core.h>

#include "input/json_input.hpp"
#include "properties/engine/fuzz_report.hpp"
#include "tools/command.hpp"

namespace {

using namespace pav;
namespace fz = pav::props::fuzz;
using ojson = nlohmann::ordered_json;

// One shard report, through the shared bounded reader: a missing file, a
// directory, a FIFO or a file past the size limit is refused by name before it
// is read, and nesting past kMaxJsonDepth, a duplicate key or 1e999 while
// parsing.
nlohmann::json read_report(const std::string& path) {
  try {
    return input::read_json_file(path);
  } catch (const input::InputError& e) {
    throw cli::BadInput(e.what());
  }
}

std::string null_or(const nlohmann::ordered_json& j, const std::string& otherwise) {
  return j.is_string() ? j.get<std::string>() : otherwise;
}

void print_summary(const ojson& m) {
  const std::string kernel = m["kernel"].is_null() ? std::string("backend ") + m["backend"].get<std::string>()
                                                   : "kernel " + input::excerpt(nlohmann::json(m["kernel"]), 400);
  fmt::print("fleet: {} shard(s), base seed {}, {}, pav {} (commit {})\n", m["shard_count"].get<int>(),
             m["base_seed"].get<uint64_t>(), kernel, input::excerpt(m["pav_version"].get<std::string>(), 80),
             input::excerpt(m["source_commit"].get<std::string>(), 80));
  fmt::print("{:<8} {:>7} {:>9} {:>9} {:>5}  {}\n", "shard", "segment", "wall s", "CPU s", "exit", "host / device");
  for (const auto& r : m["reports"])
    fmt::print("{:<8} {:>7} {:>9.1f} {:>9.1f} {:>5}  {} / {}\n", r["shard"].get<std::string>(), r["segment"].get<int>(),
               r["wall_seconds"].get<double>(), r["cpu_seconds"].get<double>(), r["exit_code"].get<int>(),
               input::excerpt(r["host"].get<std::string>(), 80), input::excerpt(r["device"].get<std::string>(), 80));
  fmt::print("\n{:<18} {:>10} {:>12} {:>14} {:>14} {:>9}\n", "property", "cases", "cases/s", "cases/CPU-s",
             "seed prefix", "failures");
  for (const auto& p : m["properties"])
    fmt::print("{:<18} {:>10} {:>12.1f} {:>14.1f} {:>14} {:>9}\n", input::excerpt(p["property"].get<std::string>(), 80),
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
                 input::excerpt(f["property"].get<std::string>(), 80), input::excerpt(f["case_id"].get<std::string>(), 200),
                 f["seed"].get<uint64_t>(),
                 f["shard"].get<std::string>(), f["found_by"].size(), input::excerpt(f["message"].get<std::string>(), 1000),
                 input::excerpt(f["shrunk_case"].get<std::string>(), 1000), input::excerpt(null_or(f["saved"], "(not saved)"), 400));
    }
  }
  if (!m["not_passed"].empty()) {
    fmt::print("\n{} shard report(s) keep the campaign from passing:\n", m["not_passed"].size());
    for (const auto& why : m["not_passed"]) fmt::print("  {}\n", input::excerpt(why.get<std::string>(), 400));
  }
  fmt::print("\npav report merge: {}\n", m["exit_code"].get<int>() == 0 ? "PASS" : "FAIL (a shard failed or did not complete)");
}

int run(std::vector<std::string> args) {
  CLI::App app{"Fleet results from per-run fuzz reports (pav fuzz --report).", "report"};
  app.require_subcommand(1, 1);
  CLI::App* merge = app.add_subcommand("merge", "merge the reports of one sharded fuzz campaign into one fleet result");
  merge->footer(
      "The reports must be one campaign: every shard I/N of one base seed, kernel, property list and pav build, "
      "each once (a shard resumed in segments gives each segment's report, chained from case 0). The summary: "
      "cases/s per property across shards, the seed prefix every shard covered, failures deduplicated by shrunk "
      "case.\nExit 0 every shard passed and completed its budget; 1 a shard found a failure or was stopped before "
      "its budget was spent (each named, with why); 2 a report that is malformed or contradicts itself, or reports "
      "that do not make one campaign (the message names the file and field, or the shard); 3 a report could not be "
      "read or the result not written.");
  std::vector<std::string> files;
  merge->add_option("REPORT", files, "the shards' report files")->required();
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
  // Strings of the reports and the file names go out as given; bytes that are
  // not UTF-8 (a file name, a host name) are replaced, never thrown on.
  r.merged = ojson::parse(r.merged.dump(-1, ' ', false, ojson::error_handler_t::replace));
  // Named on stderr too, so a --json run's log says which shard and why.
  if (!output.text())
    for (const std::string& why : r.not_passed) fmt::print(stderr, "pav report merge: {}\n", input::excerpt(why, 400));
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
