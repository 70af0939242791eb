// SPDX-License-Identifier: Apache-2.0
#pragma once
// Readers for the files the stats commands take. Every failure throws
// InputError whose message names the file and the line ("a.jsonl:3: ...") or
// the field ("a.json: latency_ms[2] ...") at fault. Blank lines in JSONL files
// are skipped; line numbers count every physical line from 1.
#include "stats/bench.hpp"
#include "stats/input_error.hpp"
#include "stats/paired.hpp"
#include "stats/trace.hpp"

#include <istream>
#include <string>
#include <vector>

namespace pav::stats {

// JSONL, one item per line: {"id": string or integer, "correct": true|false},
// other fields ignored. An integer id and the string of its digits are the same
// id. Rejects malformed lines, missing or mistyped fields, duplicate ids and a
// file with no items.
CorrectnessRun parse_correctness(std::istream& in, const std::string& source);
CorrectnessRun read_correctness(const std::string& path);

// JSON object: {"latency_ms": [positive numbers, at least one],
// "completed": optional non-negative integer, "duration_s": optional positive
// number}; null counts as absent, other fields are ignored.
BenchRun parse_bench(std::istream& in, const std::string& source);
BenchRun read_bench(const std::string& path);

// JSONL, one decode step per line: {"context_lens": [32-bit integers, at least one]},
// other fields ignored. Rejects a file with no steps.
std::vector<TraceStep> parse_trace(std::istream& in, const std::string& source);
std::vector<TraceStep> read_trace(const std::string& path);

}  // namespace pav::stats
