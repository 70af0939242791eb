// SPDX-License-Identifier: Apache-2.0
#include "properties/engine/fuzz_engine.hpp"

#include <fmt/core.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <new>
#include <set>
#include <system_error>
#include <thread>

#include <tbb/task_arena.h>

#include "common/durable_file.hpp"
#include "common/progress.hpp"
#include "properties/case/case_format.hpp"

namespace pav::props::fuzz {

using namespace pav::kernels;
using nlohmann::json;

uint64_t case_seed(uint64_t base, uint64_t k, int shard_index, int shard_count) {
  return base + k * uint64_t(shard_count) + uint64_t(shard_index);
}

uint64_t job_case_index(int job, int jobs, uint64_t m) { return uint64_t(job) + m * uint64_t(jobs); }

int case_size(uint64_t seed) { return int(seed % uint64_t(kMaxSize + 1)); }

uint64_t StreamPoint::fresh_case(uint64_t i) const {
  // Each index already run at or below the candidate pushes it one further.
  uint64_t k = next_case + i;
  for (uint64_t done : done_beyond) {
    if (done > k) break;
    ++k;
  }
  return k;
}

StreamPoint advance_stream(const StreamPoint& from, const std::vector<int64_t>& cases_per_job) {
  const uint64_t jobs = cases_per_job.size();
  // The first fresh index not run: each job ran a prefix of its own indices.
  uint64_t frontier = UINT64_MAX;
  for (uint64_t j = 0; j < jobs; ++j)
    frontier = std::min(frontier, j + uint64_t(cases_per_job[j]) * jobs);
  if (jobs == 0) frontier = 0;
  StreamPoint to;
  to.next_case = from.fresh_case(frontier);
  for (uint64_t done : from.done_beyond)
    if (done > to.next_case) to.done_beyond.push_back(done);
  for (uint64_t j = 0; j < jobs; ++j)
    for (uint64_t m = 0; m < uint64_t(cases_per_job[j]); ++m)
      if (const uint64_t i = j + m * jobs; i > frontier) to.done_beyond.push_back(from.fresh_case(i));
  std::sort(to.done_beyond.begin(), to.done_beyond.end());
  return to;
}

std::mutex& generation_mutex() {
  static std::mutex m;
  return m;
}

bool shrink_limit_reached(const ShrinkLimits& limits, int64_t tries, std::chrono::steady_clock::time_point t0) {
  return tries >= limits.max_tries ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limits.max_seconds ||
         (limits.should_stop && limits.should_stop());
}

namespace {

// CPU seconds the calling thread has used: cases per CPU-second is the
// per-core throughput however loaded the machine is.
double thread_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string shard_text(const FuzzOptions& o) { return fmt::format("{}/{}", o.shard_index, o.shard_count); }

// " --kernel 'SPEC'" for the commands a report suggests, when a kernel is under test.
std::string kernel_words(const FuzzOptions& o) {
  return o.ctx.kernel ? " " + adapters::kernel_option_text(*o.ctx.kernel) : std::string();
}

}  // namespace

std::string reproduce_command(const std::string& property, uint64_t seed, const FuzzOptions& opt) {
  std::string s = fmt::format("pav fuzz --property {} --seed {} --cases 1", property, seed);
  if (!opt.ctx.kernel) return s + (opt.ctx.backend == Backend::gpu ? " --backend gpu" : " --backend cpu");
  s += kernel_words(opt);
  if (opt.regions) s += " --regions";
  if (opt.shapes > 0) s += fmt::format(" --shapes {} --shape-seed {}", opt.shapes, opt.shape_seed);
  // A worker's or a Python kernel's per-call timeout decides whether a slow
  // call is a failure.
  const std::string adapter = opt.ctx.kernel->adapter();
  const bool worker = adapter == "exec" || adapter == "lib (isolated)" || adapter == "python";
  if (worker && opt.kernel_run.is_object() && opt.kernel_run.contains("timeout_seconds") &&
      opt.kernel_run.at("timeout_seconds").is_number())
    s += fmt::format(" --timeout {:g}", opt.kernel_run.at("timeout_seconds").get<double>());
  return s;
}
const PropertyRun* FuzzReport::first_failure() const {
  for (const PropertyRun& r : runs)
    if (r.failure) return &r;
  return nullptr;
}

namespace {

// The case (its prelude first) through a new instance of the kernel under
// test; a replay that throws is a failing verdict, opening it may throw (the
// caller says so).
Verdict from_fresh(const Property& prop, const CaseSpec& spec, const json& meta, const FuzzOptions& opt) {
  std::unique_ptr<adapters::KernelUnderTest> fresh = opt.fresh.open();
  CheckContext ctx = opt.ctx;
  ctx.kernel = fresh.get();
  try {
    return prop.replay(spec, meta, ctx);
  } catch (const pav::IoError&) {
    throw;
  } catch (const std::exception& e) {
    return Verdict::fail(std::string("the replay threw: ") + e.what());
  }
}

}  // namespace

// Sets f.reproduction: the shrunk case run once more through
// a fresh instance of the kernel under test, when one can be made. pav's own
// IoError (its side of a call) ends the run as everywhere else.
void see_again(const Property& prop, Found& f, const FuzzOptions& opt) {
  if (!opt.ctx.kernel) return;  // pav's own kernels: "regenerated", Found's default
  f.reproduction = "same-instance";
  if (!opt.fresh.open) {
    f.reproduction_note = opt.fresh.unavailable;
    return;
  }
  Verdict v;
  const CutShort cut;
  try {
    v = from_fresh(prop, f.spec, f.meta, opt);
  } catch (const pav::IoError&) {
    throw;
  } catch (const std::exception& e) {
    f.reproduction_note = std::string("a fresh instance could not be opened: ") + e.what();
    return;
  }
  if (cut.since()) {  // a stop cut the fresh instance's call short: it says nothing
    f.reproduction_note = "a stop (a signal) cut the fresh instance's run of the case short";
    return;
  }
  if (v.passed) {
    f.reproduction = "state-dependent";
    f.reproduction_note = "a fresh instance of the kernel passes the shrunk case: the failure needs state that "
                          "earlier calls left in the run's instance (stale scratch, a cache); the saved case alone "
                          "does not show it";
  } else {
    f.reproduction = "fresh";
    f.reproduction_note = v.message;
  }
}

// A case the run drew: a call through the kernel instance the jobs share.
struct Step {
  uint64_t seed = 0;
  int size = 0;
};

// A state-dependent failure (a fresh instance passes its shrunk case): looks
// for the earlier calls it needs among `before` (the run's calls before the
// one that failed, oldest first), each sequence replayed from a fresh
// instance; on success f becomes that sequence (reproduction "sequence"),
// else f's note says what was tried.
void find_sequence(const Property& prop, Found& f, const std::vector<Step>& before, const Step& found_at,
                   const FuzzOptions& opt, ShrinkLimits limits) {
  // Every try starts a fresh instance (a worker process): the search has its
  // own, smaller budget within the shrink limits.
  limits.max_tries = std::min<int64_t>(limits.max_tries, kSequenceTries);
  limits.max_seconds = std::min(limits.max_seconds, kSequenceSeconds);
  const auto t0 = std::chrono::steady_clock::now();
  f.sequence_history = int64_t(before.size());
  if ((before.empty() && f.shrink_before.empty()) || !opt.fresh.open) {
    f.reproduction_note += opt.fresh.open ? "; no earlier call of this run to search for a sequence"
                                          : "; no fresh instance to search for a sequence in";
    return;
  }
  std::vector<PriorCall> calls;
  for (const Step& st : before) calls.push_back(prop.call_of_seed(st.seed, st.size));
  const PriorCall shrunk{f.spec, f.meta};
  const PriorCall as_found = prop.call_of_seed(found_at.seed, found_at.size);

  int64_t tries = 0;
  auto record_effort = [&] {
    f.sequence_tries = tries;
    f.sequence_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  bool budget_spent = false;
  std::string open_error;
  Verdict failed_as;  // the verdict of the sequence kept last
  // True when `last` after `prelude` fails from a fresh instance.
  auto fails = [&](const PriorCall& last, const std::vector<PriorCall>& prelude) {
    if (budget_spent || !open_error.empty() || shrink_limit_reached(limits, tries, t0)) {
      budget_spent = open_error.empty();
      return false;
    }
    ++tries;
    CaseSpec s = last.spec;
    s.prelude = prelude;
    Verdict v;
    const CutShort cut;
    try {
      v = from_fresh(prop, s, last.meta, opt);
    } catch (const pav::IoError&) {
      throw;
    } catch (const std::exception& e) {
      open_error = e.what();
      return false;
    }
    if (!v.passed && cut.since()) {  // a call the stop cut short: no verdict
      budget_spent = true;
      return false;
    }
    const bool failed = !v.passed;
    if (failed) failed_as = std::move(v);
    return failed;
  };

  // The shortest run of calls right before it that makes it fail: 1, 2, 4,
  // ... of them. Tried for the shrunk case after the calls its last failing
  // check came after (shrink candidates), then after the run's calls, then
  // the case as found after the run's calls.
  std::optional<PriorCall> last;
  std::vector<PriorCall> prelude;
  const std::pair<const PriorCall*, const std::vector<PriorCall>*> searches[] = {
      {&shrunk, &f.shrink_before}, {&shrunk, &calls}, {&as_found, &calls}};
  for (const auto& [candidate, pool] : searches) {
    for (size_t n = 1; n <= pool->size(); n = n == pool->size() ? n + 1 : std::min(2 * n, pool->size())) {
      std::vector<PriorCall> tail(pool->end() - std::ptrdiff_t(n), pool->end());
      if (fails(*candidate, tail)) {
        last = *candidate;
        prelude = std::move(tail);
        break;
      }
      if (budget_spent || !open_error.empty()) break;
    }
    if (last || budget_spent || !open_error.empty()) break;
  }
  if (!last) {
    record_effort();
    f.reproduction_note +=
        !open_error.empty() ? "; a fresh instance could not be opened to search for a sequence: " + open_error
        : budget_spent      ? fmt::format("; the search for a sequence ended at its limit after {} tries", tries)
                            : fmt::format("; nor did the {} earlier call(s) of the run and the {} of its shrinking "
                                          "before it, replayed from a fresh instance ({} sequences tried): the state "
                                          "it needs is not in the calls kept",
                                          calls.size(), f.shrink_before.size(), tries);
    return;
  }
  // Fewest earlier calls: drop halves, quarters, ... one at a time, keeping a
  // sequence that still fails.
  for (size_t chunk = prelude.size() / 2; chunk >= 1; chunk /= 2) {
    for (size_t i = 0; i + chunk <= prelude.size();) {
      std::vector<PriorCall> fewer(prelude.begin(), prelude.begin() + std::ptrdiff_t(i));
      fewer.insert(fewer.end(), prelude.begin() + std::ptrdiff_t(i + chunk), prelude.end());
      if (!fewer.empty() && fails(*last, fewer))
        prelude = std::move(fewer);
      else
        i += chunk;
    }
  }
  // Each call simplified (the property's own simplifications): the failing
  // call first (the one a reader studies), then the earlier ones.
  for (size_t k = 0; k <= prelude.size(); ++k) {
    const size_t i = k == 0 ? prelude.size() : k - 1;
    PriorCall& call = i < prelude.size() ? prelude[i] : *last;
    for (bool progressed = true; progressed;) {
      progressed = false;
      for (PriorCall& simpler : prop.simplify_call(call)) {
        std::vector<PriorCall> p = prelude;
        const bool is_last = i == prelude.size();
        if (!is_last) p[i] = simpler;
        if (fails(is_last ? simpler : *last, p)) {
          call = std::move(simpler);
          progressed = true;
          break;
        }
      }
    }
  }
  record_effort();
  f.spec = last->spec;
  f.spec.prelude = prelude;
  f.meta = last->meta;
  f.message = failed_as.message;
  if (prop.describe_call) f.description = prop.describe_call(*last);
  f.description += fmt::format(", after {} earlier call(s)", prelude.size());
  f.reproduction = "sequence";
  f.reproduction_note = fmt::format(
      "failed again in a fresh instance of the kernel after {} earlier call(s), saved as the case's prelude (found "
      "among the {} call(s) of the run and the {} of its shrinking before it, {} sequences tried in {:.1f} s{}): {}",
      prelude.size(), calls.size(), f.shrink_before.size(), tries, f.sequence_seconds, budget_spent ? "; stopped at the search's limit, not at a local minimum" : "",
      failed_as.message);
}

std::string save_found(const std::string& dir, const Found& f, const FuzzOptions& opt) {
  json meta = f.meta;
  meta["size"] = f.size;
  meta["shard"] = shard_text(opt);
  meta["base_seed"] = opt.seed;
  meta["backend"] = opt.ctx.backend == Backend::gpu ? "gpu" : "cpu";
  // A property that drew its kernel per case recorded it already (meta.kernel).
  if (opt.ctx.kernel && !meta.contains("kernel")) {
    json kernel = adapters::identity_json(*opt.ctx.kernel);
    if (opt.kernel_run.is_object())
      for (const auto& [key, value] : opt.kernel_run.items()) kernel[key] = value;
    meta["kernel"] = std::move(kernel);
  }
  meta["message"] = f.message;
  meta["first_message"] = f.first_message;
  if (!f.region.empty()) meta["region"] = f.region;
  meta["shrink"] = {{"steps", f.shrink_steps},
                    {"simplify_steps", f.simplify_steps},
                    {"tries", f.shrink_tries},
                    {"hit_limit", f.shrink_hit_limit}};
  if (f.sequence_history > 0)
    meta["sequence"] = {{"earlier_calls", f.spec.prelude.size()},
                        {"searched_calls", f.sequence_history},
                        {"tries", f.sequence_tries},
                        {"seconds", f.sequence_seconds}};
  meta["reproduced"] = f.reproduced();
  meta["reproduction"] = f.reproduction;
  meta["reproduction_note"] = f.reproduction_note;
  meta["reproduce"] = reproduce_command(f.property, f.seed, opt);
  meta["description"] = f.description;
  return save_counterexample(dir, f.property, f.seed, f.spec, meta);
}

FuzzReport run_fuzz(const FuzzOptions& opt, const std::vector<const Property*>& props, std::FILE* out,
                    std::FILE* progress_out) {
  using Clock = std::chrono::steady_clock;
  if (opt.jobs < 1) throw std::invalid_argument("jobs must be >= 1");
  if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count)
    throw std::invalid_argument("shard must be I/N with 0 <= I < N");
  if (opt.cases <= 0 && opt.minutes <= 0) throw std::invalid_argument("give a case budget or a time budget");
  if (!(opt.minutes >= 0) || !std::isfinite(opt.minutes)) throw std::invalid_argument("minutes must be finite");
  if (props.empty()) throw std::invalid_argument("no property selected");
  auto stop_asked = [&] { return opt.should_stop && opt.should_stop(); };

  FuzzReport report;
  const double seconds_each = opt.minutes > 0 ? opt.minutes * 60 / double(props.size()) : 0;
  const std::string backend = opt.ctx.kernel ? "kernel " + adapters::identity(*opt.ctx.kernel)
                                             : std::string("backend ") + (opt.ctx.backend == Backend::gpu ? "gpu" : "cpu");
  fmt::print(out, "{}: base seed {}, shard {}, {} job(s), {}, budget {}{}{}\n", opt.label, opt.seed,
             shard_text(opt), opt.jobs, backend, opt.cases > 0 ? fmt::format("{} cases per property", opt.cases) : "",
             opt.cases > 0 && opt.minutes > 0 ? " or " : "",
             opt.minutes > 0 ? fmt::format("{:g} min ({:.0f} s per property)", opt.minutes, seconds_each) : "");
  const uint64_t stride = uint64_t(opt.jobs) * uint64_t(opt.shard_count);
  for (int j = 0; j < opt.jobs; ++j)
    fmt::print(out, "  job {}: seeds {} + {}*m (m = 0, 1, ...): {}, {}, {}, ...\n", j,
               case_seed(opt.seed, job_case_index(j, opt.jobs, 0), opt.shard_index, opt.shard_count), stride,
               case_seed(opt.seed, job_case_index(j, opt.jobs, 0), opt.shard_index, opt.shard_count),
               case_seed(opt.seed, job_case_index(j, opt.jobs, 1), opt.shard_index, opt.shard_count),
               case_seed(opt.seed, job_case_index(j, opt.jobs, 2), opt.shard_index, opt.shard_count));
  std::fflush(out);

  pav::ProgressReporter progress(progress_out, opt.progress);
  std::mutex out_mu;
  for (const Property* prop : props) {
    if (stop_asked()) {
      report.interrupted = true;
      break;
    }
    if (prop->host_only && opt.ctx.backend == Backend::gpu)
      fmt::print(out, "{}: runs on the host (no device part)\n", prop->name);
    struct Hit {
      uint64_t k, seed;
      int size, job;
      std::string message;
      size_t calls_before = 0;  // cases started before this one (history's index of it)
    };
    // The cases in the order they were started, through the one kernel
    // instance the jobs share: a state-dependent failure's earlier calls.
    std::vector<Step> history;
    std::mutex history_mu;
    // Each job's cases per region, summed into the run's after the jobs.
    std::vector<std::map<std::string, int64_t>> job_regions(size_t(opt.jobs));
    // And the shapes each job's cases had, joined after the jobs.
    std::vector<std::set<std::string>> job_shapes(size_t(opt.jobs));
    // The lowest failing case index so far: a job stops once its next case is
    // past it, so every lower case still runs and the failure reported is the
    // first in case order whatever the number of jobs.
    std::atomic<uint64_t> first_failing_k{UINT64_MAX};
    std::atomic<int64_t> done{0};
    std::atomic<int> failures{0};
    std::atomic<int> running{opt.jobs};
    std::atomic<bool> stopped_early{false};
    std::optional<Hit> hit;
    std::mutex hit_mu;
    PropertyRun run;
    run.property = prop->name;
    run.cases_per_job.assign(size_t(opt.jobs), 0);
    if (auto it = opt.resume.find(prop->name); it != opt.resume.end()) run.from = it->second;
    if (run.from.next_case > 0 || !run.from.done_beyond.empty())
      fmt::print(out, "{}: continuing the seed stream at case {} ({} later case(s) already run)\n", prop->name,
                 run.from.next_case, run.from.done_beyond.size());
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds_each));

