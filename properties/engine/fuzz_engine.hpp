// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fuzz engine: every property run of pav (session::verify's checks,
// session::fuzz) goes through run_fuzz, so all of them find, shrink, name and
// save cases the same way. A property hands the engine its generator and its
// check as values (builtin_properties.hpp: pav's planner, gate and kernels;
// kernel_properties.hpp: any kernel under test); the engine knows no generator.
//
// How it works:
//   run     Case k of shard I of N has seed base + k*N + I; job j of J runs
//           k = j, j+J, j+2J, ..., so jobs and shards never run the same seed.
//           The generator size is a function of the seed (case_size), so one
//           seed alone reproduces a case. The run stops at the first failure,
//           at the case or time budget, or when asked to stop; under a case
//           budget the failure reported is the one of the lowest case index,
//           whatever the number of jobs.
//   shrink  The failing value is regenerated from its seed (a failure that
//           does not recur is reported as not reproduced, never shrunk), then
//           simplified by walking RapidCheck's shrink tree and the property's
//           own simpler values, keeping each candidate that still fails, within
//           ShrinkLimits (tries, seconds, a stop).
//   save    The minimal value is saved as a case file (pav-case/1, the
//           property and how to open its kernel in "meta"), named by a hash
//           of its content (counterexample.hpp), written durably; replay
//           (checks/replay.hpp) re-runs it through the same property.
//   resume  A run's report records where each property's seed stream
//           stopped (fuzz_report.hpp); a later run given that report continues
//           from there instead of repeating seeds, and shards' reports merge
//           into one result.
#include <rapidcheck.h>

#include "common/durable_file.hpp"

#include <chrono>
#include <deque>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "adapters/kernel.hpp"
#include "kernels/launch.hpp"
#include "properties/case/case_format.hpp"
#include "properties/engine/counterexample.hpp"
#include "properties/case/host_case.hpp"

namespace pav::props::fuzz {

inline constexpr int kMaxSize = 100;  // RapidCheck's default max size

// Seed of case k in shard `shard_index` of `shard_count`.
uint64_t case_seed(uint64_t base, uint64_t k, int shard_index, int shard_count);
// The case index of job `job` of `jobs` at its m-th case.
uint64_t job_case_index(int job, int jobs, uint64_t m);
// Generator size for a seed: 0..kMaxSize, cycling with the seed.
int case_size(uint64_t seed);

struct Verdict {
  bool passed = true;
  std::string message;  // why it failed
  std::string region;   // where the value was drawn (PropertyParts::region), "" when not named
  std::string shape;    // the call's shape (PropertyParts::shape), "" when not named
  static Verdict pass() { return {}; }
  static Verdict fail(std::string why) {
    Verdict v;
    v.passed = false;
    v.message = std::move(why);
    return v;
  }
};

struct CheckContext {
  kernels::Backend backend = kernels::Backend::cpu;
  // A kernel under test (--kernel): the kernel properties run against it.
  // Without one, pav's kernels run on `backend` (their settings drawn per case).
  adapters::KernelUnderTest* kernel = nullptr;
};

struct ShrinkLimits {
  int64_t max_tries = 20000;   // property evaluations while shrinking
  double max_seconds = 600;    // wall clock spent shrinking
  std::function<bool()> should_stop = nullptr;  // true: stop now (a clean stop was asked)
};

// True when shrinking must stop before the next candidate.
bool shrink_limit_reached(const ShrinkLimits& limits, int64_t tries, std::chrono::steady_clock::time_point t0);
// Whether this thread cut a call short for a stop (a worker killed, an
// in-process call interrupted) since it was made: a verdict over such a call
// is never taken as the kernel's. A failure seen when a stop arrives, of a
// call that ran to its end, still counts.
class CutShort {
 public:
  bool since() const { return adapters::calls_cut_short_on_this_thread() != at_; }

