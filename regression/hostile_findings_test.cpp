// SPDX-License-Identifier: Apache-2.0
// One test per hostile-input finding: each reproduced what a demanding user saw
// (a crash, a hang, a wrong exit, garbage passing) before the readers were
// fixed. The CLI side of each is also in the hostile corpus
// (regression/hostile/corpus.py); these pin the cause at the library level.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "input/json_input.hpp"
#include "input/limits.hpp"
#include "kernels/limits.hpp"
#include "kernels/planner.hpp"
#include "kernels/planner_balanced.hpp"
#include "kernels/validate.hpp"
#include "properties/case/case_format.hpp"
#include "properties/drift/run.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/checks/replay.hpp"
#include "properties/checks/runner.hpp"
#include "stats/inputs.hpp"
#include "stats/mcnemar.hpp"

namespace pav {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("pav-hostile-" + std::to_string(::getpid()) + "-" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = (dir / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

json small_case() {
  return json::parse(R"({"format": "pav-case/1", "lens": [5, 300], "group": 2, "head_dim": 64,
    "options": {"partial": "f32", "cu": 8}, "seed": 3})");
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const std::string kDeep = std::string(100000, '[') + std::string(100000, ']');

// Deeply nested JSON overflowed the stack in the error path of every reader.
TEST(HostileFindings, DeepNestingIsRefusedByEveryReaderWithoutRecursion) {
  Scratch s;
  json c = small_case();
  const std::string case_text = c.dump().insert(c.dump().size() - 1, ", \"meta\": " + kDeep);
  const std::string e = error_of([&] { props::load_case_spec(s.write("c.json", case_text)); });
  EXPECT_NE(e.find("c.json: meta[0][0]"), std::string::npos) << e.substr(0, 200);
  EXPECT_NE(e.find("nested deeper than 64"), std::string::npos) << e.substr(0, 200);
  std::istringstream jsonl("{\"id\": 1, \"correct\": true, \"x\": " + kDeep + "}\n");
  EXPECT_NE(error_of([&] { stats::parse_correctness(jsonl, "a.jsonl"); }).find("a.jsonl:1: x"), std::string::npos);
  std::istringstream bench("{\"latency_ms\": " + kDeep + "}");
  EXPECT_NE(error_of([&] { stats::parse_bench(bench, "b.json"); }).find("nested deeper than 64"), std::string::npos);
  std::istringstream trace("{\"context_lens\": " + kDeep + "}\n");
  EXPECT_NE(error_of([&] { stats::parse_trace(trace, "t.jsonl"); }).find("nested deeper than 64"), std::string::npos);
}

// options.partial = fp8 sized the host scratch at one byte per element and
// filled it with two-byte NaNs (a heap overflow).
TEST(HostileFindings, Fp8PartialIsRefusedBeforeAnyScratchIsSized) {
  for (const char* path : {"planned", "uniform"}) {
    json c = small_case();
    c["options"]["partial"] = "fp8_e4m3fn";
    c["path"] = path;
    props::HostCase hc = props::build_case(props::case_from_json(c, "c.json"));
    try {
      props::run_case(hc);
      ADD_FAILURE() << path << ": an fp8 partial ran";
    } catch (const kernels::RejectError& e) {
      EXPECT_EQ(e.clause(), kernels::Clause::scratch_dtype) << e.what();
    }
    EXPECT_THROW(props::make_scratch(hc.call(), 4), kernels::RejectError);
  }
}

// A split count past the kernel's range (the case reader allows one, so the
// gate can name the clause) sized the uniform scratch before validation refused it.
TEST(HostileFindings, SplitCountBeyondTheKernelIsRefusedBeforeScratchIsSized) {
  json c = small_case();
  c["lens"] = std::vector<int>(kernels::kMaxPlanBatch, 1);
  c["path"] = "uniform";
  c["options"]["uniform_partitions"] = 1 << 20;  // 2 TB of scratch if it were sized
  props::HostCase hc = props::build_case(props::case_from_json(c, "c.json"), /*fill_values=*/false);
  try {
    props::run_case(hc);
    ADD_FAILURE() << "2^20 uniform partitions ran";
  } catch (const kernels::RejectError& e) {
    EXPECT_EQ(e.clause(), kernels::Clause::partition_count) << e.what();
  }
}

// The host-memory limit, worked by hand: lens [32000768] at block 16 needs
// 2000048 blocks; with 81474 spare blocks, D 16, one head, the uniform path at
// cu 8 (32 splits of one row): q 32 + out 32 + caches 2 * 2081522 * 256 +
// tables 4 * 2000048 + scratch 32 * (16 * 4 + 8) bytes = 2^30 exactly.
TEST(HostileFindings, HostMemoryLimitAcceptsExactlyTheLimitAndRefusesOneBlockMore) {
  props::CaseSpec s;
  s.lens = {32000768};
  s.head_dim = 16;
  s.group = 1;
  s.path = props::Path::uniform;
  s.opt.cu = 8;
  s.opt.partial = kernels::DType::f32;
  s.spare_blocks = 81474;
  EXPECT_EQ(error_of([&] { props::check_case_spec(s); }), "(no error)");
  s.spare_blocks = 81475;
  EXPECT_EQ(error_of([&] { props::check_case_spec(s); }),
            "lens: the case needs 1073742336 bytes of host memory (q, caches, tables, scratch), more than the limit "
            "of 1073741824");
  EXPECT_EQ(error_of([&] { props::check_case_spec(s, /*check_memory=*/false); }), "(no error)");
}

// A 300-byte case file with low_spare_blocks made pav replay and pav gate
// allocate and poison 4-5 GB (12 s on the 2-core machine, 28-64 s in the
// corpus): the low blocks had their own 16 GiB limit whatever the kernel, and
// any count up to 2^31 was read. Now a count other than the one that puts the
// used pages at element 2^31 is refused by the reader, and the case is held
// to the 1 GiB of every case unless the kernel declares large_cache.
TEST(HostileFindings, LowSpareBlocksAreHeldToOneGibUnlessTheKernelDeclaresLargeCache) {
  json c = json::parse(R"({"format": "pav-case/1", "lens": [16], "head_dim": 16, "block_size": 16,
    "scales": "per_token", "path": "uniform", "options": {"partial": "f32", "cu": 8}, "seed": 1})");
  c["low_spare_blocks"] = (int64_t(1) << 31) / 256;  // 16 x 16 elements a page
  const props::CaseSpec s = props::case_from_json(c, "c.json");
  const std::string refused = error_of([&] { props::check_case_spec(s); });
  EXPECT_EQ(refused.rfind("low_spare_blocks: the case needs ", 0), 0u) << refused;
  EXPECT_NE(refused.find("more than the limit of 1073741824 (a cache past element 2^31 may take up to 17179869184 "
                         "only on a kernel that declares large_cache)"), std::string::npos) << refused;
  EXPECT_EQ(error_of([&] { props::build_case(s); }), refused);  // before any buffer is sized
  EXPECT_EQ(error_of([&] { props::check_case_spec(s, true, /*large_cache=*/true); }), "(no error)");
  for (int64_t n : {int64_t(1), (int64_t(1) << 31) / 256 + 1, int64_t(1) << 31}) {
    c["low_spare_blocks"] = n;
    EXPECT_EQ(error_of([&] { props::case_from_json(c, "c.json"); }),
              "c.json: low_spare_blocks: must be 0 or 8388608 (the blocks of 256 elements that put the used pages "
              "at element 2^31), got " + std::to_string(n));
  }
}

// Per-token scales of 1..3 values ran on leftover generated scales and passed.
TEST(HostileFindings, ScaleTensorsOfTheWrongSizeAreRefused) {
  for (int n : {1, 2, 3}) {
    json c = small_case();
    c["scales"] = "per_token";
    c["tensors"] = {{"k_scale", std::vector<float>(n, 0.03f)}, {"v_scale", std::vector<float>(n, 0.03f)}};
    EXPECT_NE(error_of([&] { props::case_from_json(c, "c.json"); }).find("c.json: tensors.k_scale: needs "),
              std::string::npos);
  }
}

// 4096 lengths of 2^31-1 with cu 2e8 overflowed the planner's int64 products.
TEST(HostileFindings, PlannerBoundsHoldAtTheLimitsAndRefuseBeyond) {
  using namespace kernels;
  EXPECT_NE(error_of([] { resolve({kMaxPlanBatch, 1, 200000000}); }).find("cu = 200000000: must be in 1..4096"),
            std::string::npos);
  EXPECT_NE(error_of([] { resolve({1, 1, 8, 0, kMaxWorkgroupBudget + 1}); }).find("workgroup_budget"), std::string::npos);
  EXPECT_NE(error_of([] { resolve({1, kMaxKvHeads + 1, 8}); }).find("kv_heads"), std::string::npos);
  // At every limit at once the plan is exact (UBSan would stop on an overflow).
  const std::vector<int32_t> lens(kMaxPlanBatch, INT32_MAX);
  for (PlanPolicy policy : {PlanPolicy::proportional, PlanPolicy::balanced}) {
    PlanParams p{kMaxPlanBatch, 1, kMaxCu, kMaxCu, kMaxWorkgroupBudget, policy};
    WorkPlan plan(p);
    plan.refresh(lens.data());
    EXPECT_EQ(check_plan_structure(plan.view()), "");
    EXPECT_TRUE(plan_is_fresh(plan.view(), lens.data(), kMaxPlanBatch));
  }
  // b + c in McNemar counts.
  EXPECT_THROW(stats::mcnemar(INT64_MAX, 1), std::invalid_argument);
  EXPECT_EQ(stats::mcnemar(INT64_MAX - 1, 1).n, INT64_MAX);
}

// "seed": -1 was accepted although seeds are non-negative.
TEST(HostileFindings, NegativeSeedIsRefusedByName) {
  json c = small_case();
  c["seed"] = -1;
  EXPECT_EQ(error_of([&] { props::case_from_json(c, "c.json"); }),
            "c.json: seed: must be in 0..18446744073709551615, got -1");
}

// 1e999, a non-string meta.property, a directory, max_partitions > cu: exit 1
// with a library message instead of 2 naming the file and the field.
TEST(HostileFindings, LibraryErrorsBecameNamedInputErrors) {
  Scratch s;
  std::string text = small_case().dump();
  text.insert(text.size() - 1, ", \"q_row_pad\": 1e999");
  EXPECT_NE(error_of([&] { props::load_case_spec(s.write("o.json", text)); }).find("o.json: q_row_pad: malformed JSON"),
            std::string::npos);
  json c = small_case();
  c["meta"] = {{"property", 5}};
  const std::string p = s.write("m.json", c.dump());
  EXPECT_THROW(props::load_case_spec(p), props::CaseError);
  EXPECT_NE(error_of([&] { props::load_case_spec(p); }).find("m.json: meta.property: expected a string"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { props::load_case_spec(s.dir.string()); }), s.dir.string() + ": is a directory, expected a file");
  // max_partitions above cu: the planner refuses it by name when the case is run.
  c = small_case();
  c["max_partitions"] = 9;
  props::HostCase hc = props::build_case(props::case_from_json(c, "c.json"));
  EXPECT_NE(error_of([&] { props::run_case(hc); }).find("max_partitions = 9"), std::string::npos);
}

// An error echoing a 50 MB value printed all of it.
TEST(HostileFindings, MessagesQuoteAtMostAShortExcerpt) {
  const std::string big(10'000'000, 'z');
  std::istringstream dup("{\"id\": \"" + big + "\", \"correct\": true}\n{\"id\": \"" + big + "\", \"correct\": false}\n");
  const std::string e = error_of([&] { stats::parse_correctness(dup, "a.jsonl"); });
  EXPECT_NE(e.find("a.jsonl:2: id: duplicate id"), std::string::npos);
  EXPECT_LT(e.size(), 200u);
  json c = small_case();
  c["format"] = big;
  const std::string f = error_of([&] { props::case_from_json(c, "c.json"); });
  EXPECT_NE(f.find("c.json: format: expected one of pav-case/1"), std::string::npos);
  EXPECT_LT(f.size(), 200u);
}

// 104 M lengths took 16 s to reject; 2^31-1 lengths allocated for seconds.
TEST(HostileFindings, HugeInputsAreRefusedInMilliseconds) {
  Scratch s;
  const auto big = (s.dir / "big.json").string();
  { std::ofstream(big) << "{\"lens\": ["; }
  fs::resize_file(big, input::kMaxJsonFileBytes + 1);  // sparse: as long as 104 M lengths would be
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { props::load_case_spec(big); }).find("more than the limit of 67108864 bytes"), std::string::npos);
  EXPECT_LT(seconds_since(t0), 0.5);
  json c = small_case();
  c["lens"] = {INT32_MAX};
  t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { props::build_case(props::case_from_json(c, "c.json")); })
                .find("lens: the case needs "),
            std::string::npos);
  EXPECT_LT(seconds_since(t0), 0.5);
  // A replay as a decode case is refused the same way, as bad input.
  const std::string p = s.write("long.json", c.dump());
  EXPECT_THROW(props::fuzz::replay_case_file(p, {}), props::CaseError);
}

}  // namespace
}  // namespace pav
