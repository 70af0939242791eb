// SPDX-License-Identifier: Apache-2.0
// The clause walk (kernels/validate.hpp) and the launch entries that run it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/codecs.hpp"
#include "kernels/dispatch/tiny_call.hpp"
#include "kernels/launch.hpp"
#include "kernels/planner.hpp"
#include "kernels/validate.hpp"

using namespace pav::kernels;
using pav::kernels::testing::TinyCall;
using pav::kernels::testing::TinySpec;

// The launch entries' types are pinned: a caller passing what an entry does not
// take fails to compile (the upstream routed call died at run time instead).
static_assert(std::is_same_v<decltype(launch_planned), PlannedLaunchFn>);
static_assert(std::is_same_v<decltype(launch_uniform), UniformLaunchFn>);

TEST(ClauseTable, IdsNamesAndRulesAreComplete) {
  const auto table = clause_table();
  ASSERT_EQ(int(table.size()), kClauseCount);
  std::set<std::string_view> names;
  for (int i = 0; i < kClauseCount; ++i) {
    EXPECT_EQ(int(table[i].id), i + 1);
    EXPECT_FALSE(table[i].name.empty());
    EXPECT_FALSE(table[i].planned_rule.empty()) << table[i].name;
    EXPECT_TRUE(names.insert(table[i].name).second) << "duplicate name " << table[i].name;
    Clause parsed;
    ASSERT_TRUE(parse_clause(table[i].name, parsed));
    EXPECT_EQ(parsed, table[i].id);
  }
  Clause c;
  EXPECT_FALSE(parse_clause("no_such_clause", c));
  EXPECT_EQ(clause_name(Clause::none), "none");
}

TEST(Validate, ValidCallPassesBothKernels) {
  TinyCall t;
  const PlanView plan = t.make_plan();
  EXPECT_FALSE(first_violation(t.call, KernelKind::planned, &plan, &t.scratch));
  TinyCall u;
  const Scratch s = u.make_uniform_scratch();
  EXPECT_FALSE(first_violation(u.call, KernelKind::planned, nullptr, &s));
  EXPECT_FALSE(first_violation(u.call, KernelKind::uniform, nullptr, &s));
  EXPECT_TRUE(all_violations(u.call, KernelKind::planned, nullptr, &s).empty());
}

// The uniform kernel's domain is wider; the planned kernel's rejects there are
// exactly the clauses whose planned rule is narrower.
TEST(Validate, UniformAcceptsWhatOnlyThePlannedKernelRejects) {
  struct Case {
    const char* what;
    void (*edit)(TinyCall&);
    Clause planned;
  };
  const Case cases[] = {
      {"bf16 compute", [](TinyCall& t) { t.call.opt.compute = DType::bf16; }, Clause::compute_dtype},
      {"gfx90a", [](TinyCall& t) { t.call.opt.arch = Arch::gfx90a; }, Clause::arch},
      {"other fp8 flavour everywhere",
       [](TinyCall& t) {
         t.call.opt.compute = t.call.k_cache.dtype = t.call.v_cache.dtype = DType::fp8_e4m3fnuz;
       },
       Clause::compute_dtype},
  };
  for (const Case& c : cases) {
    TinyCall t;
    c.edit(t);
    const Scratch s = t.make_uniform_scratch();
    EXPECT_EQ(first_violation(t.call, KernelKind::planned, nullptr, &s).clause, c.planned) << c.what;
    EXPECT_FALSE(first_violation(t.call, KernelKind::uniform, nullptr, &s)) << c.what;
  }
  // Block size 32 and head_dim 48 are fine for the uniform kernel only.
  TinySpec spec;
  spec.block_size = 32;
  spec.head_dim = 48;
  TinyCall t(spec);
  const Scratch s = t.make_uniform_scratch();
  const auto planned = all_violations(t.call, KernelKind::planned, nullptr, &s);
  ASSERT_EQ(planned.size(), 2u);
  EXPECT_EQ(planned[0].clause, Clause::block_size);
  EXPECT_EQ(planned[1].clause, Clause::head_dim);
  EXPECT_TRUE(all_violations(t.call, KernelKind::uniform, nullptr, &s).empty());
}

