// SPDX-License-Identifier: Apache-2.0
#include "stats/inputs.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>

#include "input/json_input.hpp"
#include "input/limits.hpp"

namespace pav::stats {

namespace {

using nlohmann::json;
using input::Array;
using input::Object;

constexpr std::int64_t kMinLen = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t kMaxLen = std::numeric_limits<std::int32_t>::max();
constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();

// Calls on_record(object) for every non-blank line, after parsing it; the
// object's source is "file:line".
template <class F>
void for_each_record(std::istream& in, const std::string& source, F&& on_record) {
  input::for_each_line(in, source, [&](std::string_view line, long number) {
    const std::string where = fmt::format("{}:{}", source, number);
    const json value = input::parse_json(line, where);
    on_record(Object(value, where), number);
  });
  if (in.bad()) throw input::ReadError(source + ": read error");
}

}  // namespace

CorrectnessRun parse_correctness(std::istream& in, const std::string& source) {
  CorrectnessRun run;
  run.source = source;
  for_each_record(in, source, [&](const Object& v, long line) {
    CorrectnessItem item;
    item.line = line;
    const json& id = v.at("id");
    if (id.is_string()) {
      item.id = id.get<std::string>();
    } else if (id.is_number_unsigned()) {
      item.id = std::to_string(id.get<std::uint64_t>());
    } else if (id.is_number_integer()) {
      item.id = std::to_string(id.get<std::int64_t>());
    } else {
      v.fail("id", "expected a string or an integer, got " + input::excerpt(id));
    }
    item.correct = v.boolean("correct");
    run.add(std::move(item));
  });
  if (run.items.empty()) throw InputError(fmt::format("{}: empty file: no items", source));
  return run;
}

CorrectnessRun read_correctness(const std::string& path) {
  auto in = input::open_input(path, input::kMaxJsonlFileBytes);
  return parse_correctness(in, path);
}

BenchRun parse_bench(std::istream& in, const std::string& source) {
  const json v = input::parse_json(input::read_all(in, source, input::kMaxJsonFileBytes), source);
  const Object o(v, source);
  BenchRun run;
  run.source = source;
  // Positive and finite: a latency of 0 or inf is a broken measurement.
  const Array lat = o.array("latency_ms", 1, kAny);
  run.latency_ms.reserve(lat.size());
  for (std::size_t i = 0; i < lat.size(); ++i) run.latency_ms.push_back(lat.positive(i));
  if (o.given("completed")) run.completed = o.integer<std::int64_t>("completed", 0, INT64_MAX);
  if (o.given("duration_s")) run.duration_s = o.positive("duration_s");
  return run;
}

BenchRun read_bench(const std::string& path) {
  auto in = input::open_input(path, input::kMaxJsonFileBytes);
  return parse_bench(in, path);
}

std::vector<TraceStep> parse_trace(std::istream& in, const std::string& source) {
  std::vector<TraceStep> steps;
  for_each_record(in, source, [&](const Object& v, long line) {
    TraceStep step;
    step.line = line;
    // int32 like the kernels' context_lens; also keeps every sum far from overflow.
    step.context_lens = v.array("context_lens", 1, kAny).integers<std::int64_t>(kMinLen, kMaxLen);
    steps.push_back(std::move(step));
  });
  if (steps.empty()) throw InputError(fmt::format("{}: empty file: no steps", source));
  return steps;
}

std::vector<TraceStep> read_trace(const std::string& path) {
  auto in = input::open_input(path, input::kMaxJsonlFileBytes);
  return parse_trace(in, path);
}

}  // namespace pav::stats
