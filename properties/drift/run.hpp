// SPDX-License-Identifier: Apache-2.0
#pragma once
// The drift sweep (docs/drift.md): does the decode error grow with the split
// ceiling? For each cell (context length x batch x heads) and each data seed it
// builds one decode call from fp32 source values, two references (over the
// dequantized cache, and end to end over the source values), runs every arm
// (planned kernel at each ceiling and partial dtype, the uniform split as a
// baseline, each through a kernel-under-test adapter, and optionally a
// positive-control arm) and records error figures
// and the split counts the planner really gave. A paired test per cell decides
// whether the error at the highest ceiling exceeds the error at the lowest.
//
// One file per job: the sweep file and its cells and arms (drift_run_sweep),
// the data (drift_run_data), the run loop (here), the JSON and Markdown
// reports (drift_run_report), the gnuplot driver (drift_run_plot), the
// progress line (drift_run_progress).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/kernel.hpp"
#include "kernels/launch.hpp"
#include "properties/drift/data.hpp"
#include "properties/drift/progress.hpp"
#include "properties/drift/sweep.hpp"
#include "reference/decode.hpp"
#include "stats/drift.hpp"

namespace pav::props {

// ---- the positive control (test-only hook, CPU scratch) -----------------------------
// The launch API runs attention and reduce together, so the control arm takes the
// host scratch a planned CPU run left behind, adds `epsilon` to l of every
// partition row that saw a token (a defect whose weight error grows as
// partitions shrink), and merges again with reduce_planned_scratch.
void inject_partition_epsilon(const kernels::Scratch& scratch, const kernels::PlanView& plan, int64_t rows,
                              float epsilon);
// The reduce (docs/numerics.md) over a planned scratch, written to call.out,
// with the CPU backend's operation order (so epsilon 0 reproduces its output bit
// for bit): M = max m_p, w_p = l_p exp(m_p - M), L = sum w_p, out = sum (w_p/L) O_p.
void reduce_planned_scratch(const kernels::DecodeCall& call, const kernels::PlanView& plan,
                            const kernels::Scratch& scratch);

// ---- results ---------------------------------------------------------------------------

struct ErrorFigures {
  double rel_l2 = 0;       // ||out - ref|| / ||ref|| over the whole output
  double max_row_rel = 0;  // max over rows (seq, position, q head) of ||out_row - ref_row|| / ||ref_row||
  double max_abs = 0;      // max |out - ref|
  int64_t mismatches = 0;  // reference::compare against this reference
  int64_t nonfinite = 0;
};
ErrorFigures error_figures(const kernels::TensorView& out, const reference::ReferenceResult& ref);

struct SplitCounts {
  int64_t min = 0, max = 0;
  double median = 0;
  std::vector<int64_t> per_request;  // non-empty partitions each request got
};
SplitCounts split_counts(std::vector<int64_t> per_request);

struct ArmResult {
  DriftArm arm;
  SplitCounts splits;
  std::vector<ErrorFigures> kernel_ref;  // per data seed
  std::vector<ErrorFigures> end_to_end;  // per data seed
  int64_t status_failures = 0;           // runs whose DecodeResult was not ok
  std::string first_error;               // a kernel under test: the first run that did not succeed
};

enum class DriftReference : uint8_t { kernel, end_to_end };
struct GrowthRow {
  std::string arms;         // "planned bf16", "control bf16"
  kernels::DType partial = kernels::DType::bf16;
  DriftReference reference = DriftReference::kernel;
  int low_ceiling = 0, high_ceiling = 0;
  bool splits_differ = true;  // the two ceilings gave different split counts
  stats::GrowthTest test;
};

struct CellResult {
  DriftCell cell;
  std::vector<ArmResult> arms;
  std::vector<GrowthRow> growth;      // planned arms: per partial x reference
  std::optional<GrowthRow> control;   // control arms (kernel reference)
  bool growth_found = false;          // any row of `growth` says growth
  bool control_ok = true;             // control flipped, or could not (identical splits), or off
  int64_t mismatches = 0, nonfinite = 0, status_failures = 0;  // non-control arms, kernel reference
  double seconds = 0;
  // Where the time went (wall seconds, all seeds): building the data, the two
  // references, the kernel arms, the control's re-reduce.
  double seconds_data = 0, seconds_kernel_ref = 0, seconds_end_to_end_ref = 0, seconds_arms = 0, seconds_control = 0;
  bool passed = false;
  std::string verdict;                // one line
};

struct DriftReport {
  DriftSweep sweep;
  std::string backend = "cpu";
  std::vector<CellResult> cells;
  double seconds = 0;
  bool growth = false;          // any cell
  bool control_run = false;     // control arms ran in a cell whose ceilings split differently
  bool control_ok = true;       // every such cell flipped
  int64_t mismatches = 0;
  bool passed = false;
  std::string verdict;          // one line
  std::string first_failure;
};

struct DriftRunOptions {
  // Without a kernel under test: pav's own kernels, through their adapter
  // (pav:cpu or pav:gpu with each arm's settings) on this backend.
  kernels::Backend backend = kernels::Backend::cpu;
  // A kernel under test instead of pav's kernels: each planned arm runs it with
  // the arm's ceiling (its plan's for split = plan kernels, its split ceiling
  // otherwise), the kernel reference follows its profile, and there are no
  // uniform or control arms (the caller leaves them out of the sweep: see
  // kernel_sweep()).
  adapters::KernelUnderTest* kernel = nullptr;
  std::function<void(const DriftProgress&)> progress;  // called before each step
};

// The sweep a kernel under test runs: its own partial dtype, no uniform
// baseline, no positive control. Throws std::invalid_argument when the kernel
// takes no split ceiling or a ceiling passes its limit.
DriftSweep kernel_sweep(DriftSweep s, const adapters::KernelDescription& d);

// Runs the given cells (from drift_cells, possibly filtered). Throws
// kernels::RejectError if a call is rejected (a sweep outside the kernels'
// domain).
DriftReport run_drift(const DriftSweep& s, const std::vector<DriftCell>& cells, const DriftRunOptions& o = {});

}  // namespace pav::props
