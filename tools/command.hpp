// SPDX-License-Identifier: Apache-2.0
#pragma once
// The pav command line: each command lives in its own tools/cmd_*.cpp and
// registers itself with PAV_COMMAND, so adding a command touches no other file.
// What every command shares lives here: the exit codes, the errors that map to
// them, option parsing with help that shows defaults, and the --json /
// --json-out output convention.
#include <CLI/CLI.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "properties/session/session.hpp"

namespace pav::cli {

// Exit codes shared by every command: the session's (properties/session).
inline constexpr int kExitOk = session::kExitOk;
inline constexpr int kExitFail = session::kExitFail;
inline constexpr int kExitBadInput = session::kExitBadInput;
inline constexpr int kExitCannotRun = session::kExitCannotRun;

using CommandFn = std::function<int(std::vector<std::string> args)>;

struct Command {
  std::string name;
  std::string summary;
  CommandFn run;
};

std::vector<Command>& registry();

struct Registrar {
  Registrar(std::string name, std::string summary, CommandFn fn);
};

// Parses args (the words after the command name) into app. Returns -1 when the
// command should go on, else the exit code to return: 0 for --help (the help,
// with every option's default, on stdout), 2 for a parse error (the message
// names the option at fault and goes to stderr with a pointer to --help).
int parse(CLI::App& app, const std::vector<std::string>& args);

// Thrown by a command for bad input (exit 2) or when it cannot run here
// (exit 3): the session's errors, so a command and the session it calls speak
// of one failure the same way. The dispatcher prints "pav <cmd>: <what>".
using BadInput = session::BadInput;
using CannotRun = session::CannotRun;

// Runs the command line: `pav CMD ARGS`, `pav help [CMD]`, `pav --version`.
// Every exception becomes its exit code here (never 1, which means a defect).
int run_main(int argc, char** argv);

using session::version_line;

using session::report_header;
using session::verdict_text;

// --json (machine output on stdout instead of the tables) and --json-out FILE
// (the same JSON written to FILE, durably, whatever goes to stdout).
struct ReportOutput {
  bool json = false;
  std::string json_out;

  void add_options(CLI::App& app);
  // Checks at start-up that --json-out can be written (CannotRun otherwise), so
  // a long run does not end in a failed write.
  void check_writable() const;
  // Prints `report` on stdout when --json; writes it to --json-out when given
  // (a failed write throws pav::IoError).
  void emit(const nlohmann::ordered_json& report) const;
  // emit(), then the exit code: `rc`, except that a failed write is reported on
  // stderr and turns 0 into 3 (a defect found stays 1: it is the verdict).
  int finish(const nlohmann::ordered_json& report, int rc, const std::string& command) const;
  // True when the human-readable text should go to stdout (no --json).
  bool text() const { return !json; }
  // A session run's report: emitted as above (none where the run wrote no
  // report), then its exit code as finish() makes it.
  int finish(const session::Report& report, const std::string& command) const;
  // Where a session run writes on the command line: its text on stdout, or,
  // with --json, its narrative on stderr and no text; progress on stderr
  // unless quiet. Installs the stop handlers (SIGINT, SIGTERM).
  session::Io io(bool quiet) const;
};

}  // namespace pav::cli

#define PAV_CONCAT_INNER(a, b) a##b
#define PAV_CONCAT(a, b) PAV_CONCAT_INNER(a, b)
#define PAV_COMMAND(name, summary, fn) \
  static ::pav::cli::Registrar PAV_CONCAT(pav_command_, __LINE__)(name, summary, fn)
