// SPDX-License-Identifier: Apache-2.0
#include "kernels/hip/tests/gpu_test_support.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "kernels/codecs.hpp"
#include "kernels/cpu/decode_cpu.hpp"
#include "kernels/split_rules.hpp"
#include "reference/compare.hpp"
#include "reference/decode.hpp"

namespace pav::kernels::gpu::testing {

int select_ctest_device() {
  int device = 0;
  if (const char* g = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS")) {
    // "id:N,slots:1"
    const char* id = std::strstr(g, "id:");
    if (id) device = std::atoi(id + 3);
  }
  set_device(device);
  return device;
}

// ---- device case -----------------------------------------------------------------
namespace {
template <class T, class A>
DeviceBuffer upload(const std::vector<T, A>& v) {
  DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 16));
  copy_to_device(b.data(), v.data(), v.size() * sizeof(T));
  return b;
}
}  // namespace

DeviceCase::DeviceCase(const props::HostCase& host)
    : q(upload(host.q)), out(upload(host.out)), k(upload(host.k)), v(upload(host.v)),
      tables(upload(host.block_tables)), lens(upload(host.lens)), k_scale(upload(host.k_scale)),
      v_scale(upload(host.v_scale)), out_bytes(host.out.size() * 2) {
  props::HostCase copy = host;  // call() takes views of a mutable case
  call_ = copy.call();
  call_.q.data = q.data();
  call_.out.data = out.data();
  call_.k_cache.data = k.data();
  call_.v_cache.data = v.data();
  call_.block_tables.data = tables.data();
  call_.context_lens.data = lens.data();
  if (call_.k_scale.present()) call_.k_scale.data = k_scale.data();
  if (call_.v_scale.present()) call_.v_scale.data = v_scale.data();
  synchronize(nullptr);
}

void DeviceCase::poison_output(StreamHandle s) { fill_bytes(out.data(), 0xff, out_bytes, s); }

std::vector<uint16_t> DeviceCase::download_output(StreamHandle s) const {
  std::vector<uint16_t> h(out_bytes / 2);
  copy_to_host(h.data(), out.data(), out_bytes, s);
  return h;
}

void DeviceCase::upload_lens(const std::vector<int32_t>& l, StreamHandle s) {
  copy_to_device(lens.data(), l.data(), l.size() * 4, s);
  synchronize(s);
}

void DeviceCase::upload_caches(const props::HostCase& host, StreamHandle s) {
  copy_to_device(k.data(), host.k.data(), host.k.size(), s);
  copy_to_device(v.data(), host.v.data(), host.v.size(), s);
  synchronize(s);
}

DeviceScratch::DeviceScratch(const DecodeCall& call, int64_t n) {
  const CallDims d = dims_of(call);
  slots = std::max<int64_t>(n, 1);
  rows = d.rows;
  head_dim = d.head_dim;
  dtype = call.opt.partial;
  partial = DeviceBuffer(size_t(slots * rows * head_dim * dtype_size(dtype)));
  m = DeviceBuffer(size_t(slots * rows * 4));
  l = DeviceBuffer(size_t(slots * rows * 4));
  view.partial = TensorView::contiguous_of(partial.data(), dtype, {slots, rows, head_dim});
  view.m = TensorView::contiguous_of(m.data(), DType::f32, {slots, rows});
  view.l = TensorView::contiguous_of(l.data(), DType::f32, {slots, rows});
  poison();
  synchronize(nullptr);
}

void DeviceScratch::poison(StreamHandle s) {
  fill_bytes(partial.data(), 0xff, partial.bytes(), s);
  fill_bytes(m.data(), 0xff, m.bytes(), s);
  fill_bytes(l.data(), 0xff, l.bytes(), s);
}

HostScratch::HostScratch(const DecodeCall& call, int64_t n) {
  const CallDims d = dims_of(call);
  slots = std::max<int64_t>(n, 1);
  rows = d.rows;
  head_dim = d.head_dim;
  dtype = call.opt.partial;
  partial.assign(size_t(slots * rows * head_dim * dtype_size(dtype)), 0xff);
  m.assign(size_t(slots * rows), std::numeric_limits<float>::quiet_NaN());
  l.assign(size_t(slots * rows), std::numeric_limits<float>::quiet_NaN());
  view.partial = TensorView::contiguous_of(partial.data(), dtype, {slots, rows, head_dim});
  view.m = TensorView::contiguous_of(m.data(), DType::f32, {slots, rows});
  view.l = TensorView::contiguous_of(l.data(), DType::f32, {slots, rows});
}

