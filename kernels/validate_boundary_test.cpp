// SPDX-License-Identifier: Apache-2.0
// Every validated limit of the clause walk, on both sides: at the limit, one
// inside and one outside, with the verdict each kernel must give (the planned
// kernel's rules are narrower than the uniform kernel's). For each case the
// walk, the routing gate and the launch entry must agree: an accepted call
// really runs, a rejected one throws the same clause. The planner's own
// parameter limits (resolve) are pinned the same way at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/codecs.hpp"
#include "kernels/dispatch/gate.hpp"
#include "kernels/dispatch/tiny_call.hpp"
#include "kernels/launch.hpp"
#include "kernels/planner.hpp"
#include "kernels/planner_balanced.hpp"
#include "kernels/validate.hpp"

using namespace pav::kernels;
using pav::kernels::dispatch::gate;
using pav::kernels::testing::TinyCall;
using pav::kernels::testing::TinySpec;

namespace {

struct LimitCase {
  std::string what;
  std::function<void(TinySpec&)> spec = [](TinySpec&) {};
  std::function<void(TinyCall&)> edit = [](TinyCall&) {};       // before plan and scratch are made
  std::function<void(PlanView&)> plan_edit = [](PlanView&) {};  // after
  bool with_plan = true;
  Clause planned = Clause::none;  // expected first violation of the planned kernel
  Clause uniform = Clause::none;  // and of the uniform kernel
  bool launch = true;             // launch when accepted (views that overstate a buffer: no)
};

void check(const LimitCase& c) {
  SCOPED_TRACE(c.what);
  TinySpec spec;
  c.spec(spec);
  TinyCall t(spec);
  c.edit(t);
  PlanView plan;
  const PlanView* pp = nullptr;
  if (c.with_plan) {
    plan = t.make_plan();
    c.plan_edit(plan);
    pp = &plan;
  } else {
    t.make_uniform_scratch();
  }
  const Scratch planned_scratch = t.scratch;
  // The walk, the gate and the launch, for the planned kernel.
  EXPECT_EQ(clause_name(first_violation(t.call, KernelKind::planned, pp, &planned_scratch).clause),
            clause_name(c.planned));
  const auto verdict = gate(t.call, pp, &planned_scratch);
  EXPECT_EQ(verdict.accepted, c.planned == Clause::none);
  EXPECT_EQ(clause_name(verdict.clause), clause_name(c.planned));
  if (c.planned != Clause::none) {
    try {
      (void)launch_planned(t.call, pp, planned_scratch);
      ADD_FAILURE() << "the planned launch accepted a call the walk rejects";
    } catch (const RejectError& e) {
      EXPECT_EQ(clause_name(e.clause()), clause_name(c.planned));
    }
  } else if (c.launch) {
    EXPECT_EQ(launch_planned(t.call, pp, planned_scratch).status, DecodeStatus::ok);
  }
  // The uniform kernel never takes a plan.
  if (c.uniform == Clause::none && !c.launch) {
    EXPECT_FALSE(first_violation(t.call, KernelKind::uniform, nullptr, nullptr));
    return;
  }
  const Scratch uniform_scratch = t.make_uniform_scratch();
  EXPECT_EQ(clause_name(first_violation(t.call, KernelKind::uniform, nullptr, &uniform_scratch).clause),
            clause_name(c.uniform));
  if (c.uniform != Clause::none) {
    try {
      launch_uniform(t.call, uniform_scratch);
      ADD_FAILURE() << "the uniform launch accepted a call the walk rejects";
    } catch (const RejectError& e) {
      EXPECT_EQ(clause_name(e.clause()), clause_name(c.uniform));
    }
  } else if (c.launch) {
    EXPECT_NO_THROW(launch_uniform(t.call, uniform_scratch));
  }
}

std::vector<int32_t> ones(size_t n) { return std::vector<int32_t>(n, 1); }

}  // namespace

