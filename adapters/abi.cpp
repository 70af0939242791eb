// SPDX-License-Identifier: Apache-2.0
#include "adapters/abi.hpp"

#include <fmt/core.h>

#include <cstring>

#include "common/utf8_text.hpp"

namespace pav::adapters::abi {

using kernels::DType;
using kernels::TensorView;

namespace {

constexpr std::pair<DType, int32_t> kDTypes[] = {
    {DType::f32, PAV_DTYPE_F32},          {DType::f16, PAV_DTYPE_F16},
    {DType::bf16, PAV_DTYPE_BF16},        {DType::fp8_e4m3fn, PAV_DTYPE_FP8_E4M3FN},
    {DType::fp8_e4m3fnuz, PAV_DTYPE_FP8_E4M3FNUZ}, {DType::i32, PAV_DTYPE_I32},
    {DType::i64, PAV_DTYPE_I64},          {DType::none, PAV_DTYPE_NONE},
    {DType::fp8_e5m2, PAV_DTYPE_FP8_E5M2}};

std::string cstring(const char* s, size_t cap, const char* field) {
  const void* end = std::memchr(s, 0, cap);
  if (!end) throw KernelSpecError(fmt::format("description: {} is not NUL-terminated within {} bytes", field, cap));
  // Any bytes a library wrote: valid UTF-8 from here on (reports quote it).
  return utf8_clean(std::string_view(s, size_t(static_cast<const char*>(end) - s)));
}

template <class E>
std::vector<E> mask_values(uint32_t mask, const char* field, int count) {
  if (count < 32 && (mask >> count) != 0)
    throw KernelSpecError(fmt::format("description: {} has bits set (0x{:x}) that name no value", field, mask));
  std::vector<E> out;
  for (int i = 0; i < count; ++i)
    if (mask & (1u << i)) out.push_back(E(i));
  return out;
}

std::vector<DType> dtype_mask(uint32_t mask, const char* field) {
  std::vector<DType> out;
  for (int bit = 0; bit < 32; ++bit) {
    if (!(mask & (1u << bit))) continue;
    DType t;
    if (!from_abi(bit, t) || t == DType::none)
      throw KernelSpecError(fmt::format("description: {} names dtype value {}, which pav does not know", field, bit));
    out.push_back(t);
  }
  return out;
}

std::vector<int64_t> list(const int32_t* v, int32_t n, int cap, const char* field) {
  if (n < 0 || n > cap) throw KernelSpecError(fmt::format("description: num_{} = {} outside 0..{}", field, n, cap));
  return std::vector<int64_t>(v, v + n);
}

template <class E>
E enum_value(int32_t v, int count, const char* field) {
  if (v < 0 || v >= count) throw KernelSpecError(fmt::format("description: {} = {} is not a known value", field, v));
  return E(v);
}

bool flag(int32_t v, const char* field) {
  if (v != 0 && v != 1) throw KernelSpecError(fmt::format("description: {} = {} (expected 0 or 1)", field, v));
  return v == 1;
}

uint32_t dtype_bits(const std::vector<DType>& v) {
  uint32_t m = 0;
  for (DType t : v) m |= PAV_BIT(to_abi(t));
  return m;
}

template <class E>
uint32_t enum_bits(const std::vector<E>& v) {
  uint32_t m = 0;
  for (E e : v) m |= PAV_BIT(int(e));
  return m;
}

void fill_list(const std::vector<int64_t>& v, int32_t* dst, int32_t* n, int cap, const char* field) {
  if (int(v.size()) > cap) throw KernelSpecError(fmt::format("{}: {} values, the ABI holds {}", field, v.size(), cap));
  for (size_t i = 0; i < v.size(); ++i) dst[i] = int32_t(v[i]);
  *n = int32_t(v.size());
}

void fill_string(const std::string& s, char* dst, size_t cap, const char* field) {
  if (s.size() >= cap) throw KernelSpecError(fmt::format("{}: '{}' longer than {} bytes", field, s, cap - 1));
  std::memcpy(dst, s.c_str(), s.size() + 1);
}

QQuant q_quant_from_abi(int32_t v) {
  if (v == PAV_Q_QUANT_NONE) return QQuant::none;
  if (v == PAV_Q_QUANT_FP8_PER_ROW) return QQuant::fp8_per_row;
  if (v == PAV_Q_QUANT_CACHE_DTYPE) return QQuant::cache_dtype;
  throw KernelSpecError(fmt::format("description: q_quant = {} is not a known value", v));
}

constexpr std::pair<PRound, int32_t> kPRounds[] = {{PRound::none, PAV_P_ROUND_NONE},
                                                   {PRound::fp8_running_max, PAV_P_ROUND_FP8_RUNNING_MAX},
                                                   {PRound::bf16, PAV_P_ROUND_BF16},
                                                   {PRound::f16, PAV_P_ROUND_F16},
                                                   {PRound::fp8, PAV_P_ROUND_FP8}};

PRound p_round_from_abi(int32_t v) {
  for (auto [p, a] : kPRounds)
    if (a == v) return p;
  throw KernelSpecError(fmt::format("description: p_round = {} is not a known value", v));
}

int32_t p_round_to_abi(PRound p) {
  for (auto [q, a] : kPRounds)
    if (q == p) return a;
  return PAV_P_ROUND_NONE;
}

}  // namespace

int32_t to_abi(DType t) {
  for (auto [d, v] : kDTypes)
    if (d == t) return v;
  return PAV_DTYPE_NONE;
}

bool from_abi(int32_t t, DType& out) {
  for (auto [d, v] : kDTypes)
    if (v == t) {
      out = d;
      return true;
    }
  return false;
}

pav_tensor to_abi(const TensorView& v) {
  pav_tensor t{};
  t.data = v.data;
  t.dtype = to_abi(v.dtype);
  t.rank = v.rank;
  for (int i = 0; i < v.rank && i < PAV_MAX_RANK; ++i) {
    t.shape[i] = v.shape[size_t(i)];
    t.stride[i] = v.stride[size_t(i)];
  }
  return t;
}

TensorView from_abi(const pav_tensor& t) {
  TensorView v;
  v.data = t.data;
  if (!from_abi(t.dtype, v.dtype)) v.dtype = DType::none;
  v.rank = t.rank < 0 ? 0 : t.rank > PAV_MAX_RANK ? PAV_MAX_RANK : t.rank;
  for (int i = 0; i < v.rank; ++i) {
    v.shape[size_t(i)] = t.shape[i];
    v.stride[size_t(i)] = t.stride[i];
  }
  return v;
}

KernelDescription from_abi(const pav_kernel_desc& a) {
  KernelDescription d;
  d.name = cstring(a.name, PAV_NAME_LEN, "name");
  d.version = cstring(a.version, PAV_NAME_LEN, "version");
  d.memory = enum_value<Memory>(a.memory, 2, "memory");
  d.q_dtypes = dtype_mask(a.q_dtypes, "q_dtypes");
  if (!from_abi(a.out_dtype, d.out_dtype))
    throw KernelSpecError(fmt::format("description: out_dtype = {} is not a known value", a.out_dtype));
  d.cache_dtypes = dtype_mask(a.cache_dtypes, "cache_dtypes");
  d.v_layouts = mask_values<kernels::VLayout>(a.v_layouts, "v_layouts", 2);
  // PAV_SCALE_* values are ScaleKind's: none 0, per_tensor 1, per_token 2, per_head 3.
  d.scale_kinds = mask_values<Scales>(a.scale_kinds, "scale_kinds", a.abi_version >= 3 ? 4 : 3);
  d.block_sizes = list(a.block_sizes, a.num_block_sizes, PAV_MAX_BLOCK_SIZES, "block_sizes");
  d.head_dims = list(a.head_dims, a.num_head_dims, PAV_MAX_HEAD_DIMS, "head_dims");
  d.gqa_ratios = list(a.gqa_ratios, a.num_gqa_ratios, PAV_MAX_GQA_RATIOS, "gqa_ratios");
  d.min_q_len = a.min_q_len;
  d.max_q_len = a.max_q_len;
  d.max_num_seqs = a.max_num_seqs;
  d.max_kv_heads = a.max_kv_heads;
  d.max_context_len = a.max_context_len;
  d.strided_q = flag(a.strided_q, "strided_q");
  d.split = enum_value<Split>(a.split, 2, "split");
  d.split_ceiling = flag(a.split_ceiling, "split_ceiling");
  d.max_split_ceiling = a.max_split_ceiling;
  d.writes_lse = flag(a.writes_lse, "writes_lse");
  d.thread_safe = flag(a.thread_safe, "thread_safe");
  d.profile.q_quant = q_quant_from_abi(a.q_quant);
  d.profile.p_round = p_round_from_abi(a.p_round);
  if (!from_abi(a.partial_dtype, d.profile.partial))
    throw KernelSpecError(fmt::format("description: partial_dtype = {} is not a known value", a.partial_dtype));
  if (a.abi_version >= 2) {  // a version-1 library has neither field: no variant, natural-log lse
    d.features = mask_values<Feature>(a.variants, "variants", 4);
    d.lse_base = enum_value<LseBase>(a.lse_base, 2, "lse_base");
  }
  if (a.abi_version >= 3) {  // older libraries read packed caches, K and V separate, through block tables
    // A zero mask keeps the older meaning (the defaults of KernelDescription).
    if (a.cache_layouts) d.cache_layouts = mask_values<kernels::CacheLayout>(a.cache_layouts, "cache_layouts", 3);
    // PAV_KV_LATENT came with version 4: a version-3 library's bit 2 names no value.
    if (a.kv_storage) d.kv_storage = mask_values<KvStorage>(a.kv_storage, "kv_storage", a.abi_version >= 4 ? 3 : 2);
    if (a.page_tables) d.page_tables = mask_values<kernels::PageTable>(a.page_tables, "page_tables", 2);
    d.strided_cache = flag(a.strided_cache, "strided_cache");
    d.mixed_scales = flag(a.mixed_scales, "mixed_scales");
  }
  if (a.abi_version >= 4) {  // older libraries: no MLA, no cache of 2^31 elements
    d.large_cache = flag(a.large_cache, "large_cache");
    if (a.num_mla_dims < 0 || a.num_mla_dims > PAV_MAX_MLA_DIMS)
      throw KernelSpecError(
          fmt::format("description: num_mla_dims = {} outside 0..{}", a.num_mla_dims, PAV_MAX_MLA_DIMS));
    for (int i = 0; i < a.num_mla_dims; ++i) d.mla_dims.push_back({a.mla_dims[i][0], a.mla_dims[i][1]});
  }
  if (a.abi_version < 4 && kernels::dtype_size(d.profile.partial) == 1)
    throw KernelSpecError(fmt::format("description: partial_dtype {}, which a version-{} library cannot declare "
                                      "(fp8 partials came with version 4)",
                                      kernels::to_string(d.profile.partial), a.abi_version));
  if (a.abi_version < 3) {
    for (DType t : d.cache_dtypes)
      if (!kernels::is_fp8(t))
        throw KernelSpecError(fmt::format("description: cache_dtypes names {}, which a version-{} library cannot "
                                          "declare (16-bit and e5m2 caches came with version 3)",
                                          kernels::to_string(t), a.abi_version));
  }
  if (const std::string why = description_problem(d); !why.empty()) throw KernelSpecError("description: " + why);
  canonicalize(d);
  return d;
}

void to_abi(const KernelDescription& d, pav_kernel_desc* out) {
  fill_string(d.name, out->name, PAV_NAME_LEN, "name");
  fill_string(d.version, out->version, PAV_NAME_LEN, "version");
  out->memory = int32_t(d.memory);
  out->q_dtypes = dtype_bits(d.q_dtypes);
  out->out_dtype = to_abi(d.out_dtype);
  out->cache_dtypes = dtype_bits(d.cache_dtypes);
  out->v_layouts = enum_bits(d.v_layouts);
  out->scale_kinds = enum_bits(d.scale_kinds);
  fill_list(d.block_sizes, out->block_sizes, &out->num_block_sizes, PAV_MAX_BLOCK_SIZES, "block_sizes");
  fill_list(d.head_dims, out->head_dims, &out->num_head_dims, PAV_MAX_HEAD_DIMS, "head_dims");
  fill_list(d.gqa_ratios, out->gqa_ratios, &out->num_gqa_ratios, PAV_MAX_GQA_RATIOS, "gqa_ratios");
  out->min_q_len = int32_t(d.min_q_len);
  out->max_q_len = int32_t(d.max_q_len);
  out->max_num_seqs = int32_t(d.max_num_seqs);
  out->max_kv_heads = int32_t(d.max_kv_heads);
  out->max_context_len = d.max_context_len;
  out->strided_q = d.strided_q;
  out->split = int32_t(d.split);
  out->split_ceiling = d.split_ceiling;
  out->max_split_ceiling = int32_t(d.max_split_ceiling);
  out->writes_lse = d.writes_lse;
  out->thread_safe = d.thread_safe;
  out->q_quant = d.profile.q_quant == QQuant::fp8_per_row   ? PAV_Q_QUANT_FP8_PER_ROW
                 : d.profile.q_quant == QQuant::cache_dtype ? PAV_Q_QUANT_CACHE_DTYPE
                                                            : PAV_Q_QUANT_NONE;
  out->p_round = p_round_to_abi(d.profile.p_round);
  out->partial_dtype = to_abi(d.profile.partial);
  out->variants = enum_bits(d.features);
  out->lse_base = int32_t(d.lse_base);
  out->cache_layouts = enum_bits(d.cache_layouts);
  out->kv_storage = enum_bits(d.kv_storage);
  out->page_tables = enum_bits(d.page_tables);
  out->strided_cache = d.strided_cache;
  out->mixed_scales = d.mixed_scales;
  out->large_cache = d.large_cache;
  if (d.mla_dims.size() > PAV_MAX_MLA_DIMS)
    throw KernelSpecError(fmt::format("mla_dims: {} pairs, the ABI holds {}", d.mla_dims.size(), PAV_MAX_MLA_DIMS));
  out->num_mla_dims = int32_t(d.mla_dims.size());
  for (size_t i = 0; i < d.mla_dims.size(); ++i) {
    out->mla_dims[i][0] = int32_t(d.mla_dims[i].latent);
    out->mla_dims[i][1] = int32_t(d.mla_dims[i].rope);
  }
}

pav_decode_args make_args(const DecodeRequest& r, bool for_check, uint32_t version) {
  pav_decode_args a{};
  a.struct_size = args_size_for(version);
  a.q_len = r.call.q_len;
  a.softmax_scale = kernels::dims_of(r.call).softmax_scale;
  a.max_partitions = int32_t(r.max_partitions);
  const kernels::DecodeCall& c = r.call;
  a.q = to_abi(c.q);
  a.out = to_abi(c.out);
  a.k_cache = to_abi(c.k_cache);
  a.v_cache = to_abi(c.v_cache);
  a.block_tables = to_abi(c.block_tables);
  a.context_lens = to_abi(c.context_lens);
  a.k_scale = to_abi(c.k_scale);
  a.v_scale = to_abi(c.v_scale);
  a.lse = to_abi(r.lse);
  if (r.plan) {
    a.work_info = to_abi(TensorView::contiguous_of(r.plan->work_info, DType::i32, {r.plan->capacity, 4}));
    a.reduce_info = to_abi(TensorView::contiguous_of(r.plan->reduce_info, DType::i32, {r.plan->num_seqs, 2}));
  }
  // An older library's struct ends earlier: the fields past its size stay zero.
  if (version >= 2) {
    a.window_left = c.variant.window_left;
    a.soft_cap = c.variant.soft_cap;
    a.sinks = to_abi(c.variant.sinks);
    a.alibi_slopes = to_abi(c.variant.alibi_slopes);
  }
  if (version >= 3) {
    a.cache_layout = int32_t(c.layout);
    a.page_table = int32_t(c.page_table);
    a.kv_cache = to_abi(c.kv_cache);
    a.kv_indptr = to_abi(c.kv_indptr);
    a.kv_indices = to_abi(c.kv_indices);
    a.kv_last_page_len = to_abi(c.kv_last_page_len);
  }
  if (version >= 4)
    a.kv_storage = c.v_latent ? PAV_KV_LATENT : c.kv_cache.present() ? PAV_KV_COMBINED : PAV_KV_SEPARATE;
  if (for_check)
    for (pav_tensor* t : {&a.q, &a.out, &a.k_cache, &a.v_cache, &a.k_scale, &a.v_scale, &a.lse, &a.sinks,
                          &a.alibi_slopes, &a.kv_cache})
      t->data = nullptr;
  return a;
}

uint32_t args_size_for(uint32_t version) {
  return version == 1   ? uint32_t(PAV_DECODE_ARGS_V1_SIZE)
         : version == 2 ? uint32_t(PAV_DECODE_ARGS_V2_SIZE)
         : version == 3 ? uint32_t(PAV_DECODE_ARGS_V3_SIZE)
                        : uint32_t(sizeof(pav_decode_args));
}

std::string args_problem(const pav_decode_args& a) {
  const std::pair<const char*, const pav_tensor*> tensors[] = {
      {"q", &a.q},           {"out", &a.out},         {"k_cache", &a.k_cache},     {"v_cache", &a.v_cache},
      {"block_tables", &a.block_tables}, {"context_lens", &a.context_lens}, {"k_scale", &a.k_scale},
      {"v_scale", &a.v_scale}, {"lse", &a.lse},       {"work_info", &a.work_info}, {"reduce_info", &a.reduce_info},
      {"sinks", &a.sinks},   {"alibi_slopes", &a.alibi_slopes}, {"kv_cache", &a.kv_cache},
      {"kv_indptr", &a.kv_indptr}, {"kv_indices", &a.kv_indices}, {"kv_last_page_len", &a.kv_last_page_len}};
  for (const auto& [name, t] : tensors) {
    if (t->rank < 0 || t->rank > PAV_MAX_RANK) return fmt::format("{}: rank {} outside 0..{}", name, t->rank, PAV_MAX_RANK);
    if (!t->data) continue;  // no memory behind it: its shape is the check's to judge
    int64_t span = 1;
    for (int i = 0; i < t->rank; ++i) {
      const int64_t n = t->shape[i], st = t->stride[i];
      if (n < 0) return fmt::format("{}: shape[{}] = {} < 0 with data given", name, i, n);
      if (st < 0) return fmt::format("{}: strides[{}] = {} < 0", name, i, st);
      if (n == 0) break;
      if (st != 0 && n - 1 > (int64_t(1) << 56) / st)
        return fmt::format("{}: dim {} of {} at stride {} spans too far", name, i, n, st);
      span += (n - 1) * st;
    }
    (void)span;
  }
  const bool plan = a.work_info.rank > 0 || a.reduce_info.rank > 0;
  if (plan && ((a.work_info.data && (a.work_info.rank != 2 || a.work_info.shape[1] != 4)) ||
               (a.reduce_info.data && (a.reduce_info.rank != 2 || a.reduce_info.shape[1] != 2))))
    return "work_info / reduce_info: expected [capacity, 4] and [num_seqs, 2]";
  return {};
}

DecodeRequest request_from_abi(const pav_decode_args& a, kernels::PlanView* plan_storage) {
  DecodeRequest r;
  kernels::DecodeCall& c = r.call;
  c.q = from_abi(a.q);
  c.out = from_abi(a.out);
  c.k_cache = from_abi(a.k_cache);
  c.v_cache = from_abi(a.v_cache);
  c.block_tables = from_abi(a.block_tables);
  c.context_lens = from_abi(a.context_lens);
  c.k_scale = from_abi(a.k_scale);
  c.v_scale = from_abi(a.v_scale);
  c.q_len = a.q_len;
  c.opt.softmax_scale = a.softmax_scale;
  if (a.struct_size >= PAV_DECODE_ARGS_V2_SIZE) {  // version 2: the attention variant
    c.variant.window_left = a.window_left;
    c.variant.soft_cap = a.soft_cap;
    c.variant.sinks = from_abi(a.sinks);
    c.variant.alibi_slopes = from_abi(a.alibi_slopes);
  }
  if (a.struct_size >= PAV_DECODE_ARGS_V3_SIZE) {  // version 3: the cache format
    // Values outside the enums stay visible as such: the check refuses them.
    c.layout = a.cache_layout == PAV_CACHE_LAYOUT_NHD   ? kernels::CacheLayout::nhd
               : a.cache_layout == PAV_CACHE_LAYOUT_HND ? kernels::CacheLayout::hnd
                                                        : kernels::CacheLayout::packed;
    c.page_table = a.page_table == PAV_PAGE_TABLE_CSR ? kernels::PageTable::csr : kernels::PageTable::block_table;
    c.kv_cache = from_abi(a.kv_cache);
    c.kv_indptr = from_abi(a.kv_indptr);
    c.kv_indices = from_abi(a.kv_indices);
    c.kv_last_page_len = from_abi(a.kv_last_page_len);
  }
  // Version 4: MLA. V is K's prefix view and its scale K's; any other value of
  // kv_storage leaves the call as its tensors say (the check judges them).
  if (a.struct_size >= sizeof(pav_decode_args)) c.v_latent = a.kv_storage == PAV_KV_LATENT;
  r.lse = from_abi(a.lse);
  r.max_partitions = a.max_partitions;
  r.stream = a.stream;
  if (a.work_info.rank > 0 || a.reduce_info.rank > 0) {
    *plan_storage = kernels::PlanView{};
    plan_storage->work_info = static_cast<int32_t*>(a.work_info.data);
    plan_storage->reduce_info = static_cast<int32_t*>(a.reduce_info.data);
    if (a.work_info.rank != 2 || a.work_info.shape[1] != 4 || a.work_info.dtype != PAV_DTYPE_I32)
      plan_storage->work_info = nullptr;
    if (a.reduce_info.rank != 2 || a.reduce_info.shape[1] != 2 || a.reduce_info.dtype != PAV_DTYPE_I32)
      plan_storage->reduce_info = nullptr;
    plan_storage->capacity = a.work_info.rank == 2 ? a.work_info.shape[0] : 0;
    plan_storage->num_seqs = a.reduce_info.rank == 2 ? a.reduce_info.shape[0] : 0;
    plan_storage->kv_heads = c.k_cache.rank >= 3 ? c.k_cache.shape[c.layout == kernels::CacheLayout::nhd ? 2 : 1] : 0;
    plan_storage->max_partitions = a.max_partitions;
    r.plan = plan_storage;
  }
  return r;
}

void set_message(char* buf, size_t size, const std::string& text) {
  if (!buf || size == 0) return;
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

}  // namespace pav::adapters::abi
