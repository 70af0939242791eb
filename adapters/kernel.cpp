// SPDX-License-Identifier: Apache-2.0
#include "adapters/kernel.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "common/utf8_text.hpp"
#include "input/json_input.hpp"
#include "kernels/limits.hpp"
#include "kernels/validate.hpp"


namespace pav::adapters {

using kernels::DType;
using kernels::TensorView;
using kernels::VLayout;
using nlohmann::json;

std::string_view to_string(Memory m) { return m == Memory::host ? "host" : "device"; }
std::string_view to_string(Split s) { return s == Split::self ? "self" : "plan"; }
std::string_view to_string(KvStorage s) {
  return s == KvStorage::separate ? "separate" : s == KvStorage::combined ? "combined" : "latent";
}
std::string_view to_string(VLayout l) {
  return l == VLayout::plain ? "plain" : l == VLayout::trans ? "trans" : "unknown";
}
std::string_view to_string(Feature f) {
  switch (f) {
    case Feature::window: return "window";
    case Feature::soft_cap: return "soft_cap";
    case Feature::sinks: return "sinks";
    case Feature::alibi: return "alibi";
  }
  return "?";
}
std::string_view to_string(LseBase b) { return b == LseBase::e ? "e" : "2"; }
bool KernelDescription::declares(Feature f) const {
  return std::find(features.begin(), features.end(), f) != features.end();
}
std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::ok: return "ok";
    case Outcome::rejected: return "rejected";
    case Outcome::stale_plan: return "stale_plan";
    case Outcome::kernel_error: return "kernel_error";
    case Outcome::fault: return "fault";
  }
  return "?";
}

namespace {

template <class T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

template <class T>
std::string list_text(const std::vector<T>& v) {
  std::string s;
  for (const T& x : v) s += (s.empty() ? "" : ",") + std::string(to_string(x));
  return s.empty() ? "-" : s;
}

// Sizes with runs of a constant step written "a..b" (step 1) or "a..b/step".
std::string list_text(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i + 1;
    const int64_t step = j < v.size() ? v[j] - v[i] : 0;
    while (j < v.size() && step > 0 && v[j] - v[j - 1] == step) ++j;
    if (!s.empty()) s += ",";
    if (j - i >= 3) {
      s += fmt::format("{}..{}", v[i], v[j - 1]) + (step == 1 ? std::string() : fmt::format("/{}", step));
      i = j;
    } else {
      s += std::to_string(v[i]);
      ++i;
    }
  }
  return s.empty() ? "-" : s;
}

std::string list_text(const std::vector<DType>& v) {
  std::string s;
  for (DType x : v) s += (s.empty() ? "" : ",") + std::string(kernels::to_string(x));
  return s.empty() ? "-" : s;
}

}  // namespace

void canonicalize(KernelDescription& d) {
  auto sort = [](auto& v) { std::sort(v.begin(), v.end()); };
  sort(d.q_dtypes);
  sort(d.cache_dtypes);
  sort(d.v_layouts);
  sort(d.cache_layouts);
  sort(d.kv_storage);
  sort(d.mla_dims);
  sort(d.page_tables);
  sort(d.scale_kinds);
  sort(d.block_sizes);
  sort(d.head_dims);
  sort(d.gqa_ratios);
  sort(d.features);
}

