// SPDX-License-Identifier: Apache-2.0
// Decode properties: planned and uniform CPU decode against the reference on
// generated uneven calls (boundary lengths, NaN-poisoned outputs, scratch and
// out-of-context cache bytes), and bit-exact batch invariance for a fixed split.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>

#include "properties/case_format.hpp"
#include "properties/counterexample.hpp"
#include "properties/gen.hpp"
#include "properties/runner.hpp"

using namespace pav::kernels;
using namespace pav::props;

RC_GTEST_PROP(DecodeProps, CpuDecodeMatchesReference, ()) {
  const CaseSpec spec = *gen_decode_case();
  HostCase c = build_case(spec);
  const CaseCheck k = check_case(c);
  if (!k.passed) {
    try {
      const std::string path = save_counterexample(default_counterexample_dir(),
                                                    "DecodeProps.CpuDecodeMatchesReference", std::nullopt, spec);
      RC_LOG() << "counterexample saved to " << path << "\n";
    } catch (const std::exception& e) {
      RC_LOG() << "counterexample not saved: " << e.what() << "\n";
    }
  }
  if (!k.passed) RC_FAIL(k.verdict);
}

RC_GTEST_PROP(DecodeProps, BatchInvariantForFixedSplit, ()) {
  DecodeGenLimits lim;
  lim.allow_long = false;
  CaseSpec spec = *gen_decode_case(lim);
  spec.path = Path::uniform;
  spec.opt.uniform_partitions = *rc::gen::inRange(1, 9);
  HostCase batch = build_case(spec);
  run_case(batch);
  const int64_t seq = *rc::gen::inRange<int64_t>(0, int64_t(spec.lens.size()));
  HostCase alone = build_case(single_sequence_spec(batch, seq));
  run_case(alone);
  const int64_t row_elems = int64_t(spec.hkv) * spec.group * spec.head_dim;
  const uint16_t* in_batch = &batch.out[seq * spec.q_len * row_elems];
  RC_ASSERT(std::memcmp(in_batch, alone.out.data(), size_t(spec.q_len * row_elems) * 2) == 0);
}

TEST(DecodeCases, BatchInvariantShortBesideLong) {
  // The property above at a fixed point where a partition size borrowed from
  // another request shows: a 3-tile request beside a 40-tile one, 4 splits.
  CaseSpec spec;
  spec.lens = {10000, 700};
  spec.group = 2;
  spec.path = Path::uniform;
  spec.opt.uniform_partitions = 4;
  spec.seed = 5;
  HostCase batch = build_case(spec);
  run_case(batch);
  const int64_t row_elems = int64_t(spec.hkv) * spec.group * spec.head_dim;
  for (int64_t seq = 0; seq < 2; ++seq) {
    HostCase alone = build_case(single_sequence_spec(batch, seq));
    run_case(alone);
    EXPECT_EQ(std::memcmp(&batch.out[size_t(seq * spec.q_len * row_elems)], alone.out.data(),
                          size_t(spec.q_len * row_elems) * 2),
              0)
        << "request " << seq << " differs in the batch and alone";
  }
}

TEST(DecodeCases, SentinelAtEveryTileBoundaryIsSeen) {
  // A long uneven batch where each sequence has dominant tokens at tile
  // boundaries: a skipped or duplicated tile moves the output by O(1).
  for (Path path : {Path::planned, Path::uniform}) {
    CaseSpec s;
    s.lens = {5000, 257, 0, 1, 2304};
    s.group = 4;
    s.hkv = 2;
    s.opt.cu = 16;
    s.path = path;
    s.sentinels = boundary_sentinels(s.lens);
    s.seed = 42;
    HostCase c = build_case(s);
    const CaseCheck k = check_case(c);
    EXPECT_TRUE(k.passed) << (path == Path::planned ? "planned: " : "uniform: ") << k.verdict;
  }
}

TEST(DecodeCases, FullyMaskedRowsAreExactlyZero) {
  // q_len 4 over lengths shorter than q_len: early positions see no token.
  CaseSpec s;
  s.lens = {1, 2, 3, 0};
  s.q_len = 4;
  s.group = 3;
  s.path = Path::planned;
  HostCase c = build_case(s);
  const CaseCheck k = check_case(c);
  ASSERT_TRUE(k.passed) << k.verdict;
  const int64_t row = int64_t(s.group) * s.head_dim;
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t p = 0; p < s.q_len; ++p) {
      if (row_has_visible_token(s, b, p)) continue;
      for (int64_t i = 0; i < row; ++i) {
        const uint16_t bits = c.out[(b * s.q_len + p) * row + i];
        ASSERT_TRUE(bits == 0 || bits == 0x8000) << "seq " << b << " pos " << p;
      }
    }
}
