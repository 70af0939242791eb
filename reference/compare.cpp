#include "reference/compare.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "kernels/codecs.hpp"

namespace pav::reference {
namespace {

using kernels::DType;
using kernels::TensorView;

float load(const TensorView& t, int64_t off) {
  switch (t.dtype) {
    case DType::f32: return t.as<const float>()[off];
    case DType::bf16: return kernels::bf16_to_f32(t.as<const uint16_t>()[off]);
    case DType::f16: return kernels::f16_to_f32(t.as<const uint16_t>()[off]);
    default: throw std::invalid_argument("compare: output dtype must be bf16, f16 or f32");
  }
}

// Element offsets of a view in row-major index order.
std::vector<int64_t> offsets_of(const TensorView& t) {
  if (t.rank < 1 || t.data == nullptr) throw std::invalid_argument("compare: missing output view");
  int64_t n = 1;
  for (int i = 0; i < t.rank; ++i) n *= t.shape[i];
  std::vector<int64_t> offs(n);
  std::array<int64_t, kernels::kMaxRank> idx{};
  int64_t off = 0;
  for (int64_t e = 0; e < n; ++e) {
    offs[e] = off;
    for (int k = t.rank - 1; k >= 0; --k) {
      off += t.stride[k];
      if (++idx[k] < t.shape[k]) break;
      off -= t.stride[k] * t.shape[k];
      idx[k] = 0;
    }
  }
  return offs;
}

void locate(Mismatch& m, int64_t index, int64_t hq, int64_t D, int64_t q_len) {
  m.index = index;
  m.d = index % D;
  m.head = (index / D) % hq;
  const int64_t qrow = index / (D * hq);
  m.seq = qrow / q_len;
  m.pos = qrow % q_len;
}

// Accumulates the figures over elements.
struct Tally {
  CompareReport r;
  double diff2 = 0, ref2 = 0;