std::string description_problem(const KernelDescription& d) {
  auto unique = [](auto v) {
    std::sort(v.begin(), v.end());
    return std::adjacent_find(v.begin(), v.end()) == v.end();
  };
  if (d.name.empty()) return "name: empty";
  if (int64_t(d.name.size()) > kernels::kMaxKernelNameBytes)
    return fmt::format("name: {} bytes, more than {}", d.name.size(), kernels::kMaxKernelNameBytes);
  if (int64_t(d.version.size()) > kernels::kMaxKernelNameBytes)
    return fmt::format("version: {} bytes, more than {}", d.version.size(), kernels::kMaxKernelNameBytes);
  if (d.q_dtypes.empty()) return "q_dtypes: empty (name bf16 and/or f16)";
  for (DType t : d.q_dtypes)
    if (t != DType::bf16 && t != DType::f16)
      return fmt::format("q_dtypes: {} is not a query dtype (bf16, f16)", kernels::to_string(t));
  if (d.out_dtype != DType::none && d.out_dtype != DType::f32 && d.out_dtype != DType::bf16 &&
      d.out_dtype != DType::f16)
    return fmt::format("out_dtype: {} (expected same, f32, bf16 or f16)", kernels::to_string(d.out_dtype));
  if (d.cache_dtypes.empty()) return "cache_dtypes: empty (name bf16, f16, fp8_e4m3fn, fp8_e4m3fnuz and/or fp8_e5m2)";
  for (DType t : d.cache_dtypes)
    if (!kernels::is_cache_dtype(t))
      return fmt::format("cache_dtypes: {} is not a cache dtype (bf16, f16, fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2)",
                         kernels::to_string(t));
  if (d.cache_layouts.empty()) return "cache_layouts: empty (name packed, nhd and/or hnd)";
  if (d.kv_storage.empty()) return "kv_storage: empty (name separate, combined and/or latent)";
  if (d.page_tables.empty()) return "page_tables: empty (name block_table and/or csr)";
  const bool packed = contains(d.cache_layouts, kernels::CacheLayout::packed);
  if (packed && d.v_layouts.empty()) return "v_layouts: empty (the packed layout needs plain and/or trans)";
  if (!packed && !d.v_layouts.empty()) return "v_layouts: given, but the kernel reads no packed cache";
  for (VLayout l : d.v_layouts)
    if (l == VLayout::unknown) return "v_layouts: unknown layout";
  if (contains(d.kv_storage, KvStorage::combined) && d.cache_layouts == std::vector{kernels::CacheLayout::packed})
    return "kv_storage: combined is for the nhd and hnd layouts, and the kernel reads packed caches only";
  if (!contains(d.kv_storage, KvStorage::separate) && packed)
    return "kv_storage: the packed layout keeps K and V separate; name separate too";
  // MLA: latent storage and its (latent, rope) pairs come together, each pair
  // a q/K head dim the kernel lists.
  const bool latent = contains(d.kv_storage, KvStorage::latent);
  if (latent && d.cache_layouts == std::vector{kernels::CacheLayout::packed})
    return "kv_storage: latent (MLA) is for the nhd and hnd layouts, and the kernel reads packed caches only";
  if (latent && d.mla_dims.empty()) return "mla_dims: empty, but kv_storage names latent (list [latent, rope] pairs)";
  if (!latent && !d.mla_dims.empty()) return "mla_dims: given, but kv_storage does not name latent";
  for (const MlaDims& m : d.mla_dims) {
    if (m.latent < 16 || m.latent % 16 != 0 || m.rope < 16 || m.rope % 16 != 0)
      return fmt::format("mla_dims: [{}, {}]: latent and rope must be multiples of 16, each at least 16", m.latent, m.rope);
    if (!contains(d.head_dims, m.latent + m.rope))
      return fmt::format("mla_dims: [{}, {}]: head_dims must list its q and K head dim {}", m.latent, m.rope,
                         m.latent + m.rope);
  }
  if (d.scale_kinds.empty()) return "scale_kinds: empty (name none, per_tensor, per_head and/or per_token)";
  if (d.block_sizes.empty()) return "block_sizes: empty";
  if (packed && std::none_of(d.block_sizes.begin(), d.block_sizes.end(), [](int64_t b) { return b % 16 == 0; }))
    return "block_sizes: the packed layout needs a multiple of 16, none is listed";
  // The limits of a case file (kernels/limits.hpp): a case pav saves must replay.
  for (int64_t b : d.block_sizes)
    if (b < 1 || b > kernels::kMaxBlockSize)
      return fmt::format("block_sizes: {} outside 1..{} (the most a case file holds)", b, kernels::kMaxBlockSize);
  if (d.head_dims.empty()) return "head_dims: empty";
  for (int64_t h : d.head_dims)
    if (h < 16 || h % 16 != 0 || h > kernels::kMaxHeadDim)
      return fmt::format("head_dims: {} is not a multiple of 16 in 16..{}", h, kernels::kMaxHeadDim);
  if (d.gqa_ratios.empty()) return "gqa_ratios: empty";
  for (int64_t g : d.gqa_ratios)
    if (g < 1 || g > kernels::kMaxGroup)
      return fmt::format("gqa_ratios: {} outside 1..{} (the most a case file holds)", g, kernels::kMaxGroup);
  if (!unique(d.block_sizes)) return "block_sizes: a value is listed twice";
  if (!unique(d.head_dims)) return "head_dims: a value is listed twice";
  if (!unique(d.gqa_ratios)) return "gqa_ratios: a value is listed twice";
  if (!unique(d.features)) return "variants: a value is listed twice";
  if (!unique(d.cache_dtypes)) return "cache_dtypes: a value is listed twice";
  if (!unique(d.cache_layouts)) return "cache_layouts: a value is listed twice";
  if (!unique(d.kv_storage)) return "kv_storage: a value is listed twice";
  if (!unique(d.mla_dims)) return "mla_dims: a pair is listed twice";
  if (!unique(d.page_tables)) return "page_tables: a value is listed twice";
  if (!unique(d.scale_kinds)) return "scale_kinds: a value is listed twice";
  if (d.lse_base != LseBase::e && !d.writes_lse) return "lse_base: given, but the kernel writes no lse";
  if (d.min_q_len < 1) return fmt::format("q_len: minimum {} < 1", d.min_q_len);
  if (d.min_q_len > kernels::kMaxQLen)
    return fmt::format("q_len: minimum {} > {}, the most a case file holds (pav generates q_len up to {})", d.min_q_len,
                       kernels::kMaxQLen, kernels::kMaxQLen);
  if (d.max_q_len < d.min_q_len) return fmt::format("q_len: maximum {} < minimum {}", d.max_q_len, d.min_q_len);
  if (d.max_num_seqs < 0) return "max_num_seqs: negative";
  if (d.max_kv_heads < 0) return "max_kv_heads: negative";
  if (d.max_context_len < 0) return "max_context_len: negative";
  if (d.max_split_ceiling < 0) return "max_split_ceiling: negative";
  if (kernels::profile_error(d.profile.numerics()))
    return fmt::format("profile.partial: {} (expected f32, bf16, f16, fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2 or none)",
                       kernels::to_string(d.profile.partial));
  // fp8 rounding of Q or P is to the cache's e4m3 flavour: every cache dtype must have one.
  if (d.profile.q_quant == QQuant::fp8_per_row || d.profile.p_round == PRound::fp8_running_max ||
      d.profile.p_round == PRound::fp8)
    for (DType t : d.cache_dtypes)
      if (!kernels::is_fp8(t))
        return fmt::format("profile: q_quant {} / p_round {} round to the cache's e4m3 flavour, but cache_dtypes holds {}",
                           kernels::to_string(d.profile.q_quant), kernels::to_string(d.profile.p_round),
                           kernels::to_string(t));
  return {};
}

