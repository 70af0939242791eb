// SPDX-License-Identifier: Apache-2.0
#pragma once
// Two kernels under test on identical generated cases: per-case correctness of
// each (the comparison standard under each kernel's own profile) for McNemar's
// paired test.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "properties/gen/gen.hpp"
#include "stats/mcnemar.hpp"

namespace pav::props {

// What both kernels claim: every set intersected, every limit the tighter one,
// the split mode they can share (a plan only when both take pav's plan, a
// ceiling only when both take one). nullopt, with why, when a set is empty.
std::optional<adapters::KernelDescription> shared_description(const adapters::KernelDescription& a,
                                                              const adapters::KernelDescription& b,
                                                              std::string* why);

struct PairedCase {
  std::string id;  // "seed-<seed>": the same for both kernels
  uint64_t seed = 0;
  bool a_correct = false, b_correct = false;
  std::string a_verdict, b_verdict;  // one line each ("" when correct)
};

struct Comparison {
  adapters::KernelDescription shared;
  std::vector<PairedCase> cases;
  int64_t a_correct = 0, b_correct = 0;
  stats::McNemar test;  // b = A right and B wrong, c = A wrong and B right
  bool interrupted = false;
};

struct CompareOptions {
  int64_t cases = 100;
  DecodeGenLimits limits;  // the decode property's by default
  uint64_t seed = 1;
  std::function<void(int64_t done, int64_t total)> progress;
  std::function<bool()> should_stop;
};

// Case k has seed `seed + k` and is drawn from the shared description (the
// decode property's generator), then run through each kernel's check and
// decode and judged. Throws adapters::KernelSpecError when the kernels share
// no case.
Comparison compare_kernels(adapters::KernelUnderTest& a, adapters::KernelUnderTest& b, const CompareOptions& o);

// One JSONL line per case for one side: {"id", "correct", "seed", "verdict"}.
std::string correctness_jsonl(const Comparison& c, bool side_a);

}  // namespace pav::props
