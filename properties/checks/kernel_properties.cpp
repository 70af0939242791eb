// SPDX-License-Identifier: Apache-2.0
// The properties of a kernel under test (pav fuzz / verify / replay), pav's
// own kernels included.
#include "properties/checks/kernel_properties.hpp"

#include <fmt/core.h>

#include <climits>
#include <cstring>
#include <stdexcept>

#include "adapters/pav_kernel.hpp"
#include "kernels/launch.hpp"
#include "properties/case/case_format.hpp"
#include "properties/gen/gate_gen.hpp"
#include "properties/gen/kernel_gen.hpp"
#include "properties/checks/runner_kernel.hpp"
#include "properties/gen/shrink_cases.hpp"

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
  if (s.softmax_scale != 0.0f) variant += fmt::format(", scale {:g}", s.softmax_scale);
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
                             /*fill_values=*/true, d.large_cache));
    prepare_kernel_call(kc, gate->call, gate->plan(), d);
  } else {
    host.emplace(build_case(rc.spec, true, Poison::nan, d.large_cache));
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
  HostCase c = build_case(v.spec, true, Poison::nan, d.large_cache);
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
  // A row past the plan's capacity is a malformed case (exit 2), not a kernel's failure.
  if (const int64_t capacity = kernels::plan_capacity_of(kernels::resolve(plan_params(s))); v.torn_row >= capacity)
    throw std::invalid_argument("meta.stale.torn_row: " + std::to_string(v.torn_row) + " past the plan's " +
                                std::to_string(capacity) + " rows");
  return v;
}

// ---- batch invariance --------------------------------------------------------------

// A kernel that splits by itself, handed a fixed split ceiling: a request's
// output must be bit-identical in its batch and alone.
struct BatchCase {
  CaseSpec spec;    // max_partitions: the fixed split ceiling
  int64_t seq = 0;  // the request run alone
};

rc::Gen<BatchCase> gen_batch_case(const KernelDescription& d) {
  return rc::gen::exec([d] {
    DecodeGenLimits lim = kernel_decode_limits();
    lim.allow_long = false;
    BatchCase b;
    b.spec = *gen_kernel_case(d, lim);
    const int64_t cap = d.max_split_ceiling > 0 ? std::min<int64_t>(d.max_split_ceiling, 8) : 8;
    b.spec.max_partitions = *rc::gen::inRange<int64_t>(1, cap + 1);
    b.seq = *rc::gen::inRange<int64_t>(0, int64_t(b.spec.lens.size()));
    b.seq = std::min<int64_t>(b.seq, int64_t(b.spec.lens.size()) - 1);  // shrinking may cut lens
    return b;
  });
}

// Runs a built case through the kernel; "" when it ran, else why not.
std::string run_built(adapters::KernelUnderTest& k, HostCase& c, KernelCall& kc) {
  prepare_kernel_call(kc, c, k.description());
  if (std::string why = adapters::contract_violation(kc.request, k.description()); !why.empty())
    return "pav generated a call outside the kernel's description: " + why;
  const CheckedRun run = run_checked(k, kc.request);
  if (!run.ok()) return outcome_text(run.checked && !run.check.ok() ? run.check : run.decode);
  return {};
}