float HostScratch::partial_at(int64_t i) const {
  if (dtype == DType::f32) {
    float f;
    std::memcpy(&f, &partial[size_t(i) * 4], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &partial[size_t(i) * 2], 2);
  return dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

void HostScratch::download(const DeviceScratch& d, StreamHandle s) {
  copy_to_host(partial.data(), d.partial.data(), partial.size(), s);
  copy_to_host(m.data(), d.m.data(), m.size() * 4, s);
  copy_to_host(l.data(), d.l.data(), l.size() * 4, s);
}

DevicePlan::DevicePlan(const PlanParams& p) : params(resolve(p)) {
  capacity = plan_capacity_of(params);  // either policy
  work = DeviceBuffer(size_t(capacity * 4 * 4));
  reduce = DeviceBuffer(size_t(params.num_seqs * 2 * 4));
  // Garbage before the first refresh, so a refresh that skips a slot shows.
  fill_bytes(work.data(), 0x5a, work.bytes());
  fill_bytes(reduce.data(), 0x5a, reduce.bytes());
  synchronize(nullptr);
}

PlanView DevicePlan::view() {
  return PlanView{work.as<int32_t>(), reduce.as<int32_t>(), params.num_seqs, params.kv_heads,
                  params.max_partitions, capacity};
}

void DevicePlan::refresh(const int32_t* dev_lens, StreamHandle s) {
  refresh_plan(dev_lens, params, capacity, work.as<int32_t>(), reduce.as<int32_t>(), s);
}

void DevicePlan::download(std::vector<int32_t>& w, std::vector<int32_t>& r, StreamHandle s) const {
  w.resize(size_t(capacity * 4));
  r.resize(size_t(params.num_seqs * 2));
  copy_to_host(w.data(), work.data(), w.size() * 4, s);
  copy_to_host(r.data(), reduce.data(), r.size() * 4, s);
}

// ---- layouts -----------------------------------------------------------------------
Layout uniform_layout(const DecodeCall& c) {
  const CallDims d = dims_of(c);
  const int64_t splits = uniform_splits(c);
  Layout L;
  L.direct = splits == 1;
  L.slots = d.num_seqs * d.hkv * splits;
  const int32_t* lens = c.context_lens.as<const int32_t>();
  for (int64_t s = 0; s < d.num_seqs; ++s)
    for (int64_t h = 0; h < d.hkv; ++h) {
      const int64_t tiles = plan_tiles(lens[s]);
      const int64_t per = ceil_div64(std::max<int64_t>(tiles, 1), splits);
      for (int64_t k = 0; k < splits; ++k)
        L.parts.push_back({s, h, std::min(k * per, tiles), std::min((k + 1) * per, tiles),
                           (s * d.hkv + h) * splits + k});
      L.merges.push_back({s, h, (s * d.hkv + h) * splits, splits});
    }
  return L;
}

Layout planned_layout(const DecodeCall& c, const WorkPlan& plan) {
  const CallDims d = dims_of(c);
  const int64_t cap = plan.capacity();
  Layout L;
  L.slots = d.hkv * cap;
  const auto& w = plan.work_info();
  const auto& r = plan.reduce_info();
  const int64_t active = plan.active_tasks();
  for (int64_t h = 0; h < d.hkv; ++h) {
    for (int64_t i = 0; i < active; ++i)
      if (w[4 * i + 1] < w[4 * i + 2]) L.parts.push_back({w[4 * i], h, w[4 * i + 1], w[4 * i + 2], h * cap + i});
    for (int64_t s = 0; s < d.num_seqs; ++s) L.merges.push_back({s, h, h * cap + r[2 * s], r[2 * s + 1]});
  }
  return L;
}

// ---- the enclosure model ------------------------------------------------------------
// Derivation of the GPU vs CPU bound. Both backends run the same algorithm on
// the same inputs: identical Q quantization (correctly rounded division and
// the shared codec), the same partitions and tiles, the same masking. They
// may differ only in
//   (a) fp32 summation order and FMA contraction inside dot products and sums,
//   (b) the exp implementation (glibc expf < 1 ulp, CUDA expf <= 2 ulp),
//   (c) and, through (a) and (b), the fp8 rounding of P * FP8_MAX flipping to
//       the neighbouring code when it lands near a rounding boundary, and the
//       final roundings to the partial and output dtypes flipping likewise.
// Rather than bounding the difference, we enclose each backend's value: every
// quantity is carried as an interval [lo, hi] (in double) that contains the
// value either backend computes, with u = 2^-24 and gamma(n) = n*u/(1 - n*u):
// - score s_t: the exact dot (double) times the scales; any summation order of
//   D exact fp8 products plus three product roundings errs by at most
//   e_t = gamma(D + 4) * sum_d |q8_d k8_td| * |q_scale * softmax_scale * k_scale|;
// - running max m after a tile: within E = max e_t over the tokens seen;
// - p_t = exp(fl(s_t - m)): exponent within (s - m) +- (e_t + E), one rounding,
//   then exp within 5u relative (2 ulp = 4u) plus 3 * 2^-149 absolute below the
//   normal range;
// - P's fp8 code: rounding is monotone, so the code lies between the codes of
//   the interval's ends (a flip shows as an interval two codes wide; elsewhere
//   both backends provably take the same code);
// - l, acc (acc * alpha then the tile's terms, any order): interval sums
//   widened by gamma(n + 2) * sum of magnitudes; alpha like p;
// - the stored partial acc * (v_scale/FP8_MAX) / l: 5u, then rounding to the
//   partial dtype maps [lo, hi] to [RN(lo), RN(hi)] (monotone);
// - reduce: M, w_p = l_p exp(m_p - M), c_p = w_p / sum w (monotone in each w,
//   so bounded without the self-correlation loss), out = sum c_p O_p with
//   gamma(2P) widening, then RN to the output dtype. One non-empty partition
//   gives c = 1 exactly in both (x/x == 1).
// An element's enclosure is then usually a single representable value (both
// must agree bit for bit) and at most a few ulps where a rounding boundary
// falls inside it. The model is itself checked: the CPU backend must lie in
// every enclosure too.
namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24
constexpr double kTinyAbs = 3.0 * 1.4012984643248171e-45;

double gamma(double n) { return n * kU / (1.0 - n * kU); }

struct Iv {
  double lo, hi;
};

float down_f32(double x) {
  float f = float(x);
  if (double(f) > x) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}
float up_f32(double x) {
  float f = float(x);
  if (double(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}
// Rounded to a dtype (f32 computed value first, then the dtype's rounding).
double round_to(double x_lo_or_hi, bool up, DType t) {
  const float f = up ? up_f32(x_lo_or_hi) : down_f32(x_lo_or_hi);
  switch (t) {
    case DType::bf16: return bf16_to_f32(f32_to_bf16(f));
    case DType::f16: return f16_to_f32(f32_to_f16(f));
    default: return f;
  }
}
Iv round_iv(Iv x, DType t) { return {round_to(x.lo, false, t), round_to(x.hi, true, t)}; }

Iv exp_iv(Iv x) {
  const double lo = std::max(0.0, std::exp(x.lo) * (1 - 5 * kU) - kTinyAbs);
  const double hi = std::exp(x.hi) * (1 + 5 * kU) + kTinyAbs;
  return {lo, hi};
}
// The exponent fl(a - b) with a - b in [c - d, c + d].
Iv sub_iv(double c, double d) {
  return {(c - d) - kU * std::fabs(c - d), (c + d) + kU * std::fabs(c + d)};
}
Iv mul_pos(Iv a, Iv b) {  // b >= 0
  const double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
}
Iv widen(Iv x, double w) { return {x.lo - w, x.hi + w}; }
double mag(Iv x) { return std::max(std::fabs(x.lo), std::fabs(x.hi)); }

struct PartResult {
  bool empty = true;
  Iv m{0, 0}, l{0, 0};
  std::vector<Iv> o;  // stored partial (after rounding to the partial dtype) or direct output
};

struct Geometry {
  CallDims d;
  const DecodeCall* c;
  bool fp8;
  DType compute;
  float fmax;
  std::array<float, 256> lut;
};

float scale_of(const TensorView& s, const CallDims& d, int64_t blk, int64_t h, int64_t off) {
  if (!s.present()) return 1.0f;
  const float* p = s.as<const float>();
  if (s.numel() == 1) return p[0];
  return p[(blk * d.hkv + h) * d.block_size + off];
}

// Q row r of (seq, h) as the kernels use it: q8 codes (as values) and q_scale.
void q_row(const Geometry& g, int64_t seq, int64_t h, int64_t r, std::vector<double>& q8, float& qs) {
  const DecodeCall& c = *g.c;
  const int64_t D = g.d.head_dim, G = g.d.group, pos = r / G, gi = r % G;
  std::vector<float> q(D);
  float amax = 0.0f;
  for (int64_t dd = 0; dd < D; ++dd) {
    const uint16_t bits = c.q.as<const uint16_t>()[(seq * g.d.q_len + pos) * c.q.stride[0] + (h * G + gi) * c.q.stride[1] + dd];
    q[dd] = c.q.dtype == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    amax = std::max(amax, std::fabs(q[dd]));
  }
  q8.resize(D);
  qs = 1.0f;
  if (g.fp8) {
    qs = std::max(amax / g.fmax, 1e-20f);
    for (int64_t dd = 0; dd < D; ++dd) q8[dd] = fp8_to_f32(f32_to_fp8(q[dd] / qs, g.compute), g.compute);
  } else {
    for (int64_t dd = 0; dd < D; ++dd) q8[dd] = q[dd];
  }
}

PartResult enclose_part(const Geometry& g, const Partition& pt, int64_t r, const std::vector<double>& q8,
                        float qs, DType store) {
  const DecodeCall& c = *g.c;
  const CallDims& d = g.d;
  const int64_t D = d.head_dim, bs = d.block_size, pos = r / d.group;
  const int64_t len = c.context_lens.as<const int32_t>()[pt.seq];
  const int32_t* table = c.block_tables.as<const int32_t>() + pt.seq * c.block_tables.stride[0];
  const uint8_t* kc = c.k_cache.as<const uint8_t>();
  const uint8_t* vc = c.v_cache.as<const uint8_t>();
  const bool per_token_v = c.v_scale.present() && c.v_scale.numel() > 1;
  const double qsm = double(qs) * double(d.softmax_scale);
  PartResult res;
  std::vector<Iv> acc(D, Iv{0, 0});
  double m_d = -INFINITY, E = 0;
  Iv l{0, 0};
  std::vector<double> s(kTileTokens), e(kTileTokens), kv(D);
  std::vector<Iv> w(kTileTokens);
  for (int64_t tile = pt.tile0; tile < pt.tile1; ++tile) {
    const int64_t t0 = tile * kTileTokens;
    const int64_t n = std::min<int64_t>(kTileTokens, len - t0);
    if (n <= 0) break;
    const int64_t visible = std::min<int64_t>(n, len - d.q_len + 1 + pos - t0);
    if (visible <= 0) continue;
    double tmax = -INFINITY, emax = E;
    for (int64_t i = 0; i < visible; ++i) {
      const int64_t t = t0 + i, blk = table[t / bs], off = t % bs;
      double dot = 0, a = 0;
      for (int64_t dd = 0; dd < D; ++dd) {
        const double prod = q8[dd] * double(g.lut[kc[k_offset(blk, pt.h, dd, off, d.hkv, D, bs)]]);
        dot += prod;
        a += std::fabs(prod);
      }
      const double ks = scale_of(c.k_scale, d, blk, pt.h, off);
      const double sc = std::fabs(qsm * ks);
      s[i] = dot * qsm * ks;
      e[i] = (gamma(double(D + 4)) + double(D) * 1.2e-16) * a * sc + 1e-38;
      tmax = std::max(tmax, s[i]);
      emax = std::max(emax, e[i]);
    }
    const double m_new = std::max(m_d, tmax);
    Iv alpha{0, 0};
    const bool first = res.empty;
    if (!first) alpha = exp_iv(sub_iv(m_d - m_new, E + emax));
    // P, its sum and the PV weights.
    Iv lsum{0, 0};
    for (int64_t i = 0; i < visible; ++i) {
      const Iv p = exp_iv(sub_iv(s[i] - m_new, e[i] + emax));
      lsum.lo += p.lo;
      lsum.hi += p.hi;
      Iv wi = p;
      if (g.fp8) {
        const float ylo = down_f32(p.lo * g.fmax * (1 - kU)), yhi = up_f32(p.hi * g.fmax * (1 + kU));
        wi = {fp8_to_f32(f32_to_fp8(ylo, g.compute), g.compute), fp8_to_f32(f32_to_fp8(yhi, g.compute), g.compute)};
      }
      if (per_token_v) {
        const int64_t t = t0 + i, blk = table[t / bs], off = t % bs;
        const double vs = scale_of(c.v_scale, d, blk, pt.h, off);
        wi = {wi.lo * vs * (1 - kU), wi.hi * vs * (1 + kU)};
        if (vs < 0) wi = {wi.hi, wi.lo};
      }
      w[i] = wi;
    }
    const double gn = gamma(double(visible + 2));
    lsum = {lsum.lo * (1 - gn), lsum.hi * (1 + gn)};
    if (first) {
      l = lsum;
    } else {
      l = {(l.lo * alpha.lo + lsum.lo) * (1 - 2 * kU), (l.hi * alpha.hi + lsum.hi) * (1 + 2 * kU)};
    }
    for (int64_t dd = 0; dd < D; ++dd) {
      Iv a = first ? Iv{0, 0} : mul_pos(acc[dd], alpha);
      double magsum = mag(a);
      for (int64_t i = 0; i < visible; ++i) {
        const int64_t t = t0 + i, blk = table[t / bs], off = t % bs;
        const double v = g.lut[vc[v_offset(d.v_layout, blk, pt.h, dd, off, d.hkv, D, bs)]];
        const Iv term = v >= 0 ? Iv{w[i].lo * v, w[i].hi * v} : Iv{w[i].hi * v, w[i].lo * v};
        a.lo += term.lo;
        a.hi += term.hi;
        magsum += mag(term);
      }
      acc[dd] = widen(a, gn * magsum);
    }
    m_d = m_new;
    E = emax;
    res.empty = false;
  }
  res.o.assign(D, Iv{0, 0});
  if (res.empty) {
    res.m = {-INFINITY, -INFINITY};
    res.l = {0, 0};
    return res;
  }
  res.m = {m_d - E, m_d + E};
  res.l = l;
  const double vs_tensor = per_token_v ? 1.0 : scale_of(c.v_scale, d, 0, 0, 0);
  const double epi = vs_tensor / (g.fp8 ? double(g.fmax) : 1.0);
  for (int64_t dd = 0; dd < D; ++dd) {
    const Iv a = acc[dd];
    Iv o{a.lo >= 0 ? a.lo / l.hi : a.lo / l.lo, a.hi >= 0 ? a.hi / l.lo : a.hi / l.hi};
    o = epi >= 0 ? Iv{o.lo * epi, o.hi * epi} : Iv{o.hi * epi, o.lo * epi};
    o = widen(o, 5 * kU * mag(o));
    res.o[dd] = round_iv(o, store);
  }
  return res;
}

}  // namespace

Enclosure enclose(const DecodeCall& c, const Layout& layout, const std::vector<uint8_t>& stale) {
  Geometry g;
  g.d = dims_of(c);
  g.c = &c;
  g.fp8 = is_fp8(c.opt.compute);
  g.compute = g.fp8 ? c.opt.compute : c.k_cache.dtype;
  g.fmax = g.fp8 ? fp8_max(c.opt.compute) : 1.0f;
  for (int i = 0; i < 256; ++i) g.lut[i] = fp8_to_f32(uint8_t(i), c.k_cache.dtype);
  const CallDims& d = g.d;
  const int64_t D = d.head_dim, rows = d.rows, G = d.group;
  const DType store = layout.direct ? c.out.dtype : c.opt.partial;

  Enclosure e;
  const int64_t slots = std::max<int64_t>(layout.slots, 1);
  e.part_lo.assign(slots * rows * D, 0);
  e.part_hi.assign(slots * rows * D, 0);
  e.m_lo.assign(slots * rows, 0);
  e.m_hi.assign(slots * rows, 0);
  e.l_lo.assign(slots * rows, 0);
  e.l_hi.assign(slots * rows, 0);
  e.slot_written.assign(slots, 0);
  e.seq_nan.assign(d.num_seqs, 0);
  for (int64_t s = 0; s < d.num_seqs && s < int64_t(stale.size()); ++s) e.seq_nan[s] = stale[s];
  const int64_t out_elems = d.num_seqs * d.q_len * d.hq * D;
  e.out_lo.assign(out_elems, 0);
  e.out_hi.assign(out_elems, 0);

  // Stale sequences are not attended: their slots keep whatever was there.
  std::vector<Partition> parts;
  for (const Partition& p : layout.parts)
    if (!e.seq_nan[p.seq]) parts.push_back(p);
  std::vector<uint8_t> empty(slots * rows, 1);
  tbb::parallel_for(size_t(0), parts.size(), [&](size_t k) {
    const Partition& pt = parts[k];
    std::vector<double> q8;
    for (int64_t r = 0; r < rows; ++r) {
      float qs;
      q_row(g, pt.seq, pt.h, r, q8, qs);
      const PartResult pr = enclose_part(g, pt, r, q8, qs, store);
      const int64_t row = pt.slot * rows + r;
      empty[row] = pr.empty;
      e.m_lo[row] = pr.m.lo;
      e.m_hi[row] = pr.m.hi;
      e.l_lo[row] = pr.l.lo;
      e.l_hi[row] = pr.l.hi;
      for (int64_t dd = 0; dd < D; ++dd) {
        e.part_lo[row * D + dd] = pr.o[dd].lo;
        e.part_hi[row * D + dd] = pr.o[dd].hi;
      }
    }
  });
  for (const Partition& p : parts) e.slot_written[p.slot] = 1;

  auto out_index = [&](int64_t seq, int64_t h, int64_t r, int64_t dd) {
    const int64_t pos = r / G, gi = r % G;
    return ((seq * d.q_len + pos) * d.hq + h * G + gi) * D + dd;
  };
  if (layout.direct) {
    for (const Partition& p : parts)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t dd = 0; dd < D; ++dd) {
          const int64_t src = (p.slot * rows + r) * D + dd, dst = out_index(p.seq, p.h, r, dd);
          e.out_lo[dst] = e.part_lo[src];
          e.out_hi[dst] = e.part_hi[src];
        }
    return e;
  }
  tbb::parallel_for(size_t(0), layout.merges.size(), [&](size_t k) {
    const Merge& mg = layout.merges[k];
    if (e.seq_nan[mg.seq]) return;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> live;  // slots of non-empty partitions
      for (int64_t q = 0; q < mg.count; ++q)
        if (!empty[(mg.base + q) * rows + r]) live.push_back(mg.base + q);
      const DType out_t = c.out.dtype;
      if (live.empty()) {
        for (int64_t dd = 0; dd < D; ++dd) e.out_lo[out_index(mg.seq, mg.h, r, dd)] = e.out_hi[out_index(mg.seq, mg.h, r, dd)] = 0;
        continue;
      }
      const size_t P = live.size();
      std::vector<Iv> coef(P);
      if (P == 1) {
        coef[0] = {1, 1};
      } else {
        double M_lo = -INFINITY, M_hi = -INFINITY;
        for (int64_t sl : live) {
          M_lo = std::max(M_lo, e.m_lo[sl * rows + r]);
          M_hi = std::max(M_hi, e.m_hi[sl * rows + r]);
        }
        std::vector<Iv> w(P);
        double sum_lo = 0, sum_hi = 0;
        for (size_t i = 0; i < P; ++i) {
          const int64_t at = live[i] * rows + r;
          const double lo = e.m_lo[at] - M_hi, hi = e.m_hi[at] - M_lo;
          const Iv x{lo - kU * std::fabs(lo), hi + kU * std::fabs(hi)};
          const Iv ex = exp_iv(x);
          w[i] = {e.l_lo[at] * ex.lo * (1 - kU), e.l_hi[at] * ex.hi * (1 + kU)};
          sum_lo += w[i].lo;
          sum_hi += w[i].hi;
        }
        const double gs = gamma(double(P + 1));
        for (size_t i = 0; i < P; ++i) {
          const double lo = w[i].lo / (w[i].lo + (sum_hi - w[i].hi)) * (1 - gs);
          const double hi = w[i].hi / (w[i].hi + (sum_lo - w[i].lo)) * (1 + gs);
          coef[i] = {lo, std::min(hi, 1.0 + gs)};
        }
      }
      for (int64_t dd = 0; dd < D; ++dd) {
        Iv o{0, 0};
        double magsum = 0;
        for (size_t i = 0; i < P; ++i) {
          const int64_t at = (live[i] * rows + r) * D + dd;
          const Iv part{e.part_lo[at], e.part_hi[at]};
          const Iv t = mul_pos(part, coef[i]);
          o.lo += t.lo;
          o.hi += t.hi;
          magsum += mag(t);
        }
        if (P > 1) o = widen(o, gamma(double(2 * P)) * magsum);
        const Iv rr = round_iv(o, out_t);
        const int64_t idx = out_index(mg.seq, mg.h, r, dd);
        e.out_lo[idx] = rr.lo;
        e.out_hi[idx] = rr.hi;
      }
    }
  });
  return e;
}

// ---- checks ----------------------------------------------------------------------------
namespace {
float half_value(uint16_t bits, DType t) { return t == DType::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits); }
}  // namespace

