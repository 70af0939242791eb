// SPDX-License-Identifier: Apache-2.0
// Links one function of each installed library and checks what it returns
// against values worked out by hand.
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "kernels/planner.hpp"
#include "reference/decode.hpp"
#include "stats/proportion.hpp"

int main() {
  int bad = 0;
  auto check = [&](bool ok, const char* what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    bad += ok ? 0 : 1;
  };
  // The planner: an unset partition cap is the CU count, the budget twice it.
  pav::kernels::PlanParams p;
  p.num_seqs = 3;
  p.kv_heads = 2;
  p.cu = 8;
  const pav::kernels::PlanParams r = pav::kernels::resolve(p);
  check(r.max_partitions == 8 && r.workgroup_budget == 16, "planner: defaults resolved (8 partitions, budget 16)");
  bool threw = false;
  try {
    pav::kernels::PlanParams none;
    pav::kernels::resolve(none);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  check(threw, "planner: zero sequences refused");
  // The reference: bf16 keeps 7 mantissa bits, a unit roundoff of 2^-8.
  check(pav::reference::p_unit_roundoff(pav::reference::PRound::bf16) == 1.0 / 256, "reference: bf16 unit roundoff");
  // Stats: the 95% Wilson interval of 0 of 10 is [0, z^2/(n+z^2)] = [0, 0.27754].
  const auto w = pav::stats::wilson_interval(0, 10, 0.95);
  check(w.lo == 0 && std::fabs(w.hi - 0.27754) < 1e-4, "stats: Wilson interval of 0/10");
  std::printf("pav %s found by find_package\n", PAV_FOUND_VERSION);
  return bad == 0 ? 0 : 1;
}
