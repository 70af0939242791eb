// SPDX-License-Identifier: Apache-2.0
#pragma once
// Option values read strictly, before CLI11 converts them: integers that would
// wrap, negative seeds, NaN and infinite durations and empty values are refused
// with exit 2 and a message naming the option. The limits pav states for its
// inputs live here too, so every command checks the same bounds before it
// allocates anything.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/limits.hpp"

namespace pav::cli {

// Stated limits: the options take what the readers and the planner take
// (kernels/limits.hpp; docs/limits.md lists them).
inline constexpr int64_t kMaxCu = kernels::kMaxCu;                   // compute units (SMs) of a device
inline constexpr int64_t kMaxKvHeads = kernels::kMaxKvHeads;         // KV heads of a call
inline constexpr int64_t kMaxBudget = kernels::kMaxWorkgroupBudget;  // workgroup budget of a plan
inline constexpr int64_t kMaxBatch = kernels::kMaxPlanBatch;         // requests in one batch
inline constexpr int64_t kMaxContext = kernels::kMaxContextLen;      // context_lens are int32
inline constexpr double kMaxMinutes = 7 * 24 * 60;       // a week: longer is surely a typo

// An integer in lo..hi, in decimal digits with an optional leading '-' (no
// '+', no spaces, no exponent); anything that would wrap is refused.
CLI::Validator integer_in(int64_t lo, int64_t hi);
// A seed: 0..2^64-1 in decimal digits ("-1" is refused, not wrapped).
CLI::Validator seed_value();
// A finite number in [lo, hi], either end open on request; NaN and inf are refused.
CLI::Validator finite_in(double lo, double hi, bool lo_open = false, bool hi_open = false);

// A value that is not empty: a folder, file or list option given "" (a
// variable that expanded to nothing) is refused, never read as "the default"
// or "none". No text in --help.
CLI::Validator non_empty();

// Reads an integer list ("5,0,9000") strictly: every item an integer in
// lo..hi, at most max_items items; BadInput names `option` and the item.
std::vector<int64_t> parse_int_list(const std::string& option, const std::string& text, int64_t lo, int64_t hi,
                                    size_t max_items);

// For a command whose --json used to take a file name: refuses "--json FILE"
// and "--json=FILE" with a message pointing to --json-out.
void refuse_json_with_value(const std::vector<std::string>& args);

}  // namespace pav::cli