CheckReport check_output(const DecodeCall& c, const std::vector<uint16_t>& out, const Enclosure& e,
                         const std::string& who) {
  const CallDims d = dims_of(c);
  const int64_t per_seq = d.q_len * d.hq * d.head_dim;
  CheckReport rep;
  for (int64_t i = 0; i < int64_t(e.out_lo.size()); ++i) {
    const int64_t seq = i / per_seq;
    const float v = half_value(out[size_t(i)], c.out.dtype);
    ++rep.checked;
    bool ok;
    if (e.seq_nan[seq]) {
      ok = std::isnan(v);
    } else {
      ok = double(v) >= e.out_lo[i] && double(v) <= e.out_hi[i];
      rep.widest = std::max(rep.widest, e.out_hi[i] - e.out_lo[i]);
      rep.single += e.out_hi[i] == e.out_lo[i];
    }
    if (!ok && rep.outside++ == 0) {
      const int64_t rest = i % per_seq, pos = rest / (d.hq * d.head_dim), head = (rest / d.head_dim) % d.hq,
                    dd = rest % d.head_dim;
      std::ostringstream os;
      os.precision(9);
      os << who << " out[seq " << seq << ", pos " << pos << ", head " << head << ", d " << dd << "] = " << v
         << (e.seq_nan[seq] ? " expected NaN (stale plan)" : " outside [") ;
      if (!e.seq_nan[seq]) os << e.out_lo[i] << ", " << e.out_hi[i] << "]";
      rep.first = os.str();
    }
  }
  return rep;
}

