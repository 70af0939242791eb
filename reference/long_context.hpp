// SPDX-License-Identifier: Apache-2.0
#pragma once
// The long-context check shared by the quick (cpu) and the 764k (slow) tests:
// one sequence, Hkv 1, D 128, streamed by the reference and checked against
// the naive loop; the chunk buffers must not grow with the context.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "reference/decode.hpp"
#include "reference/test_call.hpp"
#include "reference/test_naive.hpp"

namespace pav::reference::testing {

inline void check_long_context(int32_t len, double max_seconds) {
  CallSpec s;
  s.lens = {len};
  s.hkv = 1;
  s.group = 4;
  s.head_dim = 128;
  s.block_size = 128;
  s.q_len = 2;
  s.seed = 1000 + uint64_t(len);
  std::printf("[ seed ] %llu len %d\n", (unsigned long long)s.seed, len);
  const auto c = make_call(s);
  const ReferenceOptions opt{.precision = Precision::fp32, .chunk_tokens = 4096};
  const auto t0 = std::chrono::steady_clock::now();
  const ReferenceResult r = decode(c.call, opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("reference fp32 over %d tokens: %.2f s, chunk buffers %lld bytes per worker\n", len, secs,
              (long long)r.chunk_buffer_bytes);
  EXPECT_LT(secs, max_seconds);
  // Buffers are those of one 4096-token chunk, whatever the context: K, the
  // query rows and Q.K in double ([4096, D], [rows, D], [rows, 4096]); V, |V|,
  // V^2 ([4096, D] each), the weight matrices ([4 rows, 4096] in all),
  // per-token scales, and one decoded block ([D, block_size]).
  const int64_t rows = s.q_len * s.group;
  const int64_t bound =
      int64_t(sizeof(double)) * (4096 * 128 + rows * 128 + rows * 4096) +
      int64_t(sizeof(float)) * (3 * 4096 * 128 + 4 * rows * 4096 + 4 * rows * 128 + 4 * 4096 + 128 * 128);
  EXPECT_LE(r.chunk_buffer_bytes, bound);
  EXPECT_GT(r.chunk_buffer_bytes, 0);
  // The same call over a short context holds the same chunk buffers.
  CallSpec short_spec = s;
  short_spec.lens = {5000};
  const auto sc = make_call(short_spec);
  EXPECT_EQ(decode(sc.call, opt).chunk_buffer_bytes, r.chunk_buffer_bytes);
  // Split (sequence, head) pairs keep one O(rows*D) state per 8192-token segment.
  const int64_t segments = (len + 8191) / 8192;
  EXPECT_EQ(r.segment_state_bytes, segments * int64_t(sizeof(float)) * (2 * rows + 4 * rows * 128));

  const auto n = naive_decode(c, true);
  double worst = 0;
  for (size_t i = 0; i < r.out.size(); ++i) {
    ASSERT_TRUE(std::isfinite(r.out[i]));
    worst = std::max(worst, std::fabs(double(r.out[i]) - n.out[i]) / (1e-5 + 1e-4 * std::fabs(n.out[i])));
  }
  EXPECT_LE(worst, 1.0) << "fp32 reference vs naive over " << len << " tokens";
  for (size_t i = 0; i < r.lse.size(); ++i) EXPECT_NEAR(r.lse[i], n.lse[i], 1e-4 * std::fabs(n.lse[i]) + 1e-5);
}

}  // namespace pav::reference::testing
