// SPDX-License-Identifier: Apache-2.0
#pragma once
// The paired comparison of two kernels under test, shared by pav compare and
// pav verify --kernel A --kernel B: identical generated cases through both,
// per-case verdict JSONL per kernel (what pav mcnemar reads), McNemar summary.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "adapters/kernel.hpp"

namespace pav::cli {

struct PairedRunOptions {
  int64_t cases = 200;
  uint64_t seed = 1;
  std::string out_dir = ".";  // compare-a.jsonl and compare-b.jsonl go here
  double alpha = 0.05;
  bool progress = true;
};

struct PairedRunResult {
  int64_t cases = 0;
  int64_t a_wrong = 0, b_wrong = 0;
  bool b_significantly_worse = false;  // McNemar exact p < alpha with b > c
  bool interrupted = false;
};

// Runs the comparison, writes the two JSONL files (durably), prints the summary
// to `log` and fills `report`. Throws BadInput when the kernels share no case,
// pav::IoError when a file cannot be written.
PairedRunResult run_paired(adapters::KernelUnderTest& a, adapters::KernelUnderTest& b, const PairedRunOptions& o,
                           std::FILE* log, nlohmann::ordered_json& report);

}  // namespace pav::cli
