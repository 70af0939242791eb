#include "properties/drift_run.hpp"

#include <fmt/core.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "kernels/codecs.hpp"
#include "kernels/cpu/decode_cpu.hpp"
#include "properties/runner.hpp"
#include "properties/runner_kernel.hpp"
#include "reference/compare.hpp"

namespace pav::props {

using kernels::DType;
using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw std::invalid_argument(field + ": " + why);
}

// ---- counter-based normals --------------------------------------------------------

// splitmix64's finalizer: a bijective 64-bit mix.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Uniform in (0, 1), never 0 (Box-Muller takes its log).
inline double unit_open(uint64_t h) { return (double(h >> 11) + 0.5) * 0x1.0p-53; }

inline uint64_t row_key(uint64_t seed, SourceTensor t, int64_t a, int64_t b, int64_t c) {
  uint64_t k = mix64(seed ^ (uint64_t(t) << 56));
  k = mix64(k ^ uint64_t(a));
  k = mix64(k ^ uint64_t(b));
  return mix64(k ^ uint64_t(c));
}
// A standard normal from one 64-bit hash: the inverse normal CDF of a uniform,
// by Acklam's rational approximation (relative error < 1.2e-9; no trig, and a
// log only in the 4.85% of draws in the tails).
inline double inverse_normal_cdf(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01,  -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  constexpr double low = 0.02425;
  auto tail = [&](double q) {
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  };
  if (p < low) return tail(std::sqrt(-2.0 * std::log(p)));
  if (p > 1.0 - low) return -tail(std::sqrt(-2.0 * std::log(1.0 - p)));
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}
// Element j of a row.
inline float element_normal(uint64_t row, int64_t j) {
  return float(inverse_normal_cdf(unit_open(mix64(row + 0xd1342543de82ef95ull * uint64_t(j + 1)))));
}
inline void normal_row(uint64_t row, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = element_normal(row, j);
}

// ---- sweep parsing ------------------------------------------------------------------

template <class T>
T get_num(const json& j, const std::string& field, T lo, T hi) {
  if (!j.is_number()) bad(field, "must be a number");
  if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) bad(field, "must be an integer");
    const auto v = j.get<int64_t>();
    if (v < int64_t(lo) || v > int64_t(hi)) bad(field, fmt::format("{} is outside {}..{}", v, lo, hi));
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

std::string dtype_name(DType d) { return std::string(kernels::to_string(d)); }

}  // namespace

float source_normal(uint64_t data_seed, SourceTensor t, int64_t a, int64_t b, int64_t c, int64_t d) {
  return element_normal(row_key(data_seed, t, a, b, c), d);
}

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
    s.workgroup_budget = get_num<int64_t>(j["workgroup_budget"], "workgroup_budget", 0, int64_t(1) << 30);
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
  return s;
}

DriftSweep load_drift_sweep(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(path + ": cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(path + ": not JSON: " + e.what());
  }
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
  for (DType d : s.partials) j["partials"].push_back(dtype_name(d));
  j["uniform_baseline"] = s.uniform_baseline;
  j["cu"] = s.cu;
  j["workgroup_budget"] = s.workgroup_budget;
  j["arch"] = std::string(kernels::to_string(s.arch));
  j["q_dtype"] = dtype_name(s.q_dtype);
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
    for (int c : s.ceilings) arms.push_back({ArmKind::planned, c, p, fmt::format("planned c{} {}", c, dtype_name(p))});
  if (s.uniform_baseline)
    for (DType p : s.partials) arms.push_back({ArmKind::uniform, 0, p, fmt::format("uniform {}", dtype_name(p))});
  if (s.control_epsilon > 0)
    for (int c : s.ceilings)
      arms.push_back({ArmKind::control, c, DType::bf16, fmt::format("control c{} bf16", c)});
  return arms;
}

// ---- data -------------------------------------------------------------------------------

