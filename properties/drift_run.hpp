#pragma once
// The drift sweep (README, "Drift"): does the decode error grow with the split
// ceiling? For each cell (context length x batch x heads) and each data seed it
// builds one decode call from fp32 source values, two references (over the
// dequantized cache, and end to end over the source values), runs every arm
// (planned kernel at each ceiling and partial dtype, the uniform split as a
// baseline, and optionally a positive-control arm) and records error figures
// and the split counts the planner really gave. A paired test per cell decides
// whether the error at the highest ceiling exceeds the error at the lowest.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapters/kernel.hpp"
#include "kernels/launch.hpp"
#include "properties/host_case.hpp"
#include "reference/decode.hpp"
#include "reference/source_decode.hpp"
#include "stats/drift.hpp"

namespace pav::props {

inline constexpr const char* kDriftSweepFormat = "pav-drift-sweep/1";
inline constexpr const char* kDriftReportFormat = "pav-drift-report/1";

// ---- the sweep file ------------------------------------------------------------

struct DriftHeads {
  int hkv = 1;
  int group = 8;  // query heads per KV head
};

// How the shorter requests of a batch are drawn: each one's ratio r = longest /
// its length is log-normal with the given median and 90th percentile
// (truncated to r >= 1 by redrawing); its length is max(min_len, round(context / r)).
struct DriftShorter {
  double ratio_p50 = 2.49;  // REFERENCE section 1: per-step longest/shortest, p50
  double ratio_p90 = 22.2;  // and p90, of the agentic trace
  int32_t min_len = 1;
};

struct DriftSweep {
  std::string name = "sweep";
  std::string description;
  std::vector<int32_t> contexts;       // the longest request of each cell, tokens
  std::vector<int> batches;            // requests per cell
  std::vector<DriftHeads> heads{DriftHeads{}};
  int head_dim = 128;
  int block_size = 16;
  int q_len = 1;
  std::vector<int> ceilings;           // planner max_partitions, ascending, unique, 1..cu
  std::vector<kernels::DType> partials{kernels::DType::bf16, kernels::DType::f32};
  bool uniform_baseline = true;
  int cu = 256;                        // planner geometry (256: the upstream MI355X)
  int64_t workgroup_budget = 0;        // 0 = 2*cu
  kernels::Arch arch = kernels::Arch::sm90;  // fixes the fp8 flavour of cache and compute
  kernels::DType q_dtype = kernels::DType::bf16;
  double kv_scale = 0.03125;           // per-tensor K and V scale: code = fp8(source / kv_scale)
  double q_std = 1.0;                  // source q ~ N(0, q_std^2); K, V ~ N(0, 1)
  int seeds = 8;                       // data seeds per cell: seed, seed+1, ...
  uint64_t seed = 1;
  uint64_t lengths_seed = 7;           // the batch's lengths (fixed across data seeds)
  DriftShorter shorter;
  reference::Precision reference_precision = reference::Precision::fp64;
  stats::GrowthOptions growth;
  double control_epsilon = 0.0;        // > 0: positive-control arms (epsilon added to each partition's l)
};

// Throws std::invalid_argument naming the field ("ceilings[2]: ...").
DriftSweep parse_drift_sweep(const nlohmann::json& j);
// Reads a sweep file; the message names the file and the field.
DriftSweep load_drift_sweep(const std::string& path);
nlohmann::json sweep_to_json(const DriftSweep& s);
// The quick CPU sweep pav verify runs; fixtures/drift-quick.json holds the same
// sweep (a test keeps them equal).
const char* builtin_quick_sweep_json();
DriftSweep builtin_quick_sweep();

// ---- cells and arms ------------------------------------------------------------

struct DriftCell {
  int index = 0;
  std::string name;        // "120k/b8" (plus "/h1g8" when the sweep has several head configs)
  int32_t context = 0;
  int batch = 1;
  DriftHeads heads;
  std::vector<int32_t> lens;
  int64_t tokens = 0;      // sum of lens
};

// Request 0 has the cell's context; requests 1.. are drawn by
// trace_like_lengths (the first k requests do not depend on the batch size).
std::vector<DriftCell> drift_cells(const DriftSweep& s);
std::vector<int32_t> trace_like_lengths(int32_t context, int batch, const DriftShorter& shorter, uint64_t seed);

enum class ArmKind : uint8_t { planned, uniform, control };
struct DriftArm {
  ArmKind kind = ArmKind::planned;
  int ceiling = 0;                     // planned / control: max_partitions; uniform: 0
  kernels::DType partial = kernels::DType::bf16;
  std::string name;                    // "planned c256 bf16", "uniform bf16", "control c256 bf16"
};
// Planned arms (ceilings x partials), uniform arms (one per partial), control
// arms (one per ceiling, bf16 partials) when control_epsilon > 0.
std::vector<DriftArm> drift_arms(const DriftSweep& s);

// ---- data ------------------------------------------------------------------------

// One source value N(0, 1), a pure function of its coordinates (counter-based,
// so the cache builder and the end-to-end reference agree without storing it).
enum class SourceTensor : uint8_t { q = 1, k = 2, v = 3 };
float source_normal(uint64_t data_seed, SourceTensor t, int64_t a, int64_t b, int64_t c, int64_t d);

// The decode call of one (cell, data seed): K, V from source_normal quantized to
// the arch's fp8 flavour as fp8(source / kv_scale), q from q_std*source_normal
// rounded to q_dtype. Blocks are laid out in request order; every byte outside
// the context and the spare block are NaN. `q_source` keeps the unrounded q.
struct DriftData {
  HostCase c;
  std::vector<float> q_source;  // [num_seqs*q_len, Hq, D]
};
DriftData build_drift_data(const DriftSweep& s, const DriftCell& cell, uint64_t data_seed);
// The source K and V of that call, chunk by chunk, for reference::source_decode.
reference::SourceChunkFn drift_source_chunks(const DriftSweep& s, const DriftCell& cell, uint64_t data_seed);
reference::SourceGeometry drift_source_geometry(const DriftSweep& s, const DriftCell& cell);

// ---- the positive control (test-only hook, CPU scratch) -----------------------------
// The launch API runs attention and reduce together, so the control arm takes the
// host scratch a planned CPU run left behind, adds `epsilon` to l of every
// partition row that saw a token (a defect whose weight error grows as
// partitions shrink), and merges again with reduce_planned_scratch.
void inject_partition_epsilon(const kernels::Scratch& scratch, const kernels::PlanView& plan, int64_t rows,
                              float epsilon);
// The reduce of REFERENCE section 4 over a planned scratch, written to call.out,
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

struct DriftProgress {
  double done = 0, total = 1;   // work units (tokens x runs)
  std::string what;             // "cell 2/6 120k/b8 seed 3/8: planned c64 bf16"
  double elapsed_s = 0;
};

struct DriftRunOptions {
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

// ---- reports ----------------------------------------------------------------------------

nlohmann::json report_json(const DriftReport& r);
std::string report_markdown(const DriftReport& r);

// The plot of ||delta||/||ref|| against the ceiling, one line per cell and
// partial dtype (kernel reference, end to end, and the control when it ran):
// writes <stem>.dat and <stem>.gp next to png_path and runs gnuplot on it.
struct PlotOutcome {
  bool ok = false;
  std::string script, data;  // paths written
  std::string message;       // why it failed (gnuplot missing, no png terminal, gnuplot error)
};
PlotOutcome write_plot(const DriftReport& r, const std::string& png_path);
// "pngcairo" or "png" when gnuplot has it, "" when gnuplot is missing or has neither.
std::string gnuplot_png_terminal();

// One-line progress bar for stderr: "\r  drift [#####.....]  42%  cell 2/6 ...  1m02s, ~1m30s left".
std::string progress_line(const DriftProgress& p, int width = 100);

}  // namespace pav::props
