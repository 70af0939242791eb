// SPDX-License-Identifier: Apache-2.0
// pav mcnemar: paired comparison of two variants' per-item correctness.
#include "stats/inputs.hpp"
#include "stats/mcnemar.hpp"
#include "stats/paired.hpp"
#include "common/text_list.hpp"
#include "tools/command.hpp"
#include "tools/options.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

namespace {

using json = nlohmann::ordered_json;
namespace st = pav::stats;
namespace cli = pav::cli;

std::optional<std::int64_t> parse_count(const std::string& word) {
  std::int64_t value = 0;
  const auto* end = word.data() + word.size();
  const auto [ptr, ec] = std::from_chars(word.data(), end, value);
  if (ec != std::errc() || ptr != end || value < 0) return std::nullopt;
  return value;
}

std::string p_text(double p) { return fmt::format("{:.6g}", p); }
json ci_json(const st::Interval& ci) { return json::array({ci.lo, ci.hi}); }

void put_test(json& j, const st::McNemar& t) {
  j["b"] = t.b;
  j["c"] = t.c;
  j["n"] = t.n;
  j["exact_p"] = t.exact_p;
  j["mid_p"] = t.mid_p;
  j["chi2_cc"] = t.chi2_cc;
  j["chi2_cc_p"] = t.chi2_cc_p;
  j["chi2"] = t.chi2;
  j["chi2_p"] = t.chi2_p;
}

void print_test(const st::McNemar& t) {
  fmt::print("  {:<30} {:>10}  {}\n", "test", "statistic", "p");
  fmt::print("  {:<30} {:>10}  {}\n", "exact binomial, two-sided", "-", p_text(t.exact_p));
  fmt::print("  {:<30} {:>10}  {}\n", "exact mid-p", "-", p_text(t.mid_p));
  fmt::print("  {:<30} {:>10.4f}  {}{}\n", "chi-square, continuity corr.", t.chi2_cc, p_text(t.chi2_cc_p),
             t.b == t.c && t.n > 0 ? "   (b == c: correction dropped)" : "");
  fmt::print("  {:<30} {:>10.4f}  {}\n", "chi-square", t.chi2, p_text(t.chi2_p));
}

// One-sided exact p that B is worse than A: P(X >= b) for X ~ Binomial(b + c,
// 1/2). For b > c this is exactly half the two-sided exact p (the binomial(n,
// 1/2) is symmetric and P(X <= c) <= 1/2); for b <= c it is at least 1/2 and
// never significant, so it is reported as 1 there.
double p_b_worse(const st::McNemar& t) { return t.b > t.c ? t.exact_p / 2 : 1.0; }

// --fail-if-worse ALPHA: adds the gate to the report; returns 1 when B is
// significantly worse than A at level ALPHA, else 0.
int apply_gate(const st::McNemar& t, double alpha, bool text, json& j) {
  if (!(alpha > 0)) return cli::kExitOk;
  const double p = p_b_worse(t);
  const bool worse = p < alpha;
  j["gate"] = {{"fail_if_worse", alpha}, {"p_b_worse", p}, {"b_worse", worse}};
  if (text)
    fmt::print("\ngate: B {} worse than A (one-sided exact p = {} {} alpha {}): {}\n",
               worse ? "is significantly" : "is not significantly", p_text(p), worse ? "<" : ">=", alpha,
               worse ? "FAIL" : "pass");
  return worse ? cli::kExitFail : cli::kExitOk;
}

int run_counts(const std::string& counts, const cli::ReportOutput& output, double alpha) {
  const auto words = pav::split_list(counts);
  std::optional<std::int64_t> b;
  std::optional<std::int64_t> c;
  if (words.size() == 2) {
    b = parse_count(words[0]);
    c = parse_count(words[1]);
  }
  if (!b || !c) {
    throw cli::BadInput(fmt::format("--counts: expected B,C (two non-negative integers), got '{}'",
                                    counts.substr(0, 60)));
  }
  if (*b > std::numeric_limits<std::int64_t>::max() - *c)
    throw cli::BadInput("--counts: b + c does not fit in a 64-bit integer");
  const auto t = st::mcnemar(*b, *c);
  json j = cli::report_header("mcnemar");
  put_test(j, t);
  if (output.text()) {
    fmt::print("McNemar: b = {} (A right, B wrong), c = {} (A wrong, B right), n = b + c = {}\n\n", t.b, t.c, t.n);
    print_test(t);
  }
  const int rc = apply_gate(t, alpha, output.text(), j);
  return output.finish(j, rc, "mcnemar");
}

void print_report(const st::MultiRunReport& r) {
  std::string runs_a;
  std::string runs_b;
  for (std::size_t i = 0; i < r.runs.size(); ++i) {
    auto& list = r.runs[i].variant == r.variant_a ? runs_a : runs_b;
    list += (list.empty() ? "" : ", ") + std::to_string(i + 1);
  }
  const int conf = static_cast<int>(std::lround(100.0 * r.confidence));
  const auto runs_word = [](const std::string& list) { return list.find(',') == std::string::npos ? "run" : "runs"; };
  fmt::print("McNemar: {} ({} {}) vs {} ({} {}); {} items per run\n\n", r.variant_a, runs_word(runs_a), runs_a,
             r.variant_b, runs_word(runs_b), runs_b, r.items);

  std::size_t file_w = 4;
  std::size_t var_w = 7;
  for (const auto& run : r.runs) {
    file_w = std::max(file_w, run.source.size());
    var_w = std::max(var_w, run.variant.size());
  }
  const std::string ci_head = fmt::format("{}% Wilson CI", conf);
  fmt::print("  {:>3}  {:<{}}  {:<{}}  {:>11}  {:>8}  {}\n", "run", "variant", var_w, "file", file_w, "correct",
             "accuracy", ci_head);
  for (std::size_t i = 0; i < r.runs.size(); ++i) {
    const auto& run = r.runs[i];
    fmt::print("  {:>3}  {:<{}}  {:<{}}  {:>11}  {:>8.4f}  [{:.4f}, {:.4f}]\n", i + 1, run.variant, var_w,
               run.source, file_w, fmt::format("{}/{}", run.correct, run.items), run.accuracy, run.ci.lo,
               run.ci.hi);
  }

  if (!r.same_variant.empty()) {
    fmt::print("\nsame-variant agreement\n");
    fmt::print("  {:<{}}  {:>7}  {:>6}  {:>6}  {:>6}  {}\n", "variant", var_w, "runs", "agree", "b", "c", "exact p");
    for (const auto& s : r.same_variant) {
      fmt::print("  {:<{}}  {:>7}  {:>6.4f}  {:>6}  {:>6}  {}\n", s.variant, var_w,
                 fmt::format("{}, {}", s.run_1 + 1, s.run_2 + 1), s.counts.agree(), s.counts.b, s.counts.c,
                 p_text(s.test.exact_p));
    }
  }

  fmt::print("\nmatched pairs (run of A vs run of B)\n");
  fmt::print("  {:>4}  {:>7}  {:>6}  {:>6}  {:>6}  {}\n", "pair", "runs", "agree", "b", "c", "exact p");
  for (std::size_t i = 0; i < r.pairs.size(); ++i) {
    const auto& p = r.pairs[i];
    fmt::print("  {:>4}  {:>7}  {:>6.4f}  {:>6}  {:>6}  {}\n", i + 1,
               fmt::format("{}, {}", p.run_a + 1, p.run_b + 1), p.counts.agree(), p.counts.b, p.counts.c,
               p_text(p.test.exact_p));
  }

  fmt::print("\n{}: b = {} ({} right, {} wrong), c = {} ({} wrong, {} right), n = {}\n",
             r.pairs.size() == 1 ? std::string("McNemar") : fmt::format("pooled over {} pairs", r.pairs.size()),
             r.test.b, r.variant_a, r.variant_b, r.test.c, r.variant_a, r.variant_b, r.test.n);
  print_test(r.test);
  fmt::print("\n  accuracy {} {:.4f} [{:.4f}, {:.4f}], {} {:.4f} [{:.4f}, {:.4f}]; agreement {:.4f}\n",
             r.variant_a, r.acc_a, r.acc_a_ci.lo, r.acc_a_ci.hi, r.variant_b, r.acc_b, r.acc_b_ci.lo,
             r.acc_b_ci.hi, r.agree);
}

json report_json(const st::MultiRunReport& r) {
  json j = cli::report_header("mcnemar");
  put_test(j, r.test);
  j["variant_a"] = r.variant_a;
  j["variant_b"] = r.variant_b;
  j["confidence"] = r.confidence;
  j["acc_a"] = r.acc_a;
  j["acc_b"] = r.acc_b;
  j["acc_a_ci"] = ci_json(r.acc_a_ci);
  j["acc_b_ci"] = ci_json(r.acc_b_ci);
  j["agree"] = r.agree;
  j["n_items"] = r.items;
  j["runs"] = json::array();
  for (const auto& run : r.runs) {
    j["runs"].push_back({{"file", run.source},
                         {"variant", run.variant},
                         {"correct", run.correct},
                         {"items", run.items},
                         {"accuracy", run.accuracy},
                         {"ci", ci_json(run.ci)}});
  }
  j["pairs"] = json::array();
  for (const auto& p : r.pairs) {
    json e{{"run_a", p.run_a + 1}, {"run_b", p.run_b + 1}, {"agree", p.counts.agree()},
           {"both", p.counts.both}, {"neither", p.counts.neither}};
    put_test(e, p.test);
    j["pairs"].push_back(e);
  }
  j["same_variant"] = json::array();
  for (const auto& s : r.same_variant) {
    json e{{"variant", s.variant}, {"run_1", s.run_1 + 1}, {"run_2", s.run_2 + 1}, {"agree", s.counts.agree()}};
    put_test(e, s.test);
    j["same_variant"].push_back(e);
  }
  j["warnings"] = r.warnings;
  return j;
}

int run_mcnemar(std::vector<std::string> args) {
  CLI::App app{
      "McNemar test of two variants' paired per-item correctness. Each file is JSONL, one item per line: "
      "{\"id\": string or integer, \"correct\": true|false}. Files are runs; --variant names each run's "
      "variant (default with two files: A then B). The i-th run of A is paired with the i-th run of B.",
      "mcnemar"};
  std::vector<std::string> files;
  std::string variants;
  std::string counts;
  double confidence = st::kDefaultConfidence;
  double alpha = 0;
  cli::ReportOutput output;
  app.add_option("files", files, "JSONL runs, e.g. A1.jsonl B1.jsonl B2.jsonl A2.jsonl");
  app.add_option("--variant", variants, "variant label of each file, comma separated, e.g. A,B,B,A");
  auto* opt_counts = app.add_option("--counts", counts, "B,C: test the discordant counts directly (no files)");
  app.add_option("--confidence", confidence, "level of the Wilson intervals")
      ->check(cli::finite_in(0, 1, true, true));
  app.add_option("--fail-if-worse", alpha,
                 "gate: exit 1 when B is significantly worse than A, one-sided exact McNemar p < ALPHA (0: no gate)")
      ->check(cli::finite_in(0, 1));
  output.add_options(app);
  if (const int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();

  if (opt_counts->count() > 0) {
    if (!files.empty() || !variants.empty()) throw cli::BadInput("--counts takes no files and no --variant");
    return run_counts(counts, output, alpha);
  }
  if (files.size() < 2) throw cli::BadInput("need at least two files (or --counts B,C)");
  std::vector<std::string> labels;
  if (!variants.empty()) {
    labels = pav::split_list(variants);
  } else if (files.size() == 2) {
    labels = {"A", "B"};
  } else {
    throw cli::BadInput(fmt::format("{} files: say which variant each is with --variant, e.g. A,B,B,A",
                                         files.size()));
  }
  try {
    if (labels.size() != files.size()) {
      throw st::InputError(fmt::format("--variant gives {} labels for {} files", labels.size(), files.size()));
    }
    std::vector<st::CorrectnessRun> runs;
    for (const auto& f : files) runs.push_back(st::read_correctness(f));
    const auto report = st::compare_runs(runs, labels, confidence);
    for (const auto& w : report.warnings) fmt::print(stderr, "warning: {}\n", w);
    if (output.text()) print_report(report);
    json j = report_json(report);
    const int rc = apply_gate(report.test, alpha, output.text(), j);
    return output.finish(j, rc, "mcnemar");
  } catch (const st::InputError& e) {
    throw cli::BadInput(e.what());
  }
}

}  // namespace

PAV_COMMAND("mcnemar", "McNemar test of paired per-item correctness of two variants", run_mcnemar);