    std::vector<double> cpu(size_t(opt.jobs), 0.0);
    // Set when a job could not start or could not go on (a thread or memory
    // refused): every job stops before its next case.
    std::atomic<bool> abandon{false};
    std::exception_ptr job_error;
    auto run_job = [&](int job) {
      for (uint64_t m = 0;; ++m) {
        if (abandon.load()) break;
        const uint64_t fresh = job_case_index(job, opt.jobs, m);
        if (opt.cases > 0 && fresh >= uint64_t(opt.cases)) break;
        const uint64_t k = run.from.fresh_case(fresh);
        if (k >= first_failing_k.load() || (seconds_each > 0 && Clock::now() >= deadline)) break;
        if (stop_asked()) {
          stopped_early = true;
          break;
        }
        const uint64_t seed = case_seed(opt.seed, k, opt.shard_index, opt.shard_count);
        const int size = case_size(seed);
        if (opt.verbose) {
          std::lock_guard<std::mutex> lock(out_mu);
          fmt::print(out, "{}: job {} case {} seed {} size {}\n", prop->name, job, k, seed, size);
        }
        size_t calls_before = 0;
        if (opt.ctx.kernel) {
          std::lock_guard<std::mutex> lock(history_mu);
          calls_before = history.size();
          history.push_back({seed, size});
        }
        const CutShort cut;
        const Verdict v = prop->check_seed(seed, size, opt.ctx);
        if (!v.passed && cut.since()) {  // a call the stop cut short is no verdict: the case is abandoned
          stopped_early = true;
          break;
        }
        if (!v.region.empty()) ++job_regions[size_t(job)][v.region];
        if (!v.shape.empty()) job_shapes[size_t(job)].insert(v.shape);
        ++done;
        ++run.cases_per_job[size_t(job)];
        if (!v.passed) {
          ++failures;
          std::lock_guard<std::mutex> lock(hit_mu);
          if (!hit || k < hit->k) hit = Hit{k, seed, size, job, v.message, calls_before};
          first_failing_k = hit->k;
          break;
        }
      }
    };
    auto worker = [&](int job) {
      const double cpu0 = thread_cpu_seconds();
      try {
        // One core per job: the CPU backend's parallel loops run on this thread
        // only, so --jobs N uses N cores and --jobs 1 measures one.
        tbb::task_arena one_core(1);
        one_core.execute([&] { run_job(job); });
      } catch (...) {
        // Nothing may leave a thread (std::terminate): the run is abandoned
        // and the error raised again on the caller's thread.
        std::lock_guard<std::mutex> lock(hit_mu);
        if (!job_error) job_error = std::current_exception();
        abandon = true;
      }
      cpu[size_t(job)] = thread_cpu_seconds() - cpu0;
      --running;
    };
    std::vector<std::thread> threads;
    std::string start_error;
    try {
      threads.reserve(size_t(opt.jobs));
      for (int j = 0; j < opt.jobs; ++j) threads.emplace_back(worker, j);
    } catch (const std::exception& e) {
      start_error = fmt::format("--jobs {}: could not start job {} of {} here: {}", opt.jobs, threads.size() + 1,
                                opt.jobs, e.what());
      abandon = true;
      running -= opt.jobs - int(threads.size());
    }
    if (!start_error.empty()) {
      for (auto& t : threads) t.join();
      progress.done();
      throw JobsUnavailable(start_error + " (a thread or its stack refused: a process, thread or address-space "
                                          "limit); run with fewer --jobs");
    }
    while (running.load() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const double el = std::chrono::duration<double>(Clock::now() - t0).count();
      progress.show(fmt::format("[{}] {}: {} cases, {:.1f} cases/s, {} failure(s), {:.0f} s{}", opt.label,
                                prop->name, done.load(), el > 0 ? double(done.load()) / el : 0.0, failures.load(), el,
                                seconds_each > 0 ? fmt::format(" of {:.0f} s", seconds_each) : ""));
    }
    for (auto& t : threads) t.join();
    progress.done();
    if (job_error) {
      try {
        std::rethrow_exception(job_error);
      } catch (const std::bad_alloc&) {
        throw JobsUnavailable(fmt::format("--jobs {}: a job ran out of memory (an address-space or memory limit); "
                                          "run with fewer --jobs",
                                          opt.jobs));
      } catch (const std::system_error& e) {
        throw JobsUnavailable(fmt::format("--jobs {}: a job could not go on here: {}; run with fewer --jobs",
                                          opt.jobs, e.what()));
      }
    }
    for (const auto& counts : job_regions)
      for (const auto& [name, n] : counts) run.regions[name] += n;
    std::set<std::string> shapes;
    for (const auto& s : job_shapes) shapes.insert(s.begin(), s.end());
    run.shapes = int64_t(shapes.size());
    run.cases = done.load();
    run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (double c : cpu) run.cpu_seconds += c;
    run.interrupted = stopped_early.load() && !hit;
    run.to = advance_stream(run.from, run.cases_per_job);
    fmt::print(out, "{}: {} cases in {:.1f} s: {:.1f} cases/s, {:.1f} cases per CPU-second (per core), {}\n",
               prop->name, run.cases, run.seconds, run.cases_per_second(), run.cases_per_cpu_second(),
               hit ? "FAILED" : run.interrupted ? "no failure before the stop" : "no failure");
    if (!run.regions.empty()) {
      std::string counts;
      for (const auto& [name, n] : run.regions) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", name, n);
      fmt::print(out, "  {} cases by region: {}\n", prop->name, counts);
    }
    if (run.shapes > 0)
      fmt::print(out, "  {} cases in {} distinct shape(s){}\n", prop->name, run.shapes,
                 opt.shapes > 0 ? fmt::format(" (--shapes {}, shape seed {})", opt.shapes, opt.shape_seed) : "");
    std::fflush(out);
    if (run.interrupted) report.interrupted = true;
    if (!hit) {
      report.runs.push_back(std::move(run));
      if (report.interrupted) break;
      continue;
    }

