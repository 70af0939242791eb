// SPDX-License-Identifier: Apache-2.0
#include "properties/drift_run_sweep.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>

#include "input/json_input.hpp"
#include "kernels/limits.hpp"
#include "kernels/planner.hpp"
#include "properties/drift_run_data.hpp"

namespace pav::props {

using kernels::DType;
using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw std::invalid_argument(field + ": " + why);
}

template <class T>
T get_num(const json& j, const std::string& field, T lo, T hi) {
  if (!j.is_number()) bad(field, "must be a number");
  if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) bad(field, "must be an integer");
    // 128 bits hold every JSON integer (int64 and uint64 alike), so a value
    // past either is compared, and quoted, as written.
    const __int128 v = j.is_number_unsigned() ? __int128(j.get<uint64_t>()) : __int128(j.get<int64_t>());
    if (v < __int128(lo) || v > __int128(hi)) bad(field, fmt::format("{} is outside {}..{}", j.dump(), lo, hi));
    return T(v);
  } else {
    const double v = j.get<double>();
    if (!(v >= lo && v <= hi)) bad(field, fmt::format("{} is outside [{}, {}]", v, lo, hi));
    return T(v);
  }
}

const json& need_array(const json& j, const std::string& field) {
  if (!j.is_array() || j.empty()) bad(field, "must be a non-empty array");
  return j;
}

std::string context_label(int32_t c) {
  if (c % 1000 == 0) return fmt::format("{}k", c / 1000);
  return fmt::format("{}", c);
}

}  // namespace

