#include "properties/case_format.hpp"

#include "common/durable_file.hpp"
#include "common/version.hpp"

#include <fstream>
#include <limits>
#include <sstream>

namespace pav::props {

using nlohmann::json;
using namespace pav::kernels;

namespace {

[[noreturn]] void fail(const std::string& field, const std::string& why) {
  throw CaseError(field + ": " + why);
}

std::string type_name(const json& v) { return v.type_name(); }

template <class T>
T get_int(const json& j, const std::string& field, T lo, T hi, T dflt, bool required = false) {
  if (!j.contains(field)) {
    if (required) fail(field, "missing");
    return dflt;
  }
  const json& v = j.at(field);
  if (!v.is_number_integer()) fail(field, "expected an integer, got " + type_name(v) + " " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < int64_t(lo) || x > int64_t(hi))
    fail(field, "value " + std::to_string(x) + " outside " + std::to_string(lo) + ".." + std::to_string(hi));
  return T(x);
}

bool get_bool(const json& j, const std::string& field, bool dflt) {
  if (!j.contains(field)) return dflt;
  if (!j.at(field).is_boolean()) fail(field, "expected true or false, got " + j.at(field).dump());
  return j.at(field).get<bool>();
}

float get_float(const json& j, const std::string& field, float dflt) {
  if (!j.contains(field)) return dflt;
  if (!j.at(field).is_number()) fail(field, "expected a number, got " + j.at(field).dump());
  return j.at(field).get<float>();
}

std::string get_string(const json& j, const std::string& field, const std::string& dflt) {
  if (!j.contains(field)) return dflt;
  if (!j.at(field).is_string()) fail(field, "expected a string, got " + j.at(field).dump());
  return j.at(field).get<std::string>();
}

DType get_dtype(const json& j, const std::string& field, DType dflt, const std::string& prefix = "") {
  if (!j.contains(field)) return dflt;
  const std::string s = get_string(j, field, "");
  DType d;
  if (!parse_dtype(s, d)) fail(prefix + field, "unknown dtype '" + s + "' (f32, f16, bf16, fp8_e4m3fn, fp8_e4m3fnuz, i32, i64)");
  return d;
}

template <class T>
std::vector<T> get_array(const json& j, const std::string& field, T lo, T hi) {
  const json& v = j.at(field);
  if (!v.is_array()) fail(field, "expected an array, got " + type_name(v));
  std::vector<T> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if constexpr (std::is_floating_point_v<T>) {
      if (!e.is_number()) fail(at, "expected a number, got " + e.dump());
      out.push_back(e.get<T>());
    } else {
      if (!e.is_number_integer()) fail(at, "expected an integer, got " + e.dump());
      const int64_t x = e.get<int64_t>();
      if (x < int64_t(lo) || x > int64_t(hi))
        fail(at, "value " + std::to_string(x) + " outside " + std::to_string(int64_t(lo)) + ".." + std::to_string(int64_t(hi)));
      out.push_back(T(x));
    }
  }
  return out;
}

const char* scale_name(ScaleKind k) {
  return k == ScaleKind::none ? "none" : k == ScaleKind::per_tensor ? "per_tensor" : "per_token";
}

}  // namespace

