// SPDX-License-Identifier: Apache-2.0
// pav gate: the routing gate from the command line. `pav gate CASE.json` prints
// the route a decode call takes (and, on reject, the clause and message);
// `pav gate --clauses` lists every hard-reject clause of the planned kernel.
#include <fmt/core.h>

#include <optional>
#include <string>

#include "kernels/dispatch/route.hpp"
#include "kernels/validate.hpp"
#include "properties/case/case_format.hpp"
#include "properties/gen/stale_gen.hpp"
#include "tools/command.hpp"

using ojson = nlohmann::ordered_json;

namespace {

using namespace pav::kernels;
using namespace pav::kernels::dispatch;

int print_clauses(bool markdown, const pav::cli::ReportOutput& output) {
  ojson j = pav::cli::report_header("gate");
  j["clauses"] = ojson::array();
  for (const ClauseInfo& c : clause_table())
    j["clauses"].push_back({{"id", int(c.id)}, {"name", c.name}, {"planned_rule", c.planned_rule},
                            {"uniform_rule", c.uniform_rule.empty() ? ojson(nullptr) : ojson(c.uniform_rule)}});
  if (!output.text()) return output.finish(j, pav::cli::kExitOk, "gate");
  if (markdown) {
    fmt::print("| id | clause | planned kernel requires | uniform kernel requires |\n|---|---|---|---|\n");
    for (const ClauseInfo& c : clause_table())
      fmt::print("| {} | `{}` | {} | {} |\n", int(c.id), c.name, c.planned_rule,
                 c.uniform_rule.empty() ? "(not checked)" : c.uniform_rule);
    return output.finish(j, pav::cli::kExitOk, "gate");
  }
  for (const ClauseInfo& c : clause_table()) {
    fmt::print("{:>2}  {:<24} {}\n", int(c.id), c.name, c.planned_rule);
    if (c.uniform_rule.empty())
      fmt::print("    {:<24} uniform kernel: not checked\n", "");
    else if (c.uniform_rule != c.planned_rule)
      fmt::print("    {:<24} uniform kernel: {}\n", "", c.uniform_rule);
  }
  return output.finish(j, pav::cli::kExitOk, "gate");
}

bool parse_flag(const std::string& name, const std::string& v) {
  if (v == "0") return false;
  if (v == "1") return true;
  throw pav::cli::BadInput(name + " '" + v + "': expected 0 or 1");
}

int route_case(const std::string& path, const std::string& planned, const std::string& work_plan,
               const std::string& site_name, bool all, const pav::cli::ReportOutput& output) {
  const bool text = output.text();
  ojson j = pav::cli::report_header("gate");
  j["case"] = path;
  j["site"] = site_name;
  pav::props::HostCase c = [&] {
    try {
      return pav::props::load_case(path);
    } catch (const pav::props::CaseError& e) {
      throw pav::cli::BadInput(e.what());
    } catch (const std::invalid_argument& e) {
      throw pav::cli::BadInput(path + ": " + e.what());
    }
  }();
  const Settings settings{parse_flag("--planned-decode", planned), parse_flag("--work-plan", work_plan)};
  const Site site = site_name == "sparse" ? Site::sparse : Site::dense;
  const DecodeCall call = c.call();

  // A captured forward over the case's lengths: the plan a dense site would get.
  std::optional<PlanCache> cache;
  std::optional<MetadataBuilder> builder;
  std::optional<ForwardMetadata> md;
  if (!c.lens.empty() && c.spec.hkv >= 1) {
    try {
      cache.emplace(pav::props::cache_config(c.spec), nullptr);
      builder.emplace(*cache, settings);
      BatchSpec b;
      b.num_seqs = int64_t(c.lens.size());
      b.context_lens = c.lens.data();
      b.q_len = c.spec.q_len;
      md.emplace(builder->build_for_graph_capture(b));
    } catch (const std::invalid_argument& e) {
      if (text) fmt::print("plan: none ({})\n", e.what());  // e.g. a ceiling the planner rejects
      j["plan_error"] = e.what();
    }
  }
  Router router(settings, nullptr);
  const Route r = router.route(call, site, md ? &*md : nullptr);
  if (text) fmt::print("route: {}\nreason: {}\n", route_label(r), to_string(r.reason));
  j["route"] = route_label(r);
  j["reason"] = std::string(to_string(r.reason));
  if (r.reason == RouteReason::gate_reject) {
    // The same arguments the router gave the gate.
    const PlanView* plan = site == Site::dense && settings.work_plan && md ? md->plan() : nullptr;
    Scratch scratch;
    if (plan) scratch = md->plan_scratch(int64_t(c.spec.q_len) * c.spec.group, c.spec.head_dim);
    const Finding f = first_violation(call, KernelKind::planned, plan, plan ? &scratch : nullptr);
    if (text) fmt::print("clause: {} ({})\nmessage: {}\n", clause_name(r.clause), int(r.clause), describe(f));
    j["clause"] = {{"id", int(r.clause)}, {"name", clause_name(r.clause)}};
    j["message"] = describe(f);
    if (all) {
      j["violations"] = ojson::array();
      for (const Finding& v : all_violations(call, KernelKind::planned, plan, plan ? &scratch : nullptr)) {
        if (text) fmt::print("violation: {}\n", describe(v));
        j["violations"].push_back(describe(v));
      }
    }
  }
  if (r.kind == RouteKind::uniform) {
    const Finding u = first_violation(call, KernelKind::uniform, nullptr, nullptr);
    if (u && text) fmt::print("uniform kernel also rejects: {}\n", describe(u, KernelKind::uniform));
    if (u) j["uniform_also_rejects"] = describe(u, KernelKind::uniform);
  }
  return output.finish(j, pav::cli::kExitOk, "gate");
}

int run(std::vector<std::string> args) {
  CLI::App app{"Route a decode call through the gate, or list the gate's clauses.", "gate"};
  std::string case_path, planned = "1", work_plan = "1", site = "dense";
  bool clauses = false, markdown = false, all = false;
  app.add_option("case", case_path, "a case file (pav-case/1 JSON)");
  app.add_flag("--clauses", clauses, "list every clause with its id and rule");
  app.add_flag("--markdown", markdown, "with --clauses: a Markdown table");
  app.add_option("--planned-decode", planned, "PAV_PLANNED_DECODE for this run: 0 or 1");
  app.add_option("--work-plan", work_plan, "PAV_WORK_PLAN for this run: 0 or 1");
  app.add_option("--site", site, "call site: dense (gets a plan) or sparse")->check(CLI::IsMember({"dense", "sparse"}));
  app.add_flag("--all", all, "on reject, list every violated clause");
  pav::cli::ReportOutput output;
  output.add_options(app);
  if (int rc = pav::cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();
  if (clauses) return print_clauses(markdown, output);
  if (case_path.empty()) throw pav::cli::BadInput("give a CASE.json or --clauses (see pav gate --help)");
  return route_case(case_path, planned, work_plan, site, all, output);
}

}  // namespace

PAV_COMMAND("gate", "route a decode call through the gate; list the gate's clauses", run);