 private:
  int64_t at_ = adapters::calls_cut_short_on_this_thread();
};

template <class T>
struct Shrunk {
  T value;
  Verdict verdict;        // of `value`
  int64_t steps = 0;      // accepted shrinks from the RapidCheck tree
  int64_t simplify_steps = 0;  // accepted simplifications (simplify_failing)
  int64_t tries = 0;      // evaluated candidates
  bool hit_limit = false; // stopped by ShrinkLimits, not at a local minimum
};

// Runs a check, turning any exception into a failure naming it, except
// pav::IoError: pav's own I/O failing (writing a worker's inputs into a full
// --exchange-dir) says nothing about the code under test, so it is thrown on
// and the run ends with exit 3, no verdict and no case saved.
template <class T>
Verdict guarded(const std::function<Verdict(const T&)>& check, const T& v) {
  try {
    return check(v);
  } catch (const pav::IoError&) {
    throw;  // pav's own I/O failed (a full --exchange-dir): no verdict, exit 3
  } catch (const std::exception& e) {
    return Verdict::fail(std::string("exception: ") + e.what());
  } catch (...) {
    return Verdict::fail("unknown exception");
  }
}

// A value's verdict while shrinking, or nothing when a stop cut one of its
// calls short (a verdict over such a call is never taken as the kernel's).
template <class T>
std::optional<Verdict> shrink_verdict(const std::function<Verdict(const T&)>& check, const T& v) {
  const CutShort cut;
  Verdict verdict = guarded(check, v);
  if (!verdict.passed && cut.since()) return std::nullopt;
  return verdict;
}

// Greedy shrinking: from a failing shrinkable, take the first child that still
// fails and repeat until no child fails (a local minimum) or a limit is hit.
// Children whose generation throws are skipped, as RapidCheck does.
template <class T>
Shrunk<T> shrink_failing(const rc::Shrinkable<T>& root, const Verdict& root_verdict,
                         const std::function<Verdict(const T&)>& check, const ShrinkLimits& limits = {}) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  rc::Shrinkable<T> current = root;
  Shrunk<T> out{root.value(), root_verdict};
  for (bool progressed = true; progressed;) {
    progressed = false;
    auto children = current.shrinks();
    while (auto child = children.next()) {
      if (shrink_limit_reached(limits, out.tries, t0)) {
        out.hit_limit = true;
        return out;
      }
      std::optional<T> v;
      try {
        v.emplace(child->value());
      } catch (...) {
        continue;
      }
      ++out.tries;
      std::optional<Verdict> verdict = shrink_verdict(check, *v);
      if (!verdict) {  // a call the stop cut short: no verdict
        out.hit_limit = true;
        return out;
      }
      if (!verdict->passed) {
        current = *child;
        out.value = std::move(*v);
        out.verdict = std::move(*verdict);
        ++out.steps;
        progressed = true;
        break;
      }
    }
  }
  return out;
}

// RapidCheck keeps its generation context in process-wide statics (not
// thread-local), so jobs draw values one at a time under this lock and run the
// checks, where the time goes, in parallel.
std::mutex& generation_mutex();

// Second pass after the RapidCheck walk: a property's own simplifications of a
// value (fewer sequences, shorter lengths, smaller shapes), which reach what the
// generators' shrink trees cannot (a boundary length picked from a list does
// not shrink there). Greedy too: the first candidate that still fails is taken.
// Every candidate must be smaller in some well-founded order, so this ends.
template <class T>
void simplify_failing(Shrunk<T>& s, const std::function<Verdict(const T&)>& check,
                      const std::function<std::vector<T>(const T&)>& simplify, const ShrinkLimits& limits,
                      std::chrono::steady_clock::time_point t0) {
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (T& candidate : simplify(s.value)) {
      if (shrink_limit_reached(limits, s.tries, t0)) {
        s.hit_limit = true;
        return;
      }
      ++s.tries;
      std::optional<Verdict> verdict = shrink_verdict(check, candidate);
      if (!verdict) {  // a call the stop cut short: no verdict
        s.hit_limit = true;
        return;
      }
      if (!verdict->passed) {
        s.value = std::move(candidate);
        s.verdict = std::move(*verdict);
        ++s.simplify_steps;
        progressed = true;
        break;
      }
    }
  }
}