CheckReport check_scratch(const HostScratch& s, const Layout& layout, const Enclosure& e,
                          const std::string& who) {
  CheckReport rep;
  const int64_t rows = s.rows, D = s.head_dim;
  for (const Partition& p : layout.parts) {
    if (!e.slot_written[p.slot]) continue;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = p.slot * rows + r;
      const double m = s.m[row], l = s.l[row];
      const bool empty = e.l_hi[row] == 0;
      bool ok = empty ? (std::isinf(m) && m < 0 && l == 0)
                      : (m >= e.m_lo[row] && m <= e.m_hi[row] && l >= e.l_lo[row] && l <= e.l_hi[row]);
      ++rep.checked;
      std::ostringstream os;
      os.precision(9);
      if (!ok) os << who << " slot " << p.slot << " row " << r << ": m = " << m << " in [" << e.m_lo[row] << ", " << e.m_hi[row]
                  << "]?, l = " << l << " in [" << e.l_lo[row] << ", " << e.l_hi[row] << "]?";
      for (int64_t dd = 0; dd < D && ok; ++dd) {
        const int64_t at = row * D + dd;
        const double v = s.partial_at(at);
        ++rep.checked;
        ok = v >= e.part_lo[at] && v <= e.part_hi[at];
        if (!ok) os << who << " partial[slot " << p.slot << ", row " << r << ", d " << dd << "] = " << v << " outside ["
                    << e.part_lo[at] << ", " << e.part_hi[at] << "]";
        else {
          rep.widest = std::max(rep.widest, e.part_hi[at] - e.part_lo[at]);
          rep.single += e.part_hi[at] == e.part_lo[at];
        }
      }
      if (!ok && rep.outside++ == 0) rep.first = os.str();
    }
  }
  return rep;
}

