// SPDX-License-Identifier: Apache-2.0
#pragma once
// The drift sweep's data: counter-based normal source values, the batch's
// trace-like lengths, and the decode call of one (cell, data seed) with the
// source values the end-to-end reference reads.
#include <cstdint>
#include <vector>

#include "properties/drift_run_sweep.hpp"
#include "properties/host_case.hpp"
#include "reference/source_decode.hpp"

namespace pav::props {

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

// The lengths of one cell's batch: request 0 has `context`; each shorter one
// has max(min_len, round(context / r)) with r drawn as DriftShorter says,
// from `seed` (request i's draw does not depend on the batch size).
std::vector<int32_t> trace_like_lengths(int32_t context, int batch, const DriftShorter& shorter, uint64_t seed);

}  // namespace pav::props
