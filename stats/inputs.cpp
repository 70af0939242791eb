#include "stats/inputs.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace pav::stats {

namespace {

using nlohmann::json;

std::ifstream open_input(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(fmt::format("{}: is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  return in;
}

// nlohmann's what() starts with "[json.exception.parse_error.101] "; keep the rest.
std::string json_reason(const json::exception& e) {
  std::string what = e.what();
  const auto close = what.find("] ");
  return close == std::string::npos ? what : what.substr(close + 2);
}

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
}

std::string shown(const json& v) {
  auto text = v.dump();
  constexpr std::size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

// Calls on_record(value, line) for every non-blank line, after parsing it.
template <class F>
void for_each_record(std::istream& in, const std::string& source, F&& on_record) {
  std::string line;
  long number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (blank(line)) continue;
    json value;
    try {
      value = json::parse(line);
    } catch (const json::exception& e) {
      throw InputError(fmt::format("{}:{}: malformed JSON: {}", source, number, json_reason(e)));
    }
    if (!value.is_object()) {
      throw InputError(fmt::format("{}:{}: expected a JSON object, got {}", source, number, shown(value)));
    }
    on_record(value, number);
  }
  if (in.bad()) throw InputError(fmt::format("{}: read error", source));
}

constexpr std::int64_t kMinLen = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t kMaxLen = std::numeric_limits<std::int32_t>::max();

}  // namespace

CorrectnessRun parse_correctness(std::istream& in, const std::string& source) {
  CorrectnessRun run;
  run.source = source;
  for_each_record(in, source, [&](const json& v, long line) {
    const auto id_it = v.find("id");
    if (id_it == v.end()) throw InputError(fmt::format("{}:{}: missing field \"id\"", source, line));
    CorrectnessItem item;
    item.line = line;
    if (id_it->is_string()) {
      item.id = id_it->get<std::string>();
    } else if (id_it->is_number_unsigned()) {
      item.id = std::to_string(id_it->get<std::uint64_t>());
    } else if (id_it->is_number_integer()) {
      item.id = std::to_string(id_it->get<std::int64_t>());
    } else {
      throw InputError(fmt::format("{}:{}: \"id\" must be a string or an integer, got {}", source, line,
                                   shown(*id_it)));
    }
    const auto ok_it = v.find("correct");
    if (ok_it == v.end()) {
      throw InputError(fmt::format("{}:{}: missing field \"correct\" (id \"{}\")", source, line, item.id));
    }
    if (!ok_it->is_boolean()) {
      throw InputError(fmt::format("{}:{}: \"correct\" must be true or false, got {} (id \"{}\")", source, line,
                                   shown(*ok_it), item.id));
    }
    item.correct = ok_it->get<bool>();
    run.add(std::move(item));
  });
  if (run.items.empty()) throw InputError(fmt::format("{}: empty file: no items", source));
  return run;
}

CorrectnessRun read_correctness(const std::string& path) {
  auto in = open_input(path);
  return parse_correctness(in, path);
}

BenchRun parse_bench(std::istream& in, const std::string& source) {
  json v;
  try {
    v = json::parse(in);
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: malformed JSON: {}", source, json_reason(e)));
  }
  if (!v.is_object()) throw InputError(fmt::format("{}: expected a JSON object, got {}", source, shown(v)));
  BenchRun run;
  run.source = source;

  const auto lat = v.find("latency_ms");
  if (lat == v.end()) throw InputError(fmt::format("{}: missing field \"latency_ms\"", source));
  if (!lat->is_array()) {
    throw InputError(fmt::format("{}: latency_ms must be an array of numbers, got {}", source, shown(*lat)));
  }
  if (lat->empty()) throw InputError(fmt::format("{}: latency_ms is empty", source));
  run.latency_ms.reserve(lat->size());
  for (std::size_t i = 0; i < lat->size(); ++i) {
    const auto& x = (*lat)[i];
    const double value = x.is_number() ? x.get<double>() : std::numeric_limits<double>::quiet_NaN();
    if (!(std::isfinite(value) && value > 0.0)) {
      throw InputError(fmt::format("{}: latency_ms[{}] must be a positive finite number, got {}", source, i,
                                   shown(x)));
    }
    run.latency_ms.push_back(value);
  }

  if (const auto it = v.find("completed"); it != v.end() && !it->is_null()) {
    // nlohmann's is_number_integer() also holds for unsigned values.
    const bool ok = it->is_number_unsigned() ? it->get<std::uint64_t>() <= std::uint64_t{INT64_MAX}
                                             : it->is_number_integer() && it->get<std::int64_t>() >= 0;
    if (!ok) {
      throw InputError(fmt::format("{}: completed must be a non-negative integer, got {}", source, shown(*it)));
    }
    run.completed = it->get<std::int64_t>();
  }
  if (const auto it = v.find("duration_s"); it != v.end() && !it->is_null()) {
    const double d = it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
    if (!(std::isfinite(d) && d > 0.0)) {
      throw InputError(fmt::format("{}: duration_s must be a positive finite number, got {}", source, shown(*it)));
    }
    run.duration_s = d;
  }
  return run;
}

BenchRun read_bench(const std::string& path) {
  auto in = open_input(path);
  return parse_bench(in, path);
}

std::vector<TraceStep> parse_trace(std::istream& in, const std::string& source) {
  std::vector<TraceStep> steps;
  for_each_record(in, source, [&](const json& v, long line) {
    const auto it = v.find("context_lens");
    if (it == v.end()) throw InputError(fmt::format("{}:{}: missing field \"context_lens\"", source, line));
    if (!it->is_array()) {
      throw InputError(fmt::format("{}:{}: context_lens must be an array of integers, got {}", source, line,
                                   shown(*it)));
    }
    if (it->empty()) throw InputError(fmt::format("{}:{}: context_lens is empty", source, line));
    TraceStep step;
    step.line = line;
    step.context_lens.reserve(it->size());
    for (std::size_t i = 0; i < it->size(); ++i) {
      const auto& x = (*it)[i];
      // int32 like the kernels' context_lens; also keeps every sum far from overflow.
      const bool in_range = x.is_number_unsigned() ? x.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxLen)
                            : x.is_number_integer() ? x.get<std::int64_t>() >= kMinLen && x.get<std::int64_t>() <= kMaxLen
                                                    : false;
      if (!in_range) {
        throw InputError(fmt::format("{}:{}: context_lens[{}] must be a 32-bit integer, got {}", source, line, i,
                                     shown(x)));
      }
      step.context_lens.push_back(x.get<std::int64_t>());
    }
    steps.push_back(std::move(step));
  });
  if (steps.empty()) throw InputError(fmt::format("{}: empty file: no steps", source));
  return steps;
}

std::vector<TraceStep> read_trace(const std::string& path) {
  auto in = open_input(path);
  return parse_trace(in, path);
}

}  // namespace pav::stats
