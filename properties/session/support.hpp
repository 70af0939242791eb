// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the session's runs share, inside the session folder: choosing
// properties, a property run as JSON, the kernel a case replays with, the exit
// code of an engine run, and how a run asks whether it should stop.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "properties/checks/kernel_properties.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/session/session.hpp"

namespace pav::session {

// The Io's stop callbacks, or the process's signal handlers where it gives none.
bool stopping(const Io& io);
std::string stop_name(const Io& io);
// A function the engine can hold: io's stop test.
std::function<bool()> stop_test(const Io& io);

// Checks at start-up that cases can be saved under dir (pav::IoError).
void check_save_dir(const std::string& dir);

// The properties chosen by name (each item may be a comma list), all of
// `available` when none is named; BadInput names an unknown one and lists the
// known ones.
std::vector<const props::fuzz::Property*> select_properties(const std::vector<std::string>& names,
                                                            const std::vector<props::fuzz::Property>& available);

// One property run as JSON: cases, time, and the failure with its saved file
// and the command that reproduces it.
nlohmann::ordered_json property_run_json(const props::fuzz::PropertyRun& run);

// Exit code of an engine run: 1 when a failure was found (even if its case
// could not be saved: the seed still reproduces it), 3 when a stop ended it
// early or a case could not be saved, else 0.
int fuzz_exit_code(const props::fuzz::FuzzReport& report);

// What a saved case records, beside the kernel's identity, to open it again
// the same way (meta.kernel in the case file): the isolation, the per-call
// timeout and the working directory a relative path in the spec is relative to.
nlohmann::json kernel_run_record(const KernelOptions& o);

// How the engine gets a fresh instance of kernel `k` (opened from `o`) to see
// a shrunk failure again: a new worker process (exec:, lib: under --isolate)
// or a new pav kernel; for an in-process library or Python kernel, none (it
// shares its memory with the run), and why.
props::fuzz::FreshKernel fresh_kernel(const adapters::KernelUnderTest& k, const KernelOptions& o);

// "kernel    NAME VERSION via ADAPTER (SPEC)" and what it supports.
void print_kernel(std::FILE* f, const adapters::KernelUnderTest& k, const char* label = "kernel");
// The shapes a kernel's decode calls are drawn in, one per line, and where
// their count came from (`asked`: --shapes; else the kernel's description);
// nothing when each call draws its own.
void print_shapes(std::FILE* f, const std::vector<props::CaseSpec>& shapes, const props::fuzz::DecodeDraw& draw,
                  bool asked);

// How one case file's kernel is opened for a replay.
struct ReplayKernel {
  std::string spec;       // "" = pav's own kernels on the backend (the case records no kernel)
  bool isolate = false;
  double timeout = 60;
  bool recorded = false;  // from the case's meta.kernel, not the options
  std::string recorded_spec;  // meta.kernel.spec as written
};

// The kernel a case replays with: the options' kernel when given (with their
// isolation and timeout); else the kernel, isolation, timeout and working
// directory the case's meta.kernel records; else none. A recorded lib: or
// exec: kernel is refused (BadInput naming the spec and both ways to run it)
// unless trust_case_kernel: a case file never runs a command or loads a
// library on its own. A malformed meta.kernel is BadInput naming the field.
ReplayKernel replay_kernel(const std::string& file, const nlohmann::json& meta, const ReplayOptions& o);

// The paired comparison of two kernels under test (compare, and verify with two
// kernels): identical generated cases through both, per-case verdict JSONL per
// kernel under out_dir, McNemar's test. Prints the summary to io.log and fills
// `report`; BadInput when the kernels share no case, pav::IoError when a file
// cannot be written.
struct PairedRunOptions {
  int64_t cases = 200;
  uint64_t seed = 1;
  std::string out_dir = ".";  // compare-a.jsonl and compare-b.jsonl go here
  double alpha = 0.05;
};
struct PairedRunResult {
  int64_t cases = 0;
  int64_t a_wrong = 0, b_wrong = 0;
  bool b_significantly_worse = false;  // McNemar exact p < alpha with b > c
  bool interrupted = false;
};
PairedRunResult run_paired(adapters::KernelUnderTest& a, adapters::KernelUnderTest& b, const PairedRunOptions& o,
                           const Io& io, nlohmann::ordered_json& report);

}  // namespace pav::session
