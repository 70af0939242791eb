// SPDX-License-Identifier: Apache-2.0
#pragma once
// An owning decode call: the shapes and options of one call (CaseSpec) and the
// host buffers built from them (HostCase). Every cache byte outside the context,
// the output and (by the runners) scratch are poisoned with NaN, so a kernel
// that reads or leaves them shows up as a non-finite result.
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cache_format.hpp"
#include "kernels/call.hpp"
#include "kernels/planner.hpp"
#include "properties/case/counter_rng.hpp"

namespace pav::props {

using ScaleKind = kernels::ScaleKind;
enum class Path : uint8_t { uniform, planned };

// A token whose key points along its group's queries (a dominant logit) and
// whose value is distinctive: skipping or duplicating it is a gross error.
struct Sentinel {
  int64_t seq = 0;
  int64_t token = 0;
};

// A case has three parts, each a struct of its own so that code which needs
// one part says so: the call the kernel under test is handed (CallShape), how
// its bytes are made (DataRecipe), and the settings only pav's own kernels read
// (PavKernelSettings). Every kernel gets the same call and bytes; pav's
// settings travel in the saved case beside them.

// The call: shapes, dtypes, cache format, attention variant and the split
// ceiling a request carries.
struct CallShape {
  std::vector<int32_t> lens;          // context_lens; num_seqs = lens.size()
  int q_len = 1;
  int hkv = 1;
  int group = 1;                      // Hq / Hkv
  int head_dim = 128;
  int block_size = 16;
  kernels::VLayout v_layout = kernels::VLayout::plain;  // packed layout only
  kernels::DType q_dtype = kernels::DType::bf16;
  kernels::DType cache_dtype = kernels::DType::fp8_e4m3fn;  // any cache dtype (bf16, f16, fp8 e4m3/e5m2)
  ScaleKind scales = ScaleKind::per_tensor;                 // K's, and V's unless v_scales says
  std::optional<ScaleKind> v_scales;                        // V's own kind
  // The cache format (kernels/cache_format.hpp): its layout, K and V as one
  // [pages, 2, ...] tensor (nhd, hnd), padding that makes the page and head
  // strides larger than the contiguous ones (nhd, hnd), and the page table.
  // Pages are assigned by the block table in every format: CSR lists are the
  // same pages, listed.
  kernels::CacheLayout layout = kernels::CacheLayout::packed;
  bool kv_combined = false;
  // MLA (nhd, hnd): V is K's first v_head_dim dims, out has v_head_dim dims;
  // 0: not MLA. The K buffer holds the cache; there are no V codes.
  int v_head_dim = 0;
  int out_head_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }  // V's and out's
  int64_t page_pad = 0;  // elements after each page
  int64_t row_pad = 0;   // elements after each D-long row of a head
  kernels::PageTable page_table = kernels::PageTable::block_table;
  int64_t max_partitions = 0;         // planned: 0 = cu
  int64_t q_row_pad = 0;              // extra elements between q rows (a strided q)
  float softmax_scale = 0.0f;         // 0 means 1/sqrt(head_dim)
  // The attention variant (kernels::AttentionVariant): window and soft cap, and
  // the sink logits and ALiBi slopes inline, one per query head (Hq values).
  int window_left = -1;
  float soft_cap = 0.0f;
  std::optional<std::vector<float>> sinks, alibi_slopes;
};

