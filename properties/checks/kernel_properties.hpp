// SPDX-License-Identifier: Apache-2.0
#pragma once
// The properties of a kernel under test, generated within its description:
//   decode            cases it claims, against the reference under its profile
//   reject            (a kernel with a check entry) calls at and past the edges
//                     of its claim and the hard-reject classes: refused by its
//                     check, never reaching decode, correct where accepted
//   stale             (split = plan) stale and torn plans: stale_plan, refused,
//                     or computed right all the same
//   batch-invariance  (pav's self-splitting kernel) with a fixed split ceiling
//                     a request's output is bit-identical in its batch and alone
// pav's own kernels are kernels under test like any other: pav_kernel_properties()
// runs these same properties on them through their adapter.
#include <memory>
#include <vector>

#include "adapters/kernel.hpp"
#include "kernels/launch.hpp"
#include "properties/engine/fuzz_engine.hpp"

namespace pav::props::fuzz {

// How decode draws its calls. With regions, half from the decode regions
// (gen_kernel_case_weighted), each call's region named. With shapes > 0, every
// call in one of that many shapes drawn from shape_seed (draw_shapes), for
// kernels that compile per shape; each call's shape is named either way.
struct DecodeDraw {
  bool regions = false;
  int shapes = 0;  // 0: each call its own shape
  uint64_t shape_seed = 0;
};

// The shapes decode draws its calls in (draw.shapes of them, or fewer where
// the description has fewer); empty when draw.shapes is 0.
std::vector<CaseSpec> decode_shapes(const adapters::KernelDescription& d, const DecodeDraw& draw);

// decode, reject (has_check), stale (split = plan).
std::vector<Property> kernel_properties(const adapters::KernelDescription& d, const DecodeDraw& draw = {});
// The above, and batch-invariance for pav's self-splitting kernel.
std::vector<Property> kernel_properties(const adapters::KernelUnderTest& k, const DecodeDraw& draw = {});

// decode, batch-invariance, reject and stale on pav's own kernels, each case
// drawing pav's kernel settings (path, partial dtype, arch, compute units;
// stale on the planned kernel, batch-invariance on the uniform one) and
// running through pav's adapter on the context's backend. A saved case
// records those settings as its kernel (meta.kernel.spec: pav:cpu|gpu WORDS),
// so it replays through kernel_properties of that kernel.
std::vector<Property> pav_kernel_properties();

// pav's kernel for a case that records no kernel (saved before every case
// did): the settings its recipe holds (path, partial dtype, arch, compute
// units) on `backend`; a uniform case's split count becomes its split ceiling.
std::unique_ptr<adapters::KernelUnderTest> pav_kernel_for_case(CaseSpec& spec, kernels::Backend backend);

}  // namespace pav::props::fuzz
