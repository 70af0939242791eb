// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kernels/dispatch/device_visibility.hpp"

using namespace pav::kernels::dispatch;

namespace {
VisibilityEnv env(std::optional<std::string> rocr, std::optional<std::string> hip,
                  std::optional<std::string> cuda = std::nullopt) {
  return VisibilityEnv{std::move(rocr), std::move(hip), std::move(cuda)};
}
std::string error_of(int logical, const VisibilityEnv& e) {
  try {
    (void)physical_device_index(logical, e);
  } catch (const std::invalid_argument& ex) {
    return ex.what();
  }
  return "";
}
}  // namespace

TEST(DeviceVisibility, NothingSetIsIdentity) {
  EXPECT_EQ(physical_device_index(3, env(std::nullopt, std::nullopt)), 3);
  EXPECT_FALSE(visible_devices(env(std::nullopt, std::nullopt)).has_value());
}

// The recipe that set ROCR alone: logical 2, 3 are physical 4, 5.
TEST(DeviceVisibility, RocrAloneRenumbers) {
  const auto e = env("0,1,4,5", std::nullopt);
  EXPECT_EQ(physical_device_index(0, e), 0);
  EXPECT_EQ(physical_device_index(2, e), 4);
  EXPECT_EQ(physical_device_index(3, e), 5);
  EXPECT_NE(error_of(4, e).find("not visible"), std::string::npos);
}

TEST(DeviceVisibility, HipIndexesIntoTheRocrList) {
  const auto e = env("0,1,4,5", "2,3");
  EXPECT_EQ(physical_device_index(0, e), 4);
  EXPECT_EQ(physical_device_index(1, e), 5);
  // Both set to the same physical list: HIP's 4 and 5 are past the ROCR list,
  // so only two devices are visible (what the runtime reports too).
  const auto twice = env("0,1,4,5", "0,1,4,5");
  ASSERT_TRUE(visible_devices(twice).has_value());
  EXPECT_EQ(*visible_devices(twice), (std::vector<int>{0, 1}));
  const std::string msg = error_of(2, twice);
  EXPECT_NE(msg.find("ROCR_VISIBLE_DEVICES='0,1,4,5'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("HIP_VISIBLE_DEVICES='0,1,4,5'"), std::string::npos) << msg;
}

TEST(DeviceVisibility, HipOrCudaAloneIndexPhysicalDevices) {
  EXPECT_EQ(physical_device_index(1, env(std::nullopt, "6,7")), 7);
  EXPECT_EQ(physical_device_index(1, env(std::nullopt, std::nullopt, "2,3")), 3);
  // HIP wins over CUDA when both are set.
  EXPECT_EQ(physical_device_index(0, env(std::nullopt, "5", "2")), 5);
  // CUDA composes with ROCR like HIP does.
  EXPECT_EQ(physical_device_index(0, env("4,5,6", std::nullopt, "2")), 6);
}

TEST(DeviceVisibility, EmptyValueHidesEverything) {
  EXPECT_NE(error_of(0, env(std::nullopt, "")).find("0 device(s) visible"), std::string::npos);
  EXPECT_NE(error_of(0, env("", std::nullopt)).find("not visible"), std::string::npos);
}

TEST(DeviceVisibility, MalformedValuesGiveAClearError) {
  struct Bad {
    VisibilityEnv e;
    const char* expect;
  };
  const Bad cases[] = {
      {env("0,,1", std::nullopt), "ROCR_VISIBLE_DEVICES='0,,1': entry 1 '' is empty"},
      {env("0,x", std::nullopt), "entry 1 'x' is not a non-negative device index"},
      {env(std::nullopt, "-1"), "HIP_VISIBLE_DEVICES='-1': entry 0 '-1' is not a non-negative"},
      {env(std::nullopt, std::nullopt, "GPU-8f2c"), "CUDA_VISIBLE_DEVICES='GPU-8f2c': entry 0 'GPU-8f2c' is a UUID"},
      {env("1,1", std::nullopt), "repeats device 1"},
      {env("12345678", std::nullopt), "out of range"},
  };
  for (const Bad& b : cases) {
    const std::string msg = error_of(0, b.e);
    EXPECT_NE(msg.find(b.expect), std::string::npos) << "got: " << msg;
  }
  EXPECT_NE(error_of(-1, env(std::nullopt, std::nullopt)).find("negative"), std::string::npos);
}

TEST(DeviceVisibility, SpacesAroundEntriesAreAccepted) {
  EXPECT_EQ(physical_device_index(1, env(" 3 , 9 ", std::nullopt)), 9);
}