TEST(ValidateLimits, NumSeqs) {
  check({.what = "4096 sequences with a plan: the planned kernel's limit",
         .spec = [](TinySpec& s) { s.lens = ones(4096); }});
  check({.what = "4096 sequences without a plan", .spec = [](TinySpec& s) { s.lens = ones(4096); },
         .with_plan = false});
  check({.what = "4095 sequences", .spec = [](TinySpec& s) { s.lens = ones(4095); }});
  check({.what = "4097 sequences: planned rejects, uniform runs",
         .spec = [](TinySpec& s) { s.lens = ones(4097); }, .with_plan = false,
         .planned = Clause::num_seqs});
  check({.what = "one sequence", .spec = [](TinySpec& s) { s.lens = {7}; }});
  check({.what = "no sequence", .spec = [](TinySpec& s) { s.lens = {}; }, .with_plan = false,
         .planned = Clause::num_seqs, .uniform = Clause::num_seqs});
}

TEST(ValidateLimits, QLenAndRows) {
  check({.what = "q_len 1"});
  check({.what = "q_len 2", .spec = [](TinySpec& s) { s.q_len = 2; }});
  check({.what = "q_len 0", .spec = [](TinySpec& s) { s.q_len = 0; }, .with_plan = false,
         .planned = Clause::q_len, .uniform = Clause::q_len});
  // q rows must be exactly num_seqs * q_len: no padding rows, none missing.
  for (int d : {-1, 1})
    check({.what = "q rows num_seqs * q_len " + std::string(d > 0 ? "+ 1" : "- 1"),
           .spec = [](TinySpec& s) { s.q_len = 2; },
           .edit = [d](TinyCall& t) { t.call.q.shape[0] = t.call.out.shape[0] = 4 + d; }, .with_plan = false,
           .planned = Clause::q_rows, .uniform = Clause::q_rows, .launch = false});
}

TEST(ValidateLimits, HeadDim) {
  for (int64_t d : {64, 128, 256, 1024})
    check({.what = "head_dim " + std::to_string(d), .spec = [d](TinySpec& s) { s.head_dim = d; }});
  // Multiples of 16 the planned kernel does not implement: the uniform kernel runs them.
  for (int64_t d : {16, 48, 80, 112, 192, 1152})
    check({.what = "head_dim " + std::to_string(d), .spec = [d](TinySpec& s) { s.head_dim = d; },
           .with_plan = false, .planned = Clause::head_dim});
  check({.what = "head_dim 8", .spec = [](TinySpec& s) { s.head_dim = 8; }, .with_plan = false,
         .planned = Clause::head_dim, .uniform = Clause::head_dim});
  check({.what = "num_hgroups one too many",
         .edit = [](TinyCall& t) { t.call.k_cache.shape[2] += 1; }, .with_plan = false,
         .planned = Clause::num_hgroups, .uniform = Clause::num_hgroups, .launch = false});
  check({.what = "num_hgroups one too few",
         .edit = [](TinyCall& t) { t.call.k_cache.shape[2] -= 1; }, .with_plan = false,
         .planned = Clause::num_hgroups, .uniform = Clause::num_hgroups, .launch = false});
}

TEST(ValidateLimits, BlockSize) {
  for (int64_t bs : {16, 64, 128})
    check({.what = "block_size " + std::to_string(bs), .spec = [bs](TinySpec& s) { s.block_size = bs; }});
  for (int64_t bs : {1, 8, 15, 17, 32, 127, 129, 256})
    check({.what = "block_size " + std::to_string(bs), .spec = [bs](TinySpec& s) { s.block_size = bs; },
           .with_plan = false, .planned = Clause::block_size});
  check({.what = "block_size 0",
         .edit = [](TinyCall& t) { t.call.k_cache.shape[3] = t.call.v_cache.shape[3] = 0; },
         .with_plan = false, .planned = Clause::block_size, .uniform = Clause::block_size, .launch = false});
}

TEST(ValidateLimits, PartitionSizeAndCount) {
  for (int ps : {255, 257, 0})
    check({.what = "partition size " + std::to_string(ps),
           .edit = [ps](TinyCall& t) { t.call.opt.partition_size = ps; }, .with_plan = false,
           .planned = Clause::partition_size, .uniform = Clause::partition_size});
  for (int n : {0, 1, 2, 255, 256})
    check({.what = "uniform partitions " + std::to_string(n),
           .edit = [n](TinyCall& t) { t.call.opt.uniform_partitions = n; }, .with_plan = false});
  for (int n : {257, -1})
    check({.what = "uniform partitions " + std::to_string(n),
           .edit = [n](TinyCall& t) { t.call.opt.uniform_partitions = n; }, .with_plan = false,
           .planned = Clause::partition_count, .uniform = Clause::partition_count});
  // With a plan the planned kernel does not use the uniform count at all.
  check({.what = "uniform partitions 257 beside a plan",
         .edit = [](TinyCall& t) { t.call.opt.uniform_partitions = 257; },
         .uniform = Clause::partition_count});
}

