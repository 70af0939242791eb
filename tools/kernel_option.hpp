// SPDX-License-Identifier: Apache-2.0
#pragma once
// --kernel and its companions (--isolate, --timeout, --exchange-dir), shared by
// the commands that run a kernel under test (docs/verify-your-kernel.md).
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/kernel.hpp"
#include "properties/kernel_gen.hpp"
#include "tools/command.hpp"
#include "tools/options.hpp"

namespace pav::cli {

struct KernelOptions {
  std::vector<std::string> specs;  // --kernel, in the order given
  bool isolate = false;
  double timeout = 60;
  std::string exchange_dir;
};

// many: --kernel may be given twice (two kernels compared on the same cases).
inline void add_kernel_options(CLI::App& app, KernelOptions& o, bool many = false) {
  auto* k = app.add_option("--kernel", o.specs,
                           many ? "kernel under test: pav:cpu, pav:gpu, lib:PATH.so [WORDS], exec:'CMD ARGS' "
                                  "(twice: compare two kernels on the same cases)"
                                : "kernel under test: pav:cpu, pav:gpu, lib:PATH.so [WORDS], exec:'CMD ARGS'");
  // One value per --kernel, even where positionals follow (pav replay --kernel SPEC CASE --json):
  // CLI11 would otherwise take every word up to the next option as the option's.
  k->allow_extra_args(false);
  if (!many) k->expected(1);
  app.add_flag("--isolate", o.isolate, "run a lib: kernel in a child process (a crash becomes a failure verdict)");
  app.add_option("--timeout", o.timeout, "seconds a worker may take per call before it is killed (exec:, --isolate)")
      ->check(CLI::Range(0.01, 86400.0))
      ->capture_default_str();
  app.add_option("--exchange-dir", o.exchange_dir, "folder for the per-call .npy files (default /dev/shm, else $TMPDIR)")
      ->check(non_empty());
}

// Opens one kernel; a bad --kernel is BadInput (exit 2), a kernel that cannot
// run here is CannotRun (exit 3). for_cases: pav will generate cases for it, so
// a description it cannot generate for is BadInput too.
inline std::unique_ptr<adapters::KernelUnderTest> open_kernel(const std::string& spec, const KernelOptions& o,
                                                              bool for_cases = true) {
  adapters::OpenOptions opt;
  opt.isolate = o.isolate;
  opt.timeout_seconds = o.timeout;
  opt.exchange_dir = o.exchange_dir;
  try {
    std::unique_ptr<adapters::KernelUnderTest> k = adapters::open_kernel(spec, opt);
    if (for_cases)
      if (auto why = props::generation_problem(k->description()))
        throw BadInput("--kernel " + spec + ": pav cannot generate calls for this kernel: " + *why);
    return k;
  } catch (const adapters::KernelSpecError& e) {
    throw BadInput(e.what());
  } catch (const adapters::KernelUnavailable& e) {
    throw CannotRun(e.what());
  }
}

// What a saved case records, beside the kernel's identity, to open it again
// the same way (FuzzOptions::kernel_run, meta.kernel in the case file): the
// isolation, the per-call timeout and the working directory a relative path in
// the spec is relative to.
inline nlohmann::json kernel_run_record(const KernelOptions& o) {
  std::error_code ec;
  const std::filesystem::path cwd = std::filesystem::current_path(ec);
  return {{"isolate", o.isolate}, {"timeout_seconds", o.timeout}, {"cwd", ec ? std::string() : cwd.string()}};
}

// "kernel    NAME VERSION via ADAPTER (SPEC)" and what it supports.
inline void print_kernel(std::FILE* f, const adapters::KernelUnderTest& k, const char* label = "kernel") {
  fmt::print(f, "{:<9} {}\n{:<9} {}\n", label, adapters::identity(k), "", adapters::summary(k.description()));
}

}  // namespace pav::cli
