// SPDX-License-Identifier: Apache-2.0
// Seed streams that continue across runs, and the merge of shard reports: the
// positions computed by hand, resumed runs that run each seed once, and every
// way a set of reports can fail to be one campaign refused with the shard named.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <set>

#include "properties/engine/fuzz_engine.hpp"
#include "properties/engine/fuzz_report.hpp"

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

// One run of `property` from case `from` to case `to` (one job).
json run_json(const std::string& property, uint64_t from, uint64_t to, double seconds = 1.0) {
  const int64_t cases = int64_t(to - from);
  return {{"property", property},
          {"cases", cases},
          {"seconds", seconds},
          {"cpu_seconds", seconds},
          {"cases_per_job", {cases}},
          {"interrupted", false},
          {"passed", true},
          {"seeds", {{"from", stream_point_json(point(from))}, {"to", stream_point_json(point(to))}}}};
}

json failure_json(const std::string& id, uint64_t seed) {
  return {{"seed", seed},         {"case_id", id},         {"message", "m"},       {"shrunk_case", "d"},
          {"reproduced", true},   {"saved", "ce/" + id + ".json"}, {"save_error", nullptr}};
}

// A report of one property "p" from case `from` to case `to`, as pav fuzz
// writes it for a run of one job under a time budget that passed.
json report(int index, int count, uint64_t from, uint64_t to, double seconds = 1.0) {
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
          {"jobs", 1},
          {"properties", {"p"}},
          {"budget", {{"cases_per_property", nullptr}, {"minutes", 1.0}}},
          {"runs", {run_json("p", from, to, seconds)}},
          {"resumed", {{"p", stream_point_json(point(from))}}},
          {"resume", {{"p", stream_point_json(point(to))}}},
          {"wall_seconds", seconds},
          {"cpu_seconds", seconds},
          {"passed", true},
          {"exit_code", 0},
          {"interrupted", false}};
}

// The report's first run found a failure: what pav fuzz writes then.
void found_failure(json& r, const std::string& id, uint64_t seed) {
  r["runs"][0]["failure"] = failure_json(id, seed);
  r["runs"][0]["passed"] = false;
  r["passed"] = false;
  r["exit_code"] = 1;
}

// A signal stopped the report's first run before its budget was spent.
void stopped(json& r) {
  r["runs"][0]["interrupted"] = true;
  r["interrupted"] = true;
  r["signal"] = "SIGTERM";
  r["passed"] = false;
  r["exit_code"] = 3;
}

std::vector<ReportFile> shards(int count, uint64_t cases_each) {
  std::vector<ReportFile> out;
  for (int i = 0; i < count; ++i)
    out.push_back({"s" + std::to_string(i) + ".json", report(i, count, 0, cases_each)});
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
  f[0].report = report(0, 3, 0, 12, 2.0);  // shard 0 ran further, in twice the time
  f[2].report = report(2, 3, 0, 9);
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
  f.push_back({"again.json", report(1, 3, 0, 5)});
  const std::string why = refusal(f);
  EXPECT_NE(why.find("shard 1/3 is given twice"), std::string::npos) << why;
  EXPECT_NE(why.find("s1.json"), std::string::npos) << why;
  EXPECT_NE(why.find("again.json"), std::string::npos) << why;
}