// A failing case after shrinking, as a case file's content.
struct Found {
  std::string property;
  uint64_t seed = 0;
  int size = 0;
  std::string region;         // where the failing value was drawn ("" when the property names none)
  std::string first_message;  // the failure as first found
  std::string message;        // the failure of the shrunk case
  int64_t shrink_steps = 0, simplify_steps = 0, shrink_tries = 0;
  bool shrink_hit_limit = false;
  bool shrink_stopped = false;  // the limit was a stop asked (a signal), not tries or time
  // How the failure was seen again (the list above FreshKernel, as text) and
  // the evidence: the fresh instance's verdict, or why none was made.
  std::string reproduction = "regenerated";
  std::string reproduction_note;
  // The shrunk case failed again where `reproduction` says (a fresh instance
  // of the kernel, regenerated for pav's own kernels, or the run's instance
  // when no fresh one can be made); not when flaky or state-dependent.
  bool reproduced() const { return reproduction != "flaky" && reproduction != "state-dependent"; }
  CaseSpec spec;              // the shrunk case (with its prelude when reproduction is "sequence")
  // A state-dependent failure's search for its sequence: the earlier calls
  // the run kept (at most kMaxPrelude) and the sequences replayed from fresh
  // instances; 0 when no search ran.
  int64_t sequence_history = 0, sequence_tries = 0;
  // With a kernel under test: the calls (at most kMaxPrelude) the shrunk
  // case's last failing check came after, in the run's instance.
  std::vector<PriorCall> shrink_before;
  double sequence_seconds = 0;
  nlohmann::json meta;        // property-specific fields and the run's facts
  std::string description;    // one-line summary of the shrunk value
  std::string reproduce;      // the command that runs this case again (reproduce_command)
};

// The verdict of a sequence whose earlier call i (of n, from 0) failed: that
// failure, named by its place.
inline std::string earlier_call_failed(size_t i, size_t n, const std::string& why) {
  return fmt::format("earlier call {} of {} (prelude[{}]) failed: {}", i + 1, n, i, why);
}

// One property, type-erased. Built with make_property().
struct Property {
  std::string name;
  std::string summary;
  bool host_only = false;  // ignores --backend (the planner runs on the host)
  // Draws the value for (seed, size) and checks it.
  std::function<Verdict(uint64_t seed, int size, const CheckContext&)> check_seed;
  // Regenerates (seed, size), and if it fails shrinks it and returns the case file.
  std::function<std::optional<Found>(uint64_t seed, int size, const CheckContext&, const ShrinkLimits&)> shrink_seed;
  // Re-runs the property on a saved case; CaseError when the case cannot be
  // rebuilt as a value of this property (a malformed meta). A case with a
  // prelude runs its earlier calls first, in order, through the same kernel:
  // the first call that fails is the verdict, named by its place.
  std::function<Verdict(const CaseSpec&, const nlohmann::json& meta, const CheckContext&)> replay;
  // The case (seed, size) draws, as a saved call: an earlier call of a sequence.
  std::function<PriorCall(uint64_t seed, int size)> call_of_seed;
  // The property's own simplifications of a saved call (PropertyParts::simplify).
  std::function<std::vector<PriorCall>(const PriorCall&)> simplify_call;
  // A saved call's one-line summary (PropertyParts::describe).
  std::function<std::string(const PriorCall&)> describe_call;
};

// The command that runs case `seed` of a property again, alone, on the same
// kernel: --kernel SPEC (with --isolate and --timeout where they apply) for a
// kernel under test, --backend for pav's kernels.
struct FuzzOptions;
std::string reproduce_command(const std::string& property, uint64_t seed, const FuzzOptions& opt);

template <class T>
struct PropertyParts {
  std::string name, summary;
  bool host_only = false;
  rc::Gen<T> gen;
  std::function<Verdict(const T&, const CheckContext&)> check;
  // The value as a case file: the CaseSpec carries what it can (lens, hkv,
  // options); the rest goes into meta.
  std::function<CaseSpec(const T&, nlohmann::json& meta)> to_case;
  std::function<T(const CaseSpec&, const nlohmann::json& meta)> from_case;
  std::function<std::string(const T&)> describe;
  // Optional: simpler variants of a value, tried after the shrink tree walk.
  std::function<std::vector<T>(const T&)> simplify = nullptr;
  // Optional: the kernel under test the value ran on, when the property draws
  // it per case (pav's kernels with drawn settings): the saved case's
  // meta.kernel, so it replays on that kernel.
  std::function<nlohmann::json(const T&, const CheckContext&)> kernel_record = nullptr;
  // Optional: the region of the call space the value was drawn in (the
  // decode regions of kernel_gen.hpp), counted per run and saved in meta.region.
  std::function<std::string(const T&)> region = nullptr;
  // Optional: the value's shape, what a kernel that compiles per shape
  // compiles for (kernel_gen.hpp's shape_of); a run counts its distinct ones.
  std::function<std::string(const T&)> shape = nullptr;
};

