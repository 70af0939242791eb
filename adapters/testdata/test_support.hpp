// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the adapter tests share: a scratch folder of this test process, the
// bytes of a file, and the small case they run through kernels.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "properties/case/host_case.hpp"

namespace pav::adapters::fixture {

// The folder NAME inside PREFIX-PID under the system's temporary folder, created.
inline std::filesystem::path scratch_dir(const std::string& prefix, const std::string& name) {
  std::filesystem::path p = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid())) / name;
  std::filesystem::create_directories(p);
  return p;
}

// The whole file ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Three sequences (300, 17 and 0 tokens), q_len 2, 2 KV heads of group 3, head
// dim 64, block size 16, per-token scales, the uniform path: 300 tokens arm the
// fault fixtures' faults (--min-len 300).
inline props::CaseSpec small_spec() {
  props::CaseSpec s;
  s.lens = {300, 17, 0};
  s.q_len = 2;
  s.hkv = 2;
  s.group = 3;
  s.head_dim = 64;
  s.block_size = 16;
  s.scales = props::ScaleKind::per_token;
  s.path = props::Path::uniform;
  s.seed = 11;
  return s;
}

// The same with contexts of 17 and 5 tokens: no fault fixture's fault is armed.
inline props::CaseSpec short_spec() {
  props::CaseSpec s = small_spec();
  s.lens = {17, 5};
  return s;
}

}  // namespace pav::adapters::fixture
