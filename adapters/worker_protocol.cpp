// SPDX-License-Identifier: Apache-2.0
#include "adapters/worker_protocol.hpp"

#include <fmt/core.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "adapters/npy.hpp"
#include "input/json_input.hpp"
#include "kernels/limits.hpp"

namespace pav::adapters::protocol {

using kernels::DType;
using kernels::TensorView;
using nlohmann::json;

bool outcome_of_status(std::string_view name, Outcome& out) {
  for (const StatusName& s : kStatuses)
    if (s.name == name) {
      out = s.outcome;
      return true;
    }
  return false;
}

std::string_view status_of(Outcome o) {
  for (const StatusName& s : kStatuses)
    if (s.outcome == o) return s.name;
  return "error";
}

std::vector<NamedTensor> inputs_of(const DecodeRequest& r) {
  const kernels::DecodeCall& c = r.call;
  // A combined K/V tensor goes as kv_cache alone (its halves are its views);
  // an MLA cache as k_cache alone, with its one scale as k_scale (V is its
  // keys' first v_head_dim dims).
  const bool combined = c.kv_cache.present();
  std::vector<NamedTensor> v = {{"q", c.q},
                                {"k_cache", combined ? TensorView{} : c.k_cache},
                                {"v_cache", combined || c.v_latent ? TensorView{} : c.v_cache},
                                {"kv_cache", c.kv_cache},
                                {"block_tables", c.block_tables},
                                {"kv_indptr", c.kv_indptr},
                                {"kv_indices", c.kv_indices},
                                {"kv_last_page_len", c.kv_last_page_len},
                                {"context_lens", c.context_lens},
                                {"k_scale", c.k_scale},
                                {"v_scale", c.v_latent ? TensorView{} : c.v_scale},
                                {"sinks", c.variant.sinks},
                                {"alibi_slopes", c.variant.alibi_slopes}};
  if (r.plan) {
    v.push_back({"work_info", TensorView::contiguous_of(r.plan->work_info, DType::i32, {r.plan->capacity, 4})});
    v.push_back({"reduce_info", TensorView::contiguous_of(r.plan->reduce_info, DType::i32, {r.plan->num_seqs, 2})});
  }
  std::erase_if(v, [](const NamedTensor& t) { return !t.view.present(); });
  return v;
}

bool sent_as_span(const TensorView& v) { return v.numel() > 0 && !npy::c_order(v); }

TensorView span_view(const TensorView& v) { return TensorView::contiguous_of(v.data, v.dtype, {v.span()}); }

std::string dtype_name(DType t) {
  return t == DType::none ? std::string("unknown") : std::string(kernels::to_string(t));
}

json descriptor(const TensorView& v, const std::string& file, bool with_values) {
  json d;
  if (!file.empty()) {
    d["file"] = file;
    if (sent_as_span(v)) d["storage"] = "span";
  }
  d["dtype"] = dtype_name(v.dtype);
  d["shape"] = std::vector<int64_t>(v.shape.begin(), v.shape.begin() + v.rank);
  d["strides"] = std::vector<int64_t>(v.stride.begin(), v.stride.begin() + v.rank);
  if (with_values && v.data && (v.dtype == DType::i32 || v.dtype == DType::i64)) {
    std::vector<int64_t> values;
    const int64_t n = v.numel();
    if (n > 0) values.reserve(size_t(n));
    std::array<int64_t, kernels::kMaxRank> idx{};
    for (int64_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (int i = 0; i < v.rank; ++i) off += idx[size_t(i)] * v.stride[size_t(i)];
      values.push_back(v.dtype == DType::i32 ? int64_t(v.as<int32_t>()[off]) : v.as<int64_t>()[off]);
      for (int i = v.rank - 1; i >= 0 && ++idx[size_t(i)] == v.shape[size_t(i)]; --i) idx[size_t(i)] = 0;
    }
    d["values"] = values;
  }
  return d;
}

json args_of(const DecodeRequest& r, bool for_decode) {
  const kernels::DecodeCall& c = r.call;
  json a = {{"q_len", c.q_len},
            {"softmax_scale", kernels::dims_of(c).softmax_scale},
            {"max_partitions", r.max_partitions}};
  // The attention variant's scalars, present only when set (absent: off).
  if (c.variant.windowed()) a["window_left"] = c.variant.window_left;
  if (c.variant.soft_cap != 0.0f) a["soft_cap"] = c.variant.soft_cap;
  // The cache format's names (the tensors' shapes say the rest).
  a["cache_layout"] = kernels::to_string(c.layout);
  a["page_table"] = kernels::to_string(c.page_table);
  a["kv_storage"] = c.v_latent ? "latent" : c.kv_cache.present() ? "combined" : "separate";
  if (c.v_latent) a["v_head_dim"] = kernels::out_head_dim(c);
  if (!for_decode) return a;
  const kernels::CallDims d = kernels::dims_of(c);
  a["num_seqs"] = d.num_seqs;
  a["num_heads"] = d.hq;
  a["num_kv_heads"] = d.hkv;
  a["head_dim"] = d.head_dim;
  a["block_size"] = d.block_size;
  a["page_size"] = d.block_size;
  a["v_layout"] = to_string(d.v_layout);
  kernels::CacheShape cs;
  cs.hkv = d.hkv;
  cs.pages = d.num_blocks;
  cs.page_size = d.block_size;
  kernels::ScaleKind kk = kernels::ScaleKind::none, vk = kernels::ScaleKind::none;
  (void)kernels::scale_view_problem(c.k_scale, cs, kk, "k_scale");  // the call passed the contract
  (void)kernels::scale_view_problem(c.v_scale, cs, vk, "v_scale");
  a["scale_kind"] = kernels::to_string(kk);  // K's (version-1 workers read this one)
  a["k_scale_kind"] = kernels::to_string(kk);
  a["v_scale_kind"] = kernels::to_string(vk);
  return a;
}

json decode_request(int64_t id, const std::string& dir, const DecodeRequest& r, bool poison_scratch) {
  json req = {{"op", "decode"}, {"id", id}, {"dir", dir}, {"args", args_of(r, true)}};
  if (poison_scratch) req["poison_scratch"] = true;
  json tensors = json::object();
  for (const NamedTensor& t : inputs_of(r)) tensors[t.name] = descriptor(t.view, std::string(t.name) + ".npy", false);
  req["tensors"] = tensors;
  const TensorView& out = r.call.out;
  json outputs = {{"out", {{"file", "out.npy"}, {"dtype", dtype_name(out.dtype)},
                           {"shape", std::vector<int64_t>(out.shape.begin(), out.shape.begin() + out.rank)}}}};
  if (r.lse.present())
    outputs["lse"] = {{"file", "lse.npy"}, {"dtype", "f32"},
                      {"shape", std::vector<int64_t>(r.lse.shape.begin(), r.lse.shape.begin() + r.lse.rank)}};
  req["outputs"] = outputs;
  return req;
}

json check_request(int64_t id, const DecodeRequest& r) {
  json req = {{"op", "check"}, {"id", id}, {"args", args_of(r, false)}};
  json tensors = json::object();
  for (const NamedTensor& t : inputs_of(r)) {
    const std::string n = t.name;
    const bool table = n == "block_tables" || n == "context_lens" || n == "work_info" || n == "reduce_info" ||
                       n == "kv_indptr" || n == "kv_indices" || n == "kv_last_page_len";
    tensors[n] = descriptor(t.view, "", table);
  }
  tensors["out"] = descriptor(r.call.out, "", false);
  if (r.lse.present()) tensors["lse"] = descriptor(r.lse, "", false);
  req["tensors"] = tensors;
  return req;
}

namespace {

// A list of at most kMaxRank integers, each within +-kMaxExtent.
std::vector<int64_t> dims_of(const input::Object& d, std::string_view key) {
  return d.array(key, 0, size_t(kernels::kMaxRank)).integers<int64_t>(-kMaxExtent, kMaxExtent);
}

// A descriptor read through the shared reader: every field typed and bounded,
// "request: tensors.NAME.FIELD: why" when it is not.
input::Object descriptor_object(const json& d, const std::string& name) {
  const input::Object o(d, "request", "tensors." + name);
  o.only({"file", "storage", "dtype", "shape", "strides", "values"});
  return o;
}

TensorView view_from(const input::Object& d) {
  TensorView v;
  const std::string dt = d.string("dtype");
  if (dt != "unknown" && !kernels::parse_dtype(dt, v.dtype)) d.fail("dtype", "unknown dtype '" + input::excerpt(dt) + "'");
  const auto shape = dims_of(d, "shape");
  v.rank = int(shape.size());
  std::copy(shape.begin(), shape.end(), v.shape.begin());
  if (d.has("strides")) {
    const auto strides = dims_of(d, "strides");
    if (strides.size() != shape.size()) d.fail("strides", "strides and shape differ in length");
    std::copy(strides.begin(), strides.end(), v.stride.begin());
  }
  return v;
}

}  // namespace

std::string storage_problem(const TensorView& v, int element_bytes) {
  int64_t span = 1;
  for (int i = 0; i < v.rank; ++i) {
    const int64_t n = v.shape[size_t(i)], st = v.stride[size_t(i)];
    if (n < 0) return fmt::format("shape[{}] = {} < 0", i, n);
    if (st < 0) return fmt::format("strides[{}] = {} < 0", i, st);
    if (n == 0) return {};  // no element: nothing is laid out
    if (st != 0 && n - 1 > (int64_t(1) << 56) / st)
      return fmt::format("dim {}: extent {} at stride {} spans too far", i, n, st);
    span += (n - 1) * st;  // each term <= 2^56: the sum of six cannot overflow
  }
  if (span > kernels::kMaxCaseHostBytes / std::max(element_bytes, 1))
    return fmt::format("{} elements of {} bytes, more than {} bytes", span, element_bytes, kernels::kMaxCaseHostBytes);
  return {};
}

namespace {

void make_contiguous(TensorView& v) {
  int64_t s = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    v.stride[size_t(i)] = s;
    s *= std::max<int64_t>(v.shape[size_t(i)], 1);
  }
}

}  // namespace

