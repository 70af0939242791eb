// pav fuzz: long property runs that find, shrink, save and replay. See
// docs/fuzzing.md, "Properties" and "Throughput".
#include <fmt/core.h>

#include <charconv>
#include <random>

#include "properties/case_format.hpp"
#include "properties/fuzz.hpp"
#include "tools/backend_option.hpp"

namespace {

using namespace pav;
namespace fz = pav::props::fuzz;

// "I/N" with 0 <= I < N.
void parse_shard(const std::string& text, int& index, int& count) {
  const auto slash = text.find('/');
  auto number = [&](std::string_view s, int& out) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), index) ||
      !number(std::string_view(text).substr(slash + 1), count) || count < 1 || index < 0 || index >= count)
    throw cli::BadInput("--shard: expected I/N with 0 <= I < N, got '" + text + "'");
}

int list_properties() {
  for (const auto& p : fz::properties()) fmt::print("{:<18} {}\n", p.name, p.summary);
  return cli::kExitOk;
}

int replay_files(const std::vector<std::string>& files, kernels::Backend backend) {
  int failures = 0;
  for (const auto& file : files) {
    std::string property;
    fz::Verdict v;
    try {
      v = fz::replay_case_file(file, {backend}, &property);
    } catch (const props::CaseError& e) {
      throw cli::BadInput(e.what());
    }
    fmt::print("{}: {} ({} backend): {}\n", file, property, cli::backend_name(backend),
               v.passed ? "PASS" : "FAIL: " + v.message);
    if (!v.passed) ++failures;
  }
  if (files.size() > 1) fmt::print("{} of {} cases passed\n", files.size() - failures, files.size());
  return failures ? cli::kExitFail : cli::kExitOk;
}

int run(std::vector<std::string> args) {
  CLI::App app{"Run the property generators at scale: stop at the first failure or the budget, shrink it, and "
               "save the minimal counterexample as a case file.",
               "fuzz"};
  double minutes = 0;
  int64_t cases = 0;
  uint64_t seed = 0;
  std::vector<std::string> names;
  std::string backend_name = "auto";
  std::string save_dir = fz::kDefaultSaveDir;
  int jobs = 1;
  std::string shard = "0/1";
  bool list = false, quiet = false, verbose = false;
  std::vector<std::string> replay;
  int64_t shrink_tries = fz::ShrinkLimits{}.max_tries;
  double shrink_minutes = fz::ShrinkLimits{}.max_seconds / 60;
  auto* opt_minutes = app.add_option("--minutes", minutes, "time budget for all selected properties together")
                          ->check(CLI::PositiveNumber);
  auto* opt_cases = app.add_option("--cases", cases, "cases per property")->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  auto* opt_seed = app.add_option("--seed", seed, "base seed (default: drawn at random, and printed)");
  app.add_option("--property", names, "property to run (repeatable; default: all; see --list)");
  app.add_option("--backend", backend_name, "cpu, gpu, or auto (gpu when a device is present)")
      ->check(CLI::IsMember({"cpu", "gpu", "auto"}));
  app.add_option("--save", save_dir, "directory for the counterexample file")->capture_default_str();
  app.add_option("--jobs", jobs, "worker threads, each on its own seed stream")->check(CLI::Range(1, 1024));
  app.add_option("--shard", shard, "I/N: run the I-th of N disjoint seed streams (seed = base + k*N + I)");
  app.add_flag("--list", list, "name every property and exit");
  app.add_option("--replay", replay, "re-run saved case files through the property their meta names")
      ->check(CLI::ExistingFile);
  app.add_option("--shrink-tries", shrink_tries, "most property evaluations while shrinking")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  app.add_option("--shrink-minutes", shrink_minutes, "most time spent shrinking")->check(CLI::NonNegativeNumber);
  app.add_flag("--quiet", quiet, "no progress line");
  app.add_flag("--verbose", verbose, "print every case's seed as it runs");
  if (int rc = cli::parse(app, args); rc >= 0) return rc;

  if (list) return list_properties();
  const kernels::Backend backend = cli::pick_backend(backend_name);
  if (!replay.empty()) return replay_files(replay, backend);

  fz::FuzzOptions o;
  parse_shard(shard, o.shard_index, o.shard_count);
  std::vector<const fz::Property*> selected;
  if (names.empty()) {
    for (const auto& p : fz::properties()) selected.push_back(&p);
  } else {
    for (const auto& n : names) {
      const fz::Property* p = fz::find_property(n);
      if (!p) {
        std::string known;
        for (const auto& q : fz::properties()) known += (known.empty() ? "" : ", ") + q.name;
        throw cli::BadInput("--property: unknown property '" + n + "' (" + known + ")");
      }
      selected.push_back(p);
    }
  }
  if (opt_seed->count() == 0) seed = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  o.seed = seed;
  o.cases = cases;
  o.minutes = minutes;
  if (opt_cases->count() == 0 && opt_minutes->count() == 0) o.minutes = 1;
  o.jobs = jobs;
  o.ctx.backend = backend;
  o.save_dir = save_dir;
  o.shrink.max_tries = shrink_tries;
  o.shrink.max_seconds = shrink_minutes * 60;
  o.progress = !quiet;
  o.verbose = verbose;

  const fz::FuzzReport r = fz::run_fuzz(o, selected, stdout, stderr);
  if (r.passed()) {
    fmt::print("\npav fuzz: PASS (seed {}, shard {}/{})\n", o.seed, o.shard_index, o.shard_count);
    return cli::kExitOk;
  }
  fmt::print("\npav fuzz: FAIL {} (seed {}){}\n", r.failure->property, r.failure->seed,
             r.saved_path.empty() ? "" : "; counterexample " + r.saved_path);
  return cli::kExitFail;
}

}  // namespace

PAV_COMMAND("fuzz", "long property runs: find a failure, shrink it, save it as a case file, replay it", run);