// ---- JSON ------------------------------------------------------------------------

namespace {

// A value of a worker's description quoted in a message: compact, at most 80
// bytes of valid UTF-8.
std::string quoted(const json& v) {
  return utf8_clean(v.dump(-1, ' ', false, json::error_handler_t::replace), 80);
}

template <class E>
E parse_name(const json& v, const std::string& field, std::initializer_list<E> values) {
  if (!v.is_string()) throw KernelSpecError(field + ": expected a name string, got " + quoted(v));
  const std::string s = v.get<std::string>();
  std::string known;
  for (E e : values) {
    if (to_string(e) == s) return e;
    known += (known.empty() ? "" : ", ") + std::string(to_string(e));
  }
  throw KernelSpecError(field + ": unknown value '" + utf8_clean(s, 80) + "' (expected one of " + known + ")");
}

DType parse_dtype_name(const json& v, const std::string& field) {
  DType t;
  if (!v.is_string() || !kernels::parse_dtype(v.get<std::string>(), t) || t == DType::none)
    throw KernelSpecError(field + ": unknown dtype " + quoted(v));
  return t;
}

const json& array_field(const json& j, const std::string& name) {
  const json& v = j.at(name);
  if (!v.is_array()) throw KernelSpecError(name + ": expected a list, got " + quoted(v));
  return v;
}

// The integer rule every reader shares (input/): a real or a value past
// int64 is refused by name, never wrapped.
int64_t int_field(const json& v, const std::string& name) {
  try {
    return input::integer_value<int64_t>(v, name, std::numeric_limits<int64_t>::min(),
                                         std::numeric_limits<int64_t>::max());
  } catch (const input::InputError& e) {
    throw KernelSpecError(e.what());
  }
}

bool bool_field(const json& v, const std::string& name) {
  if (!v.is_boolean()) throw KernelSpecError(name + ": expected true or false, got " + quoted(v));
  return v.get<bool>();
}

std::string string_field(const json& v, const std::string& name) {
  if (!v.is_string()) throw KernelSpecError(name + ": expected a string, got " + quoted(v));
  return v.get<std::string>();
}

}  // namespace

json to_json(const KernelDescription& d) {
  json j;
  j["name"] = d.name;
  j["version"] = d.version;
  j["memory"] = to_string(d.memory);
  for (DType t : d.q_dtypes) j["q_dtypes"].push_back(kernels::to_string(t));
  j["out_dtype"] = d.out_dtype == DType::none ? std::string("same") : std::string(kernels::to_string(d.out_dtype));
  for (DType t : d.cache_dtypes) j["cache_dtypes"].push_back(kernels::to_string(t));
  j["cache_layouts"] = json::array();
  for (kernels::CacheLayout l : d.cache_layouts) j["cache_layouts"].push_back(to_string(l));
  j["v_layouts"] = json::array();
  for (VLayout l : d.v_layouts) j["v_layouts"].push_back(to_string(l));
  j["kv_storage"] = json::array();
  for (KvStorage k : d.kv_storage) j["kv_storage"].push_back(to_string(k));
  if (!d.mla_dims.empty()) {
    j["mla_dims"] = json::array();
    for (const MlaDims& m : d.mla_dims) j["mla_dims"].push_back({m.latent, m.rope});
  }
  j["page_tables"] = json::array();
  for (kernels::PageTable p : d.page_tables) j["page_tables"].push_back(to_string(p));
  j["strided_cache"] = d.strided_cache;
  if (d.large_cache) j["large_cache"] = true;
  if (d.scratch) j["scratch"] = true;
  if (d.compiles_per_shape) j["compiles_per_shape"] = true;
  for (Scales s : d.scale_kinds) j["scale_kinds"].push_back(to_string(s));
  j["mixed_scales"] = d.mixed_scales;
  j["block_sizes"] = d.block_sizes;
  j["head_dims"] = d.head_dims;
  j["gqa_ratios"] = d.gqa_ratios;
  j["q_len"] = {d.min_q_len, d.max_q_len};
  j["max_num_seqs"] = d.max_num_seqs;
  j["max_kv_heads"] = d.max_kv_heads;
  j["max_context_len"] = d.max_context_len;
  j["strided_q"] = d.strided_q;
  j["split"] = to_string(d.split);
  j["split_ceiling"] = d.split_ceiling;
  j["max_split_ceiling"] = d.max_split_ceiling;
  j["writes_lse"] = d.writes_lse;
  j["lse_base"] = to_string(d.lse_base);
  j["variants"] = json::array();
  for (Feature f : d.features) j["variants"].push_back(to_string(f));
  j["thread_safe"] = d.thread_safe;
  j["check"] = d.has_check;
  j["profile"] = {{"q_quant", kernels::to_string(d.profile.q_quant)},
                  {"p_round", kernels::to_string(d.profile.p_round)},
                  {"partial", d.profile.partial == DType::none ? std::string("none")
                                                               : std::string(kernels::to_string(d.profile.partial))}};
  return j;
}