TEST(ValidateLimits, PlanCeilingAndCapacity) {
  // lens {300, 20}, cu 8: max_partitions 8 and budget 16 give capacity 16 = num_seqs * max_partitions.
  check({.what = "ceiling = cu, capacity = num_seqs * max_partitions"});
  check({.what = "ceiling 1, capacity = num_seqs", .spec = [](TinySpec& s) { s.max_partitions = 1; }});
  check({.what = "cu 1, ceiling 1", .spec = [](TinySpec& s) { s.cu = 1; }});
  check({.what = "ceiling cu + 1", .plan_edit = [](PlanView& p) { p.max_partitions = 9; },
         .planned = Clause::plan_ceiling});
  check({.what = "ceiling 0", .plan_edit = [](PlanView& p) { p.max_partitions = 0; },
         .planned = Clause::plan_ceiling});
  check({.what = "capacity num_seqs - 1", .plan_edit = [](PlanView& p) { p.capacity = 1; },
         .planned = Clause::plan_invalid});
  check({.what = "capacity num_seqs * max_partitions + 1", .plan_edit = [](PlanView& p) { p.capacity = 17; },
         .planned = Clause::plan_invalid});
  check({.what = "plan of 4097 sequences", .plan_edit = [](PlanView& p) { p.num_seqs = 4097; },
         .planned = Clause::plan_invalid});
  check({.what = "plan of no sequence", .plan_edit = [](PlanView& p) { p.num_seqs = 0; },
         .planned = Clause::plan_invalid});
  check({.what = "plan of one sequence more than the call",
         .plan_edit = [](PlanView& p) {
           p.num_seqs = 3;
           p.capacity = 3 * 8;
         },
         .planned = Clause::plan_shape});
  check({.what = "plan of another KV-head count", .plan_edit = [](PlanView& p) { p.kv_heads = 2; },
         .planned = Clause::plan_shape});
}

