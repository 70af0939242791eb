// SPDX-License-Identifier: Apache-2.0
// pav trace-stats: how uneven the decode batches of a trace are, and how much a
// length-proportional planner could shorten the longest request's critical path.
#include "stats/inputs.hpp"
#include "stats/trace.hpp"
#include "tools/command.hpp"
#include "tools/options.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace {

using json = nlohmann::ordered_json;
namespace cli = pav::cli;
namespace st = pav::stats;

json spread_json(const st::Spread& s) {
  if (s.steps == 0) return {{"steps", 0}, {"p50", nullptr}, {"p90", nullptr}, {"max", nullptr}};
  return {{"steps", s.steps}, {"p50", s.p50}, {"p90", s.p90}, {"max", s.max}};
}

void print_spread(const char* what, const st::Spread& s) {
  if (s.steps == 0) {
    fmt::print("  {:<10} no step has a value\n", what);
    return;
  }
  fmt::print("  {:<10} p50 {:<10.4g} p90 {:<10.4g} max {:<10.4g} ({} steps)\n", what, s.p50, s.p90, s.max, s.steps);
}

int run_trace_stats(std::vector<std::string> args) {
  CLI::App app{
      "Unevenness of a decode trace. TRACE is JSONL, one decode step per line: {\"context_lens\": [...]}. "
      "Per step: max/min context ratio (lengths <= 0 left out of the min) and the planner headroom c/u: "
      "u = min(P, max(1, floor(W/B))), c = min(P, max(1, floor(W*len_max/sum))).",
      "trace-stats"};
  std::string file;
  st::PlannerModel model;
  cli::ReportOutput output;
  app.add_option("TRACE", file, "trace (JSONL)")->required();
  app.add_option("--budget", model.budget, "workgroup budget W")->check(cli::integer_in(1, cli::kMaxBudget));
  app.add_option("--max-partitions", model.max_partitions, "max partitions per request P")
      ->check(cli::integer_in(1, cli::kMaxCu));
  output.add_options(app);
  if (const int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();

  st::TraceSummary t;
  try {
    t = st::summarize_trace(st::read_trace(file), model);
  } catch (const st::InputError& e) {
    throw cli::BadInput(e.what());
  }
  json hist = json::array();
  for (const auto& [batch, steps] : t.batch_histogram) hist.push_back({{"batch", batch}, {"steps", steps}});
  json j = cli::report_header("trace-stats");
  j["file"] = file;
  j["budget"] = model.budget;
  j["max_partitions"] = model.max_partitions;
  j["steps"] = t.steps;
  j["ratio"] = spread_json(t.ratio);
  j["ratio_above_4"] = t.ratio_above_4;
  j["frac_ratio_above_4"] = t.frac_ratio_above_4;
  j["headroom"] = spread_json(t.headroom);
  j["headroom_above_1"] = t.headroom_above_1;
  j["batch_histogram"] = hist;
  if (!output.text()) return output.finish(j, cli::kExitOk, "trace-stats");
  fmt::print("trace-stats: {}, {} steps; planner model W = {} workgroups, P = {} partitions\n\n", file, t.steps,
             model.budget, model.max_partitions);
  print_spread("max/min", t.ratio);
  if (t.ratio.steps > 0) {
    fmt::print("  {:<10} {} of {} steps above 4x ({:.1f}%)\n", "", t.ratio_above_4, t.ratio.steps,
               100.0 * t.frac_ratio_above_4);
  }
  print_spread("headroom", t.headroom);
  if (t.headroom.steps > 0) {
    fmt::print("  {:<10} {} of {} steps above 1 (c/u: longest request's proportional vs uniform partitions)\n", "",
               t.headroom_above_1, t.headroom.steps);
  }
  fmt::print("\n  {:>6}  {:>6}  {}\n", "batch", "steps", "share");
  for (const auto& [batch, steps] : t.batch_histogram) {
    fmt::print("  {:>6}  {:>6}  {:.1f}%\n", batch, steps, 100.0 * static_cast<double>(steps) / static_cast<double>(t.steps));
  }
  return output.finish(j, cli::kExitOk, "trace-stats");
}

}  // namespace

PAV_COMMAND("trace-stats", "context-length unevenness of a decode trace and the planner's headroom",
            run_trace_stats);
