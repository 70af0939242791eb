// SPDX-License-Identifier: Apache-2.0
#include "properties/case/case_format.hpp"

#include "common/durable_file.hpp"
#include "common/version.hpp"

#include <fstream>
#include <limits>

#include "input/json_input.hpp"
#include "kernels/limits.hpp"

namespace pav::props {

using nlohmann::json;
using namespace pav::kernels;

namespace {

using input::Array;
using input::Object;

constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
// Ranges of the shape fields: kMaxQLen, kMaxGroup, kMaxHeadDim, kMaxBlockSize
// (kernels/limits.hpp). Memory is bounded separately, before any buffer is
// sized (kMaxCaseHostBytes, checked by build_case).
constexpr int64_t kMaxPadOrSpare = int64_t(1) << 20;
constexpr int kMaxPartitionField = 1 << 20;  // partition_size, uniform_partitions: past the kernel's range on purpose
constexpr double kMaxSoftmaxScale = 1e4;
constexpr double kMaxSoftCap = 1e4;

DType dtype_of(const std::string& name) {
  DType d = DType::none;
  parse_dtype(name, d);
  return d;
}

// A multiple of 16 in 16..hi (the K cache packs 16 elements; blocks hold 16k tokens).
int multiple_of_16(const Object& o, std::string_view key, int hi, int fallback) {
  const int v = o.integer<int>(key, 16, hi, fallback);
  if (v % 16) o.fail(key, "must be a multiple of 16, got " + std::to_string(v));
  return v;
}

void read_options(const Object& o, CaseSpec& s) {
  o.only({"arch", "compute", "partial", "softmax_scale", "cu", "partition_size", "uniform_partitions", "alibi",
          "sinks", "sliding_window", "q_prequantized"});
  parse_arch(o.choice("arch", {"gfx942", "gfx950", "sm90", "gfx90a"}, "sm90"), s.opt.arch);
  const DType arch_flavour = arch_fp8(s.opt.arch) == DType::none ? DType::fp8_e4m3fn : arch_fp8(s.opt.arch);
  // Any element type may be named: the kernels refuse the ones they do not
  // take (the gate names the clause); the host scratch is never sized from one
  // it cannot hold.
  auto any_dtype = [&](std::string_view key, DType fallback) {
    if (!o.has(key)) return fallback;
    return dtype_of(o.choice(key, {"f32", "f16", "bf16", "fp8_e4m3fn", "fp8_e4m3fnuz", "i32", "i64"}));
  };
  s.opt.compute = any_dtype("compute", arch_flavour);
  s.opt.partial = any_dtype("partial", DType::bf16);
  s.softmax_scale = float(o.number("softmax_scale", 0.0, kMaxSoftmaxScale, 0.0));
  s.opt.cu = o.integer<int>("cu", 1, int(kMaxCu), 132);
  s.opt.partition_size = o.integer<int>("partition_size", 1, kMaxPartitionField, kTileTokens);
  s.opt.uniform_partitions = o.integer<int>("uniform_partitions", 0, kMaxPartitionField, 0);
  s.opt.alibi = o.boolean("alibi", false);
  s.opt.sinks = o.boolean("sinks", false);
  s.opt.sliding_window = o.integer<int>("sliding_window", 0, kI32Max, 0);
  s.opt.q_prequantized = o.boolean("q_prequantized", false);
}

// A non-empty list of fp32 values: a value past float's range would become inf.
std::vector<float> floats(const Object& o, std::string_view key) {
  const double fmax = std::numeric_limits<float>::max();
  std::vector<float> out;
  for (double x : o.array(key, 1, std::numeric_limits<size_t>::max()).numbers(-fmax, fmax)) out.push_back(float(x));
  return out;
}

void read_tensors(const Object& t, CaseSpec& s) {
  t.only({"block_tables", "q_bits", "k_codes", "v_codes", "k_scale", "v_scale"});
  // Lengths against the shapes are checked by build_case, which knows them.
  constexpr size_t kAny = std::numeric_limits<size_t>::max();
  if (t.has("block_tables")) s.block_tables = t.array("block_tables", 1, kAny).integers<int32_t>(0, kI32Max);
  if (t.has("q_bits")) s.q_bits = t.array("q_bits", 1, kAny).integers<uint16_t>(0, 0xffff);
  if (t.has("k_codes")) s.k_codes = t.array("k_codes", 1, kAny).integers<uint8_t>(0, 0xff);
  if (t.has("v_codes")) s.v_codes = t.array("v_codes", 1, kAny).integers<uint8_t>(0, 0xff);
  if (t.has("k_scale")) s.k_scale_values = floats(t, "k_scale");
  if (t.has("v_scale")) s.v_scale_values = floats(t, "v_scale");
}

// The attention variant (absent: none). Counts against Hq and finiteness are
// check_case_spec's.
void read_variant(const Object& v, CaseSpec& s) {
  v.only({"window_left", "soft_cap", "sinks", "alibi_slopes"});
  s.window_left = v.integer<int>("window_left", -1, kI32Max, -1);
  s.soft_cap = float(v.number("soft_cap", 0.0, kMaxSoftCap, 0.0));
  if (v.has("sinks")) s.sinks = floats(v, "sinks");
  if (v.has("alibi_slopes")) s.alibi_slopes = floats(v, "alibi_slopes");
}

// The cache format block (absent: packed, separate, unpadded, block tables,
// V's scales of K's kind).
void read_cache(const Object& c, CaseSpec& s) {
  c.only({"layout", "kv", "v_head_dim", "page_pad", "row_pad", "page_table", "v_scales"});
  kernels::parse_cache_layout(c.choice("layout", {"packed", "nhd", "hnd"}, "packed"), s.layout);
  const std::string kv = c.choice("kv", {"separate", "combined", "latent"}, "separate");
  s.kv_combined = kv == "combined";
  // MLA: V is K's first v_head_dim dims (check_case_spec checks it against head_dim).
  if (kv == "latent") s.v_head_dim = c.integer<int>("v_head_dim", 16, kMaxHeadDim);
  else if (c.has("v_head_dim")) c.fail("v_head_dim", "given, but cache.kv is not latent");
  s.page_pad = c.integer<int64_t>("page_pad", 0, kMaxBlockSize * 16, 0);
  s.row_pad = c.integer<int64_t>("row_pad", 0, kMaxHeadDim, 0);
  kernels::parse_page_table(c.choice("page_table", {"block_table", "csr"}, "block_table"), s.page_table);
  if (c.has("v_scales")) {
    ScaleKind k = ScaleKind::none;
    kernels::parse_scale_kind(c.choice("v_scales", {"none", "per_tensor", "per_head", "per_token"}), k);
    s.v_scales = k;
  }
}

// The meta fields pav itself reads back (the fuzz properties' own); the rest
// of meta is free text for people.
void read_meta(const Object& m, const CaseSpec& s) {
  const size_t batch = s.lens.size();
  if (m.has("property")) m.string("property");
  if (m.has("prior_lens")) m.array("prior_lens", batch, batch).integers<int32_t>(kI32Min, kI32Max);
  if (m.has("with_plan")) m.boolean("with_plan");
  if (m.has("violate")) m.string("violate");
  if (m.has("variant")) m.integer<int>("variant", 0, kI32Max);
  if (m.has("seq")) m.integer<int64_t>("seq", 0, int64_t(batch) - 1);
}


}  // namespace

CaseSpec case_from_json(const json& j, const std::string& source) {
  const Object o(j, source);
  o.only({"format", "name", "lens", "q_len", "hkv", "group", "head_dim", "block_size", "v_layout", "q_dtype",
          "cache_dtype", "scales", "options", "path", "max_partitions", "workgroup_budget", "q_row_pad",
          "spare_blocks", "seed", "generator", "sentinels", "variant", "cache", "tensors", "meta", "extreme_logits",
          "low_spare_blocks", "zero_q_head", "constant_q_head", "logit_ties", "null_block", "prelude"});
  const std::string format = o.choice("format", {kCaseFormat, kSequenceCaseFormat}, kCaseFormat);
  if (o.has("name")) o.string("name");
  CaseSpec s;
  s.lens = o.array("lens", 1, size_t(kMaxPlanBatch)).integers<int32_t>(kI32Min, kI32Max);
  s.q_len = o.integer<int>("q_len", 1, kMaxQLen, 1);
  s.hkv = o.integer<int>("hkv", 1, int(kMaxKvHeads), 1);
  s.group = o.integer<int>("group", 1, kMaxGroup, 1);
  s.head_dim = multiple_of_16(o, "head_dim", kMaxHeadDim, 128);
  if (o.has("cache")) read_cache(o.object("cache"), s);
  // Packed caches hold whole groups of 16 tokens; nhd and hnd pages any count.
  s.block_size = s.layout == kernels::CacheLayout::packed ? multiple_of_16(o, "block_size", kMaxBlockSize, 16)
                                                          : o.integer<int>("block_size", 1, kMaxBlockSize, 16);
  s.v_layout = o.choice("v_layout", {"plain", "trans"}, "plain") == "trans" ? VLayout::trans : VLayout::plain;
  // The host buffers hold 16-bit queries and 16- or 8-bit cache elements.
  s.q_dtype = dtype_of(o.choice("q_dtype", {"bf16", "f16"}, "bf16"));
  s.cache_dtype = dtype_of(o.choice("cache_dtype", {"fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2", "bf16", "f16"}, "fp8_e4m3fn"));
  kernels::parse_scale_kind(o.choice("scales", {"none", "per_tensor", "per_head", "per_token"}, "per_tensor"), s.scales);
  if (o.has("options")) read_options(o.object("options"), s);
  else s.opt.compute = DType::fp8_e4m3fn;
  s.path = o.choice("path", {"planned", "uniform"}, "planned") == "planned" ? Path::planned : Path::uniform;
  // 0 = the default (cu, 2 * cu); a ceiling above cu is the call's to have
  // refused (the plan_ceiling clause), not the reader's.
  s.max_partitions = o.integer<int64_t>("max_partitions", 0, kMaxCu, 0);
  s.workgroup_budget = o.integer<int64_t>("workgroup_budget", 0, kMaxWorkgroupBudget, 0);
  s.q_row_pad = o.integer<int64_t>("q_row_pad", 0, kMaxPadOrSpare, 0);
  s.spare_blocks = o.integer<int64_t>("spare_blocks", 1, kMaxPadOrSpare, 1);
  s.low_spare_blocks = o.integer<int64_t>("low_spare_blocks", 0, kernels::kLargeCacheElements, 0);
  s.seed = o.integer<uint64_t>("seed", 0, std::numeric_limits<uint64_t>::max(), 1);
  // A file without the field predates generator 2 and meant the legacy stream.
  s.generator = o.integer<int>("generator", rng::kLegacyGenerator, rng::kGeneratorVersion, rng::kLegacyGenerator);
  s.extreme_logits = o.integer<int>("extreme_logits", -1, 1, 0);
  s.zero_q_head = o.boolean("zero_q_head", false);
  s.constant_q_head = o.boolean("constant_q_head", false);
  s.logit_ties = o.integer<int>("logit_ties", 0, 2, 0);
  s.null_block = o.boolean("null_block", false);
  if (o.has("sentinels")) {
    const Array a = o.array("sentinels", 0, size_t(kMaxPlanBatch));
    for (size_t i = 0; i < a.size(); ++i) {
      const Array e = a.array(i, 2, 2);
      // A token past its sequence's length plants nothing (shrinking cuts lengths).
      s.sentinels.push_back({e.integer<int64_t>(0, 0, int64_t(s.lens.size()) - 1), e.integer<int64_t>(1, 0, kI32Max)});
    }
  }
  if (o.has("variant")) read_variant(o.object("variant"), s);
  if (o.has("tensors")) read_tensors(o.object("tensors"), s);
  if (o.has("meta")) read_meta(o.object("meta"), s);
  if (o.has("prelude")) {
    if (format != kSequenceCaseFormat)
      o.fail("prelude", std::string("earlier calls need \"format\": \"") + kSequenceCaseFormat + "\"");
    const Array a = o.array("prelude", 1, size_t(kMaxPrelude));
    for (size_t i = 0; i < a.size(); ++i) {
      const Object call = a.object(i);
      if (call.has("prelude")) call.fail("prelude", "an earlier call has no prelude of its own");
      PriorCall c;
      c.spec = case_from_json(a[i], source + ": " + a.path(i));
      if (call.has("meta")) c.meta = call.object("meta").value();
      s.prelude.push_back(std::move(c));
    }
  }
  // Inline tensors against the shapes, scales against their kind. Memory is
  // the caller's to check: a planner case names lengths no buffer is built for.
  try {
    check_case_spec(s, /*check_memory=*/false);
  } catch (const std::invalid_argument& e) {
    throw CaseError(source + ": " + e.what());
  }
  return s;
}

json case_to_json(const CaseSpec& s, const json& meta) {
  json j;
  j["format"] = s.prelude.empty() ? kCaseFormat : kSequenceCaseFormat;
  j["lens"] = s.lens;
  j["q_len"] = s.q_len;
  j["hkv"] = s.hkv;
  j["group"] = s.group;
  j["head_dim"] = s.head_dim;
  j["block_size"] = s.block_size;
  if (s.extreme_logits != 0) j["extreme_logits"] = s.extreme_logits;
  if (s.zero_q_head) j["zero_q_head"] = true;
  if (s.constant_q_head) j["constant_q_head"] = true;
  if (s.logit_ties != 0) j["logit_ties"] = s.logit_ties;
  if (s.null_block) j["null_block"] = true;
  j["v_layout"] = s.v_layout == VLayout::trans ? "trans" : "plain";
  j["q_dtype"] = std::string(to_string(s.q_dtype));
  j["cache_dtype"] = std::string(to_string(s.cache_dtype));
  j["scales"] = std::string(to_string(s.scales));
  json cache = json::object();
  if (s.layout != kernels::CacheLayout::packed) cache["layout"] = std::string(to_string(s.layout));
  if (s.kv_combined) cache["kv"] = "combined";
  if (s.v_head_dim > 0) {
    cache["kv"] = "latent";
    cache["v_head_dim"] = s.v_head_dim;
  }
  if (s.page_pad != 0) cache["page_pad"] = s.page_pad;
  if (s.row_pad != 0) cache["row_pad"] = s.row_pad;
  if (s.page_table != kernels::PageTable::block_table) cache["page_table"] = std::string(to_string(s.page_table));
  if (s.v_scales) cache["v_scales"] = std::string(to_string(*s.v_scales));
  if (!cache.empty()) j["cache"] = cache;
  json o;
  o["arch"] = std::string(to_string(s.opt.arch));
  o["compute"] = std::string(to_string(s.opt.compute));
  o["partial"] = std::string(to_string(s.opt.partial));
  o["softmax_scale"] = s.softmax_scale;
  o["cu"] = s.opt.cu;
  o["partition_size"] = s.opt.partition_size;
  o["uniform_partitions"] = s.opt.uniform_partitions;
  o["alibi"] = s.opt.alibi;
  o["sinks"] = s.opt.sinks;
  o["sliding_window"] = s.opt.sliding_window;
  o["q_prequantized"] = s.opt.q_prequantized;
  j["options"] = o;
  j["path"] = s.path == Path::planned ? "planned" : "uniform";
  j["max_partitions"] = s.max_partitions;
  j["workgroup_budget"] = s.workgroup_budget;
  j["q_row_pad"] = s.q_row_pad;
  j["spare_blocks"] = s.spare_blocks;
  if (s.low_spare_blocks != 0) j["low_spare_blocks"] = s.low_spare_blocks;
  j["seed"] = s.seed;
  j["generator"] = s.generator;
  json sent = json::array();
  for (const auto& x : s.sentinels) sent.push_back({x.seq, x.token});
  j["sentinels"] = sent;
  json v = json::object();
  if (s.window_left >= 0) v["window_left"] = s.window_left;
  if (s.soft_cap != 0.0f) v["soft_cap"] = s.soft_cap;
  if (s.sinks) v["sinks"] = *s.sinks;
  if (s.alibi_slopes) v["alibi_slopes"] = *s.alibi_slopes;
  if (!v.empty()) j["variant"] = v;
  json t = json::object();
  if (s.block_tables) t["block_tables"] = *s.block_tables;
  if (s.q_bits) t["q_bits"] = *s.q_bits;
  if (s.k_codes) t["k_codes"] = *s.k_codes;
  if (s.v_codes) t["v_codes"] = *s.v_codes;
  if (s.k_scale_values) t["k_scale"] = *s.k_scale_values;
  if (s.v_scale_values) t["v_scale"] = *s.v_scale_values;
  if (!t.empty()) j["tensors"] = t;
  if (!s.prelude.empty()) {
    json calls = json::array();
    for (const PriorCall& c : s.prelude) calls.push_back(case_to_json(c.spec, c.meta));
    j["prelude"] = std::move(calls);
  }
  if (!meta.empty()) j["meta"] = meta;
  return j;
}

std::string case_kernel_spec(const json& meta) {
  if (!meta.is_object()) return {};
  const Object m(meta, "case", "meta");
  return m.given("kernel") ? m.object("kernel").string("spec") : std::string();
}

std::string case_property(const json& meta) {
  if (!meta.is_object()) return {};
  return Object(meta, "case", "meta").string("property", std::string());
}

CaseSpec load_case_spec(const std::string& path, json* meta_out) {
  const json j = input::read_json_file(path);
  CaseSpec s = case_from_json(j, path);
  if (meta_out) *meta_out = j.contains("meta") ? j["meta"] : json::object();
  return s;
}

void save_case(const std::string& path, const CaseSpec& spec, const json& meta) {
  json stamped = meta.is_object() ? meta : json::object();
  stamped["pav_version"] = pav::version();
  stamped["source_commit"] = pav::source_commit();
  write_file_atomically(path, case_to_json(spec, stamped).dump(2) + "\n");
}

HostCase load_case(const std::string& path) {
  CaseSpec s = load_case_spec(path);
  try {
    return build_case(s);
  } catch (const CaseError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw CaseError(path + ": " + e.what());
  }
}

}  // namespace pav::props
