// SPDX-License-Identifier: Apache-2.0
#pragma once
// What pav fuzz and pav verify say about a property run, in JSON and in text,
// so both commands report the engine's findings the same way.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "properties/builtin_properties.hpp"
#include "properties/fuzz_engine.hpp"
#include "properties/replay.hpp"
#include "properties/kernel_properties.hpp"
#include "tools/command.hpp"
#include "tools/kernel_option.hpp"

namespace pav::cli {

// --save DIR (default: the documented counterexample folder).
CLI::Option* add_save_option(CLI::App& app, std::string& dir);

// Checks at start-up that cases can be saved under dir (pav::IoError, exit 3).
void check_save_dir(const std::string& dir);

// --property NAME (repeatable, or a comma list): the properties chosen, all
// when none is named; BadInput names an unknown one and lists the known ones.
// `available`: the properties to choose from (default: the built-in ones).
std::vector<const props::fuzz::Property*> select_properties(const std::vector<std::string>& names);
std::vector<const props::fuzz::Property*> select_properties(const std::vector<std::string>& names,
                                                            const std::vector<props::fuzz::Property>& available);

// One property run as JSON: cases, time, and the failure with its saved file
// and the command that reproduces it (fuzz::reproduce_command).
nlohmann::ordered_json property_run_json(const props::fuzz::PropertyRun& run);

// ---- replaying case files: pav replay and pav fuzz --replay -------------------------

struct ReplayOptions {
  std::string backend_name = "auto";  // --backend
  std::string path_override;          // pav replay --path: planned or uniform ("" = the case's)
  KernelOptions kernel;               // --kernel (at most one), --isolate, --timeout, --exchange-dir
  bool timeout_given = false;         // --timeout was on the command line
  bool trust_case_kernel = false;     // --trust-case-kernel
};

// --trust-case-kernel.
void add_trust_case_kernel_option(CLI::App& app, ReplayOptions& o);

// How one case file's kernel is opened for a replay.
struct ReplayKernel {
  std::string spec;       // "" = pav's own kernels on --backend (the case records no kernel)
  bool isolate = false;
  double timeout = 60;
  bool recorded = false;  // from the case's meta.kernel, not --kernel
  std::string recorded_spec;  // meta.kernel.spec as written
};

// The kernel a case replays with: --kernel SPEC when given (with the command
// line's --isolate and --timeout); else the kernel, isolation, timeout and
// working directory the case's meta.kernel records; else none. A recorded
// lib: or exec: kernel is refused (BadInput naming the spec and both ways to
// run it) unless trust_case_kernel: a case file never runs a command or loads
// a library on its own. A malformed meta.kernel is BadInput naming the field.
ReplayKernel replay_kernel(const std::string& file, const nlohmann::json& meta, const ReplayOptions& o);

// Replays case files and reports: the one path of pav replay and pav fuzz
// --replay (command names the report; its cases go under `array_key`). Exit
// code 1 when a case fails, else 0 (or what ReportOutput::finish makes of a
// failed write).
int replay_case_files(const std::string& command, const std::string& array_key, const std::vector<std::string>& files,
                      const ReplayOptions& o, const ReportOutput& output);

// Exit code of an engine run: 1 when a failure was found (even if its case
// could not be saved: the seed still reproduces it), 3 when a stop signal ended
// it early or a case could not be saved, else 0.
int fuzz_exit_code(const props::fuzz::FuzzReport& report);

}  // namespace pav::cli