namespace {

// A description's value for people: lists as "[64, 128]", a long one by its
// ends and its count.
std::string value_text(const json& v) {
  if (!v.is_array()) return utf8_clean(v.dump(-1, ' ', false, json::error_handler_t::replace), 120);
  std::vector<std::string> items;
  for (const json& x : v) items.push_back(value_text(x));
  if (items.size() > 8)
    return fmt::format("[{}, ..., {}] ({} values)", fmt::join(items.begin(), items.begin() + 4, ", "), items.back(),
                       items.size());
  return fmt::format("[{}]", fmt::join(items, ", "));
}

void add_changes(const json& before, const json& after, const std::string& prefix, std::vector<std::string>& out) {
  std::set<std::string> keys;
  for (const auto& [k, v] : before.items()) keys.insert(k);
  for (const auto& [k, v] : after.items()) keys.insert(k);
  for (const std::string& k : keys) {
    const json none = "(absent)";
    const json& a = before.contains(k) ? before.at(k) : none;
    const json& b = after.contains(k) ? after.at(k) : none;
    if (a == b) continue;
    if (a.is_object() && b.is_object()) add_changes(a, b, prefix + k + ".", out);
    else out.push_back(fmt::format("{}{} {} -> {}", prefix, k, value_text(a), value_text(b)));
  }
}

}  // namespace

std::string description_change(const KernelDescription& before, const KernelDescription& after) {
  std::vector<std::string> changes;
  add_changes(to_json(before), to_json(after), "", changes);
  return fmt::format("{}", fmt::join(changes, "; "));
}

