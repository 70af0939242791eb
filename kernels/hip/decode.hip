// SPDX-License-Identifier: Apache-2.0
// The decode entries (uniform_decode, planned_decode): a call's Params, the
// attention body chosen for it, and the launches of the attention, the reduce
// and the freshness check. The kernel bodies live one per file
// (decode_common.hpp lists them); numerics mirror kernels/cpu/decode_cpu.cpp.
#include "kernels/hip/decode_common.hpp"

namespace pav::kernels::gpu {
namespace {

PartialKind partial_kind_of(DType d) {
  switch (d) {
    case DType::f32: return PartialKind::f32;
    case DType::bf16: return PartialKind::bf16;
    case DType::f16: return PartialKind::f16;
    default: bad("partial dtype must be f32, bf16 or f16"); return PartialKind::f32;
  }
}

int scale_kind_of(const TensorView& s) {
  if (!s.present()) return kScaleNone;
  return s.numel() == 1 ? kScaleTensor : kScaleToken;
}

Params params_of(const DecodeCall& c, const Scratch& sc) {
  const CallDims d = dims_of(c);
  if (d.head_dim < kMinHeadDim || d.head_dim > kMaxHeadDim || d.head_dim % 16)
    bad("head_dim " + std::to_string(d.head_dim) + " outside 64..1024 or not a multiple of 16");
  if (d.v_layout == VLayout::unknown) bad("V cache layout matches neither form");
  if (d.v_layout == VLayout::trans && d.block_size % 16) bad("trans V layout needs block_size % 16 == 0");
  if (c.q.dtype != DType::bf16 && c.q.dtype != DType::f16) bad("q must be bf16 or f16");
  if (c.out.dtype != c.q.dtype) bad("out dtype must equal q dtype");
  if (!is_fp8(c.k_cache.dtype)) bad("cache must be fp8");
  if (c.q.stride[2] != 1 || c.out.stride[2] != 1) bad("head_dim stride of q/out must be 1");
  // K is read 16 codes at a time.
  if (reinterpret_cast<uintptr_t>(c.k_cache.data) % 16) bad("K cache must be 16-byte aligned");
  Params p{};
  p.q = c.q.as<const uint16_t>();
  p.q_s0 = c.q.stride[0];
  p.q_s1 = c.q.stride[1];
  p.out = c.out.as<uint16_t>();
  p.out_s0 = c.out.stride[0];
  p.out_s1 = c.out.stride[1];
  p.half_bf16 = c.q.dtype == DType::bf16;
  p.k = c.k_cache.as<const uint8_t>();
  p.v = c.v_cache.as<const uint8_t>();
  p.v_trans = d.v_layout == VLayout::trans;
  p.tables = c.block_tables.as<const int32_t>();
  p.tables_s0 = c.block_tables.stride[0];
  p.lens = c.context_lens.as<const int32_t>();
  p.k_scale = c.k_scale.as<const float>();
  p.v_scale = c.v_scale.as<const float>();
  p.k_scale_kind = scale_kind_of(c.k_scale);
  p.v_scale_kind = scale_kind_of(c.v_scale);
  p.num_seqs = int(d.num_seqs);
  p.q_len = int(d.q_len);
  p.hkv = int(d.hkv);
  p.group = int(d.group);
  p.head_dim = int(d.head_dim);
  p.block_size = int(d.block_size);
  p.block_shift = -1;
  for (int sh = 0; sh < 31; ++sh)
    if ((int64_t(1) << sh) == d.block_size) p.block_shift = sh;
  p.rows = int(d.rows);
  p.softmax_scale = d.softmax_scale;
  p.fp8_compute = is_fp8(c.opt.compute);
  p.compute_fp8 = p.fp8_compute ? c.opt.compute : c.k_cache.dtype;
  p.cache_fp8 = c.k_cache.dtype;
  p.fp8_max = p.fp8_compute ? fp8_max(c.opt.compute) : 0.0f;
  p.cu = int(c.opt.cu);
  p.partial = sc.partial.data;
  p.partial_kind = partial_kind_of(c.opt.partial);
  p.m = sc.m.as<float>();
  p.l = sc.l.as<float>();
  return p;
}

void check_scratch(const Scratch& sc, const Params& p, int64_t slots, DType partial) {
  const int64_t need = slots * p.rows;
  if (sc.partial.dtype != partial) bad("scratch partial dtype differs from the call's partial dtype");
  if (sc.partial.numel() < need * p.head_dim || sc.m.numel() < need || sc.l.numel() < need)
    bad("scratch holds fewer than " + std::to_string(slots) + " slots");
}

// The attention over `slots` blocks: the matrix-unit body where it applies
// (NVIDIA, e4m3fn compute and cache, head_dim 64/128/256, per-tensor or no V
// scale, 16-byte aligned caches), else the fast scalar body (fp8 compute,
// head_dim 64/128/256, aligned), else the general one.
bool fast_attention_applies(const Params& p) {
  const bool aligned = reinterpret_cast<uintptr_t>(p.k) % 16 == 0 && reinterpret_cast<uintptr_t>(p.v) % 16 == 0;
  return p.fp8_compute && aligned && p.block_size % 16 == 0 &&
         (p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256);
}

#if defined(PAV_HIP_NVIDIA)
bool mma_attention_applies(const Params& p) {
  return fast_attention_applies(p) && p.compute_fp8 == DType::fp8_e4m3fn && p.cache_fp8 == DType::fp8_e4m3fn &&
         p.v_scale_kind != kScaleToken;
}
#endif

// Launches the attention and names the body that ran.
AttentionBody launch_attention(const Params& p, int64_t slots, hipStream_t s, const char* what) {
  const unsigned grid = unsigned(slots);
  AttentionBody body;
#if defined(PAV_HIP_NVIDIA)
  if (mma_attention_applies(p)) {
    // 8, 16, 24 or 32 query rows per pass over the KV.
    if (p.rows <= 8)
      launch_mma_rows<1>(p, grid, s);
    else if (p.rows <= 16)
      launch_mma_rows<2>(p, grid, s);
    else if (p.rows <= 24)
      launch_mma_rows<3>(p, grid, s);
    else
      launch_mma_rows<4>(p, grid, s);
    check_launch(what);
    return AttentionBody::matrix;
  }
#endif
  if (fast_attention_applies(p)) {
    if (p.rows <= 8)
      launch_fast<8>(p, grid, s);
    else
      launch_fast<16>(p, grid, s);
    body = AttentionBody::fast_scalar;
  } else {
    launch_general(p, grid, s);
    body = AttentionBody::general;
  }
  check_launch(what);
  return body;
}

}  // namespace

LaunchRecord uniform_decode(const DecodeCall& call, const Scratch& scratch, StreamHandle stream) {
  Params p = params_of(call, Scratch{});
  const int splits = uniform_splits(call);
  if (splits < 1 || splits > kMaxUniformPartitions) bad("uniform split count " + std::to_string(splits));
  p.planned = false;
  p.splits = splits;
  p.direct = splits == 1;
  p.ceiling = splits;
  const int64_t slots = int64_t(p.num_seqs) * p.hkv * splits;
  if (!p.direct) {
    check_scratch(scratch, p, slots, call.opt.partial);
    p.partial = scratch.partial.data;
    p.m = scratch.m.as<float>();
    p.l = scratch.l.as<float>();
  }
  const hipStream_t s = static_cast<hipStream_t>(stream);
  LaunchRecord rec;
  rec.attention_blocks = slots;
  if (slots == 0) return rec;
  rec.body = launch_attention(p, slots, s, "uniform attention");
  if (!p.direct) launch_reduce(p, s);
  rec.reduce = !p.direct && p.num_seqs > 0;
  return rec;
}

LaunchRecord planned_decode(const DecodeCall& call, const PlanView& plan, const Scratch& scratch,
                    uint32_t* dev_status, StreamHandle stream) {
  Params p = params_of(call, scratch);
  if (plan.num_seqs != p.num_seqs) bad("plan rows differ from num_seqs");
  if (plan.kv_heads != p.hkv) bad("plan kv_heads differ from the call's");
  if (plan.num_seqs > kMaxPlanBatch) bad("plan larger than kMaxPlanBatch");
  if (plan.capacity < 1 || plan.max_partitions < 1) bad("plan without capacity");
  if (!is_fp8(call.opt.compute)) bad("planned decode needs fp8 compute");
  p.planned = true;
  p.splits = 0;
  p.direct = false;
  p.work = plan.work_info;
  p.reduce_info = plan.reduce_info;
  p.capacity = plan.capacity;
  p.ceiling = plan.max_partitions;
  check_scratch(scratch, p, int64_t(p.hkv) * plan.capacity, call.opt.partial);
  const hipStream_t s = static_cast<hipStream_t>(stream);
  launch_check(p, dev_status, s);
  LaunchRecord rec;
  rec.attention_blocks = int64_t(p.hkv) * plan.capacity;
  rec.body = launch_attention(p, rec.attention_blocks, s, "planned attention");
  launch_reduce(p, s);
  rec.reduce = p.num_seqs > 0;
  return rec;
}

const char* to_string(AttentionBody b) {
  switch (b) {
    case AttentionBody::matrix: return "matrix";
    case AttentionBody::fast_scalar: return "fast-scalar";
    case AttentionBody::general: return "general";
  }
  return "?";
}

DecodeResult status_from_words(const uint32_t w[kStatusWords]) {
  DecodeResult r;
  r.status = w[0] ? DecodeStatus::stale_plan : DecodeStatus::ok;
  r.stale_tasks = w[1];
  r.stale_rows = w[2];
  return r;
}

DecodeResult read_status(const uint32_t* dev_status, StreamHandle stream) {
  uint32_t w[kStatusWords] = {};
  copy_to_host(w, dev_status, sizeof(w), stream);
  return status_from_words(w);
}

}  // namespace pav::kernels::gpu
