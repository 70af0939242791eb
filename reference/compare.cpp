// SPDX-License-Identifier: Apache-2.0
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
  for (int i = 0; i < t.rank; ++i)
    if (t.stride[i] < 0 || t.shape[i] < 0)
      throw std::invalid_argument("compare: output view has a negative " +
                                  std::string(t.stride[i] < 0 ? "stride" : "extent") + " in dimension " +
                                  std::to_string(i));
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16)
    throw std::invalid_argument("compare: output dtype " + std::string(kernels::to_string(t.dtype)) +
                                " is not bf16, f16 or f32");
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
  void nonfinite(double o) {
    ++r.nonfinite;
    if (std::isnan(o)) ++r.nan; else ++r.inf;
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
                    "FAIL: %lld of %lld elements (%lld NaN, %lld inf, %lld nonzero in empty rows); first (%s) at "
                    "[seq %lld, pos %lld, head %lld, d %lld]: out %.6g ref %.6g allowed %.3g; max abs %.3g, "
                    "rel l2 %.3g, worst %.3g of allowed",
                    (long long)r.mismatches, (long long)r.elements, (long long)r.nan, (long long)r.inf,
                    (long long)r.nonzero_in_empty_rows, r.first.kind.c_str(), (long long)r.first.seq,
                    (long long)r.first.pos, (long long)r.first.head, (long long)r.first.d, r.first.out, r.first.ref,
                    r.first.allowed, r.max_abs_err, r.rel_l2_err, r.worst_ratio);
    }
    r.verdict = line;
  }
};

}  // namespace

double storage_unit_roundoff(DType d) {
  switch (d) {
    case DType::bf16: return std::ldexp(1.0, -8);   // 7 mantissa bits
    case DType::f16: return std::ldexp(1.0, -11);   // 10 mantissa bits
    case DType::fp8_e4m3fn:
    case DType::fp8_e4m3fnuz: return std::ldexp(1.0, -4);  // 3 mantissa bits
    case DType::fp8_e5m2: return std::ldexp(1.0, -3);      // 2 mantissa bits
    default: return 0.0;                            // f32, none: inside the arithmetic slack
  }
}

double storage_underflow(DType d) {
  // Half the smallest subnormal: 2^(1 - bias - mantissa bits) / 2.
  switch (d) {
    case DType::bf16: return std::ldexp(1.0, -134);
    case DType::f16: return std::ldexp(1.0, -25);
    case DType::fp8_e4m3fn: return std::ldexp(1.0, -10);
    case DType::fp8_e4m3fnuz: return std::ldexp(1.0, -11);
    case DType::fp8_e5m2: return std::ldexp(1.0, -17);
    default: return 0.0;
  }
}

namespace {

bool sixteen_bit(DType d) { return d == DType::bf16 || d == DType::f16; }
bool p_term_on(const ReferenceResult& ref, const CompareOptions& o) {
  return o.p_error_model && ref.profile.p_round != PRound::none;
}
// Partials stored in a dtype narrower than f32: their rounding is a term of
// the bound whatever the output dtype.
bool partials_round(const ReferenceResult& ref) { return storage_unit_roundoff(ref.profile.partial) > 0; }
// The error scales (pq_l1, ...) the bound of this reference needs.
bool needs_terms(const ReferenceResult& ref, const CompareOptions& o) {
  return p_term_on(ref, o) || !sixteen_bit(ref.out_dtype) || !ref.bias_max.empty() || partials_round(ref);
}

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument("compare: " + what); }

void check_reference(const ReferenceResult& ref, const CompareOptions& o) {
  if (const auto e = profile_error(ref.profile)) refuse("reference " + *e);
  if (ref.out_dtype != DType::f32 && !sixteen_bit(ref.out_dtype))
    refuse("reference output dtype " + std::string(kernels::to_string(ref.out_dtype)) + " is not bf16, f16 or f32");
  const int64_t rows = ref.num_seqs * ref.q_len * ref.hq;
  if (ref.num_seqs < 0 || ref.q_len < 1 || ref.hq < 1 || ref.head_dim < 1 ||
      int64_t(ref.out.size()) != rows * ref.head_dim || int64_t(ref.lse.size()) != rows ||
      (!ref.seen.empty() && int64_t(ref.seen.size()) != rows) ||
      (!ref.bias_max.empty() && int64_t(ref.bias_max.size()) != rows) ||
      (!ref.score_max.empty() && (int64_t(ref.score_max.size()) != rows || ref.pq_l1.size() != ref.out.size())))
    refuse("reference arrays do not match its [num_seqs*q_len, Hq, D] dims");
  if (needs_terms(ref, o) &&
      (ref.pq_l1.size() != ref.out.size() || ref.pq_l2.size() != ref.out.size() || ref.pq_sub.size() != ref.out.size()))
    refuse(std::string("the standard for ") +
           (p_term_on(ref, o)       ? "P rounded as " + std::string(to_string(ref.profile.p_round))
            : !ref.bias_max.empty() ? std::string("ALiBi")
            : partials_round(ref)   ? "partials stored as " + std::string(kernels::to_string(ref.profile.partial))
                                    : std::string("an f32 output")) +
           " needs a reference run with error_terms");
}

}  // namespace

