// SPDX-License-Identifier: Apache-2.0
#include "properties/gen/stale_gen.hpp"

#include <algorithm>
#include <sstream>

#include "properties/gen/gen.hpp"

namespace pav::props {

using namespace pav::kernels;

std::string_view to_string(Mutation m) {
  switch (m) {
    case Mutation::draft_steps: return "draft_steps";
    case Mutation::shrink: return "shrink";
    case Mutation::zero: return "zero";
    case Mutation::batch_changed: return "batch_changed";
    case Mutation::hkv_changed: return "hkv_changed";
    case Mutation::swapped_micro_batches: return "swapped_micro_batches";
    case Mutation::dummy_run: return "dummy_run";
    case Mutation::grow_one: return "grow_one";
  }
  return "?";
}

std::string to_string(const StaleScenario& s) {
  std::ostringstream os;
  auto list = [&](const std::vector<int32_t>& v) {
    os << "[";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    os << "]";
  };
  os << "StaleScenario{" << to_string(s.mutation) << " steps=" << s.steps << " live=";
  list(s.live);
  os << " other=";
  list(s.other);
  os << " cache_lens=";
  list(s.spec.lens);
  os << " q_len=" << s.spec.q_len << " hkv=" << s.spec.hkv << " group=" << s.spec.group
     << " head_dim=" << s.spec.head_dim << " block_size=" << s.spec.block_size
     << " partial=" << kernels::to_string(s.spec.opt.partial) << " cu=" << s.spec.opt.cu
     << " max_partitions=" << s.spec.max_partitions << " seed=" << s.spec.seed << "}";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const StaleScenario& s) { return os << to_string(s); }

dispatch::BatchSpec batch_of(HostCase& host, int32_t* lens, int micro_batch) {
  dispatch::BatchSpec b;
  b.num_seqs = int64_t(host.lens.size());
  b.context_lens = lens ? lens : host.lens.data();
  b.q_len = host.spec.q_len;
  b.micro_batch = micro_batch;
  return b;
}

dispatch::PlanCacheConfig cache_config(const CaseSpec& spec) {
  dispatch::PlanCacheConfig c;
  c.cu = spec.opt.cu;
  c.max_partitions = spec.max_partitions;
  c.workgroup_budget = spec.workgroup_budget;
  c.kv_heads = spec.hkv;
  c.head_dim = spec.head_dim;
  c.group = spec.group;
  c.max_q_len = spec.q_len;
  c.partial = spec.opt.partial;
  c.max_plans = 16;
  return c;
}

rc::Gen<StaleScenario> gen_stale_scenario(Mutation m) {
  return rc::gen::exec([m] {
    StaleScenario s;
    s.mutation = m;
    CaseSpec& c = s.spec;
    const int batch = *rc::gen::inRange(m == Mutation::batch_changed ? 2 : 1, 5);
    for (int i = 0; i < batch; ++i)
      s.live.push_back(*rc::gen::weightedOneOf<int32_t>(
          {{4, rc::gen::element<int32_t>(1, 252, 253, 254, 255, 256, 509, 510, 511, 512, 767)},
           {1, rc::gen::element<int32_t>(0, 3, 100)},
           {1, rc::gen::inRange<int32_t>(1, 800)}}));
    c.q_len = *rc::gen::weightedOneOf<int>({{3, rc::gen::just(1)}, {1, rc::gen::just(2)}});
    c.hkv = *rc::gen::element(1, 2);
    c.group = *rc::gen::inRange(1, 5);
    c.head_dim = *rc::gen::element(64, 128);
    c.block_size = *rc::gen::element(16, 64);
    c.v_layout = *rc::gen::element(VLayout::plain, VLayout::trans);
    c.scales = *rc::gen::element(ScaleKind::per_tensor, ScaleKind::per_token);
    c.opt.partial = *rc::gen::element(DType::bf16, DType::f32);
    c.opt.cu = *rc::gen::element(4, 8, 16);
    c.max_partitions = *rc::gen::weightedOneOf<int64_t>(
        {{2, rc::gen::just<int64_t>(0)}, {1, rc::gen::inRange<int64_t>(1, c.opt.cu + 1)}});
    c.seed = *rc::gen::arbitrary<uint32_t>();
    c.lens = s.live;
    switch (m) {
      case Mutation::draft_steps:
        s.steps = *rc::gen::inRange(1, 5);
        for (int32_t& l : c.lens) l += s.steps;  // draft steps advance every running sequence
        break;
      case Mutation::shrink:
      case Mutation::zero: {
        s.other = s.live;
        std::vector<size_t> positive;
        for (size_t i = 0; i < s.live.size(); ++i)
          if (s.live[i] > 0) positive.push_back(i);
        if (positive.empty()) {  // nothing to shrink: make one sequence non-empty first
          s.live[0] = c.lens[0] = 257;
          s.other[0] = 257;
          positive.push_back(0);
        }
        const size_t b = *rc::gen::elementOf(positive);
        s.other[b] = m == Mutation::zero ? 0 : *rc::gen::inRange<int32_t>(0, s.live[b]);
        break;
      }
      case Mutation::swapped_micro_batches: {
        // Micro-batch 1 has as many sequences, lengths within the cache.
        s.other = *rc::gen::container<std::vector<int32_t>>(s.live.size(), rc::gen::inRange<int32_t>(0, 800));
        for (size_t i = 0; i < s.other.size(); ++i) c.lens[i] = std::max(c.lens[i], s.other[i]);
        break;
      }
      case Mutation::dummy_run:
        s.other = std::vector<int32_t>(s.live.size(), *rc::gen::element<int32_t>(1, 1 << 20, INT32_MAX, -1));
        break;
      case Mutation::grow_one: {
        // One row grows while the others keep their lengths; half the time a row
        // that had no partitions (made empty first when none is).
        std::vector<size_t> empty;
        for (size_t i = 0; i < s.live.size(); ++i)
          if (s.live[i] == 0) empty.push_back(i);
        size_t b = *rc::gen::inRange<size_t>(0, s.live.size());
        if (*rc::gen::arbitrary<bool>()) {
          if (empty.empty()) c.lens[b] = s.live[b] = 0;
          else b = *rc::gen::elementOf(empty);
        }
        const int32_t by = *rc::gen::element<int32_t>(1, 2, 255, 256, 257, 300);
        c.lens[b] = s.live[b] + by;
        s.other = s.live;
        s.other[b] = c.lens[b];
        break;
      }
      case Mutation::batch_changed:
      case Mutation::hkv_changed: break;
    }
    // Sentinels: tile boundaries and last tokens of the live lengths, and every
    // token a draft step adds.
    c.sentinels = boundary_sentinels(s.live);
    for (int64_t b = 0; b < int64_t(s.live.size()); ++b)
      for (int64_t t = std::max<int32_t>(s.live[b], 0); t < c.lens[b]; ++t) c.sentinels.push_back({b, t});
    if (s.mutation == Mutation::swapped_micro_batches) {
      const auto more = boundary_sentinels(s.other);
      c.sentinels.insert(c.sentinels.end(), more.begin(), more.end());
    }
    return s;
  });
}

rc::Gen<StaleScenario> gen_stale_scenario() {
  // resize: rc's inRange narrows with the size, which would starve later mutations.
  return rc::gen::mapcat(rc::gen::resize(100, rc::gen::inRange(0, kMutationCount)),
                         [](int m) { return gen_stale_scenario(Mutation(m)); });
}

}  // namespace pav::props
