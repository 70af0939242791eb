// SPDX-License-Identifier: Apache-2.0
#include "properties/drift/sweep.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include "input/json_input.hpp"
#include "kernels/limits.hpp"
#include "kernels/planner.hpp"
#include "properties/drift/normals.hpp"

namespace pav::props {

using kernels::DType;
using nlohmann::json;

namespace {

std::string context_label(int32_t c) {
  if (c % 1000 == 0) return fmt::format("{}k", c / 1000);
  return fmt::format("{}", c);
}

// The sweep's lists: one to kMaxSweepList entries, checked before they are
// walked (a list past the limit is refused before any cell is made).
constexpr std::size_t kMaxSweepList = 1024;

}  // namespace

DriftSweep parse_drift_sweep(const json& j, const std::string& source) {
  const input::Object o(j, source);
  o.only({"format", "name", "description", "contexts", "batches", "heads", "head_dim", "block_size", "q_len",
          "ceilings", "partials", "uniform_baseline", "cu", "workgroup_budget", "arch", "q_dtype", "kv_scale",
          "q_std", "seeds", "seed", "lengths_seed", "shorter", "reference_precision", "growth", "control_epsilon"});
  o.choice("format", {kDriftSweepFormat});
  DriftSweep s;
  if (o.has("name")) {
    s.name = o.string("name");
    if (s.name.empty()) o.fail("name", "must be a non-empty string");
  }
  s.description = o.string("description", s.description);
  s.cu = o.integer<int>("cu", 1, 4096, s.cu);
  const input::Array ctx = o.array("contexts", 1, kMaxSweepList);
  for (size_t i = 0; i < ctx.size(); ++i)
    s.contexts.push_back(ctx.integer<int32_t>(i, 1, std::numeric_limits<int32_t>::max()));
  const input::Array bat = o.array("batches", 1, kMaxSweepList);
  for (size_t i = 0; i < bat.size(); ++i) s.batches.push_back(bat.integer<int>(i, 1, kernels::kMaxPlanBatch));
  const input::Array cei = o.array("ceilings", 1, kMaxSweepList);
  for (size_t i = 0; i < cei.size(); ++i) {
    const int c = cei.integer<int>(i, 1, s.cu);
    if (!s.ceilings.empty() && c <= s.ceilings.back()) cei.fail(i, "ceilings must be strictly ascending");
    s.ceilings.push_back(c);
  }
  if (s.ceilings.size() < 2) o.fail("ceilings", "needs at least two (the growth test compares the lowest and the highest)");
  if (o.has("heads")) {
    const input::Array h = o.array("heads", 1, kMaxSweepList);
    s.heads.clear();
    for (size_t i = 0; i < h.size(); ++i) {
      if (!h[i].is_object()) h.fail(i, "must be an object {\"hkv\": N, \"group\": G}");
      const input::Object head = h.object(i);
      head.only({"hkv", "group"});
      s.heads.push_back({head.integer<int>("hkv", 1, 256), head.integer<int>("group", 1, 64)});
    }
  }
  if (o.has("head_dim")) {
    s.head_dim = o.integer<int>("head_dim", 64, 1024);
    if (s.head_dim != 64 && s.head_dim % 128 != 0)
      o.fail("head_dim", "must be 64 or a multiple of 128 up to 1024 (the planned kernel's domain)");
  }
  if (o.has("block_size")) {
    s.block_size = o.integer<int>("block_size", 16, 128);
    if (s.block_size != 16 && s.block_size != 64 && s.block_size != 128) o.fail("block_size", "must be 16, 64 or 128");
  }
  s.q_len = o.integer<int>("q_len", 1, 16, s.q_len);
  if (o.has("partials")) {
    const input::Array p = o.array("partials", 1, 3);
    s.partials.clear();
    for (size_t i = 0; i < p.size(); ++i) {
      DType d;
      if (!p[i].is_string() || !kernels::parse_dtype(p[i].get<std::string>(), d) ||
          (d != DType::bf16 && d != DType::f16 && d != DType::f32))
        p.fail(i, "must be \"bf16\", \"f16\" or \"f32\"");
      if (std::find(s.partials.begin(), s.partials.end(), d) != s.partials.end()) p.fail(i, "repeated");
      s.partials.push_back(d);
    }
  }
  s.uniform_baseline = o.boolean("uniform_baseline", s.uniform_baseline);
  s.workgroup_budget = o.integer<int64_t>("workgroup_budget", 0, kernels::kMaxWorkgroupBudget, s.workgroup_budget);
  if (o.has("arch")) {
    const std::string a = o.choice("arch", {"sm90", "gfx950", "gfx942"});
    if (!kernels::parse_arch(a, s.arch) || kernels::arch_fp8(s.arch) == DType::none) o.fail("arch", "unknown");
  }
  if (o.has("q_dtype")) {
    const std::string q = o.choice("q_dtype", {"bf16", "f16"});
    if (!kernels::parse_dtype(q, s.q_dtype)) o.fail("q_dtype", "unknown");
  }
  s.kv_scale = o.number("kv_scale", 1e-6, 1e6, s.kv_scale);
  s.q_std = o.number("q_std", 1e-6, 1e3, s.q_std);
  s.seeds = o.integer<int>("seeds", 2, 10000, s.seeds);
  s.seed = o.integer<uint64_t>("seed", 0, uint64_t(1) << 62, s.seed);
  s.lengths_seed = o.integer<uint64_t>("lengths_seed", 0, uint64_t(1) << 62, s.lengths_seed);
  if (o.has("shorter")) {
    const input::Object sh = o.object("shorter");
    sh.only({"ratio_p50", "ratio_p90", "min_len"});
    s.shorter.ratio_p50 = sh.number("ratio_p50", 1.0, 1e6, s.shorter.ratio_p50);
    s.shorter.ratio_p90 = sh.number("ratio_p90", 1.0, 1e6, s.shorter.ratio_p90);
    s.shorter.min_len = sh.integer<int32_t>("min_len", 1, 1 << 30, s.shorter.min_len);
    if (!(s.shorter.ratio_p90 > s.shorter.ratio_p50)) sh.fail("ratio_p90", "must exceed ratio_p50");
  }
  if (o.has("reference_precision"))
    s.reference_precision = o.choice("reference_precision", {"fp32", "fp64"}) == "fp32" ? reference::Precision::fp32
                                                                                         : reference::Precision::fp64;
  if (o.has("growth")) {
    const input::Object g = o.object("growth");
    g.only({"alpha", "min_relative_growth"});
    s.growth.alpha = g.number("alpha", 1e-12, 0.5, s.growth.alpha);
    s.growth.min_relative_growth = g.number("min_relative_growth", 0.0, 100.0, s.growth.min_relative_growth);
  }
  s.control_epsilon = o.number("control_epsilon", 0.0, 1e6, s.control_epsilon);
  // A cell's K and V caches (fp8, one byte per element) hold at most batch x
  // context tokens, each request rounded up to whole blocks: a sweep whose
  // largest cell could never be held is refused here, before anything runs.
  for (size_t c = 0; c < s.contexts.size(); ++c)
    for (size_t b = 0; b < s.batches.size(); ++b)
      for (const DriftHeads& h : s.heads) {
        const __int128 blocks = (__int128(s.contexts[c]) + s.block_size - 1) / s.block_size;
        const __int128 bytes = __int128(s.batches[b]) * blocks * s.block_size * h.hkv * s.head_dim * 2;
        if (bytes > kernels::kMaxDriftCellBytes)
          ctx.fail(c, fmt::format("a cell of {} (batches[{}]) requests of up to {} tokens, {} KV head(s) of dim {}, "
                                  "needs up to {} bytes of K and V cache, more than the limit of {} bytes",
                                  s.batches[b], b, s.contexts[c], h.hkv, s.head_dim, int64_t(bytes),
                                  kernels::kMaxDriftCellBytes));
      }
  return s;
}

DriftSweep load_drift_sweep(const std::string& path) {
  // The shared bounded reader: a directory, a FIFO or another non-regular file
  // is refused before it is opened (never read, never waited on), a file past
  // the size limit before it is read, and 1e999, a duplicate key or nesting
  // past kMaxJsonDepth while parsing; its InputError is an invalid_argument
  // naming the file and field, as every field's check after it.
  return parse_drift_sweep(input::read_json_file(path), path);
}

json sweep_to_json(const DriftSweep& s) {
  json j;
  j["format"] = kDriftSweepFormat;
  j["name"] = s.name;
  if (!s.description.empty()) j["description"] = s.description;
  j["contexts"] = s.contexts;
  j["batches"] = s.batches;
  j["heads"] = json::array();
  for (const auto& h : s.heads) j["heads"].push_back({{"hkv", h.hkv}, {"group", h.group}});
  j["head_dim"] = s.head_dim;
  j["block_size"] = s.block_size;
  j["q_len"] = s.q_len;
  j["ceilings"] = s.ceilings;
  j["partials"] = json::array();
  for (DType d : s.partials) j["partials"].push_back(std::string(kernels::to_string(d)));
  j["uniform_baseline"] = s.uniform_baseline;
  j["cu"] = s.cu;
  j["workgroup_budget"] = s.workgroup_budget;
  j["arch"] = std::string(kernels::to_string(s.arch));
  j["q_dtype"] = std::string(kernels::to_string(s.q_dtype));
  j["kv_scale"] = s.kv_scale;
  j["q_std"] = s.q_std;
  j["seeds"] = s.seeds;
  j["seed"] = s.seed;
  j["lengths_seed"] = s.lengths_seed;
  j["shorter"] = {{"ratio_p50", s.shorter.ratio_p50}, {"ratio_p90", s.shorter.ratio_p90}, {"min_len", s.shorter.min_len}};
  j["reference_precision"] = s.reference_precision == reference::Precision::fp64 ? "fp64" : "fp32";
  j["growth"] = {{"alpha", s.growth.alpha}, {"min_relative_growth", s.growth.min_relative_growth}};
  j["control_epsilon"] = s.control_epsilon;
  return j;
}

const char* builtin_quick_sweep_json() {
  return R"({
  "format": "pav-drift-sweep/1",
  "name": "quick",
  "description": "CPU quick sweep: ceilings 8..256 all bind at batch 1 (274 tiles); 8 data seeds; positive control on",
  "contexts": [70000],
  "batches": [1, 4],
  "heads": [{"hkv": 1, "group": 8}],
  "head_dim": 128,
  "block_size": 16,
  "q_len": 1,
  "ceilings": [8, 32, 64, 256],
  "partials": ["bf16", "f32"],
  "uniform_baseline": true,
  "cu": 256,
  "workgroup_budget": 0,
  "arch": "sm90",
  "q_dtype": "bf16",
  "kv_scale": 0.03125,
  "q_std": 1.0,
  "seeds": 8,
  "seed": 1,
  "lengths_seed": 7,
  "shorter": {"ratio_p50": 2.49, "ratio_p90": 22.2, "min_len": 1},
  "reference_precision": "fp64",
  "growth": {"alpha": 0.01, "min_relative_growth": 0.10},
  "control_epsilon": 1.0
}
)";
}

