// SPDX-License-Identifier: Apache-2.0
#include "properties/checks/runner_compare.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <mutex>

#include <nlohmann/json.hpp>

#include "properties/engine/fuzz_engine.hpp"
#include "properties/gen/gen.hpp"
#include "properties/gen/kernel_gen.hpp"
#include "properties/checks/runner_kernel.hpp"

namespace pav::props {

using adapters::KernelDescription;
using adapters::Split;

namespace {

template <class T>
std::vector<T> both(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> out;
  for (const T& x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) out.push_back(x);
  return out;
}

// The tighter of two limits where 0 means none.
int64_t tighter(int64_t a, int64_t b) { return a == 0 ? b : b == 0 ? a : std::min(a, b); }

}  // namespace

std::optional<KernelDescription> shared_description(const KernelDescription& a, const KernelDescription& b,
                                                    std::string* why) {
  KernelDescription d = a;
  d.name = a.name + " & " + b.name;
  d.q_dtypes = both(a.q_dtypes, b.q_dtypes);
  d.cache_dtypes = both(a.cache_dtypes, b.cache_dtypes);
  d.v_layouts = both(a.v_layouts, b.v_layouts);
  d.scale_kinds = both(a.scale_kinds, b.scale_kinds);
  d.block_sizes = both(a.block_sizes, b.block_sizes);
  d.head_dims = both(a.head_dims, b.head_dims);
  d.gqa_ratios = both(a.gqa_ratios, b.gqa_ratios);
  d.min_q_len = std::max(a.min_q_len, b.min_q_len);
  d.max_q_len = std::min(a.max_q_len, b.max_q_len);
  d.max_num_seqs = tighter(a.max_num_seqs, b.max_num_seqs);
  d.max_kv_heads = tighter(a.max_kv_heads, b.max_kv_heads);
  d.max_context_len = tighter(a.max_context_len, b.max_context_len);
  d.strided_q = a.strided_q && b.strided_q;
  d.writes_lse = false;
  d.has_check = false;
  d.out_dtype = a.out_dtype == b.out_dtype ? a.out_dtype : kernels::DType::none;
  d.max_split_ceiling = tighter(a.max_split_ceiling, b.max_split_ceiling);
  if (a.split == Split::plan && b.split == Split::plan) {
    d.split = Split::plan;
    d.split_ceiling = false;
  } else {
    d.split = Split::self;
    d.split_ceiling = a.split == Split::self && b.split == Split::self && a.split_ceiling && b.split_ceiling;
  }
  std::string problem = adapters::description_problem(d);
  if (problem.empty() && d.out_dtype == kernels::DType::none && a.out_dtype != b.out_dtype)
    problem = "out_dtype: the kernels write different output dtypes";
  if (problem.empty())
    if (auto g = generation_problem(d)) problem = *g;
  if (!problem.empty()) {
    if (why) *why = "the two kernels share no case: " + problem;
    return std::nullopt;
  }
  return d;
}

Comparison compare_kernels(adapters::KernelUnderTest& a, adapters::KernelUnderTest& b, const CompareOptions& o) {
  std::string why;
  const std::optional<KernelDescription> shared = shared_description(a.description(), b.description(), &why);
  if (!shared) throw adapters::KernelSpecError(why);
  Comparison c;
  c.shared = *shared;
  const rc::Gen<CaseSpec> gen = gen_kernel_case(*shared, o.limits);
  // A plan kernel runs pav's plan built for spec.opt.cu; keep that within its ceiling.
  int64_t plan_cu = 0;
  for (const KernelDescription* d : {&a.description(), &b.description()})
    if (d->split == Split::plan) plan_cu = tighter(plan_cu, d->max_split_ceiling);
  for (int64_t k = 0; k < o.cases; ++k) {
    if (o.should_stop && o.should_stop()) {
      c.interrupted = true;
      break;
    }
    const uint64_t seed = o.seed + uint64_t(k);
    CaseSpec spec;
    {
      std::lock_guard<std::mutex> lock(fuzz::generation_mutex());
      spec = sample(gen, seed, fuzz::case_size(seed));
    }
    if (plan_cu > 0 && spec.opt.cu > plan_cu) {
      spec.opt.cu = int(plan_cu);
      spec.max_partitions = std::min<int64_t>(spec.max_partitions, plan_cu);
    }
    PairedCase p;
    p.seed = seed;
    p.id = fmt::format("seed-{}", seed);
    // One reference serves both kernels when they declare the same profile.
    std::optional<reference::ReferenceResult> ref;
    const bool same_profile = a.description().profile == b.description().profile;
    const KernelJudgement ja = check_kernel_case(spec, a, &ref);
    if (!same_profile) ref.reset();
    const KernelJudgement jb = check_kernel_case(spec, b, &ref);
    p.a_correct = ja.passed;
    p.b_correct = jb.passed;
    if (!ja.passed) p.a_verdict = ja.verdict;
    if (!jb.passed) p.b_verdict = jb.verdict;
    c.a_correct += p.a_correct;
    c.b_correct += p.b_correct;
    c.cases.push_back(std::move(p));
    if (o.progress) o.progress(k + 1, o.cases);
  }
  int64_t disc_b = 0, disc_c = 0;
  for (const PairedCase& p : c.cases) {
    disc_b += p.a_correct && !p.b_correct;
    disc_c += !p.a_correct && p.b_correct;
  }
  c.test = stats::mcnemar(disc_b, disc_c);
  return c;
}

std::string correctness_jsonl(const Comparison& c, bool side_a) {
  std::string out;
  for (const PairedCase& p : c.cases) {
    nlohmann::ordered_json j;
    j["id"] = p.id;
    j["correct"] = side_a ? p.a_correct : p.b_correct;
    j["seed"] = p.seed;
    const std::string& v = side_a ? p.a_verdict : p.b_verdict;
    if (!v.empty()) j["verdict"] = v;
    out += j.dump() + "\n";
  }
  return out;
}

}  // namespace pav::props