DriftData build_drift_data(const DriftSweep& s, const DriftCell& cell, uint64_t data_seed) {
  using namespace kernels;
  DriftData dd;
  HostCase& c = dd.c;
  CaseSpec& sp = c.spec;
  sp.lens = cell.lens;
  sp.q_len = s.q_len;
  sp.hkv = cell.heads.hkv;
  sp.group = cell.heads.group;
  sp.head_dim = s.head_dim;
  sp.block_size = s.block_size;
  sp.v_layout = VLayout::plain;
  sp.q_dtype = s.q_dtype;
  sp.cache_dtype = arch_fp8(s.arch);
  sp.scales = ScaleKind::per_tensor;
  sp.opt.arch = s.arch;
  sp.opt.compute = arch_fp8(s.arch);
  sp.opt.cu = s.cu;
  sp.workgroup_budget = s.workgroup_budget;
  sp.seed = data_seed;
  const int64_t B = int64_t(cell.lens.size()), D = s.head_dim, H = sp.hkv, Hq = H * sp.group, bs = s.block_size;
  const DType fl = sp.cache_dtype;

  std::vector<int64_t> first_block(B + 1, 0);
  c.max_blocks = 1;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t nb = (std::max<int64_t>(cell.lens[b], 0) + bs - 1) / bs;
    first_block[b + 1] = first_block[b] + nb;
    c.max_blocks = std::max(c.max_blocks, nb);
  }
  const int64_t used = first_block[B];
  c.num_blocks = used + 1;  // the last block is spare: poisoned, only unused table entries point at it
  c.block_tables.assign(B * c.max_blocks, int32_t(used));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < first_block[b + 1] - first_block[b]; ++i)
      c.block_tables[b * c.max_blocks + i] = int32_t(first_block[b] + i);
  c.lens = cell.lens;
  c.k_scale = {float(s.kv_scale)};
  c.v_scale = {float(s.kv_scale)};

  const uint8_t nan8 = fl == DType::fp8_e4m3fnuz ? 0x80 : 0x7f;
  const int64_t block_elems = H * D * bs;
  c.k.resize(c.num_blocks * block_elems);
  c.v.resize(c.num_blocks * block_elems);
  const float inv_scale = float(1.0 / s.kv_scale);
  // One task per used block: its tokens from the source, the tail of a
  // sequence's last block (and the spare block) NaN.
  tbb::parallel_for(int64_t(0), c.num_blocks, [&](int64_t blk) {
    std::fill_n(c.k.begin() + blk * block_elems, block_elems, nan8);
    std::fill_n(c.v.begin() + blk * block_elems, block_elems, nan8);
    if (blk >= used) return;
    const int64_t b = std::upper_bound(first_block.begin(), first_block.end(), blk) - first_block.begin() - 1;
    const int64_t t0 = (blk - first_block[b]) * bs;
    const int64_t t1 = std::min<int64_t>(t0 + bs, cell.lens[b]);
    std::vector<float> kr(D), vr(D);
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < H; ++h) {
        normal_row(row_key(data_seed, SourceTensor::k, b, h, t), D, kr.data());
        normal_row(row_key(data_seed, SourceTensor::v, b, h, t), D, vr.data());
        for (int64_t d = 0; d < D; ++d) {
          c.k[k_offset(blk, h, d, t - t0, H, D, bs)] = f32_to_fp8(kr[d] * inv_scale, fl);
          c.v[v_offset(VLayout::plain, blk, h, d, t - t0, H, D, bs)] = f32_to_fp8(vr[d] * inv_scale, fl);
        }
      }
  });

  const int64_t qrows = B * s.q_len;
  dd.q_source.resize(qrows * Hq * D);
  c.q.resize(qrows * Hq * D);
  for (int64_t r = 0; r < qrows; ++r)
    for (int64_t h = 0; h < Hq; ++h) {
      float* src = &dd.q_source[(r * Hq + h) * D];
      normal_row(row_key(data_seed, SourceTensor::q, r, h, 0), D, src);
      for (int64_t d = 0; d < D; ++d) {
        src[d] *= float(s.q_std);
        c.q[(r * Hq + h) * D + d] = s.q_dtype == DType::bf16 ? f32_to_bf16(src[d]) : f32_to_f16(src[d]);
      }
    }
  c.out.assign(qrows * Hq * D, 0);
  c.poison_output();
  return dd;
}

reference::SourceChunkFn drift_source_chunks(const DriftSweep& s, const DriftCell& cell, uint64_t data_seed) {
  const int64_t D = s.head_dim;
  (void)cell;
  return [D, data_seed](int64_t seq, int64_t h, int64_t t0, int64_t n, float* k, float* v) {
    for (int64_t i = 0; i < n; ++i) {
      normal_row(row_key(data_seed, SourceTensor::k, seq, h, t0 + i), D, k + i * D);
      normal_row(row_key(data_seed, SourceTensor::v, seq, h, t0 + i), D, v + i * D);
    }
  };
}

reference::SourceGeometry drift_source_geometry(const DriftSweep& s, const DriftCell& cell) {
  return {.lens = cell.lens, .q_len = s.q_len, .hkv = cell.heads.hkv, .group = cell.heads.group,
          .head_dim = s.head_dim, .softmax_scale = 0.0};
}

// ---- the positive control ---------------------------------------------------------------------

void inject_partition_epsilon(const kernels::Scratch& scratch, const kernels::PlanView& plan, int64_t rows,
                              float epsilon) {
  int64_t active = 0;
  for (int64_t b = 0; b < plan.num_seqs; ++b) active += plan.reduce_info[2 * b + 1];
  float* l = scratch.l.as<float>();
  for (int64_t h = 0; h < plan.kv_heads; ++h)
    for (int64_t i = 0; i < active; ++i)
      for (int64_t r = 0; r < rows; ++r) {
        float& x = l[(h * plan.capacity + i) * rows + r];
        if (x > 0.0f) x += epsilon;
      }
}

void reduce_planned_scratch(const kernels::DecodeCall& call, const kernels::PlanView& plan,
                            const kernels::Scratch& scratch) {
  using namespace kernels;
  const CallDims d = dims_of(call);
  const int64_t D = d.head_dim, G = d.group, rows = d.rows, cap = plan.capacity;
  const float* m = scratch.m.as<const float>();
  const float* l = scratch.l.as<const float>();
  auto load = [&](int64_t i) -> float {
    switch (scratch.partial.dtype) {
      case DType::f32: return scratch.partial.as<const float>()[i];
      case DType::bf16: return bf16_to_f32(scratch.partial.as<const uint16_t>()[i]);
      default: return f16_to_f32(scratch.partial.as<const uint16_t>()[i]);
    }
  };
  auto store = [&](int64_t qrow, int64_t head, int64_t dd, float v) {
    const int64_t off = qrow * call.out.stride[0] + head * call.out.stride[1] + dd;
    call.out.as<uint16_t>()[off] = call.out.dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
  };
  const float neg_inf = -std::numeric_limits<float>::infinity();
  tbb::parallel_for(int64_t(0), d.num_seqs * d.hkv, [&](int64_t sh) {
    const int64_t seq = sh / d.hkv, h = sh % d.hkv;
    const int64_t base = h * cap + plan.reduce_info[2 * seq], count = plan.reduce_info[2 * seq + 1];
    std::vector<float> w(count), o(D);
    for (int64_t r = 0; r < rows; ++r) {
      float M = neg_inf;
      for (int64_t p = 0; p < count; ++p) M = std::max(M, m[(base + p) * rows + r]);
      if (M == neg_inf) M = 0.0f;  // every partition empty: never (-inf) - (-inf)
      float L = 0.0f;
      for (int64_t p = 0; p < count; ++p) {
        const float lp = l[(base + p) * rows + r], mp = m[(base + p) * rows + r];
        w[p] = lp > 0.0f ? lp * std::exp(mp - M) : 0.0f;
        L += w[p];
      }
      std::fill(o.begin(), o.end(), 0.0f);
      if (L > 0.0f)
        for (int64_t p = 0; p < count; ++p) {
          if (w[p] == 0.0f) continue;
          const float wp = w[p] / L;
          for (int64_t dd = 0; dd < D; ++dd) o[dd] += wp * load(((base + p) * rows + r) * D + dd);
        }
      for (int64_t dd = 0; dd < D; ++dd) store(seq * d.q_len + r / G, h * G + r % G, dd, o[dd]);
    }
  });
}

