// SPDX-License-Identifier: Apache-2.0
// pav compare --kernel A --kernel B: two kernels under test on identical
// generated cases; per-case verdicts as JSONL per kernel (pav mcnemar reads
// them) and McNemar's paired test in the summary.
#include <fmt/core.h>

#include "tools/kernel_compare.hpp"
#include "tools/kernel_option.hpp"
#include "tools/options.hpp"
#include "tools/stop.hpp"

namespace {

using namespace pav;

int run(std::vector<std::string> args) {
  CLI::App app{"Compare two kernels under test on identical generated cases: per-case verdicts for each (JSONL, "
               "as pav mcnemar reads) and McNemar's paired test.",
               "compare"};
  cli::KernelOptions kernels;
  cli::PairedRunOptions o;
  bool gate = false, quiet = false;
  cli::ReportOutput output;
  cli::add_kernel_options(app, kernels, /*many=*/true);
  app.add_option("--cases", o.cases, "generated cases, each run through both kernels")
      ->check(cli::integer_in(1, 10000000))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "case k has seed SEED + k")->check(cli::seed_value())->capture_default_str();
  app.add_option("--out-dir", o.out_dir, "where compare-a.jsonl and compare-b.jsonl are written")->capture_default_str();
  app.add_option("--alpha", o.alpha, "significance level of the McNemar test")
      ->check(cli::finite_in(0, 1, true))
      ->capture_default_str();
  app.add_flag("--gate", gate, "exit 1 when B is significantly worse than A (b > c and exact p < alpha)");
  app.add_flag("--quiet", quiet, "no progress line");
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  if (kernels.specs.size() != 2) throw cli::BadInput("--kernel: give exactly two kernels, A then B");
  output.check_writable();
  o.progress = !quiet;
  auto a = cli::open_kernel(kernels.specs[0], kernels);
  auto b = cli::open_kernel(kernels.specs[1], kernels);
  cli::install_stop_handlers();
  std::FILE* log = output.text() ? stdout : stderr;
  fmt::print(log, "pav compare: {} cases, seed {}\n", o.cases, o.seed);
  nlohmann::ordered_json j = cli::report_header("compare");
  const cli::PairedRunResult r = cli::run_paired(*a, *b, o, log, j);
  const int rc = r.interrupted ? cli::kExitCannotRun : gate && r.b_significantly_worse ? cli::kExitFail : cli::kExitOk;
  j["gate"] = gate;
  j["passed"] = rc == cli::kExitOk;
  return output.finish(j, rc, "compare");
}

}  // namespace

PAV_COMMAND("compare", "two kernels on identical generated cases: per-case verdicts and McNemar's test", run);
