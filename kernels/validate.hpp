// SPDX-License-Identifier: Apache-2.0
#pragma once
// The decode kernels' hard rejects (docs/numerics.md, docs/gate.md). One clause walk serves
// the kernel's own validation (validate_planned / validate_uniform, which throw)
// and the routing gate (kernels/dispatch/gate.hpp, which only reads the first
// finding), so every rule and every constant the two share has one source.
#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/call.hpp"
#include "kernels/planner.hpp"

namespace pav::kernels {

// Stable clause ids: the gate, the kernel, the CLI and the tests name a reject
// by these. Values are part of the interface; append, never renumber.
enum class Clause : uint8_t {
  none = 0,
  // Unsupported features.
  alibi = 1,
  sinks = 2,
  sliding_window = 3,
  q_prequantized = 4,
  // Arch and element types.
  arch = 5,
  compute_dtype = 6,
  k_dtype = 7,
  v_dtype = 8,
  q_rank = 9,
  q_dtype = 10,
  out_dtype = 11,
  out_shape = 12,
  q_head_dim_stride = 13,
  out_head_dim_stride = 14,
  // Cache layout.
  k_rank = 15,
  k_last_dim = 16,
  block_size = 17,
  head_dim = 18,
  num_hgroups = 19,
  v_heads = 20,
  v_layout = 21,
  v_blocks = 22,
  head_ratio = 23,
  k_contiguous = 24,
  v_contiguous = 25,
  // Tables and lengths.
  block_tables_dtype = 26,
  block_tables_rank = 27,
  block_tables_contiguous = 28,
  context_lens_dtype = 29,
  context_lens_rank = 30,
  context_lens_contiguous = 31,
  num_seqs = 32,
  q_len = 33,
  q_rows = 34,
  block_tables_rows = 35,
  // Partitioning.
  partition_size = 36,
  partition_count = 37,
  plan_ceiling = 38,
  // Scales.
  scale_pairing = 39,
  scale_dtype = 40,
  scale_shape = 41,
  // Scratch and plan.
  scratch_dtype = 42,
  scratch_shape = 43,
  plan_shape = 44,
  plan_invalid = 45,
  // Unsupported features (appended: ids never change).
  soft_cap = 46,
};
inline constexpr int kClauseCount = 46;  // clauses other than none

// Which kernel a clause walk is for. The uniform kernel (the default path)
// accepts more: bf16 compute, either fp8 flavour, any arch, any block size and
// any head_dim that is a multiple of 16.
enum class KernelKind : uint8_t { planned, uniform };

struct ClauseInfo {
  Clause id;
  std::string_view name;          // stable snake_case name, equal to the enumerator
  std::string_view planned_rule;  // what the planned kernel requires
  std::string_view uniform_rule;  // what the uniform kernel requires; empty: not checked there
};

// Every clause, in id order (clause_table()[i].id == Clause(i + 1)).
std::span<const ClauseInfo> clause_table();
const ClauseInfo& clause_info(Clause c);  // Clause::none has an entry too
std::string_view clause_name(Clause c);
bool parse_clause(std::string_view name, Clause& out);

// ---- Constants the planned kernel's rules use (the gate reads the same ones) ----
inline constexpr std::array<int64_t, 3> kPlannedBlockSizes{16, 64, 128};
inline constexpr int64_t kPlannedHeadDimSmall = 64;
inline constexpr int64_t kPlannedHeadDimStep = 128;
inline constexpr int64_t kPlannedHeadDimMax = 1024;
inline constexpr int64_t kKeyPackWidth = 16;  // the "x = 16" packing of the K cache

constexpr bool planned_arch_supported(Arch a) {
  return a == Arch::gfx942 || a == Arch::gfx950 || a == Arch::sm90;
}
constexpr bool planned_block_size_ok(int64_t bs) {
  for (int64_t b : kPlannedBlockSizes)
    if (b == bs) return true;
  return false;
}
constexpr bool planned_head_dim_ok(int64_t d) {
  return d == kPlannedHeadDimSmall ||
         (d >= kPlannedHeadDimStep && d <= kPlannedHeadDimMax && d % kPlannedHeadDimStep == 0);
}
constexpr bool partial_dtype_ok(DType d) {
  return d == DType::f32 || d == DType::bf16 || d == DType::f16;
}

// One violated clause and what it saw: enough to name the field and the value
// without allocating (the gate builds these on its hot path).
enum class ValueKind : uint8_t { integer, dtype, arch, flag, shape };
struct Finding {
  Clause clause = Clause::none;
  const char* field = "";
  ValueKind kind = ValueKind::integer;
  int64_t value = 0;
  bool has_expected = false;
  int64_t expected = 0;                   // same kind as value (shape: see expected_view)
  const TensorView* view = nullptr;       // kind == shape: the view at fault
  const TensorView* expected_view = nullptr;
  explicit operator bool() const { return clause != Clause::none; }
};

// "<clause>: <field> = <value>: <rule> (expected <expected>)".
std::string describe(const Finding& f, KernelKind kind = KernelKind::planned);

// Thrown by validate_*; carries the clause id.
class RejectError : public std::invalid_argument {
 public:
  RejectError(const Finding& f, KernelKind kind);
  Clause clause() const { return clause_; }

