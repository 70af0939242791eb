// SPDX-License-Identifier: Apache-2.0
#pragma once
// Generators for a kernel under test: decode cases inside what the kernel's
// description claims (the decode property), and calls at and just past the
// edges of that claim plus the hard-reject classes (the reject property).
#include <rapidcheck.h>

#include <optional>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "kernels/validate.hpp"
#include "properties/gen.hpp"
#include "properties/host_case.hpp"

namespace pav::props {

// Why pav cannot generate cases for this description (e.g. no block size that
// is a multiple of 16, which pav's case builder needs), or nullopt.
std::optional<std::string> generation_problem(const adapters::KernelDescription& d);

// A case the description claims, as a CaseSpec: spec.path is planned for
// split = plan kernels (the plan comes from plan_params(spec)), uniform
// otherwise; spec.max_partitions is the split ceiling handed to a self-splitting
// kernel (0: its own choice). Lengths are never negative.
rc::Gen<CaseSpec> gen_kernel_case(const adapters::KernelDescription& d, DecodeGenLimits limits = {});

// Draws the attention variant of a spec from what the description declares:
// windows at their edges (0, 1, L-1, L, L+1, past L), soft caps from 1 to 50,
// dominant, negligible and moderate sinks, geometric or drawn ALiBi slopes.
void draw_variant(CaseSpec& s, const adapters::KernelDescription& d);
// Draws the cache format of a case from the description: layout, page size,
// cache dtype, K/V storage, padding (strided_cache), page table and the K and
// V scale kinds.
void draw_cache_format(CaseSpec& s, const adapters::KernelDescription& d);

// Whether a spec stays inside the description (shrinking keeps only those).
bool spec_within(const CaseSpec& s, const adapters::KernelDescription& d);

// A reject-property value: a spec, possibly moved just outside the description
// (`moved` names the field), or a base spec whose materialized call breaks one
// hard-reject clause of kernels/validate.hpp (`clause`, `variant`).
struct RejectCase {
  CaseSpec spec;
  std::string moved;                               // "" or the field moved outside
  kernels::Clause clause = kernels::Clause::none;  // a structural clause to break
  int variant = 0;
};
std::string to_string(const RejectCase& r);

// The clauses of kernels/validate.hpp that a call crossing the ABI can break
// (options the ABI has no field for, such as ALiBi or the partition size, and
// pav's scratch, are left out).
std::vector<kernels::Clause> abi_clauses(adapters::Split split);

// Fields a reject case can move outside this description, and the move.
std::vector<std::string> outside_moves(const adapters::KernelDescription& d);
// Applies a move to a spec inside the description; false when the move does
// not apply to this spec (e.g. no neighbour value to step to).
bool move_outside(CaseSpec& s, const std::string& field, const adapters::KernelDescription& d);

rc::Gen<RejectCase> gen_reject_case(const adapters::KernelDescription& d);

}  // namespace pav::props
