// SPDX-License-Identifier: Apache-2.0
// Seed streams that continue across runs, and the merge of shard reports: the
// positions computed by hand, resumed runs that run each seed once, and every
// way a set of reports can fail to be one campaign refused with the shard named.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <set>

#include "properties/fuzz.hpp"
#include "properties/fuzz_report.hpp"

using namespace pav::props::fuzz;
using nlohmann::json;

namespace {

StreamPoint point(uint64_t next, std::vector<uint64_t> beyond = {}) { return StreamPoint{next, std::move(beyond)}; }

TEST(StreamPoint, FreshCasesSkipTheOnesAlreadyRun) {
  const StreamPoint p = point(5, {6, 8});
  EXPECT_EQ(p.fresh_case(0), 5u);
  EXPECT_EQ(p.fresh_case(1), 7u);
  EXPECT_EQ(p.fresh_case(2), 9u);
  EXPECT_EQ(p.fresh_case(3), 10u);
  EXPECT_EQ(point(0).fresh_case(41), 41u);
}

TEST(StreamPoint, AdvanceAfterUnevenJobs) {
  // Job 0 of 3 ran fresh 0,3,6,9; job 1 ran 1,4; job 2 ran 2,5,8: 7 is the
  // first not run, 8 and 9 ran past it.
  EXPECT_EQ(advance_stream(point(0), {4, 2, 3}), point(7, {8, 9}));
  // Continuing from there: fresh 0,1,2 are cases 7,10,11.
  EXPECT_EQ(advance_stream(point(7, {8, 9}), {3}), point(12));
  // One case (7) closes the gap: 8 and 9 ran before, so 10 is next.
  EXPECT_EQ(advance_stream(point(7, {8, 9}), {1, 0}), point(10));
  // Nothing run: the point stays.
  EXPECT_EQ(advance_stream(point(7, {8, 9}), {0, 0}), point(7, {8, 9}));
  // Job 1 ran nothing while job 0 ran on: fresh 0 and 2 ran, 1 is next.
  EXPECT_EQ(advance_stream(point(3, {9}), {2, 0}), point(4, {5, 9}));
}

// A property that records the seeds it is asked to check.
struct Recorder {
  std::mutex mu;
  std::multiset<uint64_t> seeds;
  Property property() {
    Property p;
    p.name = "record";
    p.summary = "test only";
    p.host_only = true;
    p.check_seed = [this](uint64_t seed, int, const CheckContext&) {
      std::lock_guard<std::mutex> lock(mu);
      seeds.insert(seed);
      return Verdict::pass();
    };
    return p;
  }
};

FuzzOptions quiet_options(uint64_t base, int jobs, int shard, int shards) {
  FuzzOptions o;
  o.seed = base;
  o.jobs = jobs;
  o.shard_index = shard;
  o.shard_count = shards;
  o.progress = false;
  return o;
}

TEST(StreamPoint, ResumedRunsRunEachSeedOnce) {
  Recorder rec;
  const Property p = rec.property();
  std::FILE* null = std::fopen("/dev/null", "w");
  FuzzOptions o = quiet_options(1000, 3, 1, 4);
  o.cases = 10;
  const FuzzReport first = run_fuzz(o, {&p}, null, null);
  ASSERT_EQ(first.runs.size(), 1u);
  EXPECT_EQ(first.runs[0].to, point(10));
  o.resume["record"] = first.runs[0].to;
  o.cases = 5;
  o.jobs = 2;
  const FuzzReport second = run_fuzz(o, {&p}, null, null);
  std::fclose(null);
  EXPECT_EQ(second.runs[0].from, point(10));
  EXPECT_EQ(second.runs[0].to, point(15));
  // Cases 0..14 of shard 1/4, each once: 1001, 1005, ..., 1057.
  std::multiset<uint64_t> want;
  for (uint64_t k = 0; k < 15; ++k) want.insert(1000 + 4 * k + 1);
  EXPECT_EQ(rec.seeds, want);
}

// ---- merge ---------------------------------------------------------------------

json run_json(const std::string& property, int64_t cases, double seconds, json failure = nullptr) {
  json r{{"property", property}, {"cases", cases}, {"seconds", seconds}, {"cpu_seconds", seconds}};
  if (!failure.is_null()) r["failure"] = failure;
  return r;
}

json failure_json(const std::string& id, uint64_t seed) {
  return {{"seed", seed}, {"case_id", id}, {"message", "m"}, {"shrunk_case", "d"}, {"saved", "ce/" + id + ".json"}};
}

// A report of one property "p" from case `from` to case `to`.
json report(int index, int count, uint64_t from, uint64_t to, int64_t cases, double seconds = 1.0) {
  return {{"format", kFuzzReportFormat},
          {"pav_version", "1.2.3"},
          {"source_commit", "abcdef012345"},
          {"backend", "cpu"},
          {"device", "host CPU"},
          {"host", "h"},
          {"kernel", nullptr},
          {"base_seed", 7},
          {"shard_index", index},
          {"shard_count", count},
          {"properties", {"p"}},
          {"runs", {run_json("p", cases, seconds)}},
          {"resumed", {{"p", stream_point_json(point(from))}}},
          {"resume", {{"p", stream_point_json(point(to))}}},
          {"wall_seconds", seconds},
          {"cpu_seconds", seconds},
          {"exit_code", 0}};
}

std::vector<ReportFile> shards(int count, uint64_t cases_each) {
  std::vector<ReportFile> out;
  for (int i = 0; i < count; ++i)
    out.push_back({"s" + std::to_string(i) + ".json", report(i, count, 0, cases_each, int64_t(cases_each))});
  return out;
}

// The merge's error message, or "" when it merged.
std::string refusal(const std::vector<ReportFile>& files) {
  try {
    merge_reports(files);
  } catch (const ReportError& e) {
    return e.what();
  }
  return "";
}

TEST(MergeReports, SumsCasesAndFindsTheSeedPrefix) {
  std::vector<ReportFile> f = shards(3, 10);
  f[0].report = report(0, 3, 0, 12, 12, 2.0);  // shard 0 ran further, in twice the time
  f[2].report = report(2, 3, 0, 9, 9);
  const FleetResult r = merge_reports(f);
  EXPECT_EQ(r.exit_code, 0);
  const auto& p = r.merged["properties"][0];
  EXPECT_EQ(p["cases"], 31);
  // Shard I reached case K_I: seeds below K_I*3 + I ran there; 9*3+2 = 29 is the least.
  EXPECT_EQ(p["seed_prefix"], 29);
  EXPECT_DOUBLE_EQ(p["cases_per_second"].get<double>(), 12 / 2.0 + 10 / 1.0 + 9 / 1.0);
  EXPECT_DOUBLE_EQ(p["cases_per_cpu_second"].get<double>(), 31 / 4.0);
  EXPECT_EQ(r.merged["failures"].size(), 0u);
  EXPECT_EQ(r.merged["wall_seconds"], 2.0);
}

TEST(MergeReports, RefusesAMissingShardNamingIt) {
  std::vector<ReportFile> f = shards(4, 5);
  f.erase(f.begin() + 2);
  const std::string why = refusal(f);
  EXPECT_NE(why.find("shard 2/4 is missing"), std::string::npos) << why;
  f.erase(f.begin());
  EXPECT_NE(refusal(f).find("shards 0/4, 2/4 are missing"), std::string::npos) << refusal(f);
  // The last shard, too.
  f = shards(4, 5);
  f.pop_back();
  EXPECT_NE(refusal(f).find("shard 3/4 is missing"), std::string::npos) << refusal(f);
  // All present merges.
  EXPECT_EQ(refusal(shards(4, 5)), "");
}

TEST(MergeReports, RefusesAShardGivenTwice) {
  std::vector<ReportFile> f = shards(3, 5);
  f.push_back({"again.json", report(1, 3, 0, 5, 5)});
  const std::string why = refusal(f);
  EXPECT_NE(why.find("shard 1/3 is given twice"), std::string::npos) << why;
  EXPECT_NE(why.find("s1.json"), std::string::npos) << why;
  EXPECT_NE(why.find("again.json"), std::string::npos) << why;
}

TEST(MergeReports, RefusesOverlappingOrBrokenSegments) {
  std::vector<ReportFile> f = shards(2, 5);
  // Shard 1 in two segments: 0..5 then 5..9 is one chain.
  f.push_back({"s1b.json", report(1, 2, 5, 9, 4)});
  const FleetResult ok = merge_reports(f);
  EXPECT_EQ(ok.merged["properties"][0]["cases"], 14);
  EXPECT_EQ(ok.merged["properties"][0]["seed_prefix"], 10);  // shard 0 at case 5: 5*2+0
  // A segment starting at 4 overlaps the first one (case 4 twice).
  f.back().report = report(1, 2, 4, 9, 5);
  std::string why = refusal(f);
  EXPECT_NE(why.find("shard 1/2"), std::string::npos) << why;
  EXPECT_NE(why.find("s1b.json does not continue s1.json"), std::string::npos) << why;
  // A segment starting at 6 leaves case 5 out.
  f.back().report = report(1, 2, 6, 9, 3);
  EXPECT_NE(refusal(f).find("s1b.json does not continue s1.json"), std::string::npos);
  // A later segment alone: its first cases are missing.
  f.erase(f.begin() + 1);
  f.back().report = report(1, 2, 5, 9, 4);
  why = refusal(f);
  EXPECT_NE(why.find("shard 1/2: s1b.json continues an earlier run that is not given (p from case 5)"),
            std::string::npos)
      << why;
}

TEST(MergeReports, RefusesReportsOfAnotherCampaignNamingTheShard) {
  const std::vector<std::pair<std::string, std::function<void(json&)>>> changes = {
      {"it is one of 5 shards", [](json& r) { r["shard_count"] = 5; }},
      {"pav 1.2.4", [](json& r) { r["pav_version"] = "1.2.4"; }},
      {"commit 000000000000", [](json& r) { r["source_commit"] = "000000000000"; }},
      {"kernel", [](json& r) { r["kernel"] = {{"name", "other"}}; }},
      {"backend gpu", [](json& r) { r["backend"] = "gpu"; }},
      {"base seed 8", [](json& r) { r["base_seed"] = 8; }},
      {"properties p,q", [](json& r) {
         r["properties"] = {"p", "q"};
         r["resumed"]["q"] = stream_point_json(point(0));
         r["resume"]["q"] = stream_point_json(point(0));
       }},
  };
  for (const auto& [expect, change] : changes) {
    std::vector<ReportFile> f = shards(4, 5);
    change(f[2].report);
    const std::string why = refusal(f);
    const std::string shard = "shard 2/" + std::to_string(f[2].report["shard_count"].get<int>());
    EXPECT_NE(why.find(shard + " (s2.json) does not belong with shard 0/4 (s0.json)"), std::string::npos)
        << expect << ": " << why;
    EXPECT_NE(why.find(expect), std::string::npos) << why;
  }
}

TEST(MergeReports, RefusesMalformedReports) {
  std::vector<ReportFile> f = shards(2, 5);
  f[1].report.erase("format");
  EXPECT_NE(refusal(f).find("s1.json: not a pav fuzz report"), std::string::npos);
  f = shards(2, 5);
  f[1].report["resume"]["p"]["done_beyond"] = {9, 8};
  EXPECT_NE(refusal(f).find("s1.json.resume.p.done_beyond: expected ascending"), std::string::npos) << refusal(f);
  f = shards(2, 5);
  f[1].report["resume"]["p"]["done_beyond"] = {5};  // not above next_case
  EXPECT_NE(refusal(f).find("expected ascending"), std::string::npos) << refusal(f);
  f = shards(2, 5);
  f[0].report["shard_index"] = 2;
  EXPECT_NE(refusal(f).find("s0.json: shard 2/2 is not a shard"), std::string::npos) << refusal(f);
  f = shards(2, 5);
  f[0].report.erase("resume");
  EXPECT_NE(refusal(f).find("s0.json: missing field 'resume'"), std::string::npos) << refusal(f);
  EXPECT_EQ(refusal({}), "no report to merge");
}

TEST(MergeReports, DeduplicatesFailuresByShrunkCaseLowestSeedFirst) {
  std::vector<ReportFile> f = shards(3, 5);
  f[0].report["runs"][0] = run_json("p", 3, 1.0, failure_json("p-aaaa", 19));
  f[0].report["exit_code"] = 1;
  f[1].report["runs"][0] = run_json("p", 2, 1.0, failure_json("p-aaaa", 13));
  f[1].report["exit_code"] = 1;
  f[2].report["runs"][0] = run_json("p", 4, 1.0, failure_json("p-bbbb", 30));
  f[2].report["exit_code"] = 1;
  const FleetResult r = merge_reports(f);
  EXPECT_EQ(r.exit_code, 1);
  const json failures = r.merged["failures"];
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[0]["case_id"], "p-aaaa");
  EXPECT_EQ(failures[0]["seed"], 13);
  EXPECT_EQ(failures[0]["shard"], "1/3");
  EXPECT_EQ(failures[0]["found_by"].size(), 2u);
  EXPECT_EQ(failures[1]["case_id"], "p-bbbb");
  EXPECT_EQ(r.merged["properties"][0]["failures"], 3);
}

TEST(MergeReports, ExitCodeFollowsTheShards) {
  std::vector<ReportFile> f = shards(2, 5);
  f[1].report["exit_code"] = 3;  // stopped by a signal
  EXPECT_EQ(merge_reports(f).exit_code, 3);
  f[0].report["exit_code"] = 1;
  EXPECT_EQ(merge_reports(f).exit_code, 1);
  EXPECT_EQ(merge_reports(shards(2, 5)).exit_code, 0);
}

}  // namespace
