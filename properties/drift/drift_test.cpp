// SPDX-License-Identifier: Apache-2.0
// The drift sweep: its file format, cells, data, the control hook, and the quick
// sweep end to end (no growth in the kernel; the positive control flips).
#include "properties/drift/run.hpp"
#include "properties/drift/plot.hpp"
#include "properties/drift/report.hpp"

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/test_paths.hpp"
#include "kernels/codecs.hpp"
#include "properties/checks/runner.hpp"

namespace pav::props {
namespace {

using kernels::DType;
using nlohmann::json;

std::string fixture(const std::string& name) { return std::string(PAV_SOURCE_DIR) + "/fixtures/" + name; }

std::string parse_error(json j) {
  try {
    parse_drift_sweep(j);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

json minimal() {
  return {{"format", kDriftSweepFormat}, {"contexts", {1000}}, {"batches", {1}}, {"ceilings", {8, 64}}};
}

TEST(DriftSweepFormat, MinimalSweepTakesTheDocumentedDefaults) {
  const DriftSweep s = parse_drift_sweep(minimal());
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.block_size, 16);
  EXPECT_EQ(s.cu, 256);
  EXPECT_EQ(s.seeds, 8);
  ASSERT_EQ(s.heads.size(), 1u);
  EXPECT_EQ(s.heads[0].hkv, 1);
  EXPECT_EQ(s.heads[0].group, 8);
  EXPECT_EQ(s.partials, (std::vector<DType>{DType::bf16, DType::f32}));
  EXPECT_EQ(s.growth.alpha, 0.01);
  EXPECT_EQ(s.growth.min_relative_growth, 0.10);
  EXPECT_EQ(s.control_epsilon, 0.0);
  // Round trip through the writer.
  const DriftSweep back = parse_drift_sweep(sweep_to_json(s));
  EXPECT_EQ(sweep_to_json(back), sweep_to_json(s));
}

TEST(DriftSweepFormat, BadFieldsAreNamed) {
  auto with = [](const char* k, json v) {
    json j = minimal();
    j[k] = v;
    return j;
  };
  EXPECT_NE(parse_error(with("format", "pav-drift-sweep/0")).find("format"), std::string::npos);
  EXPECT_NE(parse_error(with("ceilings", {8, 8})).find("ceilings[1]"), std::string::npos);
  EXPECT_NE(parse_error(with("ceilings", {64})).find("at least two"), std::string::npos);
  EXPECT_NE(parse_error(with("ceilings", {8, 512})).find("ceilings[1]"), std::string::npos);  // > cu
  EXPECT_NE(parse_error(with("contexts", {0})).find("contexts[0]"), std::string::npos);
  EXPECT_NE(parse_error(with("batches", {5000})).find("batches[0]"), std::string::npos);
  EXPECT_NE(parse_error(with("partials", {"fp8_e4m3fn"})).find("partials[0]"), std::string::npos);
  EXPECT_NE(parse_error(with("head_dim", 96)).find("head_dim"), std::string::npos);
  EXPECT_NE(parse_error(with("block_size", 32)).find("block_size"), std::string::npos);
  EXPECT_NE(parse_error(with("arch", "gfx90a")).find("arch"), std::string::npos);
  EXPECT_NE(parse_error(with("heads", {{{"hkv", 1}}})).find("heads[0]"), std::string::npos);
  EXPECT_NE(parse_error(with("seeds", 1)).find("seeds"), std::string::npos);
  EXPECT_NE(parse_error(with("ceiling", {8, 64})).find("ceiling: unknown field"), std::string::npos);
  EXPECT_NE(parse_error(with("growth", {{"alpha", 0.7}})).find("growth.alpha"), std::string::npos);
  EXPECT_NE(parse_error(with("shorter", {{"ratio_p50", 30.0}})).find("shorter.ratio_p90"), std::string::npos);
  // Integers past int64 are quoted as written, not wrapped to negatives.
  const std::string past_uint64 = parse_error(with("seed", json(std::numeric_limits<uint64_t>::max())));
  EXPECT_NE(past_uint64.find("seed: must be in 0..4611686018427387904, got 18446744073709551615"), std::string::npos)
      << past_uint64;
  EXPECT_NE(parse_error(with("lengths_seed", json((uint64_t(1) << 62) + 1)))
                .find("lengths_seed: must be in 0..4611686018427387904, got 4611686018427387905"),
            std::string::npos);
  EXPECT_EQ(parse_drift_sweep(with("seed", json(uint64_t(1) << 62))).seed, uint64_t(1) << 62);  // the limit itself
  EXPECT_NE(parse_error(with("cu", json(std::numeric_limits<int64_t>::min()))).find("cu: must be in 1..4096, got -9223372036854775808"),
            std::string::npos);
  json no_ctx = minimal();
  no_ctx.erase("contexts");
  EXPECT_NE(parse_error(no_ctx).find("contexts: missing (required)"), std::string::npos);
}

TEST(DriftSweepFormat, WorkgroupBudgetIsThePlannersRange) {
  json j = minimal();
  j["workgroup_budget"] = int64_t(1) << 20;  // the planner's limit itself
  EXPECT_EQ(parse_drift_sweep(j).workgroup_budget, int64_t(1) << 20);
  j["workgroup_budget"] = (int64_t(1) << 20) + 1;
  EXPECT_NE(parse_error(j).find("workgroup_budget: must be in 0..1048576, got 1048577"), std::string::npos) << parse_error(j);
  j["workgroup_budget"] = 0;  // 0: twice cu
  EXPECT_EQ(parse_drift_sweep(j).workgroup_budget, 0);
  j["workgroup_budget"] = -1;
  EXPECT_NE(parse_error(j).find("workgroup_budget: must be in 0..1048576, got -1"), std::string::npos) << parse_error(j);
}

TEST(DriftSweepFormat, ACellPastTheMemoryLimitIsRefusedWhenRead) {
  // 64 GiB of K and V: batch x blocks x 16 tokens x hkv x head_dim x 2 bytes.
  json j = minimal();
  j["head_dim"] = 128;
  j["heads"] = {{{"hkv", 1}, {"group", 1}}};
  j["batches"] = {1, 4096};
  j["contexts"] = {1000, 65536};  // 4096 x 65536 x 128 x 2 = 2^36 = the limit exactly
  EXPECT_EQ(parse_drift_sweep(j).contexts.size(), 2u);
  j["contexts"] = {1000, 65537};  // one block more per request
  const std::string why = parse_error(j);
  EXPECT_NE(why.find("contexts[1]: a cell of 4096 (batches[1]) requests of up to 65537 tokens"), std::string::npos) << why;
  EXPECT_NE(why.find("more than the limit of 68719476736 bytes"), std::string::npos) << why;
}

// The file reader: what is not a regular file is refused by name before it is
// opened (a FIFO would block the open), and the parser's limits hold.
TEST(DriftSweepFormat, FilesAreReadThroughTheBoundedReader) {
  const std::string dir = ::testing::TempDir() + "pav-drift-reader-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto refusal = [](const std::string& path) -> std::string {
    try {
      load_drift_sweep(path);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  EXPECT_EQ(refusal(write("ok.json", minimal().dump())), "(accepted)");
  EXPECT_NE(refusal(dir).find(dir + ": is a directory"), std::string::npos) << refusal(dir);
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A reader that opens the FIFO waits for a writer that never comes: the
  // alarm ends the test binary (a failure) instead of a hang to the timeout.
  ::alarm(20);
  const std::string fifo_refusal = refusal(fifo);
  ::alarm(0);
  EXPECT_NE(fifo_refusal.find("fifo: not a regular file"), std::string::npos) << fifo_refusal;
  EXPECT_NE(refusal(dir + "/none.json").find("none.json: no such file"), std::string::npos);
  std::string text = minimal().dump();
  text.insert(text.size() - 1, ", \"kv_scale\": 1e999");
  const std::string overflow = refusal(write("overflow.json", text));
  EXPECT_NE(overflow.find("overflow.json: kv_scale"), std::string::npos) << overflow;
  text = minimal().dump();
  text.insert(text.size() - 1, ", \"description\": " + std::string(100000, '[') + std::string(100000, ']'));
  const std::string deep = refusal(write("deep.json", text));
  EXPECT_NE(deep.find("nested deeper than 64"), std::string::npos) << deep.substr(0, 300);
  // A field's error still names the file and the field.
  json bad = minimal();
  bad["cu"] = 0;
  EXPECT_NE(refusal(write("cu.json", bad.dump())).find("cu.json: cu: must be in 1..4096, got 0"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(DriftSweepFormat, FixturesParseAndTheQuickOneIsTheBuiltIn) {
  const DriftSweep quick = load_drift_sweep(fixture("drift-quick.json"));
  EXPECT_EQ(sweep_to_json(quick), sweep_to_json(builtin_quick_sweep()))
      << "fixtures/drift-quick.json and builtin_quick_sweep_json() must describe the same sweep";
  const DriftSweep full = load_drift_sweep(fixture("drift-full.json"));
  EXPECT_EQ(full.contexts, (std::vector<int32_t>{120000, 334000, 764000}));
  EXPECT_EQ(full.batches, (std::vector<int>{1, 8, 24}));
  EXPECT_EQ(full.ceilings, (std::vector<int>{8, 32, 64, 256}));
  EXPECT_EQ(drift_cells(full).size(), 9u);
}

TEST(DriftCells, LengthsAreTraceLikeAndStable) {
  DriftShorter sh;
  const auto l24 = trace_like_lengths(764000, 24, sh, 7);
  const auto l8 = trace_like_lengths(764000, 8, sh, 7);
  ASSERT_EQ(l24.size(), 24u);
  EXPECT_EQ(l24[0], 764000);
  // The first requests do not depend on the batch size.
  EXPECT_TRUE(std::equal(l8.begin(), l8.end(), l24.begin()));
  for (int32_t l : l24) {
    EXPECT_GE(l, 1);
    EXPECT_LE(l, 764000);
  }
  // Over many draws the ratio context/len has the configured median and p90
  // (of the distribution truncated to r >= 1, so between the raw quantiles and
  // what the truncation pushes them to: median 2.49 -> ~4.9, p90 22.2 -> ~36).
  const auto many = trace_like_lengths(1 << 30, 4001, sh, 11);
  std::vector<double> r;
  for (size_t i = 1; i < many.size(); ++i) r.push_back(double(1 << 30) / many[i]);
  std::sort(r.begin(), r.end());
  const double med = r[r.size() / 2], p90 = r[size_t(r.size() * 0.9)];
  // Truncated log-normal, mu = ln 2.49, sigma = ln(22.2/2.49)/1.2816 = 1.7069:
  // P(r >= 1) = Phi(mu/sigma) = Phi(0.5343) = 0.7034, so the median of the
  // truncated law is exp(mu + sigma * Phi^-1(1 - 0.5*0.7034)) = exp(0.9123 + 1.7069*0.3810) = 4.78
  // and its p90 is exp(mu + sigma * Phi^-1(1 - 0.1*0.7034)) = exp(0.9123 + 1.7069*1.4731) = 30.7.
  EXPECT_NEAR(std::log(med), std::log(4.78), 0.08) << med;
  EXPECT_NEAR(std::log(p90), std::log(30.7), 0.12) << p90;
  EXPECT_GE(r.front(), 1.0 - 1e-9);
}

TEST(DriftCells, CellsAreContextsTimesBatchesTimesHeads) {
  DriftSweep s = parse_drift_sweep(minimal());
  s.contexts = {120000, 5000};
  s.batches = {1, 8};
  s.heads = {{1, 8}, {8, 16}};
  const auto cells = drift_cells(s);
  ASSERT_EQ(cells.size(), 8u);
  EXPECT_EQ(cells[0].name, "120k/b1/h1g8");
  EXPECT_EQ(cells[3].name, "120k/b8/h8g16");
  EXPECT_EQ(cells[4].name, "5k/b1/h1g8");
  for (const auto& c : cells) {
    EXPECT_EQ(int(c.lens.size()), c.batch);
    EXPECT_EQ(c.lens[0], c.context);
    int64_t sum = 0;
    for (int32_t l : c.lens) sum += l;
    EXPECT_EQ(sum, c.tokens);
  }
}

TEST(DriftData, CacheIsTheQuantizedSourceAndTheRestIsPoison) {
  DriftSweep s = parse_drift_sweep(minimal());
  s.heads = {{2, 3}};
  s.head_dim = 64;
  s.kv_scale = 0.05;
  s.q_std = 2.0;
  DriftCell cell;
  cell.lens = {37, 0, 16};
  cell.heads = s.heads[0];
  const uint64_t seed = 99;
  std::printf("[ seed ] %llu\n", (unsigned long long)seed);
  const DriftData d = build_drift_data(s, cell, seed);
  const HostCase& c = d.c;
  const int64_t D = 64, H = 2, bs = 16;
  EXPECT_EQ(c.num_blocks, 3 + 0 + 1 + 1);  // 37 tokens: 3 blocks; 16: 1; spare 1
  const DType fl = DType::fp8_e4m3fn;
  int64_t checked = 0;
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < cell.lens[b]; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t dd = 0; dd < D; ++dd) {
          const int64_t blk = c.block_tables[b * c.max_blocks + t / bs], off = t % bs;
          const float ks = source_normal(seed, SourceTensor::k, b, h, t, dd);
          const float vs = source_normal(seed, SourceTensor::v, b, h, t, dd);
          ASSERT_EQ(c.k[kernels::k_offset(blk, h, dd, off, H, D, bs)], kernels::f32_to_fp8(ks / 0.05f, fl));
          ASSERT_EQ(c.v[kernels::v_offset(kernels::VLayout::plain, blk, h, dd, off, H, D, bs)],
                    kernels::f32_to_fp8(vs / 0.05f, fl));
          ++checked;
        }
  EXPECT_EQ(checked, (37 + 16) * H * D);
  // Tail of seq 0's last block (tokens 37..47) and the spare block are NaN codes.
  const int64_t last = c.block_tables[0 * c.max_blocks + 2];
  for (int64_t off = 37 % bs; off < bs; ++off)
    EXPECT_EQ(c.k[kernels::k_offset(last, 0, 5, off, H, D, bs)], 0x7f);
  for (int64_t i = 4 * H * D * bs; i < 5 * H * D * bs; ++i) ASSERT_EQ(c.v[i], 0x7f);
  // q: q_std * source, rounded to bf16; q_source keeps the unrounded value.
  const float q0 = 2.0f * source_normal(seed, SourceTensor::q, 1, 4, 0, 7);
  EXPECT_EQ(d.q_source[(1 * 6 + 4) * D + 7], q0);
  EXPECT_EQ(c.q[(1 * 6 + 4) * D + 7], kernels::f32_to_bf16(q0));
  // The source chunks give the same values the cache was built from.
  std::vector<float> k(5 * D), v(5 * D);
  drift_source_chunks(s, cell, seed)(2, 1, 10, 5, k.data(), v.data());
  EXPECT_EQ(k[3 * D + 9], source_normal(seed, SourceTensor::k, 2, 1, 13, 9));
  EXPECT_EQ(v[4 * D + 63], source_normal(seed, SourceTensor::v, 2, 1, 14, 63));
}

TEST(DriftData, SourceNormalsLookStandardNormal) {
  double s1 = 0, s2 = 0, s4 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = source_normal(5, SourceTensor::v, i / 128, 0, i % 7, i % 128);
    s1 += x;
    s2 += x * x;
    s4 += x * x * x * x;
  }
  EXPECT_NEAR(s1 / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.015);
  EXPECT_NEAR(s4 / n, 3.0, 0.08);  // normal kurtosis
  EXPECT_NE(source_normal(5, SourceTensor::k, 0, 0, 0, 0), source_normal(6, SourceTensor::k, 0, 0, 0, 0));
}

// A small planned case through the CPU backend, keeping its scratch.
struct SmallRun {
  DriftSweep s;
  DriftCell cell;
  DriftData data;
  RunResult run;
};
SmallRun small_run(int ceiling, DType partial) {
  SmallRun r;
  r.s = parse_drift_sweep(minimal());
  r.cell.lens = {9000, 700, 3000};
  r.cell.heads = {2, 4};
  r.data = build_drift_data(r.s, r.cell, 3);
  r.data.c.spec.opt.partial = partial;
  r.data.c.spec.path = Path::planned;
  r.data.c.spec.max_partitions = ceiling;
  r.run = run_case(r.data.c, kernels::Backend::cpu);
  return r;
}

TEST(DriftControl, ReduceHookWithoutEpsilonReproducesTheKernelBitForBit) {
  for (int ceiling : {8, 256})
    for (DType p : {DType::bf16, DType::f32}) {
      SmallRun r = small_run(ceiling, p);
      const std::vector<uint16_t> kernel_out = r.data.c.out;
      r.data.c.poison_output();
      const kernels::PlanView view = r.run.plan->view();
      inject_partition_epsilon(r.run.scratch.view, view, 4, 0.0f);
      reduce_planned_scratch(r.data.c.call(), view, r.run.scratch.view);
      EXPECT_EQ(r.data.c.out, kernel_out) << "ceiling " << ceiling << " partial " << kernels::to_string(p);
    }
}

TEST(DriftControl, EpsilonChangesTheOutputAndOnlyActivePartitions) {
  SmallRun r = small_run(64, DType::bf16);
  const std::vector<float> l_before = r.run.scratch.l;
  const std::vector<uint16_t> kernel_out = r.data.c.out;
  const kernels::PlanView view = r.run.plan->view();
  inject_partition_epsilon(r.run.scratch.view, view, 4, 1.0f);
  int64_t changed = 0, nan_kept = 0;
  for (size_t i = 0; i < l_before.size(); ++i) {
    if (std::isnan(l_before[i])) {
      nan_kept += std::isnan(r.run.scratch.l[i]);
      continue;
    }
    if (l_before[i] > 0) {
      EXPECT_EQ(r.run.scratch.l[i], l_before[i] + 1.0f);
      ++changed;
    }
  }
  EXPECT_EQ(changed, r.run.active_tasks * 2 * 4);  // every active slot, both heads, all rows
  EXPECT_EQ(nan_kept, int64_t(std::count_if(l_before.begin(), l_before.end(), [](float x) { return std::isnan(x); })));
  reduce_planned_scratch(r.data.c.call(), view, r.run.scratch.view);
  EXPECT_NE(r.data.c.out, kernel_out);
}

TEST(DriftFigures, FiguresFollowTheirDefinitions) {
  reference::ReferenceResult ref;
  ref.num_seqs = 1;
  ref.q_len = 1;
  ref.hq = 2;
  ref.head_dim = 2;
  ref.out = {3.0f, 4.0f, 1.0f, 0.0f};  // row norms 5 and 1
  ref.lse = {0.0, 0.0};
  std::vector<uint16_t> out = {kernels::f32_to_bf16(3.0f), kernels::f32_to_bf16(4.5f), kernels::f32_to_bf16(1.25f),
                               kernels::f32_to_bf16(0.0f)};
  const auto view = kernels::TensorView::contiguous_of(out.data(), DType::bf16, {1, 2, 2});
  const ErrorFigures f = error_figures(view, ref);
  EXPECT_NEAR(f.rel_l2, std::sqrt(0.25 + 0.0625) / std::sqrt(26.0), 1e-12);
  EXPECT_NEAR(f.max_row_rel, 0.25, 1e-12);  // row 1: 0.25 / 1
  EXPECT_NEAR(f.max_abs, 0.5, 1e-12);
  EXPECT_EQ(f.mismatches, 2);  // 0.5 and 0.25 both exceed 5e-3 + 5e-3*|ref|
  const SplitCounts s = split_counts({4, 1, 256, 9});
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 256);
  EXPECT_EQ(s.median, 6.5);
}

TEST(DriftReport, ProgressLineIsOneLineCutToItsWidth) {
  const std::string l = progress_line({.done = 25, .total = 100, .what = "cell 1/2 70k/b1 seed 2/8", .elapsed_s = 30});
  // 25% of a 20-character bar is 5 marks; 30 s for a quarter leaves 90 s.
  EXPECT_EQ(l, "drift [#####...............]  25%  cell 1/2 70k/b1 seed 2/8  30s, ~1m30s left");
  const std::string cut = progress_line({.done = 1, .total = 1, .what = std::string(200, 'x'), .elapsed_s = 5}, 60);
  EXPECT_EQ(cut.size(), 60u);
  EXPECT_EQ(cut.rfind("drift [####################] 100%  xxx", 0), 0u) << cut;
  EXPECT_EQ(cut.find_first_of("\r\n"), std::string::npos);
}

// The quick sweep end to end, on the CPU backend: the kernel shows no growth,
// no arm mismatches the comparison standard, the positive control flips in
// every cell, and the report writers produce their files.
TEST(DriftQuickSweep, NoGrowthAndTheControlFlips) {
  const DriftSweep s = load_drift_sweep(fixture("drift-quick.json"));
  std::printf("[ seed ] data seeds %llu..%llu, lengths seed %llu\n", (unsigned long long)s.seed,
              (unsigned long long)(s.seed + s.seeds - 1), (unsigned long long)s.lengths_seed);
  const DriftReport rep = run_drift(s, drift_cells(s));
  const std::string md = report_markdown(rep);
  std::printf("%s\n", md.c_str());
  EXPECT_TRUE(rep.passed) << rep.first_failure;
  EXPECT_FALSE(rep.growth);
  EXPECT_TRUE(rep.control_run);
  EXPECT_TRUE(rep.control_ok);
  EXPECT_EQ(rep.mismatches, 0);
  ASSERT_EQ(rep.cells.size(), 2u);
  for (const CellResult& c : rep.cells) {
    ASSERT_TRUE(c.control.has_value());
    EXPECT_TRUE(c.control->splits_differ) << c.cell.name;
    EXPECT_TRUE(c.control->test.growth) << c.cell.name << ": " << c.control->test.verdict;
    for (const auto& a : c.arms) {
      ASSERT_EQ(a.kernel_ref.size(), size_t(s.seeds));
      for (size_t r = 0; r < a.kernel_ref.size(); ++r) {
        // End to end includes the fp8 quantization of K and V, so it is larger
        // than the kernel-reference error of the same output.
        EXPECT_GT(a.end_to_end[r].rel_l2, a.kernel_ref[r].rel_l2) << a.arm.name;
      }
    }
  }
  // Batch 1: the planner gives exactly the ceiling at every ceiling (274 tiles).
  for (const auto& a : rep.cells[0].arms)
    if (a.arm.kind == ArmKind::planned) {
      EXPECT_EQ(a.splits.min, a.arm.ceiling) << a.arm.name;
      EXPECT_EQ(a.splits.max, a.arm.ceiling) << a.arm.name;
    }

  // Report files.
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("pav-drift-test-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const json j = report_json(rep);
  EXPECT_EQ(j["format"], kDriftReportFormat);
  EXPECT_EQ(j["cells"].size(), 2u);
  EXPECT_EQ(j["cells"][0]["arms"].size(), drift_arms(s).size());
  EXPECT_NE(md.find("| planned c256 bf16 |"), std::string::npos);
  EXPECT_NE(md.find("control flipped"), std::string::npos);
  if (!gnuplot_png_terminal().empty()) {
    const PlotOutcome po = write_plot(rep, (dir / "drift.png").string());
    EXPECT_TRUE(po.ok) << po.message;
    EXPECT_GT(std::filesystem::file_size(dir / "drift.png"), 1000u);
  } else {
    std::printf("gnuplot with a png terminal is not installed: the plot part of this test did not run\n");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pav::props
