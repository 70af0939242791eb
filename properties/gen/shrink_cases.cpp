// SPDX-License-Identifier: Apache-2.0
#include "properties/gen/shrink_cases.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "properties/gen/gen.hpp"

namespace pav::props {

std::string lens_text(const std::vector<int32_t>& lens, size_t max_shown) {
  std::string s = "[";
  for (size_t i = 0; i < lens.size() && i < max_shown; ++i) s += (i ? "," : "") + std::to_string(lens[i]);
  if (lens.size() > max_shown) s += fmt::format(",... ({} total)", lens.size());
  return s + "]";
}

// Shorter lengths to try in place of len, most aggressive first: the tile
// boundaries, and len minus len/2, len/4, ..., 1, so a failure that starts at
// some length is walked down to it in about log2(len) accepted steps.
std::vector<int32_t> shorter_lengths(int32_t len) {
  if (len <= 0) return len < 0 ? std::vector<int32_t>{0} : std::vector<int32_t>{};
  std::vector<int32_t> v = {0, 1, 2, 3, 255, 256, 257, 511, 512, 513};
  for (int32_t cut = len / 2; cut >= 1; cut /= 2) v.push_back(len - cut);
  v.push_back(len - 1);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  v.erase(std::remove_if(v.begin(), v.end(), [&](int32_t x) { return x >= len; }), v.end());
  return v;
}

std::vector<std::pair<CaseSpec, int64_t>> simpler_decode_specs(const CaseSpec& s, int64_t keep_seq) {
  std::vector<std::pair<CaseSpec, int64_t>> out;
  auto add = [&](CaseSpec c, int64_t seq) {
    if (!c.sentinels.empty()) c.sentinels = boundary_sentinels(c.lens);
    fit_derived_fields(c);  // per-head values and a large cache's low blocks follow the smaller call
    out.emplace_back(std::move(c), seq);
  };
  const int64_t n = int64_t(s.lens.size());
  if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
      if (i == keep_seq) continue;
      CaseSpec c = s;
      c.lens.erase(c.lens.begin() + i);
      add(std::move(c), keep_seq > i ? keep_seq - 1 : keep_seq);
    }
  for (int64_t i = 0; i < n; ++i)
    for (int32_t len : shorter_lengths(s.lens[size_t(i)])) {
      CaseSpec c = s;
      c.lens[size_t(i)] = len;
      add(std::move(c), keep_seq);
    }
  auto field = [&](auto edit) {
    CaseSpec c = s;
    edit(c);
    add(std::move(c), keep_seq);
  };
  if (!s.sentinels.empty()) field([](CaseSpec& c) { c.sentinels.clear(); });
  // The attention variant, one part at a time.
  if (s.window_left >= 0) field([](CaseSpec& c) { c.window_left = -1; });
  if (s.soft_cap != 0.0f) field([](CaseSpec& c) { c.soft_cap = 0.0f; });
  if (s.sinks) field([](CaseSpec& c) { c.sinks.reset(); });
  if (s.alibi_slopes) field([](CaseSpec& c) { c.alibi_slopes.reset(); });
  if (s.softmax_scale != 0.0f && s.extreme_logits == 0) field([](CaseSpec& c) { c.softmax_scale = 0.0f; });
  if (s.extreme_logits != 0)
    field([](CaseSpec& c) {
      c.extreme_logits = 0;
      c.softmax_scale = 0.0f;
    });
  if (s.zero_q_head) field([](CaseSpec& c) { c.zero_q_head = false; });
  if (s.constant_q_head) field([](CaseSpec& c) { c.constant_q_head = false; });
  if (s.logit_ties != 0) field([](CaseSpec& c) { c.logit_ties = 0; });
  if (s.logit_ties == 2) field([](CaseSpec& c) { c.logit_ties = 1; });  // near ties made exact
  if (s.null_block) field([](CaseSpec& c) { c.null_block = false; });
  if (s.q_len > 1) field([](CaseSpec& c) { c.q_len = 1; });
  if (s.q_len > 2) field([](CaseSpec& c) { c.q_len -= 1; });
  if (s.hkv > 1) field([](CaseSpec& c) { c.hkv = 1; });
  if (s.hkv > 2) field([](CaseSpec& c) { c.hkv -= 1; });
  if (s.group > 1) field([](CaseSpec& c) { c.group = 1; });
  if (s.group > 2) field([](CaseSpec& c) { c.group /= 2; });
  if (s.group > 2) field([](CaseSpec& c) { c.group -= 1; });
  if (s.v_head_dim == 0) {
    if (s.head_dim > 64) field([](CaseSpec& c) { c.head_dim = 64; });
    if (s.head_dim > 128) field([](CaseSpec& c) { c.head_dim = 128; });
  } else if (s.head_dim > 192) {  // MLA: the narrow head 128 + 64
    field([](CaseSpec& c) {
      c.head_dim = 192;
      c.v_head_dim = 128;
    });
  }
  if (s.block_size > 16) field([](CaseSpec& c) { c.block_size = 16; });
  // The cache format, one part at a time (each kept only inside the kernel's description).
  if (s.block_size > 1 && s.layout != kernels::CacheLayout::packed) field([](CaseSpec& c) { c.block_size = 1; });
  if (s.page_pad != 0) field([](CaseSpec& c) { c.page_pad = 0; });
  if (s.row_pad != 0) field([](CaseSpec& c) { c.row_pad = 0; });
  if (s.kv_combined) field([](CaseSpec& c) { c.kv_combined = false; });
  if (s.page_table != kernels::PageTable::block_table) field([](CaseSpec& c) { c.page_table = kernels::PageTable::block_table; });
  if (s.v_scales) field([](CaseSpec& c) { c.v_scales.reset(); });
  if (s.q_row_pad != 0) field([](CaseSpec& c) { c.q_row_pad = 0; });
  if (s.spare_blocks > 1) field([](CaseSpec& c) { c.spare_blocks = 1; });
  if (s.scales != ScaleKind::none) field([](CaseSpec& c) { c.scales = ScaleKind::none; });
  if (s.scales == ScaleKind::per_token) field([](CaseSpec& c) { c.scales = ScaleKind::per_tensor; });
  if (s.max_partitions != 0) field([](CaseSpec& c) { c.max_partitions = 0; });
  if (s.opt.uniform_partitions > 1) field([](CaseSpec& c) { c.opt.uniform_partitions = 1; });
  if (s.opt.uniform_partitions > 2) field([](CaseSpec& c) { c.opt.uniform_partitions /= 2; });
  if (s.opt.cu > 8)
    field([](CaseSpec& c) {
      c.opt.cu = 8;
      c.max_partitions = std::min<int64_t>(c.max_partitions, 8);
    });
  return out;
}

std::vector<CaseSpec> simpler_decode_specs(const CaseSpec& s) {
  std::vector<CaseSpec> out;
  for (auto& [c, seq] : simpler_decode_specs(s, -1)) out.push_back(std::move(c));
  return out;
}

}  // namespace pav::props
