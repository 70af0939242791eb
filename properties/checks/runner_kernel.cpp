// SPDX-License-Identifier: Apache-2.0
#include "properties/checks/runner_kernel.hpp"

#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace pav::props {

using adapters::CallResult;
using adapters::KernelDescription;
using adapters::Outcome;
using kernels::DType;
using kernels::TensorView;

namespace {

// NaN into every element a view can reach (its span), by dtype.
void poison(const TensorView& v) {
  if (!v.present() || !v.data) return;
  const int64_t n = v.span();
  switch (v.dtype) {
    case DType::f32: {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::fill_n(v.as<float>(), n, nan);
      return;
    }
    case DType::bf16: std::fill_n(v.as<uint16_t>(), n, uint16_t(0x7fc0)); return;
    case DType::f16: std::fill_n(v.as<uint16_t>(), n, uint16_t(0x7e00)); return;
    default: std::memset(v.data, 0xff, size_t(n * std::max(kernels::dtype_size(v.dtype), 1))); return;
  }
}

void add_lse(KernelCall& k, const KernelDescription& d) {
  const TensorView& q = k.request.call.q;
  if (!d.writes_lse || q.rank != 3) return;
  k.lse.assign(size_t(std::max<int64_t>(q.shape[0] * q.shape[1], 1)), std::numeric_limits<float>::quiet_NaN());
  k.request.lse = TensorView::contiguous_of(k.lse.data(), DType::f32, {q.shape[0], q.shape[1]});
}

}  // namespace

void prepare_kernel_call(KernelCall& k, HostCase& c, const KernelDescription& d) {
  c.poison_output();
  k.request = adapters::DecodeRequest{};
  kernels::DecodeCall& call = k.request.call;
  call = c.call();
  const DType out_dtype = d.out_dtype_for(call.q.dtype);
  if (out_dtype != call.out.dtype) {
    const TensorView& o = call.out;
    k.out.assign(size_t(o.numel() * kernels::dtype_size(out_dtype)), 0);
    call.out = TensorView::contiguous_of(k.out.data(), out_dtype, {o.shape[0], o.shape[1], o.shape[2]});
    poison(call.out);
  }
  if (d.split == adapters::Split::plan) {
    k.plan.emplace(plan_params(c.spec));
    k.plan->refresh(c.lens.data());
    k.plan_view = k.plan->view();
    k.request.plan = &k.plan_view;
    k.request.max_partitions = k.plan_view.max_partitions;
  } else {
    k.request.max_partitions = c.spec.max_partitions;
  }
  add_lse(k, d);
}

void prepare_kernel_call(KernelCall& k, const kernels::DecodeCall& call, const kernels::PlanView* plan,
                         const KernelDescription& d) {
  k.request = adapters::DecodeRequest{};
  k.request.call = call;
  poison(call.out);
  if (plan) {
    k.plan_view = *plan;
    k.request.plan = &k.plan_view;
    k.request.max_partitions = plan->max_partitions;
  }
  add_lse(k, d);
}

CheckedRun run_checked(adapters::KernelUnderTest& k, const adapters::DecodeRequest& r) {
  CheckedRun run;
  if (k.description().has_check) {
    run.checked = true;
    run.check = k.check(r);
    if (!run.check.ok()) return run;
  }
  run.decoded = true;
  run.decode = k.decode(r);
  return run;
}

std::string outcome_text(const CallResult& r) {
  switch (r.outcome) {
    case Outcome::ok: return "ok";
    case Outcome::rejected: return "kernel refused the call: " + r.message;
    case Outcome::stale_plan: return "stale plan: " + r.message;
    case Outcome::kernel_error: return "kernel error: " + r.message;
    case Outcome::fault: return r.message;
  }
  return r.message;
}

reference::ReferenceResult reference_for(const kernels::DecodeCall& call, const adapters::Profile& p,
                                         reference::Precision precision) {
  kernels::DecodeCall c = call;
  // Q and P are quantized to the cache's fp8 flavour (a foreign kernel has no
  // fp8 compute dtype of its own).
  c.opt.compute = DType::bf16;
  reference::ReferenceOptions o;
  o.precision = precision;
  return reference::decode(c, p.numerics(), o);
}

