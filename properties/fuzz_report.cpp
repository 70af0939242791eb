// SPDX-License-Identifier: Apache-2.0
#include "properties/fuzz_report.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <set>

namespace pav::props::fuzz {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

const json& field(const json& j, const std::string& key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw ReportError(where + ": missing field '" + key + "'");
  return j.at(key);
}

bool non_negative_integer(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

uint64_t unsigned_field(const json& j, const std::string& key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!non_negative_integer(v)) throw ReportError(where + "." + key + ": expected a non-negative integer");
  return v.get<uint64_t>();
}

std::string string_field(const json& j, const std::string& key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_string()) throw ReportError(where + "." + key + ": expected a string");
  return v.get<std::string>();
}

// The fields of a report that the merge and --resume read, checked.
struct ShardReport {
  std::string path;
  std::string version, commit, backend;
  json kernel;
  uint64_t base_seed = 0;
  int index = 0, count = 1;
  std::vector<std::string> properties;
  std::map<std::string, StreamPoint> resumed, resume;
  int exit_code = 0;
  const json* report = nullptr;

  std::string shard() const { return fmt::format("{}/{}", index, count); }
  std::string name() const { return fmt::format("shard {} ({})", shard(), path); }
};

std::map<std::string, StreamPoint> points(const json& report, const std::string& key,
                                          const std::vector<std::string>& properties, const std::string& path) {
  const json& m = field(report, key, path);
  if (!m.is_object()) throw ReportError(path + "." + key + ": expected an object keyed by property");
  std::map<std::string, StreamPoint> out;
  for (const std::string& p : properties) out[p] = stream_point_from_json(field(m, p, path + "." + key), path + "." + key + "." + p);
  return out;
}

ShardReport read_shard(const json& r, const std::string& path) {
  if (!r.is_object() || !r.contains("format") || r.at("format") != kFuzzReportFormat)
    throw ReportError(path + ": not a pav fuzz report (expected \"format\": \"" + kFuzzReportFormat +
                      "\", as pav fuzz --report writes)");
  ShardReport s;
  s.path = path;
  s.report = &r;
  s.version = string_field(r, "pav_version", path);
  s.commit = string_field(r, "source_commit", path);
  s.backend = string_field(r, "backend", path);
  s.kernel = field(r, "kernel", path);
  s.base_seed = unsigned_field(r, "base_seed", path);
  const uint64_t index = unsigned_field(r, "shard_index", path), count = unsigned_field(r, "shard_count", path);
  if (count < 1 || count > (1u << 20) || index >= count)
    throw ReportError(path + ": shard " + std::to_string(index) + "/" + std::to_string(count) +
                      " is not a shard (expected I/N with 0 <= I < N)");
  s.index = int(index);
  s.count = int(count);
  const json& props = field(r, "properties", path);
  if (!props.is_array() || props.empty()) throw ReportError(path + ".properties: expected a list of property names");
  for (const json& p : props) {
    if (!p.is_string()) throw ReportError(path + ".properties: expected a list of property names");
    s.properties.push_back(p.get<std::string>());
  }
  s.resumed = points(r, "resumed", s.properties, path);
  s.resume = points(r, "resume", s.properties, path);
  const json& rc = field(r, "exit_code", path);
  if (!rc.is_number_integer()) throw ReportError(path + ".exit_code: expected an integer");
  s.exit_code = rc.get<int>();
  if (!field(r, "runs", path).is_array()) throw ReportError(path + ".runs: expected a list");
  return s;
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
  if (s.kernel != ref.kernel) refuse("kernel", s.kernel.dump(), ref.kernel.dump());
  if (s.backend != ref.backend) refuse("backend", s.backend, ref.backend);
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

const json* run_of(const json& report, const std::string& property) {
  for (const json& r : report.at("runs"))
    if (r.is_object() && r.value("property", std::string()) == property) return &r;
  return nullptr;
}

double number_or_zero(const json& j, const std::string& key) {
  return j.is_object() && j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : 0.0;
}

}  // namespace

ojson stream_point_json(const StreamPoint& p) {
  return ojson{{"next_case", p.next_case}, {"done_beyond", p.done_beyond}};
}