Verdict check_batch(const BatchCase& b, const CheckContext& ctx) {
  adapters::KernelUnderTest& k = kernel_of(ctx);
  if (b.seq < 0 || b.seq >= int64_t(b.spec.lens.size())) return Verdict::fail("seq outside the batch");
  if (b.spec.max_partitions < 1) return Verdict::fail("batch invariance needs a fixed split ceiling");
  HostCase batch = build_case(b.spec, true, Poison::nan, k.description().large_cache);
  KernelCall in_batch;
  if (std::string why = run_built(k, batch, in_batch); !why.empty()) return Verdict::fail("the batch: " + why);
  HostCase alone_case = build_case(single_sequence_spec(batch, b.seq));
  KernelCall alone;
  if (std::string why = run_built(k, alone_case, alone); !why.empty()) return Verdict::fail("alone: " + why);
  const kernels::TensorView& bo = in_batch.request.call.out;
  const kernels::TensorView& ao = alone.request.call.out;
  const CaseSpec& s = b.spec;
  const int64_t es = kernels::dtype_size(bo.dtype);
  const int64_t row_elems = bo.shape[1] * bo.shape[2];
  const uint8_t* in_b = static_cast<const uint8_t*>(bo.data) + b.seq * s.q_len * row_elems * es;
  const uint8_t* al = static_cast<const uint8_t*>(ao.data);
  for (int64_t i = 0; i < s.q_len * row_elems; ++i)
    if (std::memcmp(in_b + i * es, al + i * es, size_t(es)) != 0) {
      uint32_t x = 0, y = 0;
      std::memcpy(&x, in_b + i * es, size_t(std::min<int64_t>(es, 4)));
      std::memcpy(&y, al + i * es, size_t(std::min<int64_t>(es, 4)));
      return Verdict::fail(fmt::format("request {} (len {}) differs in the batch of {} and alone: element {} "
                                       "(pos {}, head {}, d {}) 0x{:04x} vs 0x{:04x}; split ceiling {}",
                                       b.seq, s.lens[size_t(b.seq)], s.lens.size(), i, i / row_elems,
                                       (i % row_elems) / bo.shape[2], i % bo.shape[2], x, y, s.max_partitions));
    }
  return Verdict::pass();
}

// ---- the properties, for one description ------------------------------------------

rc::Gen<CaseSpec> decode_gen(const KernelDescription& d, const DecodeDraw& draw, const std::vector<CaseSpec>& shapes) {
  if (!shapes.empty()) return gen_kernel_case_shaped(d, shapes, draw.regions, kernel_decode_limits());
  return draw.regions ? gen_kernel_case_weighted(d, kernel_decode_limits()) : gen_kernel_case(d, kernel_decode_limits());
}

PropertyParts<CaseSpec> decode_parts(const KernelDescription& d, const DecodeDraw& draw,
                                     const std::vector<CaseSpec>& shapes = {}) {
  return {
      "decode",
      "generated calls the kernel claims (uneven batches, boundary lengths, sentinels, NaN-poisoned cache past "
      "each context) against the reference under the kernel's numerics profile",
      false,
      decode_gen(d, draw, shapes),
      check_decode_case,
      [](const CaseSpec& s, json&) { return s; },
      [d](const CaseSpec& s, const json&) {
        // A saved recipe past the memory limit is bad input, not a verdict.
        check_case_spec(s, true, d.large_cache);
        return s;
      },
      describe_kernel_spec,
      [d](const CaseSpec& s) {
        std::vector<CaseSpec> out;
        for (CaseSpec& c : simpler_decode_specs(s))
          if (spec_within(c, d)) out.push_back(std::move(c));
        return out;
      },
      nullptr,
      [](const CaseSpec& s) { return s.region; },  // "" from the general generator alone
      [](const CaseSpec& s) { return shape_of(s); },
  };
}

PropertyParts<CaseSpec> decode_parts_general(const KernelDescription& d) { return decode_parts(d, {}); }

PropertyParts<RejectCase> reject_parts(const KernelDescription& d, const std::vector<CaseSpec>& shapes = {}) {
  return {
      "reject",
      "calls just past the kernel's description and the hard-reject classes are refused by its check and never "
      "reach decode; accepted calls are correct",
      false,
      gen_reject_case(d, shapes),
      check_reject_case,
      reject_to_case,
      reject_from_case,
      // Every field of the call, as decode's summary has them (variants included).
      [](const RejectCase& r) { return reject_kind(r) + "; " + describe_kernel_spec(r.spec); },
      // Simpler calls of the same kind, as decode shrinks: a base breaking one
      // clause stays inside the description (the clause is broken on it); a
      // call moved past it stays outside. The engine keeps those that fail.
      [d](const RejectCase& r) {
        const bool inside = r.clause != kernels::Clause::none || r.moved.empty();
        std::vector<RejectCase> out;
        for (CaseSpec& c : simpler_decode_specs(r.spec))
          if (spec_within(c, d) == inside) out.push_back({std::move(c), r.moved, r.clause, r.variant});
        return out;
      },
  };
}

