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
#include "kernels/planner.hpp"
#include "kernels/validate.hpp"
#include "properties/gen/gen.hpp"
#include "properties/case/host_case.hpp"

namespace pav::props {

// Why pav cannot generate cases for this description (e.g. no block size that
// is a multiple of 16, which pav's case builder needs), or nullopt.
std::optional<std::string> generation_problem(const adapters::KernelDescription& d);

// The GQA ratios a description lists that are rare in engines' tilings: above
// 16, or not a power of two (20, 48). The generator weights them up.
std::vector<int64_t> rare_gqa_ratios(const adapters::KernelDescription& d);

// A case the description claims, as a CaseSpec: spec.path is planned for
// split = plan kernels (the plan comes from plan_params(spec)), uniform
// otherwise; spec.max_partitions is the split ceiling handed to a self-splitting
// kernel (0: its own choice). Lengths are never negative.
rc::Gen<CaseSpec> gen_kernel_case(const adapters::KernelDescription& d, DecodeGenLimits limits = {});

// The regions of the decode call space where decode bugs sit, each a way of
// drawing a call the description claims:
//   uneven-window     one long request beside short ones of unaligned lengths,
//                     under a sliding window (window kernels)
//   empty-splits      empty requests beside a long one, at the most splits
//   short-vs-splits   every request shorter than the splits it may get
//                     (kernels that take a split ceiling or pav's plan)
//   q-len             2 to 5 query positions per request (kernels that take them)
//   extreme-logits    every scaled score near -6e4 or +6e4
//   sinks             a dominant (+50) or negligible (-50) sink on every head
//   gqa-rare          a GQA ratio above 16 or not a power of two
//   boundary-lengths  lengths one off, or on, a page, tile or split boundary
// The general generator (gen_kernel_case) is region "general".
inline constexpr const char* kRegionGeneral = "general";
// The regions that apply to a description, in the order above.
std::vector<std::string> decode_regions(const adapters::KernelDescription& d);
// A call drawn in one region (or "general"); spec.region names it. A draw the
// region cannot place inside the description falls back to the general
// draw, named "general".
rc::Gen<CaseSpec> gen_kernel_case_in(const adapters::KernelDescription& d, const std::string& region,
                                     DecodeGenLimits limits = {});
// Half the calls from the general generator, half spread evenly over the
// regions that apply (pav verify's decode search, pav fuzz --regions).
rc::Gen<CaseSpec> gen_kernel_case_weighted(const adapters::KernelDescription& d, DecodeGenLimits limits = {});

// Shapes, for kernels that compile per shape (a Triton or torch.compile
// kernel specialises on its shape constants and compiles once per shape). A
// call's shape is what such a kernel compiles for: dtypes, cache format
// (layout, V layout, K/V storage, strides, page table, scale kinds), head
// dims, KV heads, GQA ratio, q_len, page size, q's row padding, and which
// attention variants are on. Lengths, the batch, the tables' pages, the split
// ceiling, the data and each variant's values vary within a shape.
std::string shape_of(const CaseSpec& s);
// A run's shapes, drawn from `seed` alone: n calls, each of a shape of its own
// where the description has that many (fewer where it has not), chosen
// greedily among 8n (at least 32) drawn ones for the features decode bugs
// need between them (several KV heads, grouped queries, q_len > 1, each
// format, dtype, scale kind and variant, a shape without a soft cap and one
// without any variant, page and head sizes); with regions
// the draws include two in each region that needs a shape of its own (q-len,
// gqa-rare, sinks, uneven-window). Each call's fields other than its shape do
// not matter.
std::vector<CaseSpec> draw_shapes(const adapters::KernelDescription& d, int n, uint64_t seed, bool regions,
                                  DecodeGenLimits limits = {});
// Calls in the given shapes only: drawn as gen_kernel_case (regions false)
// or gen_kernel_case_weighted (true) draws them, then moved into one of the
// shapes (for a region's call, one that has what the region needs: q_len > 1,
// a rare ratio, sinks, a window, no soft cap for extreme logits; a region no
// shape fits draws general). Shrinking stays within the shapes.
rc::Gen<CaseSpec> gen_kernel_case_shaped(const adapters::KernelDescription& d, std::vector<CaseSpec> shapes,
                                         bool regions, DecodeGenLimits limits = {});

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

// A stale-plan value for a kernel that runs pav's plan (split = plan): a case
// the description claims, at its live lengths, handed a plan that no longer
// describes them. Either the whole plan was refreshed from other lengths
// (plan_lens: the lengths before draft steps advanced them in place, or before
// one sequence grew, shrank or emptied), or it is torn: refreshed from the live
// lengths but for one work_info row left from the refresh from plan_lens (an
// interrupted refresh; the row may be another sequence's, recording that
// sequence's live length). The kernel must answer stale_plan, refuse the call
// in its check, or compute the live call correctly all the same.
struct StaleKernelCase {
  CaseSpec spec;                   // the call at its live lengths (spec.lens)
  std::vector<int32_t> plan_lens;  // the lengths the stale refresh saw
  int64_t torn_row = -1;           // >= 0: only this row is from plan_lens
};
std::string to_string(const StaleKernelCase& s);
// The plan a stale value hands the kernel, written into `plan` (made for the
// spec's plan_params): refreshed from plan_lens, or from the live lengths with
// the torn row taken from plan_lens' refresh.
void make_stale_plan(const StaleKernelCase& s, kernels::WorkPlan& plan);
// Stale values for a split = plan description: half torn plans (the torn row
// one whose value differs between the two refreshes), half whole ones.
rc::Gen<StaleKernelCase> gen_stale_kernel_case(const adapters::KernelDescription& d, DecodeGenLimits limits = {});

// A reject-property value: a spec, possibly moved just outside the description
// (`moved` names the field), or a base spec whose materialized call breaks one
// hard-reject clause of kernels/validate.hpp (`clause`, `variant`).
struct RejectCase {
  CaseSpec spec;
  std::string moved;                               // "" or the field moved outside
  kernels::Clause clause = kernels::Clause::none;  // a structural clause to break
  int variant = 0;
};
// What kind of reject case it is: "breaks CLAUSE (variant N)", "moved outside:
// FIELD", or "inside the description".
std::string reject_kind(const RejectCase& r);

// The clauses of kernels/validate.hpp that a call crossing the ABI can break
// (options the ABI has no field for, such as ALiBi or the partition size, and
// pav's scratch, are left out).
std::vector<kernels::Clause> abi_clauses(adapters::Split split);

// Fields a reject case can move outside this description, and the move.
std::vector<std::string> outside_moves(const adapters::KernelDescription& d);
// Applies a move to a spec inside the description; false when the move does
// not apply to this spec (e.g. no neighbour value to step to).
bool move_outside(CaseSpec& s, const std::string& field, const adapters::KernelDescription& d);

// With shapes, the calls inside the description (the ones a kernel decodes)
// are in those shapes; the moves and broken clauses start from them.
rc::Gen<RejectCase> gen_reject_case(const adapters::KernelDescription& d, std::vector<CaseSpec> shapes = {});

}  // namespace pav::props
