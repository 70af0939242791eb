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
  // A worker's per-call timeout decides whether a slow call is a failure.
  const std::string adapter = opt.ctx.kernel->adapter();
  const bool worker = adapter == "exec" || adapter == "lib (isolated)";
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
  std::unique_ptr<adapters::KernelUnderTest> fresh;
  try {
    fresh = opt.fresh.open();
  } catch (const pav::IoError&) {
    throw;
  } catch (const std::exception& e) {
    f.reproduction_note = std::string("a fresh instance could not be opened: ") + e.what();
    return;
  }
  CheckContext ctx = opt.ctx;
  ctx.kernel = fresh.get();
  Verdict v;
  try {
    v = prop.replay(f.spec, f.meta, ctx);
  } catch (const pav::IoError&) {
    throw;
  } catch (const std::exception& e) {
    v = Verdict::fail(std::string("the replay threw: ") + e.what());
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
  meta["shrink"] = {{"steps", f.shrink_steps},
                    {"simplify_steps", f.simplify_steps},
                    {"tries", f.shrink_tries},
                    {"hit_limit", f.shrink_hit_limit}};
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
    };
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
        const Verdict v = prop->check_seed(seed, size, opt.ctx);
        ++done;
        ++run.cases_per_job[size_t(job)];
        if (!v.passed) {
          ++failures;
          std::lock_guard<std::mutex> lock(hit_mu);
          if (!hit || k < hit->k) hit = Hit{k, seed, size, job, v.message};
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
    run.cases = done.load();
    run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (double c : cpu) run.cpu_seconds += c;
    run.interrupted = stopped_early.load() && !hit;
    run.to = advance_stream(run.from, run.cases_per_job);
    fmt::print(out, "{}: {} cases in {:.1f} s: {:.1f} cases/s, {:.1f} cases per CPU-second (per core), {}\n",
               prop->name, run.cases, run.seconds, run.cases_per_second(), run.cases_per_cpu_second(),
               hit ? "FAILED" : run.interrupted ? "no failure before the stop" : "no failure");
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
      // The label and why in a few words; the fresh instance's whole verdict is in the report.
      fmt::print(out, "  reproduction: {}{}\n", found->reproduction,
                 found->reproduction == "fresh"          ? ": it failed again in a new instance of the kernel"
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