PropertyParts<StaleKernelCase> stale_parts(const KernelDescription& d) {
  return {
      "stale",
      "calls handed a stale plan (refreshed from other lengths, or torn: one row left from an earlier refresh) "
      "answer stale_plan, are refused by the check, or are computed correctly all the same",
      false,
      gen_stale_kernel_case(d, kernel_decode_limits()),
      check_stale_case,
      stale_to_case,
      stale_from_case,
      [](const StaleKernelCase& v) { return describe_kernel_spec(v.spec) + "; " + to_string(v); },
  };
}

PropertyParts<BatchCase> batch_parts(const KernelDescription& d) {
  return {
      "batch-invariance",
      "with a fixed split ceiling, a request's output is bit-identical in its batch and alone",
      false,
      gen_batch_case(d),
      check_batch,
      [](const BatchCase& b, json& meta) {
        meta["seq"] = b.seq;
        return b.spec;
      },
      [d](const CaseSpec& s, const json& meta) {
        check_case_spec(s, true, d.large_cache);
        BatchCase b;
        b.spec = s;
        b.seq = meta.value("seq", int64_t(0));
        return b;
      },
      [](const BatchCase& b) { return fmt::format("request {} of {}", b.seq, describe_kernel_spec(b.spec)); },
      [d](const BatchCase& b) {
        std::vector<BatchCase> out;
        for (auto& [c, seq] : simpler_decode_specs(b.spec, b.seq))
          if (spec_within(c, d) && c.max_partitions >= 1) out.push_back({std::move(c), seq});
        return out;
      },
  };
}

// ---- pav's own kernels, their settings drawn per case ----------------------------

// A value of a kernel property together with the pav kernel settings it runs on.
template <class T>
struct OnPav {
  adapters::PavKernelOptions kernel;
  T value;
};

// pav's kernel settings for a case: the path (or the one given), the partial
// dtype, the arch (its fp8 flavour) and the compute units.
rc::Gen<adapters::PavKernelOptions> gen_pav_kernel_options(std::optional<bool> planned) {
  return rc::gen::exec([planned] {
    adapters::PavKernelOptions o;
    // Drawn inside what the GPU kernel runs wherever a GPU backend is
    // registered, whichever backend the run then picks: pav's GPU kernel
    // describes fewer head dims than its CPU one.
    o.backend = kernels::gpu_backend_available() ? kernels::Backend::gpu : kernels::Backend::cpu;
    o.planned = planned ? *planned : *rc::gen::element(true, false);
    o.partial = *rc::gen::element(kernels::DType::bf16, kernels::DType::f32);
    o.arch = *rc::gen::weightedOneOf<kernels::Arch>({{3, rc::gen::just(kernels::Arch::sm90)},
                                                     {1, rc::gen::just(kernels::Arch::gfx942)},
                                                     {1, rc::gen::just(kernels::Arch::gfx950)}});
    o.cu = *rc::gen::element(8, 32, 132, 256);
    return o;
  });
}

std::unique_ptr<adapters::KernelUnderTest> pav_kernel_on(adapters::PavKernelOptions o, kernels::Backend backend) {
  o.backend = backend;
  return adapters::make_pav_kernel(o, adapters::pav_kernel_spec(o));
}

// The settings a saved case's meta.kernel.spec records (pav:cpu|gpu WORDS).
adapters::PavKernelOptions pav_options_of(const json& meta) {
  const std::string spec = case_kernel_spec(meta);
  if (spec.empty()) throw CaseError("case: meta.kernel.spec: pav's kernel settings are required");
  std::vector<std::string> words = adapters::split_words(spec.substr(4));
  if (spec.rfind("pav:", 0) != 0 || words.empty())
    throw CaseError("case: meta.kernel.spec: expected pav:cpu or pav:gpu with its words");
  adapters::PavKernelOptions o = adapters::parse_pav_kernel_words({words.begin() + 1, words.end()});
  o.backend = words.front() == "gpu" ? kernels::Backend::gpu : kernels::Backend::cpu;
  return o;
}