OwnedTensor load_tensor(const json& j, const std::string& dir, const std::string& name) {
  const input::Object d = descriptor_object(j, name);
  OwnedTensor t;
  t.view = view_from(d);
  const bool span = d.has("storage");
  if (span) (void)d.choice("storage", {"span"});
  if (!span) make_contiguous(t.view);
  else if (!d.has("strides")) throw std::runtime_error(name + ": a span file without strides");
  if (const std::string why = storage_problem(t.view, std::max(kernels::dtype_size(t.view.dtype), 1)); !why.empty())
    throw std::runtime_error(name + ": " + why);
  npy::Array a = npy::read(dir + "/" + d.string("file"));
  const std::vector<int64_t> shape =
      span ? std::vector<int64_t>{std::max<int64_t>(t.view.span(), 0)}
           : std::vector<int64_t>(t.view.shape.begin(), t.view.shape.begin() + t.view.rank);
  if (a.descr != npy::descr_of(t.view.dtype) || a.shape != shape || (a.fortran_order && t.view.rank > 1))
    throw std::runtime_error(name + ": the file's dtype, shape or order differs from its descriptor");
  t.bytes = std::move(a.data);
  t.view.data = t.bytes.data();
  return t;
}

OwnedTensor describe_tensor(const json& j, const std::string& name) {
  const input::Object d = descriptor_object(j, name);
  OwnedTensor t;
  t.view = view_from(d);
  if (d.has("values")) {
    const int es = kernels::dtype_size(t.view.dtype);
    if (t.view.dtype != DType::i32 && t.view.dtype != DType::i64) d.fail("values", "given for a non-integer tensor");
    // Values are laid out at the given strides: both are checked before any
    // byte is written (a negative stride or extent would reach outside).
    if (const std::string why = storage_problem(t.view, es); !why.empty()) throw std::runtime_error(name + ": " + why);
    const int64_t n = std::max<int64_t>(t.view.numel(), 0);
    // Each value within the tensor's dtype: an i32 entry past int32 is refused,
    // never wrapped onto a valid block id.
    const std::vector<int64_t> values =
        es == 4 ? [&] {
          const auto v = d.array("values", size_t(n), size_t(n)).integers<int32_t>(INT32_MIN, INT32_MAX);
          return std::vector<int64_t>(v.begin(), v.end());
        }()
                : d.array("values", size_t(n), size_t(n)).integers<int64_t>(INT64_MIN, INT64_MAX);
    // The values are row-major over the shape; lay them out at the given strides.
    const int64_t span = std::max<int64_t>(t.view.span(), 1);
    t.bytes.assign(size_t(span) * size_t(es), 0);
    t.view.data = t.bytes.data();
    std::array<int64_t, kernels::kMaxRank> idx{};
    for (int64_t k = 0; k < int64_t(values.size()); ++k) {
      int64_t off = 0;
      for (int i = 0; i < t.view.rank; ++i) off += idx[size_t(i)] * t.view.stride[size_t(i)];
      if (es == 4) t.view.as<int32_t>()[off] = int32_t(values[size_t(k)]);
      else t.view.as<int64_t>()[off] = values[size_t(k)];
      for (int i = t.view.rank - 1; i >= 0 && ++idx[size_t(i)] == t.view.shape[size_t(i)]; --i) idx[size_t(i)] = 0;
    }
  }
  return t;
}

}  // namespace pav::adapters::protocol
