#pragma once
// The pav command line: each command lives in its own tools/cmd_*.cpp and
// registers itself with PAV_COMMAND, so adding a command touches no other file.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace pav::cli {

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFail = 1;      // the check ran and found a defect
inline constexpr int kExitBadInput = 2;  // bad arguments or malformed input
inline constexpr int kExitCannotRun = 3; // could not run: no device, missing tool, I/O error

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
// command should go on, else the exit code to return: 0 for --help, 2 for a
// parse error (the message names the option at fault).
int parse(CLI::App& app, const std::vector<std::string>& args);

// Thrown by a command for bad input (malformed file, missing field, bad value):
// main prints "pav <cmd>: <what>" and exits 2.
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by a command that could not run (no device, a tool or folder it needs
// is missing): main prints "pav <cmd>: <what>" and exits 3.
struct CannotRun : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace pav::cli

#define PAV_CONCAT_INNER(a, b) a##b
#define PAV_CONCAT(a, b) PAV_CONCAT_INNER(a, b)
#define PAV_COMMAND(name, summary, fn) \
  static ::pav::cli::Registrar PAV_CONCAT(pav_command_, __LINE__)(name, summary, fn)
