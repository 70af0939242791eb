// SPDX-License-Identifier: Apache-2.0
#include "properties/engine/fuzz_report.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <climits>
#include <set>

#include "input/json_input.hpp"

namespace pav::props::fuzz {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

using input::Array;
using input::Object;

// Fields are read through input::Object and input::Array, so a report's
// messages read like every other reader's: "FILE: FIELD: why". The checks of
// a report against itself fail the same way (Object::fail), and read_shard
// turns the InputError into a ReportError.

// The most properties one report may list (pav fuzz registers far fewer).
constexpr std::size_t kMaxReportProperties = 1024;
// The most seconds a report may count (wall or CPU, summed over jobs): past
// thirty years at 1,024 jobs.
constexpr double kMaxReportSeconds = 1e12;

// "got VALUE", the value cut short and escaped, so a message stays one line.
std::string got(const json& v) { return "got " + input::excerpt(v); }

// A string or null (null: "").
json string_or_null(const Object& o, std::string_view key) {
  const json& v = o.at(key);
  if (!v.is_string() && !v.is_null()) o.fail(key, "expected a string or null, " + got(v));
  return v;
}

// A stream point: next_case, and the cases run beyond it, ascending.
StreamPoint read_point(const Object& o) {
  StreamPoint p;
  p.next_case = o.integer<uint64_t>("next_case", 0, UINT64_MAX);
  const Array beyond = o.array("done_beyond", 0, std::size_t(kMaxReportCases));
  for (std::size_t i = 0; i < beyond.size(); ++i) {
    const uint64_t v = beyond.integer<uint64_t>(i, 0, UINT64_MAX);
    if (v <= p.next_case || (!p.done_beyond.empty() && v <= p.done_beyond.back()))
      beyond.fail(i, fmt::format("expected ascending case indices above next_case {}, got {}", p.next_case, v));
    p.done_beyond.push_back(v);
  }
  return p;
}

// One property's run as the report records it, checked against itself.
struct RunInfo {
  std::string property;
  int64_t cases = 0;
  double seconds = 0, cpu_seconds = 0;
  bool interrupted = false;
  bool failed = false;
  // The failure, when failed: its fields checked.
  uint64_t seed = 0;
  std::string message, shrunk_case;
  json case_id, saved;
  bool reproduced = true;
};

// The fields of a report that the merge and --resume read, checked.
struct ShardReport {
  std::string path;
  std::string version, commit, backend, host, device;
  json kernel;
  bool regions = false;  // decode drawn by region (absent in reports before they existed: false)
  int shapes = 0;        // decode's calls in that many shapes (absent before they existed: 0)
  uint64_t shape_seed = 0;
  uint64_t base_seed = 0;
  int index = 0, count = 1;
  std::vector<std::string> properties;
  std::map<std::string, StreamPoint> resumed, resume;
  int exit_code = 0;
  bool interrupted = false;
  double wall_seconds = 0, cpu_seconds = 0;
  std::vector<RunInfo> runs;
  // Why this report is not a pass ("" when it passed): a failure, or a stop
  // before its budget was spent.
  std::string not_passed;

