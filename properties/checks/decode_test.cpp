// SPDX-License-Identifier: Apache-2.0
// Decode properties of pav's own kernels, through their adapter as every kernel
// under test is checked: planned and uniform decode against the reference on
// generated uneven calls (boundary lengths, NaN-poisoned outputs, scratch and
// out-of-context cache bytes), pav's settings drawn per case, and bit-exact
// batch invariance for a fixed split. Each property runs through the fuzz
// engine, which prints its seed and shrinks and saves a failure.
#include <gtest/gtest.h>

#include <random>

#include "properties/checks/builtin_properties.hpp"
#include "properties/engine/counterexample.hpp"
#include "properties/gen/gen.hpp"
#include "properties/checks/kernel_properties.hpp"
#include "properties/checks/replay.hpp"
#include "properties/checks/runner_kernel.hpp"

using namespace pav::kernels;
using namespace pav::props;
namespace fz = pav::props::fuzz;

namespace {

// 100 cases of a built-in property on the CPU backend from a fresh seed.
void expect_property_holds(const char* name) {
  const fz::Property* p = fz::find_property(name);
  ASSERT_NE(p, nullptr) << name;
  fz::FuzzOptions o;
  o.cases = 100;
  o.seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  o.progress = false;
  o.label = name;
  const fz::FuzzReport r = fz::run_fuzz(o, {p}, stdout, nullptr);
  ASSERT_EQ(r.runs.size(), 1u);
  if (const fz::PropertyRun* f = r.first_failure())
    ADD_FAILURE() << name << ": " << f->failure->message << " (" << f->failure->reproduce << "; saved "
                  << f->saved_path << ")";
}

nlohmann::json meta_of(const char* property, nlohmann::json more = nlohmann::json::object()) {
  more["property"] = property;
  return more;
}

}  // namespace

TEST(DecodeProps, CpuDecodeMatchesReference) { expect_property_holds("decode"); }

TEST(DecodeProps, BatchInvariantForFixedSplit) { expect_property_holds("batch-invariance"); }

TEST(DecodeCases, BatchInvariantShortBesideLong) {
  // The property above at a fixed point where a partition size borrowed from
  // another request shows: a 3-tile request beside a 40-tile one, 4 splits.
  CaseSpec spec;
  spec.lens = {10000, 700};
  spec.group = 2;
  spec.path = Path::uniform;
  spec.max_partitions = 4;
  spec.seed = 5;
  for (int64_t seq = 0; seq < 2; ++seq) {
    const fz::Verdict v = fz::replay_case(spec, meta_of("batch-invariance", {{"seq", seq}}), {});
    EXPECT_TRUE(v.passed) << "request " << seq << ": " << v.message;
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
    std::string ran;
    const fz::Verdict v = fz::replay_case(s, meta_of("decode"), {}, &ran);
    EXPECT_EQ(ran, "decode");
    EXPECT_TRUE(v.passed) << (path == Path::planned ? "planned: " : "uniform: ") << v.message;
  }
}

TEST(DecodeCases, FullyMaskedRowsAreExactlyZero) {
  // q_len 4 over lengths shorter than q_len: early positions see no token.
  CaseSpec s;
  s.lens = {1, 2, 3, 0};
  s.q_len = 4;
  s.group = 3;
  s.path = Path::planned;
  const auto k = fz::pav_kernel_for_case(s, Backend::cpu);
  HostCase c = build_case(s);
  KernelCall kc;
  prepare_kernel_call(kc, c, k->description());
  const CheckedRun run = run_checked(*k, kc.request);
  ASSERT_TRUE(run.ok()) << outcome_text(run.decode);
  const KernelJudgement j = judge_kernel_output(kc.request, k->description());
  ASSERT_TRUE(j.passed) << j.verdict;
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