template <class T>
Property on_pav_kernels(std::optional<bool> planned, PropertyParts<T> (*parts_for)(const KernelDescription&)) {
  adapters::PavKernelOptions shown;
  if (planned) shown.planned = *planned;
  const PropertyParts<T> named = parts_for(adapters::pav_kernel_description(shown));
  auto description = [](const adapters::PavKernelOptions& o) { return adapters::pav_kernel_description(o); };
  using V = OnPav<T>;
  std::function<std::vector<V>(const V&)> simplify = nullptr;
  if (named.simplify)
    simplify = [parts_for, description](const V& v) {
      std::vector<V> out;
      for (T& x : parts_for(description(v.kernel)).simplify(v.value)) out.push_back({v.kernel, std::move(x)});
      return out;
    };
  PropertyParts<V> w{
      named.name,
      named.summary + " (pav's kernels, their settings drawn per case)",
      false,
      rc::gen::mapcat(gen_pav_kernel_options(planned),
                      [parts_for, description](adapters::PavKernelOptions o) {
                        return rc::gen::map(parts_for(description(o)).gen, [o](T v) { return V{o, std::move(v)}; });
                      }),
      [parts_for](const V& v, const CheckContext& ctx) {
        const auto k = pav_kernel_on(v.kernel, ctx.backend);
        CheckContext on = ctx;
        on.kernel = k.get();
        return parts_for(k->description()).check(v.value, on);
      },
      [parts_for, description](const V& v, json& meta) {
        return parts_for(description(v.kernel)).to_case(v.value, meta);
      },
      [parts_for, description](const CaseSpec& s, const json& meta) {
        V v;
        v.kernel = pav_options_of(meta);
        v.value = parts_for(description(v.kernel)).from_case(s, meta);
        return v;
      },
      [parts_for, description](const V& v) {
        return parts_for(description(v.kernel)).describe(v.value) + " on pav's kernel " +
               adapters::pav_kernel_words(v.kernel);
      },
      simplify,
      [](const V& v, const CheckContext& ctx) {
        return json(adapters::identity_json(*pav_kernel_on(v.kernel, ctx.backend)));
      },
  };
  return make_property(std::move(w));
}

}  // namespace

std::vector<CaseSpec> decode_shapes(const KernelDescription& d, const DecodeDraw& draw) {
  if (draw.shapes <= 0) return {};
  return draw_shapes(d, draw.shapes, draw.shape_seed, draw.regions, kernel_decode_limits());
}

std::vector<Property> kernel_properties(const KernelDescription& d, const DecodeDraw& draw) {
  // One set of shapes for decode and for the calls reject hands the kernel to decode.
  const std::vector<CaseSpec> shapes = decode_shapes(d, draw);
  std::vector<Property> v;
  v.push_back(make_property(decode_parts(d, draw, shapes)));
  if (d.has_check) v.push_back(make_property(reject_parts(d, shapes)));
  if (d.split == adapters::Split::plan) v.push_back(make_property(stale_parts(d)));
  return v;
}

std::vector<Property> kernel_properties(const adapters::KernelUnderTest& k, const DecodeDraw& draw) {
  const KernelDescription& d = k.description();
  std::vector<Property> v = kernel_properties(d, draw);
  // pav's kernels promise batch invariance for a fixed split ceiling; other
  // kernels may pick their splits from the batch.
  if (k.adapter() == "pav" && d.split == adapters::Split::self && d.split_ceiling)
    v.push_back(make_property(batch_parts(d)));
  return v;
}

std::vector<Property> pav_kernel_properties() {
  std::vector<Property> v;
  v.push_back(on_pav_kernels<CaseSpec>(std::nullopt, decode_parts_general));
  v.push_back(on_pav_kernels<BatchCase>(false, batch_parts));
  v.push_back(on_pav_kernels<RejectCase>(std::nullopt, [](const KernelDescription& d) { return reject_parts(d); }));
  v.push_back(on_pav_kernels<StaleKernelCase>(true, stale_parts));
  return v;
}

std::unique_ptr<adapters::KernelUnderTest> pav_kernel_for_case(CaseSpec& spec, kernels::Backend backend) {
  adapters::PavKernelOptions o;
  o.planned = spec.path == Path::planned;
  o.partial = spec.opt.partial;
  o.arch = spec.opt.arch;
  o.cu = spec.opt.cu;
  // The uniform kernel takes its split count as the split ceiling.
  if (!o.planned && spec.max_partitions == 0) spec.max_partitions = spec.opt.uniform_partitions;
  return pav_kernel_on(o, backend);
}

}  // namespace pav::props::fuzz