  std::string shard() const { return fmt::format("{}/{}", index, count); }
  std::string name() const { return fmt::format("shard {} ({})", shard(), path); }
  const RunInfo* run_of(const std::string& property) const {
    for (const RunInfo& r : runs)
      if (r.property == property) return &r;
    return nullptr;
  }
};

std::map<std::string, StreamPoint> points(const Object& report, std::string_view key,
                                          const std::vector<std::string>& properties) {
  const Object m = report.object(key);
  std::map<std::string, StreamPoint> out;
  for (const std::string& p : properties) out[p] = read_point(m.object(p));
  return out;
}

// The number of case indices a point says ran: every one below next_case and
// those listed beyond it.
__int128 done_count(const StreamPoint& p) { return __int128(p.next_case) + __int128(p.done_beyond.size()); }

// Every case `from` counts as run is still run at `to`.
bool covers(const StreamPoint& to, const StreamPoint& from) {
  if (to.next_case < from.next_case) return false;
  for (uint64_t k : from.done_beyond)
    if (k >= to.next_case && !std::binary_search(to.done_beyond.begin(), to.done_beyond.end(), k)) return false;
  return true;
}

std::string point_text(const StreamPoint& p) {
  return fmt::format("next_case {}{}", p.next_case,
                     p.done_beyond.empty() ? std::string() : fmt::format(" and {} beyond", p.done_beyond.size()));
}

RunInfo read_run(const Object& r, const std::string& want_property, int jobs, const StreamPoint& resumed,
                 const StreamPoint& resume) {
  RunInfo run;
  run.property = r.string("property");
  if (run.property != want_property)
    r.fail("property", fmt::format("expected '{}' (runs follow the properties list in order), got {}", want_property,
                                   input::excerpt(run.property)));
  run.cases = r.integer<int64_t>("cases", 0, kMaxReportCases);
  run.seconds = r.number("seconds", 0, kMaxReportSeconds);
  run.cpu_seconds = r.number("cpu_seconds", 0, kMaxReportSeconds);
  run.interrupted = r.boolean("interrupted");
  const bool passed = r.boolean("passed");
  // Per job, then the total.
  const Array per_job = r.array("cases_per_job", std::size_t(jobs), std::size_t(jobs));
  int64_t sum = 0;
  for (std::size_t i = 0; i < per_job.size(); ++i) sum += per_job.integer<int64_t>(i, 0, kMaxReportCases);
  if (sum != run.cases) r.fail("cases", fmt::format("{} is not the sum of cases_per_job ({})", run.cases, sum));
  // The seed stream: it starts where `resumed` says and stops where `resume`
  // says, and the cases between are the ones counted.
  const Object seeds = r.object("seeds");
  const StreamPoint from = read_point(seeds.object("from"));
  const StreamPoint to = read_point(seeds.object("to"));
  if (from != resumed)
    seeds.fail("from", fmt::format("{} is not where the report's resumed.{} starts ({})", point_text(from),
                                   want_property, point_text(resumed)));
  if (to != resume)
    seeds.fail("to", fmt::format("{} is not where the report's resume.{} stops ({})", point_text(to), want_property,
                                 point_text(resume)));
  if (!covers(to, from) || done_count(to) - done_count(from) != __int128(run.cases))
    r.fail("cases", fmt::format("{} case(s) do not take the seed stream from {} to {}", run.cases, point_text(from),
                                point_text(to)));
  if (r.given("failure")) {
    const Object f = r.object("failure");
    run.failed = true;
    run.seed = f.integer<uint64_t>("seed", 0, UINT64_MAX);
    run.message = f.string("message");
    run.shrunk_case = f.string("shrunk_case");
    run.reproduced = f.boolean("reproduced");
    run.case_id = string_or_null(f, "case_id");
    if (run.reproduced != run.case_id.is_string())
      f.fail("case_id", "expected the shrunk case's id when reproduced is true and null when false");
    run.saved = string_or_null(f, "saved");
    string_or_null(f, "save_error");
    if (run.cases < 1) r.fail("cases", "0 cases cannot have found a failure");
  }
  if (passed == run.failed)
    r.fail("passed", fmt::format("{} contradicts {}", passed ? "true" : "false",
                                 run.failed ? "its failure" : "a run without a failure"));
  if (run.interrupted && run.failed)
    r.fail("interrupted", "true contradicts its failure (a run that found one ended by it)");
  return run;
}

ShardReport read_shard_fields(const json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("format") || j.at("format") != kFuzzReportFormat)
    throw ReportError(path + ": not a pav fuzz report (expected \"format\": \"" + kFuzzReportFormat +
                      "\", as pav fuzz --report writes)");
  // The report's own fields only: pav fuzz writes more (its options, the
  // device's details) than the merge and --resume read, so unknown fields
  // are not refused.
  const Object r(j, path);
  ShardReport s;
  s.path = path;
  s.version = r.string("pav_version");
  s.commit = r.string("source_commit");
  s.backend = r.string("backend");
  s.host = r.string("host");
  s.device = r.string("device");
  s.regions = r.boolean("regions", false);
  s.shapes = r.integer<int>("shapes", 0, 1 << 20, 0);
  if (s.shapes > 0) s.shape_seed = r.integer<uint64_t>("shape_seed", 0, UINT64_MAX);
  s.kernel = r.at("kernel");
  if (!s.kernel.is_null() && !s.kernel.is_object())
    r.fail("kernel", "expected the kernel's identity (an object) or null, " + got(s.kernel));
  s.base_seed = r.integer<uint64_t>("base_seed", 0, UINT64_MAX);
  s.count = r.integer<int>("shard_count", 1, 1 << 20);
  s.index = r.integer<int>("shard_index", 0, 1 << 20);
  if (s.index >= s.count)
    r.fail("shard_index", fmt::format("shard {}/{} is not a shard (expected I/N with 0 <= I < N)", s.index, s.count));
  const Array props = r.array("properties", 1, kMaxReportProperties);
  for (std::size_t i = 0; i < props.size(); ++i) {
    std::string p = props.string(i);
    if (std::find(s.properties.begin(), s.properties.end(), p) != s.properties.end())
      props.fail(i, input::excerpt(props[i]) + " is listed twice");
    s.properties.push_back(std::move(p));
  }
  s.resumed = points(r, "resumed", s.properties);
  s.resume = points(r, "resume", s.properties);
  const int jobs = r.integer<int>("jobs", 1, 1024);
  // The budget: cases per property and/or minutes, each null when not given.
  const Object budget = r.object("budget");
  budget.at("cases_per_property");
  budget.at("minutes");
  const bool has_case_budget = budget.given("cases_per_property"), has_time_budget = budget.given("minutes");
  const int64_t case_budget = has_case_budget ? budget.integer<int64_t>("cases_per_property", 1, kMaxReportCases) : 0;
  if (has_time_budget) budget.positive("minutes");
  if (!has_case_budget && !has_time_budget)
    budget.fail_here("neither cases_per_property nor minutes is given (every run has a budget)");
  s.wall_seconds = r.number("wall_seconds", 0, kMaxReportSeconds);
  s.cpu_seconds = r.number("cpu_seconds", 0, kMaxReportSeconds);
  s.exit_code = r.integer<int>("exit_code", INT_MIN, INT_MAX);
  if (s.exit_code != 0 && s.exit_code != 1 && s.exit_code != 3)
    r.fail("exit_code", fmt::format("{} is not an exit code pav fuzz records (0 pass, 1 a failure found, 3 stopped early)",
                                    s.exit_code));
  const bool passed = r.boolean("passed");
  s.interrupted = r.boolean("interrupted");
  const Array runs = r.array("runs", 0, kMaxReportProperties);
  if (runs.size() > s.properties.size())
    runs.fail_here(fmt::format("{} runs for {} properties (one run per property at most)", runs.size(),
                               s.properties.size()));
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string& p = s.properties[i];
    const Object ro = runs.object(i);
    s.runs.push_back(read_run(ro, p, jobs, s.resumed.at(p), s.resume.at(p)));
    const RunInfo& run = s.runs.back();
    if (run.interrupted && !s.interrupted)
      r.fail("interrupted", fmt::format("false, but runs[{}] ({}) was interrupted", i, p));
    // Without a time budget the run ends at its case budget: only a failure
    // or a stop ends it sooner.
    if (!has_time_budget && !run.failed && !run.interrupted && run.cases != case_budget)
      ro.fail("cases", fmt::format("{} case(s) of a budget of {} per property, with no failure and no stop", run.cases,
                                   case_budget));
    if (has_case_budget && run.cases > case_budget)
      ro.fail("cases", fmt::format("{} case(s), more than the budget of {} per property", run.cases, case_budget));
  }
  // A property not reached stays where it was.
  for (size_t i = runs.size(); i < s.properties.size(); ++i) {
    const std::string& p = s.properties[i];
    if (s.resume.at(p) != s.resumed.at(p))
      r.object("resume").fail(p, fmt::format("the property has no run, yet its seed stream moved from {} to {}",
                                             point_text(s.resumed.at(p)), point_text(s.resume.at(p))));
  }
  // The verdict, as pav fuzz derives it: a failure, else a stop, else a pass.
  const RunInfo* failed = nullptr;
  for (const RunInfo& run : s.runs)
    if (run.failed && !failed) failed = &run;
  const int want = failed ? 1 : s.interrupted ? 3 : 0;
  if (s.exit_code != want)
    r.fail("exit_code", fmt::format("{} contradicts the report, which {}", s.exit_code,
                                    failed          ? "records a failure of " + failed->property + " (exit 1)"
                                    : s.interrupted ? "says it was interrupted (exit 3)"
                                                    : "records neither a failure nor a stop (exit 0)"));
  if (passed != (s.exit_code == 0))
    r.fail("passed", fmt::format("{} contradicts exit_code {}", passed ? "true" : "false", s.exit_code));
  if (s.exit_code == 0 && s.runs.size() < s.properties.size())
    r.fail("runs", fmt::format("no run of property '{}', yet the report neither stopped early nor failed",
                               s.properties[s.runs.size()]));
  if (failed) {
    s.not_passed = fmt::format("found a failure: {} seed {}{}", input::excerpt(failed->property), failed->seed,
                               failed->case_id.is_string() ? " (" + input::excerpt(failed->case_id.get<std::string>()) + ")" : "");
  } else if (s.interrupted) {
    int64_t ran = 0;
    for (const RunInfo& run : s.runs) ran += run.cases;
    std::string where;
    for (size_t i = 0; i < s.properties.size() && where.empty(); ++i)
      if (i >= s.runs.size()) where = "; " + input::excerpt(s.properties[i]) + " not reached";
      else if (s.runs[i].interrupted)
        where = "; " + input::excerpt(s.properties[i]) + " stopped after " + std::to_string(s.runs[i].cases) + " case(s)";
    const std::string signal = r.given("signal") ? r.string("signal") : "a signal";
    s.not_passed = fmt::format("did not complete: stopped by {} before its budget was spent, after {} case(s){}",
                               input::excerpt(signal), ran, where);
  }
  return s;
}

