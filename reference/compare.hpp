// SPDX-License-Identifier: Apache-2.0
#pragma once
// The comparison standard for a kernel output against the reference, and a
// plain elementwise check for kernel vs kernel.
//
// Every element must be finite and within the allowed error of its reference
// value, and every element of a row the reference marks as seeing no token must
// be exactly 0 (either sign). The allowed error follows the kernel's declared
// numerics profile (carried by the ReferenceResult) and the call's output dtype:
//
//   allowed = floor + p_term
//   floor   = atol + rtol*|ref|                            16-bit output (bf16, f16)
//           = f32_atol + f32_rtol*|ref| + f32_l1*l1
//             + u_partial*l1                                f32 output
//   p_term  = min(u_p*l1, kHoeffding*u_p*l2) + sub          P rounded (u_p per rounding)
//           = 0                                             P not rounded
//   + kAlibiTerm*B*l1                                       the call has ALiBi slopes
//   + kScoreTerm*S*l1                                       the reference has error terms
//
// with l1, l2, sub the reference's pq_l1, pq_l2, pq_sub. u_p is the unit
// roundoff of the declared P rounding: 2^-4 (fp8 e4m3, against the running max),
// 2^-8 (bf16), 2^-11 (f16). A weight w_t rounded as w_t(1 + d_t), |d_t| <= u_p,
// moves the output by sum_t w_t d_t v_t: at most u_p*l1; taking the d_t as
// independent, Hoeffding bounds it by k*u_p*l2 except with probability
// 2exp(-k^2/2), and k = 6.55 makes that < 1e-9. Below the rounding's normal
// range the error is absolute (half a subnormal step, never more than the weight
// itself): sub. Q quantization is not a term: the reference applies the declared
// one to its input.
//
// The 16-bit floor (5e-3 + 5e-3|ref|, the established standard for fp8 decode)
// holds the rounding of the output (at most 2^-8|ref| for bf16, 2^-11|ref| for
// f16) and of the partials of a split row, which pav's kernels store in 16 bits.
// An f32 output rounds nothing at the end, so its floor is the arithmetic slack
// of f32 computation (f32_atol, f32_rtol, f32_l1*l1: score errors of a few f32
// ulps per product move each weight by a relative amount, hence a term in l1)
// plus the partials' rounding, which the floor then must carry explicitly: a
// split row's output is a convex combination sum_i c_i o_i of its partials,
// each rounded once to the partial dtype, so the error is at most
// u_partial*sum_i c_i|o_i| <= u_partial*l1 for any number of splits (2^-8 bf16,
// 2^-11 f16; 0 for f32 partials, inside the arithmetic slack, and for a kernel
// that never splits). docs/comparison.md writes the derivation out.
#include <cstdint>
#include <string>

#include "kernels/types.hpp"
#include "reference/decode.hpp"