KernelDescription description_from_json(const json& j) {
  if (!j.is_object()) throw KernelSpecError("description: expected a JSON object, got " + quoted(j));
  static const std::set<std::string> known = {
      "name",         "version",        "memory",          "q_dtypes",   "out_dtype",         "cache_dtypes",
      "v_layouts",    "scale_kinds",    "block_sizes",     "head_dims",  "gqa_ratios",        "q_len",
      "max_num_seqs", "max_kv_heads",   "max_context_len", "strided_q",  "split",             "split_ceiling",
      "max_split_ceiling", "writes_lse", "thread_safe",    "check",      "profile",           "lse_base",
      "variants",     "cache_layouts",  "kv_storage",      "page_tables", "strided_cache",    "mixed_scales",
      "mla_dims",     "large_cache",    "scratch",         "compiles_per_shape"};
  // v_layouts is required while the kernel reads packed caches (cache_layouts absent means packed).
  static const std::set<std::string> required = {"name",        "q_dtypes",    "cache_dtypes", "scale_kinds",
                                                 "block_sizes", "head_dims",   "gqa_ratios",   "q_len",
                                                 "profile"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) throw KernelSpecError("description: unknown field '" + utf8_clean(k, 80) + "'");
  for (const std::string& k : required)
    if (!j.contains(k)) throw KernelSpecError("description: missing field '" + k + "'");
  KernelDescription d;
  d.name = string_field(j.at("name"), "name");
  if (j.contains("version")) d.version = string_field(j.at("version"), "version");
  if (j.contains("memory")) d.memory = parse_name<Memory>(j.at("memory"), "memory", {Memory::host, Memory::device});
  for (const json& v : array_field(j, "q_dtypes")) d.q_dtypes.push_back(parse_dtype_name(v, "q_dtypes"));
  if (j.contains("out_dtype")) {
    const json& v = j.at("out_dtype");
    d.out_dtype = v == "same" ? DType::none : parse_dtype_name(v, "out_dtype");
  }
  for (const json& v : array_field(j, "cache_dtypes")) d.cache_dtypes.push_back(parse_dtype_name(v, "cache_dtypes"));
  if (j.contains("cache_layouts")) {
    d.cache_layouts.clear();
    for (const json& v : array_field(j, "cache_layouts"))
      d.cache_layouts.push_back(parse_name<kernels::CacheLayout>(
          v, "cache_layouts", {kernels::CacheLayout::packed, kernels::CacheLayout::nhd, kernels::CacheLayout::hnd}));
  }
  if (contains(d.cache_layouts, kernels::CacheLayout::packed) && !j.contains("v_layouts"))
    throw KernelSpecError("description: missing field 'v_layouts' (the kernel reads packed caches)");
  if (j.contains("v_layouts"))
    for (const json& v : array_field(j, "v_layouts"))
      d.v_layouts.push_back(parse_name<VLayout>(v, "v_layouts", {VLayout::plain, VLayout::trans}));
  if (j.contains("kv_storage")) {
    d.kv_storage.clear();
    for (const json& v : array_field(j, "kv_storage"))
      d.kv_storage.push_back(
          parse_name<KvStorage>(v, "kv_storage", {KvStorage::separate, KvStorage::combined, KvStorage::latent}));
  }
  if (j.contains("mla_dims"))
    for (const json& v : array_field(j, "mla_dims")) {
      if (!v.is_array() || v.size() != 2) throw KernelSpecError("mla_dims: expected [latent, rope] pairs, got " + quoted(v));
      d.mla_dims.push_back({int_field(v[0], "mla_dims"), int_field(v[1], "mla_dims")});
    }
  if (j.contains("page_tables")) {
    d.page_tables.clear();
    for (const json& v : array_field(j, "page_tables"))
      d.page_tables.push_back(parse_name<kernels::PageTable>(
          v, "page_tables", {kernels::PageTable::block_table, kernels::PageTable::csr}));
  }
  if (j.contains("strided_cache")) d.strided_cache = bool_field(j.at("strided_cache"), "strided_cache");
  if (j.contains("large_cache")) d.large_cache = bool_field(j.at("large_cache"), "large_cache");
  if (j.contains("scratch")) d.scratch = bool_field(j.at("scratch"), "scratch");
  if (j.contains("compiles_per_shape"))
    d.compiles_per_shape = bool_field(j.at("compiles_per_shape"), "compiles_per_shape");
  for (const json& v : array_field(j, "scale_kinds"))
    d.scale_kinds.push_back(parse_name<Scales>(
        v, "scale_kinds", {Scales::none, Scales::per_tensor, Scales::per_head, Scales::per_token}));
  if (j.contains("mixed_scales")) d.mixed_scales = bool_field(j.at("mixed_scales"), "mixed_scales");
  for (const char* f : {"block_sizes", "head_dims", "gqa_ratios"}) {
    std::vector<int64_t>& dst = f == std::string("block_sizes") ? d.block_sizes
                                : f == std::string("head_dims") ? d.head_dims
                                                                : d.gqa_ratios;
    for (const json& v : array_field(j, f)) dst.push_back(int_field(v, f));
  }
  const json& q = array_field(j, "q_len");
  if (q.size() != 2) throw KernelSpecError("q_len: expected [min, max], got " + quoted(q));
  d.min_q_len = int_field(q[0], "q_len");
  d.max_q_len = int_field(q[1], "q_len");
  if (j.contains("max_num_seqs")) d.max_num_seqs = int_field(j.at("max_num_seqs"), "max_num_seqs");
  if (j.contains("max_kv_heads")) d.max_kv_heads = int_field(j.at("max_kv_heads"), "max_kv_heads");
  if (j.contains("max_context_len")) d.max_context_len = int_field(j.at("max_context_len"), "max_context_len");
  if (j.contains("strided_q")) d.strided_q = bool_field(j.at("strided_q"), "strided_q");
  if (j.contains("split")) d.split = parse_name<Split>(j.at("split"), "split", {Split::self, Split::plan});
  if (j.contains("split_ceiling")) d.split_ceiling = bool_field(j.at("split_ceiling"), "split_ceiling");
  if (j.contains("max_split_ceiling"))
    d.max_split_ceiling = int_field(j.at("max_split_ceiling"), "max_split_ceiling");
  if (j.contains("writes_lse")) d.writes_lse = bool_field(j.at("writes_lse"), "writes_lse");
  if (j.contains("lse_base")) d.lse_base = parse_name<LseBase>(j.at("lse_base"), "lse_base", {LseBase::e, LseBase::two});
  if (j.contains("variants"))
    for (const json& v : array_field(j, "variants"))
      d.features.push_back(parse_name<Feature>(
          v, "variants", {Feature::window, Feature::soft_cap, Feature::sinks, Feature::alibi}));
  if (j.contains("thread_safe")) d.thread_safe = bool_field(j.at("thread_safe"), "thread_safe");
  if (j.contains("check")) d.has_check = bool_field(j.at("check"), "check");
  const json& p = j.at("profile");
  if (!p.is_object()) throw KernelSpecError("profile: expected an object, got " + quoted(p));
  for (const auto& [k, v] : p.items())
    if (k != "q_quant" && k != "p_round" && k != "partial")
      throw KernelSpecError("profile: unknown field '" + utf8_clean(k, 80) + "'");
  for (const char* k : {"q_quant", "p_round", "partial"})
    if (!p.contains(k)) throw KernelSpecError(std::string("profile: missing field '") + k + "'");
  auto name_of = [&](const char* k) {
    if (!p.at(k).is_string()) throw KernelSpecError(std::string("profile.") + k + ": expected a name, got " + quoted(p.at(k)));
    return p.at(k).get<std::string>();
  };
  if (!kernels::parse_q_quant(name_of("q_quant"), d.profile.q_quant))
    throw KernelSpecError("profile.q_quant: unknown value '" + utf8_clean(name_of("q_quant"), 80) + "' (expected fp8_per_row, cache_dtype or none)");
  if (!kernels::parse_p_round(name_of("p_round"), d.profile.p_round))
    throw KernelSpecError("profile.p_round: unknown value '" + utf8_clean(name_of("p_round"), 80) +
                          "' (expected fp8_running_max, fp8, bf16, f16 or none)");
  if (name_of("partial") != "none" && !kernels::parse_partial_dtype(name_of("partial"), d.profile.partial))
    throw KernelSpecError("profile.partial: unknown value '" + utf8_clean(name_of("partial"), 80) + "' (expected f32, bf16, f16, fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2 or none)");
  if (const std::string why = description_problem(d); !why.empty()) throw KernelSpecError("description: " + why);
  canonicalize(d);
  return d;
}

namespace {
// "512+64/128+64"
std::string mla_list(const std::vector<MlaDims>& dims) {
  std::string t;
  for (const MlaDims& m : dims) t += fmt::format("{}{}+{}", t.empty() ? "" : "/", m.latent, m.rope);
  return t;
}
}  // namespace