template <class T>
Property make_property(PropertyParts<T> parts) {
  auto p = std::make_shared<PropertyParts<T>>(std::move(parts));
  Property out;
  out.name = p->name;
  out.summary = p->summary;
  out.host_only = p->host_only;
  out.check_seed = [p](uint64_t seed, int size, const CheckContext& ctx) {
    std::function<Verdict(const T&)> check = [&](const T& v) { return p->check(v, ctx); };
    try {
      std::optional<T> v;
      {
        std::lock_guard<std::mutex> lock(generation_mutex());
        v.emplace(p->gen(rc::Random(seed), size).value());
      }
      Verdict verdict = guarded(check, *v);
      if (p->region) verdict.region = p->region(*v);
      if (p->shape) verdict.shape = p->shape(*v);
      return verdict;
    } catch (const pav::IoError&) {
      throw;
    } catch (const std::exception& e) {
      return Verdict::fail(std::string("generator threw: ") + e.what());
    }
  };
  out.shrink_seed = [p](uint64_t seed, int size, const CheckContext& ctx,
                        const ShrinkLimits& limits) -> std::optional<Found> {
    // With a kernel under test, the calls each failing check came after:
    // what a state-dependent failure's sequence is searched in first.
    std::deque<PriorCall> recent;
    std::vector<PriorCall> before_failing;
    std::function<Verdict(const T&)> inner = [&](const T& v) { return p->check(v, ctx); };
    std::function<Verdict(const T&)> check = [&](const T& v) {
      Verdict r = guarded(inner, v);
      if (!ctx.kernel) return r;
      if (!r.passed) before_failing.assign(recent.begin(), recent.end());
      PriorCall c;
      c.spec = p->to_case(v, c.meta);
      recent.push_back(std::move(c));
      if (recent.size() > size_t(kMaxPrelude)) recent.pop_front();
      return r;
    };
    // Shrinking regenerates values throughout; it runs alone (after the jobs).
    std::lock_guard<std::mutex> lock(generation_mutex());
    const rc::Shrinkable<T> root = p->gen(rc::Random(seed), size);
    const T v = root.value();
    // A stop that cut the re-check's call short leaves no verdict of it: the
    // case is kept as found, its messages left empty for the caller's (the
    // search's) failure.
    const std::optional<Verdict> recheck = shrink_verdict(check, v);
    if (recheck && recheck->passed) return std::nullopt;
    const bool cut = !recheck;
    const Verdict first = cut ? Verdict::fail("") : *recheck;
    const auto t0 = std::chrono::steady_clock::now();
    Shrunk<T> s{v, first};
    s.hit_limit = cut;
    if (!cut) s = shrink_failing<T>(root, first, check, limits);
    if (p->simplify && !s.hit_limit) simplify_failing<T>(s, check, p->simplify, limits, t0);
    Found f;
    f.property = p->name;
    f.seed = seed;
    f.size = size;
    f.first_message = first.message;
    f.message = s.verdict.message;
    f.shrink_steps = s.steps;
    f.simplify_steps = s.simplify_steps;
    f.shrink_tries = s.tries;
    f.shrink_hit_limit = s.hit_limit;
    f.meta = nlohmann::json::object();
    f.spec = p->to_case(s.value, f.meta);
    f.shrink_before = std::move(before_failing);
    if (p->region) f.region = p->region(v);
    if (p->kernel_record) f.meta["kernel"] = p->kernel_record(s.value, ctx);
    if (p->describe) f.description = p->describe(s.value);
    return f;
  };
  auto value_of = [p](const CaseSpec& spec, const nlohmann::json& meta) {
    try {
      return p->from_case(spec, meta);
    } catch (const std::exception& e) {
      throw CaseError(std::string("cannot rebuild the ") + p->name + " case: " + e.what());
    }
  };
  out.replay = [p, value_of](const CaseSpec& spec, const nlohmann::json& meta, const CheckContext& ctx) {
    std::function<Verdict(const T&)> check = [&](const T& v) { return p->check(v, ctx); };
    // Every call is rebuilt before any runs: a malformed one is bad input, not a verdict.
    std::vector<T> earlier;
    for (size_t i = 0; i < spec.prelude.size(); ++i) {
      try {
        earlier.push_back(value_of(spec.prelude[i].spec, spec.prelude[i].meta));
      } catch (const CaseError& e) {
        throw CaseError("prelude[" + std::to_string(i) + "]: " + e.what());
      }
    }
    const T v = value_of(spec, meta);
    for (size_t i = 0; i < earlier.size(); ++i) {
      Verdict before = guarded(check, earlier[i]);
      if (!before.passed) return Verdict::fail(earlier_call_failed(i, earlier.size(), before.message));
    }
    return guarded(check, v);
  };
  out.call_of_seed = [p](uint64_t seed, int size) {
    PriorCall c;
    std::lock_guard<std::mutex> lock(generation_mutex());
    c.spec = p->to_case(p->gen(rc::Random(seed), size).value(), c.meta);
    return c;
  };
  out.simplify_call = [p, value_of](const PriorCall& c) {
    std::vector<PriorCall> out;
    if (!p->simplify) return out;
    for (const T& x : p->simplify(value_of(c.spec, c.meta))) {
      PriorCall s;
      s.spec = p->to_case(x, s.meta);
      out.push_back(std::move(s));
    }
    return out;
  };
  out.describe_call = [p, value_of](const PriorCall& c) {
    return p->describe ? p->describe(value_of(c.spec, c.meta)) : std::string();
  };
  return out;
}

