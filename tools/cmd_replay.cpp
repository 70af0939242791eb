// SPDX-License-Identifier: Apache-2.0
// pav replay CASE.json: runs saved cases through the kernel they were found
// with (or the one --kernel names) and the reference, prints the error figures
// and a verdict. The same path as pav fuzz --replay (replay_case_files).
#include "tools/backend_option.hpp"
#include "tools/fuzz_output.hpp"
#include "tools/kernel_option.hpp"

namespace {

using namespace pav;

int run(std::vector<std::string> args) {
  CLI::App app{"Replay a case file: run its decode call and the reference, compare, give a verdict.", "replay"};
  std::vector<std::string> files;
  cli::ReplayOptions o;
  cli::ReportOutput output;
  app.add_option("case", files, "case file(s) in the pav-case/1 JSON format")->required()->check(CLI::ExistingFile);
  cli::add_backend_option(app, o.backend_name);
  app.add_option("--path", o.path_override, "override the case's kernel path: planned or uniform")
      ->check(CLI::IsMember({"planned", "uniform"}));
  cli::add_kernel_options(app, o.kernel);
  cli::add_trust_case_kernel_option(app, o);
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  o.timeout_given = app.get_option("--timeout")->count() > 0;
  return cli::replay_case_files("replay", "cases", files, o, output);
}

}  // namespace

PAV_COMMAND("replay", "run a saved case through a kernel and the reference, and give a verdict", run);
