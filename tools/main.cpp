#include "tools/command.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <exception>

#include "tools/backend_option.hpp"
#ifdef PAV_HAVE_GPU
#include "kernels/hip/host_staged.hpp"
#endif

namespace pav::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

Registrar::Registrar(std::string name, std::string summary, CommandFn fn) {
  registry().push_back({std::move(name), std::move(summary), std::move(fn)});
}

bool register_gpu() {
#ifdef PAV_HAVE_GPU
  static const bool registered = kernels::gpu::register_host_staged_backend();
  return registered;
#else
  return false;
#endif
}

int parse(CLI::App& app, const std::vector<std::string>& args) {
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
    fmt::print(stderr, "pav {}: {}\n", app.get_name(), e.what());
    fmt::print(stderr, "run 'pav {} --help' for the options\n", app.get_name());
    return kExitBadInput;
  }
  return -1;
}

}  // namespace pav::cli

namespace {

void usage() {
  auto cmds = pav::cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  fmt::print("pav: paged-attention decode kernels, work planner and their verification suite\n\n");
  fmt::print("usage: pav <command> [options]   (pav <command> --help for its options)\n\n");
  for (const auto& c : cmds) fmt::print("  {:<14} {}\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pav::cli;
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    usage();
    return argc < 2 ? kExitBadInput : kExitOk;
  }
  const std::string name = argv[1];
  for (const auto& c : registry()) {
    if (c.name != name) continue;
    try {
      return c.run(std::vector<std::string>(argv + 2, argv + argc));
    } catch (const BadInput& e) {
      fmt::print(stderr, "pav {}: {}\n", name, e.what());
      return kExitBadInput;
    } catch (const CannotRun& e) {
      fmt::print(stderr, "pav {}: {}\n", name, e.what());
      return kExitCannotRun;
    } catch (const std::exception& e) {
      fmt::print(stderr, "pav {}: error: {}\n", name, e.what());
      return kExitFail;
    }
  }
  fmt::print(stderr, "pav: unknown command '{}'\n\n", name);
  usage();
  return kExitBadInput;
}
