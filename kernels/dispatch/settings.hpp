#pragma once
// The two opt-ins of the planned decode path (REFERENCE section 8). They are
// read from the environment once per process, never per call, and can be
// overridden in code (Router::override_settings, MetadataBuilder's constructor).
#include <span>
#include <string_view>

#include "kernels/planner.hpp"

namespace pav::kernels::dispatch {

struct Settings {
  bool planned_decode = false;  // PAV_PLANNED_DECODE: route decode calls to the planned kernel where the gate accepts
  bool work_plan = true;        // PAV_WORK_PLAN: give dense call sites a work plan (only with planned_decode)
  // PAV_PLAN_POLICY: the planner policy of minted plans (PlanCacheConfig::policy
  // takes it; host and device refreshes follow it).
  PlanPolicy plan_policy = PlanPolicy::proportional;
  bool plans_enabled() const { return planned_decode && work_plan; }
};

struct SettingInfo {
  std::string_view env;            // variable name
  std::string_view default_value;  // "0" or "1"
  std::string_view description;
};
// Every setting this module reads; README, "Routing, plan lifecycle and plan freshness" documents each (a test checks).
std::span<const SettingInfo> setting_table();

// Settings from the variables' values (nullptr or "" = unset: the default).
// The flags accept "0" and "1", the policy "proportional" and "balanced";
// anything else throws std::invalid_argument naming the variable and the value.
Settings settings_from_values(const char* planned_decode, const char* work_plan, const char* plan_policy = nullptr);

// Reads PAV_PLANNED_DECODE, PAV_WORK_PLAN and PAV_PLAN_POLICY now.
Settings settings_from_env();

// settings_from_env(), evaluated once per process on first use.
const Settings& startup_settings();

}  // namespace pav::kernels::dispatch
