// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runs a HostCase through a kernel path via the real launch entries, and checks
// it against the reference with the comparison standard (docs/numerics.md).
#include <optional>
#include <string>

#include "kernels/launch.hpp"
#include "properties/host_case.hpp"
#include "reference/compare.hpp"

namespace pav::props {

struct RunResult {
  kernels::DecodeResult status;
  std::optional<kernels::WorkPlan> plan;  // planned path only
  HostScratch scratch;
  int64_t slots_per_head = 0;   // planned: capacity
  int64_t heads = 0;
  int64_t active_tasks = 0;     // planned: tasks the plan holds
  int splits = 0;               // uniform: the split count used
};

// Poisons the output and scratch with NaN, builds (planned) a plan from the
// case's lengths, and launches. Throws kernels::RejectError when validation
// rejects the call.
RunResult run_case(HostCase& c, kernels::Backend backend = kernels::Backend::cpu);

struct CaseCheck {
  bool passed = false;
  reference::CompareReport compare;
  RunResult run;
  int64_t scratch_touched_past_active = 0;  // scratch elements no longer NaN past the active tasks
  std::string verdict;  // one line
};

// Runs the case and the reference (fp32, kernel's Q input) and applies every
// check: the compare standard (finite, within bounds, empty rows exactly 0),
// status ok, scratch past the active tasks still NaN.
CaseCheck check_case(HostCase& c, kernels::Backend backend = kernels::Backend::cpu);

}  // namespace pav::props
