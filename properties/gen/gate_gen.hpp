// SPDX-License-Identifier: Apache-2.0
#pragma once
// Generators for the gate-mirror properties: tiny valid calls for the planned
// kernel (with or without a work plan), and for every clause of
// kernels/validate.hpp a family of near-boundary calls that break exactly that
// clause. A GateSpec is a plain value (it shrinks and prints); materialize()
// turns it into an owning call with real buffers, so an accepted call can be
// launched for real.
#include <rapidcheck.h>

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/call.hpp"
#include "kernels/planner.hpp"
#include "kernels/validate.hpp"
#include "properties/case/host_case.hpp"

namespace pav::props {

struct GateSpec {
  CaseSpec base;                                   // a valid call
  bool with_plan = true;                           // hand the planned kernel a work plan
  kernels::Clause violate = kernels::Clause::none; // the one clause to break
  int variant = 0;                                 // which near-boundary value (0..variants-1)
};
std::string to_string(const GateSpec& s);
std::ostream& operator<<(std::ostream& os, const GateSpec& s);

// The call, plan and scratch a GateSpec describes. Move-only: the views point
// into buffers it owns (replacement buffers for reshaped views included, each
// large enough for its view, so a wrongly accepted call reads real memory).
class GateCase {
 public:
  GateCase() = default;
  GateCase(GateCase&&) = default;
  GateCase& operator=(GateCase&&) = default;
  GateCase(const GateCase&) = delete;
  GateCase& operator=(const GateCase&) = delete;

  kernels::DecodeCall call;
  kernels::Scratch scratch;
  const kernels::PlanView* plan() const { return has_plan_ ? &plan_view_ : nullptr; }
  HostCase host;

 private:
  friend GateCase materialize(const GateSpec& spec, bool fill_values, bool large_cache);
  friend struct GateCaseEditor;
  std::optional<kernels::WorkPlan> work_plan_;
  kernels::PlanView plan_view_;
  bool has_plan_ = false;
  HostScratch host_scratch_;
  std::vector<std::vector<std::byte>> extra_;
};

// Builds the case; throws std::invalid_argument when the spec's base is not a
// buildable case or the variant is out of range. A call breaking a clause gets
// Q and cache values only with fill_values (a kernel under test may accept it).
GateCase materialize(const GateSpec& spec, bool fill_values = false, bool large_cache = false);

// Makes spec.base satisfy what spec.violate's variant needs to be the only
// clause broken (a second sequence, scales to break, ...), as the generators do.
void adjust_for_violation(GateSpec& spec);

// Near-boundary values each clause's generator draws from; 0 when a clause has
// no generator (a test requires every clause to have one).
int violation_variants(kernels::Clause c);
std::vector<kernels::Clause> clauses_with_generators();

// Tiny valid bases: 1..3 sequences, lengths around tile boundaries, every arch,
// layout, scale kind and partial dtype; sized so one CPU launch takes ~1 ms.
rc::Gen<CaseSpec> gen_gate_base();
rc::Gen<GateSpec> gen_valid_gate_spec();
rc::Gen<GateSpec> gen_violating_gate_spec(kernels::Clause c);
// Valid calls and violations of any clause, mixed.
rc::Gen<GateSpec> gen_gate_spec();

// A fixed valid spec (deterministic, for regression tests): two sequences
// {257, 3}, hkv 2, group 3, head_dim 128, block 16, per-token scales.
GateSpec fixed_gate_spec(bool with_plan);
// fixed_gate_spec() adjusted so `variant` of clause c applies (the spec a
// generator would produce for that clause from that base).
GateSpec fixed_violation_spec(kernels::Clause c, int variant, bool with_plan = true);

}  // namespace pav::props
