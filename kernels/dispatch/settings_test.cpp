// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kernels/dispatch/settings.hpp"

using namespace pav::kernels::dispatch;

TEST(Settings, DefaultsAreKernelOffPlanOn) {
  const Settings s = settings_from_values(nullptr, nullptr);
  EXPECT_FALSE(s.planned_decode);
  EXPECT_TRUE(s.work_plan);
  EXPECT_FALSE(s.plans_enabled());
  const Settings e = settings_from_values("", "");
  EXPECT_FALSE(e.planned_decode);
  EXPECT_TRUE(e.work_plan);
}

TEST(Settings, ParsesZeroAndOne) {
  EXPECT_TRUE(settings_from_values("1", nullptr).plans_enabled());
  EXPECT_FALSE(settings_from_values("1", "0").plans_enabled());
  EXPECT_TRUE(settings_from_values("1", "0").planned_decode);
  EXPECT_FALSE(settings_from_values("0", "1").planned_decode);
}

TEST(Settings, MalformedValueNamesTheVariable) {
  for (const char* bad : {"yes", "2", "true", " 1", "on"}) {
    try {
      (void)settings_from_values(bad, nullptr);
      FAIL() << "accepted PAV_PLANNED_DECODE=" << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("PAV_PLANNED_DECODE='" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW((void)settings_from_values("1", "maybe"), std::invalid_argument);
}

TEST(Settings, TableListsBothVariablesWithTheirDefaults) {
  const auto t = setting_table();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].env, "PAV_PLANNED_DECODE");
  EXPECT_EQ(t[0].default_value, "0");
  EXPECT_EQ(t[1].env, "PAV_WORK_PLAN");
  EXPECT_EQ(t[1].default_value, "1");
  EXPECT_EQ(t[2].env, "PAV_PLAN_POLICY");
  EXPECT_EQ(t[2].default_value, "proportional");
  // The documented defaults are the parsed defaults.
  const Settings d = settings_from_values(nullptr, nullptr, nullptr);
  EXPECT_EQ(d.planned_decode, t[0].default_value == "1");
  EXPECT_EQ(d.work_plan, t[1].default_value == "1");
  EXPECT_EQ(d.plan_policy, pav::kernels::PlanPolicy::proportional);
}

TEST(Settings, PlanPolicyParsesBothNamesAndRejectsOthers) {
  EXPECT_EQ(settings_from_values(nullptr, nullptr, "balanced").plan_policy, pav::kernels::PlanPolicy::balanced);
  EXPECT_EQ(settings_from_values(nullptr, nullptr, "proportional").plan_policy, pav::kernels::PlanPolicy::proportional);
  EXPECT_EQ(settings_from_values(nullptr, nullptr, "").plan_policy, pav::kernels::PlanPolicy::proportional);
  for (const char* bad : {"Balanced", "balanced ", "uniform", "1", "prop"}) {
    try {
      (void)settings_from_values(nullptr, nullptr, bad);
      FAIL() << "accepted PAV_PLAN_POLICY=" << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("PAV_PLAN_POLICY='" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
}