namespace pav::reference {

inline constexpr double kDefaultAtol = 5e-3;
inline constexpr double kDefaultRtol = 5e-3;
inline constexpr double kFp8UnitRoundoff = 0.0625;  // 2^-4: e4m3 relative rounding error bound
inline constexpr double kHoeffding = 6.55;          // sqrt(2 ln(2e9)) = 6.546: P(exceed) < 1e-9
// f32-output floor: see docs/comparison.md for how these were sized.
inline constexpr double kF32Atol = 1e-5;
inline constexpr double kF32Rtol = 1e-4;
inline constexpr double kF32L1 = 1e-4;
// ALiBi: a kernel forms x - slope*(pos - t) in f32, rounding the product and
// the sum, so each logit errs by up to 2u*B + u|x| (u = 2^-24, B the row's
// largest bias, the |x| part inside the f32 slack). A logit error of at most E
// per token moves the output by at most 2E*l1 (first order: the weights move by
// w_t(d_t - mean d)), hence 4u*B*l1.
inline constexpr double kAlibiTerm = 4.0 / 16777216.0;
// Large logits: a kernel's f32 logit x carries a rounding error of a few ulps
// of |x| (the dot's last sums, the scale, the max subtracted), inside the f32
// slack while |x| is small but not at |x| = 5e4, where an ulp is 2^-8. Taking
// up to 8u|x| per logit (u = 2^-24) and S the row's largest |x| (score_max),
// the output moves by at most 2*8u*S*l1, hence 16u*S*l1.
inline constexpr double kScoreTerm = 16.0 / 16777216.0;

// Unit roundoff of storing a value in the dtype (2^-8 bf16, 2^-11 f16, 2^-4
// the e4m3 flavours, 2^-3 e5m2), 0 for f32 and none (no rounding beyond the
// arithmetic slack).
double storage_unit_roundoff(kernels::DType d);
// The absolute error of storing a value below the dtype's normal range: half
// its smallest subnormal (2^-10 e4m3fn, 2^-11 e4m3fnuz, 2^-17 e5m2, 2^-25 f16,
// 2^-134 bf16), 0 for f32 and none. A stored value errs by at most
// storage_unit_roundoff*|x| + storage_underflow (below its largest finite).
double storage_underflow(kernels::DType d);

struct CompareOptions {
  double atol = kDefaultAtol;  // floor of a 16-bit output
  double rtol = kDefaultRtol;
  double f32_atol = kF32Atol;  // floor of an f32 output (before the partial term)
  double f32_rtol = kF32Rtol;
  double f32_l1 = kF32L1;
  bool p_error_model = true;  // add the P-rounding term the profile declares
};

struct Mismatch {
  int64_t index = -1;  // flat element index in [rows, Hq, D] order; -1 when none
  int64_t seq = -1, pos = -1, head = -1, d = -1;
  double out = 0, ref = 0, allowed = 0;
  std::string kind;    // "nonfinite", "nonzero in empty row" or "value"
};

struct CompareReport {
  int64_t elements = 0;
  int64_t mismatches = 0;             // elements failing any rule below
  int64_t nonfinite = 0;              // out is NaN or +-inf (nan + inf)
  int64_t nan = 0;                    // out is NaN
  int64_t inf = 0;                    // out is +inf or -inf
  int64_t nonzero_in_empty_rows = 0;  // out != 0 where the reference row sees no token
  Mismatch first;                     // the first failing element in index order
  double max_abs_err = 0;             // max |out - ref| over finite elements
  double max_rel_err = 0;             // max |out - ref| / max(|ref|, 1e-6) over finite elements
  double rel_l2_err = 0;              // ||out - ref||_2 / ||ref||_2 over finite elements (0/0 = 0)
  double worst_ratio = 0;             // max |out - ref| / allowed: the headroom (<= 1 passes)
  NumericsProfile profile;            // the profile the standard followed (compare only)
  std::string verdict;                // one line: PASS/FAIL and the figures above

  bool passed() const { return mismatches == 0 && elements > 0; }
};

// The bound one element is held to (see the header comment).
double allowed_error(const ReferenceResult& ref, int64_t index, const CompareOptions& options);

// out: [num_seqs*q_len, Hq, D] bf16, f16 or f32, any non-negative strides.
// Throws std::invalid_argument, naming what is wrong, when out's shape differs
// from the reference's, its dtype is not bf16/f16/f32, the reference is
// inconsistent (array sizes, an invalid profile, an output dtype it cannot
// judge) or lacks the error terms its profile needs, or when the reference is
// not finite in a row that sees tokens (its inputs hold NaN or inf inside the
// context, or overflowed: no standard applies, and the message says NaN or
// inf and where).
CompareReport compare(const kernels::TensorView& out, const ReferenceResult& ref,
                      const CompareOptions& options = {});

// Kernel vs kernel: |a - b| <= atol + rtol*|b| elementwise, b the baseline;
// a non-finite element in either is a mismatch. Same shape required (rank <= 6,
// any strides, bf16/f16/f32). Positions are reported for rank-3 [rows, Hq, D]
// views with q_len rows per sequence.
CompareReport compare_outputs(const kernels::TensorView& a, const kernels::TensorView& b,
                              double atol = kDefaultAtol, double rtol = kDefaultRtol, int64_t q_len = 1);

}  // namespace pav::reference
