// SPDX-License-Identifier: Apache-2.0
// pav fuzz: long property runs that find, shrink, save and replay. See
// docs/cli.md and docs/fuzzing.md.
#include <fmt/core.h>

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <ctime>
#include <filesystem>
#include <optional>
#include <chrono>
#include <fstream>
#include <random>

#include "input/json_input.hpp"
#include "properties/case_format.hpp"
#include "common/durable_file.hpp"
#include "properties/fuzz_engine.hpp"
#include "properties/fuzz_report.hpp"
#include "tools/backend_option.hpp"
#include "tools/fuzz_output.hpp"
#include "tools/kernel_option.hpp"
#include "tools/options.hpp"
#include "tools/stop.hpp"

namespace {

using namespace pav;
namespace fz = pav::props::fuzz;
using ojson = nlohmann::ordered_json;

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

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// --resume REPORT: the report, read and checked (bad input names the file).
// Through the shared bounded reader: not a regular file, past the size limit,
// nested past kMaxJsonDepth or not JSON is refused by name.
fz::ResumeSource read_resume(const std::string& path) {
  nlohmann::json j;
  try {
    j = input::read_json_file(path);
  } catch (const input::InputError& e) {
    throw cli::BadInput(std::string("--resume ") + e.what());
  }
  try {
    return fz::read_resume_source(j, path);
  } catch (const fz::ReportError& e) {
    throw cli::BadInput(std::string("--resume ") + e.what());
  }
}

int list_properties(const cli::ReportOutput& output, const std::vector<fz::Property>& available) {
  ojson j = cli::report_header("fuzz");
  j["properties"] = ojson::array();
  for (const auto& p : available) {
    if (output.text()) fmt::print("{:<18} {}\n", p.name, p.summary);
    j["properties"].push_back({{"name", p.name}, {"summary", p.summary}, {"host_only", p.host_only}});
  }
  return output.finish(j, cli::kExitOk, "fuzz");
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
  app.add_option("--jobs", jobs, "worker threads, each on its own seed stream")->check(cli::integer_in(1, 1024));
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
  cli::ReplayOptions replay_options;
  cli::KernelOptions& kernel_options = replay_options.kernel;
  cli::add_kernel_options(app, kernel_options);
  cli::add_trust_case_kernel_option(app, replay_options);
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  if (!replay.empty()) {
    // The one replay path pav replay takes: the kernel each case records (or
    // --kernel), never pav's own kernels in place of a foreign one.
    replay_options.backend_name = backend_name;
    replay_options.timeout_given = app.get_option("--timeout")->count() > 0;
    return cli::replay_case_files("fuzz", "replays", replay, replay_options, output);
  }
  if (replay_options.trust_case_kernel) throw cli::BadInput("--trust-case-kernel: only with --replay");
  output.check_writable();
  const auto wall0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  const std::string started_at = utc_now();
  if (opt_budget->count() > 0 && opt_minutes->count() > 0)
    throw cli::BadInput("--time-budget and --minutes: give one time budget");
  if (!report_path.empty() && !resume_path.empty() &&
      std::filesystem::weakly_canonical(report_path) == std::filesystem::weakly_canonical(resume_path))
    throw cli::BadInput("--report " + report_path +
                        ": the same file as --resume would replace the earlier run's report, whose cases a merge "
                        "needs; name a new file");
  if (!report_path.empty()) pav::check_writable_file(report_path, "--report " + report_path);

  // With --kernel, the properties are the kernel's, generated within its description;
  // without, pav's planner and gate properties and its own kernels' (the same kernel properties).
  std::unique_ptr<adapters::KernelUnderTest> kernel;
  if (!kernel_options.specs.empty()) kernel = cli::open_kernel(kernel_options.specs.front(), kernel_options);
  const std::vector<fz::Property> available =
      kernel ? fz::kernel_properties(*kernel) : fz::properties();
  if (list) return list_properties(output, available);
  const kernels::Backend backend = cli::pick_backend(backend_name);

  fz::FuzzOptions o;
  parse_shard(shard, o.shard_index, o.shard_count);
  std::optional<fz::ResumeSource> resume;
  if (!resume_path.empty()) {
    // The earlier run fixes the campaign: base seed, shard, properties, kernel.
    resume = read_resume(resume_path);
    const std::string what = "--resume " + resume_path + ": the report is of ";
    const std::string its_shard = fmt::format("{}/{}", resume->shard_index, resume->shard_count);
    if (opt_seed->count() > 0 && seed != resume->base_seed)
      throw cli::BadInput(what + "base seed " + std::to_string(resume->base_seed) + ", not " + std::to_string(seed));
    if (app.get_option("--shard")->count() > 0 && shard != its_shard)
      throw cli::BadInput(what + "shard " + its_shard + ", not " + shard);
    const nlohmann::json this_kernel = kernel ? nlohmann::json(adapters::identity_json(*kernel)) : nlohmann::json();
    if (resume->kernel != this_kernel)
      throw cli::BadInput(what + "kernel " + input::excerpt(resume->kernel) + ", this run tests " +
                          input::excerpt(this_kernel));
    if (resume->backend != cli::backend_name(backend))
      throw cli::BadInput(what + "backend " + resume->backend + ", this run uses " + cli::backend_name(backend));
    if (names.empty()) names = resume->properties;
    seed = resume->base_seed;
    o.shard_index = resume->shard_index;
    o.shard_count = resume->shard_count;
    o.resume = resume->points;
  }
  const std::vector<const fz::Property*> selected = cli::select_properties(names, available);
  if (resume) {
    std::vector<std::string> chosen;
    for (const auto* p : selected) chosen.push_back(p->name);
    if (chosen != resume->properties)
      throw cli::BadInput("--resume " + resume_path + ": the report ran other properties than --property names");
  }
  cli::check_save_dir(save_dir);
  if (opt_seed->count() == 0 && !resume) seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  o.seed = seed;
  o.cases = cases;
  if (opt_budget->count() > 0) minutes = parse_duration_seconds("--time-budget", time_budget) / 60;
  // --cases alone is a case budget; with a time budget too, whichever ends first.
  const bool timed = opt_minutes->count() > 0 || opt_budget->count() > 0;
  o.minutes = opt_cases->count() > 0 && !timed ? 0 : minutes;
  o.jobs = jobs;
  o.ctx.backend = backend;
  o.ctx.kernel = kernel.get();
  if (kernel) o.kernel_run = cli::kernel_run_record(kernel_options);
  o.save_dir = save_dir;
  o.shrink.max_tries = shrink_tries;
  o.shrink.max_seconds = shrink_minutes * 60;
  // A scheduler's time limit covers the whole run: shrinking too.
  if (opt_budget->count() > 0) o.shrink.max_seconds = std::min(o.shrink.max_seconds, minutes * 60);
  o.progress = !quiet;
  o.verbose = verbose;
  cli::install_stop_handlers();
  o.should_stop = cli::stop_requested;

  // With --json, stdout carries only the JSON report; the log goes to stderr.
  std::FILE* log = output.text() ? stdout : stderr;
  fz::FuzzReport r;
  try {
    r = fz::run_fuzz(o, selected, log, stderr);
  } catch (const fz::JobsUnavailable& e) {
    throw cli::CannotRun(e.what());
  }
  const int rc = cli::fuzz_exit_code(r);
  const fz::PropertyRun* failed = r.first_failure();
  int64_t total = 0;
  for (const auto& run : r.runs) total += run.cases;
  if (r.interrupted)
    fmt::print(log, "\npav fuzz: stopped by {} after {} case(s) in {} of {} properties\n", cli::stop_signal_name(),
               total, r.runs.size(), selected.size());
  if (failed)
    fmt::print(log, "\npav fuzz: FAIL {} (seed {}){}\n", failed->property, failed->failure->seed,
               !failed->saved_path.empty() ? "; counterexample " + failed->saved_path
               : failed->save_error.empty() ? std::string()
                                            : "; counterexample NOT SAVED: " + failed->save_error);
  else if (!r.interrupted)
    fmt::print(log, "\npav fuzz: PASS (seed {}, shard {}/{}, {} cases)\n", o.seed, o.shard_index, o.shard_count,
               total);
  else
    fmt::print(log, "pav fuzz: no failure in what ran (not a pass: the budget was not spent)\n");

  // The report: --json prints it, --json-out and --report write it.
  ojson j = cli::report_header("fuzz");
  j["format"] = fz::kFuzzReportFormat;
  j["base_seed"] = o.seed;
  j["shard"] = fmt::format("{}/{}", o.shard_index, o.shard_count);
  j["shard_index"] = o.shard_index;
  j["shard_count"] = o.shard_count;
  j["seed_rule"] = "case k of shard I/N has seed base_seed + k*N + I";
  j["jobs"] = o.jobs;
  j["backend"] = cli::backend_name(backend);
  j["device"] = cli::device_description(backend);
  j["host"] = host_name();
  j["kernel"] = kernel ? ojson(adapters::identity_json(*kernel)) : ojson(nullptr);
  j["properties"] = ojson::array();
  for (const auto* p : selected) j["properties"].push_back(p->name);
  j["budget"] = {{"cases_per_property", o.cases > 0 ? ojson(o.cases) : ojson(nullptr)},
                 {"minutes", o.minutes > 0 ? ojson(o.minutes) : ojson(nullptr)},
                 {"shrink_seconds", o.shrink.max_seconds},
                 {"shrink_tries", o.shrink.max_tries}};
  j["save_dir"] = o.save_dir;
  j["started_at"] = started_at;
  j["wall_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  j["cpu_seconds"] = process_cpu_seconds() - cpu0;
  j["passed"] = rc == cli::kExitOk;
  j["exit_code"] = rc;
  j["interrupted"] = r.interrupted;
  if (r.interrupted) j["signal"] = cli::stop_signal_name();
  j["runs"] = ojson::array();
  for (const auto& run : r.runs) j["runs"].push_back(cli::property_run_json(run));
  // Where each property's stream stands before and after: --resume reads
  // "resume"; a property the run did not reach stays where it was.
  j["resumed_from"] = resume_path.empty() ? ojson(nullptr) : ojson(resume_path);
  j["resumed"] = ojson::object();
  j["resume"] = ojson::object();
  for (const auto* p : selected) {
    fz::StreamPoint from, to;
    if (auto it = o.resume.find(p->name); it != o.resume.end()) from = to = it->second;
    for (const auto& run : r.runs)
      if (run.property == p->name) to = run.to;
    j["resumed"][p->name] = fz::stream_point_json(from);
    j["resume"][p->name] = fz::stream_point_json(to);
  }
  if (!report_path.empty()) {
    try {
      pav::write_file_atomically(report_path, j.dump(2) + "\n");
      fmt::print(log, "pav fuzz: report {}\n", report_path);
    } catch (const pav::IoError& e) {
      fmt::print(stderr, "pav fuzz: {}\n", e.what());
      // The verdict stands; a lost report on a pass is "could not run".
      output.finish(j, rc, "fuzz");
      return rc == cli::kExitOk ? cli::kExitCannotRun : rc;
    }
  }
  return output.finish(j, rc, "fuzz");
}

}  // namespace

PAV_COMMAND("fuzz", "long property runs: find a failure, shrink it, save it as a case file, replay it", run);
