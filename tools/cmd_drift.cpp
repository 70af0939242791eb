// pav drift: does the decode error grow with the split ceiling? Runs a drift
// sweep (docs/drift.md) and reports error figures, realized split counts, a
// paired growth test per cell, and the positive control.
#include <fmt/core.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "kernels/validate.hpp"
#include "properties/drift_run.hpp"
#include "properties/drift_run_plot.hpp"
#include "properties/drift_run_report.hpp"
#include "tools/backend_option.hpp"

namespace {

using namespace pav;

// --cells: comma-separated cell names ("120k/b8") or indices ("0,3").
std::vector<props::DriftCell> select_cells(const std::vector<props::DriftCell>& all, const std::string& list,
                                           int64_t max_context) {
  std::vector<props::DriftCell> out;
  std::set<int> wanted;
  if (!list.empty()) {
    size_t pos = 0;
    while (pos <= list.size()) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      const std::string item = list.substr(pos, comma - pos);
      pos = comma + 1;
      if (item.empty()) continue;
      int found = -1;
      for (const auto& c : all)
        if (c.name == item || std::to_string(c.index) == item) found = c.index;
      if (found < 0) {
        std::string names;
        for (const auto& c : all) names += (names.empty() ? "" : ", ") + fmt::format("{} ({})", c.name, c.index);
        throw cli::BadInput(fmt::format("--cells: no cell '{}' in this sweep (cells: {})", item, names));
      }
      wanted.insert(found);
    }
  }
  for (const auto& c : all)
    if ((wanted.empty() || wanted.count(c.index)) && (max_context <= 0 || c.context <= max_context)) out.push_back(c);
  if (out.empty()) throw cli::BadInput("--cells / --max-context: no cell of the sweep is left to run");
  return out;
}

void write_text(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path);
  if (!f) throw cli::BadInput(fmt::format("{}: cannot write {}", what, path));
  f << text;
}

int run(std::vector<std::string> args) {
  CLI::App app{"Measure whether the decode error grows with the split ceiling (docs/drift.md).", "drift"};
  std::string sweep_path, backend_name = "auto", json_out, md_out, plot_out, cells;
  int64_t max_context = 0;
  int seeds = 0;
  bool list = false, no_progress = false, quiet = false;
  app.add_option("--sweep", sweep_path, "sweep file (pav-drift-sweep/1); default: the built-in quick sweep, "
                                        "the same as fixtures/drift-quick.json");
  app.add_option("--backend", backend_name, "cpu, gpu, or auto (gpu when a device is present)")
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}));
  app.add_option("--json", json_out, "write the full report as JSON (pav-drift-report/1)");
  app.add_option("--markdown", md_out, "write the report tables as Markdown");
  app.add_option("--plot", plot_out, "write a PNG of error against ceiling (gnuplot; also OUT.gp and OUT.dat)");
  app.add_option("--cells", cells, "run only these cells: names (120k/b8) or indices, comma-separated");
  app.add_option("--max-context", max_context, "run only cells whose context is at most N tokens")->check(CLI::Range(int64_t(1), int64_t(1) << 31));
  app.add_option("--seeds", seeds, "override the sweep's data seeds per cell")->check(CLI::Range(2, 10000));
  app.add_flag("--list", list, "print the cells, their lengths and the split counts of every arm; run nothing");
  app.add_flag("--no-progress", no_progress, "no progress bar on stderr");
  app.add_flag("--quiet", quiet, "print only the verdict line");
  if (int rc = cli::parse(app, args); rc >= 0) return rc;

  props::DriftSweep sweep;
  try {
    sweep = sweep_path.empty() ? props::builtin_quick_sweep() : props::load_drift_sweep(sweep_path);
  } catch (const std::invalid_argument& e) {
    throw cli::BadInput(e.what());
  }
  if (seeds > 0) sweep.seeds = seeds;
  const std::vector<props::DriftCell> chosen = select_cells(props::drift_cells(sweep), cells, max_context);

  if (list) {
    const auto arms = props::drift_arms(sweep);
    for (const auto& c : chosen) {
      fmt::print("cell {} {}: Hkv {}, G {}, {} requests, {} tokens\n  lens {}\n", c.index, c.name, c.heads.hkv,
                 c.heads.group, c.lens.size(), c.tokens, fmt::join(c.lens, ","));
      for (const auto& a : arms) {
        if (a.kind == props::ArmKind::uniform) {
          const int splits = kernels::dense_decode_splits(int64_t(c.lens.size()), c.heads.hkv, sweep.cu);
          fmt::print("  {:<20} uniform splits {}\n", a.name, splits);
          continue;
        }
        kernels::WorkPlan plan({int64_t(c.lens.size()), c.heads.hkv, sweep.cu, a.ceiling, sweep.workgroup_budget});
        plan.refresh(c.lens.data());
        std::vector<int64_t> counts;
        for (size_t b = 0; b < c.lens.size(); ++b) counts.push_back(plan.reduce_info()[2 * b + 1]);
        const props::SplitCounts s = props::split_counts(counts);
        fmt::print("  {:<20} capacity {:>5}, splits min/median/max {}/{:g}/{}\n", a.name, plan.capacity(), s.min,
                   s.median, s.max);
      }
    }
    return cli::kExitOk;
  }

  const kernels::Backend backend = cli::pick_backend(backend_name);
  props::DriftRunOptions opt;
  opt.backend = backend;
  const bool progress = !no_progress && !quiet;
  if (progress) opt.progress = [](const props::DriftProgress& p) {
    fmt::print(stderr, "{}", props::progress_line(p));
    std::fflush(stderr);
  };
  if (!quiet)
    fmt::print("pav drift: sweep {} ({} cells of {}), backend {}, {} seeds\n", sweep.name, chosen.size(),
               props::drift_cells(sweep).size(), cli::backend_name(backend), sweep.seeds);
  props::DriftReport rep;
  try {
    rep = props::run_drift(sweep, chosen, opt);
  } catch (const kernels::RejectError& e) {
    if (progress) fmt::print(stderr, "\n");
    throw cli::BadInput(std::string("the kernel rejected a call of this sweep: ") + e.what());
  }
  if (progress) fmt::print(stderr, "\n");

  const std::string md = props::report_markdown(rep);
  if (!quiet) fmt::print("\n{}", md);
  else fmt::print("{}\n", rep.verdict);
  if (!md_out.empty()) write_text(md_out, md, "--markdown");
  if (!json_out.empty()) write_text(json_out, props::report_json(rep).dump(2) + "\n", "--json");
  int rc = rep.passed ? cli::kExitOk : cli::kExitFail;
  if (!plot_out.empty()) {
    const props::PlotOutcome po = props::write_plot(rep, plot_out);
    if (po.ok) {
      if (!quiet) fmt::print("plot: {} (script {}, data {})\n", plot_out, po.script, po.data);
    } else {
      fmt::print(stderr, "pav drift: --plot: {}\n", po.message);
      rc = cli::kExitFail;
    }
  }
  return rc;
}

}  // namespace

PAV_COMMAND("drift", "does the decode error grow with the split ceiling? paired sweep vs two references", run);