double allowed_error(const ReferenceResult& ref, int64_t i, const CompareOptions& o) {
  double a;
  if (sixteen_bit(ref.out_dtype))
    a = o.atol + o.rtol * std::fabs(double(ref.out[i]));
  else
    a = o.f32_atol + o.f32_rtol * std::fabs(double(ref.out[i])) + o.f32_l1 * ref.pq_l1[i];
  if (partials_round(ref)) {
    const DType partial = ref.profile.partial;
    a += storage_unit_roundoff(partial) * ref.pq_l1[i] + storage_underflow(partial);
  }
  if (p_term_on(ref, o)) {
    const double u = p_unit_roundoff(ref.profile.p_round);
    a += std::min(u * ref.pq_l1[i], kHoeffding * u * ref.pq_l2[i]) + ref.pq_sub[i];
  }
  if (!ref.bias_max.empty()) a += kAlibiTerm * double(ref.bias_max[size_t(i / ref.head_dim)]) * ref.pq_l1[i];
  if (!ref.score_max.empty()) a += kScoreTerm * double(ref.score_max[size_t(i / ref.head_dim)]) * ref.pq_l1[i];
  return a;
}

CompareReport compare(const TensorView& out, const ReferenceResult& ref, const CompareOptions& o) {
  check_reference(ref, o);
  if (out.rank != 3 || out.shape[0] != ref.num_seqs * ref.q_len || out.shape[1] != ref.hq ||
      out.shape[2] != ref.head_dim)
    refuse("output shape " + out.shape_string() + " differs from the reference's [" +
           std::to_string(ref.num_seqs * ref.q_len) + ", " + std::to_string(ref.hq) + ", " +
           std::to_string(ref.head_dim) + "]");
  const std::vector<int64_t> offs = offsets_of(out);
  Tally t;
  t.r.elements = int64_t(offs.size());
  t.r.profile = ref.profile;
  const int64_t D = ref.head_dim, hq = ref.hq;
  for (int64_t i = 0; i < t.r.elements; ++i) {
    const double v = load(out, offs[i]);
    const double r = ref.out[i];
    const bool empty = ref.row_empty(i / D / hq, (i / D) % hq);
    if (!empty && !std::isfinite(r)) {
      Mismatch m;
      locate(m, i, hq, D, ref.q_len);
      refuse(std::string("the reference is ") + (std::isnan(r) ? "NaN" : "inf") + " at [seq " +
             std::to_string(m.seq) + ", pos " + std::to_string(m.pos) + ", head " + std::to_string(m.head) +
             ", d " + std::to_string(m.d) + "]: the call's inputs hold a non-finite value inside the context "
             "(or overflow f32), so no standard applies");
    }
    const double allowed = empty ? 0.0 : allowed_error(ref, i, o);
    if (!std::isfinite(v)) {
      t.nonfinite(v);
      t.fail(i, v, r, allowed, "nonfinite", hq, D, ref.q_len);
      continue;
    }
    t.finite_pair(v, r);
    const double e = std::fabs(v - r);
    if (empty) {
      if (v != 0.0) {
        ++t.r.nonzero_in_empty_rows;
        t.fail(i, v, r, 0.0, "nonzero in empty row", hq, D, ref.q_len);
      }
      continue;
    }
    t.r.worst_ratio = std::max(t.r.worst_ratio, e / allowed);
    if (!(e <= allowed)) t.fail(i, v, r, allowed, "value", hq, D, ref.q_len);
  }
  char rule[200];
  const double u_partial = storage_unit_roundoff(ref.profile.partial);
  if (sixteen_bit(ref.out_dtype) && u_partial == 0)
    std::snprintf(rule, sizeof rule, "|out-ref| <= %.3g + %.3g|ref|", o.atol, o.rtol);
  else if (sixteen_bit(ref.out_dtype))
    std::snprintf(rule, sizeof rule, "|out-ref| <= %.3g + %.3g|ref| + %.3g l1 + %.3g", o.atol, o.rtol, u_partial,
                  storage_underflow(ref.profile.partial));
  else
    std::snprintf(rule, sizeof rule, "|out-ref| <= %.3g + %.3g|ref| + %.3g l1 + %.3g", o.f32_atol, o.f32_rtol,
                  o.f32_l1 + u_partial, storage_underflow(ref.profile.partial));
  std::string r = rule;
  if (p_term_on(ref, o)) r += " + pq(" + std::string(to_string(ref.profile.p_round)) + ")";
  t.finish(r.c_str());
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
      t.nonfinite(std::isfinite(x) ? y : x);
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
