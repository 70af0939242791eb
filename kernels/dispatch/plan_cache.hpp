// SPDX-License-Identifier: Apache-2.0
#pragma once
// Persistent work plans and their scratch (docs/lifecycle.md). A plan is
// minted only while graphs are captured, one per (num_seqs, Hkv, device) and
// micro-batch slot, and is never replaced or freed while the cache lives: a
// captured graph may hold its pointers. Refresh rewrites it in place.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/call.hpp"
#include "kernels/dispatch/log.hpp"
#include "kernels/planner.hpp"

namespace pav::kernels::dispatch {

// Where a forward pass is in a serving engine's life. Plans are minted only in
// capture; dummy (padding) runs never refresh a plan.
enum class Phase : uint8_t { capture, warmup, replay, eager, dummy };
std::string_view to_string(Phase p);

struct PlanKey {
  int64_t num_seqs = 0;
  int64_t kv_heads = 0;
  int device = 0;
  // Two micro-batches in flight at once capture their own graphs; a shared plan
  // or scratch would let one overwrite the other's, so the slot is in the key.
  int micro_batch = 0;
  bool operator==(const PlanKey&) const = default;
};

struct PlanCacheConfig {
  size_t max_plans = 64;          // bound on minted plans; mints past it are refused
  int64_t cu = 132;               // compute units the plans spread work over
  int64_t max_partitions = 0;     // plan ceiling; 0 = cu (the planner's default). <= 64 selects the bounded reduce
  int64_t workgroup_budget = 0;   // 0 = 2 * cu
  // Planner policy of every minted plan (Settings::plan_policy, PAV_PLAN_POLICY);
  // a device refresh of the plan takes the same params (gpu::refresh_plan).
  PlanPolicy policy = PlanPolicy::proportional;
  // Geometry of the model's attention layers; the scratch is sized from it.
  int64_t kv_heads = 1;
  int64_t head_dim = 128;
  int64_t group = 1;              // Hq / Hkv
  int64_t max_q_len = 1;          // largest q_len a forward will have (MTP positions)
  int64_t max_rows() const { return group * max_q_len; }
  DType partial = DType::bf16;    // dtype of the normalized partials
};

// One minted plan with the scratch its launches write. Buffers are allocated
// in the constructor and never resized.
class PlanSlot {
 public:
  PlanSlot(const PlanKey& key, const PlanCacheConfig& config);
  const PlanKey& key() const { return key_; }
  const WorkPlan& plan() const { return plan_; }
  PlanView view() { return plan_.view(); }
  // Re-plans in place from live lengths (num_seqs entries). No allocation.
  void refresh(const int32_t* lens);
  uint64_t refreshes() const { return refreshes_.load(std::memory_order_relaxed); }
  // Scratch views [Hkv, capacity, rows, D] over the slot's buffers; empty views
  // when rows is not in 1..max_rows() or head_dim is not the configured one.
  Scratch scratch(int64_t rows, int64_t head_dim);
  // Byte ranges of the scratch buffers, for disjointness checks.
  struct Range {
    const void* begin;
    const void* end;
  };
  std::vector<Range> scratch_ranges() const;

 private:
  PlanKey key_;
  WorkPlan plan_;
  int64_t head_dim_, max_rows_;
  DType partial_;
  std::vector<std::byte> partial_buf_;
  std::vector<float> m_, l_;
  std::atomic<uint64_t> refreshes_{0};
};

class PlanCache {
 public:
  explicit PlanCache(PlanCacheConfig config, LogSink log = stderr_log_sink());
  // The slot for key, minting it if it is new. Only in Phase::capture: any other
  // phase gets null and mints nothing. Null, too, when max_plans are already
  // minted. Logs "plan minted: ..." once per new slot.
  std::shared_ptr<PlanSlot> mint(Phase phase, const PlanKey& key);
  // The minted slot for key or null. No allocation.
  std::shared_ptr<PlanSlot> find(const PlanKey& key) const;
  const PlanCacheConfig& config() const { return config_; }
  size_t size() const;
  uint64_t minted() const { return minted_.load(); }
  uint64_t refused_outside_capture() const { return refused_phase_.load(); }
  uint64_t refused_full() const { return refused_full_.load(); }

 private:
  PlanCacheConfig config_;
  LogSink log_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<PlanSlot>> slots_;
  std::atomic<uint64_t> minted_{0}, refused_phase_{0}, refused_full_{0};
};

}  // namespace pav::kernels::dispatch
