// pav trace-stats: how uneven the decode batches of a trace are, and how much a
// length-proportional planner could shorten the longest request's critical path.
#include "stats/inputs.hpp"
#include "stats/trace.hpp"
#include "tools/command.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;
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
  bool as_json = false;
  st::PlannerModel model;
  app.add_option("TRACE", file, "trace (JSONL)")->required();
  app.add_option("--budget", model.budget, "workgroup budget W")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-partitions", model.max_partitions, "max partitions per request P")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
      ->capture_default_str();
  app.add_flag("--json", as_json, "print JSON instead of a table");
  if (const int rc = pav::cli::parse(app, args); rc >= 0) return rc;

  st::TraceSummary t;
  try {
    t = st::summarize_trace(st::read_trace(file), model);
  } catch (const st::InputError& e) {
    throw pav::cli::BadInput(e.what());
  }
  if (as_json) {
    json hist = json::array();
    for (const auto& [batch, steps] : t.batch_histogram) hist.push_back({{"batch", batch}, {"steps", steps}});
    json j{{"file", file},
           {"budget", model.budget},
           {"max_partitions", model.max_partitions},
           {"steps", t.steps},
           {"ratio", spread_json(t.ratio)},
           {"ratio_above_4", t.ratio_above_4},
           {"frac_ratio_above_4", t.frac_ratio_above_4},
           {"headroom", spread_json(t.headroom)},
           {"headroom_above_1", t.headroom_above_1},
           {"batch_histogram", hist}};
    fmt::print("{}\n", j.dump(2));
    return pav::cli::kExitOk;
  }
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
  return pav::cli::kExitOk;
}

}  // namespace

PAV_COMMAND("trace-stats", "context-length unevenness of a decode trace and the planner's headroom",
            run_trace_stats);