DriftSweep builtin_quick_sweep() { return parse_drift_sweep(json::parse(builtin_quick_sweep_json())); }

// ---- cells and arms ------------------------------------------------------------------

std::vector<DriftCell> drift_cells(const DriftSweep& s) {
  std::vector<DriftCell> cells;
  for (int32_t ctx : s.contexts)
    for (int b : s.batches)
      for (const DriftHeads& h : s.heads) {
        DriftCell c;
        c.index = int(cells.size());
        c.context = ctx;
        c.batch = b;
        c.heads = h;
        c.name = fmt::format("{}/b{}", context_label(ctx), b);
        if (s.heads.size() > 1) c.name += fmt::format("/h{}g{}", h.hkv, h.group);
        c.lens = trace_like_lengths(ctx, b, s.shorter, s.lengths_seed);
        for (int32_t l : c.lens) c.tokens += l;
        cells.push_back(std::move(c));
      }
  return cells;
}

std::vector<DriftArm> drift_arms(const DriftSweep& s) {
  std::vector<DriftArm> arms;
  for (DType p : s.partials)
    for (int c : s.ceilings) arms.push_back({ArmKind::planned, c, p, fmt::format("planned c{} {}", c, kernels::to_string(p))});
  if (s.uniform_baseline)
    for (DType p : s.partials) arms.push_back({ArmKind::uniform, 0, p, fmt::format("uniform {}", kernels::to_string(p))});
  if (s.control_epsilon > 0)
    for (int c : s.ceilings)
      arms.push_back({ArmKind::control, c, DType::bf16, fmt::format("control c{} bf16", c)});
  return arms;
}

std::vector<int32_t> trace_like_lengths(int32_t context, int batch, const DriftShorter& sh, uint64_t seed) {
  std::vector<int32_t> lens(std::max(batch, 1), context);
  const double mu = std::log(sh.ratio_p50);
  const double sigma = (std::log(sh.ratio_p90) - mu) / 1.2815515655446004;  // z of the 90th percentile
  for (int i = 1; i < batch; ++i) {
    const uint64_t row = row_key(seed, SourceTensor::q, int64_t(context), i, -1);
    double r = 0.0;
    for (int64_t attempt = 0;; ++attempt) {  // truncation to r >= 1 by redrawing
      r = std::exp(mu + sigma * double(element_normal(row, attempt)));
      if (r >= 1.0) break;
    }
    const double len = std::round(double(context) / r);
    lens[i] = int32_t(std::max<double>(sh.min_len, std::min<double>(len, context)));
  }
  return lens;
}

}  // namespace pav::props
