// SPDX-License-Identifier: Apache-2.0
// session::fuzz: long property runs that find, shrink and save, over a seed
// stream that a later run can resume and shards can split.
#include <fmt/core.h>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <random>

#include "common/durable_file.hpp"
#include "input/json_input.hpp"
#include "adapters/gpu_registration.hpp"
#include "properties/engine/fuzz_report.hpp"
#include "properties/checks/builtin_properties.hpp"
#include "properties/session/support.hpp"

namespace pav::session {

namespace {

namespace fz = pav::props::fuzz;
using ojson = nlohmann::ordered_json;

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// The earlier run's report, read and checked (bad input names the file).
// Through the shared bounded reader: not a regular file, past the size limit,
// nested past kMaxJsonDepth or not JSON is refused by name.
fz::ResumeSource read_resume(const std::string& path) {
  nlohmann::json j;
  try {
    j = input::read_json_file(path);
  } catch (const input::InputError& e) {
    throw BadInput(std::string("--resume ") + e.what());
  }
  try {
    return fz::read_resume_source(j, path);
  } catch (const fz::ReportError& e) {
    throw BadInput(std::string("--resume ") + e.what());
  }
}

Report list_properties(const Io& io, const std::vector<fz::Property>& available) {
  Report rep;
  rep.verdict = "listed";
  rep.json = report_header("fuzz");
  rep.json["properties"] = ojson::array();
  for (const auto& p : available) {
    if (io.out) fmt::print(io.out, "{:<18} {}\n", p.name, p.summary);
    rep.json["properties"].push_back({{"name", p.name}, {"summary", p.summary}, {"host_only", p.host_only}});
  }
  return rep;
}

void check_budgets(const FuzzOptions& o) {
  if (o.cases < 0) throw BadInput(fmt::format("--cases: expected at least 1, got {}", o.cases));
  if (!(o.minutes >= 0) || o.minutes > 7 * 24 * 60)
    throw BadInput(fmt::format("--minutes: expected a time budget above 0 and at most a week, got {}", o.minutes));
  if (o.cases == 0 && o.minutes == 0) throw BadInput("fuzz: give a case budget or a time budget");
  if (o.jobs < 1 || o.jobs > kMaxJobs) throw BadInput(fmt::format("--jobs: expected 1..{}, got {}", kMaxJobs, o.jobs));
  if (o.shard && (o.shard->count < 1 || o.shard->index < 0 || o.shard->index >= o.shard->count))
    throw BadInput(fmt::format("--shard: expected I/N with 0 <= I < N, got {}/{}", o.shard->index, o.shard->count));
}

}  // namespace

Report fuzz(const FuzzOptions& o, const Io& io) {
  check_budgets(o);
  const auto wall0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  const std::string started_at = utc_now();
  const std::string& report_path = o.report_path;
  const std::string& resume_path = o.resume_path;
  if (!report_path.empty() && !resume_path.empty() &&
      std::filesystem::weakly_canonical(report_path) == std::filesystem::weakly_canonical(resume_path))
    throw BadInput("--report " + report_path +
                   ": the same file as --resume would replace the earlier run's report, whose cases a merge "
                   "needs; name a new file");
  if (!report_path.empty()) pav::check_writable_file(report_path, "--report " + report_path);
  if (o.kernel.specs.size() > 1) throw BadInput("--kernel: fuzz runs one kernel");

  // With a kernel, the properties are the kernel's, generated within its description;
  // without, pav's planner and gate properties and its own kernels' (the same kernel properties).
  std::unique_ptr<adapters::KernelUnderTest> kernel;
  if (!o.kernel.specs.empty()) kernel = open_kernel(o.kernel.specs.front(), o.kernel);
  if (o.regions && !kernel)
    throw BadInput("--regions: the decode regions draw calls for a kernel under test (--kernel); pav's own kernels "
                   "draw their settings per case");
  if (o.shapes < 0 || o.shapes > kMaxShapes)
    throw BadInput(fmt::format("--shapes: expected 0..{} (0: each call its own shape), got {}", kMaxShapes, o.shapes));
  if (o.shapes > 0 && !kernel)
    throw BadInput("--shapes: shapes draw the calls of a kernel under test (--kernel); pav's own kernels draw their "
                   "settings per case");
  if (o.shape_seed && o.shapes == 0) throw BadInput("--shape-seed: only with --shapes N (N > 0)");
  // The shapes' seed is the base seed's unless given, known once the seed is
  // (below): until then the properties are drawn without shapes (their names
  // are the same), and they are built again in the shapes once it is.
  fz::DecodeDraw draw{o.regions, 0, 0};
  auto kernel_props = [&] { return kernel ? fz::kernel_properties(*kernel, draw) : fz::properties(); };
  std::vector<fz::Property> available = kernel_props();
  if (o.list) return list_properties(io, available);
  const kernels::Backend backend = pick_backend(o.backend);

  fz::FuzzOptions e;
  if (o.shard) {
    e.shard_index = o.shard->index;
    e.shard_count = o.shard->count;
  }
  std::vector<std::string> names = o.properties;
  uint64_t seed = o.seed.value_or(0);
  std::optional<fz::ResumeSource> resume;
  if (!resume_path.empty()) {
    // The earlier run fixes the campaign: base seed, shard, properties, kernel.
    resume = read_resume(resume_path);
    const std::string what = "--resume " + resume_path + ": the report is of ";
    const std::string its_shard = fmt::format("{}/{}", resume->shard_index, resume->shard_count);
    if (o.seed && *o.seed != resume->base_seed)
      throw BadInput(what + "base seed " + std::to_string(resume->base_seed) + ", not " + std::to_string(*o.seed));
    if (o.shard && (o.shard->index != resume->shard_index || o.shard->count != resume->shard_count))
      throw BadInput(what + "shard " + its_shard + ", not " + fmt::format("{}/{}", o.shard->index, o.shard->count));
    const nlohmann::json this_kernel = kernel ? nlohmann::json(adapters::identity_json(*kernel)) : nlohmann::json();
    if (resume->kernel != this_kernel)
      throw BadInput(what + "kernel " + input::excerpt(resume->kernel) + ", this run tests " +
                     input::excerpt(this_kernel));
    if (resume->backend != backend_name(backend))
      throw BadInput(what + "backend " + resume->backend + ", this run uses " + backend_name(backend));
    if (resume->regions != o.regions)
      throw BadInput(what + "a run with the decode regions " + (resume->regions ? "on" : "off") +
                     ": give --regions the same way (the cases of a seed differ)");
    if (resume->shapes != o.shapes || (o.shape_seed && resume->shapes > 0 && *o.shape_seed != resume->shape_seed))
      throw BadInput(what + (resume->shapes > 0 ? fmt::format("a run in {} shapes from shape seed {}", resume->shapes,
                                                              resume->shape_seed)
                                                : std::string("a run with each call its own shape")) +
                     ": give --shapes (and --shape-seed) the same way (the cases of a seed differ)");
    if (names.empty()) names = resume->properties;
    seed = resume->base_seed;
    e.shard_index = resume->shard_index;
    e.shard_count = resume->shard_count;
    e.resume = resume->points;
  }
  std::vector<const fz::Property*> selected = select_properties(names, available);
  if (resume) {
    std::vector<std::string> chosen;
    for (const auto* p : selected) chosen.push_back(p->name);
    if (chosen != resume->properties)
      throw BadInput("--resume " + resume_path + ": the report ran other properties than --property names");
  }
  check_save_dir(o.save_dir);
  if (!o.seed && !resume) seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  e.seed = seed;
  if (o.shapes > 0) {
    draw.shapes = o.shapes;
    draw.shape_seed = resume ? resume->shape_seed : o.shape_seed.value_or(seed);
    available = kernel_props();
    selected = select_properties(names, available);
  }
  e.shapes = draw.shapes;
  e.shape_seed = draw.shape_seed;
  e.cases = o.cases;
  e.minutes = o.minutes;
  e.jobs = o.jobs;
  e.ctx.backend = backend;
  e.ctx.kernel = kernel.get();
  if (kernel) {
    e.kernel_run = kernel_run_record(o.kernel);
    e.fresh = fresh_kernel(*kernel, o.kernel);
  }
  e.save_dir = o.save_dir;
  if (o.shrink_tries >= 0) e.shrink.max_tries = o.shrink_tries;
  if (o.shrink_seconds >= 0) e.shrink.max_seconds = o.shrink_seconds;
  e.keep_going = o.keep_going;
  e.regions = o.regions;
  e.progress = io.show_progress;
  e.verbose = o.verbose;
  e.should_stop = stop_test(io);

  std::FILE* log = io.log;
  if (kernel) print_shapes(log, fz::decode_shapes(kernel->description(), draw), draw, true);
  fz::FuzzReport r;
  try {
    r = fz::run_fuzz(e, selected, log, io.progress);
  } catch (const fz::JobsUnavailable& ex) {
    throw CannotRun(ex.what());
  }
  Report rep;
  rep.exit_code = fuzz_exit_code(r);
  rep.interrupted = r.interrupted;
  const fz::PropertyRun* failed = r.first_failure();
  int64_t total = 0;
  for (const auto& run : r.runs) total += run.cases;
  rep.verdict = failed ? "FAIL" : r.interrupted ? "STOPPED (not a pass)" : rep.exit_code ? "ERROR" : "PASS";
  if (log) {
    if (r.interrupted)
      fmt::print(log, "\npav fuzz: stopped by {} after {} case(s) in {} of {} properties\n", stop_name(io), total,
                 r.runs.size(), selected.size());
    if (failed)
      fmt::print(log, "\npav fuzz: FAIL {} (seed {}){}\n", failed->property, failed->failure->seed,
                 !failed->saved_path.empty() ? "; counterexample " + failed->saved_path
                 : failed->save_error.empty() ? std::string()
                                              : "; counterexample NOT SAVED: " + failed->save_error);
    else if (!r.interrupted)
      fmt::print(log, "\npav fuzz: PASS (seed {}, shard {}/{}, {} cases)\n", e.seed, e.shard_index, e.shard_count,
                 total);
    else
      fmt::print(log, "pav fuzz: no failure in what ran (not a pass: the budget was not spent)\n");
  }

  ojson& j = rep.json;
  j = report_header("fuzz");
  j["format"] = fz::kFuzzReportFormat;
  j["base_seed"] = e.seed;
  j["shard"] = fmt::format("{}/{}", e.shard_index, e.shard_count);
  j["shard_index"] = e.shard_index;
  j["shard_count"] = e.shard_count;
  j["seed_rule"] = "case k of shard I/N has seed base_seed + k*N + I";
  j["jobs"] = e.jobs;
  j["backend"] = backend_name(backend);
  j["device"] = adapters::device_description(backend);
  j["host"] = host_name();
  j["kernel"] = kernel ? ojson(adapters::identity_json(*kernel)) : ojson(nullptr);
  j["regions"] = o.regions;
  j["shapes"] = e.shapes;
  j["shape_seed"] = e.shapes > 0 ? ojson(e.shape_seed) : ojson(nullptr);
  j["properties"] = ojson::array();
  for (const auto* p : selected) j["properties"].push_back(p->name);
  j["budget"] = {{"cases_per_property", e.cases > 0 ? ojson(e.cases) : ojson(nullptr)},
                 {"minutes", e.minutes > 0 ? ojson(e.minutes) : ojson(nullptr)},
                 {"shrink_seconds", e.shrink.max_seconds},
                 {"shrink_tries", e.shrink.max_tries}};
  j["save_dir"] = e.save_dir;
  j["started_at"] = started_at;
  j["wall_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  j["cpu_seconds"] = process_cpu_seconds() - cpu0;
  j["passed"] = rep.exit_code == kExitOk;
  j["exit_code"] = rep.exit_code;
  j["interrupted"] = r.interrupted;
  if (r.interrupted) j["signal"] = stop_name(io);
  j["runs"] = ojson::array();
  for (const auto& run : r.runs) j["runs"].push_back(property_run_json(run));
  // Where each property's stream stands before and after: --resume reads
  // "resume"; a property the run did not reach stays where it was.
  j["resumed_from"] = resume_path.empty() ? ojson(nullptr) : ojson(resume_path);
  j["resumed"] = ojson::object();
  j["resume"] = ojson::object();
  for (const auto* p : selected) {
    fz::StreamPoint from, to;
    if (auto it = e.resume.find(p->name); it != e.resume.end()) from = to = it->second;
    for (const auto& run : r.runs)
      if (run.property == p->name) to = run.to;
    j["resumed"][p->name] = fz::stream_point_json(from);
    j["resume"][p->name] = fz::stream_point_json(to);
  }
  if (!report_path.empty()) {
    try {
      pav::write_file_atomically(report_path, j.dump(2) + "\n");
      if (log) fmt::print(log, "pav fuzz: report {}\n", report_path);
    } catch (const pav::IoError& ex) {
      if (io.err) fmt::print(io.err, "pav fuzz: {}\n", ex.what());
      // The verdict stands; a lost report on a pass is "could not run".
      if (rep.exit_code == kExitOk) rep.exit_code = kExitCannotRun;
    }
  }
  return rep;
}

}  // namespace pav::session
