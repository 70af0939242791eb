// SPDX-License-Identifier: Apache-2.0
#include "properties/checks/runner.hpp"

#include <fmt/core.h>

#include "kernels/split_rules.hpp"
#include "kernels/validate.hpp"

namespace pav::props {

using namespace pav::kernels;

RunResult run_case(HostCase& c, Backend backend) {
  RunResult r;
  c.poison_output();
  DecodeCall call = c.call();
  const CallDims d = dims_of(call);
  r.heads = d.hkv;
  if (c.spec.path == Path::planned) {
    r.plan.emplace(plan_params(c.spec));
    r.plan->refresh(c.lens.data());
    r.slots_per_head = r.plan->capacity();
    r.active_tasks = r.plan->active_tasks();
    PlanView view = r.plan->view();
    // The call is refused before its scratch is sized from it (a split count
    // or a partial dtype the kernel refuses would size it wrong).
    if (const Finding f = first_violation(call, KernelKind::planned, &view, nullptr)) throw RejectError(f, KernelKind::planned);
    r.scratch = make_scratch(call, d.hkv * r.slots_per_head, d.hkv);
    r.status = launch_planned(call, &view, r.scratch.view, backend);
  } else {
    if (const Finding f = first_violation(call, KernelKind::uniform, nullptr, nullptr)) throw RejectError(f, KernelKind::uniform);
    r.splits = uniform_splits(call);
    r.slots_per_head = d.num_seqs * r.splits;
    r.active_tasks = r.slots_per_head;
    r.scratch = make_scratch(call, d.num_seqs * d.hkv * r.splits);
    launch_uniform(call, r.scratch.view, backend);
  }
  return r;
}

}  // namespace pav::props