TEST(ValidateLimits, TablesBlocksAndHeads) {
  check({.what = "block_tables with one row per sequence"});
  check({.what = "block_tables with a row to spare",
         .edit = [](TinyCall& t) { t.call.block_tables.shape[0] += 1; }});
  check({.what = "block_tables one row short", .edit = [](TinyCall& t) { t.call.block_tables.shape[0] -= 1; },
         .with_plan = false, .planned = Clause::block_tables_rows, .uniform = Clause::block_tables_rows,
         .launch = false});
  // V holds exactly K's block count (kernels::holds_num_blocks): one fewer
  // would be read past its end through a block id K holds.
  check({.what = "V with as many blocks as K"});
  check({.what = "V with one block fewer than K", .edit = [](TinyCall& t) { t.call.v_cache.shape[0] -= 1; },
         .with_plan = false, .planned = Clause::v_blocks, .uniform = Clause::v_blocks, .launch = false});
  check({.what = "V with one block more than K", .edit = [](TinyCall& t) { t.call.v_cache.shape[0] += 1; },
         .with_plan = false, .planned = Clause::v_blocks, .uniform = Clause::v_blocks, .launch = false});
  // Per-token scales follow the same rule: [num_blocks, Hkv, block_size], one
  // block fewer or more refused. The accepted call runs with unit scales.
  for (const int64_t delta : {int64_t(-1), int64_t(0), int64_t(1)}) {
    const Clause want = delta == 0 ? Clause::none : Clause::scale_shape;
    check({.what = "per-token scales over num_blocks " + std::string(delta < 0 ? "- 1" : delta > 0 ? "+ 1" : "+ 0"),
           .edit =
               [delta](TinyCall& t) {
                 const int64_t nb = t.call.k_cache.shape[0], hkv = t.call.k_cache.shape[1], bs = t.call.k_cache.shape[3];
                 static std::vector<float> unit;
                 unit.assign(size_t((nb + 1) * hkv * bs), 1.0f);
                 t.call.k_scale = TensorView::contiguous_of(unit.data(), DType::f32, {nb + delta, hkv, bs});
                 t.call.v_scale = t.call.k_scale;
               },
           .with_plan = delta == 0, .planned = want, .uniform = want, .launch = delta == 0});
  }
  check({.what = "Hq = Hkv", .spec = [](TinySpec& s) { s.hkv = 2; s.group = 1; }});
  check({.what = "Hq = 3 Hkv", .spec = [](TinySpec& s) { s.hkv = 2; s.group = 3; }});
  check({.what = "Hq = Hkv + 1",
         .spec = [](TinySpec& s) { s.hkv = 2; s.group = 1; },
         .edit = [](TinyCall& t) { t.call.q.shape[1] = t.call.out.shape[1] = 3; }, .with_plan = false,
         .planned = Clause::head_ratio, .uniform = Clause::head_ratio, .launch = false});
  for (int w : {1, -1})
    check({.what = "sliding window " + std::to_string(w),
           .edit = [w](TinyCall& t) { t.call.opt.sliding_window = w; }, .with_plan = false,
           .planned = Clause::sliding_window, .uniform = Clause::sliding_window});
  // The call's attention variant: off (window -1, cap 0) is accepted; the
  // smallest window and the smallest cap are each refused by their clause.
  check({.what = "variant window -1 (off)", .edit = [](TinyCall& t) { t.call.variant.window_left = -1; }});
  check({.what = "variant window 0", .edit = [](TinyCall& t) { t.call.variant.window_left = 0; }, .with_plan = false,
         .planned = Clause::sliding_window, .uniform = Clause::sliding_window});
  check({.what = "variant soft cap 0 (off)", .edit = [](TinyCall& t) { t.call.variant.soft_cap = 0.0f; }});
  check({.what = "variant soft cap 1e-30", .edit = [](TinyCall& t) { t.call.variant.soft_cap = 1e-30f; },
         .with_plan = false, .planned = Clause::soft_cap, .uniform = Clause::soft_cap});
}

// resolve(): every parameter at its limit is accepted, one past it is refused
// with the field named; 0 (and -1 for split_cost_tiles) mean "the default".
TEST(PlannerParamLimits, EachLimitOnBothSides) {
  auto accepts = [](PlanParams p) {
    SCOPED_TRACE(::testing::Message() << "num_seqs " << p.num_seqs << " kv_heads " << p.kv_heads << " cu " << p.cu
                                    << " max_partitions " << p.max_partitions << " budget " << p.workgroup_budget
                                    << " split_cost " << p.split_cost_tiles << " min_chunk " << p.min_chunk_tiles);
    EXPECT_NO_THROW((void)resolve(p));
  };
  auto refuses = [](PlanParams p, const std::string& field) {
    try {
      (void)resolve(p);
      ADD_FAILURE() << field << ": out-of-range value accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(field + " = ", 0), 0u) << e.what();
    }
  };
  accepts({1, 1, 1});
  accepts({4096, 1, 132});
  refuses({4097, 1, 132}, "num_seqs");
  refuses({0, 1, 132}, "num_seqs");
  refuses({1, 0, 132}, "kv_heads");
  refuses({1, 1, 0}, "cu");
  refuses({1, 1, 4097}, "cu");
  accepts({1, 1, 4096});
  // The compute unit count has no default: parameters that leave it out are refused.
  PlanParams no_cu;
  no_cu.num_seqs = 1;
  refuses(no_cu, "cu");
  accepts({1, 1, 132, 132});
  accepts({1, 1, 132, 1});
  refuses({1, 1, 132, 133}, "max_partitions");
  refuses({1, 1, 132, -1}, "max_partitions");
  EXPECT_EQ(resolve({1, 1, 132, 0}).max_partitions, 132);
  accepts({1, 1, 132, 0, 1});
  refuses({1, 1, 132, 0, -1}, "workgroup_budget");
  EXPECT_EQ(resolve({1, 1, 132, 0, 0}).workgroup_budget, 264);
  PlanParams p{1, 1, 132};
  p.split_cost_tiles = 0;
  accepts(p);
  EXPECT_EQ(resolve(p).split_cost_tiles, 0);
  p.split_cost_tiles = -2;
  refuses(p, "split_cost_tiles");
  p.split_cost_tiles = -1;
  EXPECT_EQ(resolve(p).split_cost_tiles, kBalancedSplitCostTiles);
  p.min_chunk_tiles = 1;
  accepts(p);
  EXPECT_EQ(resolve(p).min_chunk_tiles, 1);
  p.min_chunk_tiles = -1;
  refuses(p, "min_chunk_tiles");
  p.min_chunk_tiles = 0;
  EXPECT_EQ(resolve(p).min_chunk_tiles, kBalancedMinChunkTiles);
}

