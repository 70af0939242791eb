// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reference decode: exact softmax attention over the *dequantized* fp8
// cache (code -> float, times the K/V scale, per tensor or per token), in fp32
// or fp64, computed on the CPU with Eigen.
//
// It shares only the views (kernels/types.hpp, kernels/call.hpp) and the codecs
// (kernels/codecs.hpp) with the kernels; nothing of their partitioning, tiling
// or P quantization. Long contexts are streamed in chunks with an online
// softmax, so memory stays bounded by the chunk size whatever the context.
//
// It computes what the kernel under test declares in its numerics profile
// (kernels/numerics_profile.hpp): Q is used as given or quantized per row to fp8, as
// the profile says; P is never rounded here (the comparison standard models P
// rounding as an error term instead).
//
// It computes the call's attention variant (kernels::AttentionVariant: sliding
// window, logit soft cap, ALiBi slopes, attention sinks) as kernels/call.hpp
// defines it, the logit transforms in double. It refuses what it cannot
// compute: pav's own option flags for ALiBi, sinks, a sliding window or
// pre-quantized Q (the flags carry no slopes, sink logits, edge convention or Q
// scale), a view with a negative stride, or geometry that is not a
// decode call, each with std::invalid_argument naming the field. K, V, Q, the
// scales and the index tensors may have any non-negative strides (a K or V half
// sliced from a combined [blocks, 2, ...] KV tensor, a padded Q row).
//
// It reads no cache byte, scale or block-table entry outside each sequence's
// context.
#include <cstdint>
#include <vector>

#include "kernels/call.hpp"
#include "kernels/numerics_profile.hpp"
#include "kernels/types.hpp"

namespace pav::reference {

// The numerics profile is the kernel's declaration (kernels/numerics_profile.hpp);
// the reference computes to it.
using kernels::NumericsProfile;
using kernels::PRound;
using kernels::QQuant;

enum class Precision : uint8_t { fp32, fp64 };

struct ReferenceOptions {
  Precision precision = Precision::fp32;
  // Online-softmax chunk: bounds the buffers (K, V, |V|, V^2 of one chunk per
  // worker). 512 keeps them in L2 (1 MB); 4096 measured 50-70% slower.
  int64_t chunk_tokens = 512;
  // Tokens per parallel task of one (sequence, KV head); the tasks' states are
  // merged in order. Fixed, so the result does not depend on the thread count.
  int64_t segment_tokens = 8192;
  bool error_terms = true;       // compute pq_l1 / pq_l2 / pq_sub (compare() needs them where P or partials are rounded)
};

// All per-element arrays are [num_seqs*q_len, Hq, D] row-major (the shape of
// out: q's, with D_v in place of D for an MLA call);
// lse is [num_seqs*q_len, Hq]. w_t = exp(s_t - M)/L are the normalized softmax
// weights of a row, v_td the dequantized V value (times its scale).
struct ReferenceResult {
  int64_t num_seqs = 0, q_len = 1, hq = 0, head_dim = 0;
  std::vector<float> out;     // sum_t w_t v_td; exactly 0 in rows that see no token
  std::vector<double> lse;    // M + log(L) (natural log, the sink in L); -inf for rows that see no token and no sink
  // 1 where the row sees a token ([rows, Hq]); a result built by hand may leave
  // it empty, and row_empty() then reads an lse of -inf as empty.
  std::vector<uint8_t> seen;
  // ALiBi: |slope| times the distance to the row's farthest visible key
  // ([rows, Hq]; empty without ALiBi): the comparison standard's bias term.
  std::vector<float> bias_max;
  // The row's largest |scaled logit| over its visible keys, after the soft cap
  // and the bias ([rows, Hq]; with error_terms): the comparison standard's
  // score term.
  std::vector<float> score_max;
  // P-quantization error scales (empty when error_terms is off):
  std::vector<float> pq_l1;   // sum_t w_t |v_td|
  std::vector<float> pq_l2;   // sqrt(sum_t (w_t v_td)^2)
  // Upper bound of sum_t min(exp(s_t - M), c) |v_td| / L with c = p_subnormal_error
  // of the profile's P rounding: P's absolute rounding error below the normal range.
  std::vector<float> pq_sub;
  // What the result was computed for (Q as the profile says). A result built
  // by hand models no rounding: compare() then applies the floor alone.
  NumericsProfile profile{QQuant::none, PRound::none, kernels::DType::none};
  // The output dtype the call asks the kernel for (call.out's, else q's): the
  // comparison standard's floor follows it (see compare.hpp).
  kernels::DType out_dtype = kernels::DType::bf16;
  kernels::DType fp8_flavour = kernels::DType::none;  // the fp8 flavour of Q and P quantization
  int64_t chunk_buffer_bytes = 0;  // chunk buffers one worker holds (independent of context length)
  int64_t segment_state_bytes = 0; // states of split (sequence, KV head) pairs: O(rows*D) per segment

  int64_t rows() const { return num_seqs * q_len * hq; }
  bool row_empty(int64_t qrow, int64_t head) const;
  int64_t index(int64_t qrow, int64_t head, int64_t d) const { return (qrow * hq + head) * head_dim + d; }
};

// Runs the reference for a kernel with the given numerics profile. Throws
// std::invalid_argument, naming the field, when the call's views are not a
// decode call (missing tensors, D not a multiple of 16, Hq % Hkv != 0, unknown V
// layout, non-fp8 cache, q not bf16/f16, a negative stride), when it asks for an
// option the reference does not compute (alibi, sinks, sliding_window,
// q_prequantized), or when the profile is invalid (profile_error).
ReferenceResult decode(const kernels::DecodeCall& call, const NumericsProfile& profile,
                       const ReferenceOptions& options = {});
// The reference for pav's own kernels: decode(call, pav_profile(call.opt), options).
ReferenceResult decode(const kernels::DecodeCall& call, const ReferenceOptions& options = {});

// The fp8 flavour Q and P are quantized to: the compute dtype when it is an fp8
// one (pav's kernels), else the cache's.
kernels::DType quantization_flavour(const kernels::DecodeCall& call);

// The Q quantization the reference applies under QQuant::fp8_per_row, for one
// row of n values: writes the dequantized codes fp8(q/q_scale) to codes and
// returns q_scale (the row's value is codes[i]*q_scale).
float quantize_q_row(const float* q, int64_t n, kernels::DType flavour, float* codes);

// Half the fp8 subnormal spacing of the flavour, divided by FP8_MAX: the largest
// absolute rounding error of a P value (in units of its max) below the normal range.
double p_subnormal_error(kernels::DType flavour);
// The same bound for a profile's P rounding: the fp8 one above for
// fp8_running_max (in `flavour`), half the smallest subnormal for bf16 (2^-134)
// and f16 (2^-25), 0 for none.
double p_subnormal_error(PRound rounding, kernels::DType flavour);
// Unit roundoff of a P rounding (2^-4 fp8 e4m3, 2^-8 bf16, 2^-11 f16, 0 none).
double p_unit_roundoff(PRound rounding);

}  // namespace pav::reference
