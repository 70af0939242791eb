// SPDX-License-Identifier: Apache-2.0
#pragma once
// The limits of an input file, in one place: what the JSON reader
// (input/json_input.hpp) accepts of a document, a JSONL file and a value it
// quotes. Every file pav reads goes through that reader, so these bound them
// all; checked before anything is allocated or computed from the file.
// docs/limits.md lists them; a change here changes that page.
#include <cstdint>

namespace pav::input {

// A JSON document (case file, drift sweep, bench run): checked with stat before
// it is read.
inline constexpr int64_t kMaxJsonFileBytes = int64_t(64) << 20;
// A JSONL file (accuracy runs, traces) is read line by line: one line at most
// this long, the whole file at most kMaxJsonlFileBytes.
inline constexpr int64_t kMaxJsonlLineBytes = int64_t(16) << 20;
inline constexpr int64_t kMaxJsonlFileBytes = int64_t(1) << 30;
// Nesting of arrays and objects in any JSON input (pav's formats need 4).
inline constexpr int kMaxJsonDepth = 64;
// Characters of an offending value quoted in an error message.
inline constexpr int kMaxExcerptChars = 60;

}  // namespace pav::input
