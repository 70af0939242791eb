// SPDX-License-Identifier: Apache-2.0
// The memory the reference reports, counted exactly: a bound alone would pass
// a count that forgets a buffer or subtracts one. Each split (sequence, KV
// head) pair keeps one state per segment (m and l per query row; acc, and with
// error terms l1, l2 and sub, per row and head dim); each worker's chunk
// buffers are those of the largest chunk the call needs, whatever the context.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reference/decode.hpp"
#include "reference/test_call.hpp"

namespace pav::reference {
namespace {

using testing::CallSpec;
using testing::make_call;

struct Shape {
  int64_t rows, D, bs;
};

// Chunk buffers of one worker over chunks of c tokens, for this shape. The
// score side is double at either precision: K [D, c], the query rows [rows, D]
// and Q.K [rows, c]. In the precision's element: V [c, D], the shifted scores
// and P [rows, c], the running max and rescale [rows] each; with error terms
// also |V| and V^2 ([c, D] each), P over min(P, c) [2 rows, c], P^2 [rows, c]
// and [2 rows, D] of scratch. Then the per-token scales of K and V (float, c
// each) and one decoded block of the packed fp8 cache (float, D * bs).
int64_t chunk_buffer_bytes(const Shape& s, int64_t c, bool terms, int64_t elem) {
  const int64_t scores = s.D * c + s.rows * s.D + s.rows * c;
  int64_t n = s.D * c + s.rows * c + 2 * s.rows;
  // The products' buffer: [2 rows, D] with the error terms, else [rows, D].
  n += (terms ? 2 : 1) * s.rows * s.D;
  if (terms) n += 2 * c * s.D + 2 * s.rows * c + s.rows * c;
  return scores * int64_t(sizeof(double)) + n * elem + int64_t(sizeof(float)) * (2 * c + s.D * s.bs);
}

int64_t state_bytes(const Shape& s, bool terms, int64_t elem) {
  return elem * (2 * s.rows + (terms ? 4 : 1) * s.rows * s.D);
}

// A call of this shape (head_dim 64, blocks of 16) over lens.
CallSpec spec_of(std::vector<int32_t> lens, int64_t hkv, int64_t group, int64_t q_len) {
  CallSpec spec;
  spec.lens = std::move(lens);
  spec.hkv = hkv;
  spec.group = group;
  spec.q_len = q_len;
  spec.head_dim = 64;
  spec.block_size = 16;
  return spec;
}

TEST(ReferenceMemory, StatesAndChunkBuffersAreCountedExactly) {
  // Segments of 256 tokens: 700 -> 3, 90 -> 1 (not split), 0 -> none, 301 -> 2.
  const CallSpec spec = spec_of({700, 90, 0, 301}, 2, 3, 2);
  const auto c = make_call(spec);
  const Shape shape{.rows = 6, .D = 64, .bs = 16};
  const int64_t split_states = spec.hkv * (3 + 2);
  for (const Precision p : {Precision::fp32, Precision::fp64})
    for (const bool terms : {true, false}) {
      const int64_t elem = p == Precision::fp32 ? 4 : 8;
      SCOPED_TRACE(std::string(p == Precision::fp32 ? "fp32" : "fp64") + (terms ? ", error terms" : ", no terms"));
      const ReferenceResult r =
          decode(c.call, {.precision = p, .chunk_tokens = 128, .segment_tokens = 256, .error_terms = terms});
      EXPECT_EQ(r.segment_state_bytes, split_states * state_bytes(shape, terms, elem));
      EXPECT_EQ(r.chunk_buffer_bytes, chunk_buffer_bytes(shape, 128, terms, elem));
    }
}

TEST(ReferenceMemory, ShortCallsHoldOnlyTheirLongestSequenceAndNoState) {
  CallSpec spec = spec_of({50, 20, 0}, 1, 4, 1);
  const auto c = make_call(spec);
  const Shape shape{.rows = 4, .D = 64, .bs = 16};
  // The chunk is cut to the longest sequence (50 tokens); nothing is split.
  const ReferenceResult r = decode(c.call, {.chunk_tokens = 512, .segment_tokens = 8192});
  EXPECT_EQ(r.segment_state_bytes, 0);
  EXPECT_EQ(r.chunk_buffer_bytes, chunk_buffer_bytes(shape, 50, true, 4));
  // One token past a segment splits the sequence into two states per head.
  spec.lens = {257, 20, 0};
  const auto c2 = make_call(spec);
  const ReferenceResult r2 = decode(c2.call, {.chunk_tokens = 512, .segment_tokens = 256});
  EXPECT_EQ(r2.segment_state_bytes, 2 * state_bytes(shape, true, 4));
  EXPECT_EQ(r2.chunk_buffer_bytes, chunk_buffer_bytes(shape, 257, true, 4));
  // At the segment exactly: one segment, no state.
  spec.lens = {256, 20, 0};
  const auto c3 = make_call(spec);
  EXPECT_EQ(decode(c3.call, {.chunk_tokens = 512, .segment_tokens = 256}).segment_state_bytes, 0);
}

}  // namespace
}  // namespace pav::reference
