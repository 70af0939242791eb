#pragma once
// The comparison standard for a kernel output against the reference
// (docs/numerics.md, "The comparison standard"), and a plain elementwise check for kernel vs kernel.
//
// Every element must be finite and satisfy
//   |out - ref| <= atol + rtol*|ref| + pq_term            (atol = rtol = 5e-3)
// and every element of a row the reference marks as seeing no token must be
// exactly 0 (either sign).
//
// pq_term is 0 unless the call's contract quantizes P to fp8 (fp8 compute), where
//   pq_term = min(u*pq_l1, kHoeffding*u*pq_l2) + pq_sub,    u = 2^-4.
// Derivation: the kernel rounds each weight to fp8, w_t -> w_t(1 + d_t) with
// |d_t| <= u (the e4m3 unit roundoff, 3 mantissa bits) in the normal range, so
// the output error sum_t w_t d_t v_t is at most u*sum_t w_t|v_t| (worst case).
// Modelling the d_t as independent, Hoeffding gives P(|err| >= k*u*sqrt(sum_t
// (w_t v_t)^2)) <= 2exp(-k^2/2): k = 6.55 makes that < 1e-9. Below the normal
// range the error is absolute, at most half the subnormal spacing (2^-10 for
// e4m3fn; in units of the running max, after the FP8_MAX scaling), and never
// more than the weight itself: pq_sub bounds sum_t min(exp(s_t - M), c)|v_t|/L
// (see ReferenceResult); it is ~0 unless many tokens sit 10+ nats below the max.
// The term does not model Q quantization: compare with QInput::kernel_fp8
// (the default under fp8 compute), which applies it to the reference's input.
#include <cstdint>
#include <string>

#include "kernels/types.hpp"
#include "reference/decode.hpp"

namespace pav::reference {

inline constexpr double kDefaultAtol = 5e-3;
inline constexpr double kDefaultRtol = 5e-3;
inline constexpr double kFp8UnitRoundoff = 0.0625;  // 2^-4: e4m3 relative rounding error bound
inline constexpr double kHoeffding = 6.55;          // sqrt(2 ln(2e9)) = 6.546: P(exceed) < 1e-9

struct CompareOptions {
  double atol = kDefaultAtol;
  double rtol = kDefaultRtol;
  bool p_error_model = true;  // add pq_term where the reference says P is quantized
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
  int64_t nonfinite = 0;              // out is NaN or inf
  int64_t nonzero_in_empty_rows = 0;  // out != 0 where the reference row sees no token
  Mismatch first;                     // the first failing element in index order
  double max_abs_err = 0;             // max |out - ref| over finite elements
  double max_rel_err = 0;             // max |out - ref| / max(|ref|, 1e-6) over finite elements
  double rel_l2_err = 0;              // ||out - ref||_2 / ||ref||_2 over finite elements (0/0 = 0)
  double worst_ratio = 0;             // max |out - ref| / allowed: the headroom (<= 1 passes)
  std::string verdict;                // one line: PASS/FAIL and the figures above

  bool passed() const { return mismatches == 0 && elements > 0; }
};

// The bound one element is held to (see the header comment).
double allowed_error(const ReferenceResult& ref, int64_t index, const CompareOptions& options);

// out: [num_seqs*q_len, Hq, D] bf16, f16 or f32, any strides. Throws
// std::invalid_argument when its shape differs from the reference's, or when
// pq terms are needed but the reference was run without error_terms.
CompareReport compare(const kernels::TensorView& out, const ReferenceResult& ref,
                      const CompareOptions& options = {});

// Kernel vs kernel: |a - b| <= atol + rtol*|b| elementwise, b the baseline;
// a non-finite element in either is a mismatch. Same shape required (rank <= 6,
// any strides, bf16/f16/f32). Positions are reported for rank-3 [rows, Hq, D]
// views with q_len rows per sequence.
CompareReport compare_outputs(const kernels::TensorView& a, const kernels::TensorView& b,
                              double atol = kDefaultAtol, double rtol = kDefaultRtol, int64_t q_len = 1);

}  // namespace pav::reference
