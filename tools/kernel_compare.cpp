// SPDX-License-Identifier: Apache-2.0
#include "tools/kernel_compare.hpp"

#include <fmt/core.h>

#include <filesystem>

#include "common/durable_file.hpp"
#include "common/progress.hpp"
#include "properties/runner_compare.hpp"
#include "tools/command.hpp"
#include "tools/stop.hpp"

namespace pav::cli {

using ojson = nlohmann::ordered_json;

PairedRunResult run_paired(adapters::KernelUnderTest& a, adapters::KernelUnderTest& b, const PairedRunOptions& o,
                           std::FILE* log, ojson& report) {
  const std::filesystem::path dir(o.out_dir);
  const std::filesystem::path file_a = dir / "compare-a.jsonl", file_b = dir / "compare-b.jsonl";
  check_writable_file(file_a, "--out-dir " + o.out_dir);
  fmt::print(log, "A         {}\nB         {}\n", adapters::identity(a), adapters::identity(b));
  std::fflush(log);
  ProgressReporter progress(stderr, o.progress);
  props::CompareOptions co;
  co.cases = o.cases;
  co.seed = o.seed;
  co.should_stop = stop_requested;
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
  fmt::print(log, "\nshared    {}\n", adapters::summary(c.shared));
  fmt::print(log, "\n{:<7} {:>8} {:>8}\n", "kernel", "correct", "cases");
  fmt::print(log, "{:<7} {:>8} {:>8}\n{:<7} {:>8} {:>8}\n", "A", c.a_correct, r.cases, "B", c.b_correct, r.cases);
  fmt::print(log, "\ndiscordant: b = {} (A right, B wrong), c = {} (A wrong, B right)\n", t.b, t.c);
  fmt::print(log, "McNemar: exact p = {:.6g}, mid-p = {:.6g}, chi2 (continuity corrected) p = {:.6g}\n", t.exact_p,
             t.mid_p, t.chi2_cc_p);
  fmt::print(log, "verdict: {}\n", verdict);
  for (const props::PairedCase& p : c.cases)
    if (!p.a_correct) {
      fmt::print(log, "A first failure: {}: {}\n", p.id, p.a_verdict);
      break;
    }
  for (const props::PairedCase& p : c.cases)
    if (!p.b_correct) {
      fmt::print(log, "B first failure: {}: {}\n", p.id, p.b_verdict);
      break;
    }
  fmt::print(log, "per-case verdicts: {} and {} (pav mcnemar {} {} --variant A,B)\n", file_a.string(),
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

}  // namespace pav::cli
