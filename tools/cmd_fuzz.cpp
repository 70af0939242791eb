// SPDX-License-Identifier: Apache-2.0
// pav fuzz: long property runs that find, shrink, save and replay
// (session::fuzz, and session::replay for --replay). See docs/cli.md and
// docs/fuzzing.md.
#include <fmt/core.h>

#include <algorithm>
#include <charconv>

#include "properties/engine/fuzz_engine.hpp"
#include "tools/backend_option.hpp"
#include "tools/kernel_option.hpp"

namespace {

using namespace pav;
namespace fz = pav::props::fuzz;

// "I/N" with 0 <= I < N.
void parse_shard(const std::string& text, int& index, int& count) {
  const auto slash = text.find('/');
  auto number = [&](std::string_view s, int& out) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), index) ||
      !number(std::string_view(text).substr(slash + 1), count) || count < 1 || index < 0 || index >= count)
    throw cli::BadInput("--shard: expected I/N with 0 <= I < N, got '" + text.substr(0, 40) + "'");
}

// A duration: a number and a unit, s, m or h ("90s", "20m", "1.5h").
double parse_duration_seconds(const std::string& option, const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, value);
  double unit = 0;
  if (r.ec == std::errc() && r.ptr + 1 == end) unit = *r.ptr == 's' ? 1 : *r.ptr == 'm' ? 60 : *r.ptr == 'h' ? 3600 : 0;
  if (unit == 0 || !(value > 0) || value * unit > cli::kMaxMinutes * 60)
    throw cli::BadInput(option + ": expected a duration above 0 and at most a week, with its unit (90s, 20m, 1.5h), got '" +
                        text.substr(0, 40) + "'");
  return value * unit;
}

