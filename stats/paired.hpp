// SPDX-License-Identifier: Apache-2.0
#pragma once
// Paired per-item correctness of several runs of two variants: per-run accuracy,
// same-variant agreement, matched-pair McNemar tests and their pooled test.
#include "stats/interval.hpp"
#include "stats/mcnemar.hpp"
#include "stats/proportion.hpp"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace pav::stats {

struct CorrectnessItem {
  std::string id;  // canonical text: a string id as is, an integer id in decimal
  bool correct = false;
  long line = 0;  // 1-based line in the source file
};

// One run: the items of one file, in file order, with an index by id.
struct CorrectnessRun {
  std::string source;
  std::vector<CorrectnessItem> items;
  std::unordered_map<std::string, std::size_t> index;

  // Appends an item; throws InputError naming both lines when the id repeats.
  void add(CorrectnessItem item);
  std::int64_t correct_count() const;
};

// The 2x2 table of two runs over the same items.
struct PairCounts {
  std::int64_t both = 0;     // both right
  std::int64_t b = 0;        // first right, second wrong
  std::int64_t c = 0;        // first wrong, second right
  std::int64_t neither = 0;  // both wrong

  std::int64_t items() const { return both + b + c + neither; }
  // Fraction of items where the two runs give the same verdict (1 when empty).
  double agree() const;
};

// Throws InputError (naming the file, line and id) unless both runs hold the same ids.
void check_same_ids(const CorrectnessRun& first, const CorrectnessRun& other);

// Items are matched by id. Throws InputError when the id sets differ.
PairCounts count_pairs(const CorrectnessRun& first, const CorrectnessRun& second);

struct RunSummary {
  std::string source;
  std::string variant;
  std::int64_t correct = 0;
  std::int64_t items = 0;
  double accuracy = 0.0;
  Interval ci;
};

// Two runs of the same variant (indices into the run list).
struct SameVariantPair {
  std::string variant;
  std::size_t run_1 = 0;
  std::size_t run_2 = 0;
  PairCounts counts;
  McNemar test;
};

// The i-th run of variant A against the i-th run of variant B.
struct MatchedPair {
  std::size_t run_a = 0;
  std::size_t run_b = 0;
  PairCounts counts;
  McNemar test;
};

struct MultiRunReport {
  std::string variant_a;
  std::string variant_b;
  std::int64_t items = 0;  // items per run
  double confidence = kDefaultConfidence;
  std::vector<RunSummary> runs;
  std::vector<SameVariantPair> same_variant;
  std::vector<MatchedPair> pairs;
  PairCounts pooled;  // sum of the matched pairs' tables
  McNemar test;       // McNemar on the pooled b and c
  double acc_a = 0.0;  // all A verdicts pooled over A's runs
  double acc_b = 0.0;
  Interval acc_a_ci;
  Interval acc_b_ci;
  double agree = 0.0;  // pooled over the matched pairs
  std::vector<std::string> warnings;
};

// runs[i] belongs to variant labels[i]. Exactly two distinct labels, each with
// the same number of runs; the first label met is A. The i-th run of A is paired
// with the i-th run of B (in the given order) and the pooled test sums their b
// and c. Pooling treats the pairs as independent although the same items recur,
// so its p is optimistic when runs are strongly correlated; the per-pair tests
// are reported beside it. A warning is added for every two runs of one variant
// that disagree on a larger fraction of items than the matched A/B pairs do.
// Throws InputError on bad labels or differing id sets.
MultiRunReport compare_runs(const std::vector<CorrectnessRun>& runs,
                            const std::vector<std::string>& labels,
                            double confidence = kDefaultConfidence);

}  // namespace pav::stats
