// pav fuzz: long property runs that find, shrink, save and replay. See
// docs/cli.md and docs/fuzzing.md.
#include <fmt/core.h>

#include <charconv>
#include <random>

#include "properties/case_format.hpp"
#include "properties/fuzz.hpp"
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

int list_properties(const cli::ReportOutput& output, const std::vector<fz::Property>& available) {
  ojson j = cli::report_header("fuzz");
  j["properties"] = ojson::array();
  for (const auto& p : available) {
    if (output.text()) fmt::print("{:<18} {}\n", p.name, p.summary);
    j["properties"].push_back({{"name", p.name}, {"summary", p.summary}, {"host_only", p.host_only}});
  }
  return output.finish(j, cli::kExitOk, "fuzz");
}

int replay_files(const std::vector<std::string>& files, const fz::CheckContext& ctx, const cli::ReportOutput& output) {
  const kernels::Backend backend = ctx.backend;
  const std::string runner = ctx.kernel ? adapters::identity(*ctx.kernel) : cli::backend_name(backend) + std::string(" backend");
  int failures = 0;
  ojson j = cli::report_header("fuzz");
  j["backend"] = cli::backend_name(backend);
  if (ctx.kernel) j["kernel"] = adapters::identity_json(*ctx.kernel);
  j["replays"] = ojson::array();
  for (const auto& file : files) {
    std::string property;
    fz::Verdict v;
    try {
      v = fz::replay_case_file(file, ctx, &property);
    } catch (const props::CaseError& e) {
      throw cli::BadInput(e.what());
    }
    if (output.text())
      fmt::print("{}: {} ({}): {}\n", file, property, runner, v.passed ? "PASS" : "FAIL: " + v.message);
    j["replays"].push_back({{"case", file}, {"property", property}, {"passed", v.passed}, {"verdict", v.message}});
    if (!v.passed) ++failures;
  }
  if (output.text() && files.size() > 1) fmt::print("{} of {} cases passed\n", files.size() - failures, files.size());
  j["passed"] = failures == 0;
  return output.finish(j, failures ? cli::kExitFail : cli::kExitOk, "fuzz");
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
  cli::KernelOptions kernel_options;
  cli::add_kernel_options(app, kernel_options);
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();

  // With --kernel, the properties are the kernel's, generated within its description.
  std::unique_ptr<adapters::KernelUnderTest> kernel;
  if (!kernel_options.specs.empty()) kernel = cli::open_kernel(kernel_options.specs.front(), kernel_options);
  const std::vector<fz::Property> available =
      kernel ? fz::kernel_properties(kernel->description()) : fz::properties();
  if (list) return list_properties(output, available);
  const kernels::Backend backend = cli::pick_backend(backend_name);
  if (!replay.empty()) return replay_files(replay, {backend, kernel.get()}, output);

  fz::FuzzOptions o;
  parse_shard(shard, o.shard_index, o.shard_count);
  const std::vector<const fz::Property*> selected = cli::select_properties(names, available);
  cli::check_save_dir(save_dir);
  if (opt_seed->count() == 0) seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  o.seed = seed;
  o.cases = cases;
  // --cases alone is a case budget; with --minutes too, whichever ends first.
  o.minutes = opt_cases->count() > 0 && opt_minutes->count() == 0 ? 0 : minutes;
  o.jobs = jobs;
  o.ctx.backend = backend;
  o.ctx.kernel = kernel.get();
  o.save_dir = save_dir;
  o.shrink.max_tries = shrink_tries;
  o.shrink.max_seconds = shrink_minutes * 60;
  o.progress = !quiet;
  o.verbose = verbose;
  cli::install_stop_handlers();
  o.should_stop = cli::stop_requested;

  // With --json, stdout carries only the JSON report; the log goes to stderr.
  std::FILE* log = output.text() ? stdout : stderr;
  const fz::FuzzReport r = fz::run_fuzz(o, selected, log, stderr);
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

  ojson j = cli::report_header("fuzz");
  j["base_seed"] = o.seed;
  j["shard"] = fmt::format("{}/{}", o.shard_index, o.shard_count);
  j["jobs"] = o.jobs;
  j["backend"] = cli::backend_name(backend);
  if (kernel) j["kernel"] = adapters::identity_json(*kernel);
  j["save_dir"] = o.save_dir;
  j["passed"] = rc == cli::kExitOk;
  j["interrupted"] = r.interrupted;
  if (r.interrupted) j["signal"] = cli::stop_signal_name();
  j["runs"] = ojson::array();
  for (const auto& run : r.runs) j["runs"].push_back(cli::property_run_json(run));
  return output.finish(j, rc, "fuzz");
}

}  // namespace

PAV_COMMAND("fuzz", "long property runs: find a failure, shrink it, save it as a case file, replay it", run);
