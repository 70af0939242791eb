// SPDX-License-Identifier: Apache-2.0
#include "tools/command.hpp"

#include <fmt/core.h>
#include <signal.h>

#include <algorithm>
#include <exception>
#include <new>
#include <system_error>

#include "common/durable_file.hpp"
#include "input/json_input.hpp"
#include "common/version.hpp"
#include "properties/session/stop.hpp"
#include "tools/options.hpp"

namespace pav::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

Registrar::Registrar(std::string name, std::string summary, CommandFn fn) {
  registry().push_back({std::move(name), std::move(summary), std::move(fn)});
}

int parse(CLI::App& app, const std::vector<std::string>& args) {
  // Help shows each option's default: the bound variable's value before parsing.
  for (CLI::Option* o : app.get_options())
    if (o->get_expected_max() > 0 && !o->get_required() && o->get_default_str().empty()) o->capture_default_str();
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    fmt::print("{}", app.help());
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    fmt::print("{}", app.help("", CLI::AppFormatMode::All));
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "pav {}: {}\n", app.get_name(), session::bounded_message(e.what()));
    fmt::print(stderr, "run 'pav {} --help' for the options\n", app.get_name());
    return kExitBadInput;
  }
  return -1;
}

void ReportOutput::add_options(CLI::App& app) {
  app.add_flag("--json", json, "print the report as JSON on stdout (instead of the tables)");
  app.add_option("--json-out", json_out, "also write the JSON report to FILE (written whole or not at all)")
      ->check(non_empty());
}

void ReportOutput::check_writable() const {
  if (!json_out.empty()) pav::check_writable_file(json_out, "--json-out");
}

void ReportOutput::emit(const nlohmann::ordered_json& report) const {
  if (json) {
    fmt::print("{}\n", report.dump(2));
    std::fflush(stdout);
  }
  if (!json_out.empty()) pav::write_file_atomically(json_out, report.dump(2) + "\n");
}

int ReportOutput::finish(const session::Report& report, const std::string& command) const {
  if (report.json.is_null()) return report.exit_code;
  return finish(report.json, report.exit_code, command);
}

session::Io ReportOutput::io(bool quiet) const {
  session::install_stop_handlers();
  session::Io io;
  io.out = text() ? stdout : nullptr;
  io.log = text() ? stdout : stderr;
  io.show_progress = !quiet;
  return io;
}

int ReportOutput::finish(const nlohmann::ordered_json& report, int rc, const std::string& command) const {
  try {
    emit(report);
  } catch (const pav::IoError& e) {
    fmt::print(stderr, "pav {}: {}\n", command, session::bounded_message(e.what()));
    return rc == kExitFail ? kExitFail : kExitCannotRun;
  }
  return rc;
}

namespace {

void usage(std::FILE* f) {
  auto cmds = registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  fmt::print(f, "pav: paged-attention decode kernels, work planner and their verification suite\n\n");
  fmt::print(f, "usage: pav <command> [options]     pav help <command>     pav --version\n\n");
  for (const auto& c : cmds) fmt::print(f, "  {:<14} {}\n", c.name, c.summary);
  fmt::print(f, "\nexit codes: 0 pass, 1 a defect found, 2 bad input or usage, 3 could not run\n");
}

const Command* find(const std::string& name) {
  for (const auto& c : registry())
    if (c.name == name) return &c;
  return nullptr;
}

int unknown_command(const std::string& name) {
  fmt::print(stderr, "pav: unknown command '{}'\n\n", session::bounded_message(name));
  usage(stderr);
  return kExitBadInput;
}

int run_command(const Command& c, std::vector<std::string> args) {
  try {
    return c.run(std::move(args));
  } catch (...) {
    const session::ErrorText e = session::error_text(std::current_exception());
    fmt::print(stderr, "pav {}: {}\n", c.name, e.message);
    return e.exit_code;
  }
}

}  // namespace

int run_main(int argc, char** argv) {
  // A file size limit (ulimit -f) then fails the write with EFBIG, which pav
  // reports, instead of killing the process mid-file.
  signal(SIGXFSZ, SIG_IGN);
  const std::vector<std::string> words(argv + 1, argv + argc);
  if (words.empty()) {
    usage(stderr);
    return kExitBadInput;
  }
  const std::string& first = words[0];
  if (first == "--version" || first == "version") {
    fmt::print("{}\n", version_line());
    return kExitOk;
  }
  if (first == "--help" || first == "-h" || first == "help") {
    if (words.size() == 1) {
      usage(stdout);
      return kExitOk;
    }
    const Command* c = find(words[1]);
    return c ? run_command(*c, {"--help"}) : unknown_command(words[1]);
  }
  const Command* c = find(first);
  return c ? run_command(*c, std::vector<std::string>(words.begin() + 1, words.end())) : unknown_command(first);
}

}  // namespace pav::cli
