// SPDX-License-Identifier: Apache-2.0
#pragma once
// The faults the test fixtures play, by name: `fault_worker --fault NAME` and
// the words `--fault NAME` of the pav_fault_modes plugin. Each fixture refuses
// a name not listed here, and adapters/protocol_table_test.cpp holds its table
// to these lists: a fault added here without a row of its own fails it.
#include <algorithm>
#include <array>
#include <string_view>

namespace pav::adapters::fixture {

inline constexpr auto kWorkerFaults = std::to_array<std::string_view>({
    "none",
    // decode: the process
    "crash", "exit", "exit-139", "hang", "close-stdout", "non-utf8",
    // decode: the reply line
    "garbage", "long-line", "no-ok", "bad-id", "no-id",
    // decode: ok false
    "reject", "stale-plan", "error", "status-missing", "status-unknown", "status-not-string", "no-message",
    // decode: the output files
    "missing", "wrong-shape", "wrong-dtype", "fortran", "too-large", "fifo", "devzero", "directory",
    "lse-missing", "nan",
    // check
    "check-reject", "check-reject-silent", "check-error", "check-no-accept", "check-reason-not-string",
    // describe, at the start and at a restart (--state FILE tells a restart)
    "no-describe", "describe-hang", "describe-garbage", "describe-not-ok", "describe-protocol-2",
    "describe-device", "describe-invalid", "describe-unknown-field", "describe-changes", "restart-fails",
    // quit
    "ignore-quit",
});

inline constexpr auto kPluginFaults = std::to_array<std::string_view>({
    "none",
    "init-error", "init-unavailable", "init-bad-status",
    "describe-error", "describe-device",
    "check-reject", "check-reject-silent", "check-error", "check-stale-plan", "check-bad-status",
    "decode-reject", "decode-stale-plan", "decode-error", "decode-unavailable", "decode-bad-status",
    "decode-stale-silent",
});

template <class List>
bool listed(const List& list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace pav::adapters::fixture