// The limits above are chosen from the clause table: every clause is either one
// with a numeric limit (pinned on both sides in this file) or one whose rule is
// a type, rank, layout, flag or pairing (each broken by the gate-mirror
// generators). A clause added to the table must be placed in one of the two.
TEST(ValidateLimits, EveryClauseIsClassified) {
  const std::set<Clause> limits{Clause::num_seqs,      Clause::q_len,           Clause::q_rows,
                                Clause::head_dim,      Clause::num_hgroups,     Clause::block_size,
                                Clause::partition_size, Clause::partition_count, Clause::plan_ceiling,
                                Clause::plan_invalid,  Clause::plan_shape,      Clause::block_tables_rows,
                                Clause::v_blocks,      Clause::head_ratio,      Clause::sliding_window,
                                Clause::soft_cap};
  const std::set<Clause> kinds{
      Clause::alibi,           Clause::sinks,          Clause::q_prequantized,     Clause::arch,
      Clause::compute_dtype,   Clause::k_dtype,        Clause::v_dtype,            Clause::q_rank,
      Clause::q_dtype,         Clause::out_dtype,      Clause::out_shape,          Clause::q_head_dim_stride,
      Clause::out_head_dim_stride, Clause::k_rank,     Clause::k_last_dim,         Clause::v_heads,
      Clause::v_layout,        Clause::k_contiguous,   Clause::v_contiguous,       Clause::block_tables_dtype,
      Clause::block_tables_rank, Clause::block_tables_contiguous, Clause::context_lens_dtype,
      Clause::context_lens_rank, Clause::context_lens_contiguous, Clause::scale_pairing,
      Clause::scale_dtype,     Clause::scale_shape,    Clause::scratch_dtype,      Clause::scratch_shape};
  for (const ClauseInfo& c : clause_table()) {
    EXPECT_NE(limits.count(c.id) + kinds.count(c.id), 0u) << c.name << " is not classified";
    EXPECT_FALSE(limits.count(c.id) && kinds.count(c.id)) << c.name << " is classified twice";
  }
  EXPECT_EQ(limits.size() + kinds.size(), clause_table().size());
}