// ---- runs ----------------------------------------------------------------------

// Where a property's seed stream stands, so a later run continues it instead of
// repeating seeds: every case index below next_case has run (in this run or one
// it continued), and so has each index in done_beyond (ascending, all above
// next_case); no other index has. Jobs stopped by a deadline leave a few cases
// past the first one not run: those are done_beyond.
struct StreamPoint {
  uint64_t next_case = 0;
  std::vector<uint64_t> done_beyond;
  bool operator==(const StreamPoint&) const = default;
  // The case index of the i-th case not run yet (i = 0, 1, ...), in increasing order.
  uint64_t fresh_case(uint64_t i) const;
};

// Where the stream stands after a run from `from` whose job j of J ran the
// fresh cases j, j+J, ..., j+(cases_per_job[j]-1)*J (fresh_case numbering).
StreamPoint advance_stream(const StreamPoint& from, const std::vector<int64_t>& cases_per_job);

// What `Found::reproduction` says:
//   fresh            the shrunk case failed again in a fresh instance of the
//                    kernel under test (a new worker process, a new isolated
//                    child), whose earlier calls cannot have left state
//   regenerated      pav's own kernels: every case builds its own, so the
//                    failure recurring when regenerated is reproduction
//   same-instance    failed again in the run's instance; no fresh instance
//                    could be made (an in-process library or Python kernel
//                    shares its memory with the run; the note says how to get one)
//   sequence         the shrunk case passes in a fresh instance, but fails
//                    there after some of the calls the run made before it:
//                    those calls (fewest found, each simplified) are saved as
//                    the case's prelude (pav-case/2) and replay first
//   state-dependent  failed in the run's instance, passes in a fresh one, and
//                    no sequence of the run's earlier calls (the last
//                    kMaxPrelude) fails there either: not reproduced, and the
//                    saved case says so
//   flaky            did not recur when regenerated from its seed; nothing saved
// A fresh instance of the kernel under test, for the reproduction check: `open`
// makes one, or is empty and `unavailable` says why none can be made.
struct FreshKernel {
  std::function<std::unique_ptr<adapters::KernelUnderTest>()> open;
  std::string unavailable;
};

