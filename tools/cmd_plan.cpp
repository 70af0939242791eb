// pav plan: prints the work plan the planner builds for a batch of lengths.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <charconv>

#include "kernels/planner.hpp"
#include "tools/command.hpp"

namespace {

using namespace pav::kernels;

std::vector<int32_t> parse_lengths(const std::string& text) {
  std::vector<int32_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string tok = text.substr(pos, end - pos);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size())
      throw pav::cli::BadInput("--lengths: '" + tok + "' is not an integer (expected e.g. 5,0,9000)");
    if (v < INT32_MIN || v > INT32_MAX)
      throw pav::cli::BadInput("--lengths: " + tok + " does not fit in int32 (context_lens are int32)");
    out.push_back(int32_t(v));
    pos = end + 1;
  }
  return out;
}

int run(std::vector<std::string> args) {
  CLI::App app{"Build the work plan for a batch of context lengths.", "plan"};
  std::string lengths;
  int64_t kv_heads = 1, cu = 0, max_partitions = 0, budget = 0;
  std::string policy = "proportional";
  bool json = false;
  app.add_option("--lengths", lengths, "comma-separated context lengths, e.g. 5,0,9000")->required();
  app.add_option("--kv-heads", kv_heads, "KV heads (Hkv)")->required();
  app.add_option("--cu", cu, "compute units (SMs) of the device")->required();
  app.add_option("--max-partitions", max_partitions, "per-request ceiling, 1..cu (default cu)");
  app.add_option("--budget", budget, "workgroup budget (default 2*cu)");
  app.add_option("--policy", policy, "planner policy")->check(CLI::IsMember({"proportional", "balanced"}));
  app.add_flag("--json", json, "print the plan as JSON");
  if (int rc = pav::cli::parse(app, args); rc >= 0) return rc;

  const auto lens = parse_lengths(lengths);
  PlanParams params{int64_t(lens.size()), kv_heads, cu, max_partitions, budget,
                    policy == "balanced" ? PlanPolicy::balanced : PlanPolicy::proportional};
  try {
    params = resolve(params);
  } catch (const std::invalid_argument& e) {
    throw pav::cli::BadInput(e.what());
  }
  WorkPlan plan(params);
  plan.refresh(lens.data());
  const auto& w = plan.work_info();
  const auto& r = plan.reduce_info();
  if (json) {
    nlohmann::ordered_json j;  // keys in the documented order
    j["capacity"] = plan.capacity();
    j["max_partitions"] = params.max_partitions;
    auto& wi = j["work_info"] = nlohmann::ordered_json::array();
    for (int64_t i = 0; i < plan.capacity(); ++i) wi.push_back({w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]});
    auto& ri = j["reduce_info"] = nlohmann::ordered_json::array();
    for (int64_t b = 0; b < params.num_seqs; ++b) ri.push_back({r[2 * b], r[2 * b + 1]});
    fmt::print("{}\n", j.dump());
    return 0;
  }
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
  return 0;
}

}  // namespace

PAV_COMMAND("plan", "build and print the work plan for a batch of context lengths", run);
