// SPDX-License-Identifier: Apache-2.0
// The properties of a kernel under test (pav fuzz / verify / replay --kernel).
#include <fmt/core.h>

#include <climits>
#include <stdexcept>

#include "properties/fuzz.hpp"
#include "properties/gate_gen.hpp"
#include "properties/kernel_gen.hpp"
#include "properties/runner_kernel.hpp"

namespace pav::props::fuzz {

using adapters::KernelDescription;
using adapters::Outcome;
using nlohmann::json;

namespace {

adapters::KernelUnderTest& kernel_of(const CheckContext& ctx) {
  if (!ctx.kernel) throw std::logic_error("a kernel property ran without a kernel under test");
  return *ctx.kernel;
}

DecodeGenLimits kernel_decode_limits() {
  DecodeGenLimits lim;
  lim.max_batch = 5;
  lim.max_total_tokens = 20000;
  lim.allow_long = true;
  return lim;
}

std::string describe_kernel_spec(const CaseSpec& s) {
  std::string lens;
  for (size_t i = 0; i < s.lens.size() && i < 12; ++i) lens += (i ? "," : "") + std::to_string(s.lens[i]);
  if (s.lens.size() > 12) lens += fmt::format(",... ({} total)", s.lens.size());
  std::string scales(kernels::to_string(s.scales));
  if (s.v_scales && *s.v_scales != s.scales) scales += fmt::format(" (V {})", kernels::to_string(*s.v_scales));
  // The cache format: its layout (packed with its V layout), how K and V are stored, the page table.
  std::string format = s.layout == kernels::CacheLayout::packed
                           ? fmt::format("packed {} V", s.v_layout == kernels::VLayout::trans ? "trans" : "plain")
                           : std::string(kernels::to_string(s.layout));
  if (s.kv_combined) format += " combined";
  if (s.v_head_dim > 0) format += fmt::format(" MLA (D_v {})", s.v_head_dim);
  if (s.page_pad != 0 || s.row_pad != 0) format += " strided";
  if (s.page_table == kernels::PageTable::csr) format += " csr";
  std::string variant;
  if (s.opt.softmax_scale != 0.0f) variant += fmt::format(", scale {:g}", s.opt.softmax_scale);
  if (s.extreme_logits != 0) variant += fmt::format(", extreme logits ({})", s.extreme_logits < 0 ? "-6e4" : "+6e4");
  if (s.zero_q_head) variant += ", q head 0 zero";
  if (s.constant_q_head) variant += ", q head 0 constant";
  if (s.logit_ties != 0) variant += s.logit_ties == 1 ? ", logits tied" : ", logits near-tied";
  if (s.null_block) variant += ", null block 0";
  if (s.window_left >= 0) variant += fmt::format(", window {}", s.window_left);
  if (s.soft_cap != 0.0f) variant += fmt::format(", soft cap {:g}", s.soft_cap);
  if (s.sinks) variant += fmt::format(", sinks (head 0: {:g})", s.sinks->front());
  if (s.alibi_slopes) variant += fmt::format(", ALiBi (head 0 slope {:g})", s.alibi_slopes->front());
  return fmt::format("lens [{}] q_len {} hkv {} G {} D {} block {} {}, q {}, cache {}, scales {}, ceiling {}{}", lens,
                     s.q_len, s.hkv, s.group, s.head_dim, s.block_size, format, kernels::to_string(s.q_dtype),
                     kernels::to_string(s.cache_dtype), scales, s.max_partitions, variant);
}

Verdict check_decode_case(const CaseSpec& spec, const CheckContext& ctx) {
  const KernelJudgement j = check_kernel_case(spec, kernel_of(ctx));
  return j.passed ? Verdict::pass() : Verdict::fail(j.verdict);
}

// ---- reject ------------------------------------------------------------------------

Verdict check_reject_case(const RejectCase& rc, const CheckContext& ctx) {
  adapters::KernelUnderTest& k = kernel_of(ctx);
  const KernelDescription& d = k.description();
  if (!d.has_check) return Verdict::fail("the kernel has no check entry");
  // The call: a case moved past the description, or a base breaking one clause.
  std::optional<GateCase> gate;
  std::optional<HostCase> host;
  KernelCall kc;
  if (rc.clause != kernels::Clause::none) {
    gate.emplace(materialize(GateSpec{rc.spec, d.split == adapters::Split::plan, rc.clause, rc.variant},
                             /*fill_values=*/true));
    prepare_kernel_call(kc, gate->call, gate->plan(), d);
  } else {
    host.emplace(build_case(rc.spec));
    prepare_kernel_call(kc, *host, d);
  }
  const std::string outside = adapters::contract_violation(kc.request, d);
  const adapters::CallResult check = k.check(kc.request);
  if (check.outcome != Outcome::ok && check.outcome != Outcome::rejected)
    return Verdict::fail("check: " + outcome_text(check));
  if (!outside.empty() && check.ok())
    return Verdict::fail("the kernel's check accepts a call outside its contract: " + outside);
  if (outside.empty() && !check.ok())
    return Verdict::fail("the kernel's check refuses a call inside its description: " + check.message);
  // pav's own path: check first, decode only for an accepted call.
  const int64_t decodes_before = k.decode_calls();
  const CheckedRun run = run_checked(k, kc.request);
  if (!outside.empty()) {
    if (k.decode_calls() != decodes_before)
      return Verdict::fail("a call the kernel's check refused reached decode (" + check.message + ")");
    return Verdict::pass();
  }
  if (!run.checked || !run.check.ok()) return Verdict::fail("check: " + outcome_text(run.check) + " on a second ask");
  if (!run.decode.ok()) return Verdict::fail("accepted by check, then " + outcome_text(run.decode));
  const KernelJudgement j = judge_kernel_output(kc.request, d);
  return j.passed ? Verdict::pass() : Verdict::fail("accepted by check: " + j.verdict);
}

CaseSpec reject_to_case(const RejectCase& r, json& meta) {
  meta["reject"] = {{"moved", r.moved}, {"clause", std::string(kernels::clause_name(r.clause))}, {"variant", r.variant}};
  return r.spec;
}

RejectCase reject_from_case(const CaseSpec& s, const json& meta) {
  RejectCase r;
  r.spec = s;
  const json j = meta.value("reject", json::object());
  r.moved = j.value("moved", std::string());
  const std::string c = j.value("clause", std::string("none"));
  if (c == "none") r.clause = kernels::Clause::none;
  else if (!kernels::parse_clause(c, r.clause)) throw std::invalid_argument("meta.reject.clause: unknown clause '" + c + "'");
  r.variant = j.value("variant", 0);
  return r;
}

// ---- stale plans ------------------------------------------------------------------

Verdict check_stale_case(const StaleKernelCase& v, const CheckContext& ctx) {
  adapters::KernelUnderTest& k = kernel_of(ctx);
  const KernelDescription& d = k.description();
  if (d.split != adapters::Split::plan) return Verdict::fail("the stale property is for kernels that run pav's plan");
  HostCase c = build_case(v.spec);
  KernelCall kc;
  prepare_kernel_call(kc, c, d);
  make_stale_plan(v, *kc.plan);
  kc.plan_view = kc.plan->view();
  // A value shrunk to lengths that make the plan fresh again has nothing stale to hand over.
  if (kernels::plan_is_fresh(kc.plan_view, c.lens.data(), int64_t(c.lens.size()))) return Verdict::pass();
  if (std::string why = adapters::contract_violation(kc.request, d); !why.empty())
    return Verdict::fail("pav generated a call outside the kernel's description: " + why);
  const CheckedRun run = run_checked(k, kc.request);
  if (run.checked && run.check.outcome == Outcome::rejected) return Verdict::pass();  // refused before decode
  if (run.checked && !run.check.ok()) return Verdict::fail("check: " + outcome_text(run.check));
  if (run.decode.outcome == Outcome::stale_plan) return Verdict::pass();
  if (!run.decode.ok())
    return Verdict::fail("a stale plan answered with " + outcome_text(run.decode) +
                         " (a plan that does not match the live lengths calls for the stale_plan status)");
  const KernelJudgement j = judge_kernel_output(kc.request, d);
  return j.passed ? Verdict::pass()
                  : Verdict::fail("status ok on a stale plan, and the output is not the live call's: " + j.verdict);
}

CaseSpec stale_to_case(const StaleKernelCase& v, json& meta) {
  meta["stale"] = {{"plan_lens", v.plan_lens}, {"torn_row", v.torn_row}};
  return v.spec;
}

StaleKernelCase stale_from_case(const CaseSpec& s, const json& meta) {
  StaleKernelCase v;
  v.spec = s;
  const json j = meta.value("stale", json::object());
  if (!j.contains("plan_lens") || !j["plan_lens"].is_array())
    throw std::invalid_argument("meta.stale.plan_lens: an array of lengths is required");
  for (const json& x : j["plan_lens"]) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
      throw std::invalid_argument("meta.stale.plan_lens: lengths are integers in 0..2^31-1, got " + x.dump());
    v.plan_lens.push_back(x.get<int32_t>());
  }
  if (v.plan_lens.size() != s.lens.size())
    throw std::invalid_argument("meta.stale.plan_lens: " + std::to_string(v.plan_lens.size()) + " lengths for " +
                                std::to_string(s.lens.size()) + " sequences");
  const json& t = j.contains("torn_row") ? j["torn_row"] : json(-1);
  if (!t.is_number_integer() || t.get<int64_t>() < -1)
    throw std::invalid_argument("meta.stale.torn_row: -1 or a row index, got " + t.dump());
  v.torn_row = t.get<int64_t>();
  return v;
}

}  // namespace

