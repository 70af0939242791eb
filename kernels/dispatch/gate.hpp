// SPDX-License-Identifier: Apache-2.0
#pragma once
// The routing gate: the per-call pre-check in front of the planned kernel. It
// accepts a call exactly when launch_planned() with the same arguments would
// not throw, and on reject names the clause launch_planned would throw with:
// both run the one clause walk of kernels/validate.hpp. No allocation, no
// environment read, no exception.
#include "kernels/call.hpp"
#include "kernels/planner.hpp"
#include "kernels/validate.hpp"

namespace pav::kernels::dispatch {

struct GateVerdict {
  bool accepted = false;
  Clause clause = Clause::none;  // the first violated clause when rejected
};

// plan: what the planned launch would be handed (null: its uniform split count).
// scratch: what the launch would be handed; null when the caller sizes scratch
// from scratch_geometry() after routing (the scratch clauses then hold by
// construction).
GateVerdict gate(const DecodeCall& call, const PlanView* plan, const Scratch* scratch) noexcept;

}  // namespace pav::kernels::dispatch
