// SPDX-License-Identifier: Apache-2.0
// source_decode against the naive fp64 decode and reference::decode, fed the
// dequantized values of a cache as its "source": the same maths over the same
// numbers must agree to rounding.
#include "reference/source_decode.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/codecs.hpp"
#include "reference/decode.hpp"
#include "reference/test_call.hpp"
#include "reference/test_naive.hpp"

namespace pav::reference {
namespace {

using testing::CallSpec;
using testing::OwnedCall;

// The cache's dequantized K, V (times their scales) as a source.
SourceChunkFn dequantized_source(const OwnedCall& c, std::atomic<int64_t>* largest_chunk = nullptr) {
  return [&c, largest_chunk](int64_t seq, int64_t h, int64_t t0, int64_t n, float* k, float* v) {
    const CallSpec& s = c.spec;
    if (largest_chunk) {
      int64_t cur = largest_chunk->load();
      while (n > cur && !largest_chunk->compare_exchange_weak(cur, n)) {}
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = t0 + i, blk = c.block_of(seq, t), off = t % s.block_size;
      float ks = 1.0f, vs = 1.0f;
      if (s.scales == testing::Scales::tensor) ks = c.ks[0], vs = c.vs[0];
      if (s.scales == testing::Scales::token) ks = c.ks[c.scale_at(blk, h, off)], vs = c.vs[c.scale_at(blk, h, off)];
      for (int64_t d = 0; d < s.head_dim; ++d) {
        k[i * s.head_dim + d] = kernels::fp8_to_f32(c.k[c.k_at(blk, h, d, off)], s.cache) * ks;
        v[i * s.head_dim + d] = kernels::fp8_to_f32(c.v[c.v_at(blk, h, d, off)], s.cache) * vs;
      }
    }
  };
}

std::vector<float> q_floats(const OwnedCall& c) {
  std::vector<float> q(c.q.size());
  const int64_t rows = int64_t(c.spec.lens.size()) * c.spec.q_len;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < c.hq(); ++h)
      for (int64_t d = 0; d < c.spec.head_dim; ++d) q[(r * c.hq() + h) * c.spec.head_dim + d] = c.q_value(r, h, d);
  return q;
}

SourceGeometry geometry(const CallSpec& s) {
  return {.lens = s.lens, .q_len = s.q_len, .hkv = s.hkv, .group = s.group, .head_dim = s.head_dim,
          .softmax_scale = s.softmax_scale};
}

// Outputs agree within rel * sum_t w_t |v_t| (the scale of a weighted sum: the
// float rounding of scaled K/V inputs moves a cancelling output by that much);
// lse within lse_rel (1e-10 when the inputs are exact in float, about float
// epsilon when scaled codes were rounded to float).
void expect_matches_naive(const CallSpec& spec, const SourceOptions& opt, double rel, double lse_rel) {
  std::printf("[ seed ] %llu\n", (unsigned long long)spec.seed);
  const OwnedCall c = testing::make_call(spec);
  std::atomic<int64_t> largest{0};
  const std::vector<float> q = q_floats(c);
  const ReferenceResult r = source_decode(geometry(spec), q.data(), dequantized_source(c, &largest), opt);
  EXPECT_LE(largest.load(), opt.chunk_tokens) << "a chunk larger than chunk_tokens was requested";
  EXPECT_EQ(r.profile, (NumericsProfile{QQuant::none, PRound::none, kernels::DType::none}));
  const testing::Naive n = testing::naive_decode(c, false);
  ASSERT_EQ(r.out.size(), n.out.size());
  for (size_t i = 0; i < r.out.size(); ++i)
    ASSERT_NEAR(r.out[i], n.out[i], rel * n.l1[i] + 1e-7) << "element " << i;
  for (size_t i = 0; i < r.lse.size(); ++i) {
    if (std::isinf(n.lse[i])) {
      EXPECT_TRUE(std::isinf(r.lse[i]) && r.lse[i] < 0) << "row " << i;
      for (int64_t d = 0; d < spec.head_dim; ++d) EXPECT_EQ(r.out[i * spec.head_dim + d], 0.0f);
    } else {
      EXPECT_NEAR(r.lse[i], n.lse[i], lse_rel * std::fabs(n.lse[i]) + 1e-10) << "row " << i;
    }
  }
  // reference::decode with exact Q in fp64 computes the same quantity.
  ReferenceOptions ro;
  ro.precision = Precision::fp64;
  ro.error_terms = false;
  const ReferenceResult d = decode(c.call, NumericsProfile{QQuant::none, PRound::none, kernels::DType::none}, ro);
  for (size_t i = 0; i < r.out.size(); ++i)
    ASSERT_NEAR(r.out[i], d.out[i], rel * n.l1[i] + 1e-7) << "element " << i;
}

TEST(SourceDecode, MatchesNaiveAcrossSegmentsAndMtp) {
  CallSpec s;
  s.lens = {1, 0, 2, 700, 3001, 257};
  s.q_len = 3;
  s.hkv = 2;
  s.group = 3;
  s.head_dim = 64;
  s.scales = testing::Scales::none;
  s.seed = 41;
  // Small chunks and segments: many segments per sequence, merged in double.
  expect_matches_naive(s, {.chunk_tokens = 100, .segment_chunks = 2}, 1e-5, 1e-10);
}

TEST(SourceDecode, MatchesNaiveWithPerTokenScalesAndOneSegment) {
  CallSpec s;
  s.lens = {4099, 16, 513};
  s.hkv = 1;
  s.group = 8;
  s.head_dim = 128;
  s.scales = testing::Scales::token;
  s.softmax_scale = 0.3f;
  s.k_amp = 4.0f;  // peaky scores
  s.seed = 42;
  expect_matches_naive(s, {.chunk_tokens = 8192, .segment_chunks = 1}, 1e-5, 6e-8);
}

TEST(SourceDecode, SourceValuesNotCacheCodesDriveTheResult) {
  // Source K = 0 everywhere: uniform weights, so the output is the plain mean of
  // the visible V rows, which the source sets to t (token index) in every dim.
  SourceGeometry g{.lens = {5, 0}, .q_len = 2, .hkv = 1, .group = 1, .head_dim = 16};
  const std::vector<float> q(2 * 2 * 16, 1.0f);
  const ReferenceResult r = source_decode(g, q.data(), [](int64_t, int64_t, int64_t t0, int64_t n, float* k, float* v) {
    for (int64_t i = 0; i < n; ++i)
      for (int d = 0; d < 16; ++d) {
        k[i * 16 + d] = 0.0f;
        v[i * 16 + d] = float(t0 + i);
      }
  }, {.chunk_tokens = 2, .segment_chunks = 1});
  // Seq 0, position 0 sees tokens 0..3 (mean 1.5); position 1 sees 0..4 (mean 2).
  for (int d = 0; d < 16; ++d) {
    EXPECT_NEAR(r.out[r.index(0, 0, d)], 1.5f, 1e-6);
    EXPECT_NEAR(r.out[r.index(1, 0, d)], 2.0f, 1e-6);
    EXPECT_EQ(r.out[r.index(2, 0, d)], 0.0f);
    EXPECT_EQ(r.out[r.index(3, 0, d)], 0.0f);
  }
  EXPECT_NEAR(r.lse[0], std::log(4.0), 1e-12);
  EXPECT_TRUE(std::isinf(r.lse[2]));
}

// The source is asked for chunk_tokens tokens at a time (fewer only at a
// segment's end), and the calls cover every token of every sequence once, for
// each KV head: chunk_tokens is what bounds the caller's buffers.
TEST(SourceDecode, EachChunkCallAsksForAtMostChunkTokens) {
  for (int64_t chunk : {1, 3}) {
    SCOPED_TRACE("chunk_tokens " + std::to_string(chunk));
    const SourceGeometry g{.lens = {7, 0, 2}, .q_len = 1, .hkv = 2, .group = 1, .head_dim = 16};
    const std::vector<float> q(3 * 2 * 16, 1.0f);
    std::mutex mu;
    std::map<std::tuple<int64_t, int64_t, int64_t>, int> asked;  // (seq, head, token) -> times
    int64_t largest = 0;
    source_decode(g, q.data(), [&](int64_t seq, int64_t h, int64_t t0, int64_t n, float* k, float* v) {
      std::lock_guard<std::mutex> lock(mu);
      largest = std::max(largest, n);
      for (int64_t i = 0; i < n; ++i) {
        ++asked[{seq, h, t0 + i}];
        std::fill_n(k + i * 16, 16, 0.0f);
        std::fill_n(v + i * 16, 16, 1.0f);
      }
    }, {.chunk_tokens = chunk, .segment_chunks = 2});
    EXPECT_EQ(largest, chunk);
    std::map<std::tuple<int64_t, int64_t, int64_t>, int> want;
    for (int64_t seq : {0, 2})
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t t = 0; t < g.lens[seq]; ++t) want[{seq, h, t}] = 1;
    EXPECT_EQ(asked, want);
  }
}