// Where a rejection states the value it expected, that value is the remedy: the
// same call with the field set to it is accepted. One row per rejection that
// carries an expected value; each bad value is one past or short of the valid
// call's own.
TEST(ValidateExpected, EachStatedExpectedValueIsTheRemedy) {
  struct Row {
    Clause clause;
    int64_t bad;
    std::function<void(TinyCall&, PlanView&, int64_t)> set;
  };
  const std::vector<Row> rows = {
      {Clause::q_rank, 4, [](TinyCall& t, PlanView&, int64_t v) { t.call.q.rank = int(v); }},
      {Clause::q_head_dim_stride, 2, [](TinyCall& t, PlanView&, int64_t v) { t.call.q.stride[2] = v; }},
      {Clause::out_head_dim_stride, 2, [](TinyCall& t, PlanView&, int64_t v) { t.call.out.stride[2] = v; }},
      {Clause::k_rank, 4, [](TinyCall& t, PlanView&, int64_t v) { t.call.k_cache.rank = int(v); }},
      {Clause::k_last_dim, 15, [](TinyCall& t, PlanView&, int64_t v) { t.call.k_cache.shape[4] = v; }},
      {Clause::num_hgroups, 5, [](TinyCall& t, PlanView&, int64_t v) { t.call.k_cache.shape[2] = v; }},
      {Clause::v_heads, 2, [](TinyCall& t, PlanView&, int64_t v) { t.call.v_cache.shape[1] = v; }},
      {Clause::v_blocks, 39, [](TinyCall& t, PlanView&, int64_t v) { t.call.v_cache.shape[0] = v; }},
      {Clause::block_tables_rank, 3, [](TinyCall& t, PlanView&, int64_t v) { t.call.block_tables.rank = int(v); }},
      {Clause::context_lens_rank, 2, [](TinyCall& t, PlanView&, int64_t v) { t.call.context_lens.rank = int(v); }},
      {Clause::q_rows, 3,
       [](TinyCall& t, PlanView&, int64_t v) {
         t.call.q.shape[0] = v;
         t.call.out.shape[0] = v;
       }},
      {Clause::block_tables_rows, 1, [](TinyCall& t, PlanView&, int64_t v) { t.call.block_tables.shape[0] = v; }},
      {Clause::partition_size, kTileTokens + 1,
       [](TinyCall& t, PlanView&, int64_t v) { t.call.opt.partition_size = int(v); }},
      {Clause::plan_ceiling, 9, [](TinyCall&, PlanView& p, int64_t v) { p.max_partitions = v; }},
      {Clause::plan_shape, 3, [](TinyCall&, PlanView& p, int64_t v) { p.num_seqs = v; }},
      {Clause::plan_shape, 2, [](TinyCall&, PlanView& p, int64_t v) { p.kv_heads = v; }},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(clause_name(r.clause)) + " at " + std::to_string(r.bad));
    TinyCall t;  // 2 sequences, Hkv 1, group 2, head_dim 64, block 16, cu 8: 38 blocks
    PlanView plan = t.make_plan();
    ASSERT_FALSE(first_violation(t.call, KernelKind::planned, &plan, &t.scratch));
    r.set(t, plan, r.bad);
    const Finding f = first_violation(t.call, KernelKind::planned, &plan, &t.scratch);
    ASSERT_EQ(clause_name(f.clause), clause_name(r.clause));
    EXPECT_EQ(f.value, r.bad);
    ASSERT_TRUE(f.has_expected);
    EXPECT_NE(describe(f).find("(expected " + std::to_string(f.expected) + ")"), std::string::npos) << describe(f);
    r.set(t, plan, f.expected);
    const Finding after = first_violation(t.call, KernelKind::planned, &plan, &t.scratch);
    EXPECT_FALSE(after) << "the stated remedy " << f.expected << " is refused: " << describe(after);
  }
}

// The uniform kernel needs scratch only past one split: at one split it writes
// the output directly and takes an empty scratch; at two an empty scratch is
// refused (the walk, the gate and the launch alike) and the sized one taken.
TEST(ValidateLimits, UniformScratchOnlyPastOneSplit) {
  for (int splits : {1, 2}) {
    SCOPED_TRACE(std::to_string(splits) + " split(s)");
    TinyCall t;
    t.call.opt.uniform_partitions = splits;
    const Scratch none{};
    const Finding f = first_violation(t.call, KernelKind::uniform, nullptr, &none);
    if (splits == 1) {
      EXPECT_FALSE(f) << describe(f);
      EXPECT_TRUE(gate(t.call, nullptr, &none).accepted);
      std::fill(t.out.begin(), t.out.end(), uint16_t(0x7fc0));  // NaN: every row must be written
      EXPECT_NO_THROW(launch_uniform(t.call, none));
      for (uint16_t h : t.out) ASSERT_EQ(bf16_to_f32(h), 0.0f);
    } else {
      EXPECT_EQ(clause_name(f.clause), clause_name(Clause::scratch_shape));
      EXPECT_FALSE(gate(t.call, nullptr, &none).accepted);
      EXPECT_THROW(launch_uniform(t.call, none), RejectError);
    }
    const Scratch sized = t.make_uniform_scratch();
    EXPECT_FALSE(first_violation(t.call, KernelKind::uniform, nullptr, &sized));
    EXPECT_NO_THROW(launch_uniform(t.call, sized));
  }
}

