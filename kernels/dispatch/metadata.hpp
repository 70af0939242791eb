// SPDX-License-Identifier: Apache-2.0
#pragma once
// Per-forward attention metadata and its builder (docs/lifecycle.md). The
// plan and its scratch belong to the metadata of one forward (shared with the
// cache that keeps them alive for captured graphs), never to a process-wide
// table, so two micro-batches never share them. Every builder variant ends in
// the one private attach-and-refresh path; ForwardMetadata can be made nowhere
// else.
#include <atomic>
#include <cstdint>
#include <memory>

#include "kernels/dispatch/plan_cache.hpp"
#include "kernels/dispatch/settings.hpp"

namespace pav::kernels::dispatch {

enum class BuilderVariant : uint8_t { plain, draft, micro_batch, graph_capture };
std::string_view to_string(BuilderVariant v);

struct BatchSpec {
  int64_t num_seqs = 0;              // running batch; 0 marks a dummy / padding run
  int32_t* context_lens = nullptr;   // live host lengths; draft steps advance them in place
  int64_t q_len = 1;
  int device = 0;
  int micro_batch = 0;
};

class ForwardMetadata {
 public:
  ForwardMetadata(ForwardMetadata&&) noexcept = default;
  ForwardMetadata& operator=(ForwardMetadata&&) noexcept = default;
  ForwardMetadata(const ForwardMetadata&) = delete;
  ForwardMetadata& operator=(const ForwardMetadata&) = delete;

  Phase phase() const { return phase_; }
  BuilderVariant variant() const { return variant_; }
  const BatchSpec& batch() const { return batch_; }
  // The attached plan, or null (feature off, dummy run, sparse-only model, or a
  // batch size no capture minted).
  const PlanView* plan() const { return slot_ ? &view_ : nullptr; }
  // Scratch of the attached plan for calls with `rows` query rows per KV head;
  // empty views when no plan is attached or the call does not fit it.
  Scratch plan_scratch(int64_t rows, int64_t head_dim) const;
  // The scratch of the attached plan for this forward's calls (rows =
  // batch().q_len * the model's group), made once when the plan is attached.
  const Scratch& forward_scratch() const { return scratch_; }
  const PlanSlot* slot() const { return slot_.get(); }

 private:
  friend class MetadataBuilder;
  ForwardMetadata(Phase phase, BuilderVariant variant, const BatchSpec& batch)
      : phase_(phase), variant_(variant), batch_(batch) {}
  Phase phase_;
  BuilderVariant variant_;
  BatchSpec batch_;
  std::shared_ptr<PlanSlot> slot_;
  PlanView view_;
  Scratch scratch_;
};

class MetadataBuilder {
 public:
  MetadataBuilder(PlanCache& cache, Settings settings);

  // A plain forward (capture, warm-up, replay, eager or dummy).
  ForwardMetadata build(Phase phase, const BatchSpec& batch);
  // The metadata a graph is captured with: always Phase::capture (mints).
  ForwardMetadata build_for_graph_capture(const BatchSpec& batch);
  // One micro-batch of a forward split in two; batch.micro_batch names its slot.
  ForwardMetadata build_micro_batch(Phase phase, const BatchSpec& batch);
  // The first draft step of a speculative forward.
  ForwardMetadata build_draft(Phase phase, const BatchSpec& batch);
  // A later draft step, after its context_lens were advanced in place: the plan
  // is refreshed again before the step's attention. No-op for a dummy run.
  void begin_draft_step(ForwardMetadata& md);

  const Settings& settings() const { return settings_; }
  // Planner launches (refreshes) run by this builder.
  uint64_t planner_launches() const { return launches_.load(std::memory_order_relaxed); }

 private:
  // The one path every variant ends in: attach the plan, then refresh it.
  ForwardMetadata finish(Phase phase, BuilderVariant variant, const BatchSpec& batch);
  void refresh(ForwardMetadata& md);

  PlanCache& cache_;
  Settings settings_;
  std::atomic<uint64_t> launches_{0};
};

}  // namespace pav::kernels::dispatch
