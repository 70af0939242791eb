// pav verify: the main job. A quick built-in verification of the planner and
// the decode kernels against the reference, with a summary table.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>

#include "kernels/validate.hpp"
#include "properties/counterexample.hpp"
#include "properties/drift_run.hpp"
#include "properties/gen.hpp"
#include "properties/runner.hpp"
#include "tools/backend_option.hpp"

namespace {

using namespace pav;
using Clock = std::chrono::steady_clock;

struct CheckResult {
  std::string name;
  std::string what;
  int64_t cases = 0, failed = 0;
  double seconds = 0;
  std::string first_failure;
};

CheckResult planner_check(uint64_t seed, int cases) {
  CheckResult r{"planner", "plans cover every tile once, in order; padding zero; refresh == fresh build"};
  for (int i = 0; i < cases; ++i) {
    const uint64_t s = seed + uint64_t(i);
    const auto lens = props::sample(props::gen_plan_lengths(i % 10 == 0 ? 4096 : 64), s);
    const int64_t hkv = 1 + int64_t(s % 8), cu = (s % 3 == 0) ? 304 : (s % 3 == 1) ? 132 : 80;
    kernels::WorkPlan plan({int64_t(lens.size()), hkv, cu});
    std::vector<int32_t> other(lens.size(), 777);
    plan.refresh(other.data());
    plan.refresh(lens.data());
    kernels::WorkPlan fresh({int64_t(lens.size()), hkv, cu});
    fresh.refresh(lens.data());
    std::string why = kernels::check_plan_structure(plan.view());
    if (why.empty() && plan.work_info() != fresh.work_info()) why = "refresh differs from a fresh build";
    if (why.empty() && !kernels::plan_is_fresh(plan.view(), lens.data(), int64_t(lens.size())))
      why = "fresh plan reported stale";
    ++r.cases;
    if (!why.empty()) {
      ++r.failed;
      if (r.first_failure.empty()) r.first_failure = fmt::format("seed {}: {}", s, why);
    }
  }
  return r;
}

CheckResult decode_check(uint64_t seed, int cases, kernels::Backend backend, bool progress) {
  CheckResult r{"decode", "planned + uniform decode vs the fp32 reference (comparison standard, NaN poison)"};
  props::DecodeGenLimits lim;
  lim.max_total_tokens = 12000;
  for (int i = 0; i < cases; ++i) {
    const uint64_t s = seed + 1000003ull * uint64_t(i + 1);
    lim.allow_long = (i % 8 == 7);
    const props::CaseSpec spec = props::sample(props::gen_decode_case(lim), s);
    props::HostCase c = props::build_case(spec);
    ++r.cases;
    std::string why;
    try {
      const props::CaseCheck k = props::check_case(c, backend);
      if (!k.passed) why = k.verdict;
    } catch (const kernels::RejectError& e) {
      why = std::string("rejected: ") + e.what();
    }
    if (!why.empty()) {
      ++r.failed;
      const std::string path = props::save_counterexample("verify-decode", spec, {{"seed", s}});
      if (r.first_failure.empty()) r.first_failure = fmt::format("seed {}: {} (saved {})", s, why, path);
    }
    if (progress) fmt::print(stderr, "\r  decode {}/{} cases, {} failed", i + 1, cases, r.failed);
  }
  if (progress) fmt::print(stderr, "\n");
  return r;
}

// The quick drift sweep (docs/drift.md, fixtures/drift-quick.json): no error
// growth from the lowest to the highest split ceiling, no mismatch at the
// comparison standard, and the positive control's growth is detected.
CheckResult drift_check(kernels::Backend backend, bool progress) {
  CheckResult r{"drift", "quick drift sweep: no error growth from split ceiling 8 to 256; positive control flips", 0, 0, 0, ""};
  const props::DriftSweep sweep = props::builtin_quick_sweep();
  props::DriftRunOptions opt;
  opt.backend = backend;
  if (progress) opt.progress = [](const props::DriftProgress& p) { fmt::print(stderr, "{}", props::progress_line(p)); };
  const props::DriftReport rep = props::run_drift(sweep, props::drift_cells(sweep), opt);
  if (progress) fmt::print(stderr, "\n");
  for (const auto& c : rep.cells) {
    ++r.cases;
    if (!c.passed) ++r.failed;
  }
  if (!rep.passed) {
    r.failed = std::max<int64_t>(r.failed, 1);
    r.first_failure = rep.first_failure;
  }
  return r;
}

int run(std::vector<std::string> args) {
  CLI::App app{"Verify the planner and the decode kernels against the reference.", "verify"};
  std::string backend_name = "auto";
  uint64_t seed = 20261129;
  int plan_cases = 500, decode_cases = 64;
  bool json = false, quiet = false;
  app.add_option("--backend", backend_name, "cpu, gpu, or auto (gpu when a device is present)")
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}));
  app.add_option("--seed", seed, "base seed (every case's seed is printed on failure)");
  app.add_option("--plan-cases", plan_cases, "random batches for the planner check")->check(CLI::Range(1, 1000000));
  app.add_option("--decode-cases", decode_cases, "generated calls for the decode check")->check(CLI::Range(1, 100000));
  app.add_flag("--json", json, "print the summary as JSON");
  app.add_flag("--quiet", quiet, "no progress line");
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  const kernels::Backend backend = cli::pick_backend(backend_name);

  if (!json) fmt::print("pav verify: backend {}, seed {}\n", cli::backend_name(backend), seed);
  std::vector<CheckResult> results;
  auto timed = [&](std::function<CheckResult()> f) {
    const auto t0 = Clock::now();
    CheckResult r = f();
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    results.push_back(r);
  };
  timed([&] { return planner_check(seed, plan_cases); });
  timed([&] { return decode_check(seed, decode_cases, backend, !quiet && !json); });
  timed([&] { return drift_check(backend, !quiet && !json); });

  int64_t failed = 0;
  for (const auto& r : results) failed += r.failed;
  if (json) {
    nlohmann::json j;
    j["backend"] = cli::backend_name(backend);
    j["seed"] = seed;
    j["passed"] = failed == 0;
    for (const auto& r : results)
      j["checks"].push_back({{"name", r.name}, {"what", r.what}, {"cases", r.cases}, {"failed", r.failed},
                             {"seconds", r.seconds}, {"first_failure", r.first_failure}});
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("\n{:<10} {:>7} {:>7} {:>8}  {}\n", "check", "cases", "failed", "time", "what");
    for (const auto& r : results)
      fmt::print("{:<10} {:>7} {:>7} {:>7.1f}s  {}\n", r.name, r.cases, r.failed, r.seconds, r.what);
    for (const auto& r : results)
      if (!r.first_failure.empty()) fmt::print("\n{}: first failure: {}\n", r.name, r.first_failure);
    fmt::print("\nverdict: {}\n", failed ? "FAIL" : "PASS");
  }
  return failed ? cli::kExitFail : cli::kExitOk;
}

}  // namespace

PAV_COMMAND("verify", "the main job: verify the planner and decode kernels against the reference", run);
