// SPDX-License-Identifier: Apache-2.0
// pav replay CASE.json: runs saved cases through the kernel they were found
// with (or the one --kernel names) and the reference, prints the error figures
// and a verdict (session::replay, the path pav fuzz --replay takes too).
#include "tools/backend_option.hpp"
#include "tools/kernel_option.hpp"

namespace {

using namespace pav;

int run(std::vector<std::string> args) {
  CLI::App app{"Replay a case file: run its decode call and the reference, compare, give a verdict.", "replay"};
  session::ReplayOptions o;
  cli::ReportOutput output;
  app.add_option("case", o.files, "case file(s) in the pav-case/1 JSON format")->required()->check(CLI::ExistingFile);
  cli::add_backend_option(app, o.backend);
  app.add_option("--path", o.path_override, "override the case's kernel path: planned or uniform")
      ->check(CLI::IsMember({"planned", "uniform"}));
  cli::add_kernel_options(app, o.kernel);
  cli::add_trust_case_kernel_option(app, o.trust_case_kernel);
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  o.timeout_given = app.get_option("--timeout")->count() > 0;
  output.check_writable();
  return output.finish(session::replay(o, output.io(true)), "replay");
}

}  // namespace

PAV_COMMAND("replay", "run a saved case through a kernel and the reference, and give a verdict", run);