KernelJudgement judge_kernel_output(const adapters::DecodeRequest& r, const KernelDescription& d,
                                    const reference::ReferenceResult* given) {
  KernelJudgement j;
  std::optional<reference::ReferenceResult> own;
  if (!given) own.emplace(reference_for(r.call, d.profile));
  const reference::ReferenceResult& ref = given ? *given : *own;
  j.compare = reference::compare(r.call.out, ref);
  j.passed = j.compare.passed();
  j.verdict = j.compare.verdict;
  if (!r.lse.present()) return j;
  // lse: -inf exactly where the reference's is (a row that sees no token and
  // has no sink), else within the standard's atol/rtol of the reference's
  // M + log(L), in the base the kernel declares.
  const float* lse = r.lse.as<float>();
  const int64_t n = ref.rows();
  const double base = d.lse_base == adapters::LseBase::two ? 1.0 / std::log(2.0) : 1.0;
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    const double want = ref.lse[size_t(i)] * base;
    const double got = lse[i];
    const bool ok = std::isinf(want) ? (std::isinf(got) && got < 0)
                                     : std::isfinite(got) && std::fabs(got - want) <= reference::kDefaultAtol +
                                                                                         reference::kDefaultRtol * std::fabs(want);
    if (!ok && bad++ == 0)
      first = fmt::format("lse row {} head {}: {} vs reference {}", i / ref.hq, i % ref.hq, got, want);
  }
  if (bad) {
    // The failing part leads: an output within the standard beside a wrong lse
    // reads as the lse's failure, then the output's figures.
    const std::string lse_failure = fmt::format("FAIL lse: {} of {} rows wrong, first {}", bad, n, first);
    j.verdict = j.passed ? lse_failure + "; out " + j.verdict : j.verdict + "; " + lse_failure;
    j.passed = false;
  }
  return j;
}

KernelJudgement check_kernel_case(const CaseSpec& spec, adapters::KernelUnderTest& k,
                                  std::optional<reference::ReferenceResult>* ref_cache) {
  const KernelDescription& d = k.description();
  HostCase c = build_case(spec, true, Poison::nan, d.large_cache);
  KernelCall kc;
  prepare_kernel_call(kc, c, d);
  KernelJudgement j;
  if (std::string why = adapters::contract_violation(kc.request, d); !why.empty()) {
    j.verdict = "pav generated a call outside the kernel's description: " + why;
    // A saved case's recipe may ask for what the kernel refuses: say so by its words.
    if (d.has_check)
      if (const adapters::CallResult check = k.check(kc.request); !check.ok()) j.verdict += "; " + outcome_text(check);
    return j;
  }
  const CheckedRun run = run_checked(k, kc.request);
  if (run.checked && run.check.outcome == Outcome::rejected) {
    j.verdict = "the kernel's check refuses a call its description claims: " + run.check.message;
    return j;
  }
  if (run.checked && !run.check.ok()) {
    j.verdict = "check: " + outcome_text(run.check);
    return j;
  }
  if (!run.decode.ok()) {
    j.verdict = outcome_text(run.decode);
    return j;
  }
  std::optional<reference::ReferenceResult> own;
  if (!ref_cache) ref_cache = &own;
  if (!ref_cache->has_value()) ref_cache->emplace(reference_for(kc.request.call, d.profile));
  j = judge_kernel_output(kc.request, d, &**ref_cache);
  if (j.passed || j.compare.nonfinite == 0) return j;
  // Where the non-finite values come from: the same call (same data, tables
  // and reference) with every slot no context reads zero instead of NaN. Right
  // then, the kernel reads slots it must not see and multiplies them by zero:
  // harmless over zeroed memory, NaN over an engine's reused pages.
  HostCase z = build_case(spec, true, Poison::zero, d.large_cache);
  KernelCall zc;
  prepare_kernel_call(zc, z, d);
  const CheckedRun again = run_checked(k, zc.request);
  if (!again.decode.ok() || (again.checked && !again.check.ok())) return j;
  if (!judge_kernel_output(zc.request, d, &**ref_cache).passed) return j;
  j.known = kNanFromMaskedSlots;
  j.verdict = "NaN from masked slots: the kernel reads cache slots past the context (pav fills them with NaN) and "
              "multiplies them by zero; with those slots zero it is right, over memory that holds NaN there (a "
              "reused page's stale tail) its output is NaN. " + j.verdict;
  return j;
}

}  // namespace pav::props