std::string summary(const KernelDescription& d) {
  return fmt::format(
      "q {}, out {}, cache {} {}{}{}{}, V {}, scales {}{}, block {}, D {}, G {}, q_len {}..{}, split {}{}, profile q {} / "
      "p {} / partial {}{}",
      list_text(d.q_dtypes), d.out_dtype == DType::none ? "same" : kernels::to_string(d.out_dtype),
      list_text(d.cache_dtypes), list_text(d.cache_layouts),
      d.kv_storage == std::vector{KvStorage::separate} ? "" : " (" + list_text(d.kv_storage) + ")",
      d.page_tables == std::vector{kernels::PageTable::block_table} ? "" : ", pages " + list_text(d.page_tables),
      std::string(d.strided_cache ? ", strided" : "") + (d.large_cache ? ", 2^31+ elements" : ""),
      list_text(d.v_layouts), list_text(d.scale_kinds),
      d.mixed_scales ? " (K and V apart)" : "", list_text(d.block_sizes),
      list_text(d.head_dims), list_text(d.gqa_ratios), d.min_q_len, d.max_q_len, to_string(d.split),
      d.split_ceiling ? " (takes a ceiling)" : "", kernels::to_string(d.profile.q_quant),
      kernels::to_string(d.profile.p_round),
      d.profile.partial == DType::none ? "none" : kernels::to_string(d.profile.partial),
      d.has_check ? ", has check" : "") +
         (d.features.empty() ? std::string() : ", variants " + list_text(d.features)) +
         (d.lse_base == LseBase::two ? ", lse in log2" : "") + (d.scratch ? ", scratch poisoned before each call" : "") +
         (d.compiles_per_shape ? ", compiles per shape" : "") +
         (d.mla_dims.empty() ? std::string() : ", MLA " + mla_list(d.mla_dims));
}

std::string identity(const KernelUnderTest& k) {
  const KernelDescription& d = k.description();
  return fmt::format("{} {} via {} ({})", d.name, d.version.empty() ? "(no version)" : d.version, k.adapter(),
                     utf8_clean(k.spec()));
}

json identity_json(const KernelUnderTest& k) {
  const KernelDescription& d = k.description();
  return {{"name", d.name},
          {"version", d.version},
          {"adapter", k.adapter()},
          // A spec naming a path that is not UTF-8 is recorded with U+FFFD in
          // its place: the report and the case file can still be written.
          {"spec", utf8_clean(k.spec())},
          {"profile", to_json(d).at("profile")}};
}

// ---- the contract's admission rule ----------------------------------------------

namespace {

std::string shape_text(const TensorView& v) { return v.present() ? v.shape_string() : "absent"; }

bool positive_extents(const TensorView& v) {
  for (int i = 0; i < v.rank; ++i)
    if (v.shape[i] < 1) return false;
  return true;
}

// q's and out's rows (their head-dim stride is the layout's): dense unless
// strided_q, then with dense heads and rows at least Hq*D apart.
std::string row_stride_problem(const char* name, const TensorView& t, bool strided_q) {
  if (t.contiguous()) return {};
  if (!strided_q) return fmt::format("{}: not contiguous (strides [{}, {}, {}]); the kernel does not take strided q",
                                     name, t.stride[0], t.stride[1], t.stride[2]);
  if (t.stride[1] != t.shape[2] || t.stride[0] < t.shape[1] * t.shape[2])
    return fmt::format("{}: strides [{}, {}, {}]: heads must be dense and rows at least Hq*D apart", name,
                       t.stride[0], t.stride[1], t.stride[2]);
  return {};
}

// A broken clause of the call's layout (kernels/validate.hpp) in the contract's words.
// rules: what the layout was judged against (the scales' shapes name its dims).
std::string layout_text(const kernels::Finding& f, const kernels::DecodeCall& c, const KernelDescription& d,
                        const kernels::LayoutRules& rules = {}) {
  using kernels::Clause;
  const std::string_view field = f.field;
  const std::string name(field.substr(0, field.find('.')));  // "k_scale.dtype" -> "k_scale"
  switch (f.clause) {
    case Clause::q_rank: return fmt::format("q: rank {} (expected 3: [num_seqs*q_len, Hq, D])", f.value);
    case Clause::out_shape:
      return c.v_latent ? fmt::format("out: shape {} (expected [{}, {}, {}]: q's rows and heads, D_v dims)",
                                      shape_text(c.out), c.q.shape[0], c.q.shape[1], kernels::out_head_dim(c))
                        : "out: shape " + shape_text(c.out) + " differs from q's " + shape_text(c.q);
    case Clause::q_head_dim_stride:
    case Clause::out_head_dim_stride: return fmt::format("{}: head_dim stride {} (must be 1)", name, f.value);
    case Clause::head_ratio: return fmt::format("Hq {} is not a multiple of Hkv {}", f.value, f.expected);
    case Clause::context_lens_rank: return fmt::format("context_lens: rank {} (expected 1)", f.value);
    case Clause::context_lens_dtype:
      return fmt::format("context_lens: dtype {} (expected i32)", kernels::to_string(DType(f.value)));
    case Clause::context_lens_contiguous:
    case Clause::num_seqs:
      return "context_lens: shape " + shape_text(c.context_lens) + " not a contiguous [num_seqs >= 1]";
    case Clause::q_len: return fmt::format("q_len {} outside {}..{}", c.q_len, d.min_q_len, d.max_q_len);
    case Clause::q_rows:
      return fmt::format("q: {} rows, but num_seqs {} * q_len {} = {}", f.value, c.context_lens.shape[0], c.q_len,
                         f.expected);
    case Clause::scale_dtype:
      return fmt::format("{}: dtype {} (expected f32 with data)", name, kernels::to_string(DType(f.value)));
    case Clause::scale_shape: {
      const TensorView& t = *f.view;
      return fmt::format("{}: {} strides [{}] (expected [1], [{}] or a contiguous [{}, {}, {}])", name, shape_text(t),
                         fmt::join(t.stride.begin(), t.stride.begin() + t.rank, ", "), rules.hkv, rules.pages,
                         rules.hkv, rules.page_size);
    }
    default: return kernels::describe(f, kernels::KernelKind::uniform);
  }
}

}  // namespace

