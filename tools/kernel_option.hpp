// SPDX-License-Identifier: Apache-2.0
#pragma once
// The options that name what a run works on, shared by the commands:
// --kernel and its companions (--isolate, --timeout, --exchange-dir;
// docs/verify-your-kernel.md), --save and --trust-case-kernel. They fill the
// session's option values; opening a kernel is the session's.
#include <string>

#include "properties/session/session.hpp"
#include "tools/command.hpp"
#include "tools/options.hpp"

namespace pav::cli {

using session::KernelOptions;
using session::open_kernel;

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
  app.add_option("--timeout", o.timeout, "seconds a call may take before it is stopped: a worker killed (exec:, --isolate), a Python kernel interrupted")
      ->check(CLI::Range(session::kMinTimeoutSeconds, session::kMaxTimeoutSeconds))
      ->capture_default_str();
  app.add_option("--exchange-dir", o.exchange_dir, "folder for the per-call .npy files (default /dev/shm, else $TMPDIR)")
      ->check(non_empty());
}

// --save DIR (default: the documented counterexample folder).
inline CLI::Option* add_save_option(CLI::App& app, std::string& dir) {
  dir = session::default_save_dir();
  return app.add_option("--save", dir,
                        "folder for counterexample case files (default: $PAV_COUNTEREXAMPLE_DIR, else "
                        "./counterexamples)")
      ->check(non_empty());
}

// --trust-case-kernel.
inline void add_trust_case_kernel_option(CLI::App& app, bool& trust) {
  app.add_flag("--trust-case-kernel", trust,
               "run the lib: or exec: kernel a case file records (it loads that library or runs that command); "
               "without it such a case is refused unless --kernel names the kernel");
}

}  // namespace pav::cli