int64_t touched_unwritten_slots(const HostScratch& s, const Layout& layout, const Enclosure& e) {
  int64_t touched = 0;
  const int64_t rows = s.rows, D = s.head_dim;
  for (int64_t slot = 0; slot < std::min(s.slots, layout.slots); ++slot) {
    if (e.slot_written[slot]) continue;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = slot * rows + r;
      if (!std::isnan(s.m[row]) || !std::isnan(s.l[row])) ++touched;
      for (int64_t dd = 0; dd < D; ++dd)
        if (!std::isnan(s.partial_at(row * D + dd))) ++touched;
    }
  }
  return touched;
}

std::string describe(const props::CaseSpec& s) {
  std::ostringstream os;
  os << "lens [";
  for (size_t i = 0; i < s.lens.size(); ++i) os << (i ? "," : "") << s.lens[i];
  os << "] q_len " << s.q_len << " hkv " << s.hkv << " G " << s.group << " D " << s.head_dim << " bs "
     << s.block_size << " v " << (s.v_layout == VLayout::trans ? "trans" : "plain") << " q "
     << to_string(s.q_dtype) << " partial " << to_string(s.opt.partial) << " compute "
     << to_string(s.opt.compute) << " scales " << int(s.scales) << " cu " << s.opt.cu << " splits "
     << s.opt.uniform_partitions << " maxp " << s.max_partitions << " seed " << s.seed;
  return os.str();
}

}  // namespace pav::kernels::gpu::testing

