// SPDX-License-Identifier: Apache-2.0
#include "stats/paired.hpp"

#include "stats/input_error.hpp"

#include <fmt/core.h>

#include <algorithm>

namespace pav::stats {

void CorrectnessRun::add(CorrectnessItem item) {
  const auto [it, inserted] = index.emplace(item.id, items.size());
  if (!inserted) {
    throw InputError(fmt::format("{}:{}: id: duplicate id \"{}\" (first on line {})", source, item.line,
                                 input::excerpt(item.id), items[it->second].line));
  }
  items.push_back(std::move(item));
}

std::int64_t CorrectnessRun::correct_count() const {
  return std::count_if(items.begin(), items.end(), [](const auto& i) { return i.correct; });
}

double PairCounts::agree() const {
  const auto n = items();
  return n == 0 ? 1.0 : static_cast<double>(both + neither) / static_cast<double>(n);
}

void check_same_ids(const CorrectnessRun& first, const CorrectnessRun& other) {
  for (const auto& item : other.items) {
    if (!first.index.contains(item.id)) {
      throw InputError(fmt::format("{}:{}: id: \"{}\" is not in {} (every file must hold the same ids)",
                                   other.source, item.line, input::excerpt(item.id), first.source));
    }
  }
  for (const auto& item : first.items) {
    if (!other.index.contains(item.id)) {
      throw InputError(fmt::format("{}:{}: id: \"{}\" is missing from {} (every file must hold the same ids)",
                                   first.source, item.line, input::excerpt(item.id), other.source));
    }
  }
}

PairCounts count_pairs(const CorrectnessRun& first, const CorrectnessRun& second) {
  check_same_ids(first, second);
  PairCounts t;
  for (const auto& item : first.items) {
    const bool y = second.items[second.index.at(item.id)].correct;
    if (item.correct && y) ++t.both;
    else if (item.correct) ++t.b;
    else if (y) ++t.c;
    else ++t.neither;
  }
  return t;
}

namespace {

double fraction(std::int64_t k, std::int64_t n) {
  return n == 0 ? 0.0 : static_cast<double>(k) / static_cast<double>(n);
}

std::string percent(double x) { return fmt::format("{:.1f}%", 100.0 * x); }

}  // namespace

MultiRunReport compare_runs(const std::vector<CorrectnessRun>& runs,
                            const std::vector<std::string>& labels, double confidence) {
  if (runs.size() != labels.size()) {
    throw InputError(fmt::format("--variant gives {} labels for {} files", labels.size(), runs.size()));
  }
  MultiRunReport r;
  r.confidence = confidence;
  std::vector<std::size_t> runs_a;
  std::vector<std::size_t> runs_b;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i].empty()) throw InputError(fmt::format("--variant: label {} is empty", i + 1));
    if (r.variant_a.empty() || labels[i] == r.variant_a) {
      r.variant_a = labels[i];
      runs_a.push_back(i);
    } else if (r.variant_b.empty() || labels[i] == r.variant_b) {
      r.variant_b = labels[i];
      runs_b.push_back(i);
    } else {
      throw InputError(fmt::format("--variant: a third label '{}' (only two variants are compared: '{}' and '{}')",
                                   labels[i], r.variant_a, r.variant_b));
    }
  }
  if (runs_b.empty()) throw InputError(fmt::format("--variant: every file is variant '{}'; two variants are needed", r.variant_a));
  if (runs_a.size() != runs_b.size()) {
    throw InputError(fmt::format("--variant: '{}' has {} runs and '{}' has {}; runs are paired one to one",
                                 r.variant_a, runs_a.size(), r.variant_b, runs_b.size()));
  }
  for (std::size_t i = 1; i < runs.size(); ++i) check_same_ids(runs[0], runs[i]);
  r.items = static_cast<std::int64_t>(runs[0].items.size());

  std::int64_t correct_a = 0;
  std::int64_t correct_b = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    RunSummary s;
    s.source = runs[i].source;
    s.variant = labels[i];
    s.correct = runs[i].correct_count();
    s.items = r.items;
    s.accuracy = fraction(s.correct, s.items);
    s.ci = wilson_interval(s.correct, s.items, confidence);
    (labels[i] == r.variant_a ? correct_a : correct_b) += s.correct;
    r.runs.push_back(std::move(s));
  }
  const auto pooled_items = r.items * static_cast<std::int64_t>(runs_a.size());
  r.acc_a = fraction(correct_a, pooled_items);
  r.acc_b = fraction(correct_b, pooled_items);
  r.acc_a_ci = wilson_interval(correct_a, pooled_items, confidence);
  r.acc_b_ci = wilson_interval(correct_b, pooled_items, confidence);

  for (std::size_t i = 0; i < runs_a.size(); ++i) {
    MatchedPair p;
    p.run_a = runs_a[i];
    p.run_b = runs_b[i];
    p.counts = count_pairs(runs[p.run_a], runs[p.run_b]);
    p.test = mcnemar(p.counts.b, p.counts.c);
    r.pooled.both += p.counts.both;
    r.pooled.b += p.counts.b;
    r.pooled.c += p.counts.c;
    r.pooled.neither += p.counts.neither;
    r.pairs.push_back(p);
  }
  r.test = mcnemar(r.pooled.b, r.pooled.c);
  r.agree = r.pooled.agree();

  const double cross_disagree = 1.0 - r.agree;
  for (const auto* group : {&runs_a, &runs_b}) {
    for (std::size_t i = 0; i < group->size(); ++i) {
      for (std::size_t j = i + 1; j < group->size(); ++j) {
        SameVariantPair s;
        s.variant = labels[(*group)[i]];
        s.run_1 = (*group)[i];
        s.run_2 = (*group)[j];
        s.counts = count_pairs(runs[s.run_1], runs[s.run_2]);
        s.test = mcnemar(s.counts.b, s.counts.c);
        const double disagree = 1.0 - s.counts.agree();
        if (disagree > cross_disagree) {
          r.warnings.push_back(fmt::format(
              "runs {} and {} of variant '{}' disagree on {} of items, more than the variants do ({}): "
              "run-to-run noise is at least as large as the difference being tested",
              s.run_1 + 1, s.run_2 + 1, s.variant, percent(disagree), percent(cross_disagree)));
        }
        r.same_variant.push_back(std::move(s));
      }
    }
  }
  return r;
}

}  // namespace pav::stats