// Zero KV heads, one below the least: the walk and the gate refuse the call,
// and the dims every consumer derives from a call (the CPU kernel, the case
// builder, the ABI's argument block) come out as zero groups and zero rows, not
// a division by zero, whatever the call holds.
TEST(ValidateLimits, ZeroKvHeadsAreRefusedAndTheirDimsAreZero) {
  TinyCall t;
  PlanView plan = t.make_plan();
  ASSERT_EQ(dims_of(t.call).group, 2);
  t.call.k_cache.shape[1] = 0;
  t.call.v_cache.shape[1] = 0;
  const Finding f = first_violation(t.call, KernelKind::planned, &plan, &t.scratch);
  EXPECT_TRUE(f) << "a call with no KV heads was accepted";
  EXPECT_FALSE(gate(t.call, &plan, &t.scratch).accepted);
  const CallDims d = dims_of(t.call);
  EXPECT_EQ(d.hkv, 0);
  EXPECT_EQ(d.group, 0);
  EXPECT_EQ(d.rows, 0);
}

// Every violation is listed, but the scratch only against a sound plan: with the
// plan's header or shape wrong, a scratch that does not fit is not a second
// finding (the shape it should have comes from the broken plan).
TEST(ValidateAll, ScratchIsNotJudgedAgainstAnUnsoundPlan) {
  struct Broken {
    const char* what;
    std::vector<Clause> clauses;  // the plan's findings, in walk order
    std::function<void(PlanView&)> edit;
  };
  const std::vector<Broken> broken = {
      {"no work_info", {Clause::plan_invalid}, [](PlanView& p) { p.work_info = nullptr; }},
      {"num_seqs 0", {Clause::plan_invalid, Clause::plan_shape}, [](PlanView& p) { p.num_seqs = 0; }},
      {"capacity past its bound", {Clause::plan_invalid},
       [](PlanView& p) { p.capacity = p.num_seqs * p.max_partitions + 1; }},
      {"num_seqs of another batch", {Clause::plan_shape}, [](PlanView& p) { p.num_seqs = 3; }},
      {"kv_heads of another call", {Clause::plan_shape}, [](PlanView& p) { p.kv_heads = 2; }},
  };
  auto clauses = [](const std::vector<Finding>& all) {
    std::vector<std::string> names;
    for (const Finding& f : all) names.emplace_back(clause_name(f.clause));
    return names;
  };
  for (const Broken& b : broken) {
    SCOPED_TRACE(b.what);
    TinyCall t;
    PlanView plan = t.make_plan();
    Scratch misfit = t.scratch;
    misfit.partial.shape[1] += 5;  // more slots than any plan below has
    ASSERT_EQ(clauses(all_violations(t.call, KernelKind::planned, &plan, &misfit)),
              std::vector<std::string>{std::string(clause_name(Clause::scratch_shape))});
    b.edit(plan);
    std::vector<std::string> expected;
    for (Clause c : b.clauses) expected.emplace_back(clause_name(c));
    EXPECT_EQ(clauses(all_violations(t.call, KernelKind::planned, &plan, &misfit)), expected);
  }
}

// A view's shape and strides are its first `rank` entries only: whatever the
// entries past the rank hold (left over from a reshape, say), every view of a
// valid call set to garbage there leaves it accepted, and it decodes the same.
TEST(ValidateLimits, EntriesPastAViewsRankAreIgnored) {
  TinyCall clean;
  const PlanView clean_plan = clean.make_plan();
  ASSERT_EQ(launch_planned(clean.call, &clean_plan, clean.scratch).status, DecodeStatus::ok);
  TinyCall t;
  const PlanView plan = t.make_plan();
  int touched = 0;
  for (TensorView* v : {&t.call.q, &t.call.out, &t.call.k_cache, &t.call.v_cache, &t.call.block_tables,
                        &t.call.context_lens, &t.call.k_scale, &t.call.v_scale}) {
    if (!v->present() || v->rank >= kMaxRank) continue;
    v->shape[v->rank] = 7 + touched;
    v->stride[v->rank] = 3;
    ++touched;
  }
  ASSERT_GE(touched, 6);
  const Finding f = first_violation(t.call, KernelKind::planned, &plan, &t.scratch);
  EXPECT_FALSE(f) << describe(f);
  EXPECT_TRUE(gate(t.call, &plan, &t.scratch).accepted);
  ASSERT_EQ(launch_planned(t.call, &plan, t.scratch).status, DecodeStatus::ok);
  EXPECT_EQ(t.out, clean.out);
}