// ---- whole-case runner -----------------------------------------------------------------

namespace pav::kernels::gpu::testing {

void poison_past(props::HostCase& hc, const std::vector<int32_t>& new_lens) {
  const props::CaseSpec& s = hc.spec;
  const int64_t B = int64_t(new_lens.size()), D = s.head_dim, H = s.hkv, bs = s.block_size;
  const uint8_t nan = s.cache_dtype == DType::fp8_e4m3fnuz ? 0x80 : 0x7f;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t old_blocks = hc.spec.lens[b] > 0 ? (int64_t(hc.spec.lens[b]) + bs - 1) / bs : 0;
    const int64_t blocks = std::min(old_blocks, hc.max_blocks);
    for (int64_t t = std::max<int32_t>(new_lens[b], 0); t < blocks * bs; ++t) {
      const int64_t blk = hc.block_tables[b * hc.max_blocks + t / bs], off = t % bs;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          hc.k[k_offset(blk, h, d, off, H, D, bs)] = nan;
          hc.v[v_offset(s.v_layout, blk, h, d, off, H, D, bs)] = nan;
        }
    }
  }
}

std::vector<uint8_t> stale_sequences(const WorkPlan& plan, const std::vector<int32_t>& live) {
  const auto& w = plan.work_info();
  const auto& r = plan.reduce_info();
  std::vector<uint8_t> stale(live.size(), 0);
  for (size_t b = 0; b < live.size(); ++b) {
    const int64_t first = r[2 * b], count = r[2 * b + 1];
    if (count == 0 && live[b] > 0) stale[b] = 1;
    for (int64_t p = 0; p < count; ++p)
      if (w[4 * (first + p) + 3] != live[b]) stale[b] = 1;
  }
  return stale;
}

