#pragma once
// The reference decode: exact softmax attention over the *dequantized* fp8
// cache (code -> float, times the K/V scale, per tensor or per token), in fp32
// or fp64, computed on the CPU with Eigen (docs/numerics.md).
//
// It shares only the views (kernels/types.hpp, kernels/call.hpp) and the codecs
// (kernels/codecs.hpp) with the kernels; nothing of their partitioning, tiling
// or P quantization. Long contexts are streamed in chunks with an online
// softmax, so memory stays bounded by the chunk size whatever the context.
//
// It trusts the call's geometry (run the kernels' validation first when the
// call comes from outside); it reads no cache byte, scale or block-table entry
// outside each sequence's context.
#include <cstdint>
#include <vector>

#include "kernels/call.hpp"
#include "kernels/types.hpp"

namespace pav::reference {

enum class Precision : uint8_t { fp32, fp64 };

// How Q enters the product. `kernel_fp8` applies the kernels' per-row fp8
// quantization of Q (q_scale = max(absmax(row)/FP8_MAX, 1e-20), q8 = fp8(q/q_scale),
// use q8*q_scale): an input transform like the cache's dequantization.
// `automatic` is kernel_fp8 when call.opt.compute is an fp8 dtype, else exact.
enum class QInput : uint8_t { automatic, exact, kernel_fp8 };

struct ReferenceOptions {
  Precision precision = Precision::fp32;
  QInput q_input = QInput::automatic;
  // Online-softmax chunk: bounds the buffers (K, V, |V|, V^2 of one chunk per
  // worker). 512 keeps them in L2 (1 MB); 4096 measured 50-70% slower.
  int64_t chunk_tokens = 512;
  // Tokens per parallel task of one (sequence, KV head); the tasks' states are
  // merged in order. Fixed, so the result does not depend on the thread count.
  int64_t segment_tokens = 8192;
  bool error_terms = true;       // compute pq_l1 / pq_l2 / pq_sub (compare() needs them under fp8 compute)
};

// All per-element arrays are [num_seqs*q_len, Hq, D] row-major (the shape of q);
// lse is [num_seqs*q_len, Hq]. w_t = exp(s_t - M)/L are the normalized softmax
// weights of a row, v_td the dequantized V value (times its scale).
struct ReferenceResult {
  int64_t num_seqs = 0, q_len = 1, hq = 0, head_dim = 0;
  std::vector<float> out;     // sum_t w_t v_td; exactly 0 in rows that see no token
  std::vector<double> lse;    // M + log(L) (natural log); -inf for rows that see no token
  // P-quantization error scales (empty when error_terms is off):
  std::vector<float> pq_l1;   // sum_t w_t |v_td|
  std::vector<float> pq_l2;   // sqrt(sum_t (w_t v_td)^2)
  // Upper bound of sum_t min(exp(s_t - M), c) |v_td| / L with c = half the fp8
  // subnormal spacing / FP8_MAX: P's absolute rounding error below the normal range.
  std::vector<float> pq_sub;
  bool p_quantized = false;   // the call's contract quantizes P to fp8 (fp8 compute)
  kernels::DType p_flavour = kernels::DType::none;  // that fp8 flavour
  int64_t chunk_buffer_bytes = 0;  // chunk buffers one worker holds (independent of context length)
  int64_t segment_state_bytes = 0; // states of split (sequence, KV head) pairs: O(rows*D) per segment

  int64_t rows() const { return num_seqs * q_len * hq; }
  bool row_empty(int64_t qrow, int64_t head) const;
  int64_t index(int64_t qrow, int64_t head, int64_t d) const { return (qrow * hq + head) * head_dim + d; }
};

// Runs the reference. Throws std::invalid_argument when the call's views are
// not a decode call (missing tensors, D not a multiple of 16, Hq % Hkv != 0,
// unknown V layout, non-fp8 cache, q not bf16/f16).
ReferenceResult decode(const kernels::DecodeCall& call, const ReferenceOptions& options = {});

// The Q quantization the reference applies under QInput::kernel_fp8, for one
// row of n values: writes the dequantized codes fp8(q/q_scale) to codes and
// returns q_scale (the row's value is codes[i]*q_scale).
float quantize_q_row(const float* q, int64_t n, kernels::DType flavour, float* codes);

// Half the fp8 subnormal spacing of the flavour, divided by FP8_MAX: the largest
// absolute rounding error of a P value (in units of its max) below the normal range.
double p_subnormal_error(kernels::DType flavour);

}  // namespace pav::reference
