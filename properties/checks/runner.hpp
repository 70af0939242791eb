// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runs a HostCase through a kernel path via the real launch entries: the drift
// sweep's runs on pav's kernels (a decode check goes through pav's adapter,
// properties/checks/kernel_properties.hpp, as every kernel under test's does).
#include <optional>
#include <string>

#include "kernels/launch.hpp"
#include "properties/case/host_case.hpp"

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

}  // namespace pav::props