// ---- figures -----------------------------------------------------------------------------------------

ErrorFigures error_figures(const kernels::TensorView& out, const reference::ReferenceResult& ref) {
  using namespace kernels;
  ErrorFigures f;
  const reference::CompareReport c = reference::compare(out, ref);
  f.rel_l2 = c.rel_l2_err;
  f.max_abs = c.max_abs_err;
  f.mismatches = c.mismatches;
  f.nonfinite = c.nonfinite;
  const int64_t D = ref.head_dim;
  for (int64_t qrow = 0; qrow < ref.num_seqs * ref.q_len; ++qrow)
    for (int64_t head = 0; head < ref.hq; ++head) {
      double dn = 0, rn = 0;
      for (int64_t d = 0; d < D; ++d) {
        const int64_t off = qrow * out.stride[0] + head * out.stride[1] + d * out.stride[2];
        const uint16_t bits = out.as<const uint16_t>()[off];
        const double o = out.dtype == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
        const double r = ref.out[ref.index(qrow, head, d)];
        dn += (o - r) * (o - r);
        rn += r * r;
      }
      if (rn > 0 && std::isfinite(dn)) f.max_row_rel = std::max(f.max_row_rel, std::sqrt(dn / rn));
    }
  return f;
}

SplitCounts split_counts(std::vector<int64_t> per_request) {
  SplitCounts s;
  s.per_request = per_request;
  if (per_request.empty()) return s;
  std::sort(per_request.begin(), per_request.end());
  s.min = per_request.front();
  s.max = per_request.back();
  const size_t n = per_request.size();
  s.median = n % 2 ? double(per_request[n / 2]) : 0.5 * double(per_request[n / 2 - 1] + per_request[n / 2]);
  return s;
}

// ---- the run ----------------------------------------------------------------------------------------------

namespace {

std::vector<int64_t> planned_counts(const kernels::WorkPlan& plan) {
  std::vector<int64_t> c;
  for (int64_t b = 0; b < plan.params().num_seqs; ++b) c.push_back(plan.reduce_info()[2 * b + 1]);
  return c;
}

std::vector<int64_t> uniform_counts(const std::vector<int32_t>& lens, int splits) {
  std::vector<int64_t> c;
  for (int32_t len : lens) {
    const int64_t tiles = kernels::plan_tiles(len);
    const int64_t per = kernels::ceil_div64(std::max<int64_t>(tiles, 1), splits);
    c.push_back(tiles > 0 ? kernels::ceil_div64(tiles, per) : 0);
  }
  return c;
}

std::vector<double> rel_l2_of(const std::vector<ErrorFigures>& f) {
  std::vector<double> v;
  for (const auto& x : f) v.push_back(x.rel_l2);
  return v;
}

const ArmResult* find_arm(const CellResult& c, ArmKind kind, int ceiling, DType partial) {
  for (const auto& a : c.arms)
    if (a.arm.kind == kind && a.arm.ceiling == ceiling && a.arm.partial == partial) return &a;
  return nullptr;
}

GrowthRow growth_row(const std::string& label, const ArmResult& low, const ArmResult& high, DriftReference ref,
                     const stats::GrowthOptions& g) {
  GrowthRow row;
  row.arms = label;
  row.partial = low.arm.partial;
  row.reference = ref;
  row.low_ceiling = low.arm.ceiling;
  row.high_ceiling = high.arm.ceiling;
  row.splits_differ = low.splits.per_request != high.splits.per_request;
  const auto& lf = ref == DriftReference::kernel ? low.kernel_ref : low.end_to_end;
  const auto& hf = ref == DriftReference::kernel ? high.kernel_ref : high.end_to_end;
  const auto lv = rel_l2_of(lf), hv = rel_l2_of(hf);
  row.test = stats::paired_growth(lv, hv, g);
  return row;
}

// A planned arm through a kernel under test.
void run_kernel_arm(adapters::KernelUnderTest& k, HostCase& c, ArmResult& ar, const reference::ReferenceResult& kref,
                    const reference::ReferenceResult& eref) {
  const adapters::KernelDescription& d = k.description();
  c.spec.path = Path::planned;
  c.spec.max_partitions = ar.arm.ceiling;
  KernelCall kc;
  prepare_kernel_call(kc, c, d);
  if (const std::string why = adapters::contract_violation(kc.request, d); !why.empty())
    throw std::invalid_argument("a call of this sweep is outside the kernel's description: " + why);
  const CheckedRun run = run_checked(k, kc.request);
  if (!run.ok()) {
    ++ar.status_failures;
    if (ar.first_error.empty()) ar.first_error = outcome_text(run.decoded ? run.decode : run.check);
  }
  // A plan kernel's split counts are its plan's; a self-splitting one does not say.
  ar.splits = kc.plan ? split_counts(planned_counts(*kc.plan)) : SplitCounts{};
  ar.kernel_ref.push_back(error_figures(kc.request.call.out, kref));
  ar.end_to_end.push_back(error_figures(kc.request.call.out, eref));
}

}  // namespace