std::string contract_violation(const DecodeRequest& r, const KernelDescription& d) {
  const kernels::DecodeCall& c = r.call;
  // q, out: the layout's rows, then the description's dtypes and row strides
  if (const kernels::Finding f = kernels::first_rows_violation(c)) return layout_text(f, c, d);
  if (!positive_extents(c.q)) return "q: shape " + shape_text(c.q) + " has an extent < 1";
  if (!contains(d.q_dtypes, c.q.dtype))
    return fmt::format("q: dtype {} not in q_dtypes {}", kernels::to_string(c.q.dtype), list_text(d.q_dtypes));
  const int64_t rows = c.q.shape[0], hq = c.q.shape[1], hd = c.q.shape[2];
  if (auto why = row_stride_problem("q", c.q, d.strided_q); !why.empty()) return why;
  if (c.out.dtype != d.out_dtype_for(c.q.dtype))
    return fmt::format("out: dtype {} (expected {})", kernels::to_string(c.out.dtype),
                       kernels::to_string(d.out_dtype_for(c.q.dtype)));
  if (auto why = row_stride_problem("out", c.out, d.strided_q); !why.empty()) return why;
  if (!contains(d.head_dims, hd)) return fmt::format("head_dim {} not in head_dims {}", hd, list_text(d.head_dims));

  // The caches: the format's rules (kernels/cache_format.hpp), then the
  // description's sets.
  kernels::CacheShape cs;
  if (!contains(d.cache_layouts, c.layout))
    return fmt::format("cache layout {} not in cache_layouts {}", to_string(c.layout), list_text(d.cache_layouts));
  if (auto why = kernels::cache_views_problem(
          c, hd, d.strided_cache ? kernels::StrideRule::ordered : kernels::StrideRule::contiguous, cs); !why.empty()) return why;
  if (!contains(d.cache_dtypes, cs.dtype))
    return fmt::format("k_cache: dtype {} not in cache_dtypes {}", kernels::to_string(cs.dtype), list_text(d.cache_dtypes));
  if (const int64_t span = kernels::cache_span(c); span >= kernels::kLargeCacheElements && !d.large_cache)
    return fmt::format("k_cache: spans {} elements, 2^31 or more (offsets past int32), and the kernel does not "
                       "declare large_cache", span);
  if (cs.layout == kernels::CacheLayout::packed && !contains(d.v_layouts, cs.v_layout))
    return fmt::format("v_cache: layout {} not in v_layouts {}", to_string(cs.v_layout), list_text(d.v_layouts));
  const KvStorage storage = cs.latent ? KvStorage::latent : cs.combined ? KvStorage::combined : KvStorage::separate;
  if (!contains(d.kv_storage, storage))
    return fmt::format("kv storage {} not in kv_storage {}", to_string(storage), list_text(d.kv_storage));
  if (cs.latent && !contains(d.mla_dims, MlaDims{cs.v_head_dim, hd - cs.v_head_dim}))
    return fmt::format("MLA dims [{}, {}] (D_v {}, D {}) not in mla_dims {}", cs.v_head_dim, hd - cs.v_head_dim,
                       cs.v_head_dim, hd, mla_list(d.mla_dims));
  const int64_t nb = cs.pages, hkv = cs.hkv, bs = cs.page_size;
  if (!contains(d.block_sizes, bs))
    return fmt::format("block_size {} not in block_sizes {}", bs, list_text(d.block_sizes));
  if (d.max_kv_heads > 0 && hkv > d.max_kv_heads)
    return fmt::format("Hkv {} > max_kv_heads {}", hkv, d.max_kv_heads);

  // The rest of the layout against that cache (heads, lengths, q's rows, the
  // scales' shapes); the page table is the format's (page_table_problem below),
  // unpaired scales the kinds' rule (further below).
  const kernels::LayoutRules layout{.pages = nb, .hkv = hkv, .page_size = bs, .dims_read = true, .sound = true,
                                    .block_table = false, .paired_scales = false, .per_head_scales = true};
  if (const kernels::Finding f = kernels::first_layout_violation(c, layout)) return layout_text(f, c, d, layout);
  if (!contains(d.gqa_ratios, hq / hkv))
    return fmt::format("GQA ratio {} (Hq {} / Hkv {}) not in gqa_ratios {}", hq / hkv, hq, hkv,
                       list_text(d.gqa_ratios));

  // tables and lengths
  const int64_t num_seqs = c.context_lens.shape[0];
  if (d.max_num_seqs > 0 && num_seqs > d.max_num_seqs)
    return fmt::format("num_seqs {} > max_num_seqs {}", num_seqs, d.max_num_seqs);
  if (c.q_len < d.min_q_len || c.q_len > d.max_q_len)
    return fmt::format("q_len {} outside {}..{}", c.q_len, d.min_q_len, d.max_q_len);
  if (!contains(d.page_tables, c.page_table))
    return fmt::format("page table {} not in page_tables {}", to_string(c.page_table), list_text(d.page_tables));
  if (auto why = kernels::page_table_problem(c, nb, bs, {.max_context_len = d.max_context_len}); !why.empty()) return why;

  // scales: each of a kind the kernel declares; K and V of different kinds
  // only where it says so
  Scales kinds[2];
  int which = 0;
  for (const auto& [name, s] : {std::pair{"k_scale", &c.k_scale}, std::pair{"v_scale", &c.v_scale}}) {
    Scales& kind = kinds[which++];
    if (auto why = kernels::scale_view_problem(*s, cs, kind, name); !why.empty()) return why;
    // With one KV head a [1] scale is per tensor and per head at once.
    if (kind == Scales::per_tensor && hkv == 1 && !contains(d.scale_kinds, Scales::per_tensor)) kind = Scales::per_head;
  }
  if (kinds[0] != kinds[1] && !d.mixed_scales) {
    if (kinds[0] == Scales::none || kinds[1] == Scales::none)
      return fmt::format("scales: k_scale {} but v_scale {}; the kernel takes one kind for both (no mixed_scales)",
                         kinds[0] == Scales::none ? "absent" : "given", kinds[1] == Scales::none ? "absent" : "given");
    return fmt::format("scales: k_scale and v_scale are of different kinds ({}, {}); the kernel takes one kind for "
                       "both (no mixed_scales)", to_string(kinds[0]), to_string(kinds[1]));
  }
  for (int i = 0; i < 2; ++i)
    if (!contains(d.scale_kinds, kinds[i]))
      return fmt::format("scales: {} ({}) not in scale_kinds {}", to_string(kinds[i]), i == 0 ? "k_scale" : "v_scale",
                         list_text(d.scale_kinds));

  // the attention variant: declared, and its tensors one f32 per query head
  const kernels::AttentionVariant& av = c.variant;
  if (av.windowed() && !d.declares(Feature::window))
    return fmt::format("variant.window_left {}: the kernel declares no sliding window", av.window_left);
  if (!av.window_valid()) return fmt::format("variant.window_left {} (expected -1 or >= 0)", av.window_left);
  if (av.soft_cap != 0.0f && !d.declares(Feature::soft_cap))
    return fmt::format("variant.soft_cap {}: the kernel declares no soft cap", av.soft_cap);
  if (!av.soft_cap_valid())
    return fmt::format("variant.soft_cap {} (expected 0 or a finite positive cap)", av.soft_cap);
  for (const auto& [name, t, f] : {std::tuple{"variant.sinks", &av.sinks, Feature::sinks},
                                   std::tuple{"variant.alibi_slopes", &av.alibi_slopes, Feature::alibi}}) {
    if (!t->present()) continue;
    if (!d.declares(f)) return fmt::format("{}: the kernel declares no {}", name, to_string(f));
    if (t->rank != 1 || t->shape[0] != hq || t->dtype != DType::f32 || t->stride[0] != 1)
      return fmt::format("{}: {} {} (expected contiguous f32 [{}])", name, kernels::to_string(t->dtype),
                         shape_text(*t), hq);
  }

  // lse, plan, ceiling
  if (r.lse.present()) {
    if (!d.writes_lse) return "lse: given to a kernel that does not write it";
    if (r.lse.rank != 2 || r.lse.shape[0] != rows || r.lse.shape[1] != hq || r.lse.dtype != DType::f32 ||
        !r.lse.contiguous())
      return fmt::format("lse: {} {} (expected contiguous f32 [{}, {}])", kernels::to_string(r.lse.dtype),
                         shape_text(r.lse), rows, hq);
  }
  if (d.split == Split::plan) {
    if (!r.plan || !r.plan->work_info || !r.plan->reduce_info) return "plan: missing (the kernel runs pav's plan)";
    if (r.plan->num_seqs != num_seqs || r.plan->kv_heads != hkv)
      return fmt::format("plan: for {} sequences and {} KV heads, the call has {} and {}", r.plan->num_seqs,
                         r.plan->kv_heads, num_seqs, hkv);
    if (r.max_partitions < 1 || r.max_partitions != r.plan->max_partitions)
      return fmt::format("max_partitions {} differs from the plan's {}", r.max_partitions, r.plan->max_partitions);
    if (r.plan->capacity < num_seqs || r.plan->capacity > num_seqs * r.plan->max_partitions)
      return fmt::format("plan: capacity {} outside num_seqs {} .. num_seqs * max_partitions {}", r.plan->capacity,
                         num_seqs, num_seqs * r.plan->max_partitions);
  } else if (r.plan) {
    return "plan: given to a kernel that splits by itself";
  }
  if (r.max_partitions < 0) return fmt::format("max_partitions {} < 0", r.max_partitions);
  if (r.max_partitions > 0 && d.split == Split::self && !d.split_ceiling)
    return "max_partitions: given to a kernel that takes no split ceiling";
  if (d.max_split_ceiling > 0 && r.max_partitions > d.max_split_ceiling)
    return fmt::format("max_partitions {} > max_split_ceiling {}", r.max_partitions, d.max_split_ceiling);
  return {};
}

// ---- opening --------------------------------------------------------------------

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quote) {
      if (ch == quote) quote = 0;
      else if (ch == '\\' && quote == '"' && i + 1 < text.size()) cur += text[++i];
      else cur += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (ch == '\\' && i + 1 < text.size()) {
      cur += text[++i];
      in_word = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\n') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += ch;
      in_word = true;
    }
  }
  if (quote) throw KernelSpecError(std::string("unterminated ") + quote + " quote in '" + text + "'");
  if (in_word) out.push_back(cur);
  return out;
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {
thread_local int64_t t_cut_short = 0;
}  // namespace

int64_t calls_cut_short_on_this_thread() { return t_cut_short; }
void note_call_cut_short() { ++t_cut_short; }

std::string kernel_option_text(const KernelUnderTest& k) {
  return "--kernel " + shell_quote(k.spec()) + (k.adapter() == "lib (isolated)" ? " --isolate" : "");
}

}  // namespace pav::adapters
