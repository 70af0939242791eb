// SPDX-License-Identifier: Apache-2.0
#include "kernels/dispatch/settings.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/dispatch/log.hpp"

namespace pav::kernels::dispatch {
namespace {

constexpr SettingInfo kSettings[] = {
    {"PAV_PLANNED_DECODE", "0",
     "1 routes decode calls to the planned kernel wherever the routing gate accepts them; 0 keeps "
     "every call on the uniform kernel and runs no gate check."},
    {"PAV_WORK_PLAN", "1",
     "With PAV_PLANNED_DECODE=1: 1 gives dense call sites a work plan minted at graph capture; 0 "
     "runs the planned kernel with its uniform split count and builds no plan."},
    {"PAV_PLAN_POLICY", "proportional",
     "Planner policy of the plans minted at graph capture: proportional (partitions in proportion to "
     "each request's length) or balanced (cost-aware counts, a second wave when one wave idles); the "
     "host and the device refresh both follow it."},
};

bool parse_flag(const char* name, const char* value, bool fallback) {
  if (value == nullptr || value[0] == '\0') return fallback;
  const std::string v(value);
  if (v == "0") return false;
  if (v == "1") return true;
  throw std::invalid_argument(std::string(name) + "='" + v + "': expected 0 or 1");
}

PlanPolicy parse_policy(const char* name, const char* value, PlanPolicy fallback) {
  if (value == nullptr || value[0] == '\0') return fallback;
  const std::string v(value);
  if (v == "proportional") return PlanPolicy::proportional;
  if (v == "balanced") return PlanPolicy::balanced;
  throw std::invalid_argument(std::string(name) + "='" + v + "': expected proportional or balanced");
}

}  // namespace

LogSink stderr_log_sink() {
  return [](std::string_view line) {
    std::fprintf(stderr, "pav: %.*s\n", int(line.size()), line.data());
  };
}

std::span<const SettingInfo> setting_table() { return kSettings; }

Settings settings_from_values(const char* planned_decode, const char* work_plan, const char* plan_policy) {
  Settings s;
  s.planned_decode = parse_flag("PAV_PLANNED_DECODE", planned_decode, s.planned_decode);
  s.work_plan = parse_flag("PAV_WORK_PLAN", work_plan, s.work_plan);
  s.plan_policy = parse_policy("PAV_PLAN_POLICY", plan_policy, s.plan_policy);
  return s;
}

Settings settings_from_env() {
  return settings_from_values(std::getenv("PAV_PLANNED_DECODE"), std::getenv("PAV_WORK_PLAN"),
                              std::getenv("PAV_PLAN_POLICY"));
}

const Settings& startup_settings() {
  static const Settings s = settings_from_env();
  return s;
}

}  // namespace pav::kernels::dispatch
