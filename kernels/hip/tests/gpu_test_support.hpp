// SPDX-License-Identifier: Apache-2.0
#pragma once
// Support for the GPU suites: a decode case mirrored in device memory, the
// partition layout of both split strategies, and the enclosure model that
// bounds GPU vs CPU backend differences (see gpu_test_support.cpp for the
// derivation).
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/call.hpp"
#include "kernels/hip/gpu_backend.hpp"
#include "kernels/planner.hpp"
#include "properties/case/host_case.hpp"

namespace pav::kernels::gpu::testing {

// Picks the device CTest assigned to this test (CTEST_RESOURCE_GROUP_0_GPUS =
// "id:N,slots:1"); device 0 when run outside CTest's resource allocation.
int select_ctest_device();

// A host case copied to the device. call() has the host case's shapes and
// strides with device pointers.
struct DeviceCase {
  explicit DeviceCase(const props::HostCase& host);
  DecodeCall call() const { return call_; }
  void poison_output(StreamHandle s = nullptr);  // NaN (all bits set) into out
  std::vector<uint16_t> download_output(StreamHandle s = nullptr) const;
  void upload_lens(const std::vector<int32_t>& lens, StreamHandle s = nullptr);
  void upload_caches(const props::HostCase& host, StreamHandle s = nullptr);

  DeviceBuffer q, out, k, v, tables, lens, k_scale, v_scale;
  size_t out_bytes = 0;

 private:
  DecodeCall call_;
};

// Scratch on the device or host, `slots` slots, poisoned with all bits set
// (NaN in f32, bf16 and f16).
struct DeviceScratch {
  DeviceScratch(const DecodeCall& call, int64_t slots);
  Scratch view;
  DeviceBuffer partial, m, l;
  int64_t slots = 0, rows = 0, head_dim = 0;
  DType dtype = DType::bf16;
  void poison(StreamHandle s = nullptr);
};
struct HostScratch {
  HostScratch(const DecodeCall& call, int64_t slots);
  Scratch view;
  std::vector<uint8_t> partial;
  std::vector<float> m, l;
  int64_t slots = 0, rows = 0, head_dim = 0;
  DType dtype = DType::bf16;
  float partial_at(int64_t i) const;
  void download(const DeviceScratch& d, StreamHandle s = nullptr);
};

// A plan's device buffers.
struct DevicePlan {
  explicit DevicePlan(const PlanParams& params);
  PlanView view();  // device pointers
  void refresh(const int32_t* dev_lens, StreamHandle s = nullptr);
  void download(std::vector<int32_t>& work, std::vector<int32_t>& reduce, StreamHandle s = nullptr) const;
  PlanParams params;
  int64_t capacity = 0;
  DeviceBuffer work, reduce;
};

// One partition of one (sequence, KV head): tiles [tile0, tile1) into `slot`.
struct Partition {
  int64_t seq, h, tile0, tile1, slot;
};
// Which slots the reduce of (seq, h) merges: base .. base+count-1.
struct Merge {
  int64_t seq, h, base, count;
};
struct Layout {
  std::vector<Partition> parts;
  std::vector<Merge> merges;
  bool direct = false;       // uniform with one split: no scratch, no reduce
  int64_t slots = 0;         // scratch slots the layout addresses
};
Layout uniform_layout(const DecodeCall& host_call);
Layout planned_layout(const DecodeCall& host_call, const WorkPlan& plan);

// Enclosures [lo, hi] for every value both backends may produce.
struct Enclosure {
  std::vector<double> out_lo, out_hi;          // [rows_total, Hq, D] output elements
  std::vector<double> part_lo, part_hi;        // [slots, rows, D] (layout slots)
  std::vector<double> m_lo, m_hi, l_lo, l_hi;  // [slots, rows]
  std::vector<uint8_t> slot_written;           // [slots]: a partition writes the slot
  std::vector<uint8_t> seq_nan;                // [num_seqs]: output NaN (stale plan)
};
// host_call: views of the host case; stale: sequences whose output must be NaN.
Enclosure enclose(const DecodeCall& host_call, const Layout& layout,
                  const std::vector<uint8_t>& stale = {});

struct CheckReport {
  int64_t checked = 0, outside = 0;
  int64_t single = 0;      // checked values whose enclosure is one representable value
  double widest = 0;       // widest enclosure (hi - lo) of a checked value
  std::string first;       // the first element outside its enclosure
  bool ok() const { return outside == 0; }
};
// Output elements (q dtype bits) against the enclosure.
CheckReport check_output(const DecodeCall& host_call, const std::vector<uint16_t>& out,
                         const Enclosure& e, const std::string& who);
// Scratch slots a partition wrote, against the enclosure.
CheckReport check_scratch(const HostScratch& s, const Layout& layout, const Enclosure& e,
                          const std::string& who);
// Scratch elements of slots no partition wrote that are no longer NaN.
int64_t touched_unwritten_slots(const HostScratch& s, const Layout& layout, const Enclosure& e);

std::string describe(const props::CaseSpec& spec);

// Sets every cache byte of sequence tokens in [new_len, blocks*block_size) of
// each sequence's own blocks to the NaN code (after lengths shrink).
void poison_past(props::HostCase& hc, const std::vector<int32_t>& new_lens);

// Sequences a planned decode must treat as stale (the CPU backend's rule,
// restated: a task recorded for another length, or no task but a positive
// live length).
std::vector<uint8_t> stale_sequences(const WorkPlan& plan, const std::vector<int32_t>& live);

// One case through both backends on one path, every check applied:
// CPU and GPU outputs (and scratch) inside the enclosure, scratch slots no
// partition writes still NaN, plan and status equal to the host's, and the GPU
// output against the reference standard. `ok` with a message per failure.
struct Outcome {
  bool ok = true;
  std::string message;  // failures, one a line
  std::string summary;  // widest enclosures seen etc.
  void fail(const std::string& m) {
    ok = false;
    message += m + "\n";
  }
};
struct RunOptions {
  bool reference = true;   // also compare with reference::decode
  StreamHandle stream = nullptr;
};
Outcome run_case(const props::CaseSpec& spec, props::Path path, const RunOptions& opt = {});

// What a GPU run left: output, scratch, status and (planned) the device plan.
struct GpuResults {
  explicit GpuResults(const DecodeCall& call) : scratch(call, 1) {}
  DecodeCall call_host_shape;
  std::vector<uint16_t> out;
  HostScratch scratch;
  DecodeResult status;
  std::vector<int32_t> plan_work, plan_reduce;  // empty when not downloaded
};
// Runs the GPU side of a case (plan refreshed on the device from its lengths).
GpuResults run_gpu(const props::HostCase& hc, props::Path path, StreamHandle stream = nullptr);
// Runs the CPU side and applies every check to the GPU's results. `plan`: the
// host plan the GPU ran with (nullptr: refreshed from the case's lengths).
Outcome check_results(props::HostCase& hc, props::Path path, const GpuResults& gpu,
                      const WorkPlan* plan = nullptr, bool with_reference = true);

}  // namespace pav::kernels::gpu::testing