TEST(Validate, MessageNamesClauseFieldAndValue) {
  TinySpec spec;
  spec.block_size = 32;
  TinyCall t(spec);
  const Finding f = first_violation(t.call, KernelKind::planned, nullptr, nullptr);
  ASSERT_EQ(f.clause, Clause::block_size);
  const std::string m = describe(f);
  EXPECT_NE(m.find("block_size"), std::string::npos) << m;
  EXPECT_NE(m.find("k_cache.shape[3] = 32"), std::string::npos) << m;

  TinyCall u;
  u.call.context_lens.dtype = DType::i64;
  try {
    validate_planned(u.call, nullptr, u.make_uniform_scratch());
    FAIL() << "int64 lengths accepted";
  } catch (const RejectError& e) {
    EXPECT_EQ(e.clause(), Clause::context_lens_dtype);
    EXPECT_NE(std::string(e.what()).find("context_lens.dtype = i64"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected i32"), std::string::npos) << e.what();
  }
}

// A rejection with one dtype and no expected one (a query dtype pav does not
// take) names the dtype itself, not a flag's "set".
TEST(Validate, AOneDtypeRejectionNamesTheDtype) {
  TinyCall t;
  t.call.q.dtype = DType::f32;
  try {
    validate_planned(t.call, nullptr, t.make_uniform_scratch());
    FAIL() << "an f32 query accepted";
  } catch (const RejectError& e) {
    EXPECT_EQ(e.clause(), Clause::q_dtype);
    EXPECT_NE(std::string(e.what()).find("q.dtype = f32"), std::string::npos) << e.what();
  }
}

// Each scratch tensor of the wrong dtype is named, with the dtype it has and the
// one it must have, in that order.
TEST(Validate, ScratchDtypeMessagesNameTheTensorAndBothDtypes) {
  for (const char* which : {"partial", "m", "l"}) {
    TinyCall t;
    Scratch s = t.make_uniform_scratch();
    TensorView& v = std::string(which) == "partial" ? s.partial : std::string(which) == "m" ? s.m : s.l;
    ASSERT_TRUE(v.present()) << which;
    v.dtype = DType::bf16;
    const Finding f = first_violation(t.call, KernelKind::uniform, nullptr, &s);
    ASSERT_EQ(f.clause, Clause::scratch_dtype) << which;
    const std::string m = describe(f);
    EXPECT_NE(m.find(std::string("scratch.") + which + ".dtype = bf16"), std::string::npos) << m;
    EXPECT_NE(m.find("expected f32"), std::string::npos) << m;
  }
}

// head_dim 256 over a cache whose num_hgroups encodes 128: the kernel rejects it,
// so no caller may treat it as accepted (defect 12, docs/numerics.md).
TEST(Validate, HeadDimMustAgreeWithCacheGroups) {
  TinySpec spec;
  spec.head_dim = 256;
  TinyCall t(spec);
  t.call.k_cache.shape[2] = 8;  // num_hgroups of head_dim 128
  const Finding f = first_violation(t.call, KernelKind::planned, nullptr, nullptr);
  EXPECT_EQ(f.clause, Clause::num_hgroups);
  EXPECT_EQ(f.value, 8);
  EXPECT_EQ(f.expected, 16);
}

// The layout's two parts (first_rows_violation, first_layout_violation) are
// the walk's own clauses: on a call that breaks one layout rule, the parts name
// the clause the walk names. The contract check of a kernel under test calls
// the parts, so it cannot drift from the kernels' validation.
TEST(Layout, ThePartsNameTheWalksClause) {
  static float f32_one = 1.0f, f32_two[2] = {1.0f, 1.0f};
  static uint16_t f16_one = 0x3c00;
  struct Case {
    const char* what;
    void (*edit)(TinyCall&);
    Clause clause;
  };
  const Case cases[] = {
      {"q rank 2", [](TinyCall& t) { t.call.q.rank = 2; }, Clause::q_rank},
      {"out with one head", [](TinyCall& t) { t.call.out.shape[1] = 1; }, Clause::out_shape},
      {"q head-dim stride 2", [](TinyCall& t) { t.call.q.stride[2] = 2; }, Clause::q_head_dim_stride},
      {"out head-dim stride 2", [](TinyCall& t) { t.call.out.stride[2] = 2; }, Clause::out_head_dim_stride},
      {"3 query heads over 2 KV heads", [](TinyCall& t) { t.call.q.shape[1] = t.call.out.shape[1] = 3; },
       Clause::head_ratio},
      {"block_tables i64", [](TinyCall& t) { t.call.block_tables.dtype = DType::i64; }, Clause::block_tables_dtype},
      {"block_tables rank 1", [](TinyCall& t) { t.call.block_tables.rank = 1; }, Clause::block_tables_rank},
      {"block_tables strided", [](TinyCall& t) { t.call.block_tables.stride[1] = 2; },
       Clause::block_tables_contiguous},
      {"context_lens i64", [](TinyCall& t) { t.call.context_lens.dtype = DType::i64; }, Clause::context_lens_dtype},
      {"context_lens rank 2", [](TinyCall& t) { t.call.context_lens.rank = 2; }, Clause::context_lens_rank},
      {"context_lens strided", [](TinyCall& t) { t.call.context_lens.stride[0] = 2; },
       Clause::context_lens_contiguous},
      {"no sequence", [](TinyCall& t) { t.call.context_lens.shape[0] = 0; }, Clause::num_seqs},
      {"q_len 0", [](TinyCall& t) { t.call.q_len = 0; }, Clause::q_len},
      {"a padding row", [](TinyCall& t) { t.call.q.shape[0] = t.call.out.shape[0] = 3; }, Clause::q_rows},
      {"one table row", [](TinyCall& t) { t.call.block_tables.shape[0] = 1; }, Clause::block_tables_rows},
      {"k_scale alone",
       [](TinyCall& t) { t.call.k_scale = TensorView::contiguous_of(&f32_one, DType::f32, {1}); },
       Clause::scale_pairing},
      {"an f16 scale",
       [](TinyCall& t) {
         t.call.k_scale = TensorView::contiguous_of(&f16_one, DType::f16, {1});
         t.call.v_scale = TensorView::contiguous_of(&f32_one, DType::f32, {1});
       },
       Clause::scale_dtype},
      {"a [2, 1] scale",
       [](TinyCall& t) {
         t.call.k_scale = t.call.v_scale = TensorView::contiguous_of(f32_two, DType::f32, {2, 1});
       },
       Clause::scale_shape},
  };
  for (const Case& c : cases) {
    TinySpec spec;
    spec.hkv = 2;
    TinyCall t(spec);
    c.edit(t);
    const Finding walk = first_violation(t.call, KernelKind::uniform, nullptr, nullptr);
    const LayoutRules rules{.pages = t.call.k_cache.shape[0], .hkv = t.call.k_cache.shape[1],
                            .page_size = t.call.k_cache.shape[3], .dims_read = true, .sound = true};
    Finding part = first_rows_violation(t.call);
    if (!part) part = first_layout_violation(t.call, rules);
    EXPECT_EQ(clause_name(walk.clause), clause_name(c.clause)) << c.what;
    EXPECT_EQ(clause_name(part.clause), clause_name(c.clause)) << c.what;
    EXPECT_STREQ(part.field, walk.field) << c.what;
  }
}

TEST(Launch, PlannedRunsAValidCall) {
  TinyCall t;
  const PlanView plan = t.make_plan();
  std::fill(t.out.begin(), t.out.end(), uint16_t(0x7fc0));  // NaN
  const DecodeResult r = launch_planned(t.call, &plan, t.scratch);
  EXPECT_EQ(r.status, DecodeStatus::ok);
  // Zero keys and values: every visible row averages zeros.
  for (uint16_t h : t.out) ASSERT_EQ(bf16_to_f32(h), 0.0f);
}

TEST(Launch, PlannedThrowsTheClauseAndWritesNothing) {
  TinyCall t;
  const PlanView plan = t.make_plan();
  t.call.opt.compute = DType::bf16;
  std::fill(t.out.begin(), t.out.end(), uint16_t(0x7fc0));
  try {
    (void)launch_planned(t.call, &plan, t.scratch);
    FAIL() << "bf16 compute accepted by the planned kernel";
  } catch (const RejectError& e) {
    EXPECT_EQ(e.clause(), Clause::compute_dtype);
  }
  for (uint16_t h : t.out) ASSERT_TRUE(std::isnan(bf16_to_f32(h)));
  // The uniform kernel runs it.
  launch_uniform(t.call, t.make_uniform_scratch());
  for (uint16_t h : t.out) ASSERT_EQ(bf16_to_f32(h), 0.0f);
}

namespace {

// Sequence 0's rows are NaN (not attended) and sequence 1's are computed
// (zero keys and values average to zero).
void expect_only_sequence_0_stale(const TinyCall& t) {
  const int64_t row_elems = t.call.q.shape[1] * t.call.q.shape[2];
  for (int64_t i = 0; i < row_elems; ++i) ASSERT_TRUE(std::isnan(bf16_to_f32(t.out[size_t(i)]))) << i;
  for (int64_t i = row_elems; i < 2 * row_elems; ++i) ASSERT_EQ(bf16_to_f32(t.out[size_t(i)]), 0.0f) << i;
}

// Writes `value` over one plan row (a torn refresh), launches over poisoned
// outputs and puts the row back. Sequence 0 (whose range holds the row) must
// be found stale by the launch and by plan_is_fresh, and sequence 1 computed.
DecodeResult expect_torn_row_stales_sequence_0(TinyCall& t, const PlanView& plan, int32_t* row,
                                               const std::array<int32_t, 4>& value) {
  std::array<int32_t, 4> saved;
  std::copy_n(row, 4, saved.begin());
  std::copy_n(value.begin(), 4, row);
  std::fill(t.out.begin(), t.out.end(), uint16_t(0x7fc0));
  const bool fresh = plan_is_fresh(plan, t.lens.data(), 2);
  const DecodeResult r = launch_planned(t.call, &plan, t.scratch);
  std::copy_n(saved.begin(), 4, row);
  EXPECT_FALSE(fresh);
  EXPECT_EQ(r.status, DecodeStatus::stale_plan);
  EXPECT_GE(r.stale_tasks, 1);
  EXPECT_EQ(r.stale_rows, 0);
  expect_only_sequence_0_stale(t);
  return r;
}

}  // namespace

// A torn plan, one task row of a long sequence recorded with another length
// (a refresh interrupted half-way), makes that whole sequence stale, whichever
// of its tasks tore: each task row of the long sequence is torn alone in turn.
TEST(Launch, PlannedTornTaskRowMakesItsSequenceStale) {
  TinySpec spec;
  spec.lens = {3000, 20};  // 12 tiles and 1 tile over 8 CUs: the long sequence takes several tasks
  TinyCall t(spec);
  const PlanView plan = t.make_plan();
  const int32_t first = plan.reduce_info[0], count = plan.reduce_info[1];
  ASSERT_GE(count, 4) << "the long sequence must be split";
  for (int32_t task = first; task < first + count; ++task) {
    SCOPED_TRACE("task " + std::to_string(task) + " of tiles " + std::to_string(plan.work_info[4 * task + 1]) +
                 ".." + std::to_string(plan.work_info[4 * task + 2]));
    int32_t* row = plan.work_info + 4 * task;  // torn: this row alone records 3001 tokens
    EXPECT_EQ(expect_torn_row_stales_sequence_0(t, plan, row, {row[0], row[1], row[2], row[3] + 1}).stale_tasks, 1);
  }
}

// A torn plan whose left-behind row records a live length, so that a check of
// lengths alone passes it: another sequence's row (with that sequence's live
// length), or the sequence's own row under an earlier split (the live length,
// other tiles). Attended, the first merges the other sequence's partial into
// this one and never reads some of its tiles; the second reads some tiles twice
// or never. Each makes its sequence stale: NaN rows, the other sequence
// computed, and plan_is_fresh says so.
TEST(Launch, PlannedTornRowRecordingALiveLengthMakesItsSequenceStale) {
  TinySpec spec;
  spec.lens = {3000, 20};
  TinyCall t(spec);
  const PlanView plan = t.make_plan();
  const int32_t first = plan.reduce_info[0], count = plan.reduce_info[1], other = plan.reduce_info[2];
  ASSERT_GE(count, 4) << "the long sequence must be split";
  ASSERT_TRUE(plan_is_fresh(plan, t.lens.data(), 2));
  int32_t* mid = plan.work_info + 4 * (first + 1);
  int32_t* last = plan.work_info + 4 * (first + count - 1);
  const int32_t* seq1 = plan.work_info + 4 * other;
  struct Tear {
    const char* what;
    int32_t* row;
    std::array<int32_t, 4> value;
  };
  const std::vector<Tear> tears{
      {"sequence 1's row in sequence 0's range", mid, {seq1[0], seq1[1], seq1[2], seq1[3]}},
      {"an earlier split's row: the right start, a later end", mid, {0, mid[1], mid[2] + 1, 3000}},
      {"an earlier split's row: an earlier start", mid, {0, mid[1] - 1, mid[2], 3000}},
      {"an empty row", mid, {0, mid[1], mid[1], 3000}},
      {"the last row ending a tile short", last, {0, last[1], last[2] - 1, 3000}},
  };
  for (const Tear& tear : tears) {
    SCOPED_TRACE(tear.what);
    expect_torn_row_stales_sequence_0(t, plan, tear.row, tear.value);
  }
  ASSERT_TRUE(plan_is_fresh(plan, t.lens.data(), 2));  // every tear undone
}

// Two sequences of one length get the same split, so a row of sequence 1 left
// in sequence 0's range records sequence 0's live length and its tiles line up:
// only the sequence the row names tells it apart. Sequence 0 is stale, sequence
// 1 (whose own rows are intact) is computed.
TEST(Launch, PlannedTornRowOfAnEqualSequenceMakesItsSequenceStale) {
  TinySpec spec;
  spec.lens = {3000, 3000};
  TinyCall t(spec);
  const PlanView plan = t.make_plan();
  const int32_t first0 = plan.reduce_info[0], first1 = plan.reduce_info[2], count = plan.reduce_info[1];
  ASSERT_EQ(count, plan.reduce_info[3]) << "equal lengths, equal splits";
  ASSERT_GE(count, 2);
  for (int32_t j = 0; j < count; ++j) {
    SCOPED_TRACE("row " + std::to_string(j));
    int32_t* row = plan.work_info + 4 * (first0 + j);
    const int32_t* twin = plan.work_info + 4 * (first1 + j);
    ASSERT_EQ(twin[0], 1);
    ASSERT_TRUE(twin[1] == row[1] && twin[2] == row[2] && twin[3] == row[3]) << "only the sequence differs";
    EXPECT_EQ(expect_torn_row_stales_sequence_0(t, plan, row, {twin[0], twin[1], twin[2], twin[3]}).stale_tasks, 1);
  }
}

// A plan refreshed from other lengths is not attended: the launch reports it
// and the affected sequence's rows are NaN, the other sequence's are computed.
TEST(Launch, PlannedSurfacesAStalePlan) {
  TinyCall t;  // lens {300, 20}
  const PlanView plan = t.make_plan();
  t.lens[0] = 299;  // a shrink inside the same tiles: same shapes, stale lengths
  const DecodeResult r = launch_planned(t.call, &plan, t.scratch);
  EXPECT_EQ(r.status, DecodeStatus::stale_plan);
  EXPECT_GT(r.stale_tasks, 0);
  expect_only_sequence_0_stale(t);
}
