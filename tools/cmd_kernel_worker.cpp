// SPDX-License-Identifier: Apache-2.0
// pav kernel-worker --kernel SPEC: serves a kernel under test over the worker
// protocol on stdin and stdout. --isolate starts this in a child process so a
// library that crashes takes only the child down.
#include <unistd.h>

#include <fmt/core.h>

#include "adapters/worker_server.hpp"
#include "tools/kernel_option.hpp"

namespace {

using namespace pav;

int run(std::vector<std::string> args) {
  CLI::App app{"Serve a kernel under test over the worker protocol on stdin/stdout (what --isolate runs).",
               "kernel-worker"};
  std::string spec;
  app.add_option("--kernel", spec, "the kernel to serve: lib:PATH.so [WORDS] or pav:cpu|pav:gpu [WORDS]")->required();
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  // The protocol owns stdout; whatever the kernel prints goes to stderr.
  const int protocol_out = ::dup(1);
  if (protocol_out < 0 || ::dup2(2, 1) < 0) throw cli::CannotRun("cannot set up stdout for the protocol");
  std::unique_ptr<adapters::KernelUnderTest> kernel = cli::open_kernel(spec, {}, /*for_cases=*/false);
  return adapters::serve_worker(*kernel, 0, protocol_out);
}

}  // namespace

PAV_COMMAND("kernel-worker", "serve a kernel over the worker protocol on stdin/stdout (what --isolate runs)", run);
