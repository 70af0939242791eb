// SPDX-License-Identifier: Apache-2.0
#pragma once
// Routing of decode calls (docs/lifecycle.md): two opt-ins in series, the
// gate, and the fallback to the uniform kernel; then decode(), the dispatcher
// that runs whichever kernel the route names.
//
//   planned_decode off        -> uniform                 (no gate check, nothing allocated)
//   dense site, work plan on  -> planned[N seqs]         with the metadata's plan, if it has one
//                                that matches the call and the gate accepts; else uniform
//   sparse site, or plan off  -> planned[N seqs, fixed splits]  if the gate accepts; else uniform
#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "kernels/call.hpp"
#include "kernels/dispatch/gate.hpp"
#include "kernels/dispatch/log.hpp"
#include "kernels/dispatch/metadata.hpp"
#include "kernels/dispatch/settings.hpp"
#include "kernels/launch.hpp"

namespace pav::kernels::dispatch {

// Dense sites attend over real, uneven context lengths and get a plan; sparse
// sites (a fixed top-k window) never do: the planner loses on uniform lengths.
enum class Site : uint8_t { dense, sparse };

enum class RouteKind : uint8_t {
  uniform,               // the uniform kernel (the default path)
  planned,               // the planned kernel over the metadata's work plan
  planned_fixed_splits,  // the planned kernel with its uniform split count (no plan)
};
enum class RouteReason : uint8_t {
  feature_off,   // PAV_PLANNED_DECODE is off
  accepted,      // the gate accepted
  gate_reject,   // the gate rejected: clause says which
  no_plan,       // dense site, plans on, but no plan for this batch
  plan_refused,  // the metadata's plan does not match the call (shape or lengths)
};
std::string_view to_string(RouteKind k);
std::string_view to_string(RouteReason r);

struct Route {
  RouteKind kind = RouteKind::uniform;
  RouteReason reason = RouteReason::feature_off;
  Clause clause = Clause::none;    // gate_reject: the violated clause
  const PlanView* plan = nullptr;        // planned: the metadata's plan
  const ForwardMetadata* md = nullptr;   // planned: whose forward_scratch() the launch gets
  int64_t num_seqs = 0;
};

// "uniform", "planned[N seqs]", "planned[N seqs, fixed splits]".
std::string route_label(const Route& r);

// True when plan may serve call: same num_seqs and Hkv, a ceiling in 1..cu, a
// capacity the planner could have made, and each sequence's tasks (the first
// and the last, which a refresh writes together with the rest) recorded from
// its live length; rows without tasks must have live length <= 0. A plan whose
// shapes agree but whose lengths are stale is refused. O(num_seqs).
bool plan_matches(const PlanView& plan, const DecodeCall& call) noexcept;

struct RouteCounts {
  uint64_t uniform = 0, planned = 0, planned_fixed_splits = 0;
  uint64_t gate_checks = 0, gate_rejects = 0, plans_refused = 0, no_plan = 0;
  uint64_t stale_results = 0;  // planned launches that reported a stale plan
  std::array<uint64_t, kClauseCount + 1> rejects_by_clause{};
};

class Router {
 public:
  explicit Router(Settings settings = startup_settings(), LogSink log = stderr_log_sink());
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Decides the route of one call. md: the forward's metadata (null outside a
  // forward: no plan). No allocation, no environment read, no exception; logs
  // the first occurrence of each distinct route label and of each gate clause.
  Route route(const DecodeCall& call, Site site, const ForwardMetadata* md) noexcept;

  const Settings& settings() const { return settings_; }
  void override_settings(Settings s) { settings_ = s; }
  RouteCounts counts() const;
  void note_stale(const Route& r, const DecodeResult& res);

 private:
  // Logs make_line() the first time `bit` is set in `word`. Never throws: a
  // failing sink must not fail a decode.
  template <class MakeLine>
  void log_once(std::atomic<uint64_t>& word, uint64_t bit, MakeLine&& make_line) noexcept {
    if (word.load(std::memory_order_relaxed) & bit) return;
    if (word.fetch_or(bit, std::memory_order_relaxed) & bit) return;
    if (!log_) return;
    try {
      log_("route: " + make_line());
    } catch (...) {
    }
  }
  Route finish(Route r) noexcept;

  Settings settings_;
  LogSink log_;
  std::atomic<uint64_t> uniform_{0}, planned_{0}, fixed_{0}, gate_checks_{0}, gate_rejects_{0},
      refused_{0}, no_plan_{0}, stale_{0};
  std::array<std::atomic<uint64_t>, kClauseCount + 1> by_clause_{};
  // Bits of labels already logged: planned[N] and fixed-splits[N] for N <= 4096.
  static constexpr size_t kSeqWords = kMaxPlanBatch / 64 + 1;
  std::array<std::atomic<uint64_t>, kSeqWords> seen_planned_{}, seen_fixed_{};
  std::atomic<uint64_t> seen_misc_{0}, seen_clause_{0};  // bit c: clause c logged
  static_assert(kClauseCount < 64, "one bit of seen_clause_ per clause");
};

// The dispatcher: routes the call and runs the chosen kernel. The uniform and
// fixed-splits routes get scratch sized for them here, allocated only when the
// split count needs it; the planned route uses the metadata's scratch and
// allocates nothing. Throws RejectError only when the uniform kernel itself
// rejects the call (the planned kernel never sees a call its gate rejected).
struct DecodeOutcome {
  Route route;
  DecodeResult result;
};
DecodeOutcome decode(Router& router, const DecodeCall& call, Site site, const ForwardMetadata* md,
                     Backend backend = Backend::cpu);

}  // namespace pav::kernels::dispatch