// A report's fields, checked (see the header); every refusal a ReportError.
ShardReport read_shard(const json& j, const std::string& path) {
  try {
    return read_shard_fields(j, path);
  } catch (const input::InputError& e) {
    throw ReportError(e.what());
  }
}

bool at_start(const std::map<std::string, StreamPoint>& m) {
  return std::all_of(m.begin(), m.end(), [](const auto& kv) { return kv.second == StreamPoint{}; });
}

// The first property whose point differs, for the message.
std::string first_difference(const std::map<std::string, StreamPoint>& want, const std::map<std::string, StreamPoint>& got) {
  for (const auto& [p, point] : want)
    if (got.at(p) != point)
      return fmt::format("{} starts at case {}, where the other stopped at case {}", p, got.at(p).next_case,
                         point.next_case);
  return "";
}

// The same campaign as the first report, or a ReportError naming the shard.
void check_belongs(const ShardReport& s, const ShardReport& ref) {
  auto refuse = [&](const std::string& what, const std::string& mine, const std::string& theirs) {
    throw ReportError(fmt::format("{} does not belong with {}: {} {}, theirs {}", s.name(), ref.name(), what, mine,
                                  theirs));
  };
  if (s.count != ref.count) refuse("it is one of", std::to_string(s.count) + " shards", std::to_string(ref.count));
  if (s.version != ref.version || s.commit != ref.commit)
    refuse("pav", s.version + " (commit " + s.commit + ")", ref.version + " (commit " + ref.commit + ")");
  if (s.kernel != ref.kernel) refuse("kernel", input::excerpt(s.kernel), input::excerpt(ref.kernel));
  if (s.backend != ref.backend) refuse("backend", s.backend, ref.backend);
  if (s.regions != ref.regions)
    refuse("regions", s.regions ? "on" : "off", ref.regions ? "on (the cases of a seed differ)" : "off (the cases of a seed differ)");
  if (s.shapes != ref.shapes || s.shape_seed != ref.shape_seed) {
    auto text = [](const ShardReport& x) {
      return x.shapes > 0 ? fmt::format("{} from shape seed {}", x.shapes, x.shape_seed) : std::string("none");
    };
    refuse("shapes", text(s), text(ref) + " (the cases of a seed differ)");
  }
  if (s.base_seed != ref.base_seed)
    refuse("base seed", std::to_string(s.base_seed), std::to_string(ref.base_seed) + " (seeds would overlap or leave gaps)");
  if (s.properties != ref.properties) {
    std::string a, b;
    for (const auto& p : s.properties) a += (a.empty() ? "" : ",") + p;
    for (const auto& p : ref.properties) b += (b.empty() ? "" : ",") + p;
    refuse("properties", a, b);
  }
}