TEST(MergeReports, RefusesOverlappingOrBrokenSegments) {
  std::vector<ReportFile> f = shards(2, 5);
  // Shard 1 in two segments: 0..5 then 5..9 is one chain.
  f.push_back({"s1b.json", report(1, 2, 5, 9)});
  const FleetResult ok = merge_reports(f);
  EXPECT_EQ(ok.merged["properties"][0]["cases"], 14);
  EXPECT_EQ(ok.merged["properties"][0]["seed_prefix"], 10);  // shard 0 at case 5: 5*2+0
  // A segment starting at 4 overlaps the first one (case 4 twice).
  f.back().report = report(1, 2, 4, 9);
  std::string why = refusal(f);
  EXPECT_NE(why.find("shard 1/2"), std::string::npos) << why;
  EXPECT_NE(why.find("s1b.json does not continue s1.json"), std::string::npos) << why;
  // A segment starting at 6 leaves case 5 out.
  f.back().report = report(1, 2, 6, 9);
  EXPECT_NE(refusal(f).find("s1b.json does not continue s1.json"), std::string::npos);
  // A later segment alone: its first cases are missing.
  f.erase(f.begin() + 1);
  f.back().report = report(1, 2, 5, 9);
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
      {"regions on", [](json& r) { r["regions"] = true; }},
      {"shapes 6 from shape seed 4", [](json& r) {
         r["shapes"] = 6;
         r["shape_seed"] = 4;
       }},
      {"properties p,q", [](json& r) {
         r["properties"] = {"p", "q"};
         r["runs"].push_back(run_json("q", 0, 0));
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
  EXPECT_NE(refusal(f).find("s1.json: resume.p.done_beyond[1]: expected ascending case indices above next_case 5, got 8"), std::string::npos) << refusal(f);
  f = shards(2, 5);
  f[1].report["resume"]["p"]["done_beyond"] = {5};  // not above next_case
  EXPECT_NE(refusal(f).find("expected ascending"), std::string::npos) << refusal(f);
  f = shards(2, 5);
  f[0].report["shard_index"] = 2;
  EXPECT_NE(refusal(f).find("s0.json: shard_index: shard 2/2 is not a shard"), std::string::npos) << refusal(f);
  f = shards(2, 5);
  f[0].report.erase("resume");
  EXPECT_NE(refusal(f).find("s0.json: resume: missing (required)"), std::string::npos) << refusal(f);
  EXPECT_EQ(refusal({}), "no report to merge");
}

TEST(MergeReports, DeduplicatesFailuresByShrunkCaseLowestSeedFirst) {
  std::vector<ReportFile> f = shards(3, 5);
  found_failure(f[0].report, "p-aaaa", 19);
  found_failure(f[1].report, "p-aaaa", 13);
  found_failure(f[2].report, "p-bbbb", 30);
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

// ---- a shard that failed or did not complete: exit 1, named ----------------------

// The merge's verdict and the reasons it gives.
std::pair<int, std::string> verdict(const std::vector<ReportFile>& f) {
  const FleetResult r = merge_reports(f);
  std::string why;
  for (const auto& w : r.not_passed) why += w + "\n";
  EXPECT_EQ(r.merged["passed"], r.exit_code == 0);
  EXPECT_EQ(r.merged["not_passed"].size(), r.not_passed.size());
  return {r.exit_code, why};
}

TEST(MergeReports, AShardStoppedEarlyFailsTheMergeNamed) {
  EXPECT_EQ(verdict(shards(2, 5)), std::make_pair(0, std::string()));
  std::vector<ReportFile> f = shards(2, 5);
  stopped(f[1].report);
  auto [rc, why] = verdict(f);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(why.find("shard 1/2 (s1.json): did not complete: stopped by SIGTERM before its budget was spent, after 5 "
                     "case(s); p stopped after 5 case(s)"),
            std::string::npos)
      << why;
  EXPECT_EQ(merge_reports(f).merged["reports"][1]["verdict"], "incomplete");
  // Stopped before its first property: no run at all, the stream where it was.
  f = shards(2, 5);
  f[0].report["runs"] = json::array();
  f[0].report["resume"] = f[0].report["resumed"];
  f[0].report["interrupted"] = true;
  f[0].report["passed"] = false;
  f[0].report["exit_code"] = 3;
  std::tie(rc, why) = verdict(f);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(why.find("shard 0/2 (s0.json): did not complete: stopped by a signal before its budget was spent, after 0 "
                     "case(s); p not reached"),
            std::string::npos)
      << why;
}

TEST(MergeReports, AShardThatFoundAFailureFailsTheMergeNamed) {
  std::vector<ReportFile> f = shards(2, 5);
  found_failure(f[0].report, "p-aaaa", 9);
  auto [rc, why] = verdict(f);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(why.find("shard 0/2 (s0.json): found a failure: p seed 9 (p-aaaa)"), std::string::npos) << why;
  // The failure of a first property ends the run: the second has no run, which
  // is what pav fuzz writes then.
  f = shards(2, 5);
  for (auto& r : f) {
    r.report["properties"] = {"p", "q"};
    r.report["runs"].push_back(run_json("q", 0, 3));
    r.report["resumed"]["q"] = stream_point_json(point(0));
    r.report["resume"]["q"] = stream_point_json(point(3));
  }
  EXPECT_EQ(verdict(f).first, 0);
  found_failure(f[1].report, "p-cccc", 10);
  f[1].report["runs"].erase(1);
  f[1].report["resume"]["q"] = stream_point_json(point(0));
  std::tie(rc, why) = verdict(f);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(why.find("shard 1/2 (s1.json): found a failure: p seed 10"), std::string::npos) << why;
}

TEST(MergeReports, AStoppedSegmentContinuedByTheNextCompletesItsShard) {
  // Shard 1 stopped by a signal at case 5, resumed from there to case 9.
  std::vector<ReportFile> f = shards(2, 5);
  stopped(f[1].report);
  f.push_back({"s1b.json", report(1, 2, 5, 9)});
  auto [rc, why] = verdict(f);
  EXPECT_EQ(rc, 0) << why;
  EXPECT_EQ(merge_reports(f).merged["reports"][1]["verdict"], "continued");
  EXPECT_EQ(merge_reports(f).merged["reports"][2]["verdict"], "pass");
  // The last segment stopped too: the shard did not complete.
  stopped(f[2].report);
  std::tie(rc, why) = verdict(f);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(why.find("shard 1/2 (s1b.json), segment 1: did not complete"), std::string::npos) << why;
  EXPECT_EQ(why.find("s1.json"), std::string::npos) << why;  // the continued one is not held against it
  // A failure in an earlier segment stands even when a later one passed.
  f = shards(2, 5);
  found_failure(f[1].report, "p-dddd", 12);
  f.push_back({"s1b.json", report(1, 2, 5, 9)});
  std::tie(rc, why) = verdict(f);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(why.find("shard 1/2 (s1.json), segment 0: found a failure"), std::string::npos) << why;
}

TEST(MergeReports, ExitCodeFollowsTheShards) {
  std::vector<ReportFile> f = shards(2, 5);
  stopped(f[1].report);
  EXPECT_EQ(merge_reports(f).exit_code, 1);
  found_failure(f[0].report, "p-eeee", 4);
  EXPECT_EQ(merge_reports(f).exit_code, 1);
  EXPECT_EQ(merge_reports(shards(2, 5)).exit_code, 0);
}

// ---- a report that is malformed or contradicts itself: refused, naming file and field

// Each change makes shard 1's report one pav fuzz could not have written; the
// unchanged report merges (the other side of every rule).
TEST(MergeReports, RefusesAReportThatContradictsItselfNamingTheField) {
  ASSERT_EQ(refusal(shards(2, 5)), "");
  const std::vector<std::pair<std::string, std::function<void(json&)>>> changes = {
      // The verdict fields against each other and against the runs.
      {"s1.json: exit_code: 0 contradicts the report, which says it was interrupted (exit 3)",
       [](json& r) { r["interrupted"] = true; }},
      {"s1.json: exit_code: 137 is not an exit code pav fuzz records", [](json& r) { r["exit_code"] = 137; }},
      {"s1.json: exit_code: 2 is not an exit code", [](json& r) { r["exit_code"] = 2; }},
      {"s1.json: exit_code: 3 contradicts the report, which records neither a failure nor a stop",
       [](json& r) { r["exit_code"] = 3; r["passed"] = false; }},
      {"s1.json: exit_code: 0 contradicts the report, which records a failure of p",
       [](json& r) { found_failure(r, "p-a", 9); r["exit_code"] = 0; r["passed"] = true; }},
      {"s1.json: exit_code: 3 contradicts the report, which records a failure of p",
       [](json& r) { found_failure(r, "p-a", 9); r["exit_code"] = 3; r["interrupted"] = true; }},
      {"s1.json: passed: true contradicts exit_code 3", [](json& r) { stopped(r); r["passed"] = true; }},
      {"s1.json: passed: false contradicts exit_code 0", [](json& r) { r["passed"] = false; }},
      {"s1.json: exit_code: expected an integer", [](json& r) { r["exit_code"] = "0"; }},
      {"s1.json: interrupted: expected true or false", [](json& r) { r["interrupted"] = 0; }},
      {"s1.json: interrupted: missing (required)", [](json& r) { r.erase("interrupted"); }},
      {"s1.json: passed: missing (required)", [](json& r) { r.erase("passed"); }},
      {"s1.json: interrupted: false, but runs[0] (p) was interrupted",
       [](json& r) { r["runs"][0]["interrupted"] = true; }},
      {"s1.json: runs[0].passed: true contradicts its failure",
       [](json& r) { found_failure(r, "p-a", 9); r["runs"][0]["passed"] = true; }},
      {"s1.json: runs[0].passed: false contradicts a run without a failure",
       [](json& r) { r["runs"][0]["passed"] = false; }},
      {"s1.json: runs[0].interrupted: true contradicts its failure",
       [](json& r) { found_failure(r, "p-a", 9); r["runs"][0]["interrupted"] = true; r["interrupted"] = true; }},
      // Runs: every property reached has one, in order; the others did not move.
      {"s1.json: resume.p: the property has no run, yet its seed stream moved",
       [](json& r) { r["runs"] = json::array(); }},
      {"s1.json: runs: no run of property 'p', yet the report neither stopped early nor failed",
       [](json& r) { r["runs"] = json::array(); r["resume"] = r["resumed"]; }},
      {"s1.json: runs: 2 runs for 1 properties", [](json& r) { r["runs"].push_back(r["runs"][0]); }},
      {"s1.json: runs[0].property: expected 'p'", [](json& r) { r["runs"][0]["property"] = "q"; }},
      {"s1.json: runs: expected an array", [](json& r) { r["runs"] = json::object(); }},
      {"s1.json: runs[0]: expected an object", [](json& r) { r["runs"][0] = 5; }},
      // Counts: non-negative, the per-job counts summing to the total, the
      // stream moved by exactly the cases counted.
      {"s1.json: runs[0].cases: must be in 0..1099511627776, got -5",
       [](json& r) { r["runs"][0]["cases"] = -5; }},
      {"s1.json: runs[0].cases_per_job[0]: must be in 0..1099511627776, got -5", [](json& r) { r["runs"][0]["cases_per_job"] = {-5}; }},
      {"s1.json: runs[0].cases: 4 is not the sum of cases_per_job (5)", [](json& r) { r["runs"][0]["cases"] = 4; }},
      {"s1.json: runs[0].cases: 4 case(s) do not take the seed stream from next_case 0 to next_case 5",
       [](json& r) { r["runs"][0]["cases"] = 4; r["runs"][0]["cases_per_job"] = {4}; }},
      {"s1.json: runs[0].cases_per_job: expected 1 entries, got 2",
       [](json& r) { r["runs"][0]["cases_per_job"] = {3, 2}; }},
      {"s1.json: runs[0].cases: must be in 0..1099511627776, got 1099511627777",
       [](json& r) { r["runs"][0]["cases"] = (int64_t(1) << 40) + 1; }},
      {"s1.json: runs[0].seeds.from: next_case 1 is not where the report's resumed.p starts (next_case 0)",
       [](json& r) { r["runs"][0]["seeds"]["from"] = stream_point_json(point(1)); }},
      {"s1.json: runs[0].seeds.to: next_case 4 is not where the report's resume.p stops (next_case 5)",
       [](json& r) { r["runs"][0]["seeds"]["to"] = stream_point_json(point(4)); }},
      {"s1.json: runs[0].seconds: must be in [0, 1000000000000], got -1",
       [](json& r) { r["runs"][0]["seconds"] = -1; }},
      {"s1.json: wall_seconds: expected a number, got a string \"1\"", [](json& r) { r["wall_seconds"] = "1"; }},
      {"s1.json: cpu_seconds: must be in [0, 1000000000000], got -0.5", [](json& r) { r["cpu_seconds"] = -0.5; }},
      // The budget: a case budget alone is spent exactly by a run that passed.
      {"s1.json: runs[0].cases: 5 case(s) of a budget of 6 per property, with no failure and no stop",
       [](json& r) { r["budget"] = {{"cases_per_property", 6}, {"minutes", nullptr}}; }},
      {"s1.json: runs[0].cases: 5 case(s), more than the budget of 4 per property",
       [](json& r) { r["budget"] = {{"cases_per_property", 4}, {"minutes", 1.0}}; }},
      {"s1.json: budget: neither cases_per_property nor minutes is given",
       [](json& r) { r["budget"] = {{"cases_per_property", nullptr}, {"minutes", nullptr}}; }},
      {"s1.json: budget.minutes: expected a positive finite number, got 0",
       [](json& r) { r["budget"]["minutes"] = 0; }},
      {"s1.json: budget.cases_per_property: must be in 1..1099511627776, got 0", [](json& r) { r["budget"]["cases_per_property"] = 0; }},
      {"s1.json: jobs: must be in 1..1024, got 0", [](json& r) { r["jobs"] = 0; }},
      // The failure's fields.
      {"s1.json: runs[0].failure.seed: must be in 0..18446744073709551615, got -9",
       [](json& r) { found_failure(r, "p-a", 9); r["runs"][0]["failure"]["seed"] = -9; }},
      {"s1.json: runs[0].failure.case_id: expected the shrunk case's id when reproduced is true",
       [](json& r) { found_failure(r, "p-a", 9); r["runs"][0]["failure"]["case_id"] = nullptr; }},
      {"s1.json: runs[0].failure.message: expected a string",
       [](json& r) { found_failure(r, "p-a", 9); r["runs"][0]["failure"]["message"] = 5; }},
      {"s1.json: runs[0].failure: expected an object", [](json& r) { r["runs"][0]["failure"] = 5; }},
      // Identity fields.
      {"s1.json: kernel: expected the kernel's identity (an object) or null", [](json& r) { r["kernel"] = "k"; }},
      {"s1.json: host: expected a string", [](json& r) { r["host"] = 5; }},
      {"s1.json: properties[1]: \"p\" is listed twice", [](json& r) { r["properties"] = {"p", "p"}; }},
      // The typing input/ gives every reader: an integer is never a real, and
      // each bound is checked before any conversion.
      {"s1.json: runs[0].cases: expected an integer, got a number 5.0", [](json& r) { r["runs"][0]["cases"] = 5.0; }},
      {"s1.json: shard_count: must be in 1..1048576, got 0", [](json& r) { r["shard_count"] = 0; }},
      {"s1.json: base_seed: must be in 0..18446744073709551615, got -1", [](json& r) { r["base_seed"] = -1; }},
      {"s1.json: resume.p.done_beyond[0]: expected an integer", [](json& r) { r["resume"]["p"]["done_beyond"] = {"x"}; }},
      {"s1.json: runs[0].failure.case_id: expected a string or null",
       [](json& r) { found_failure(r, "p-a", 9); r["runs"][0]["failure"]["case_id"] = 5; }},
      {"s1.json: signal: expected a string", [](json& r) { stopped(r); r["signal"] = 5; }},
  };
  for (const auto& [expect, change] : changes) {
    std::vector<ReportFile> f = shards(2, 5);
    change(f[1].report);
    const std::string why = refusal(f);
    EXPECT_NE(why.find(expect), std::string::npos) << "want: " << expect << "\n got: " << why;
  }
  // The sides the rules allow: a case budget spent exactly, a time budget with
  // fewer cases than the case budget, a consistent stop, a consistent failure.
  std::vector<ReportFile> f = shards(2, 5);
  f[1].report["budget"] = {{"cases_per_property", 5}, {"minutes", nullptr}};
  EXPECT_EQ(refusal(f), "");
  f[1].report["budget"] = {{"cases_per_property", 6}, {"minutes", 1.0}};
  EXPECT_EQ(refusal(f), "");
  f[1].report["budget"] = {{"cases_per_property", 6}, {"minutes", nullptr}};
  stopped(f[1].report);
  EXPECT_EQ(refusal(f), "");
  f = shards(2, 5);
  f[1].report["budget"] = {{"cases_per_property", 6}, {"minutes", nullptr}};
  found_failure(f[1].report, "p-a", 9);
  EXPECT_EQ(refusal(f), "");
  f[1].report["runs"][0]["failure"]["reproduced"] = false;
  f[1].report["runs"][0]["failure"]["case_id"] = nullptr;
  EXPECT_EQ(refusal(f), "");
  // The other side of the bounds: the largest seed, no time at all, and a
  // field pav fuzz writes that the merge does not read.
  f = shards(2, 5);
  for (auto& x : f) x.report["base_seed"] = UINT64_MAX;
  f[1].report["wall_seconds"] = 0;
  f[1].report["runs"][0]["seconds"] = 0;
  f[1].report["options"] = {{"anything", 1}};
  EXPECT_EQ(refusal(f), "");
}

TEST(MergeReports, TwoJobsCountEveryCaseTheStreamMovedBy) {
  // Job 0 ran fresh 0,2,4,6; job 1 ran 1,3: 5 is the first not run, 6 ran past it.
  std::vector<ReportFile> f = shards(2, 5);
  for (auto& r : f) r.report["jobs"] = 2;
  json& r = f[1].report;
  for (auto& x : f) x.report["runs"][0]["cases_per_job"] = {3, 2};
  r["runs"][0]["cases"] = 6;
  r["runs"][0]["cases_per_job"] = {4, 2};
  r["runs"][0]["seeds"]["to"] = stream_point_json(point(5, {6}));
  r["resume"]["p"] = stream_point_json(point(5, {6}));
  EXPECT_EQ(refusal(f), "");
  // One case more beyond the frontier than the jobs counted.
  r["runs"][0]["seeds"]["to"] = stream_point_json(point(5, {6, 7}));
  r["resume"]["p"] = stream_point_json(point(5, {6, 7}));
  EXPECT_NE(refusal(f).find("s1.json: runs[0].cases: 6 case(s) do not take the seed stream"), std::string::npos)
      << refusal(f);
}

TEST(ResumeSource, ReadsAStoppedReportAndRefusesOneThatContradictsItself) {
  json r = report(1, 4, 0, 5);
  stopped(r);
  const ResumeSource s = read_resume_source(r, "a.json");
  EXPECT_EQ(s.points.at("p"), point(5));
  EXPECT_EQ(s.shard_index, 1);
  r["exit_code"] = 0;
  try {
    read_resume_source(r, "a.json");
    ADD_FAILURE() << "a report that contradicts itself was read for resuming";
  } catch (const ReportError& e) {
    EXPECT_NE(std::string(e.what()).find("a.json: exit_code: 0 contradicts"), std::string::npos) << e.what();
  }
}

}  // namespace
