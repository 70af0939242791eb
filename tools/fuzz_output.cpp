// SPDX-License-Identifier: Apache-2.0
#include "tools/fuzz_output.hpp"

#include <algorithm>

#include "common/durable_file.hpp"
#include "common/text_list.hpp"
#include "properties/counterexample.hpp"
#include "properties/fuzz_report.hpp"

namespace pav::cli {

namespace fz = pav::props::fuzz;

CLI::Option* add_save_option(CLI::App& app, std::string& dir) {
  dir = props::default_counterexample_dir();
  return app.add_option("--save", dir,
                        "folder for counterexample case files (default: $PAV_COUNTEREXAMPLE_DIR, else "
                        "./counterexamples)");
}

void check_save_dir(const std::string& dir) { pav::check_writable_dir(dir, "--save " + dir); }

std::vector<const fz::Property*> select_properties(const std::vector<std::string>& names) {
  return select_properties(names, fz::properties());
}

std::vector<const fz::Property*> select_properties(const std::vector<std::string>& names,
                                                   const std::vector<fz::Property>& available) {
  std::vector<const fz::Property*> out;
  for (const std::string& option_value : names)
    for (const std::string& n : pav::split_list(option_value)) {
      const fz::Property* p = nullptr;
      for (const auto& q : available)
        if (q.name == n) p = &q;
      if (!p) {
        std::string known;
        for (const auto& q : available) known += (known.empty() ? "" : ", ") + q.name;
        throw BadInput("--property: unknown property '" + n.substr(0, 60) + "' (known: " + known + ")");
      }
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
  if (out.empty())
    for (const auto& p : available) out.push_back(&p);
  return out;
}

nlohmann::ordered_json property_run_json(const fz::PropertyRun& run) {
  nlohmann::ordered_json j;
  j["property"] = run.property;
  j["cases"] = run.cases;
  j["seconds"] = run.seconds;
  j["cpu_seconds"] = run.cpu_seconds;
  j["cases_per_job"] = run.cases_per_job;
  j["interrupted"] = run.interrupted;
  j["passed"] = !run.failure.has_value();
  j["seeds"] = {{"from", props::fuzz::stream_point_json(run.from)}, {"to", props::fuzz::stream_point_json(run.to)}};
  if (run.failure) {
    const fz::Found& f = *run.failure;
    j["failure"] = {{"seed", f.seed},
                    {"size", f.size},
                    {"first_message", f.first_message},
                    {"message", f.message},
                    {"shrunk_case", f.description},
                    {"reproduced", f.reproduced},
                    // The shrunk case's name without its seed: the same minimal case found
                    // from different seeds (or shards) has the same id.
                    {"case_id", f.reproduced ? nlohmann::ordered_json(props::case_id(f.property, f.spec, f.meta))
                                             : nlohmann::ordered_json(nullptr)},
                    {"shrink_hit_limit", f.shrink_hit_limit},
                    {"saved", run.saved_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(run.saved_path)},
                    {"save_error", run.save_error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(run.save_error)},
                    {"reproduce", "pav fuzz --property " + f.property + " --seed " + std::to_string(f.seed) +
                                      " --cases 1"}};
  }
  return j;
}

int fuzz_exit_code(const fz::FuzzReport& report) {
  if (!report.passed()) return kExitFail;
  if (report.interrupted) return kExitCannotRun;
  for (const auto& r : report.runs)
    if (!r.save_error.empty()) return kExitCannotRun;
  return kExitOk;
}

}  // namespace pav::cli
