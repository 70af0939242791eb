// SPDX-License-Identifier: Apache-2.0
// session::verify, the main job: the planner and decode properties through the
// same engine as fuzz (first failure shrunk and saved), the reject and stale
// properties of a kernel under test, then the quick drift sweep; a summary
// table and the report. With two kernels, their paired comparison.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "kernels/validate.hpp"
#include "properties/drift/run.hpp"
#include "properties/session/drift_progress.hpp"
#include "properties/checks/builtin_properties.hpp"
#include "properties/session/support.hpp"

namespace pav::session {

namespace {

namespace fz = pav::props::fuzz;
using ojson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

struct CheckResult {
  CheckResult(std::string n, std::string w) : name(std::move(n)), what(std::move(w)) {}
  std::string name;
  std::string what;
  int64_t cases = 0;
  double seconds = 0;
  std::string budget;    // "search of 40 s" or "64 cases"
  bool search = false;   // the budget is a time, not a count
  bool ran = false, passed = true, interrupted = false;
  std::string skipped;   // why the check did not run (a skipped check is not a pass)
  std::string failure;   // one line: the first failure
  ojson detail;          // the engine's run, for JSON
  std::string save_error;
};

// A kernel's decode check draws half its calls from the decode regions.
constexpr bool kVerifyRegions = true;

struct VerifyContext {
  kernels::Backend backend;
  uint64_t seed;
  std::string save_dir;
  const Io& io;
  std::FILE* log;
  adapters::KernelUnderTest* kernel = nullptr;        // a kernel under test: its properties instead of pav's kernels'
  const std::vector<fz::Property>* kernel_props = nullptr;
  nlohmann::json kernel_run = nlohmann::json::object();  // how it was opened, for saved cases
  fz::FreshKernel fresh;                                 // where a shrunk failure is seen again
  fz::DecodeDraw draw;  // how kernel_props' decode draws (a saved case's reproduce command says so)
};

const fz::Property* property_named(const VerifyContext& v, const std::string& name) {
  if (!v.kernel) return fz::find_property(name);
  for (const fz::Property& p : *v.kernel_props)
    if (p.name == name) return &p;
  return nullptr;
}

// cases > 0: that many; else a search of `seconds` (at most kMaxDecodeCases cases).
CheckResult property_check(const VerifyContext& v, const char* property, const char* what, int64_t cases,
                           double seconds = 0) {
  CheckResult r{property, what};
  r.search = cases <= 0;
  r.budget = r.search ? fmt::format("search of {:g} s", seconds) : fmt::format("{} cases", cases);
  const fz::Property* p = property_named(v, property);
  if (!p) {
    r.skipped = std::string(property) == "stale"
                    ? "the kernel splits by itself (split = self): it is handed no plan"
                    : "the kernel has no check entry (pav_kernel_check, or \"check\": true for a worker)";
    return r;
  }
  fz::FuzzOptions o;
  o.cases = r.search ? kMaxDecodeCases : cases;
  o.minutes = r.search ? seconds / 60 : 0;
  o.seed = v.seed;
  o.ctx.backend = v.backend;
  o.ctx.kernel = v.kernel;
  o.kernel_run = v.kernel_run;
  o.fresh = v.fresh;
  o.regions = v.draw.regions;
  o.shapes = v.draw.shapes;
  o.shape_seed = v.draw.shape_seed;
  o.save_dir = v.save_dir;
  o.progress = v.io.show_progress;
  o.label = "pav verify";
  o.should_stop = stop_test(v.io);
  fz::FuzzReport rep;
  try {
    rep = fz::run_fuzz(o, {p}, v.log, v.io.progress);
  } catch (const fz::JobsUnavailable& e) {
    throw CannotRun(e.what());
  }
  r.ran = !rep.runs.empty();
  r.interrupted = rep.interrupted;
  if (!r.ran) return r;
  const fz::PropertyRun& run = rep.runs.front();
  r.cases = run.cases;
  r.detail = property_run_json(run);
  r.save_error = run.save_error;
  if (run.failure) {
    const fz::Found& f = *run.failure;
    r.passed = false;
    r.failure = fmt::format("seed {}: {}", f.seed, f.first_message);
    if (f.reproduction != "flaky") r.failure += fmt::format("; shrunk: {}: {}", f.description, f.message);
    if (f.reproduction == "sequence")
      r.failure += fmt::format("; reproduced in a fresh instance after {} earlier call(s), saved with it",
                               f.spec.prelude.size());
    if (f.reproduction == "state-dependent")
      r.failure += "; NOT REPRODUCED in a fresh instance of the kernel (state-dependent: it needs what earlier calls "
                   "left)";
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
  opt.progress = drift_progress(std::make_shared<ProgressReporter>(v.io.progress, v.io.show_progress),
                                stop_test(v.io));
  r.ran = true;
  try {
    const props::DriftReport rep = props::run_drift(sweep, props::drift_cells(sweep), opt);
    r.cases = int64_t(rep.cells.size());
    r.passed = rep.passed;
    r.failure = rep.first_failure;
    r.detail = {{"verdict", rep.verdict}, {"cells", rep.cells.size()}, {"growth", rep.growth},
                {"control_ok", rep.control_ok}, {"mismatches", rep.mismatches}};
  } catch (const DriftStopped&) {
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
Report verify_two(const VerifyOptions& o, const Io& io) {
  auto a = open_kernel(o.kernel.specs[0], o.kernel);
  auto b = open_kernel(o.kernel.specs[1], o.kernel);
  PairedRunOptions po;
  po.cases = o.decode_cases > 0 ? o.decode_cases : kQuickDecodeCases;  // no search: a paired count
  if (io.log) {
    fmt::print(io.log, "pav verify: two kernels on {} identical cases, seed {}\n", po.cases, o.seed);
    std::fflush(io.log);
  }
  Report rep;
  rep.json = report_header("verify");
  po.seed = o.seed;
  po.out_dir = o.out_dir;
  const PairedRunResult r = run_paired(*a, *b, po, io, rep.json);
  const bool failed = r.a_wrong > 0 || r.b_wrong > 0;
  rep.exit_code = failed ? kExitFail : r.interrupted ? kExitCannotRun : kExitOk;
  rep.verdict = failed ? "FAIL" : r.interrupted ? "STOPPED (not a pass)" : "PASS";
  rep.interrupted = r.interrupted;
  if (io.out) fmt::print(io.out, "\nverdict: {} ({} wrong for A, {} for B)\n", rep.verdict, r.a_wrong, r.b_wrong);
  rep.json["passed"] = rep.passed();
  rep.json["verdict"] = rep.verdict;
  return rep;
}

const char* const kCheckNames = "planner, decode, reject, stale, drift";

// The checks to run, in order, each once; BadInput names an unknown one.
std::vector<std::string> chosen_checks(const std::vector<std::string>& named) {
  std::vector<std::string> chosen;
  for (const std::string& c : named) {
    if (c != "planner" && c != "decode" && c != "drift" && c != "reject" && c != "stale")
      throw BadInput("--checks: unknown check '" + c.substr(0, 40) + "' (" + kCheckNames + ")");
    if (std::find(chosen.begin(), chosen.end(), c) == chosen.end()) chosen.push_back(c);
  }
  return chosen;
}

void check_counts(const VerifyOptions& o) {
  for (const auto& [name, value, most] : {std::tuple{"--plan-cases", o.plan_cases, kMaxPlanCases},
                                          std::tuple{"--reject-cases", o.reject_cases, kMaxRejectCases},
                                          std::tuple{"--stale-cases", o.stale_cases, kMaxStaleCases}})
    if (value < 1 || value > most) throw BadInput(fmt::format("{}: expected 1..{}, got {}", name, most, value));
  if (o.decode_cases < 0 || o.decode_cases > kMaxDecodeCases)
    throw BadInput(fmt::format("--decode-cases: expected 1..{} (or 0: a search), got {}", kMaxDecodeCases,
                               o.decode_cases));
  if (o.shapes && (*o.shapes < 0 || *o.shapes > kMaxShapes))
    throw BadInput(fmt::format("--shapes: expected 0..{} (0: each call its own shape), got {}", kMaxShapes, *o.shapes));
  if (!(o.decode_seconds >= 1 && o.decode_seconds <= kMaxDecodeSeconds))
    throw BadInput(fmt::format("--decode-seconds: expected 1..{:g}, got {}", kMaxDecodeSeconds, o.decode_seconds));
}

void print_summary(std::FILE* out, const std::vector<CheckResult>& results, bool interrupted, const std::string& signal,
                   const std::string& verdict) {
  fmt::print(out, "\n{:<10} {:>7} {:>8} {:>8}  {}\n", "check", "cases", "result", "time", "what");
  for (const auto& r : results)
    fmt::print(out, "{:<10} {:>7} {:>8} {:>7.1f}s  {}{}\n", r.name, r.cases,
               !r.passed ? "FAIL" : r.interrupted ? "stopped" : !r.skipped.empty() ? "skipped" : "pass", r.seconds,
               r.search ? "(" + r.budget + ") " : "", r.what);
  for (const auto& r : results)
    if (!r.failure.empty()) fmt::print(out, "\n{}: first failure: {}\n", r.name, r.failure);
  for (const auto& r : results)
    if (!r.skipped.empty()) fmt::print(out, "\n{}: skipped: {}\n", r.name, r.skipped);
  if (interrupted) fmt::print(out, "\nstopped by {}: the checks after it did not run\n", signal);
  fmt::print(out, "\nverdict: {}\n", verdict);
}

}  // namespace

void apply_quick(VerifyOptions& o, bool plan_given, bool decode_given, bool reject_given, bool stale_given) {
  o.quick = true;
  if (!plan_given) o.plan_cases = kQuickPlanCases;
  if (!decode_given) o.decode_cases = kQuickDecodeCases;
  if (!reject_given) o.reject_cases = kQuickRejectCases;
  if (!stale_given) o.stale_cases = kQuickStaleCases;
}

Report verify(const VerifyOptions& o, const Io& io) {
  if (o.kernel.specs.size() > 2) throw BadInput("--kernel: at most two kernels (A and B)");
  check_counts(o);
  if (o.kernel.specs.size() == 2) return verify_two(o, io);
  if (o.checks && o.checks->empty())
    throw BadInput(std::string("--checks: an empty list; name the checks (") + kCheckNames +
                   ") or leave the option out for the default ones");
  std::vector<std::string> chosen = chosen_checks(o.checks.value_or(std::vector<std::string>{}));
  const kernels::Backend backend = pick_backend(o.backend);
  check_save_dir(o.save_dir);
  std::unique_ptr<adapters::KernelUnderTest> kernel;
  std::vector<fz::Property> kernel_props;
  fz::DecodeDraw draw;
  if (!o.kernel.specs.empty()) {
    kernel = open_kernel(o.kernel.specs.front(), o.kernel);
    draw.regions = kVerifyRegions;
    draw.shapes = o.shapes.value_or(kernel->description().compiles_per_shape ? kJitShapes : 0);
    draw.shape_seed = o.seed;
    kernel_props = fz::kernel_properties(*kernel, draw);
  } else if (o.shapes.value_or(0) > 0) {
    throw BadInput("--shapes: shapes draw the calls of a kernel under test (--kernel); pav's own kernels draw their "
                   "settings per case");
  }
  if (chosen.empty()) {  // the default checks (a kernel's stale check only where it runs pav's plan)
    const bool plan = kernel && kernel->description().split == adapters::Split::plan;
    chosen = !kernel ? std::vector<std::string>{"planner", "decode", "drift"}
             : plan  ? std::vector<std::string>{"decode", "reject", "stale", "drift"}
                     : std::vector<std::string>{"decode", "reject", "drift"};
  }
  const VerifyContext ctx{backend,
                          o.seed,
                          o.save_dir,
                          io,
                          io.log,
                          kernel.get(),
                          &kernel_props,
                          kernel_run_record(o.kernel),
                          kernel ? fresh_kernel(*kernel, o.kernel) : fz::FreshKernel{},
                          draw};

  if (io.log) {
    if (kernel) {
      fmt::print(io.log, "pav verify: seed {}, counterexamples to {}\n", o.seed, o.save_dir);
      print_kernel(io.log, *kernel);
      print_shapes(io.log, fz::decode_shapes(kernel->description(), draw), draw, o.shapes.has_value());
    } else {
      fmt::print(io.log, "pav verify: backend {}, seed {}, counterexamples to {}\n", backend_name(backend), o.seed,
                 o.save_dir);
    }
    std::fflush(io.log);
  }
  std::vector<CheckResult> results;
  for (const std::string& c : chosen) {
    if (stopping(io)) break;
    const auto t0 = Clock::now();
    CheckResult r = c == "planner" ? property_check(ctx, "planner",
                                                    "plans cover every tile once, in order; capacity; padding zero; "
                                                    "refresh == fresh build",
                                                    o.plan_cases)
                    : c == "decode" ? property_check(ctx, "decode",
                                                     kernel ? "generated calls the kernel claims vs the reference "
                                                              "under its profile (comparison standard, NaN poison)"
                                                            : "pav's kernels through their adapter, settings drawn "
                                                              "per case, vs the reference (comparison standard, NaN "
                                                              "poison, scratch untouched)",
                                                     o.decode_cases, o.decode_seconds)
                    : c == "reject" ? property_check(ctx, "reject",
                                                     "calls past the description and hard-reject classes refused by "
                                                     "its check, never decoded; accepted ones correct",
                                                     o.reject_cases)
                    : c == "stale"  ? property_check(ctx, "stale",
                                                    "stale and torn plans answered stale_plan (or refused, or "
                                                    "computed right all the same), never attended silently",
                                                    o.stale_cases)
                                    : drift_check(ctx);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    results.push_back(std::move(r));
  }

  bool failed = false, interrupted = stopping(io), save_failed = false, skipped = false;
  for (const auto& r : results) {
    failed = failed || !r.passed;
    interrupted = interrupted || r.interrupted;
    save_failed = save_failed || !r.save_error.empty();
    skipped = skipped || !r.skipped.empty();
  }
  Report rep;
  rep.exit_code = failed ? kExitFail : interrupted || save_failed ? kExitCannotRun : kExitOk;
  rep.verdict = failed        ? "FAIL"
                : interrupted ? "STOPPED (not a pass)"
                : rep.exit_code ? "ERROR"
                : skipped     ? "PASS (with checks skipped: see above)"
                              : "PASS";
  rep.interrupted = interrupted;
  if (io.out)
    print_summary(io.out, results, interrupted, stop_name(io), rep.verdict);
  else if (interrupted && io.log)
    fmt::print(io.log, "pav verify: stopped by {}\n", stop_name(io));
  ojson& j = rep.json;
  j = report_header("verify");
  j["backend"] = backend_name(backend);
  if (kernel) j["kernel"] = adapters::identity_json(*kernel);
  j["seed"] = o.seed;
  // The shapes the kernel's decode calls were drawn in (0: each call its own).
  j["shapes"] = draw.shapes;
  j["quick"] = o.quick;
  j["save_dir"] = o.save_dir;
  j["passed"] = rep.passed();
  j["verdict"] = rep.verdict;
  j["interrupted"] = interrupted;
  j["checks"] = ojson::array();
  for (const auto& r : results)
    j["checks"].push_back({{"name", r.name}, {"what", r.what}, {"budget", r.budget.empty() ? ojson(nullptr) : ojson(r.budget)},
                           {"cases", r.cases}, {"seconds", r.seconds},
                           {"passed", r.passed}, {"interrupted", r.interrupted}, {"skipped", r.skipped},
                           {"first_failure", r.failure},
                           {"detail", r.detail}});
  return rep;
}

}  // namespace pav::session