// How the case's bytes are made from its seed: blocks no context uses, the
// generator, planted tokens, extreme or tied logits, and inline tensors that
// replace generated data.
struct DataRecipe {
  int64_t spare_blocks = 1;           // blocks no table points to (poisoned)
  // Blocks before the ones the tables use (poisoned, never in a table): with
  // enough of them every page a context reads sits past element 2^31 of its
  // cache, for kernels that declare large_cache. 0: the used blocks come first.
  int64_t low_spare_blocks = 0;
  // Block 0 a null block, as engines keep one and pad their block tables with
  // 0: poisoned, no sequence's page, and every table entry past a sequence's
  // pages points at it (the used blocks follow it). A kernel that reads
  // block 0 or a padded entry for a masked lane then reads NaN, where with the
  // used blocks from 0 it would read a live page and hide the read.
  bool null_block = false;
  uint64_t seed = 1;                  // data seed: q, caches, scales, block order
  // How the seed becomes data: 2 (counter-based, properties/case/counter_rng.hpp,
  // the same bytes everywhere) or 1 (the legacy standard-library stream, for
  // case files saved before generator 2 existed).
  int generator = rng::kGeneratorVersion;
  std::vector<Sentinel> sentinels;
  // Extreme logits (-1, +1; 0 off): every element of q gets +4 and every key
  // element -4 (or +4), so q.k is about -16 D (+16 D) for every token; with a
  // softmax scale of 6e4 / (16 D) every scaled logit then sits near -6e4
  // (+6e4), far below (above) any finite sentinel a kernel might start its
  // running max from, or past what f16 logits hold.
  int extreme_logits = 0;
  static constexpr float kExtremeShift = 4.0f;  // the shared component of q's and K's elements
  // Query head 0 of every row all zeros: its logits tie exactly (every score
  // 0 before a variant's bias, so its softmax is uniform over what it sees),
  // and its absmax is 0 (a per-row quantization scale must not divide by it).
  bool zero_q_head = false;
  // Query head 0 of every row a constant: every element 1 (plus the shift of
  // extreme logits or near ties). Each of its logits is its key's element sum,
  // and a per-row quantization puts every element at the largest code, not
  // only the row's absmax. Never with zero_q_head.
  bool constant_q_head = false;
  // Ties of each row's logits (0 off). 1: every key of a (sequence, KV head) is
  // token 0's, so a row's logits tie exactly (values still differ: the output
  // is the mean of what the row sees). 2: near ties at a large offset: q and
  // the keys share a component (+4 each, as extreme logits) and each key is
  // token 0's plus kNearTieSpread times its own draw, so at the default scale
  // a row's scaled logits sit near 16 sqrt(D) (about 180 at D 128) within
  // about 1 of each other; logits rounded to 16 bits lose their differences
  // there. Never with extreme_logits.
  int logit_ties = 0;
  static constexpr float kNearTieSpread = 0.25f;
  // Inline tensors (small cases); when present they replace generated data.
  std::optional<std::vector<int32_t>> block_tables;  // [num_seqs * max_blocks]
  std::optional<std::vector<uint16_t>> q_bits;       // raw bf16/f16 bits
  // The cache buffers' bytes as build_case lays them out (k_codes holds the
  // whole combined tensor when kv_combined; v_codes is then absent).
  std::optional<std::vector<uint8_t>> k_codes, v_codes;
  std::optional<std::vector<float>> k_scale_values, v_scale_values;
};

// pav's own kernels' settings: the options of their launch, the path and the
// planner's workgroup budget. Other kernels never read them. The call's
// softmax scale is CallShape's: HostCase::call() puts it into the call's
// options, over opt's.
struct PavKernelSettings {
  kernels::DecodeOptions opt;         // arch, compute, partial, cu, uniform_partitions...
  Path path = Path::planned;
  int64_t workgroup_budget = 0;       // planned: 0 = 2*cu
};

struct PriorCall;

struct CaseSpec : CallShape, DataRecipe, PavKernelSettings {
  // The calls made through the same kernel instance before this one, in
  // order: a failure that needs what earlier calls left (stale scratch) is
  // saved as that sequence (pav-case/2) and replayed from a fresh instance.
  // Empty for a single call.
  std::vector<PriorCall> prelude;
  // Where a generator drew the call (a decode region, kernel_gen.hpp); not
  // part of the case: a run records it in meta.region. Empty: not drawn by a
  // generator that names regions.
  std::string region;
};

// One earlier call of a sequence: the case and its property's fields (meta).
struct PriorCall {
  CaseSpec spec;
  nlohmann::json meta = nlohmann::json::object();
};

// Asks for huge pages over a large allocation (64 MiB or more): a read of its
// untouched zeros (a worker's input file scanned for chunks of zeros) then
// maps one shared zero page per 2 MiB instead of one fault per 4 KiB.
void lazy_zero_huge_pages(void* p, size_t bytes);

// Zeroed memory whose pages the system maps only where they are written:
// calloc, and no value-initialisation by the vector. The low blocks of a large
// cache (gigabytes pav writes only at their edges) then cost no page clearing
// and no stores.
template <class T>
struct LazyZeroAllocator {
  using value_type = T;
  LazyZeroAllocator() = default;
  template <class U>
  LazyZeroAllocator(const LazyZeroAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    void* p = std::calloc(n, sizeof(T));
    if (!p) throw std::bad_alloc();
    lazy_zero_huge_pages(p, n * sizeof(T));
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    if constexpr (sizeof...(A) > 0) ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    // no arguments: left as calloc made it (zero)
  }
  template <class U>
  bool operator==(const LazyZeroAllocator<U>&) const noexcept { return true; }
};
using CacheBytes = std::vector<uint8_t, LazyZeroAllocator<uint8_t>>;

// How many blocks at each edge of a large cache's low blocks are poisoned (its
// first ones, the null block among them, and those right before the used
// ones); the blocks between are zero.
inline constexpr int64_t kLowBlockPoisonBand = 64;

struct HostCase {
  CaseSpec spec;
  int64_t num_blocks = 0, max_blocks = 0;
  std::vector<uint16_t> q, out;
  CacheBytes k, v;  // cache bytes in the spec's format (k: the combined tensor, v empty)
  std::vector<int32_t> block_tables, lens;
  std::vector<int32_t> kv_indptr, kv_indices, kv_last_page_len;  // page_table = csr
  std::vector<float> k_scale, v_scale;
  std::vector<float> sinks, alibi_slopes;  // empty when the variant has none

