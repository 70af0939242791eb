// SPDX-License-Identifier: Apache-2.0
#include "kernels/dispatch/plan_cache.hpp"

#include <string>

namespace pav::kernels::dispatch {
namespace {

PlanParams params_for(const PlanKey& key, const PlanCacheConfig& c) {
  PlanParams p;
  p.num_seqs = key.num_seqs;
  p.kv_heads = key.kv_heads;
  p.cu = c.cu;
  p.max_partitions = c.max_partitions;
  p.workgroup_budget = c.workgroup_budget;
  p.policy = c.policy;
  return p;
}

}  // namespace

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::capture: return "capture";
    case Phase::warmup: return "warmup";
    case Phase::replay: return "replay";
    case Phase::eager: return "eager";
    case Phase::dummy: return "dummy";
  }
  return "?";
}

PlanSlot::PlanSlot(const PlanKey& key, const PlanCacheConfig& config)
    : key_(key),
      plan_(params_for(key, config)),
      head_dim_(config.head_dim),
      max_rows_(config.max_rows()),
      partial_(config.partial) {
  const size_t rows = size_t(key.kv_heads) * size_t(plan_.capacity()) * size_t(max_rows_);
  partial_buf_.resize(rows * size_t(head_dim_) * size_t(dtype_size(partial_)));
  m_.resize(rows);
  l_.resize(rows);
}

void PlanSlot::refresh(const int32_t* lens) {
  plan_.refresh(lens);
  refreshes_.fetch_add(1, std::memory_order_relaxed);
}

Scratch PlanSlot::scratch(int64_t rows, int64_t head_dim) {
  if (rows < 1 || rows > max_rows_ || head_dim != head_dim_) return {};
  const int64_t h = key_.kv_heads, cap = plan_.capacity();
  Scratch s;
  s.partial = TensorView::contiguous_of(partial_buf_.data(), partial_, {h, cap, rows, head_dim});
  s.m = TensorView::contiguous_of(m_.data(), DType::f32, {h, cap, rows});
  s.l = TensorView::contiguous_of(l_.data(), DType::f32, {h, cap, rows});
  return s;
}

std::vector<PlanSlot::Range> PlanSlot::scratch_ranges() const {
  return {{partial_buf_.data(), partial_buf_.data() + partial_buf_.size()},
          {m_.data(), m_.data() + m_.size()},
          {l_.data(), l_.data() + l_.size()}};
}

PlanCache::PlanCache(PlanCacheConfig config, LogSink log) : config_(config), log_(std::move(log)) {
  // Fail at construction, not at the first mint, on a config the planner rejects.
  PlanParams p = params_for(PlanKey{1, config_.kv_heads, 0, 0}, config_);
  (void)resolve(p);
  slots_.reserve(config_.max_plans);
}

std::shared_ptr<PlanSlot> PlanCache::mint(Phase phase, const PlanKey& key) {
  if (phase != Phase::capture) {
    refused_phase_.fetch_add(1);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : slots_)
    if (s->key() == key) return s;
  if (slots_.size() >= config_.max_plans) {
    refused_full_.fetch_add(1);
    if (log_)
      log_("plan cache full (" + std::to_string(config_.max_plans) + " plans): not minting num_seqs=" +
           std::to_string(key.num_seqs) + " kv_heads=" + std::to_string(key.kv_heads) +
           " device=" + std::to_string(key.device) + " micro_batch=" + std::to_string(key.micro_batch));
    return nullptr;
  }
  auto slot = std::make_shared<PlanSlot>(key, config_);
  slots_.push_back(slot);
  minted_.fetch_add(1);
  if (log_)
    log_("plan minted: num_seqs=" + std::to_string(key.num_seqs) + " kv_heads=" +
         std::to_string(key.kv_heads) + " device=" + std::to_string(key.device) + " micro_batch=" +
         std::to_string(key.micro_batch) + " capacity=" + std::to_string(slot->plan().capacity()) +
         " max_partitions=" + std::to_string(slot->plan().params().max_partitions));
  return slot;
}

std::shared_ptr<PlanSlot> PlanCache::find(const PlanKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : slots_)
    if (s->key() == key) return s;
  return nullptr;
}

size_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.size();
}

}  // namespace pav::kernels::dispatch