namespace {
void expect_report(Outcome& o, const CheckReport& r, const std::string& what) {
  if (!r.ok()) o.fail(what + ": " + std::to_string(r.outside) + " of " + std::to_string(r.checked) +
                      " outside their enclosure; first: " + r.first);
  std::ostringstream os;
  os.precision(3);
  os << what << ": " << r.checked << " checked, " << 100.0 * double(r.single) / double(std::max<int64_t>(r.checked, 1))
     << "% enclosed to one value, widest " << r.widest << "; ";
  o.summary += os.str();
}
}  // namespace

Outcome check_results(props::HostCase& hc, props::Path path, const GpuResults& g, const WorkPlan* plan,
                      bool with_reference) {
  Outcome o;
  DecodeCall hcall = hc.call();
  hc.poison_output();
  Layout layout;
  std::vector<uint8_t> stale;
  HostScratch cpu_scratch(hcall, 1);
  if (path == props::Path::uniform) {
    layout = uniform_layout(hcall);
    cpu_scratch = HostScratch(hcall, layout.slots);
    cpu::uniform_decode(hcall, cpu_scratch.view);
  } else {
    WorkPlan own(props::plan_params(hc.spec));
    if (!plan) {
      own.refresh(hc.lens.data());
      plan = &own;
    }
    WorkPlan used = *plan;
    layout = planned_layout(hcall, used);
    stale = stale_sequences(used, hc.lens);
    cpu_scratch = HostScratch(hcall, layout.slots);
    const DecodeResult cres = cpu::planned_decode(hcall, used.view(), cpu_scratch.view);
    if (!g.plan_work.empty() && (g.plan_work != used.work_info() || g.plan_reduce != used.reduce_info()))
      o.fail("device plan differs from the host plan");
    const DecodeResult& gres = g.status;
    if (gres.status != cres.status || gres.stale_tasks != cres.stale_tasks || gres.stale_rows != cres.stale_rows)
      o.fail("status differs: gpu {" + std::to_string(int(gres.status)) + ", " + std::to_string(gres.stale_tasks) +
             ", " + std::to_string(gres.stale_rows) + "} cpu {" + std::to_string(int(cres.status)) + ", " +
             std::to_string(cres.stale_tasks) + ", " + std::to_string(cres.stale_rows) + "}");
  }
  const Enclosure enc = enclose(hcall, layout, stale);
  expect_report(o, check_output(hcall, hc.out, enc, "cpu"), "cpu out");
  expect_report(o, check_output(hcall, g.out, enc, "gpu"), "gpu out");
  if (!layout.direct) {
    expect_report(o, check_scratch(cpu_scratch, layout, enc, "cpu"), "cpu scratch");
    expect_report(o, check_scratch(g.scratch, layout, enc, "gpu"), "gpu scratch");
    if (const int64_t t = touched_unwritten_slots(g.scratch, layout, enc))
      o.fail("gpu wrote " + std::to_string(t) + " scratch elements of slots no active task owns");
    if (const int64_t t = touched_unwritten_slots(cpu_scratch, layout, enc))
      o.fail("cpu wrote " + std::to_string(t) + " scratch elements of slots no active task owns");
  }
  bool any_stale = false;
  for (uint8_t s : stale) any_stale |= s != 0;
  if (with_reference && !any_stale) {
    const reference::ReferenceResult ref = reference::decode(hcall);
    TensorView ov = hcall.out;
    ov.data = const_cast<uint16_t*>(g.out.data());
    const reference::CompareReport rep = reference::compare(ov, ref);
    if (!rep.passed()) o.fail("gpu vs reference: " + rep.verdict);
  }
  if (!o.ok)
    o.message = describe(hc.spec) + (path == props::Path::uniform ? " [uniform]\n" : " [planned]\n") + o.message;
  return o;
}

