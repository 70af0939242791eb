// SPDX-License-Identifier: Apache-2.0
// gtest main of the GPU suites: binds the process to the device CTest's
// resource allocation assigned (ci/gpu.sh), and refuses to run without one:
// a GPU test that cannot run fails, it is never reported as passed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "kernels/hip/gpu_backend.hpp"
#include "kernels/hip/tests/gpu_test_support.hpp"

int main(int argc, char** argv) {
  // Test discovery lists tests at build time, where there may be no device.
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strstr(argv[i], "gtest_list_tests") != nullptr;
  ::testing::InitGoogleTest(&argc, argv);
  if (!listing) {
    if (!pav::kernels::gpu::available()) {
      std::fprintf(stderr, "gpu_test: no GPU device or driver; the GPU suites cannot run here\n");
      return 1;
    }
    const int device = pav::kernels::gpu::testing::select_ctest_device();
    std::printf("gpu_test: device %d of %d: %s, %d multiprocessors\n", device,
                pav::kernels::gpu::device_count(), pav::kernels::gpu::device_name().c_str(),
                pav::kernels::gpu::multiprocessor_count());
  }
  return RUN_ALL_TESTS();
}