// The search for a state-dependent failure's sequence: at most this many
// sequences replayed (each from a fresh instance) and seconds spent, within
// the shrink limits.
inline constexpr int64_t kSequenceTries = 100;
inline constexpr double kSequenceSeconds = 30;

struct FuzzOptions {
  int64_t cases = 0;         // per property; 0: no case budget
  double minutes = 0;        // all properties together; 0: no time budget
  uint64_t seed = 1;
  int jobs = 1;
  int shard_index = 0, shard_count = 1;
  CheckContext ctx;
  std::string save_dir = default_counterexample_dir();
  ShrinkLimits shrink;       // its should_stop is set from should_stop below
  bool progress = true;      // progress line on `progress_out` (pav::ProgressReporter)
  bool verbose = false;      // one line per case with its seed
  bool keep_going = false;   // after a failure (shrunk and saved), go on with the next property
  // Per property: continue its seed stream from there (a run resumed from an
  // earlier report); a property not named starts at case 0. The case budget
  // counts the cases of this run.
  std::map<std::string, StreamPoint> resume;
  // How the kernel under test was opened beyond its identity (isolate,
  // timeout_seconds, cwd): merged into a saved case's meta.kernel, so a replay
  // opens the same kernel the same way (docs/case-format.md).
  nlohmann::json kernel_run = nlohmann::json::object();
  std::string label = "pav fuzz";       // how the log's first line names the run
  std::function<bool()> should_stop;    // polled between cases: true ends the run cleanly
  FreshKernel fresh;                    // with a kernel under test: where its shrunk failure is seen again
  bool regions = false;                 // the decode property draws by region (reproduce_command says --regions)
  // The decode property draws its calls in this many shapes (0: each its own),
  // drawn from shape_seed (reproduce_command says --shapes and --shape-seed).
  int shapes = 0;
  uint64_t shape_seed = 0;
};

struct PropertyRun {
  std::string property;
  int64_t cases = 0;
  double seconds = 0;      // wall clock
  double cpu_seconds = 0;  // summed over the jobs' threads
  double cases_per_second() const { return seconds > 0 ? double(cases) / seconds : 0; }
  double cases_per_cpu_second() const { return cpu_seconds > 0 ? double(cases) / cpu_seconds : 0; }
  std::vector<int64_t> cases_per_job;
  // Cases per region they were drawn in (properties that name regions).
  std::map<std::string, int64_t> regions;
  // Distinct shapes among the cases (properties that name shapes; 0 otherwise):
  // what a kernel that compiles per shape compiled for.
  int64_t shapes = 0;
  std::optional<Found> failure;  // the property's first failure (lowest case index), shrunk
  std::string saved_path;        // its case file; "" when none was saved
  std::string save_error;        // why it could not be saved ("" when saved or nothing to save)
  bool interrupted = false;      // a clean stop ended this property's run early
  StreamPoint from, to;          // the seed stream before and after this run
};

struct FuzzReport {
  std::vector<PropertyRun> runs;  // in the order run; a property not reached has no run
  bool interrupted = false;       // should_stop ended the run before its budget
  bool passed() const { return first_failure() == nullptr; }
  // The first run (in property order) that found a failure, or nullptr.
  const PropertyRun* first_failure() const;
};

// Thrown by run_fuzz when the jobs asked for cannot start here (a thread or
// its memory refused, e.g. under ulimit -v): the run stops before any verdict,
// every job started is joined, and the CLI exits 3 with this message.
struct JobsUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs the properties one after another (the time budget split evenly among
// them). A property's run ends at its first failure, which is shrunk and saved
// under opt.save_dir; the whole run then stops, unless keep_going. A failed save
// is reported (PropertyRun::save_error) and the run goes on. Messages go to
// `out`, the progress line to `progress_out`.
FuzzReport run_fuzz(const FuzzOptions& opt, const std::vector<const Property*>& props, std::FILE* out,
                    std::FILE* progress_out);

// Writes a Found as a case file under dir (save_counterexample: durable, named
// by property, seed and hash) and returns its path; throws pav::IoError.
std::string save_found(const std::string& dir, const Found& f, const FuzzOptions& opt);

}  // namespace pav::props::fuzz