int run(std::vector<std::string> args) {
  CLI::App app{"Run the property generators at scale: stop at the first failure or the budget, shrink it, and "
               "save the minimal counterexample as a case file. SIGINT/SIGTERM stop cleanly with a summary.",
               "fuzz"};
  double minutes = 1;
  int64_t cases = 0;
  uint64_t seed = 0;
  std::vector<std::string> names;
  std::string backend_name = "auto";
  std::string save_dir;
  int jobs = 1;
  std::string shard = "0/1";
  bool list = false, quiet = false, verbose = false;
  std::vector<std::string> replay;
  int64_t shrink_tries = fz::ShrinkLimits{}.max_tries;
  double shrink_minutes = fz::ShrinkLimits{}.max_seconds / 60;
  cli::ReportOutput output;
  auto* opt_minutes =
      app.add_option("--minutes", minutes,
                     "time budget for all selected properties together (the default when --cases is not given)")
          ->check(cli::finite_in(0, cli::kMaxMinutes, true));
  auto* opt_cases = app.add_option("--cases", cases, "cases per property")
                        ->check(cli::integer_in(1, int64_t(1) << 40))
                        ->default_str("no case budget");
  auto* opt_seed = app.add_option("--seed", seed, "base seed (default: drawn at random, and printed)")
                       ->check(cli::seed_value())
                       ->default_str("random");
  app.add_option("--property", names, "property to run (repeatable or comma-separated; default: all; see --list)");
  cli::add_backend_option(app, backend_name);
  cli::add_save_option(app, save_dir);
  app.add_option("--jobs", jobs, "worker threads, each on its own seed stream")
      ->check(cli::integer_in(1, session::kMaxJobs));
  app.add_option("--shard", shard, "I/N: run the I-th of N disjoint seed streams (seed = base + k*N + I)");
  app.add_flag("--list", list, "name every property and exit");
  app.add_option("--replay", replay, "re-run saved case files through the property their meta names")
      ->check(CLI::ExistingFile);
  app.add_option("--shrink-tries", shrink_tries, "most property evaluations while shrinking")
      ->check(cli::integer_in(0, int64_t(1) << 40));
  app.add_option("--shrink-minutes", shrink_minutes, "most time spent shrinking")
      ->check(cli::finite_in(0, cli::kMaxMinutes));
  app.add_flag("--quiet", quiet, "no progress line");
  app.add_flag("--verbose", verbose, "print every case's seed as it runs");
  std::string report_path, resume_path, time_budget;
  app.add_option("--report", report_path,
                 "write the run's report (JSON: version, kernel, device, shard, seeds, times, cases and failures per "
                 "property, where each seed stream stopped) to FILE, durably, also after a stop; pav report merge "
                 "combines shards' reports")
      ->check(cli::non_empty());
  auto* opt_budget = app.add_option("--time-budget", time_budget,
                                    "wall-clock budget with its unit (90s, 20m, 1.5h), as --minutes; shrinking a "
                                    "failure is held to it too");
  app.add_option("--resume", resume_path,
                 "continue the seed streams of an earlier run's --report (its base seed, shard and properties) "
                 "instead of repeating seeds")
      ->check(CLI::ExistingFile);
  cli::KernelOptions kernel_options;
  bool trust_case_kernel = false, keep_going = false;
  cli::add_kernel_options(app, kernel_options);
  cli::add_trust_case_kernel_option(app, trust_case_kernel);
  app.add_flag("--keep-going", keep_going, "after a failure (shrunk and saved), go on with the next property");
  bool regions = false;
  app.add_flag("--regions", regions,
               "with --kernel: decode draws half its calls from the regions where decode bugs sit (as pav verify "
               "does) and counts them");
  int shapes = 0;
  app.add_option("--shapes", shapes,
                 "with --kernel: draw the decode calls in this many shapes (for a kernel that compiles per shape), "
                 "varying lengths, tables, data and variant values within them; 0: each call its own shape")
      ->check(cli::integer_in(0, session::kMaxShapes))
      ->capture_default_str();
  uint64_t shape_seed = 0;
  auto* opt_shape_seed =
      app.add_option("--shape-seed", shape_seed, "with --shapes: the seed the shapes are drawn from (default: --seed)")
          ->check(cli::seed_value());
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  if (!replay.empty()) {
    // The one replay path pav replay takes: the kernel each case records (or
    // --kernel), never pav's own kernels in place of a foreign one.
    session::ReplayOptions r;
    r.files = replay;
    r.backend = backend_name;
    r.kernel = kernel_options;
    r.timeout_given = app.get_option("--timeout")->count() > 0;
    r.trust_case_kernel = trust_case_kernel;
    r.command = "fuzz";
    r.array_key = "replays";
    output.check_writable();
    return output.finish(session::replay(r, output.io(true)), "fuzz");
  }
  if (trust_case_kernel) throw cli::BadInput("--trust-case-kernel: only with --replay");
  output.check_writable();
  if (opt_budget->count() > 0 && opt_minutes->count() > 0)
    throw cli::BadInput("--time-budget and --minutes: give one time budget");
  session::FuzzOptions o;
  o.backend = backend_name;
  if (opt_seed->count() > 0) o.seed = seed;
  if (app.get_option("--shard")->count() > 0) {
    o.shard.emplace();
    parse_shard(shard, o.shard->index, o.shard->count);
  }
  o.properties = names;
  o.kernel = kernel_options;
  o.save_dir = save_dir;
  o.jobs = jobs;
  o.cases = opt_cases->count() > 0 ? cases : 0;
  if (opt_budget->count() > 0) minutes = parse_duration_seconds("--time-budget", time_budget) / 60;
  // --cases alone is a case budget; with a time budget too, whichever ends first.
  const bool timed = opt_minutes->count() > 0 || opt_budget->count() > 0;
  o.minutes = opt_cases->count() > 0 && !timed ? 0 : minutes;
  o.shrink_tries = shrink_tries;
  o.shrink_seconds = shrink_minutes * 60;
  // A scheduler's time limit covers the whole run: shrinking too.
  if (opt_budget->count() > 0) o.shrink_seconds = std::min(o.shrink_seconds, minutes * 60);
  o.keep_going = keep_going;
  o.regions = regions;
  o.shapes = shapes;
  if (opt_shape_seed->count() > 0) o.shape_seed = shape_seed;
  o.verbose = verbose;
  o.list = list;
  o.report_path = report_path;
  o.resume_path = resume_path;
  return output.finish(session::fuzz(o, output.io(quiet)), "fuzz");
}

}  // namespace

PAV_COMMAND("fuzz", "long property runs: find a failure, shrink it, save it as a case file, replay it", run);