StreamPoint stream_point_from_json(const json& j, const std::string& where) {
  StreamPoint p;
  p.next_case = unsigned_field(j, "next_case", where);
  const json& beyond = field(j, "done_beyond", where);
  if (!beyond.is_array()) throw ReportError(where + ".done_beyond: expected a list of case indices");
  for (const json& k : beyond) {
    if (!non_negative_integer(k)) throw ReportError(where + ".done_beyond: expected a list of case indices");
    const uint64_t v = k.get<uint64_t>();
    if (v <= p.next_case || (!p.done_beyond.empty() && v <= p.done_beyond.back()))
      throw ReportError(where + ".done_beyond: expected ascending case indices above next_case " +
                        std::to_string(p.next_case));
    p.done_beyond.push_back(v);
  }
  return p;
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
  bool any_failure = false, any_cannot_run = false;
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
        const json* run = run_of(*s->report, p);
        if (!run) continue;
        shard_cases += run->value("cases", int64_t(0));
        shard_seconds += number_or_zero(*run, "seconds");
        cpu += number_or_zero(*run, "cpu_seconds");
        if (run->contains("failure") && run->at("failure").is_object()) {
          const json& f = run->at("failure");
          ++failed;
          const uint64_t seed = f.value("seed", uint64_t(0));
          const std::string id = f.contains("case_id") && f.at("case_id").is_string()
                                     ? f.at("case_id").get<std::string>()
                                     : fmt::format("{}-unreproduced-seed{}", p, seed);
          ojson who{{"shard", s->shard()}, {"report", s->path}, {"seed", seed}, {"saved", f.value("saved", json())}};
          auto it = std::find_if(failures.begin(), failures.end(),
                                 [&](const Seen& x) { return x.failure["case_id"] == id; });
          if (it == failures.end()) {
            ojson first{{"property", p},
                        {"case_id", id},
                        {"seed", seed},
                        {"shard", s->shard()},
                        {"message", f.value("message", std::string())},
                        {"shrunk_case", f.value("shrunk_case", std::string())},
                        {"reproduced", f.value("reproduced", true)},
                        {"saved", f.value("saved", json())},
                        {"report", s->path}};
            failures.push_back({first, ojson::array({who}), seed});
          } else {
            it->found_by.push_back(who);
            if (seed < it->seed) {
              it->seed = seed;
              it->failure["seed"] = seed;
              it->failure["shard"] = s->shard();
              it->failure["saved"] = f.value("saved", json());
              it->failure["report"] = s->path;
            }
          }
        }
      }
      cases += shard_cases;
      if (shard_seconds > 0) rate += double(shard_cases) / shard_seconds;
      const ShardReport* last = segs.back();
      // Seeds base + k*N + I for k < next_case all ran on shard I: in the
      // unsharded numbering, every index below next_case*N + I did, over all shards.
      prefix = std::min(prefix, last->resume.at(p).next_case * uint64_t(ref.count) + uint64_t(last->index));
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
  m["reports"] = ojson::array();
  for (const auto& segs : chains) {
    double shard_wall = 0;
    int segment = 0;
    for (const ShardReport* s : segs) {
      const double wall = number_or_zero(*s->report, "wall_seconds");
      shard_wall += wall;
      if (s->exit_code == 1) any_failure = true;
      if (s->exit_code == 3) any_cannot_run = true;
      m["reports"].push_back({{"shard", s->shard()},
                              {"segment", segment++},
                              {"report", s->path},
                              {"host", s->report->value("host", std::string())},
                              {"device", s->report->value("device", std::string())},
                              {"wall_seconds", wall},
                              {"cpu_seconds", number_or_zero(*s->report, "cpu_seconds")},
                              {"exit_code", s->exit_code}});
    }
    fleet_wall = std::max(fleet_wall, shard_wall);
  }
  std::sort(failures.begin(), failures.end(), [](const Seen& a, const Seen& b) { return a.seed < b.seed; });
  m["failures"] = ojson::array();
  for (Seen& f : failures) {
    f.failure["found_by"] = f.found_by;
    m["failures"].push_back(f.failure);
  }
  any_failure = any_failure || !failures.empty();
  m["wall_seconds"] = fleet_wall;
  m["cpu_seconds"] = fleet_cpu;
  out.exit_code = any_failure ? 1 : any_cannot_run ? 3 : 0;
  m["passed"] = out.exit_code == 0;
  m["exit_code"] = out.exit_code;
  return out;
}

}  // namespace pav::props::fuzz