DriftSweep parse_drift_sweep(const json& j) {
  if (!j.is_object()) bad("sweep", "must be a JSON object");
  static const std::set<std::string> known = {
      "format", "name", "description", "contexts", "batches", "heads", "head_dim", "block_size", "q_len",
      "ceilings", "partials", "uniform_baseline", "cu", "workgroup_budget", "arch", "q_dtype", "kv_scale",
      "q_std", "seeds", "seed", "lengths_seed", "shorter", "reference_precision", "growth", "control_epsilon"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key())) bad(it.key(), "unknown field");
  if (!j.contains("format") || j["format"] != kDriftSweepFormat)
    bad("format", fmt::format("must be \"{}\"", kDriftSweepFormat));
  DriftSweep s;
  if (j.contains("name")) {
    if (!j["name"].is_string() || j["name"].get<std::string>().empty()) bad("name", "must be a non-empty string");
    s.name = j["name"];
  }
  if (j.contains("description")) {
    if (!j["description"].is_string()) bad("description", "must be a string");
    s.description = j["description"];
  }
  if (j.contains("cu")) s.cu = get_num<int>(j["cu"], "cu", 1, 4096);
  for (const char* f : {"contexts", "batches", "ceilings"})
    if (!j.contains(f)) bad(f, "is required");
  const json& ctx = need_array(j["contexts"], "contexts");
  for (size_t i = 0; i < ctx.size(); ++i)
    s.contexts.push_back(get_num<int32_t>(ctx[i], fmt::format("contexts[{}]", i), 1, std::numeric_limits<int32_t>::max()));
  const json& bat = need_array(j["batches"], "batches");
  for (size_t i = 0; i < bat.size(); ++i)
    s.batches.push_back(get_num<int>(bat[i], fmt::format("batches[{}]", i), 1, kernels::kMaxPlanBatch));
  const json& cei = need_array(j["ceilings"], "ceilings");
  for (size_t i = 0; i < cei.size(); ++i) {
    const std::string f = fmt::format("ceilings[{}]", i);
    const int c = get_num<int>(cei[i], f, 1, s.cu);
    if (!s.ceilings.empty() && c <= s.ceilings.back()) bad(f, "ceilings must be strictly ascending");
    s.ceilings.push_back(c);
  }
  if (s.ceilings.size() < 2) bad("ceilings", "needs at least two (the growth test compares the lowest and the highest)");
  if (j.contains("heads")) {
    const json& h = need_array(j["heads"], "heads");
    s.heads.clear();
    for (size_t i = 0; i < h.size(); ++i) {
      const std::string f = fmt::format("heads[{}]", i);
      if (!h[i].is_object()) bad(f, "must be an object {\"hkv\": N, \"group\": G}");
      for (auto it = h[i].begin(); it != h[i].end(); ++it)
        if (it.key() != "hkv" && it.key() != "group") bad(f + "." + it.key(), "unknown field");
      if (!h[i].contains("hkv") || !h[i].contains("group")) bad(f, "needs hkv and group");
      s.heads.push_back({get_num<int>(h[i]["hkv"], f + ".hkv", 1, 256), get_num<int>(h[i]["group"], f + ".group", 1, 64)});
    }
  }
  if (j.contains("head_dim")) {
    s.head_dim = get_num<int>(j["head_dim"], "head_dim", 64, 1024);
    const bool ok = s.head_dim == 64 || (s.head_dim % 128 == 0);
    if (!ok) bad("head_dim", "must be 64 or a multiple of 128 up to 1024 (the planned kernel's domain)");
  }
  if (j.contains("block_size")) {
    s.block_size = get_num<int>(j["block_size"], "block_size", 16, 128);
    if (s.block_size != 16 && s.block_size != 64 && s.block_size != 128) bad("block_size", "must be 16, 64 or 128");
  }
  if (j.contains("q_len")) s.q_len = get_num<int>(j["q_len"], "q_len", 1, 16);
  if (j.contains("partials")) {
    const json& p = need_array(j["partials"], "partials");
    s.partials.clear();
    for (size_t i = 0; i < p.size(); ++i) {
      const std::string f = fmt::format("partials[{}]", i);
      DType d;
      if (!p[i].is_string() || !kernels::parse_dtype(p[i].get<std::string>(), d) ||
          (d != DType::bf16 && d != DType::f16 && d != DType::f32))
        bad(f, "must be \"bf16\", \"f16\" or \"f32\"");
      if (std::find(s.partials.begin(), s.partials.end(), d) != s.partials.end()) bad(f, "repeated");
      s.partials.push_back(d);
    }
  }
  if (j.contains("uniform_baseline")) {
    if (!j["uniform_baseline"].is_boolean()) bad("uniform_baseline", "must be true or false");
    s.uniform_baseline = j["uniform_baseline"];
  }
  if (j.contains("workgroup_budget"))
    s.workgroup_budget = get_num<int64_t>(j["workgroup_budget"], "workgroup_budget", 0, kernels::kMaxWorkgroupBudget);
  if (j.contains("arch")) {
    if (!j["arch"].is_string() || !kernels::parse_arch(j["arch"].get<std::string>(), s.arch) ||
        kernels::arch_fp8(s.arch) == DType::none)
      bad("arch", "must be \"sm90\", \"gfx950\" or \"gfx942\"");
  }
  if (j.contains("q_dtype")) {
    if (!j["q_dtype"].is_string() || !kernels::parse_dtype(j["q_dtype"].get<std::string>(), s.q_dtype) ||
        (s.q_dtype != DType::bf16 && s.q_dtype != DType::f16))
      bad("q_dtype", "must be \"bf16\" or \"f16\"");
  }
  if (j.contains("kv_scale")) s.kv_scale = get_num<double>(j["kv_scale"], "kv_scale", 1e-6, 1e6);
  if (j.contains("q_std")) s.q_std = get_num<double>(j["q_std"], "q_std", 1e-6, 1e3);
  if (j.contains("seeds")) s.seeds = get_num<int>(j["seeds"], "seeds", 2, 10000);
  if (j.contains("seed")) s.seed = get_num<uint64_t>(j["seed"], "seed", 0, uint64_t(1) << 62);
  if (j.contains("lengths_seed")) s.lengths_seed = get_num<uint64_t>(j["lengths_seed"], "lengths_seed", 0, uint64_t(1) << 62);
  if (j.contains("shorter")) {
    const json& sh = j["shorter"];
    if (!sh.is_object()) bad("shorter", "must be an object");
    for (auto it = sh.begin(); it != sh.end(); ++it)
      if (it.key() != "ratio_p50" && it.key() != "ratio_p90" && it.key() != "min_len") bad("shorter." + it.key(), "unknown field");
    if (sh.contains("ratio_p50")) s.shorter.ratio_p50 = get_num<double>(sh["ratio_p50"], "shorter.ratio_p50", 1.0, 1e6);
    if (sh.contains("ratio_p90")) s.shorter.ratio_p90 = get_num<double>(sh["ratio_p90"], "shorter.ratio_p90", 1.0, 1e6);
    if (sh.contains("min_len")) s.shorter.min_len = get_num<int32_t>(sh["min_len"], "shorter.min_len", 1, 1 << 30);
    if (!(s.shorter.ratio_p90 > s.shorter.ratio_p50)) bad("shorter.ratio_p90", "must exceed ratio_p50");
  }
  if (j.contains("reference_precision")) {
    const json& p = j["reference_precision"];
    if (p == "fp32") s.reference_precision = reference::Precision::fp32;
    else if (p == "fp64") s.reference_precision = reference::Precision::fp64;
    else bad("reference_precision", "must be \"fp32\" or \"fp64\"");
  }
  if (j.contains("growth")) {
    const json& g = j["growth"];
    if (!g.is_object()) bad("growth", "must be an object");
    for (auto it = g.begin(); it != g.end(); ++it)
      if (it.key() != "alpha" && it.key() != "min_relative_growth") bad("growth." + it.key(), "unknown field");
    if (g.contains("alpha")) s.growth.alpha = get_num<double>(g["alpha"], "growth.alpha", 1e-12, 0.5);
    if (g.contains("min_relative_growth"))
      s.growth.min_relative_growth = get_num<double>(g["min_relative_growth"], "growth.min_relative_growth", 0.0, 100.0);
  }
  if (j.contains("control_epsilon")) s.control_epsilon = get_num<double>(j["control_epsilon"], "control_epsilon", 0.0, 1e6);
  // A cell's K and V caches (fp8, one byte per element) hold at most batch x
  // context tokens, each request rounded up to whole blocks: a sweep whose
  // largest cell could never be held is refused here, before anything runs.
  for (size_t c = 0; c < s.contexts.size(); ++c)
    for (size_t b = 0; b < s.batches.size(); ++b)
      for (const DriftHeads& h : s.heads) {
        const __int128 blocks = (__int128(s.contexts[c]) + s.block_size - 1) / s.block_size;
        const __int128 bytes = __int128(s.batches[b]) * blocks * s.block_size * h.hkv * s.head_dim * 2;
        if (bytes > kernels::kMaxDriftCellBytes)
          bad(fmt::format("contexts[{}]", c),
              fmt::format("a cell of {} (batches[{}]) requests of up to {} tokens, {} KV head(s) of dim {}, needs up to "
                          "{} bytes of K and V cache, more than the limit of {} bytes",
                          s.batches[b], b, s.contexts[c], h.hkv, s.head_dim, int64_t(bytes), kernels::kMaxDriftCellBytes));
      }
  return s;
}

DriftSweep load_drift_sweep(const std::string& path) {
  // The shared bounded reader: a directory, a FIFO or another non-regular file
  // is refused before it is opened (never read, never waited on), a file past
  // the size limit before it is read, and 1e999, a duplicate key or nesting
  // past kMaxJsonDepth while parsing; its InputError is an invalid_argument
  // naming the file and field.
  const json j = input::read_json_file(path);
  try {
    return parse_drift_sweep(j);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
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

}  // namespace pav::props
