// SPDX-License-Identifier: Apache-2.0
// pav_gpu_bench: the GPU decode paths on trace-like batches (docs/performance.md).
// For each configuration: the uniform split, the planned split under both
// planner policies (and larger workgroup budgets), each timed with device
// events around the host-API call, L2 flushed before every iteration, median
// of --iters runs; every kernel the call enqueues timed on its own as well.
// Achieved bandwidth counts every KV byte once plus q, output, block-table
// and partial traffic, against a read ceiling measured in the same run.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu/bench_device.hpp"
#include "kernels/call.hpp"
#include "kernels/codecs.hpp"
#include "kernels/hip/gpu_backend.hpp"
#include "kernels/planner.hpp"
#include "kernels/planner_balanced.hpp"

namespace {

using namespace pav::kernels;
namespace gpu = pav::kernels::gpu;
namespace bench = pav::bench;
using json = nlohmann::ordered_json;

constexpr int64_t kHeadDim = 128;
constexpr double kKScale = 1.0 / 256, kVScale = 1.0 / 256;  // keeps scores O(1) on random codes

// ---- batches -----------------------------------------------------------------------------
// Trace-like: a quarter short requests (1k..8k tokens), the rest at the
// quantile midpoints of a long-context body with p50 120k, p90 334k,
// p99 764k (log-linear between knots); the longest is the p99 request.
// Deterministic, then shuffled with `seed` so long requests sit anywhere.
std::vector<int32_t> trace_batch(int batch, uint64_t seed) {
  const double u[] = {0.0, 0.5, 0.9, 0.99, 1.0};
  const double tok[] = {40000, 120000, 334000, 764000, 800000};
  auto quantile = [&](double x) {
    for (int i = 0; i < 4; ++i)
      if (x <= u[i + 1]) return tok[i] * std::pow(tok[i + 1] / tok[i], (x - u[i]) / (u[i + 1] - u[i]));
    return tok[4];
  };
  const int shorts = batch / 4, longs = batch - shorts;
  std::vector<int32_t> lens;
  for (int j = 0; j < longs; ++j) lens.push_back(int32_t(quantile((j + 0.5) / longs)));
  lens.back() = 764000;
  for (int j = 0; j < shorts; ++j) lens.push_back(int32_t(1000 + 7000 * (j + 0.5) / shorts));
  std::mt19937_64 rng(seed);
  std::shuffle(lens.begin(), lens.end(), rng);
  return lens;
}

// The peer's batch: 764k, 334k, 2 x 120k and 16 requests of 1k..8k tokens.
std::vector<int32_t> peer_batch() {
  std::vector<int32_t> lens = {764000, 334000, 120000, 120000};
  for (int j = 0; j < 16; ++j) lens.push_back(int32_t(1000 + 7000 * (j + 0.5) / 16));
  return lens;
}

struct Config {
  std::string name, kind;  // kind: trace, peer, equal
  std::vector<int32_t> lens;
  int64_t hkv, group, q_len;
};

// In the order they run: the goals' core cases first, so a --max-seconds
// cut leaves the most important figures.
std::vector<Config> all_configs(uint64_t seed) {
  std::vector<Config> c;
  c.push_back({"peer20-h8g8-q1", "peer", peer_batch(), 8, 8, 1});
  c.push_back({"trace16-h8g8-q1", "trace", trace_batch(16, seed), 8, 8, 1});
  c.push_back({"trace32-h1g16-q1", "trace", trace_batch(32, seed + 1), 1, 16, 1});
  c.push_back({"equal32-h8g8-q1", "equal", std::vector<int32_t>(32, 32768), 8, 8, 1});
  c.push_back({"equal16-h8g8-q1", "equal", std::vector<int32_t>(16, 65536), 8, 8, 1});
  c.push_back({"trace16-h8g8-q4", "trace", trace_batch(16, seed), 8, 8, 4});
  c.push_back({"trace32-h1g16-q4", "trace", trace_batch(32, seed + 1), 1, 16, 4});
  c.push_back({"equal32-h1g16-q1", "equal", std::vector<int32_t>(32, 131072), 1, 16, 1});
  c.push_back({"trace32-h8g8-q1", "trace", trace_batch(32, seed + 1), 8, 8, 1});
  // The speculative-decoding shapes (q_len 1 + 1..4 draft tokens) on the
  // trace and equal batches of both head layouts, each beside its q_len 1 row.
  for (int64_t q = 2; q <= 5; ++q) {
    const std::string ql = "-q" + std::to_string(q);
    if (q != 4) c.push_back({"trace16-h8g8" + ql, "trace", trace_batch(16, seed), 8, 8, q});
    c.push_back({"equal32-h8g8" + ql, "equal", std::vector<int32_t>(32, 32768), 8, 8, q});
    if (q != 4) c.push_back({"trace32-h1g16" + ql, "trace", trace_batch(32, seed + 1), 1, 16, q});
    c.push_back({"equal32-h1g16" + ql, "equal", std::vector<int32_t>(32, 131072), 1, 16, q});
  }
  return c;
}

// ---- statistics -----------------------------------------------------------------------------
struct Stat {
  double median = 0, lo = 0, hi = 0;  // median and the 10th / 90th percentiles (ms)
  int n = 0;
};
Stat stat_of(std::vector<double> v) {
  Stat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = int(v.size());
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  s.lo = v[size_t(0.1 * double(v.size() - 1))];
  s.hi = v[size_t(std::ceil(0.9 * double(v.size() - 1)))];
  return s;
}
json stat_json(const Stat& s) { return {{"median_ms", s.median}, {"p10_ms", s.lo}, {"p90_ms", s.hi}, {"n", s.n}}; }

// ---- device state shared by every configuration --------------------------------------------------
struct Pools {
  gpu::DeviceBuffer k, v;
  size_t bytes = 0;
};

struct Setup {
  int iters = 21, warmup = 2, layers = 60, block_size = 16;
  uint64_t seed = 20251117;
  int cu = 132;
  double ceiling_gbps = 0;
};

// One configuration's call in device memory.
struct DeviceCall {
  gpu::DeviceBuffer q, out, tables, lens, k_scale, v_scale;
  DecodeCall call;
  int64_t rows = 0, hq = 0, num_blocks = 0, blocks_used = 0;
  double kv_bytes = 0, q_bytes = 0, out_bytes = 0, table_bytes = 0;
};

DeviceCall make_call(const Config& c, Pools& pools, const Setup& st, gpu::StreamHandle s) {
  DeviceCall d;
  const int64_t B = int64_t(c.lens.size()), bs = st.block_size, D = kHeadDim;
  d.hq = c.hkv * c.group;
  d.rows = c.q_len * c.group;
  d.num_blocks = int64_t(pools.bytes / size_t(c.hkv * D * bs));
  int64_t max_blocks = 1;
  for (int32_t l : c.lens) {
    d.blocks_used += (l + bs - 1) / bs;
    max_blocks = std::max<int64_t>(max_blocks, (l + bs - 1) / bs);
  }
  if (d.blocks_used > d.num_blocks) throw std::runtime_error(c.name + ": KV pool too small");
  // Pages scattered over the pool, as a paged cache after some churn.
  std::vector<int32_t> ids(size_t(d.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 rng(st.seed ^ uint64_t(B * 7919 + c.hkv));
  for (int64_t i = 0; i < d.blocks_used; ++i) std::swap(ids[size_t(i)], ids[size_t(i + int64_t(rng() % uint64_t(d.num_blocks - i)))]);
  std::vector<int32_t> table(size_t(B * max_blocks), 0);
  int64_t next = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < (c.lens[b] + bs - 1) / bs; ++j) table[size_t(b * max_blocks + j)] = ids[size_t(next++)];

  const int64_t qn = B * c.q_len * d.hq * D;
  d.q = gpu::DeviceBuffer(size_t(qn * 2));
  d.out = gpu::DeviceBuffer(size_t(qn * 2));
  d.tables = gpu::DeviceBuffer(table.size() * 4);
  d.lens = gpu::DeviceBuffer(size_t(B * 4));
  d.k_scale = gpu::DeviceBuffer(4);
  d.v_scale = gpu::DeviceBuffer(4);
  bench::fill_bf16(d.q.data(), size_t(qn), st.seed + 11, s);
  gpu::copy_to_device(d.tables.data(), table.data(), table.size() * 4, s);
  gpu::copy_to_device(d.lens.data(), c.lens.data(), size_t(B * 4), s);
  const float ks = float(kKScale), vs = float(kVScale);
  gpu::copy_to_device(d.k_scale.data(), &ks, 4, s);
  gpu::copy_to_device(d.v_scale.data(), &vs, 4, s);
  gpu::synchronize(s);

  DecodeCall& call = d.call;
  call.q = TensorView::contiguous_of(d.q.data(), DType::bf16, {B * c.q_len, d.hq, D});
  call.out = TensorView::contiguous_of(d.out.data(), DType::bf16, {B * c.q_len, d.hq, D});
  call.k_cache = TensorView::contiguous_of(pools.k.data(), DType::fp8_e4m3fn, {d.num_blocks, c.hkv, D / 16, bs, 16});
  call.v_cache = TensorView::contiguous_of(pools.v.data(), DType::fp8_e4m3fn, {d.num_blocks, c.hkv, D, bs});
  call.block_tables = TensorView::contiguous_of(d.tables.data(), DType::i32, {B, max_blocks});
  call.context_lens = TensorView::contiguous_of(d.lens.data(), DType::i32, {B});
  call.k_scale = TensorView::contiguous_of(d.k_scale.data(), DType::f32, {1});
  call.v_scale = TensorView::contiguous_of(d.v_scale.data(), DType::f32, {1});
  call.q_len = int(c.q_len);
  call.opt.arch = Arch::sm90;
  call.opt.compute = DType::fp8_e4m3fn;
  call.opt.partial = DType::bf16;
  call.opt.cu = st.cu;

  double tokens = 0;
  for (int32_t l : c.lens) tokens += l;
  d.kv_bytes = tokens * double(c.hkv * D) * 2;  // K and V, one byte per element
  d.q_bytes = double(qn) * 2;
  d.out_bytes = double(qn) * 2;
  d.table_bytes = double(d.blocks_used) * 4;
  return d;
}

// ---- one variant -----------------------------------------------------------------------------
struct Variant {
  std::string name;    // uniform, proportional, balanced, balanced@8 ...
  bool planned = false;
  PlanPolicy policy = PlanPolicy::proportional;
  int64_t budget_factor = 2;  // workgroup budget = factor * cu
};

Variant parse_variant(const std::string& v) {
  Variant out;
  out.name = v;
  std::string base = v;
  if (auto at = v.find('@'); at != std::string::npos) {
    base = v.substr(0, at);
    out.budget_factor = std::stoll(v.substr(at + 1));
    if (out.budget_factor < 1) throw CLI::ValidationError("--variants", v + ": budget factor must be >= 1");
  }
  if (base == "uniform") {
    if (v != "uniform") throw CLI::ValidationError("--variants", "uniform takes no budget");
    return out;
  }
  out.planned = true;
  if (base == "proportional")
    out.policy = PlanPolicy::proportional;
  else if (base == "balanced")
    out.policy = PlanPolicy::balanced;
  else
    throw CLI::ValidationError("--variants", v + ": expected uniform, proportional[@F] or balanced[@F]");
  return out;
}

struct DevicePlan {
  PlanParams params;
  int64_t capacity = 0;
  gpu::DeviceBuffer work, reduce;
  PlanView view() {
    return PlanView{work.as<int32_t>(), reduce.as<int32_t>(), params.num_seqs, params.kv_heads,
                    params.max_partitions, capacity};
  }
  // The production refresh of either policy (kernels/hip/refresh.hip).
  void refresh(const int32_t* dev_lens, gpu::StreamHandle s) {
    gpu::refresh_plan(dev_lens, params, capacity, work.as<int32_t>(), reduce.as<int32_t>(), s);
  }
};

DevicePlan make_plan(int64_t num_seqs, int64_t hkv, int cu, PlanPolicy policy, int64_t budget) {
  DevicePlan p;
  PlanParams pp;
  pp.num_seqs = num_seqs;
  pp.kv_heads = hkv;
  pp.cu = cu;
  pp.workgroup_budget = budget;
  pp.policy = policy;
  p.params = resolve(pp);
  p.capacity = plan_capacity_of(p.params);
  p.work = gpu::DeviceBuffer(size_t(p.capacity * 16));
  p.reduce = gpu::DeviceBuffer(size_t(num_seqs * 8));
  gpu::fill_bytes(p.work.data(), 0x5a, p.work.bytes());  // garbage: a refresh that skips a slot shows
  gpu::fill_bytes(p.reduce.data(), 0x5a, p.reduce.bytes());
  return p;
}

// "" when the device plan equals the host plan of the same params and lengths.
std::string compare_with_host(DevicePlan& dp, const std::vector<int32_t>& lens, gpu::StreamHandle s) {
  WorkPlan host(dp.params);
  host.refresh(lens.data());
  std::vector<int32_t> w(size_t(dp.capacity * 4)), r(lens.size() * 2);
  gpu::copy_to_host(w.data(), dp.work.data(), w.size() * 4, s);
  gpu::copy_to_host(r.data(), dp.reduce.data(), r.size() * 4, s);
  if (r != host.reduce_info()) return "reduce_info differs from the host plan";
  if (w != host.work_info()) return "work_info differs from the host plan";
  return {};
}

struct Scratchpad {
  gpu::DeviceBuffer partial, m, l;
  Scratch view;
  Scratchpad(int64_t slots, int64_t rows) {
    const int64_t n = std::max<int64_t>(slots, 1) * rows;
    partial = gpu::DeviceBuffer(size_t(n * kHeadDim * 2));
    m = gpu::DeviceBuffer(size_t(n * 4));
    l = gpu::DeviceBuffer(size_t(n * 4));
    view.partial = TensorView::contiguous_of(partial.data(), DType::bf16, {std::max<int64_t>(slots, 1), rows, kHeadDim});
    view.m = TensorView::contiguous_of(m.data(), DType::f32, {std::max<int64_t>(slots, 1), rows});
    view.l = TensorView::contiguous_of(l.data(), DType::f32, {std::max<int64_t>(slots, 1), rows});
  }
};

// The kernel a graph node runs, by role: every attention body (the matrix-unit
// one, the fast one and the general one) counts as the attention.
std::string short_kernel_name(const std::string& n) {
  if (n.find("attend_fast_kernel") != std::string::npos || n.find("attend_mma_kernel") != std::string::npos)
    return "attend_kernel";
  if (n.find("balanced_refresh_kernel") != std::string::npos) return "refresh_kernel";
  for (const char* k : {"attend_kernel", "reduce_kernel", "check_kernel", "refresh_kernel"})
    if (n.find(k) != std::string::npos) return k;
  return n.substr(0, 40);
}

double bf16_value(uint16_t h) { return double(bf16_to_f32(h)); }

struct Runner {
  Setup st;
  bench::L2Flusher flusher;
  bench::EventTimer timer;
  gpu::Stream stream;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  explicit Runner(const Setup& s, size_t flush_bytes) : st(s), flusher(flush_bytes) {}

  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // Median over iters of `body`, L2 flushed (and `before` run, untimed) first.
  template <class Before, class Body>
  Stat time(Before before, Body body, int iters, bool flush = true) {
    std::vector<double> ms;
    for (int i = -st.warmup; i < iters; ++i) {
      if (flush) flusher.flush(stream.get());
      before();
      timer.start(stream.get());
      body();
      timer.stop(stream.get());
      const double t = timer.ms();
      if (i >= 0) ms.push_back(t);
    }
    return stat_of(ms);
  }
};

struct VariantResult {
  json j;
  std::string body;  // the attention body the launch record names
  double call_ms = 0, attend_ms = 0, reduce_ms = 0, refresh_ms = 0, gbps = 0, fraction = 0;
  double per_layer_ms = 0;  // call + refresh / layers
  std::vector<uint16_t> out;
  bool ok = true;
};

VariantResult run_variant(Runner& R, const Config& c, DeviceCall& d, const Variant& v) {
  VariantResult res;
  gpu::StreamHandle s = R.stream.get();
  const int64_t B = int64_t(c.lens.size());
  json& j = res.j;
  j["variant"] = v.name;
  double partial_bytes = 0;
  std::function<void(gpu::StreamHandle)> call_fn;
  std::unique_ptr<Scratchpad> scratch;
  std::unique_ptr<DevicePlan> plan;
  gpu::DeviceBuffer status(gpu::kStatusWords * 4);
  const double slot_bytes = double(d.rows) * double(kHeadDim * 2 + 8) * 2;  // partial + m, l; written and read
  if (!v.planned) {
    const int splits = dense_decode_splits(B, c.hkv, R.st.cu);
    scratch = std::make_unique<Scratchpad>(splits > 1 ? B * c.hkv * splits : 0, d.rows);
    if (splits > 1) partial_bytes = double(B * c.hkv * splits) * slot_bytes;
    j["splits"] = splits;
    j["blocks"] = B * c.hkv * splits;
    call_fn = [&d, sp = scratch.get(), &res](gpu::StreamHandle st) {
      res.body = gpu::to_string(gpu::uniform_decode(d.call, sp->view, st).body);
    };
  } else {
    plan = std::make_unique<DevicePlan>(make_plan(B, c.hkv, R.st.cu, v.policy, v.budget_factor * R.st.cu));
    plan->refresh(d.lens.as<int32_t>(), s);
    const std::string diff = compare_with_host(*plan, c.lens, s);
    j["device_plan_equals_host"] = diff.empty();
    if (!diff.empty()) {
      fmt::print(stderr, "  {} {}: {}\n", c.name, v.name, diff);
      res.ok = false;
    }
    WorkPlan host(plan->params);
    host.refresh(c.lens.data());
    int64_t split_rows = 0, max_count = 0, longest_task = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t first = host.reduce_info()[2 * b], cnt = host.reduce_info()[2 * b + 1];
      split_rows += cnt > 1;
      max_count = std::max(max_count, cnt);
      for (int64_t k = 0; k < cnt; ++k)
        longest_task = std::max<int64_t>(longest_task, host.work_info()[4 * (first + k) + 2] - host.work_info()[4 * (first + k) + 1]);
    }
    j["budget"] = plan->params.workgroup_budget;
    j["capacity"] = plan->capacity;
    j["tasks"] = host.active_tasks();
    j["blocks"] = c.hkv * plan->capacity;
    j["split_rows"] = split_rows;
    j["max_count"] = max_count;
    j["longest_task_tiles"] = longest_task;
    std::vector<int32_t> counts;
    for (int64_t b = 0; b < B; ++b) counts.push_back(host.reduce_info()[2 * b + 1]);
    j["counts"] = counts;
    scratch = std::make_unique<Scratchpad>(c.hkv * plan->capacity, d.rows);
    partial_bytes = double(c.hkv * host.active_tasks()) * slot_bytes;
    call_fn = [&d, sp = scratch.get(), pl = plan.get(), st_ptr = status.as<uint32_t>(), &res](gpu::StreamHandle st) {
      res.body = gpu::to_string(gpu::planned_decode(d.call, pl->view(), sp->view, st_ptr, st).body);
    };
  }
  const double bytes = d.kv_bytes + d.q_bytes + d.out_bytes + d.table_bytes + partial_bytes;
  j["bytes"] = {{"kv", d.kv_bytes}, {"q", d.q_bytes}, {"out", d.out_bytes}, {"tables", d.table_bytes},
                {"partials", partial_bytes}, {"total", bytes}};

  // The whole call, as a caller sees it.
  gpu::fill_bytes(d.out.data(), 0xff, size_t(d.out_bytes), s);  // NaN: every element must be written
  const Stat call = R.time([] {}, [&] { call_fn(s); }, R.st.iters);
  res.call_ms = call.median;
  j["call"] = stat_json(call);

  // Each kernel on its own: the kernels before it run untimed (so the reduce
  // reads partials the attention just wrote, as in the real sequence).
  bench::CapturedKernels kernels(call_fn, s);
  json kj = json::array();
  for (size_t k = 0; k < kernels.size(); ++k) {
    const bench::KernelInfo& ki = kernels.info(k);
    const Stat ks = R.time([&] { for (size_t i = 0; i < k; ++i) kernels.launch(i, s); },
                           [&] { kernels.launch(k, s); }, R.st.iters);
    const std::string name = short_kernel_name(ki.name);
    if (name == "attend_kernel") res.attend_ms = ks.median;
    if (name == "reduce_kernel") res.reduce_ms = ks.median;
    kj.push_back({{"kernel", name}, {"grid", ki.grid}, {"block", ki.block}, {"registers", ki.regs},
                  {"static_smem", ki.static_smem}, {"local_bytes", ki.local_bytes},
                  {"blocks_per_sm", ki.blocks_per_sm}, {"time", stat_json(ks)}});
  }
  j["kernels"] = kj;

  if (plan) {
    const Stat rs = R.time([] {}, [&] { plan->refresh(d.lens.as<int32_t>(), s); }, R.st.iters);
    res.refresh_ms = rs.median;
    j["refresh"] = stat_json(rs);
    plan->refresh(d.lens.as<int32_t>(), s);  // the timed refreshes rewrote the same plan
  }
  // Output of one more call: every element written, no NaN, and the status ok.
  gpu::fill_bytes(d.out.data(), 0xff, size_t(d.out_bytes), s);
  call_fn(s);
  res.out.resize(size_t(d.out_bytes / 2));
  gpu::copy_to_host(res.out.data(), d.out.data(), size_t(d.out_bytes), s);
  int64_t nan = 0;
  for (uint16_t h : res.out) nan += std::isnan(bf16_value(h));
  j["nan_outputs"] = nan;
  if (nan) res.ok = false;
  if (plan) {
    const DecodeResult st = gpu::read_status(status.as<uint32_t>(), s);
    j["status_ok"] = st.status == DecodeStatus::ok;
    if (st.status != DecodeStatus::ok) res.ok = false;
  }
  j["attention_body"] = res.body;
  res.per_layer_ms = res.call_ms + res.refresh_ms / R.st.layers;
  res.gbps = bytes / (res.call_ms * 1e-3) / 1e9;
  res.fraction = res.gbps / R.st.ceiling_gbps;
  j["achieved_gbps"] = res.gbps;
  j["fraction_of_read_ceiling"] = res.fraction;
  j["bandwidth_floor_ms"] = bytes / (R.st.ceiling_gbps * 1e9) * 1e3;
  j["per_layer_ms"] = res.per_layer_ms;
  if (res.attend_ms > 0) j["reduce_over_attention"] = res.reduce_ms / res.attend_ms;
  return res;
}

// One line per configuration: the read ceiling of this run, the KV floor at
// that ceiling, every variant's call time and fraction of the ceiling, and the
// attention body that ran.
std::string config_summary(const Config& c, const DeviceCall& d, const json& variants, double ceiling_gbps) {
  std::string cells, bodies;
  for (const auto& v : variants) {
    cells += fmt::format("{} {:.3f} ({:.1f}%); ", v["variant"].get<std::string>(), v["call"]["median_ms"].get<double>(),
                         100 * v["fraction_of_read_ceiling"].get<double>());
    const std::string b = v["attention_body"].get<std::string>();
    if (bodies.find(b) == std::string::npos) bodies += (bodies.empty() ? "" : ", ") + b;
  }
  return fmt::format("| {} | {:.2f} | {:.0f} | {:.3f} | {} | {} |", c.name, d.kv_bytes / 1e9, ceiling_gbps,
                     d.kv_bytes / (ceiling_gbps * 1e9) * 1e3, cells, bodies);
}

// Each q_len > 1 configuration's call time against the q_len 1 configuration
// of the same batch and head layout (the name up to "-q"), per variant both ran.
std::vector<std::string> q_len_ratios(const json& configs) {
  std::vector<std::string> out;
  auto base_of = [](const std::string& name) { return name.substr(0, name.rfind("-q")); };
  for (const auto& c : configs) {
    if (c["q_len"].get<int64_t>() <= 1) continue;
    for (const auto& one : configs) {
      if (one["q_len"].get<int64_t>() != 1 || base_of(one["name"]) != base_of(c["name"])) continue;
      for (const auto& v : c["variants"])
        for (const auto& v1 : one["variants"]) {
          if (v1["variant"] != v["variant"]) continue;
          const double ms = v["call"]["median_ms"].get<double>(), ms1 = v1["call"]["median_ms"].get<double>();
          out.push_back(fmt::format("| {} | {} | {:.3f} | {:.3f} | {:.2f}x |", c["name"].get<std::string>(),
                                    v["variant"].get<std::string>(), ms, ms1, ms / ms1));
        }
    }
  }
  return out;
}

// Relative L2 distance between two bf16 outputs.
double rel_l2(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double x = bf16_value(a[i]), y = bf16_value(b[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// ---- batch-256 plan refresh ------------------------------------------------------------------
json refresh_256(Runner& R, std::vector<std::string>& table, const std::vector<int64_t>& kv_heads) {
  json out = json::array();
  gpu::StreamHandle s = R.stream.get();
  std::vector<int32_t> lens = trace_batch(256, R.st.seed + 256);
  gpu::DeviceBuffer dlens(lens.size() * 4);
  gpu::copy_to_device(dlens.data(), lens.data(), lens.size() * 4, s);
  constexpr int kGraphRefreshes = 50;
  for (int64_t hkv : kv_heads)
    for (PlanPolicy pol : {PlanPolicy::proportional, PlanPolicy::balanced}) {
      DevicePlan p = make_plan(256, hkv, R.st.cu, pol, 0);
      p.refresh(dlens.as<int32_t>(), s);
      const std::string diff = compare_with_host(p, lens, s);
      // One launch between two events: includes the launch latency.
      const Stat single = R.time([] {}, [&] { p.refresh(dlens.as<int32_t>(), s); }, 200, false);
      // Back-to-back refreshes replayed from a graph: device time per refresh.
      gpu::begin_capture(s);
      for (int i = 0; i < kGraphRefreshes; ++i) p.refresh(dlens.as<int32_t>(), s);
      gpu::Graph g = gpu::end_capture(s);
      Stat graph = R.time([] {}, [&] { g.launch(s); }, 50, false);
      graph.median /= kGraphRefreshes;
      graph.lo /= kGraphRefreshes;
      graph.hi /= kGraphRefreshes;
      const std::string pname = pol == PlanPolicy::balanced ? "balanced" : "proportional";
      out.push_back({{"policy", pname}, {"kv_heads", hkv}, {"capacity", p.capacity},
                     {"device_plan_equals_host", diff.empty()}, {"single_launch", stat_json(single)},
                     {"graph_per_refresh", stat_json(graph)}});
      table.push_back(fmt::format("| refresh, batch 256, Hkv {} | {} | {:.2f} us (single launch {:.2f} us) | {} |", hkv,
                                  pname, graph.median * 1e3, single.median * 1e3,
                                  diff.empty() ? "plan = host" : "PLAN DIFFERS"));
      fmt::print(stderr, "[{:6.1f} s] refresh-256 h{} {}: {:.2f} us per refresh in a graph, {:.2f} us single{}\n",
                 R.elapsed_s(), hkv, pname, graph.median * 1e3, single.median * 1e3,
                 diff.empty() ? "" : " (" + diff + ")");
    }
  return out;
}

int run(int argc, char** argv) {
  CLI::App app{"GPU decode benchmark: uniform vs planned (proportional, balanced) on trace-like batches"};
  std::string json_path;
  std::string only;
  std::vector<std::string> variant_names = {"uniform", "proportional", "balanced", "balanced@4", "balanced@8",
                                            "proportional@8"};
  Setup st;
  double bw_gb = 4.0;
  double max_seconds = 0;
  app.add_option("--json", json_path, "write every figure as JSON to this file");
  app.add_option("--iters", st.iters, "timed iterations per measurement (median taken; >= 20)")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", st.warmup, "untimed iterations before each measurement")->check(CLI::Range(0, 100));
  app.add_option("--layers", st.layers, "layers per step: the plan refresh is amortized over them")->check(CLI::Range(1, 1000));
  app.add_option("--only", only, "run only configurations whose name contains this (comma-separated)");
  app.add_option("--variants", variant_names, "uniform, proportional[@F], balanced[@F]; F: budget = F * SMs")
      ->delimiter(',');
  app.add_option("--block-size", st.block_size, "KV cache block size (tokens)")->check(CLI::IsMember({16, 32, 64}));
  app.add_option("--bandwidth-gb", bw_gb, "size of the read-ceiling buffer (GB)")->check(CLI::Range(0.5, 32.0));
  app.add_option("--seed", st.seed, "seed of the batch shuffles, block tables and data");
  app.add_option("--max-seconds", max_seconds, "skip the configurations left once this much time has passed (0: none)");
  std::vector<int64_t> refresh_heads = {8, 1};
  app.add_option("--refresh-kv-heads", refresh_heads, "KV head counts of the batch-256 refresh figures")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(64)));
  CLI11_PARSE(app, argc, argv);
  std::vector<Variant> variants;
  for (const auto& v : variant_names) variants.push_back(parse_variant(v));
  if (variants.empty() || variants.front().name != "uniform")
    variants.insert(variants.begin(), parse_variant("uniform"));  // ratios need it, first
  if (st.iters < 20) fmt::print(stderr, "note: --iters {} is below the 20 the figures in docs/performance.md use\n", st.iters);

  if (!gpu::available()) {
    fmt::print(stderr, "pav_gpu_bench: no usable GPU\n");
    return 1;
  }
  const bench::DeviceInfo dev = bench::device_info();
  st.cu = dev.sms;
  fmt::print(stderr, "device: {} ({} SMs, L2 {} MB), seed {}, iters {}, warmup {}, layers {}\n", dev.name, dev.sms,
             dev.l2_bytes >> 20, st.seed, st.iters, st.warmup, st.layers);

  std::vector<Config> configs;
  for (auto& c : all_configs(st.seed)) {
    bool keep = only.empty();
    size_t pos = 0;
    while (!keep && pos <= only.size()) {
      const size_t end = std::min(only.find(',', pos), only.size());
      const std::string tok = only.substr(pos, end - pos);
      keep = !tok.empty() && c.name.find(tok) != std::string::npos;
      pos = end + 1;
    }
    if (keep) configs.push_back(c);
  }
  // One K pool and one V pool, sized for the largest configuration.
  size_t pool_bytes = 0;
  for (const auto& c : configs) {
    size_t blocks = 0;
    for (int32_t l : c.lens) blocks += size_t((l + st.block_size - 1) / st.block_size);
    pool_bytes = std::max(pool_bytes, blocks * size_t(c.hkv * kHeadDim * st.block_size));
  }
  pool_bytes = pool_bytes + pool_bytes / 8 + (size_t(64) << 20);  // spare pages to scatter over
  Runner R(st, std::max<size_t>(dev.l2_bytes * 4, size_t(256) << 20));
  gpu::StreamHandle s = R.stream.get();
  Pools pools;
  pools.bytes = pool_bytes;
  pools.k = gpu::DeviceBuffer(pool_bytes);
  pools.v = gpu::DeviceBuffer(pool_bytes);
  bench::fill_fp8(pools.k.data(), pool_bytes, st.seed + 1, s);
  bench::fill_fp8(pools.v.data(), pool_bytes, st.seed + 2, s);
  gpu::synchronize(s);

  json doc;
  doc["device"] = {{"name", dev.name}, {"sms", dev.sms}, {"l2_bytes", dev.l2_bytes},
                   {"sm_clock_khz", dev.sm_clock_khz}, {"mem_clock_khz", dev.mem_clock_khz}};
  doc["settings"] = {{"iters", st.iters}, {"warmup", st.warmup}, {"layers", st.layers}, {"seed", st.seed},
                     {"block_size", st.block_size}, {"head_dim", kHeadDim}, {"cache", "fp8_e4m3fn"},
                     {"q", "bf16"}, {"partials", "bf16"}, {"kv_pool_bytes", pool_bytes}};
  std::vector<double> bw_samples;
  st.ceiling_gbps = R.st.ceiling_gbps = bench::read_bandwidth_gbps(size_t(bw_gb * 1e9), std::max(st.iters, 20), &bw_samples, s);
  const Stat bw = stat_of(bw_samples);
  doc["read_ceiling"] = {{"bytes", size_t(bw_gb * 1e9) / 16 * 16}, {"gbps", st.ceiling_gbps}, {"time", stat_json(bw)}};
  fmt::print(stderr, "[{:6.1f} s] read ceiling: {:.0f} GB/s ({:.1f} GB, median of {})\n", R.elapsed_s(), st.ceiling_gbps,
             bw_gb, bw.n);

  std::vector<std::string> refresh_rows;
  if (only.empty() || only.find("refresh") != std::string::npos)
    doc["refresh_256"] = refresh_256(R, refresh_rows, refresh_heads);

  std::vector<std::string> rows, summary;
  json jconfigs = json::array();
  json skipped = json::array();
  bool all_ok = true;
  int index = 0;
  for (const auto& c : configs) {
    ++index;
    if (max_seconds > 0 && R.elapsed_s() > max_seconds) {
      fmt::print(stderr, "[{:6.1f} s] [{}/{}] {} skipped (--max-seconds {})\n", R.elapsed_s(), index, configs.size(),
                 c.name, max_seconds);
      skipped.push_back(c.name);
      continue;
    }
    DeviceCall d = make_call(c, pools, st, s);
    json jc;
    jc["name"] = c.name;
    jc["kind"] = c.kind;
    jc["lens"] = c.lens;
    jc["kv_heads"] = c.hkv;
    jc["group"] = c.group;
    jc["q_len"] = c.q_len;
    jc["kv_bytes"] = d.kv_bytes;
    const auto [mn, mx] = std::minmax_element(c.lens.begin(), c.lens.end());
    jc["max_over_min"] = double(*mx) / double(*mn);
    json jv = json::array();
    VariantResult uni;
    for (const auto& v : variants) {
      VariantResult r = run_variant(R, c, d, v);
      if (v.name == "uniform") uni = r;
      const double speedup = uni.per_layer_ms > 0 ? uni.per_layer_ms / r.per_layer_ms : 0;
      const double diff = rel_l2(r.out, uni.out);
      r.j["speedup_vs_uniform"] = speedup;
      r.j["speedup_vs_uniform_unamortized"] = uni.call_ms / (r.call_ms + r.refresh_ms);
      r.j["output_rel_l2_vs_uniform"] = diff;
      // A sanity bound, not the numerics test (the GPU suites hold that): P is
      // quantized to fp8 per tile against the running max of its partition,
      // so two split structures differ by a few percent (measured 1.8e-2 ..
      // 2.9e-2 rel L2 on an H200, 0 where the structures coincide); a lost
      // or doubled partition shows as O(1).
      if (diff > 0.1) r.ok = false;
      all_ok = all_ok && r.ok;
      const std::string shape = v.planned ? fmt::format("{} tasks", r.j["tasks"].get<int64_t>())
                                          : fmt::format("{} splits", r.j["splits"].get<int>());
      rows.push_back(fmt::format(
          "| {} | {} | {} | {} | {:.3f} | {:.3f} | {:.3f} | {} | {:.0f} | {:.1f}% | {:.2f}x | {:.1f}% | {}{} |", c.name,
          v.name, r.body, shape, r.call_ms, r.attend_ms, r.reduce_ms, v.planned ? fmt::format("{:.1f}", r.refresh_ms * 1e3) : "-",
          r.gbps, 100 * r.fraction, speedup, r.attend_ms > 0 ? 100 * r.reduce_ms / r.attend_ms : 0.0,
          r.ok ? "ok" : "FAIL", fmt::format(" ({:.1e})", diff)));
      fmt::print(stderr, "[{:6.1f} s] [{}/{}] {} {}: {:.3f} ms, {:.0f} GB/s ({:.1f}%), {:.2f}x vs uniform{}\n",
                 R.elapsed_s(), index, configs.size(), c.name, v.name, r.call_ms, r.gbps, 100 * r.fraction, speedup,
                 r.ok ? "" : " FAIL");
      jv.push_back(r.j);
    }
    jc["variants"] = jv;
    jc["read_ceiling_gbps"] = st.ceiling_gbps;
    summary.push_back(config_summary(c, d, jv, st.ceiling_gbps));
    jconfigs.push_back(jc);
  }
  doc["configs"] = jconfigs;
  doc["skipped"] = skipped;

  fmt::print("\n| config | variant | body | shape | call ms | attention ms | reduce ms | refresh us | GB/s | of read "
             "ceiling | speedup (per layer) | reduce/attention | check (rel L2 vs uniform) |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows) fmt::print("{}\n", r);
  fmt::print("\n| config | KV GB | read ceiling GB/s | floor ms | policy: call ms (of ceiling) ... | body |\n"
             "|---|---|---|---|---|---|\n");
  for (const auto& r : summary) fmt::print("{}\n", r);
  const std::vector<std::string> ratios = q_len_ratios(jconfigs);
  if (!ratios.empty()) {
    fmt::print("\n| config | variant | call ms | q_len 1 call ms | ratio to q_len 1 |\n|---|---|---|---|---|\n");
    for (const auto& r : ratios) fmt::print("{}\n", r);
  }
  if (!refresh_rows.empty()) {
    fmt::print("\n| refresh | policy | device time per refresh | plan |\n|---|---|---|---|\n");
    for (const auto& r : refresh_rows) fmt::print("{}\n", r);
  }
  fmt::print("\nread ceiling {:.0f} GB/s; speedup = uniform call / (call + refresh / {} layers)\n", st.ceiling_gbps,
             st.layers);
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << doc.dump(1) << "\n";
    fmt::print(stderr, "wrote {}\n", json_path);
  }
  fmt::print(stderr, "[{:6.1f} s] done{}\n", R.elapsed_s(), all_ok ? "" : " (some checks FAILED)");
  return all_ok ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pav_gpu_bench: %s\n", e.what());
    return 1;
  }
}
