// SPDX-License-Identifier: Apache-2.0
#pragma once
// pav's own decode kernels as a kernel under test (pav:cpu, pav:gpu), and the
// same kernels behind the C ABI (libpav_cpu_kernel.so). Configuration words:
//   --path planned|uniform   planned: runs pav's work plan (split = plan);
//                            uniform: splits by itself, takes a split ceiling
//   --partial bf16|f16|f32   dtype of the normalized partials (default bf16)
//   --arch sm90|gfx950|gfx942  the fp8 flavour it reads (default sm90: e4m3fn)
//   --cu N                   compute units the work is spread over (default 132)
#include <memory>
#include <string>
#include <vector>

#include "adapters/kernel.hpp"
#include "kernels/launch.hpp"

namespace pav::adapters {

struct PavKernelOptions {
  bool planned = true;
  kernels::DType partial = kernels::DType::bf16;
  kernels::Arch arch = kernels::Arch::sm90;
  int cu = 132;
  kernels::Backend backend = kernels::Backend::cpu;
};

// Parses the configuration words; throws KernelSpecError naming the word.
PavKernelOptions parse_pav_kernel_words(const std::vector<std::string>& words);

// The --kernel text that opens these options again: pav:cpu or pav:gpu and
// pav_kernel_words, every configuration word spelled out
// (parse_pav_kernel_words reads them back).
std::string pav_kernel_spec(const PavKernelOptions& o);
std::string pav_kernel_words(const PavKernelOptions& o);

// What pav's kernels support under these options.
KernelDescription pav_kernel_description(const PavKernelOptions& o);

// The call pav's kernels run for a request: the configured arch, compute,
// partial dtype and CU count, the request's softmax scale and (uniform) its
// split ceiling as the split count.
kernels::DecodeCall pav_kernel_call(const PavKernelOptions& o, const DecodeRequest& r);

// pav's kernels' own check: their validation (kernels/validate.hpp) and the
// limits of the description above. Empty when accepted, else the reason.
std::string pav_kernel_refusal(const PavKernelOptions& o, const DecodeRequest& r);

// Runs the call through the launch entries (validation included) with scratch
// of its own, NaN-poisoned. Never throws for the call's content: a reject or a
// stale plan is the result's outcome, and a planned launch that wrote scratch
// slots past the plan's active tasks is a kernel_error (those slots belong to
// no task: a write there is a task index gone wrong).
CallResult pav_kernel_decode(const PavKernelOptions& o, const DecodeRequest& r);

// pav's kernels as a kernel under test (adapter "pav").
std::unique_ptr<KernelUnderTest> make_pav_kernel(const PavKernelOptions& o, const std::string& spec);

// pav:cpu / pav:gpu. Throws KernelSpecError for bad words, KernelUnavailable
// for pav:gpu without a device.
std::unique_ptr<KernelUnderTest> open_pav_kernel(const std::string& which, const std::vector<std::string>& words,
                                                 const std::string& spec);

}  // namespace pav::adapters