// Orders one shard's segments into a chain from case 0, or refuses.
std::vector<const ShardReport*> chain(std::vector<const ShardReport*> segments) {
  std::vector<const ShardReport*> out;
  const std::string shard = "shard " + segments.front()->shard();
  std::vector<const ShardReport*> starts;
  for (const ShardReport* s : segments)
    if (at_start(s->resumed)) starts.push_back(s);
  if (starts.size() > 1)
    throw ReportError(fmt::format("{} is given twice: {} and {} both start its seed stream at case 0 (the same seeds "
                                  "would count twice)",
                                  shard, starts[0]->path, starts[1]->path));
  if (starts.empty()) {
    const ShardReport* s = segments.front();
    std::string where;
    for (const auto& [p, point] : s->resumed)
      if (point != StreamPoint{} && where.empty()) where = fmt::format("{} from case {}", p, point.next_case);
    throw ReportError(fmt::format("{}: {} continues an earlier run that is not given ({}): the cases before it are "
                                  "missing",
                                  shard, s->path, where));
  }
  out.push_back(starts.front());
  segments.erase(std::find(segments.begin(), segments.end(), starts.front()));
  while (!segments.empty()) {
    const ShardReport* last = out.back();
    auto next = std::find_if(segments.begin(), segments.end(),
                             [&](const ShardReport* s) { return s->resumed == last->resume; });
    if (next == segments.end()) {
      const ShardReport* s = segments.front();
      throw ReportError(fmt::format("{}: {} does not continue {} ({}): their seeds overlap or leave a gap", shard,
                                    s->path, last->path, first_difference(last->resume, s->resumed)));
    }
    out.push_back(*next);
    segments.erase(next);
  }
  return out;
}

}  // namespace