GpuResults run_gpu(const props::HostCase& hc, props::Path path, StreamHandle st) {
  DeviceCase dc(hc);  // uploads the NaN-poisoned output too
  DecodeCall dcall = dc.call();
  GpuResults g(dcall);
  g.call_host_shape = dcall;
  if (path == props::Path::uniform) {
    const Layout layout = uniform_layout(const_cast<props::HostCase&>(hc).call());
    DeviceScratch ds(dcall, layout.slots);
    uniform_decode(dcall, ds.view, st);
    g.out = dc.download_output(st);
    g.scratch = HostScratch(dcall, layout.slots);
    g.scratch.download(ds, st);
  } else {
    DevicePlan dp(props::plan_params(hc.spec));
    dp.refresh(dc.lens.as<int32_t>(), st);
    dp.download(g.plan_work, g.plan_reduce, st);
    DeviceScratch ds(dcall, dp.params.kv_heads * dp.capacity);
    DeviceBuffer status(kStatusWords * 4);
    fill_bytes(status.data(), 0xff, status.bytes(), st);
    planned_decode(dcall, dp.view(), ds.view, status.as<uint32_t>(), st);
    g.status = read_status(status.as<uint32_t>(), st);
    g.out = dc.download_output(st);
    g.scratch = HostScratch(dcall, dp.params.kv_heads * dp.capacity);
    g.scratch.download(ds, st);
  }
  return g;
}

Outcome run_case(const props::CaseSpec& spec, props::Path path, const RunOptions& opt) {
  props::HostCase hc = props::build_case(spec);
  const GpuResults g = run_gpu(hc, path, opt.stream);
  return check_results(hc, path, g, nullptr, opt.reference);
}

}  // namespace pav::kernels::gpu::testing
