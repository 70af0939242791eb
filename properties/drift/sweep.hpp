// SPDX-License-Identifier: Apache-2.0
#pragma once
// The drift sweep file (format pav-drift-sweep/1) and what it expands to: the
// cells (context x batch x heads, with the batch's lengths) and the arms run in
// every cell. Parsing errors name the field at fault.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/types.hpp"
#include "reference/decode.hpp"
#include "stats/drift.hpp"

namespace pav::props {

inline constexpr const char* kDriftSweepFormat = "pav-drift-sweep/1";

// ---- the sweep file ------------------------------------------------------------

struct DriftHeads {
  int hkv = 1;
  int group = 8;  // query heads per KV head
};

// How the shorter requests of a batch are drawn: each one's ratio r = longest /
// its length is log-normal with the given median and 90th percentile
// (truncated to r >= 1 by redrawing); its length is max(min_len, round(context / r)).
struct DriftShorter {
  double ratio_p50 = 2.49;  // per-step longest/shortest of the agentic trace, p50
  double ratio_p90 = 22.2;  // and p90 (docs/numerics.md, "Why a planner")
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

// Reads a sweep through input/'s rules; throws input::InputError (an
// invalid_argument) "SOURCE: FIELD: why" ("sweep.json: ceilings[2]: ...").
DriftSweep parse_drift_sweep(const nlohmann::json& j, const std::string& source = "sweep");
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
// trace_like_lengths (declared below; the first k requests do
// not depend on the batch size).
std::vector<DriftCell> drift_cells(const DriftSweep& s);

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

// The lengths of one cell's batch: request 0 has `context`; each shorter one
// has max(min_len, round(context / r)) with r drawn as DriftShorter says,
// from `seed` (request i's draw does not depend on the batch size).
std::vector<int32_t> trace_like_lengths(int32_t context, int batch, const DriftShorter& shorter, uint64_t seed);

}  // namespace pav::props