// A geometry that names only the lengths and head_dim is one query row, one KV
// head and one query head per KV head: the defaults a caller may rely on.
TEST(SourceDecode, DefaultGeometryIsOneRowOneHead) {
  const std::vector<float> q(16, 1.0f);
  const ReferenceResult r = source_decode({.lens = {3}, .head_dim = 16}, q.data(),
                                          [](int64_t, int64_t, int64_t t0, int64_t n, float* k, float* v) {
                                            for (int64_t i = 0; i < n; ++i)
                                              for (int d = 0; d < 16; ++d) {
                                                k[i * 16 + d] = 0.0f;
                                                v[i * 16 + d] = float(t0 + i);
                                              }
                                          });
  EXPECT_EQ(r.num_seqs, 1);
  EXPECT_EQ(r.q_len, 1);
  EXPECT_EQ(r.hq, 1);
  EXPECT_EQ(r.head_dim, 16);
  ASSERT_EQ(r.out.size(), 16u);
  for (int d = 0; d < 16; ++d) EXPECT_NEAR(r.out[d], 1.0f, 1e-6);  // the mean of tokens 0, 1, 2
}

TEST(SourceDecode, RejectsBadGeometry) {
  const std::vector<float> q(16, 0.0f);
  auto none = [](int64_t, int64_t, int64_t, int64_t, float*, float*) {};
  EXPECT_THROW(source_decode({.lens = {}}, q.data(), none), std::invalid_argument);
  EXPECT_THROW(source_decode({.lens = {1}, .group = 0}, q.data(), none), std::invalid_argument);
  EXPECT_THROW(source_decode({.lens = {1}, .head_dim = 16}, nullptr, none), std::invalid_argument);
  EXPECT_THROW(source_decode({.lens = {1}, .head_dim = 16}, q.data(), none, {.chunk_tokens = 0}),
               std::invalid_argument);
}

}  // namespace
}  // namespace pav::reference