DriftSweep kernel_sweep(DriftSweep s, const adapters::KernelDescription& d) {
  if (d.split == adapters::Split::self && !d.split_ceiling)
    throw std::invalid_argument("the kernel takes no split ceiling, which pav drift sweeps");
  if (d.max_split_ceiling > 0 && s.ceilings.back() > d.max_split_ceiling)
    throw std::invalid_argument(fmt::format("the sweep's highest ceiling {} passes the kernel's max_split_ceiling {}",
                                            s.ceilings.back(), d.max_split_ceiling));
  s.partials = {d.profile.numerics().partial};
  s.uniform_baseline = false;
  s.control_epsilon = 0;
  return s;
}

DriftReport run_drift(const DriftSweep& s, const std::vector<DriftCell>& cells, const DriftRunOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  DriftReport rep;
  rep.sweep = s;
  rep.backend = o.kernel ? adapters::identity(*o.kernel) : o.backend == kernels::Backend::gpu ? "gpu" : "cpu";
  const std::vector<DriftArm> arms = drift_arms(s);
  // Work units: tokens x (two references + the arms that launch a kernel).
  int64_t launches_per_seed = 2;
  for (const auto& a : arms)
    if (a.kind != ArmKind::control || o.backend != kernels::Backend::cpu) ++launches_per_seed;
  DriftProgress prog;
  prog.total = 0;
  for (const auto& c : cells) prog.total += double(std::max<int64_t>(c.tokens, 1)) * s.seeds * double(launches_per_seed);
  auto step = [&](const std::string& what, double units) {
    if (o.progress) {
      prog.what = what;
      prog.elapsed_s = std::chrono::duration<double>(Clock::now() - t_start).count();
      o.progress(prog);
    }
    prog.done += units;
  };

  for (size_t ci = 0; ci < cells.size(); ++ci) {
    const DriftCell& cell = cells[ci];
    const auto t_cell = Clock::now();
    CellResult cr;
    cr.cell = cell;
    for (const auto& a : arms) cr.arms.push_back({a, {}, {}, {}, 0, {}});
    const double units = double(std::max<int64_t>(cell.tokens, 1));
    for (int r = 0; r < s.seeds; ++r) {
      const uint64_t data_seed = s.seed + uint64_t(r);
      const std::string where = fmt::format("cell {}/{} {} seed {}/{}", ci + 1, cells.size(), cell.name, r + 1, s.seeds);
      auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
      step(where + ": data", 0);
      auto t0 = Clock::now();
      DriftData data = build_drift_data(s, cell, data_seed);
      cr.seconds_data += since(t0);
      step(where + ": kernel reference", 0);
      t0 = Clock::now();
      reference::ReferenceOptions ro;
      ro.precision = s.reference_precision;
      const reference::ReferenceResult kref = o.kernel ? reference_for(data.c.call(), o.kernel->description().profile,
                                                                       s.reference_precision)
                                                       : reference::decode(data.c.call(), ro);
      cr.seconds_kernel_ref += since(t0);
      prog.done += units;
      step(where + ": end-to-end reference", 0);
      t0 = Clock::now();
      const reference::ReferenceResult eref = reference::source_decode(
          drift_source_geometry(s, cell), data.q_source.data(), drift_source_chunks(s, cell, data_seed));
      cr.seconds_end_to_end_ref += since(t0);
      prog.done += units;
      t0 = Clock::now();

      // Planned bf16 runs on the CPU keep their scratch for the control arm.
      std::map<int, RunResult> kept;
      for (ArmResult& ar : cr.arms) {
        const DriftArm& a = ar.arm;
        if (a.kind == ArmKind::control) continue;
        step(where + ": " + a.name, units);
        data.c.spec.opt.partial = a.partial;
        data.c.spec.path = a.kind == ArmKind::uniform ? Path::uniform : Path::planned;
        data.c.spec.max_partitions = a.kind == ArmKind::uniform ? 0 : a.ceiling;
        if (o.kernel) {
          run_kernel_arm(*o.kernel, data.c, ar, kref, eref);
          continue;
        }
        RunResult run = run_case(data.c, o.backend);
        if (run.status.status != kernels::DecodeStatus::ok) ++ar.status_failures;
        if (a.kind == ArmKind::uniform) ar.splits = split_counts(uniform_counts(cell.lens, run.splits));
        else ar.splits = split_counts(planned_counts(*run.plan));
        const kernels::DecodeCall call = data.c.call();
        ar.kernel_ref.push_back(error_figures(call.out, kref));
        ar.end_to_end.push_back(error_figures(call.out, eref));
        if (s.control_epsilon > 0 && a.kind == ArmKind::planned && a.partial == DType::bf16 &&
            o.backend == kernels::Backend::cpu)
          kept.emplace(a.ceiling, std::move(run));
      }
      cr.seconds_arms += since(t0);
      t0 = Clock::now();
      for (ArmResult& ar : cr.arms) {
        const DriftArm& a = ar.arm;
        if (a.kind != ArmKind::control) continue;
        auto it = kept.find(a.ceiling);
        RunResult run;
        data.c.spec.opt.partial = DType::bf16;
        data.c.spec.path = Path::planned;
        data.c.spec.max_partitions = a.ceiling;
        if (it != kept.end()) {
          run = std::move(it->second);
        } else {  // not kept (GPU backend or no bf16 arm): a CPU run of its own
          step(where + ": " + a.name + " (cpu)", units);
          run = run_case(data.c, kernels::Backend::cpu);
        }
        ar.splits = split_counts(planned_counts(*run.plan));
        const kernels::DecodeCall call = data.c.call();
        const kernels::PlanView view = run.plan->view();
        inject_partition_epsilon(run.scratch.view, view, dims_of(call).rows, float(s.control_epsilon));
        reduce_planned_scratch(call, view, run.scratch.view);
        ar.kernel_ref.push_back(error_figures(call.out, kref));
        ar.end_to_end.push_back(error_figures(call.out, eref));
      }
      cr.seconds_control += since(t0);
    }

    // Growth tests: lowest vs highest ceiling, per partial dtype and reference.
    const int lo = s.ceilings.front(), hi = s.ceilings.back();
    for (DType p : s.partials) {
      const ArmResult* a = find_arm(cr, ArmKind::planned, lo, p);
      const ArmResult* b = find_arm(cr, ArmKind::planned, hi, p);
      for (DriftReference ref : {DriftReference::kernel, DriftReference::end_to_end})
        cr.growth.push_back(growth_row("planned " + dtype_name(p), *a, *b, ref, s.growth));
    }
    if (s.control_epsilon > 0) {
      const ArmResult* a = find_arm(cr, ArmKind::control, lo, DType::bf16);
      const ArmResult* b = find_arm(cr, ArmKind::control, hi, DType::bf16);
      cr.control = growth_row("control bf16", *a, *b, DriftReference::kernel, s.growth);
    }
    for (const auto& g : cr.growth) cr.growth_found = cr.growth_found || g.test.growth;
    if (cr.control && cr.control->splits_differ) {
      cr.control_ok = cr.control->test.growth;
      rep.control_run = true;
    }
    for (const auto& ar : cr.arms) {
      if (ar.arm.kind == ArmKind::control) continue;
      for (const auto& f : ar.kernel_ref) {
        cr.mismatches += f.mismatches;
        cr.nonfinite += f.nonfinite;
      }
      cr.status_failures += ar.status_failures;
    }
    cr.passed = !cr.growth_found && cr.control_ok && cr.mismatches == 0 && cr.nonfinite == 0 && cr.status_failures == 0;
    std::vector<std::string> why;
    if (cr.growth_found)
      for (const auto& g : cr.growth)
        if (g.test.growth)
          why.push_back(fmt::format("{} vs {} reference c{}->c{}: {}", g.arms,
                                    g.reference == DriftReference::kernel ? "kernel" : "end-to-end", g.low_ceiling,
                                    g.high_ceiling, g.test.verdict));
    if (!cr.control_ok) {
      std::string w = "positive control did not flip: " + cr.control->test.verdict;
      // 2^-R is the smallest one-sided sign-test p with R seeds.
      if (std::ldexp(1.0, -s.seeds) >= s.growth.alpha / 2)
        w += fmt::format(" (with {} seeds the sign test cannot reach p < {:g}; use more seeds)", s.seeds, s.growth.alpha / 2);
      why.push_back(w);
    }
    if (cr.mismatches) why.push_back(fmt::format("{} mismatches at the REFERENCE 10 standard", cr.mismatches));
    if (cr.nonfinite) why.push_back(fmt::format("{} non-finite outputs", cr.nonfinite));
    if (cr.status_failures) {
      std::string first;
      for (const auto& ar : cr.arms)
        if (first.empty() && !ar.first_error.empty()) first = ar.arm.name + ": " + ar.first_error;
      why.push_back(first.empty() ? fmt::format("{} runs reported a stale plan", cr.status_failures)
                                  : fmt::format("{} runs did not succeed; first {}", cr.status_failures, first));
    }
    if (why.empty()) {
      cr.verdict = "no growth";
      if (cr.control) cr.verdict += cr.control->splits_differ ? "; control flipped" : "; control n/a (identical splits)";
    } else {
      cr.verdict = why.front();
      for (size_t i = 1; i < why.size(); ++i) cr.verdict += "; " + why[i];
    }
    cr.seconds = std::chrono::duration<double>(Clock::now() - t_cell).count();
    rep.growth = rep.growth || cr.growth_found;
    rep.control_ok = rep.control_ok && cr.control_ok;
    rep.mismatches += cr.mismatches;
    if (!cr.passed && rep.first_failure.empty()) rep.first_failure = cell.name + ": " + cr.verdict;
    rep.cells.push_back(std::move(cr));
  }
  if (o.progress) {
    prog.done = prog.total;
    prog.what = "done";
    prog.elapsed_s = std::chrono::duration<double>(Clock::now() - t_start).count();
    o.progress(prog);
  }
  rep.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  rep.passed = !rep.cells.empty();
  for (const auto& c : rep.cells) rep.passed = rep.passed && c.passed;
  if (s.control_epsilon > 0 && !rep.control_run) {
    rep.passed = false;
    if (rep.first_failure.empty())
      rep.first_failure = "positive control not exercised: no cell's lowest and highest ceilings split differently";
  }
  rep.verdict = fmt::format("{}: {} ({} cells{})", rep.passed ? "PASS" : "FAIL", rep.growth ? "growth" : "no growth",
                            rep.cells.size(),
                            s.control_epsilon > 0 ? (rep.control_run && rep.control_ok ? ", positive control flipped"
                                                                                         : ", positive control FAILED")
                                                  : "");
  return rep;
}

