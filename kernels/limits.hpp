// SPDX-License-Identifier: Apache-2.0
#pragma once
// pav's resource limits, in one place: what one decode call, one work plan and
// the text a kernel under test supplies may be. (What one input file may be is
// the JSON reader's: input/limits.hpp.) Every reader and option parser checks its values
// against these before it allocates or computes anything from them, so a
// hostile or mistyped input is refused in milliseconds with the field named,
// never run out of memory or into an integer overflow. docs/limits.md lists
// them with what is rejected and how; a change here changes that page.
#include <cstdint>

namespace pav::kernels {

// ---- a call and its plan ------------------------------------------------------------

// Requests in one batch (num_seqs): the plan's reduce_info rows.
inline constexpr int kMaxPlanBatch = 4096;
// Compute units (SMs) of a device; real parts have a few hundred.
inline constexpr int64_t kMaxCu = 4096;
// Workgroup budget of a plan. With the batch and cu limits it bounds a plan's
// capacity to ~2^20 slots, and keeps the planner's largest product
// (prefix tiles x remaining slots <= 2^35 x 2^21) far inside int64.
inline constexpr int64_t kMaxWorkgroupBudget = int64_t(1) << 20;
// KV heads of a call or a plan (the budget is divided by it, rounded up).
inline constexpr int64_t kMaxKvHeads = 1024;
// Context lengths are int32 by the kernels' contract; this is the type's range,
// and kMaxPlanTiles the 256-token tiles of the longest.
inline constexpr int64_t kMaxContextLen = 2147483647;
inline constexpr int64_t kMaxPlanTiles = (kMaxContextLen + 255) / 256;

// Shape fields of a case file (properties/case/case_format.cpp). Every case pav
// saves must replay, so a kernel's description is held to them too
// (adapters::description_problem): pav refuses, when the kernel describes
// itself, a G or a minimum q_len it could generate but never read back.
inline constexpr int kMaxQLen = 16;
inline constexpr int kMaxGroup = 128;
inline constexpr int kMaxHeadDim = 4096;
inline constexpr int kMaxBlockSize = 4096;

// Head dims the GPU decode kernels run (kernels/hip): 64..1024 in steps of 16.
// pav's GPU kernel describes no other.
inline constexpr int kGpuMinHeadDim = 64;
inline constexpr int kGpuMaxHeadDim = 1024;

// Host memory one case may need (q, out, both caches, scales, block tables and
// the scratch of its path), checked before any of it is allocated. The largest
// generated or saved case is a few tens of MiB.
inline constexpr int64_t kMaxCaseHostBytes = int64_t(1) << 30;
// A case whose cache spans 2^31 elements or more (low_spare_blocks, for kernels
// that declare large_cache) may take this much host memory instead.
inline constexpr int64_t kMaxLargeCaseHostBytes = int64_t(16) << 30;
// K and V caches of the largest cell of a drift sweep (the full sweep's largest
// is under 5 GB; a GPU holds 141 GB). Checked when the sweep is read.
inline constexpr int64_t kMaxDriftCellBytes = int64_t(64) << 30;

// ---- text a kernel under test supplies ------------------------------------------------

// A kernel's name and version (a description longer than this is refused).
inline constexpr int64_t kMaxKernelNameBytes = 256;
// A message or reason a kernel returns, a worker's reply line quoted in a
// fault, an .npy header quoted in an error: cut (at a character boundary) to
// this many bytes.
inline constexpr int64_t kMaxKernelMessageBytes = 2048;
// The excerpt of a worker's stderr quoted in a fault verdict.
inline constexpr int64_t kMaxWorkerStderrBytes = 2048;
// One reply line of a worker (or request line of pav kernel-worker).
inline constexpr int64_t kMaxWorkerLineBytes = int64_t(64) << 20;

}  // namespace pav::kernels
