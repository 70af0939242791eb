// SPDX-License-Identifier: Apache-2.0
// pav drift: does the decode error grow with the split ceiling? Runs a drift
// sweep (docs/drift.md, session::drift) and reports error figures, realized split counts, a
// paired growth test per cell, and the positive control.
#include "tools/backend_option.hpp"
#include "tools/kernel_option.hpp"

namespace {

using namespace pav;

int run(std::vector<std::string> args) {
  CLI::App app{"Measure whether the decode error grows with the split ceiling (docs/drift.md).", "drift"};
  session::DriftOptions o;
  cli::ReportOutput output;
  bool no_progress = false;
  app.add_option("--sweep", o.sweep_path, "sweep file (pav-drift-sweep/1); default: the built-in quick sweep, "
                                        "the same as fixtures/drift-quick.json")
      ->check(cli::non_empty());
  cli::add_backend_option(app, o.backend);
  output.add_options(app);  // the full report (pav-drift-report/1)
  app.add_option("--markdown", o.markdown_path, "write the report tables as Markdown to FILE")->check(cli::non_empty());
  app.add_option("--plot", o.plot_path, "write a PNG of error against ceiling (gnuplot; also OUT.gp and OUT.dat)")
      ->check(cli::non_empty());
  auto* opt_cells = app.add_option("--cells", o.cells, "run only these cells: names (120k/b8) or indices, comma-separated");
  app.add_option("--max-context", o.max_context, "run only cells whose context is at most N tokens")
      ->check(cli::integer_in(1, cli::kMaxContext))
      ->default_str("all");
  app.add_option("--seeds", o.seeds, "override the sweep's data seeds per cell")
      ->check(cli::integer_in(2, 10000))
      ->default_str("the sweep's");
  app.add_flag("--list", o.list, "print the cells, their lengths and the split counts of every arm; run nothing");
  app.add_flag("--no-progress", no_progress, "no progress bar on stderr");
  app.add_flag("--quiet", o.quiet, "print only the verdict line");
  cli::add_kernel_options(app, o.kernel);
  cli::refuse_json_with_value(args);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();
  o.cells_given = opt_cells->count() > 0;
  session::Io io = output.io(no_progress || o.quiet);
  return output.finish(session::drift(o, io), "drift");
}

}  // namespace

PAV_COMMAND("drift", "does the decode error grow with the split ceiling? paired sweep vs two references", run);