// ---- reports ------------------------------------------------------------------------------------------------

namespace {

json stat_json(const std::vector<double>& v) {
  double lo = v.empty() ? 0 : v.front(), hi = lo, sum = 0;
  for (double x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  return {{"mean", v.empty() ? 0.0 : sum / double(v.size())}, {"min", lo}, {"max", hi}, {"per_seed", v}};
}

json figures_json(const std::vector<ErrorFigures>& f) {
  std::vector<double> rel, row, mabs;
  int64_t mm = 0, nf = 0;
  for (const auto& x : f) {
    rel.push_back(x.rel_l2);
    row.push_back(x.max_row_rel);
    mabs.push_back(x.max_abs);
    mm += x.mismatches;
    nf += x.nonfinite;
  }
  return {{"rel_l2", stat_json(rel)}, {"max_row_rel", stat_json(row)}, {"max_abs", stat_json(mabs)},
          {"mismatches", mm}, {"nonfinite", nf}};
}

json growth_json(const GrowthRow& g) {
  const auto& t = g.test;
  return {{"arms", g.arms},
          {"partial", dtype_name(g.partial)},
          {"reference", g.reference == DriftReference::kernel ? "kernel" : "end_to_end"},
          {"low_ceiling", g.low_ceiling},
          {"high_ceiling", g.high_ceiling},
          {"splits_differ", g.splits_differ},
          {"pairs", t.pairs},
          {"mean_low", t.mean_low},
          {"mean_high", t.mean_high},
          {"mean_diff", t.mean_diff},
          {"sd_diff", t.sd_diff},
          {"relative_growth", std::isfinite(t.relative_growth) ? json(t.relative_growth) : json("inf")},
          {"t", std::isfinite(t.t) ? json(t.t) : json(t.t > 0 ? "inf" : "-inf")},
          {"t_p", t.t_p},
          {"positive", t.positive},
          {"negative", t.negative},
          {"ties", t.ties},
          {"sign_p", t.sign_p},
          {"growth", t.growth},
          {"verdict", t.verdict}};
}

double mean_of(const std::vector<ErrorFigures>& f, double ErrorFigures::*m) {
  double s = 0;
  for (const auto& x : f) s += x.*m;
  return f.empty() ? 0 : s / double(f.size());
}
double max_of(const std::vector<ErrorFigures>& f, double ErrorFigures::*m) {
  double s = 0;
  for (const auto& x : f) s = std::max(s, x.*m);
  return s;
}
double min_of(const std::vector<ErrorFigures>& f, double ErrorFigures::*m) {
  double s = f.empty() ? 0 : f.front().*m;
  for (const auto& x : f) s = std::min(s, x.*m);
  return s;
}
int64_t sum_mismatches(const std::vector<ErrorFigures>& f) {
  int64_t s = 0;
  for (const auto& x : f) s += x.mismatches + x.nonfinite;
  return s;
}

std::string pct(double x, int prec = 3) { return fmt::format("{:.{}f}%", 100.0 * x, prec); }

std::string lens_summary(const std::vector<int32_t>& lens) {
  if (lens.size() <= 8) {
    std::string s;
    for (size_t i = 0; i < lens.size(); ++i) s += (i ? ", " : "") + std::to_string(lens[i]);
    return s;
  }
  std::vector<int32_t> v = lens;
  std::sort(v.begin(), v.end());
  return fmt::format("{} requests: max {}, median {}, min {}", v.size(), v.back(), v[v.size() / 2], v.front());
}

std::string splits_text(const SplitCounts& s) {
  return fmt::format("{}/{:g}/{}", s.min, s.median, s.max);
}

std::string escape_gp(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

}  // namespace

json report_json(const DriftReport& r) {
  json j;
  j["format"] = kDriftReportFormat;
  j["sweep"] = sweep_to_json(r.sweep);
  j["backend"] = r.backend;
  j["seconds"] = r.seconds;
  j["growth"] = r.growth;
  j["control_run"] = r.control_run;
  j["control_ok"] = r.control_ok;
  j["mismatches"] = r.mismatches;
  j["passed"] = r.passed;
  j["verdict"] = r.verdict;
  j["first_failure"] = r.first_failure;
  j["cells"] = json::array();
  for (const auto& c : r.cells) {
    json cj;
    cj["index"] = c.cell.index;
    cj["name"] = c.cell.name;
    cj["context"] = c.cell.context;
    cj["batch"] = c.cell.batch;
    cj["hkv"] = c.cell.heads.hkv;
    cj["group"] = c.cell.heads.group;
    cj["head_dim"] = r.sweep.head_dim;
    cj["lens"] = c.cell.lens;
    cj["tokens"] = c.cell.tokens;
    cj["seconds"] = c.seconds;
    cj["seconds_by_phase"] = {{"data", c.seconds_data}, {"kernel_reference", c.seconds_kernel_ref},
                              {"end_to_end_reference", c.seconds_end_to_end_ref}, {"arms", c.seconds_arms},
                              {"control", c.seconds_control}};
    cj["arms"] = json::array();
    for (const auto& a : c.arms) {
      const char* kind = a.arm.kind == ArmKind::planned ? "planned" : a.arm.kind == ArmKind::uniform ? "uniform" : "control";
      cj["arms"].push_back({{"name", a.arm.name},
                            {"kind", kind},
                            {"ceiling", a.arm.ceiling},
                            {"partial", dtype_name(a.arm.partial)},
                            {"splits", {{"min", a.splits.min}, {"median", a.splits.median}, {"max", a.splits.max},
                                        {"per_request", a.splits.per_request}}},
                            {"kernel_reference", figures_json(a.kernel_ref)},
                            {"end_to_end", figures_json(a.end_to_end)},
                            {"status_failures", a.status_failures}});
    }
    cj["growth"] = json::array();
    for (const auto& g : c.growth) cj["growth"].push_back(growth_json(g));
    if (c.control) cj["control"] = growth_json(*c.control);
    cj["growth_found"] = c.growth_found;
    cj["control_ok"] = c.control_ok;
    cj["mismatches"] = c.mismatches;
    cj["nonfinite"] = c.nonfinite;
    cj["passed"] = c.passed;
    cj["verdict"] = c.verdict;
    j["cells"].push_back(cj);
  }
  return j;
}

std::string report_markdown(const DriftReport& r) {
  const DriftSweep& s = r.sweep;
  std::ostringstream m;
  m << fmt::format("## pav drift: sweep `{}` on {} ({} data seeds, {:.1f} s)\n\n", s.name, r.backend, s.seeds, r.seconds);
  m << fmt::format("Planner cu {}, budget {}, D {}, block {}, q_len {}, arch {}, reference {}. "
                   "Figures are the mean over seeds (min-max in brackets for ||delta||/||ref||). "
                   "Kernel reference: over the dequantized cache; end to end: over the unquantized source values. "
                   "Splits: non-empty partitions per request, min/median/max.\n\n",
                   s.cu, s.workgroup_budget ? s.workgroup_budget : 2 * int64_t(s.cu), s.head_dim, s.block_size, s.q_len,
                   kernels::to_string(s.arch), s.reference_precision == reference::Precision::fp64 ? "fp64" : "fp32");
  for (const auto& c : r.cells) {
    m << fmt::format("### cell `{}`: Hkv {}, G {}, {} tokens ({})\n\n", c.cell.name, c.cell.heads.hkv,
                     c.cell.heads.group, c.cell.tokens, lens_summary(c.cell.lens));
    m << fmt::format("{:.1f} s: data {:.1f}, kernel reference {:.1f}, end-to-end reference {:.1f}, arms {:.1f}, "
                     "control {:.1f}.\n\n",
                     c.seconds, c.seconds_data, c.seconds_kernel_ref, c.seconds_end_to_end_ref, c.seconds_arms,
                     c.seconds_control);
    m << "| arm | splits | kernel ‖Δ‖/‖ref‖ | kernel max row rel | kernel max abs | mismatches | "
         "e2e ‖Δ‖/‖ref‖ | e2e max row rel | e2e max abs |\n";
    m << "|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& a : c.arms) {
      m << fmt::format("| {} | {} | {} [{}, {}] | {} | {:.3g} | {} | {} [{}, {}] | {} | {:.3g} |\n", a.arm.name,
                       splits_text(a.splits), pct(mean_of(a.kernel_ref, &ErrorFigures::rel_l2)),
                       pct(min_of(a.kernel_ref, &ErrorFigures::rel_l2)), pct(max_of(a.kernel_ref, &ErrorFigures::rel_l2)),
                       pct(mean_of(a.kernel_ref, &ErrorFigures::max_row_rel), 2),
                       mean_of(a.kernel_ref, &ErrorFigures::max_abs), sum_mismatches(a.kernel_ref),
                       pct(mean_of(a.end_to_end, &ErrorFigures::rel_l2)), pct(min_of(a.end_to_end, &ErrorFigures::rel_l2)),
                       pct(max_of(a.end_to_end, &ErrorFigures::rel_l2)),
                       pct(mean_of(a.end_to_end, &ErrorFigures::max_row_rel), 2),
                       mean_of(a.end_to_end, &ErrorFigures::max_abs));
    }
    m << "\n";
  }
  m << fmt::format("### growth tests (ceiling {} vs {}, paired over seeds; growth = mean d > 0, one-sided paired t or "
                   "sign p < {:g} (alpha {:g}, Bonferroni over the two), relative growth > {:.0f}%)\n\n",
                   s.ceilings.front(), s.ceilings.back(), s.growth.alpha / 2, s.growth.alpha,
                   100.0 * s.growth.min_relative_growth);
  m << "| cell | arms | reference | splits differ | mean low | mean high | relative growth | t p | sign p | verdict |\n";
  m << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : r.cells) {
    std::vector<const GrowthRow*> rows;
    for (const auto& g : c.growth) rows.push_back(&g);
    if (c.control) rows.push_back(&*c.control);
    for (const GrowthRow* g : rows) {
      const auto& t = g->test;
      const std::string verdict = g->arms.rfind("control", 0) == 0
                                      ? (t.growth ? "growth (control flipped)" : g->splits_differ ? "NO FLIP" : "n/a")
                                      : (t.growth ? "**GROWTH**" : "no growth");
      m << fmt::format("| {} | {} | {} | {} | {} | {} | {:+.1f}% | {:.2g} | {:.2g} | {} |\n", c.cell.name, g->arms,
                       g->reference == DriftReference::kernel ? "kernel" : "end to end", g->splits_differ ? "yes" : "no",
                       pct(t.mean_low), pct(t.mean_high), 100.0 * t.relative_growth, t.t_p, t.sign_p, verdict);
    }
  }
  m << "\n| cell | verdict |\n|---|---|\n";
  for (const auto& c : r.cells) m << fmt::format("| {} | {} |\n", c.cell.name, c.verdict);
  m << fmt::format("\n**Overall: {}**\n", r.verdict);
  if (!r.first_failure.empty()) m << fmt::format("\nFirst failure: {}\n", r.first_failure);
  return m.str();
}

