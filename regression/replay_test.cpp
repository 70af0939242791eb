// SPDX-License-Identifier: Apache-2.0
// Replays every saved counterexample under fixtures/counterexamples/ through
// the property its "meta" names (a file without one replays as a decode case,
// as `pav replay` does). A committed counterexample documents a fixed defect, so
// each must pass on the current code. One test per file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "common/test_paths.hpp"
#include "properties/case/case_format.hpp"
#include "properties/engine/fuzz_engine.hpp"
#include "properties/checks/replay.hpp"

#ifndef PAV_SOURCE_DIR
#error "PAV_SOURCE_DIR must name the source tree (set by regression/CMakeLists.txt)"
#endif

namespace {

namespace fs = std::filesystem;

fs::path counterexample_dir() { return fs::path(PAV_SOURCE_DIR) / "fixtures" / "counterexamples"; }

// The case files, sorted; empty when the directory is missing (the listing test
// reports that as a failure).
std::vector<std::string> counterexample_files() {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(counterexample_dir(), ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".json") out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class CounterexampleReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(CounterexampleReplay, PassesOnTheCurrentCode) {
  const std::string path = (counterexample_dir() / GetParam()).string();
  std::string property;
  pav::props::fuzz::Verdict v;
  try {
    v = pav::props::fuzz::replay_case_file(path, {}, &property);
  } catch (const pav::props::CaseError& e) {
    FAIL() << "malformed case file: " << e.what();
  }
  RecordProperty("property", property);
  EXPECT_TRUE(v.passed) << path << " (" << property << "): " << v.message;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = fs::path(info.param).stem().string();
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CounterexampleReplay, ::testing::ValuesIn(counterexample_files()), test_name);
// An empty directory is a valid state (no defect found yet); the listing test
// below reports it instead of gtest's "no instantiation" failure.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CounterexampleReplay);

}  // namespace

// Always registered: the directory must exist (with its README) and the count of
// files replayed is reported, zero included.
TEST(CounterexampleFiles, DirectoryIsListed) {
  const fs::path dir = counterexample_dir();
  ASSERT_TRUE(fs::is_directory(dir)) << dir << " is missing: it holds the saved counterexamples replayed here";
  EXPECT_TRUE(fs::is_regular_file(dir / "README.md")) << dir << " has no README.md";
  const auto files = counterexample_files();
  RecordProperty("counterexample_files", int(files.size()));
  std::printf("%zu counterexample file(s) in %s%s\n", files.size(), dir.string().c_str(),
              files.empty() ? ": nothing to replay" : "");
  for (const auto& f : files) std::printf("  %s\n", f.c_str());
}
