// SPDX-License-Identifier: Apache-2.0
#pragma once
// The session API: pav's verification runs as functions. Each takes an
// options value and returns a Report (the verdict and the JSON document the
// command line prints with --json), or throws BadInput (the request is wrong:
// exit 2) or CannotRun (it cannot run here: exit 3), each carrying its reason.
// The command line (tools/) parses argv into these options, calls, prints and
// maps errors to exit codes; the Python package (python/) calls the same
// functions in its own process. Neither holds any logic of a run.
//
//   verify   the main job: the properties of pav's kernels, or of one kernel under
//            test, first failure shrunk and saved, and the quick drift sweep;
//            with two kernels, their paired comparison
//   fuzz     long property runs over a seed stream: find, shrink, save
//   replay   saved case files through the kernel they name and the reference
//   compare  two kernels on identical generated cases (McNemar)
//   drift    does the decode error grow with the split ceiling?
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/kernel.hpp"
#include "kernels/launch.hpp"

namespace pav::session {

// Exit codes: what a Report or an error stands for on the command line.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFail = 1;      // the check ran and found a defect
inline constexpr int kExitBadInput = 2;  // bad options or malformed input
inline constexpr int kExitCannotRun = 3; // could not run: no device, missing tool, I/O error, stopped

// The request is wrong (a malformed file, a missing field, a bad value): the
// message names the option or field at fault and the value.
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The run cannot happen here (no device, a missing tool, a file it cannot
// write). A pav::IoError is the same kind of failure.
struct CannotRun : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where a run writes while it runs, and how it learns it should stop. `out`
// takes the human-readable text (headers, per-case lines, summary tables;
// nullptr: none, as with --json); `log` the narrative that must not mix with
// machine output (where --json sends it: stderr); progress lines go to
// `progress` when show_progress; `err` takes what went wrong beside the
// verdict. The stop callbacks default to the process's
// SIGINT/SIGTERM handlers (session/stop.hpp).
struct Io {
  std::FILE* out = stdout;
  std::FILE* log = stdout;
  std::FILE* progress = stderr;
  std::FILE* err = stderr;                    // what went wrong beside the verdict (a report not written)
  bool show_progress = true;
  std::function<bool()> should_stop;          // default: stop_requested()
  std::function<std::string()> stop_reason;   // default: the signal's name
};

// What a run found: `exit_code` is 0 (passed), 1 (a defect found), or 3 (it
// could not finish: stopped by a signal, a case or report that could not be
// written); `json` is the whole report (docs/json-reports.md).
struct Report {
  int exit_code = kExitOk;
  bool passed() const { return exit_code == kExitOk; }
  bool interrupted = false;
  std::string verdict;
  nlohmann::ordered_json json;
};

// What an exception that left a run stands for: its exit code (2 for bad input,
// 3 for could not run, never 1) and its message, "could not run: ..." for 3.
// Every face maps errors through this one rule. A message longer than about
// 1,000 characters keeps its start and its end (the field is named first, the
// reason last) and says how much was cut between them.
struct ErrorText {
  int exit_code = kExitCannotRun;
  std::string message;
};
ErrorText error_text(std::exception_ptr error);
// That cut, for a face's own messages (a parse error echoing a value).
std::string bounded_message(std::string_view what);

// ---- kernels and backends --------------------------------------------------------

// How a kernel under test is opened (--kernel and its companions).
struct KernelOptions {
  std::vector<std::string> specs;  // pav:cpu, pav:gpu, lib:PATH.so [WORDS], exec:'CMD', inproc:KEY
  bool isolate = false;
  double timeout = 60;             // seconds per call (exec:, --isolate, in process)
  std::string exchange_dir;        // per-call .npy files ("" = /dev/shm, else $TMPDIR)
};
// The per-call timeout's bounds, wherever it is given (--timeout, a Python
// run's timeout=, a case file's kernel.timeout_seconds).
inline constexpr double kMinTimeoutSeconds = 0.01, kMaxTimeoutSeconds = 86400;
inline bool timeout_in_range(double s) { return s >= kMinTimeoutSeconds && s <= kMaxTimeoutSeconds; }

// Opens one kernel: a bad spec is BadInput, one that cannot run here CannotRun.
// for_cases: pav will generate calls for it, so a description pav cannot
// generate for is BadInput too.
std::unique_ptr<adapters::KernelUnderTest> open_kernel(const std::string& spec, const KernelOptions& o,
                                                       bool for_cases = true);

// cpu, gpu or auto (gpu when this build has the GPU backend and a device is
// present); CannotRun when gpu is asked for and there is none, BadInput for
// another name.
kernels::Backend pick_backend(const std::string& name);
const char* backend_name(kernels::Backend b);

// The folder saved cases go to when none is named ($PAV_COUNTEREXAMPLE_DIR, else
// ./counterexamples).
std::string default_save_dir();

// "pav <version> (commit <source commit>)".
std::string version_line();

// The fields every JSON report starts with: the command, pav's version and the
// source commit it was built from.
nlohmann::ordered_json report_header(const std::string& command);

// The verdict word of a case for the text tables: "PASS", or "FAIL: <why>"
// with exactly one FAIL.
std::string verdict_text(bool passed, const std::string& message);

// ---- the runs ---------------------------------------------------------------------

// The limits of the runs' numeric options, one source for the command line's
// option checks and for the session's own.
inline constexpr int64_t kMaxPlanCases = 1000000;
inline constexpr int64_t kMaxDecodeCases = 100000;
// verify's decode check: a search of decode_seconds (at most kMaxDecodeCases
// cases) unless decode_cases fixes a count; --quick fixes the counts below.
inline constexpr double kDefaultDecodeSeconds = 40;
inline constexpr double kMaxDecodeSeconds = 86400;
inline constexpr int64_t kQuickPlanCases = 200, kQuickDecodeCases = 64, kQuickRejectCases = 100, kQuickStaleCases = 30;
inline constexpr int64_t kMaxRejectCases = 1000000;
inline constexpr int64_t kMaxStaleCases = 1000000;
inline constexpr int64_t kMaxCompareCases = 10000000;
inline constexpr int kMaxJobs = 1024;
// A kernel's decode calls drawn in at most this many shapes (--shapes); one
// whose description says compiles_per_shape gets kJitShapes unless told.
inline constexpr int kMaxShapes = 64;
inline constexpr int kJitShapes = 8;

struct VerifyOptions {
  std::string backend = "auto";
  uint64_t seed = 20261129;
  int64_t plan_cases = 500, reject_cases = 400, stale_cases = 100;
  // The decode check searches for decode_seconds (a time budget, at most
  // kMaxDecodeCases cases, stopped at the first failure) unless decode_cases
  // (> 0) fixes its count. Two kernels compare on decode_cases calls
  // (kQuickDecodeCases when 0).
  int64_t decode_cases = 0;
  double decode_seconds = kDefaultDecodeSeconds;
  // The pre-commit run: every count at its kQuick* value (a count also given
  // keeps its own), no decode search.
  bool quick = false;
  // planner, decode, reject, stale, drift; none: the default checks (planner,
  // decode, drift for pav's kernels; decode, reject, drift for a kernel under
  // test, and stale before drift for one that runs pav's plan). An empty list
  // names no check and is refused.
  std::optional<std::vector<std::string>> checks;
  // A kernel's decode calls in this many shapes (0: each call its own); none:
  // kJitShapes for a kernel that compiles per shape, else 0.
  std::optional<int> shapes;
  KernelOptions kernel;            // none: pav's own kernels; two: their paired comparison
  std::string save_dir = default_save_dir();
  std::string out_dir = ".";       // two kernels: compare-a.jsonl and compare-b.jsonl
};
Report verify(const VerifyOptions& o, const Io& io = {});
// --quick: sets o.quick and each count not given (the front end knows which
// were) to its kQuick* value.
void apply_quick(VerifyOptions& o, bool plan_given, bool decode_given, bool reject_given, bool stale_given);

// One of a fuzz campaign's disjoint seed streams: the index-th of count.
struct Shard {
  int index = 0, count = 1;
};

struct FuzzOptions {
  std::string backend = "auto";
  std::optional<uint64_t> seed;    // none: drawn at random (and reported), or the resumed report's
  int64_t cases = 0;               // per property; 0: no case budget
  double minutes = 1;              // all properties together; 0: no time budget (then cases > 0)
  std::vector<std::string> properties;  // names, or comma lists; empty: all
  KernelOptions kernel;            // at most one
  std::string save_dir = default_save_dir();
  int jobs = 1;
  std::optional<Shard> shard;      // none: 0/1, or the resumed report's
  int64_t shrink_tries = -1;       // -1: the engine's default
  double shrink_seconds = -1;      // -1: the engine's default
  bool keep_going = false;         // after a failure, go on with the next property
  bool regions = false;            // a kernel's decode draws half its calls from the decode regions
  int shapes = 0;                  // a kernel's decode calls in this many shapes (0: each its own)
  std::optional<uint64_t> shape_seed;  // the shapes' seed; none: the base seed
  bool verbose = false;            // every case's seed as it runs
  bool list = false;               // name the properties and run nothing
  std::string report_path;         // also write the report here, durably, after a stop too
  std::string resume_path;         // continue the seed streams of an earlier report
};
Report fuzz(const FuzzOptions& o, const Io& io = {});

struct ReplayOptions {
  std::vector<std::string> files;
  std::string backend = "auto";
  std::string path_override;       // planned or uniform ("" = the case's)
  KernelOptions kernel;            // at most one; none: the kernel each case records
  bool timeout_given = false;      // kernel.timeout overrides the one a case records
  bool trust_case_kernel = false;  // run the lib: or exec: kernel a case records
  std::string command = "replay";  // the report's name ("fuzz" for pav fuzz --replay)
  std::string array_key = "cases";
};
Report replay(const ReplayOptions& o, const Io& io = {});

struct CompareOptions {
  KernelOptions kernel;            // exactly two: A then B
  int64_t cases = 200;
  uint64_t seed = 1;
  std::string out_dir = ".";
  double alpha = 0.05;
  bool gate = false;               // a failure when B is significantly worse than A
};
Report compare(const CompareOptions& o, const Io& io = {});

struct DriftOptions {
  std::string sweep_path;          // "" = the built-in quick sweep
  std::string backend = "auto";
  KernelOptions kernel;            // at most one
  std::string cells;               // names or indices, comma-separated ("" = all)
  bool cells_given = false;        // --cells was named (an empty list is refused)
  int64_t max_context = 0;         // 0 = all
  int seeds = 0;                   // 0 = the sweep's
  bool list = false;               // the cells and split counts; run nothing
  bool quiet = false;              // only the verdict line
  std::string markdown_path, plot_path;
};
Report drift(const DriftOptions& o, const Io& io = {});

}  // namespace pav::session