    fmt::print(out, "\nFAIL {}: seed {} (size {}), case {} of job {}, shard {}\n  failure: {}\n", prop->name,
               hit->seed, hit->size, hit->k, hit->job, shard_text(opt), hit->message);
    fmt::print(out, "  shrinking{}...\n", stop_asked() ? " skipped (stop asked): saving the case as found" : "");
    std::fflush(out);
    ShrinkLimits limits = opt.shrink;
    if (opt.should_stop) limits.should_stop = opt.should_stop;
    const auto s0 = Clock::now();
    std::optional<Found> found = prop->shrink_seed(hit->seed, hit->size, opt.ctx, limits);
    const double shrink_s = std::chrono::duration<double>(Clock::now() - s0).count();
    if (!found) {
      // Regenerated from its seed the case passed: a flaky failure (a race, an
      // uninitialised read). Report it; there is no case to save that would fail.
      Found f;
      f.property = prop->name;
      f.seed = hit->seed;
      f.size = hit->size;
      f.first_message = f.message = hit->message;
      f.reproduction = "flaky";
      f.reproduction_note = "the case passed when regenerated from its seed";
      fmt::print(out, "  the failure did not recur when the case was regenerated from its seed (flaky)\n");
      run.failure = std::move(f);
    } else {
      if (found->message.empty()) found->first_message = found->message = hit->message;  // the re-check was cut short
      found->shrink_stopped = found->shrink_hit_limit && stop_asked();
      fmt::print(out,
                 "  shrunk in {} steps of the shrink tree + {} simplifications ({} candidates, {:.1f} s){}\n"
                 "  shrunk case: {}\n  its failure: {}\n",
                 found->shrink_steps, found->simplify_steps, found->shrink_tries, shrink_s,
                 found->shrink_stopped     ? " - stopped when a stop was asked (a signal), not at a local minimum"
                 : found->shrink_hit_limit ? " - stopped at a shrink limit, not a local minimum"
                                           : "",
                 found->description, found->message);
      see_again(*prop, *found, opt);
      if (found->reproduction == "state-dependent") {
        const size_t from = hit->calls_before > size_t(kMaxPrelude) ? hit->calls_before - size_t(kMaxPrelude) : 0;
        const std::vector<Step> before(history.begin() + std::ptrdiff_t(from),
                                       history.begin() + std::ptrdiff_t(hit->calls_before));
        fmt::print(out,
                   "  searching the {} earlier call(s) of the run and the {} of its shrinking for a sequence that "
                   "fails from a fresh instance...\n",
                   before.size(), found->shrink_before.size());
        std::fflush(out);
        find_sequence(*prop, *found, before, Step{hit->seed, hit->size}, opt, limits);
      }
      // The label and why in a few words; the fresh instance's whole verdict is in the report.
      fmt::print(out, "  reproduction: {}{}\n", found->reproduction,
                 found->reproduction == "fresh"          ? ": it failed again in a new instance of the kernel"
                 : found->reproduction == "sequence"
                     ? fmt::format(": it failed again in a new instance of the kernel after the {} earlier call(s) "
                                   "saved with it ({} sequences tried in {:.1f} s)",
                                   found->spec.prelude.size(), found->sequence_tries, found->sequence_seconds)
                 : found->reproduction == "regenerated" ? ": pav's own kernels, built anew for every case"
                                                        : ": " + found->reproduction_note);
      try {
        run.saved_path = save_found(opt.save_dir, *found, opt);
        fmt::print(out, "  saved {}\n", run.saved_path);
      } catch (const std::exception& e) {
        run.save_error = e.what();
        fmt::print(out, "  NOT SAVED: {}\n", run.save_error);
      }
      run.failure = std::move(found);
    }
    run.failure->reproduce = reproduce_command(prop->name, hit->seed, opt);
    fmt::print(out, "  reproduce: {}\n", run.failure->reproduce);
    if (!run.saved_path.empty())
      fmt::print(out, "  replay:    pav fuzz --replay {}{}{}\n", run.saved_path, kernel_words(opt),
                 prop->name == "decode" ? fmt::format("   (or pav replay {})", run.saved_path) : "");
    std::fflush(out);
    report.runs.push_back(std::move(run));
    if (!opt.keep_going || stop_asked()) {
      report.interrupted = report.interrupted || stop_asked();
      break;
    }
  }
  return report;
}

}  // namespace pav::props::fuzz