  void finite_pair(double o, double ref) {
    const double e = std::fabs(o - ref);
    r.max_abs_err = std::max(r.max_abs_err, e);
    r.max_rel_err = std::max(r.max_rel_err, e / std::max(std::fabs(ref), 1e-6));
    diff2 += e * e;
    ref2 += ref * ref;
  }
  void fail(int64_t index, double o, double ref, double allowed, const char* kind, int64_t hq, int64_t D,
            int64_t q_len) {
    if (r.mismatches++ == 0) {
      locate(r.first, index, hq, D, q_len);
      r.first.out = o;
      r.first.ref = ref;
      r.first.allowed = allowed;
      r.first.kind = kind;
    }
  }
  void finish(const char* rule) {
    r.rel_l2_err = ref2 > 0 ? std::sqrt(diff2 / ref2) : (diff2 > 0 ? INFINITY : 0.0);
    char line[512];
    if (r.passed()) {
      std::snprintf(line, sizeof line,
                    "PASS: %lld elements within %s; max abs %.3g, max rel %.3g, rel l2 %.3g, worst %.3g of allowed",
                    (long long)r.elements, rule, r.max_abs_err, r.max_rel_err, r.rel_l2_err, r.worst_ratio);
    } else if (r.elements == 0) {
      std::snprintf(line, sizeof line, "FAIL: no elements compared");
    } else {
      std::snprintf(line, sizeof line,
                    "FAIL: %lld of %lld elements (%lld nonfinite, %lld nonzero in empty rows); first (%s) at "
                    "[seq %lld, pos %lld, head %lld, d %lld]: out %.6g ref %.6g allowed %.3g; max abs %.3g, "
                    "rel l2 %.3g, worst %.3g of allowed",
                    (long long)r.mismatches, (long long)r.elements, (long long)r.nonfinite,
                    (long long)r.nonzero_in_empty_rows, r.first.kind.c_str(), (long long)r.first.seq,
                    (long long)r.first.pos, (long long)r.first.head, (long long)r.first.d, r.first.out, r.first.ref,
                    r.first.allowed, r.max_abs_err, r.rel_l2_err, r.worst_ratio);
    }
    r.verdict = line;
  }
};

}  // namespace

double allowed_error(const ReferenceResult& ref, int64_t i, const CompareOptions& o) {
  double a = o.atol + o.rtol * std::fabs(double(ref.out[i]));
  if (ref.p_quantized && o.p_error_model) {
    const double u = kFp8UnitRoundoff;
    a += std::min(u * ref.pq_l1[i], kHoeffding * u * ref.pq_l2[i]) + ref.pq_sub[i];
  }
  return a;
}

CompareReport compare(const TensorView& out, const ReferenceResult& ref, const CompareOptions& o) {
  if (out.rank != 3 || out.shape[0] != ref.num_seqs * ref.q_len || out.shape[1] != ref.hq ||
      out.shape[2] != ref.head_dim)
    throw std::invalid_argument("compare: output shape differs from the reference's [num_seqs*q_len, Hq, D]");
  if (ref.p_quantized && o.p_error_model && ref.pq_l1.size() != ref.out.size())
    throw std::invalid_argument("compare: the fp8-compute standard needs a reference run with error_terms");
  const std::vector<int64_t> offs = offsets_of(out);
  Tally t;
  t.r.elements = int64_t(offs.size());
  const int64_t D = ref.head_dim, hq = ref.hq;
  for (int64_t i = 0; i < t.r.elements; ++i) {
    const double v = load(out, offs[i]);
    const double r = ref.out[i];
    const double allowed = allowed_error(ref, i, o);
    if (!std::isfinite(v)) {
      ++t.r.nonfinite;
      t.fail(i, v, r, allowed, "nonfinite", hq, D, ref.q_len);
      continue;
    }
    t.finite_pair(v, r);
    const double e = std::fabs(v - r);
    t.r.worst_ratio = std::max(t.r.worst_ratio, e / allowed);
    if (ref.row_empty(i / D / hq, (i / D) % hq)) {
      if (v != 0.0) {
        ++t.r.nonzero_in_empty_rows;
        t.fail(i, v, r, 0.0, "nonzero in empty row", hq, D, ref.q_len);
      }
      continue;
    }
    if (!(e <= allowed)) t.fail(i, v, r, allowed, "value", hq, D, ref.q_len);
  }
  char rule[160];
  std::snprintf(rule, sizeof rule, "|out-ref| <= %.3g + %.3g|ref|%s", o.atol, o.rtol,
                ref.p_quantized && o.p_error_model ? " + pq" : "");
  t.finish(rule);
  return t.r;
}

CompareReport compare_outputs(const TensorView& a, const TensorView& b, double atol, double rtol, int64_t q_len) {
  if (a.rank != b.rank) throw std::invalid_argument("compare_outputs: ranks differ");
  for (int k = 0; k < a.rank; ++k)
    if (a.shape[k] != b.shape[k]) throw std::invalid_argument("compare_outputs: shapes differ");
  const std::vector<int64_t> oa = offsets_of(a), ob = offsets_of(b);
  // Positions as [rows, Hq, D] for rank 3; otherwise flat (d = index).
  const int64_t D = a.rank == 3 ? a.shape[2] : int64_t(oa.size());
  const int64_t hq = a.rank == 3 ? a.shape[1] : 1;
  Tally t;
  t.r.elements = int64_t(oa.size());
  for (int64_t i = 0; i < t.r.elements; ++i) {
    const double x = load(a, oa[i]), y = load(b, ob[i]);
    const double allowed = atol + rtol * std::fabs(y);
    if (!std::isfinite(x) || !std::isfinite(y)) {
      ++t.r.nonfinite;
      t.fail(i, x, y, allowed, "nonfinite", hq, D, q_len);
      continue;
    }
    t.finite_pair(x, y);
    const double e = std::fabs(x - y);
    t.r.worst_ratio = std::max(t.r.worst_ratio, e / allowed);
    if (!(e <= allowed)) t.fail(i, x, y, allowed, "value", hq, D, q_len);
  }
  char rule[160];
  std::snprintf(rule, sizeof rule, "|a-b| <= %.3g + %.3g|b|", atol, rtol);
  t.finish(rule);
  return t.r;
}

}  // namespace pav::reference
