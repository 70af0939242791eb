// SPDX-License-Identifier: Apache-2.0
// Small cases for compute-sanitizer (memcheck, racecheck): every kernel runs
// at least once with out-of-context bytes, MTP rows, several row chunks,
// both reduce variants and the vectorized one, and every attention body. ci/gpu.sh runs GpuSanitize.*
// under the sanitizers; the full suites run without them.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/hip/gpu_backend.hpp"
#include "kernels/hip/tests/gpu_test_support.hpp"
#include "properties/gen/gen.hpp"

namespace pav::kernels::gpu::testing {
namespace {

props::CaseSpec small_spec(uint64_t seed) {
  props::CaseSpec s;
  s.lens = {0, 1, 257, 515, 3};
  s.group = 5;
  s.q_len = 2;
  s.seed = seed;
  s.scales = props::ScaleKind::per_token;
  s.sentinels = props::boundary_sentinels(s.lens);
  return s;
}

TEST(GpuSanitize, UniformSmall) {
  props::CaseSpec s = small_spec(9001);
  s.opt.uniform_partitions = 3;
  s.v_layout = VLayout::trans;
  const Outcome o = run_case(s, props::Path::uniform);
  EXPECT_TRUE(o.ok) << o.message;
}

TEST(GpuSanitize, UniformDirectSmall) {
  props::CaseSpec s = small_spec(9002);
  s.opt.uniform_partitions = 1;
  s.head_dim = 64;
  const Outcome o = run_case(s, props::Path::uniform);
  EXPECT_TRUE(o.ok) << o.message;
}

TEST(GpuSanitize, PlannedBoundedVectorizedSmall) {
  props::CaseSpec s = small_spec(9003);
  s.max_partitions = 4;
  s.group = 17;  // 34 rows: three row chunks
  const Outcome o = run_case(s, props::Path::planned);
  EXPECT_TRUE(o.ok) << o.message;
}

// The general reduce in row chunks, its walks shared by 2 (f32 partials: one
// dim per thread) and 16 threads (bf16: eight dims per thread).
TEST(GpuSanitize, PlannedGeneralReduceSmall) {
  uint64_t seed = 9004;
  for (DType partial : {DType::f32, DType::bf16}) {
    props::CaseSpec s = small_spec(seed);
    seed += 1000;
    s.opt.cu = 132;
    s.max_partitions = 100;
    s.opt.partial = partial;
    const Outcome o = run_case(s, props::Path::planned);
    EXPECT_TRUE(o.ok) << o.message;
  }
}

// The matrix-unit body (per-tensor scales): one, two, three and four n tiles,
// two row passes, D 64 (warps sharing an m tile) and 128, both V layouts, tails.
TEST(GpuSanitize, MatrixBodySmall) {
  uint64_t seed = 9101;
  for (int group : {3, 5, 11, 17})
    for (int head_dim : {64, 128}) {
      props::CaseSpec s = small_spec(seed++);
      s.scales = props::ScaleKind::per_tensor;
      s.group = group;
      s.head_dim = head_dim;
      s.v_layout = group == 5 ? VLayout::trans : VLayout::plain;
      const Outcome o = run_case(s, group == 17 ? props::Path::uniform : props::Path::planned);
      EXPECT_TRUE(o.ok) << o.message;
    }
}

}  // namespace
}  // namespace pav::kernels::gpu::testing
