// SPDX-License-Identifier: Apache-2.0
// pav verify: the main job (session::verify). A verification of the
// planner and the decode kernels against the reference, or of a kernel under
// test (the decode check a search of --decode-seconds, or --quick for a
// pre-commit run); a summary table, or JSON.
#include <fmt/core.h>

#include "common/text_list.hpp"
#include "tools/backend_option.hpp"
#include "tools/kernel_option.hpp"

namespace {

using namespace pav;

int run(std::vector<std::string> args) {
  CLI::App app{"Verify the planner and the decode kernels against the reference: property checks (first failure "
               "shrunk and saved, as pav fuzz does) and the quick drift sweep.",
               "verify"};
  session::VerifyOptions o;
  std::string checks;
  bool quiet = false;
  cli::ReportOutput output;
  cli::add_backend_option(app, o.backend);
  app.add_option("--seed", o.seed, "base seed: case k of a check has seed base + k (every failure prints its seed)")
      ->check(cli::seed_value());
  app.add_option("--plan-cases", o.plan_cases, "generated batches for the planner check")
      ->check(cli::integer_in(1, session::kMaxPlanCases));
  auto* opt_plan = app.get_option("--plan-cases");
  auto* opt_decode = app.add_option("--decode-cases", o.decode_cases,
                                    "a fixed number of generated calls for the decode check (default: a search "
                                    "of --decode-seconds)")
                         ->check(cli::integer_in(1, session::kMaxDecodeCases))
                         ->default_str("search");
  app.add_option("--decode-seconds", o.decode_seconds,
                 "the decode check's search: generated calls for this long, to the first failure")
      ->check(cli::finite_in(1, session::kMaxDecodeSeconds))
      ->capture_default_str();
  bool quick = false;
  app.add_flag("--quick", quick,
               fmt::format("the pre-commit run: {} plan, {} decode, {} reject and {} stale cases, no decode search "
                           "(a count also given keeps its own)",
                           session::kQuickPlanCases, session::kQuickDecodeCases, session::kQuickRejectCases,
                           session::kQuickStaleCases));
  auto* opt_checks = app.add_option("--checks", checks,
                                    "the checks to run, comma-separated: planner, decode, reject, stale, drift "
                                    "(default planner,decode,drift; with --kernel decode,reject,drift, and stale "
                                    "before drift for a kernel that runs pav's plan; pav's kernels take reject and "
                                    "stale too, through the same adapter)");
  auto* opt_reject = app.add_option("--reject-cases", o.reject_cases, "generated calls for the reject check")
                         ->check(cli::integer_in(1, session::kMaxRejectCases));
  auto* opt_stale = app.add_option("--stale-cases", o.stale_cases,
                 "generated calls for the stale-plan check (a kernel that runs pav's plan)")
      ->check(cli::integer_in(1, session::kMaxStaleCases));
  int shapes = 0;
  auto* opt_shapes =
      app.add_option("--shapes", shapes,
                     fmt::format("with --kernel: draw the decode calls in this many shapes (dtypes, format, heads, "
                                 "q_len, page size, which variants), varying lengths, tables, data and variant "
                                 "values within them; 0: each call its own shape (default {} for a kernel that "
                                 "declares compiles_per_shape, else 0)",
                                 session::kJitShapes))
          ->check(cli::integer_in(0, session::kMaxShapes))
          ->default_str("auto");
  cli::add_kernel_options(app, o.kernel, /*many=*/true);
  app.add_option("--out-dir", o.out_dir, "two kernels: where compare-a.jsonl and compare-b.jsonl are written")
      ->check(cli::non_empty());
  cli::add_save_option(app, o.save_dir);
  app.add_flag("--quiet", quiet, "no progress line");
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  // An empty --checks (a variable that expanded to nothing) names no check:
  // the session refuses it rather than run the default ones.
  if (opt_shapes->count() > 0) o.shapes = shapes;
  if (opt_checks->count() > 0) o.checks = checks.empty() ? std::vector<std::string>{} : split_list(checks);
  if (quick)
    session::apply_quick(o, opt_plan->count() > 0, opt_decode->count() > 0, opt_reject->count() > 0,
                         opt_stale->count() > 0);
  output.check_writable();
  return output.finish(session::verify(o, output.io(quiet)), "verify");
}

}  // namespace

PAV_COMMAND("verify", "the main job: verify the planner and decode kernels against the reference", run);
