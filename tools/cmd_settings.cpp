// SPDX-License-Identifier: Apache-2.0
// pav settings: the routing settings the kernels' dispatch reads at start-up,
// their defaults, what they do and the values this environment gives them.
// `--markdown` prints the table docs/lifecycle.md carries (ci/gen-docs.sh).
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/dispatch/settings.hpp"
#include "tools/command.hpp"

namespace {

using namespace pav::kernels::dispatch;

int run(std::vector<std::string> args) {
  CLI::App app{"The routing settings (environment variables read once at start-up), their defaults and "
               "the values they have here.",
               "settings"};
  bool markdown = false;
  pav::cli::ReportOutput output;
  app.add_flag("--markdown", markdown, "print the documentation table (variable, default, meaning)");
  output.add_options(app);
  if (int rc = pav::cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();

  if (markdown) {
    fmt::print("| variable | default | meaning |\n|---|---|---|\n");
    for (const SettingInfo& s : setting_table())
      fmt::print("| `{}` | `{}` | {} |\n", s.env, s.default_value, s.description);
    return pav::cli::kExitOk;
  }
  // The values as this process sees them, checked together as start-up does:
  // the message of a malformed one names the variable and the value.
  std::string bad;
  try {
    settings_from_env();
  } catch (const std::invalid_argument& e) {
    bad = e.what();
  }
  nlohmann::json j = nlohmann::json::array();
  for (const SettingInfo& s : setting_table()) {
    const std::string env(s.env);
    const char* value = std::getenv(env.c_str());
    j.push_back({{"name", env},
                 {"default", std::string(s.default_value)},
                 {"value", value ? nlohmann::json(value) : nlohmann::json(nullptr)},
                 {"description", std::string(s.description)}});
  }
  if (output.text()) {
    fmt::print("{:<20} {:<13} {:<13} {}\n", "setting", "default", "value", "meaning");
    for (const auto& s : j)
      fmt::print("{:<20} {:<13} {:<13} {}\n", s["name"].get<std::string>(), s["default"].get<std::string>(),
                 s["value"].is_null() ? "(unset)" : s["value"].get<std::string>(),
                 s["description"].get<std::string>());
  }
  if (!bad.empty()) fmt::print(stderr, "pav settings: {}\n", bad);
  nlohmann::ordered_json report = pav::cli::report_header("settings");
  report["settings"] = j;
  report["error"] = bad.empty() ? nlohmann::json(nullptr) : nlohmann::json(bad);
  return output.finish(report, bad.empty() ? pav::cli::kExitOk : pav::cli::kExitBadInput, "settings");
}

}  // namespace

PAV_COMMAND("settings", "the routing settings, their defaults and their values here", run);
