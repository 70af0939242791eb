// SPDX-License-Identifier: Apache-2.0
// pav plan: prints the work plan the planner builds for a batch of lengths.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <charconv>

#include "kernels/planner.hpp"
#include "tools/command.hpp"
#include "tools/options.hpp"

namespace {

using namespace pav::kernels;

int run(std::vector<std::string> args) {
  namespace cli = pav::cli;
  CLI::App app{"Build the work plan for a batch of context lengths.", "plan"};
  std::string lengths;
  int64_t kv_heads = 1, cu = 0, max_partitions = 0, budget = 0;
  std::string policy = "proportional";
  cli::ReportOutput output;
  app.add_option("--lengths", lengths,
                 fmt::format("comma-separated context lengths, e.g. 5,0,9000 (each 0..{}, at most {})",
                             cli::kMaxContext, cli::kMaxBatch))
      ->required();
  app.add_option("--kv-heads", kv_heads, "KV heads (Hkv)")->required()->check(cli::integer_in(1, cli::kMaxKvHeads));
  app.add_option("--cu", cu, "compute units (SMs) of the device")->required()->check(cli::integer_in(1, cli::kMaxCu));
  app.add_option("--max-partitions", max_partitions, "per-request ceiling, 1..cu (0: cu)")
      ->check(cli::integer_in(0, cli::kMaxCu));
  app.add_option("--budget", budget, "workgroup budget (0: 2*cu)")->check(cli::integer_in(0, cli::kMaxBudget));
  app.add_option("--policy", policy, "planner policy: proportional or balanced")
      ->check(CLI::IsMember({"proportional", "balanced"}));
  output.add_options(app);
  if (int rc = cli::parse(app, args); rc >= 0) return rc;
  output.check_writable();
  if (max_partitions > cu)
    throw cli::BadInput(fmt::format("--max-partitions {} exceeds --cu {} (the ceiling must be in 1..cu)",
                                    max_partitions, cu));
  std::vector<int32_t> lens;
  for (int64_t v : cli::parse_int_list("--lengths", lengths, 0, cli::kMaxContext, size_t(cli::kMaxBatch)))
    lens.push_back(int32_t(v));
  PlanParams params{int64_t(lens.size()), kv_heads, cu, max_partitions, budget,
                    policy == "balanced" ? PlanPolicy::balanced : PlanPolicy::proportional};
  try {
    params = resolve(params);
  } catch (const std::invalid_argument& e) {
    throw cli::BadInput(e.what());
  }
  WorkPlan plan(params);
  plan.refresh(lens.data());
  const auto& w = plan.work_info();
  const auto& r = plan.reduce_info();
  nlohmann::ordered_json j = cli::report_header("plan");  // keys in the documented order
  j["capacity"] = plan.capacity();
  j["max_partitions"] = params.max_partitions;
  auto& wi = j["work_info"] = nlohmann::ordered_json::array();
  for (int64_t i = 0; i < plan.capacity(); ++i) wi.push_back({w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]});
  auto& ri = j["reduce_info"] = nlohmann::ordered_json::array();
  for (int64_t b = 0; b < params.num_seqs; ++b) ri.push_back({r[2 * b], r[2 * b + 1]});
  if (!output.text()) return output.finish(j, cli::kExitOk, "plan");
  fmt::print("plan: {} seqs, Hkv {}, cu {}, max_partitions {}, budget {}, capacity {}, active tasks {}\n",
             params.num_seqs, kv_heads, cu, params.max_partitions, params.workgroup_budget, plan.capacity(),
             plan.active_tasks());
  fmt::print("{:>5} {:>12} {:>7} {:>6} {:>6}  {}\n", "seq", "len", "tiles", "first", "count", "tiles per partition");
  for (int64_t b = 0; b < params.num_seqs; ++b) {
    const int64_t first = r[2 * b], count = r[2 * b + 1];
    std::string spans;
    for (int64_t k = 0; k < count && k < 8; ++k)
      spans += fmt::format("{}{}", k ? " " : "", w[4 * (first + k) + 2] - w[4 * (first + k) + 1]);
    if (count > 8) spans += " ...";
    fmt::print("{:>5} {:>12} {:>7} {:>6} {:>6}  {}\n", b, lens[b], plan_tiles(lens[b]), first, count, spans);
  }
  std::fflush(stdout);  // the table is out before a --json-out write can fail
  return output.finish(j, cli::kExitOk, "plan");
}

}  // namespace

PAV_COMMAND("plan", "build and print the work plan for a batch of context lengths", run);