CaseSpec case_from_json(const json& j) {
  if (!j.is_object()) fail("(top level)", "expected a JSON object");
  static const char* kKnown[] = {"format", "name", "lens", "q_len", "hkv", "group", "head_dim", "block_size",
                                 "v_layout", "q_dtype", "cache_dtype", "scales", "options", "path",
                                 "max_partitions", "workgroup_budget", "q_row_pad", "spare_blocks", "seed",
                                 "sentinels", "tensors", "meta"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : kKnown) ok |= it.key() == k;
    if (!ok) fail(it.key(), "unknown field");
  }
  const std::string fmt = get_string(j, "format", kCaseFormat);
  if (fmt != kCaseFormat) fail("format", "expected '" + std::string(kCaseFormat) + "', got '" + fmt + "'");
  CaseSpec s;
  if (!j.contains("lens")) fail("lens", "missing");
  s.lens = get_array<int32_t>(j, "lens", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
  if (s.lens.empty() || s.lens.size() > size_t(kMaxPlanBatch)) fail("lens", "needs 1..4096 entries, got " + std::to_string(s.lens.size()));
  s.q_len = get_int<int>(j, "q_len", 1, 16, 1);
  s.hkv = get_int<int>(j, "hkv", 1, 128, 1);
  s.group = get_int<int>(j, "group", 1, 128, 1);
  s.head_dim = get_int<int>(j, "head_dim", 16, 4096, 128);
  s.block_size = get_int<int>(j, "block_size", 16, 4096, 16);
  const std::string vl = get_string(j, "v_layout", "plain");
  if (vl == "plain") s.v_layout = VLayout::plain;
  else if (vl == "trans") s.v_layout = VLayout::trans;
  else fail("v_layout", "expected 'plain' or 'trans', got '" + vl + "'");
  s.q_dtype = get_dtype(j, "q_dtype", DType::bf16);
  s.cache_dtype = get_dtype(j, "cache_dtype", DType::fp8_e4m3fn);
  const std::string sc = get_string(j, "scales", "per_tensor");
  if (sc == "none") s.scales = ScaleKind::none;
  else if (sc == "per_tensor") s.scales = ScaleKind::per_tensor;
  else if (sc == "per_token") s.scales = ScaleKind::per_token;
  else fail("scales", "expected 'none', 'per_tensor' or 'per_token', got '" + sc + "'");
  if (j.contains("options")) {
    const json& o = j.at("options");
    if (!o.is_object()) fail("options", "expected an object");
    try {
      const std::string arch = get_string(o, "arch", "sm90");
      if (!parse_arch(arch, s.opt.arch)) fail("arch", "unknown arch '" + arch + "' (gfx942, gfx950, sm90, gfx90a)");
      s.opt.compute = get_dtype(o, "compute", arch_fp8(s.opt.arch) == DType::none ? DType::fp8_e4m3fn : arch_fp8(s.opt.arch));
      s.opt.partial = get_dtype(o, "partial", DType::bf16);
      s.opt.softmax_scale = get_float(o, "softmax_scale", 0.0f);
      s.opt.cu = get_int<int>(o, "cu", 1, 4096, 132);
      s.opt.partition_size = get_int<int>(o, "partition_size", 1, 1 << 20, kTileTokens);
      s.opt.uniform_partitions = get_int<int>(o, "uniform_partitions", 0, 1 << 20, 0);
      s.opt.alibi = get_bool(o, "alibi", false);
      s.opt.sinks = get_bool(o, "sinks", false);
      s.opt.sliding_window = get_int<int>(o, "sliding_window", 0, std::numeric_limits<int>::max(), 0);
      s.opt.q_prequantized = get_bool(o, "q_prequantized", false);
    } catch (const CaseError& e) {
      throw CaseError(std::string("options.") + e.what());
    }
  } else {
    s.opt.compute = DType::fp8_e4m3fn;
  }
  const std::string path = get_string(j, "path", "planned");
  if (path == "planned") s.path = Path::planned;
  else if (path == "uniform") s.path = Path::uniform;
  else fail("path", "expected 'planned' or 'uniform', got '" + path + "'");
  s.max_partitions = get_int<int64_t>(j, "max_partitions", 0, 1 << 20, 0);
  s.workgroup_budget = get_int<int64_t>(j, "workgroup_budget", 0, 1 << 24, 0);
  s.q_row_pad = get_int<int64_t>(j, "q_row_pad", 0, 1 << 20, 0);
  s.spare_blocks = get_int<int64_t>(j, "spare_blocks", 1, 1 << 20, 1);
  if (j.contains("seed")) {
    const json& v = j.at("seed");
    if (!v.is_number_unsigned() && !v.is_number_integer()) fail("seed", "expected a non-negative integer, got " + v.dump());
    s.seed = v.get<uint64_t>();
  }
  if (j.contains("sentinels")) {
    const json& v = j.at("sentinels");
    if (!v.is_array()) fail("sentinels", "expected an array of [seq, token]");
    for (size_t i = 0; i < v.size(); ++i) {
      const json& e = v[i];
      if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number_integer())
        fail("sentinels[" + std::to_string(i) + "]", "expected [seq, token], got " + e.dump());
      s.sentinels.push_back({e[0].get<int64_t>(), e[1].get<int64_t>()});
    }
  }
  if (j.contains("tensors")) {
    const json& t = j.at("tensors");
    if (!t.is_object()) fail("tensors", "expected an object");
    try {
      for (auto it = t.begin(); it != t.end(); ++it) {
        const std::string& k = it.key();
        if (k == "block_tables") s.block_tables = get_array<int32_t>(t, k, 0, std::numeric_limits<int32_t>::max());
        else if (k == "q_bits") s.q_bits = get_array<uint16_t>(t, k, 0, 0xffff);
        else if (k == "k_codes") s.k_codes = get_array<uint8_t>(t, k, 0, 255);
        else if (k == "v_codes") s.v_codes = get_array<uint8_t>(t, k, 0, 255);
        else if (k == "k_scale") s.k_scale_values = get_array<float>(t, k, 0, 0);
        else if (k == "v_scale") s.v_scale_values = get_array<float>(t, k, 0, 0);
        else fail(k, "unknown tensor (block_tables, q_bits, k_codes, v_codes, k_scale, v_scale)");
      }
    } catch (const CaseError& e) {
      throw CaseError(std::string("tensors.") + e.what());
    }
  }
  return s;
}

