// SPDX-License-Identifier: Apache-2.0
#include "kernels/dispatch/metadata.hpp"

namespace pav::kernels::dispatch {
namespace {

bool is_dummy(Phase phase, const BatchSpec& b) { return phase == Phase::dummy || b.num_seqs == 0; }

}  // namespace

std::string_view to_string(BuilderVariant v) {
  switch (v) {
    case BuilderVariant::plain: return "plain";
    case BuilderVariant::draft: return "draft";
    case BuilderVariant::micro_batch: return "micro_batch";
    case BuilderVariant::graph_capture: return "graph_capture";
  }
  return "?";
}

Scratch ForwardMetadata::plan_scratch(int64_t rows, int64_t head_dim) const {
  if (!slot_) return {};
  return slot_->scratch(rows, head_dim);
}

MetadataBuilder::MetadataBuilder(PlanCache& cache, Settings settings)
    : cache_(cache), settings_(settings) {}

ForwardMetadata MetadataBuilder::build(Phase phase, const BatchSpec& batch) {
  return finish(phase, BuilderVariant::plain, batch);
}

ForwardMetadata MetadataBuilder::build_for_graph_capture(const BatchSpec& batch) {
  return finish(Phase::capture, BuilderVariant::graph_capture, batch);
}

ForwardMetadata MetadataBuilder::build_micro_batch(Phase phase, const BatchSpec& batch) {
  return finish(phase, BuilderVariant::micro_batch, batch);
}

ForwardMetadata MetadataBuilder::build_draft(Phase phase, const BatchSpec& batch) {
  return finish(phase, BuilderVariant::draft, batch);
}

void MetadataBuilder::begin_draft_step(ForwardMetadata& md) { refresh(md); }

ForwardMetadata MetadataBuilder::finish(Phase phase, BuilderVariant variant, const BatchSpec& batch) {
  ForwardMetadata md(phase, variant, batch);
  // Dummy runs carry synthetic lengths: they get no plan, so nothing can
  // refresh the live one from them. With the feature off nothing is minted.
  if (is_dummy(phase, batch) || !settings_.plans_enabled()) return md;
  if (batch.num_seqs > kMaxPlanBatch || batch.context_lens == nullptr) return md;
  const PlanKey key{batch.num_seqs, cache_.config().kv_heads, batch.device, batch.micro_batch};
  md.slot_ = phase == Phase::capture ? cache_.mint(phase, key) : cache_.find(key);
  if (!md.slot_) return md;
  md.view_ = md.slot_->view();
  const PlanCacheConfig& c = cache_.config();
  md.scratch_ = md.slot_->scratch(batch.q_len * c.group, c.head_dim);
  refresh(md);
  return md;
}

void MetadataBuilder::refresh(ForwardMetadata& md) {
  if (!md.slot_ || is_dummy(md.phase_, md.batch_)) return;
  md.slot_->refresh(md.batch_.context_lens);
  launches_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace pav::kernels::dispatch