ojson stream_point_json(const StreamPoint& p) {
  return ojson{{"next_case", p.next_case}, {"done_beyond", p.done_beyond}};
}

ResumeSource read_resume_source(const json& report, const std::string& path) {
  const ShardReport s = read_shard(report, path);
  ResumeSource r;
  r.base_seed = s.base_seed;
  r.shard_index = s.index;
  r.shard_count = s.count;
  r.properties = s.properties;
  r.backend = s.backend;
  r.kernel = s.kernel;
  r.regions = s.regions;
  r.shapes = s.shapes;
  r.shape_seed = s.shape_seed;
  r.points = s.resume;
  return r;
}

FleetResult merge_reports(const std::vector<ReportFile>& files) {
  if (files.empty()) throw ReportError("no report to merge");
  std::vector<ShardReport> shards;
  shards.reserve(files.size());
  for (const ReportFile& f : files) shards.push_back(read_shard(f.report, f.path));
  const ShardReport& ref = shards.front();
  for (const ShardReport& s : shards) check_belongs(s, ref);

  std::vector<std::vector<const ShardReport*>> by_shard(size_t(ref.count));
  for (const ShardReport& s : shards) by_shard[size_t(s.index)].push_back(&s);
  std::vector<std::string> missing;
  for (int i = 0; i < ref.count; ++i)
    if (by_shard[size_t(i)].empty()) missing.push_back(fmt::format("{}/{}", i, ref.count));
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw ReportError(fmt::format("shard{} {} {} missing: {} of {} shard(s) given", missing.size() > 1 ? "s" : "", list,
                                  missing.size() > 1 ? "are" : "is", ref.count - int(missing.size()), ref.count));
  }
  std::vector<std::vector<const ShardReport*>> chains;
  for (auto& segments : by_shard) chains.push_back(chain(segments));

  FleetResult out;
  ojson& m = out.merged;
  m["format"] = kFleetReportFormat;
  m["pav_version"] = ref.version;
  m["source_commit"] = ref.commit;
  m["backend"] = ref.backend;
  m["kernel"] = ref.kernel;
  m["base_seed"] = ref.base_seed;
  m["shard_count"] = ref.count;

  // Failures, deduplicated by shrunk case (its case_id), lowest seed first.
  struct Seen {
    ojson failure;
    ojson found_by = ojson::array();
    uint64_t seed;
  };
  std::vector<Seen> failures;
  double fleet_wall = 0, fleet_cpu = 0;
  m["properties"] = ojson::array();
  for (const std::string& p : ref.properties) {
    int64_t cases = 0, failed = 0;
    double cpu = 0, rate = 0;
    uint64_t prefix = UINT64_MAX;
    for (const auto& segs : chains) {
      int64_t shard_cases = 0;
      double shard_seconds = 0;
      for (const ShardReport* s : segs) {
        const RunInfo* run = s->run_of(p);
        if (!run) continue;
        shard_cases += run->cases;
        shard_seconds += run->seconds;
        cpu += run->cpu_seconds;
        if (run->failed) {
          ++failed;
          const uint64_t seed = run->seed;
          const std::string id = run->case_id.is_string() ? run->case_id.get<std::string>()
                                                          : fmt::format("{}-unreproduced-seed{}", p, seed);
          ojson who{{"shard", s->shard()}, {"report", s->path}, {"seed", seed}, {"saved", run->saved}};
          auto it = std::find_if(failures.begin(), failures.end(),
                                 [&](const Seen& x) { return x.failure["case_id"] == id; });
          if (it == failures.end()) {
            ojson first{{"property", p},
                        {"case_id", id},
                        {"seed", seed},
                        {"shard", s->shard()},
                        {"message", run->message},
                        {"shrunk_case", run->shrunk_case},
                        {"reproduced", run->reproduced},
                        {"saved", run->saved},
                        {"report", s->path}};
            failures.push_back({first, ojson::array({who}), seed});
          } else {
            it->found_by.push_back(who);
            if (seed < it->seed) {
              it->seed = seed;
              it->failure["seed"] = seed;
              it->failure["shard"] = s->shard();
              it->failure["saved"] = run->saved;
              it->failure["report"] = s->path;
            }
          }
        }
      }
      cases += shard_cases;
      if (shard_seconds > 0) rate += double(shard_cases) / shard_seconds;
      const ShardReport* last = segs.back();
      // Seeds base + k*N + I for k < next_case all ran on shard I: in the
      // unsharded numbering, every index below next_case*N + I did, over all
      // shards (held at the largest integer the report can carry).
      const unsigned __int128 k = (unsigned __int128)last->resume.at(p).next_case * uint64_t(ref.count) + uint64_t(last->index);
      prefix = std::min<uint64_t>(prefix, k > UINT64_MAX ? UINT64_MAX : uint64_t(k));
    }
    fleet_cpu += cpu;
    m["properties"].push_back({{"property", p},
                               {"cases", cases},
                               {"cpu_seconds", cpu},
                               {"cases_per_second", rate},
                               {"cases_per_cpu_second", cpu > 0 ? double(cases) / cpu : 0.0},
                               {"seed_prefix", prefix},
                               {"failures", failed}});
  }
  // Every shard's verdict: a failure in any segment fails it; it completed when
  // the last segment of its chain spent its budget (an earlier segment stopped
  // by a signal is continued by the next one, which starts where it stopped).
  m["reports"] = ojson::array();
  m["not_passed"] = ojson::array();
  for (const auto& segs : chains) {
    double shard_wall = 0;
    int segment = 0;
    for (const ShardReport* s : segs) {
      shard_wall += s->wall_seconds;
      const bool last = s == segs.back();
      const std::string verdict = s->exit_code == 1 ? "fail" : s->exit_code == 3 ? (last ? "incomplete" : "continued") : "pass";
      if (s->exit_code == 1 || (s->exit_code == 3 && last))
        out.not_passed.push_back(fmt::format("{}{}: {}", s->name(), segs.size() > 1 ? fmt::format(", segment {}", segment) : "",
                                             s->not_passed));
      m["reports"].push_back({{"shard", s->shard()},
                              {"segment", segment++},
                              {"report", s->path},
                              {"host", s->host},
                              {"device", s->device},
                              {"wall_seconds", s->wall_seconds},
                              {"cpu_seconds", s->cpu_seconds},
                              {"exit_code", s->exit_code},
                              {"verdict", verdict}});
    }
    fleet_wall = std::max(fleet_wall, shard_wall);
  }
  for (const std::string& why : out.not_passed) m["not_passed"].push_back(why);
  std::sort(failures.begin(), failures.end(), [](const Seen& a, const Seen& b) { return a.seed < b.seed; });
  m["failures"] = ojson::array();
  for (Seen& f : failures) {
    f.failure["found_by"] = f.found_by;
    m["failures"].push_back(f.failure);
  }
  m["wall_seconds"] = fleet_wall;
  m["cpu_seconds"] = fleet_cpu;
  out.exit_code = out.not_passed.empty() && failures.empty() ? 0 : 1;
  m["passed"] = out.exit_code == 0;
  m["exit_code"] = out.exit_code;
  return out;
}

}  // namespace pav::props::fuzz
