// SPDX-License-Identifier: Apache-2.0
// pav compare --kernel A --kernel B: two kernels under test on identical
// generated cases (session::compare); per-case verdicts as JSONL per kernel
// (pav mcnemar reads them) and McNemar's paired test in the summary.
#include "tools/kernel_option.hpp"

namespace {

using namespace pav;

int run(std::vector<std::string> args) {
  CLI::App app{"Compare two kernels under test on identical generated cases: per-case verdicts for each (JSONL, "
               "as pav mcnemar reads) and McNemar's paired test.",
               "compare"};
  session::CompareOptions o;
  bool quiet = false;
  cli::ReportOutput output;
  cli::add_kernel_options(app, o.kernel, /*many=*/true);
  app.add_option("--cases", o.cases, "generated cases, each run through both kernels")
      ->check(cli::integer_in(1, session::kMaxCompareCases))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "case k has seed SEED + k")->check(cli::seed_value())->capture_default_str();
  app.add_option("--out-dir", o.out_dir, "where compare-a.jsonl and compare-b.jsonl are written")->capture_default_str();
  app.add_option("--alpha", o.alpha, "significance level of the McNemar test")
      ->check(cli::finite_in(0, 1, true))
      ->capture_default_str();
  app.add_flag("--gate", o.gate, "exit 1 when B is significantly worse than A (b > c and exact p < alpha)");
  app.add_flag("--quiet", quiet, "no progress line");
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();
  return output.finish(session::compare(o, output.io(quiet)), "compare");
}

}  // namespace

PAV_COMMAND("compare", "two kernels on identical generated cases: per-case verdicts and McNemar's test", run);