std::vector<Property> kernel_properties(const KernelDescription& d) {
  std::vector<Property> v;
  v.push_back(make_property<CaseSpec>({
      "decode",
      "generated calls the kernel claims (uneven batches, boundary lengths, sentinels, NaN-poisoned cache past "
      "each context) against the reference under the kernel's numerics profile",
      false,
      gen_kernel_case(d, kernel_decode_limits()),
      check_decode_case,
      [](const CaseSpec& s, json&) { return s; },
      [](const CaseSpec& s, const json&) { return s; },
      describe_kernel_spec,
      [d](const CaseSpec& s) {
        std::vector<CaseSpec> out;
        for (CaseSpec& c : simpler_decode_specs(s))
          if (spec_within(c, d)) out.push_back(std::move(c));
        return out;
      },
  }));
  if (d.has_check)
    v.push_back(make_property<RejectCase>({
        "reject",
        "calls just past the kernel's description and the hard-reject classes are refused by its check and never "
        "reach decode; accepted calls are correct",
        false,
        gen_reject_case(d),
        check_reject_case,
        reject_to_case,
        reject_from_case,
        [](const RejectCase& r) { return to_string(r); },
    }));
  if (d.split == adapters::Split::plan)
    v.push_back(make_property<StaleKernelCase>({
        "stale",
        "calls handed a stale plan (refreshed from other lengths, or torn: one row left from an earlier refresh) "
        "answer stale_plan, are refused by the check, or are computed correctly all the same",
        false,
        gen_stale_kernel_case(d, kernel_decode_limits()),
        check_stale_case,
        stale_to_case,
        stale_from_case,
        [](const StaleKernelCase& v) { return describe_kernel_spec(v.spec) + "; " + to_string(v); },
    }));
  return v;
}

}  // namespace pav::props::fuzz
