// SPDX-License-Identifier: Apache-2.0
#pragma once
// Runs a case through a kernel under test and holds the result to the
// reference under the kernel's declared numerics profile.
#include <optional>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "kernels/planner.hpp"
#include "properties/case/host_case.hpp"
#include "reference/compare.hpp"
#include "reference/decode.hpp"

namespace pav::props {

// A call prepared for a kernel under test. The request's views point into this
// object and into the case or call it was prepared from; not copyable.
struct KernelCall {
  adapters::DecodeRequest request;
  std::optional<kernels::WorkPlan> plan;
  kernels::PlanView plan_view{};
  std::vector<uint8_t> out;  // the output when its dtype differs from q's
  std::vector<float> lse;

  KernelCall() = default;
  KernelCall(const KernelCall&) = delete;
  KernelCall& operator=(const KernelCall&) = delete;
};

// The request for a built case: out (and lse when the kernel writes it) filled
// with NaN, pav's work plan from the case's lengths for split = plan kernels
// (max_partitions is the plan's ceiling), spec.max_partitions as the ceiling
// otherwise.
void prepare_kernel_call(KernelCall& k, HostCase& c, const adapters::KernelDescription& d);
// The request for any call (gate-bypass shapes): plan as given, out poisoned
// in place, lse added when the kernel writes it.
void prepare_kernel_call(KernelCall& k, const kernels::DecodeCall& call, const kernels::PlanView* plan,
                         const adapters::KernelDescription& d);

// How pav runs a kernel: its check entry first when it has one, and decode only
// for a call the check accepted. A refused call never reaches decode. pav's own
// I/O failing on its side of a call comes as pav::IoError (common/durable_file.hpp),
// never as a CallResult: it is thrown on through the property checks
// (fuzz::guarded) and ends the run with exit 3, no verdict and no case saved.
struct CheckedRun {
  bool checked = false;     // the kernel has a check entry and it answered
  adapters::CallResult check;   // ok = accepted
  bool decoded = false;     // decode was called
  adapters::CallResult decode;
  bool ok() const { return check.ok() && decoded && decode.ok(); }
};
CheckedRun run_checked(adapters::KernelUnderTest& k, const adapters::DecodeRequest& r);

// "kernel refused the call: ...", "stale plan: ...", "kernel error: ...", or a
// fault's own message.
std::string outcome_text(const adapters::CallResult& r);

// The reference options and the comparison options a profile calls for.
reference::ReferenceResult reference_for(const kernels::DecodeCall& call, const adapters::Profile& p,
                                         reference::Precision precision = reference::Precision::fp32);

struct KernelJudgement {
  bool passed = false;
  std::string verdict;  // one line
  reference::CompareReport compare;
  // A failure of a known shape, named ("" when none is recognised; the verdict
  // then starts with its explanation):
  //   nan-from-masked-slots  non-finite output that goes away when every cache
  //                          slot no context reads holds zero instead of NaN
  std::string known;
};
inline constexpr const char* kNanFromMaskedSlots = "nan-from-masked-slots";
// out (and lse when present) against the reference of the request's call.
// ref: the reference of this call under the kernel's profile when the caller
// has it already (nullptr: computed here).
KernelJudgement judge_kernel_output(const adapters::DecodeRequest& r, const adapters::KernelDescription& d,
                                    const reference::ReferenceResult* ref = nullptr);

// The decode property's check: builds the case, refuses to hand the kernel a
// call outside its description (a generator bug), asks its check entry, runs
// decode and judges the output. A failure with non-finite output is run once
// more with the cache past every context zero instead of NaN: right then, it
// is named nan-from-masked-slots.
// ref_cache: when given, the reference is taken from it or stored into it (two
// kernels of one profile judged on the same case share it).
KernelJudgement check_kernel_case(const CaseSpec& spec, adapters::KernelUnderTest& k,
                                  std::optional<reference::ReferenceResult>* ref_cache = nullptr);

}  // namespace pav::props