  kernels::DecodeCall call();  // views into this case's buffers
  // V's scale kind (the spec's v_scales, else its scales).
  ScaleKind v_scale_kind() const { return spec.v_scales.value_or(spec.scales); }
  // The cache's shape as the call's views give it.
  kernels::CacheShape cache_shape() const;
  void poison_output();        // NaN into every output element
};

// Refits the fields derived from a spec's geometry after an edit that changes
// it (shrinking, a reject move): the per-query-head values of the variant
// (sinks, ALiBi slopes) to its Hq, keeping the first ones and repeating the
// last; and a large cache's low_spare_blocks to its page size, so that every
// used page still lies just past element 2^31 (a larger page with the old
// count would ask for many times the memory, a smaller one fall short).
void fit_derived_fields(CaseSpec& s);

// The softmax scale that puts an extreme_logits case's scaled logits near
// -+6e4: q.k is about 16 D in the scaled values (32 times that when the cache
// has no scale).
float extreme_logit_scale(int head_dim, ScaleKind scales);

// The softmax scale that keeps a near-ties case's scaled logits within about 1
// of each other: the default (0), but 1 / (32 sqrt(D)) when the cache has no
// scale (its values are then 32 times the drawn ones).
float near_tie_scale(int head_dim, ScaleKind scales);

// The low spare blocks that put a spec's used pages at element 2^31 or past
// of its K (or combined) buffer.
int64_t large_cache_low_blocks(const CaseSpec& s);

// Checks a spec without allocating anything: shapes in range, every inline
// tensor's length against the shapes, scales matching their kind (both or
// neither), low_spare_blocks 0 or large_cache_low_blocks (the one count pav
// writes), and (check_memory) that its buffers and the scratch of its path fit
// in kMaxCaseHostBytes. Throws std::invalid_argument "FIELD: why". Returns the
// block counts the buffers will have.
// large_cache: the case is for a kernel that declares large_cache, so a case
// with low blocks may take kMaxLargeCaseHostBytes instead. Only a caller that
// holds such a kernel's description passes true; a case file alone never
// earns the larger limit (pav gate, a kernel without large_cache).
struct CaseBlocks {
  int64_t num_blocks = 0, max_blocks = 0;
  int64_t used = 0;  // blocks the lengths need (generated tables)
};
CaseBlocks check_case_spec(const CaseSpec& spec, bool check_memory = true, bool large_cache = false);

// Builds the buffers a spec describes (after check_case_spec); throws std::invalid_argument naming the
// field when the spec is inconsistent (an inline tensor whose length does not
// match the shapes, scales that do not match their kind) or when its buffers
// and scratch would need more than kMaxCaseHostBytes (kMaxLargeCaseHostBytes
// for a case with low blocks when large_cache, as check_case_spec); all before
// allocating.
// fill_values = false builds the shapes, tables, lengths and scales only and
// leaves Q and the caches NaN-poisoned:
// for calls that must be refused before any kernel reads them (gate-mirror
// violations), where drawing values is most of the cost.
// poison: what fills every cache byte no context reads (the tails of last
// pages, spare, low and null blocks, padding) and each per-token scale there:
// NaN, or zero (the same call with finite memory where NaN was, to tell a
// kernel that multiplies those slots by zero from one that gives them weight).
enum class Poison : uint8_t { nan, zero };
HostCase build_case(const CaseSpec& spec, bool fill_values = true, Poison poison = Poison::nan,
                    bool large_cache = false);

// Sets the key codes of token `token` of sequence `seq`, for every KV head, to
// +-magnitude following the sign of the group's summed queries at each head-dim
// index: a logit far above the others (the sentinels' keys, magnitude 224).
void plant_query_aligned_key(HostCase& c, int64_t seq, int64_t token, float magnitude);

// The one-sequence call holding sequence `seq` of `c`: the same cache bytes,
// block ids, query rows and scales, inline (batch-invariance checks).
CaseSpec single_sequence_spec(const HostCase& c, int64_t seq);

// Scratch buffers for one path, NaN-poisoned.
struct HostScratch {
  std::vector<uint8_t> partial;
  std::vector<float> m, l;
  kernels::Scratch view;
  int64_t slots = 0;
};
// heads > 0 shapes it [heads, slots/heads, rows, D] (the planned layout),
// else [slots, rows, D] (the uniform layout). Throws kernels::RejectError
// (scratch_dtype) before sizing anything when opt.partial is not f32, bf16 or
// f16, the dtypes these buffers hold.
HostScratch make_scratch(const kernels::DecodeCall& call, int64_t slots, int64_t heads = 0);

// Counts of scratch slots past `first_unused_slot` that are no longer NaN.
int64_t scratch_touched_past(const HostScratch& s, const kernels::DecodeCall& call,
                             int64_t first_unused_slot, int64_t slots_per_head, int64_t heads);

kernels::PlanParams plan_params(const CaseSpec& spec);

// Which rows of the output sees at least one token (for "exactly zero" checks).
bool row_has_visible_token(const CaseSpec& spec, int64_t seq, int64_t pos);

}  // namespace pav::props