 private:
  Clause clause_;
};

// The clause walk. plan: the work plan the planned kernel is handed (null: the
// planned kernel runs its uniform split count instead). scratch: what the launch
// is handed; null skips the scratch clauses (a caller that sizes scratch with
// scratch_geometry() afterwards). Noexcept and allocation-free.
Finding first_violation(const DecodeCall& call, KernelKind kind, const PlanView* plan,
                        const Scratch* scratch) noexcept;
// Every violation, in walk order. Clauses whose prerequisites fail (e.g. the
// head_dim checks when q is not rank 3) are not evaluated.
std::vector<Finding> all_violations(const DecodeCall& call, KernelKind kind, const PlanView* plan,
                                    const Scratch* scratch);

// ---- The layout of a call's tensors ----
// What every decode call's tensors must look like, stated once: the walk above
// judges it with the kernel's own sets (as part of its clauses), and the
// contract's admission of a kernel under test (adapters/kernel.hpp) with a
// description's, each wording a clause its own way. It reads no tensor's data,
// and it comes in two parts, so that a caller can judge the caches between them
// by their format (kernels/cache_format.hpp):
//   the rows: q rank 3 [num_seqs*q_len, Hq, D]; out of q's shape, with D_v dims
//     for an MLA cache; q's and out's head-dim stride 1 (q_rank, out_shape,
//     q_head_dim_stride, out_head_dim_stride);
//   against the cache: Hq a positive multiple of Hkv (head_ratio); the block
//     table an i32 contiguous [>= num_seqs, max_blocks] (block_tables_*);
//     context_lens a contiguous i32 [num_seqs >= 1] (context_lens_*, num_seqs);
//     q_len >= 1; q rows num_seqs * q_len (q_rows); K and V scales given
//     together (scale_pairing), each f32 (scale_dtype) and [1], [Hkv] where
//     admitted, or a contiguous [num_blocks, Hkv, block_size] (scale_shape).
// The walk judges the packed K and V itself between the two parts (k_rank ..
// v_contiguous), with the kernel's block sizes and head dims.
struct LayoutRules {
  // The cache's dims; dims_read: they were read off the cache (else the head
  // ratio waits), sound: the cache's shape is sound (else per-token scales wait).
  int64_t pages = 0, hkv = 0, page_size = 0;
  bool dims_read = false, sound = false;
  int64_t max_num_seqs = 0;      // 0: no limit but >= 1
  bool block_table = true;       // judge the block table's shape (false: the page table is judged elsewhere)
  bool paired_scales = true;     // k_scale and v_scale only together
  bool per_head_scales = false;  // [Hkv] scales admitted
};
// The first broken clause of each part (Clause::none: none). Noexcept and
// allocation-free.
Finding first_rows_violation(const DecodeCall& call) noexcept;
Finding first_layout_violation(const DecodeCall& call, const LayoutRules& rules) noexcept;

// The kernels' validation: throws RejectError on the first violated clause.
void validate_planned(const DecodeCall& call, const PlanView* plan, const Scratch& scratch);
void validate_uniform(const DecodeCall& call, const Scratch& scratch);

// Scratch a launch needs. Planned with a plan: partial [Hkv, capacity, rows, D],
// m and l [Hkv, capacity, rows]. Otherwise [num_seqs*Hkv*splits, rows, D] and
// [num_seqs*Hkv*splits, rows], needed only when splits > 1. Valid only for a
// call whose geometry passed the walk.
struct ScratchGeometry {
  bool needed = false;
  int rank = 0;                          // of partial; m and l have rank - 1
  std::array<int64_t, 4> partial_shape{};
  DType partial = DType::bf16;
  int64_t slots = 0;                     // product of the leading dims
  int64_t rows = 0, head_dim = 0;
};
ScratchGeometry scratch_geometry(const DecodeCall& call, const PlanView* plan);

}  // namespace pav::kernels
