// SPDX-License-Identifier: Apache-2.0
#include "kernels/dispatch/gate.hpp"

namespace pav::kernels::dispatch {

GateVerdict gate(const DecodeCall& call, const PlanView* plan, const Scratch* scratch) noexcept {
  const Finding f = first_violation(call, KernelKind::planned, plan, scratch);
  return GateVerdict{!f, f.clause};
}

}  // namespace pav::kernels::dispatch
