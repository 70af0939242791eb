// SPDX-License-Identifier: Apache-2.0
// session::compare, and verify with two kernels: identical generated cases
// through both, per-case verdict JSONL per kernel (what pav mcnemar reads),
// McNemar's paired test in the summary.
#include <fmt/core.h>

#include <filesystem>

#include "common/durable_file.hpp"
#include "common/progress.hpp"
#include "properties/checks/runner_compare.hpp"
#include "properties/session/support.hpp"

namespace pav::session {

using ojson = nlohmann::ordered_json;

PairedRunResult run_paired(adapters::KernelUnderTest& a, adapters::KernelUnderTest& b, const PairedRunOptions& o,
                           const Io& io, ojson& report) {
  std::FILE* log = io.log;
  const std::filesystem::path dir(o.out_dir);
  const std::filesystem::path file_a = dir / "compare-a.jsonl", file_b = dir / "compare-b.jsonl";
  check_writable_file(file_a, "--out-dir " + o.out_dir);
  if (log) fmt::print(log, "A         {}\nB         {}\n", adapters::identity(a), adapters::identity(b));
  if (log) std::fflush(log);
  ProgressReporter progress(io.progress, io.show_progress);
  props::CompareOptions co;
  co.cases = o.cases;
  co.seed = o.seed;
  co.should_stop = stop_test(io);
  co.progress = [&](int64_t done, int64_t total) {
    progress.show(fmt::format("[compare] {}/{} cases", done, total), done == total);
  };
  props::Comparison c;
  try {
    c = props::compare_kernels(a, b, co);
  } catch (const adapters::KernelSpecError& e) {
    throw BadInput(e.what());
  }
  progress.done();
  write_file_atomically(file_a, props::correctness_jsonl(c, true));
  write_file_atomically(file_b, props::correctness_jsonl(c, false));

  PairedRunResult r;
  r.cases = int64_t(c.cases.size());
  r.a_wrong = r.cases - c.a_correct;
  r.b_wrong = r.cases - c.b_correct;
  r.interrupted = c.interrupted;
  const stats::McNemar& t = c.test;
  r.b_significantly_worse = t.b > t.c && t.exact_p < o.alpha;
  const std::string verdict =
      t.n == 0 ? "no discordant case: no evidence of a difference"
      : t.exact_p >= o.alpha
          ? fmt::format("no significant difference at alpha {:g} (exact p = {:.4g})", o.alpha, t.exact_p)
          : fmt::format("{} is better (exact p = {:.4g} < {:g})", t.b > t.c ? "A" : "B", t.exact_p, o.alpha);
  if (log) fmt::print(log, "\nshared    {}\n", adapters::summary(c.shared));
  if (log) fmt::print(log, "\n{:<7} {:>8} {:>8}\n", "kernel", "correct", "cases");
  if (log) fmt::print(log, "{:<7} {:>8} {:>8}\n{:<7} {:>8} {:>8}\n", "A", c.a_correct, r.cases, "B", c.b_correct, r.cases);
  if (log) fmt::print(log, "\ndiscordant: b = {} (A right, B wrong), c = {} (A wrong, B right)\n", t.b, t.c);
  if (log) fmt::print(log, "McNemar: exact p = {:.6g}, mid-p = {:.6g}, chi2 (continuity corrected) p = {:.6g}\n", t.exact_p,
             t.mid_p, t.chi2_cc_p);
  if (log) fmt::print(log, "verdict: {}\n", verdict);
  for (const props::PairedCase& p : c.cases)
    if (!p.a_correct) {
      if (log) fmt::print(log, "A first failure: {}: {}\n", p.id, p.a_verdict);
      break;
    }
  for (const props::PairedCase& p : c.cases)
    if (!p.b_correct) {
      if (log) fmt::print(log, "B first failure: {}: {}\n", p.id, p.b_verdict);
      break;
    }
  if (log) fmt::print(log, "per-case verdicts: {} and {} (pav mcnemar {} {} --variant A,B)\n", file_a.string(),
             file_b.string(), file_a.string(), file_b.string());

  report["a"] = adapters::identity_json(a);
  report["b"] = adapters::identity_json(b);
  report["seed"] = o.seed;
  report["cases"] = r.cases;
  report["a_correct"] = c.a_correct;
  report["b_correct"] = c.b_correct;
  report["mcnemar"] = {{"b", t.b},           {"c", t.c},       {"n", t.n},
                       {"exact_p", t.exact_p}, {"mid_p", t.mid_p}, {"chi2_cc_p", t.chi2_cc_p}};
  report["alpha"] = o.alpha;
  report["comparison"] = verdict;
  report["jsonl"] = {file_a.string(), file_b.string()};
  report["interrupted"] = r.interrupted;
  return r;
}

Report compare(const CompareOptions& o, const Io& io) {
  if (o.kernel.specs.size() != 2) throw BadInput("--kernel: give exactly two kernels, A then B");
  if (o.cases < 1 || o.cases > kMaxCompareCases)
    throw BadInput(fmt::format("--cases: expected 1..{}, got {}", kMaxCompareCases, o.cases));
  if (!(o.alpha > 0 && o.alpha <= 1)) throw BadInput(fmt::format("--alpha: expected a number in (0, 1], got {}", o.alpha));
  auto a = open_kernel(o.kernel.specs[0], o.kernel);
  auto b = open_kernel(o.kernel.specs[1], o.kernel);
  if (io.log) fmt::print(io.log, "pav compare: {} cases, seed {}\n", o.cases, o.seed);
  Report rep;
  rep.json = report_header("compare");
  PairedRunOptions po;
  po.cases = o.cases;
  po.seed = o.seed;
  po.out_dir = o.out_dir;
  po.alpha = o.alpha;
  const PairedRunResult r = run_paired(*a, *b, po, io, rep.json);
  rep.exit_code = r.interrupted ? kExitCannotRun : o.gate && r.b_significantly_worse ? kExitFail : kExitOk;
  rep.interrupted = r.interrupted;
  rep.verdict = rep.json.value("comparison", std::string());
  rep.json["gate"] = o.gate;
  rep.json["passed"] = rep.passed();
  return rep;
}

}  // namespace pav::session