json case_to_json(const CaseSpec& s, const json& meta) {
  json j;
  j["format"] = kCaseFormat;
  j["lens"] = s.lens;
  j["q_len"] = s.q_len;
  j["hkv"] = s.hkv;
  j["group"] = s.group;
  j["head_dim"] = s.head_dim;
  j["block_size"] = s.block_size;
  j["v_layout"] = s.v_layout == VLayout::trans ? "trans" : "plain";
  j["q_dtype"] = std::string(to_string(s.q_dtype));
  j["cache_dtype"] = std::string(to_string(s.cache_dtype));
  j["scales"] = scale_name(s.scales);
  json o;
  o["arch"] = std::string(to_string(s.opt.arch));
  o["compute"] = std::string(to_string(s.opt.compute));
  o["partial"] = std::string(to_string(s.opt.partial));
  o["softmax_scale"] = s.opt.softmax_scale;
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
  j["seed"] = s.seed;
  json sent = json::array();
  for (const auto& x : s.sentinels) sent.push_back({x.seq, x.token});
  j["sentinels"] = sent;
  json t = json::object();
  if (s.block_tables) t["block_tables"] = *s.block_tables;
  if (s.q_bits) t["q_bits"] = *s.q_bits;
  if (s.k_codes) t["k_codes"] = *s.k_codes;
  if (s.v_codes) t["v_codes"] = *s.v_codes;
  if (s.k_scale_values) t["k_scale"] = *s.k_scale_values;
  if (s.v_scale_values) t["v_scale"] = *s.v_scale_values;
  if (!t.empty()) j["tensors"] = t;
  if (!meta.empty()) j["meta"] = meta;
  return j;
}

CaseSpec load_case_spec(const std::string& path, json* meta_out) {
  std::ifstream in(path);
  if (!in) throw CaseError(path + ": cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw CaseError(path + ": not valid JSON: " + e.what());
  }
  try {
    CaseSpec s = case_from_json(j);
    if (meta_out) *meta_out = j.value("meta", json::object());
    return s;
  } catch (const CaseError& e) {
    throw CaseError(path + ": " + e.what());
  }
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
  } catch (const std::invalid_argument& e) {
    throw CaseError(path + ": " + e.what());
  }
}

}  // namespace pav::props