std::string gnuplot_png_terminal() {
  FILE* p = popen("gnuplot -e 'set terminal' 2>&1", "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) return "";
  auto has = [&](const std::string& t) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream w(line);
      std::string first;
      if (w >> first && first == t) return true;
    }
    return false;
  };
  if (has("pngcairo")) return "pngcairo";
  if (has("png")) return "png";
  return "";
}

PlotOutcome write_plot(const DriftReport& r, const std::string& png_path) {
  PlotOutcome po;
  namespace fs = std::filesystem;
  const fs::path png(png_path);
  fs::path stem = png;
  stem.replace_extension();
  po.data = stem.string() + ".dat";
  po.script = stem.string() + ".gp";
  const DriftSweep& s = r.sweep;

  // Data: one gnuplot block (index) per (cell, series), separated by two blank
  // lines; columns: ceiling, mean, min, max of ||delta||/||ref|| in percent.
  struct Series {
    std::string title;
    int panel;  // 0 kernel, 1 end to end, 2 control
  };
  std::vector<Series> series;
  std::ofstream dat(po.data);
  if (!dat) {
    po.message = "cannot write " + po.data;
    return po;
  }
  dat << "# pav drift plot data: ceiling, mean, min, max of ||delta||/||ref|| (%) over seeds\n";
  auto block = [&](const CellResult& c, ArmKind kind, DType p, bool e2e, int panel, const std::string& title) {
    dat << "# " << title << "\n";
    for (const auto& a : c.arms) {
      if (a.arm.kind != kind || a.arm.partial != p) continue;
      const auto& f = e2e ? a.end_to_end : a.kernel_ref;
      dat << fmt::format("{} {:.6g} {:.6g} {:.6g}\n", a.arm.ceiling, 100 * mean_of(f, &ErrorFigures::rel_l2),
                         100 * min_of(f, &ErrorFigures::rel_l2), 100 * max_of(f, &ErrorFigures::rel_l2));
    }
    dat << "\n\n";
    series.push_back({title, panel});
  };
  for (const auto& c : r.cells)
    for (DType p : s.partials) block(c, ArmKind::planned, p, false, 0, c.cell.name + " " + dtype_name(p));
  for (const auto& c : r.cells)
    for (DType p : s.partials) block(c, ArmKind::planned, p, true, 1, c.cell.name + " " + dtype_name(p));
  const bool control = s.control_epsilon > 0;
  if (control)
    for (const auto& c : r.cells) block(c, ArmKind::control, DType::bf16, false, 2, c.cell.name + " control");
  dat.close();

  const std::string term = gnuplot_png_terminal();
  if (term.empty()) {
    po.message = "gnuplot not found (or it has no png/pngcairo terminal): install gnuplot-nox (ci/install-deps.sh); "
                 "data and script written, plot skipped";
    // Still write the script so the plot can be made elsewhere.
  }
  const int panels = control ? 3 : 2;
  std::ofstream gp(po.script);
  if (!gp) {
    po.message = "cannot write " + po.script;
    return po;
  }
  gp << "# pav drift: ||delta||/||ref|| against the split ceiling, per cell (gnuplot " << po.script << ")\n";
  gp << fmt::format("set terminal {} noenhanced size {},{} font \",10\"\n", term.empty() ? "pngcairo" : term, 560 * panels, 480);
  gp << fmt::format("set output \"{}\"\n", escape_gp(png.string()));
  gp << "set logscale x 2\nset grid\nset key below center horizontal maxrows 5 font \",8\" spacing 0.9\n";
  gp << fmt::format("set xrange [{}:{}]\n", s.ceilings.front() / 1.5, s.ceilings.back() * 1.5);
  // The x axis is named in the title: an xlabel collides with the key below the panels.
  gp << "set ylabel \"||delta|| / ||ref|| (%)\"\n";
  gp << fmt::format("set multiplot layout 1,{} title \"pav drift: {} ({}, {} seeds): ||delta||/||ref|| against the "
                    "split ceiling (max_partitions); mean over seeds, bars min-max\"\n",
                    panels, escape_gp(s.name), r.backend, s.seeds);
  const char* titles[] = {"kernel reference (dequantized cache)", "end to end (unquantized source)",
                          "positive control (epsilon on each partition's l)"};
  for (int panel = 0; panel < panels; ++panel) {
    gp << fmt::format("set title \"{}\"\n", titles[panel]);
    std::vector<std::string> parts;
    for (size_t i = 0; i < series.size(); ++i)
      if (series[i].panel == panel)
        parts.push_back(fmt::format("\"{}\" index {} using 1:2:3:4 with yerrorlines title \"{}\"", escape_gp(po.data),
                                    i, escape_gp(series[i].title)));
    gp << "plot ";
    for (size_t i = 0; i < parts.size(); ++i) gp << (i ? ", \\\n     " : "") << parts[i];
    gp << "\n";
  }
  gp << "unset multiplot\n";
  gp.close();
  if (term.empty()) return po;
  const std::string cmd = fmt::format("gnuplot \"{}\" 2>&1", escape_gp(po.script));
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (p) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = pclose(p);
    if (rc != 0) {
      po.message = "gnuplot failed: " + out;
      return po;
    }
  }
  if (!fs::exists(png) || fs::file_size(png) == 0) {
    po.message = "gnuplot wrote no " + png.string() + ": " + out;
    return po;
  }
  po.ok = true;
  return po;
}

std::string progress_line(const DriftProgress& p, int width) {
  const double frac = std::clamp(p.total > 0 ? p.done / p.total : 0.0, 0.0, 1.0);
  const int bar = 20, filled = int(frac * bar + 0.5);
  auto clock = [](double s) {
    const int64_t t = int64_t(s + 0.5);
    return t >= 60 ? fmt::format("{}m{:02}s", t / 60, t % 60) : fmt::format("{}s", t);
  };
  std::string eta = frac > 0.02 && frac < 1.0 ? ", ~" + clock(p.elapsed_s * (1.0 - frac) / frac) + " left" : "";
  std::string line = fmt::format("drift [{}{}] {:3.0f}%  {}  {}{}", std::string(filled, '#'),
                                 std::string(bar - filled, '.'), 100.0 * frac, p.what, clock(p.elapsed_s), eta);
  if (int(line.size()) > width) line = line.substr(0, width);
  return "\r" + line + std::string(std::max(0, width - int(line.size())), ' ');
}

}  // namespace pav::props
