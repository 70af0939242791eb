// SPDX-License-Identifier: Apache-2.0
// pav verify: the main job. A quick verification of the planner and the decode
// kernels against the reference: the planner and decode properties through the
// same engine as pav fuzz (first failure shrunk and saved), then the quick
// drift sweep; a summary table, or JSON.
#include <fmt/core.h>

#include <chrono>
#include <memory>

#include "common/text_list.hpp"
#include "kernels/validate.hpp"
#include "properties/drift_run.hpp"
#include "properties/fuzz_engine.hpp"
#include "tools/backend_option.hpp"
#include "tools/drift_progress.hpp"
#include "tools/fuzz_output.hpp"
#include "tools/kernel_compare.hpp"
#include "tools/kernel_option.hpp"
#include "tools/options.hpp"
#include "tools/stop.hpp"

namespace {

using namespace pav;
namespace fz = pav::props::fuzz;
using ojson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct CheckResult {
  CheckResult(std::string n, std::string w) : name(std::move(n)), what(std::move(w)) {}
  std::string name;
  std::string what;
  int64_t cases = 0;
  double seconds = 0;
  bool ran = false, passed = true, interrupted = false;
  std::string skipped;   // why the check did not run (a skipped check is not a pass)
  std::string failure;   // one line: the first failure
  ojson detail;          // the engine's run, for JSON
  std::string save_error;
};

struct VerifyContext {
  kernels::Backend backend;
  uint64_t seed;
  std::string save_dir;
  bool progress;
  std::FILE* log;
  adapters::KernelUnderTest* kernel = nullptr;        // --kernel: its properties instead of pav's kernels'
  const std::vector<fz::Property>* kernel_props = nullptr;
  nlohmann::json kernel_run = nlohmann::json::object();  // how it was opened, for saved cases
};

const fz::Property* property_named(const VerifyContext& v, const std::string& name) {
  if (!v.kernel) return fz::find_property(name);
  for (const fz::Property& p : *v.kernel_props)
    if (p.name == name) return &p;
  return nullptr;
}

CheckResult property_check(const VerifyContext& v, const char* property, const char* what, int64_t cases) {
  CheckResult r{property, what};
  const fz::Property* p = property_named(v, property);
  if (!p) {
    r.skipped = std::string(property) == "stale"
                    ? "the kernel splits by itself (split = self): it is handed no plan"
                    : "the kernel has no check entry (pav_kernel_check, or \"check\": true for a worker)";
    return r;
  }
  fz::FuzzOptions o;
  o.cases = cases;
  o.seed = v.seed;
  o.ctx.backend = v.backend;
  o.ctx.kernel = v.kernel;
  o.kernel_run = v.kernel_run;
  o.save_dir = v.save_dir;
  o.progress = v.progress;
  o.label = "pav verify";
  o.should_stop = cli::stop_requested;
  fz::FuzzReport rep;
  try {
    rep = fz::run_fuzz(o, {p}, v.log, stderr);
  } catch (const fz::JobsUnavailable& e) {
    throw cli::CannotRun(e.what());
  }
  r.ran = !rep.runs.empty();
  r.interrupted = rep.interrupted;
  if (!r.ran) return r;
  const fz::PropertyRun& run = rep.runs.front();
  r.cases = run.cases;
  r.detail = cli::property_run_json(run);
  r.save_error = run.save_error;
  if (run.failure) {
    const fz::Found& f = *run.failure;
    r.passed = false;
    r.failure = fmt::format("seed {}: {}", f.seed, f.first_message);
    if (f.reproduced) r.failure += fmt::format("; shrunk: {}: {}", f.description, f.message);
    r.failure += !run.saved_path.empty()   ? " (saved " + run.saved_path + ")"
                 : !run.save_error.empty() ? " (NOT SAVED: " + run.save_error + ")"
                                           : " (not saved: it did not recur when regenerated)";
  }
  return r;
}

// The quick drift sweep (the same as fixtures/drift-quick.json): no error
// growth from the lowest to the highest split ceiling, no mismatch against the
// comparison standard, and the positive control's growth is detected.
CheckResult drift_check(const VerifyContext& v) {
  CheckResult r{"drift", v.kernel ? "quick drift sweep through the kernel: no error growth from split ceiling 8 to 256"
                                  : "quick drift sweep: no error growth from split ceiling 8 to 256; positive control "
                                    "flips"};
  props::DriftSweep sweep = props::builtin_quick_sweep();
  props::DriftRunOptions opt;
  opt.backend = v.backend;
  opt.kernel = v.kernel;
  if (v.kernel) {
    try {
      sweep = props::kernel_sweep(sweep, v.kernel->description());
    } catch (const std::invalid_argument& e) {
      r.skipped = e.what();
      return r;
    }
  }
  opt.progress = cli::drift_progress(std::make_shared<ProgressReporter>(stderr, v.progress));
  r.ran = true;
  try {
    const props::DriftReport rep = props::run_drift(sweep, props::drift_cells(sweep), opt);
    r.cases = int64_t(rep.cells.size());
    r.passed = rep.passed;
    r.failure = rep.first_failure;
    r.detail = {{"verdict", rep.verdict}, {"cells", rep.cells.size()}, {"growth", rep.growth},
                {"control_ok", rep.control_ok}, {"mismatches", rep.mismatches}};
  } catch (const cli::DriftStopped&) {
    r.interrupted = true;
  } catch (const kernels::RejectError& e) {
    // The built-in sweep is inside the kernels' domain: refusing it is a defect.
    r.passed = false;
    r.failure = std::string("the kernel rejected a call of the quick sweep: ") + e.what();
  } catch (const std::invalid_argument& e) {
    if (!v.kernel) throw;
    r.ran = false;  // the sweep's calls are outside what the kernel describes
    r.skipped = e.what();
  }
  return r;
}

// Two kernels: the paired comparison on identical cases; a defect in either
// (any case wrong) fails the verification.
int run_two(const cli::KernelOptions& kernels, uint64_t seed, int64_t cases, const std::string& out_dir, bool progress,
            const cli::ReportOutput& output) {
  output.check_writable();
  auto a = cli::open_kernel(kernels.specs[0], kernels);
  auto b = cli::open_kernel(kernels.specs[1], kernels);
  cli::install_stop_handlers();
  std::FILE* log = output.text() ? stdout : stderr;
  fmt::print(log, "pav verify: two kernels on {} identical cases, seed {}\n", cases, seed);
  std::fflush(log);
  ojson j = cli::report_header("verify");
  cli::PairedRunOptions o;
  o.cases = cases;
  o.seed = seed;
  o.out_dir = out_dir;
  o.progress = progress;
  const cli::PairedRunResult r = cli::run_paired(*a, *b, o, log, j);
  const bool failed = r.a_wrong > 0 || r.b_wrong > 0;
  const int rc = failed ? cli::kExitFail : r.interrupted ? cli::kExitCannotRun : cli::kExitOk;
  const char* verdict = failed ? "FAIL" : r.interrupted ? "STOPPED (not a pass)" : "PASS";
  if (output.text()) fmt::print("\nverdict: {} ({} wrong for A, {} for B)\n", verdict, r.a_wrong, r.b_wrong);
  j["passed"] = rc == cli::kExitOk;
  j["verdict"] = verdict;
  return output.finish(j, rc, "verify");
}

int run(std::vector<std::string> args) {
  CLI::App app{"Verify the planner and the decode kernels against the reference: property checks (first failure "
               "shrunk and saved, as pav fuzz does) and the quick drift sweep.",
               "verify"};
  std::string backend_name = "auto", save_dir, checks;
  uint64_t seed = 20261129;
  int64_t plan_cases = 500, decode_cases = 64;
  bool quiet = false;
  cli::ReportOutput output;
  cli::add_backend_option(app, backend_name);
  app.add_option("--seed", seed, "base seed: case k of a check has seed base + k (every failure prints its seed)")
      ->check(cli::seed_value());
  app.add_option("--plan-cases", plan_cases, "generated batches for the planner check")
      ->check(cli::integer_in(1, 1000000));
  app.add_option("--decode-cases", decode_cases, "generated calls for the decode check")
      ->check(cli::integer_in(1, 100000));
  auto* opt_checks = app.add_option("--checks", checks,
                                    "the checks to run, comma-separated: planner, decode, reject, stale, drift "
                                    "(default planner,decode,drift; with --kernel decode,reject,drift, and stale "
                                    "before drift for a kernel that runs pav's plan; pav's kernels take reject and "
                                    "stale too, through the same adapter)");
  int64_t reject_cases = 400;
  app.add_option("--reject-cases", reject_cases, "generated calls for the reject check")
      ->check(cli::integer_in(1, 1000000));
  int64_t stale_cases = 100;
  app.add_option("--stale-cases", stale_cases, "generated calls for the stale-plan check (a kernel that runs pav's plan)")
      ->check(cli::integer_in(1, 1000000));
  cli::KernelOptions kernel_options;
  cli::add_kernel_options(app, kernel_options, /*many=*/true);
  std::string out_dir = ".";
  app.add_option("--out-dir", out_dir, "two kernels: where compare-a.jsonl and compare-b.jsonl are written")
      ->check(cli::non_empty());
  cli::add_save_option(app, save_dir);
  app.add_flag("--quiet", quiet, "no progress line");
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;

  if (kernel_options.specs.size() > 2) throw cli::BadInput("--kernel: at most two kernels (A and B)");
  if (kernel_options.specs.size() == 2) return run_two(kernel_options, seed, decode_cases, out_dir, !quiet, output);
  // An empty --checks (a variable that expanded to nothing) names no check: it
  // is not a request for the default ones.
  if (opt_checks->count() > 0 && checks.empty())
    throw cli::BadInput("--checks: an empty list; name the checks (planner, decode, reject, stale, drift) or leave "
                        "the option out for the default ones");
  std::vector<std::string> chosen;
  for (const std::string& c : checks.empty() ? std::vector<std::string>{} : split_list(checks)) {
    if (c != "planner" && c != "decode" && c != "drift" && c != "reject" && c != "stale")
      throw cli::BadInput("--checks: unknown check '" + c.substr(0, 40) + "' (planner, decode, reject, stale, drift)");
    if (std::find(chosen.begin(), chosen.end(), c) == chosen.end()) chosen.push_back(c);
  }
  output.check_writable();
  const kernels::Backend backend = cli::pick_backend(backend_name);
  cli::check_save_dir(save_dir);
  cli::install_stop_handlers();
  std::unique_ptr<adapters::KernelUnderTest> kernel;
  std::vector<fz::Property> kernel_props;
  if (!kernel_options.specs.empty()) {
    kernel = cli::open_kernel(kernel_options.specs.front(), kernel_options);
    kernel_props = fz::kernel_properties(*kernel);
  }
  if (chosen.empty()) {  // the default checks (a kernel's stale check only where it runs pav's plan)
    const bool plan = kernel && kernel->description().split == adapters::Split::plan;
    chosen = !kernel ? std::vector<std::string>{"planner", "decode", "drift"}
             : plan  ? std::vector<std::string>{"decode", "reject", "stale", "drift"}
                     : std::vector<std::string>{"decode", "reject", "drift"};
  }
  const VerifyContext ctx{backend,      seed,          save_dir,
                          !quiet,       output.text() ? stdout : stderr,
                          kernel.get(), &kernel_props, cli::kernel_run_record(kernel_options)};

  if (kernel) {
    fmt::print(ctx.log, "pav verify: seed {}, counterexamples to {}\n", seed, save_dir);
    cli::print_kernel(ctx.log, *kernel);
  } else {
    fmt::print(ctx.log, "pav verify: backend {}, seed {}, counterexamples to {}\n", cli::backend_name(backend), seed,
               save_dir);
  }
  std::fflush(ctx.log);
  std::vector<CheckResult> results;
  for (const std::string& c : chosen) {
    if (cli::stop_requested()) break;
    const auto t0 = Clock::now();
    CheckResult r = c == "planner" ? property_check(ctx, "planner",
                                                    "plans cover every tile once, in order; capacity; padding zero; "
                                                    "refresh == fresh build",
                                                    plan_cases)
                    : c == "decode" ? property_check(ctx, "decode",
                                                     kernel ? "generated calls the kernel claims vs the reference "
                                                              "under its profile (comparison standard, NaN poison)"
                                                            : "pav's kernels through their adapter, settings drawn "
                                                              "per case, vs the reference (comparison standard, NaN "
                                                              "poison, scratch untouched)",
                                                     decode_cases)
                    : c == "reject" ? property_check(ctx, "reject",
                                                     "calls past the description and hard-reject classes refused by "
                                                     "its check, never decoded; accepted ones correct",
                                                     reject_cases)
                    : c == "stale"  ? property_check(ctx, "stale",
                                                    "stale and torn plans answered stale_plan (or refused, or "
                                                    "computed right all the same), never attended silently",
                                                    stale_cases)
                                    : drift_check(ctx);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    results.push_back(std::move(r));
  }

  bool failed = false, interrupted = cli::stop_requested(), save_failed = false;
  for (const auto& r : results) {
    failed = failed || !r.passed;
    interrupted = interrupted || r.interrupted;
    save_failed = save_failed || !r.save_error.empty();
  }
  const int rc = failed ? cli::kExitFail : interrupted || save_failed ? cli::kExitCannotRun : cli::kExitOk;
  bool skipped = false;
  for (const auto& r : results) skipped = skipped || !r.skipped.empty();
  const char* verdict = failed        ? "FAIL"
                        : interrupted ? "STOPPED (not a pass)"
                        : rc          ? "ERROR"
                        : skipped     ? "PASS (with checks skipped: see above)"
                                      : "PASS";

  if (output.text()) {
    fmt::print("\n{:<10} {:>7} {:>8} {:>8}  {}\n", "check", "cases", "result", "time", "what");
    for (const auto& r : results)
      fmt::print("{:<10} {:>7} {:>8} {:>7.1f}s  {}\n", r.name, r.cases,
                 !r.passed ? "FAIL" : r.interrupted ? "stopped" : !r.skipped.empty() ? "skipped" : "pass", r.seconds,
                 r.what);
    for (const auto& r : results)
      if (!r.failure.empty()) fmt::print("\n{}: first failure: {}\n", r.name, r.failure);
    for (const auto& r : results)
      if (!r.skipped.empty()) fmt::print("\n{}: skipped: {}\n", r.name, r.skipped);
    if (interrupted) fmt::print("\nstopped by {}: the checks after it did not run\n", cli::stop_signal_name());
    fmt::print("\nverdict: {}\n", verdict);
  } else if (interrupted) {
    fmt::print(stderr, "pav verify: stopped by {}\n", cli::stop_signal_name());
  }
  ojson j = cli::report_header("verify");
  j["backend"] = cli::backend_name(backend);
  if (kernel) j["kernel"] = adapters::identity_json(*kernel);
  j["seed"] = seed;
  j["save_dir"] = save_dir;
  j["passed"] = rc == cli::kExitOk;
  j["verdict"] = verdict;
  j["interrupted"] = interrupted;
  j["checks"] = ojson::array();
  for (const auto& r : results)
    j["checks"].push_back({{"name", r.name}, {"what", r.what}, {"cases", r.cases}, {"seconds", r.seconds},
                           {"passed", r.passed}, {"interrupted", r.interrupted}, {"skipped", r.skipped},
                           {"first_failure", r.failure},
                           {"detail", r.detail}});
  return output.finish(j, rc, "verify");
}

}  // namespace

PAV_COMMAND("verify", "the main job: verify the planner and decode kernels against the reference", run);
