// SPDX-License-Identifier: Apache-2.0
// pav bench-compare: latency percentiles, interactivity and throughput of two
// benchmark runs, with seeded bootstrap intervals for the relative deltas.
#include "stats/bench.hpp"
#include "stats/inputs.hpp"
#include "tools/command.hpp"
#include "tools/options.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cmath>

namespace {

using json = nlohmann::ordered_json;
namespace st = pav::stats;
namespace cli = pav::cli;

json optional_json(const auto& v) { return v ? json(*v) : json(nullptr); }

json summary_json(const st::BenchSummary& s) {
  return {{"file", s.source},
          {"samples", s.samples},
          {"p50_ms", s.p50_ms},
          {"p90_ms", s.p90_ms},
          {"p99_ms", s.p99_ms},
          {"interactivity_tok_s", s.interactivity_tok_s},
          {"throughput_tok_s", s.throughput_tok_s},
          {"throughput_source", s.throughput_source},
          {"completed", optional_json(s.completed)},
          {"duration_s", optional_json(s.duration_s)},
          {"requests_per_s", optional_json(s.requests_per_s)}};
}

std::string pct_text(double x) { return fmt::format("{:+.2f}%", 100.0 * x); }

void print_comparison(const st::BenchComparison& r) {
  const int conf = static_cast<int>(std::lround(100.0 * r.options.confidence));
  fmt::print("bench-compare: A = {}, B = {}\n", r.a.source, r.b.source);
  fmt::print("bootstrap: {} resamples, seed {}, {}% percentile intervals of B/A - 1\n\n", r.options.resamples,
             r.options.seed, conf);
  fmt::print("  {:<24} {:>12} {:>12} {:>10}  {}\n", "metric", "A", "B", "B vs A", fmt::format("{}% CI", conf));
  const auto row = [&](const char* name, double a, double b, const std::string& key) {
    std::string delta = "-";
    std::string ci = "-";
    for (const auto& d : r.deltas) {
      if (d.metric != key) continue;
      delta = pct_text(d.delta);
      ci = d.ci ? fmt::format("[{}, {}]", pct_text(d.ci->lo), pct_text(d.ci->hi)) : "(one duration per run)";
    }
    fmt::print("  {:<24} {:>12.3f} {:>12.3f} {:>10}  {}\n", name, a, b, delta, ci);
  };
  row("p50 latency (ms)", r.a.p50_ms, r.b.p50_ms, "p50_ms");
  row("p90 latency (ms)", r.a.p90_ms, r.b.p90_ms, "p90_ms");
  row("p99 latency (ms)", r.a.p99_ms, r.b.p99_ms, "p99_ms");
  row("interactivity (tok/s)", r.a.interactivity_tok_s, r.b.interactivity_tok_s, "interactivity_tok_s");
  row("throughput (tok/s)", r.a.throughput_tok_s, r.b.throughput_tok_s, "throughput_tok_s");
  const auto opt = [](const auto& v) { return v ? fmt::format("{}", *v) : std::string("-"); };
  fmt::print("  {:<24} {:>12} {:>12}\n", "samples", r.a.samples, r.b.samples);
  fmt::print("  {:<24} {:>12} {:>12}\n", "completed requests", opt(r.a.completed), opt(r.b.completed));
  fmt::print("  {:<24} {:>12} {:>12}\n", "duration (s)", opt(r.a.duration_s), opt(r.b.duration_s));
  const auto rate = [](const auto& v) { return v ? fmt::format("{:.3f}", *v) : std::string("-"); };
  fmt::print("  {:<24} {:>12} {:>12}\n", "requests/s", rate(r.a.requests_per_s), rate(r.b.requests_per_s));
  fmt::print("\n  interactivity = 1000 / p90; throughput from {} (A) and {} (B)\n", r.a.throughput_source,
             r.b.throughput_source);
}

// Latency grows when worse; interactivity and throughput shrink.
bool higher_is_worse(const std::string& metric) { return metric.size() > 3 && metric.substr(metric.size() - 3) == "_ms"; }

// --max-regression PCT: a metric fails when B is worse than A by more than PCT
// percent and the change is significant (its bootstrap interval lies wholly on
// the worse side of 0; a metric without an interval is judged on its estimate).
// Adds the gate to the report and returns 1 when any metric fails.
int apply_gate(const st::BenchComparison& r, double pct, bool text, json& j) {
  if (!(pct >= 0)) return cli::kExitOk;
  json metrics = json::array();
  bool any = false;
  for (const auto& d : r.deltas) {
    const double sign = higher_is_worse(d.metric) ? 1.0 : -1.0;
    const double regression = sign * d.delta;  // > 0: B is worse
    const bool significant = !d.ci || (sign > 0 ? d.ci->lo > 0 : d.ci->hi < 0);
    const bool fails = regression > pct / 100.0 && significant;
    any = any || fails;
    metrics.push_back({{"metric", d.metric}, {"regression", regression}, {"significant", significant},
                       {"interval", d.ci.has_value()}, {"fails", fails}});
    if (text && fails)
      fmt::print("gate: {} regressed by {} (more than {}%{})\n", d.metric, pct_text(regression), pct,
                 d.ci ? ", interval excludes no change" : ", no interval: estimate only");
  }
  j["gate"] = {{"max_regression_pct", pct}, {"regressed", any}, {"metrics", metrics}};
  if (text) fmt::print("gate: {} (max regression {}%)\n", any ? "FAIL" : "pass", pct);
  return any ? cli::kExitFail : cli::kExitOk;
}

int run_bench_compare(std::vector<std::string> args) {
  CLI::App app{
      "Compare two latency benchmark runs (B against A). Each file is a JSON object: {\"latency_ms\": "
      "[per-token latencies], \"completed\": optional completed requests, \"duration_s\": optional wall "
      "seconds}.",
      "bench-compare"};
  std::string file_a;
  std::string file_b;
  st::BootstrapOptions options;
  double max_count_diff = st::kDefaultMaxCountDiff;
  double max_regression = -1;
  cli::ReportOutput output;
  app.add_option("A", file_a, "baseline run (JSON)")->required();
  app.add_option("B", file_b, "candidate run (JSON)")->required();
  app.add_option("--seed", options.seed, "bootstrap seed")->check(cli::seed_value());
  app.add_option("--resamples", options.resamples, "bootstrap resamples")->check(cli::integer_in(1, 1000000));
  app.add_option("--confidence", options.confidence, "interval level")->check(cli::finite_in(0, 1, true, true));
  app.add_option("--max-count-diff", max_count_diff, "warn when completed counts differ by more than this fraction")
      ->check(cli::finite_in(0, 1));
  app.add_option("--max-regression", max_regression,
                 "gate: exit 1 when a metric of B is worse than A by more than PCT percent and significantly so "
                 "(its bootstrap interval excludes no change)")
      ->check(cli::finite_in(0, 1e6))
      ->default_str("no gate");
  output.add_options(app);
  if (const int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();

  st::BenchComparison r;
  try {
    r = st::compare_bench(st::read_bench(file_a), st::read_bench(file_b), options, max_count_diff);
  } catch (const st::InputError& e) {
    throw cli::BadInput(e.what());
  }
  for (const auto& w : r.warnings) fmt::print(stderr, "warning: {}\n", w);
  if (output.text()) print_comparison(r);
  json j = cli::report_header("bench-compare");
  j["a"] = summary_json(r.a);
  j["b"] = summary_json(r.b);
  j["seed"] = r.options.seed;
  j["resamples"] = r.options.resamples;
  j["confidence"] = r.options.confidence;
  j["max_count_diff"] = r.max_count_diff;
  j["warnings"] = r.warnings;
  j["deltas"] = json::object();
  for (const auto& d : r.deltas) {
    j["deltas"][d.metric] = {{"delta", d.delta},
                             {"ci", d.ci ? json::array({d.ci->lo, d.ci->hi}) : json(nullptr)}};
  }
  if (output.text() && max_regression >= 0) fmt::print("\n");
  const int rc = apply_gate(r, max_regression, output.text(), j);
  return output.finish(j, rc, "bench-compare");
}

}  // namespace

PAV_COMMAND("bench-compare", "latency percentiles, interactivity and throughput of two runs, bootstrap deltas",
            run_bench_compare);
