// SPDX-License-Identifier: Apache-2.0
#include "tools/options.hpp"

#include <fmt/core.h>

#include <charconv>
#include <cmath>

#include "common/text_list.hpp"
#include "tools/command.hpp"

namespace pav::cli {

namespace {

// A short excerpt of a value for an error message: a hostile 50 MB value is
// not echoed whole.
std::string excerpt(const std::string& s) {
  constexpr size_t kMax = 40;
  return s.size() <= kMax ? "'" + s + "'" : "'" + s.substr(0, kMax) + "...' (" + std::to_string(s.size()) + " characters)";
}

// "" when s is an integer in lo..hi, else why not.
std::string check_integer(const std::string& s, int64_t lo, int64_t hi) {
  const std::string want = fmt::format("expected an integer in {}..{}", lo, hi);
  if (s.empty()) return want + ", got an empty value";
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) return want + ", got " + excerpt(s) + " (out of range)";
  if (ec != std::errc() || p != s.data() + s.size()) return want + ", got " + excerpt(s);
  if (v < lo || v > hi) return want + ", got " + s;
  return {};
}

}  // namespace

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  return CLI::Validator([lo, hi](std::string& s) { return check_integer(s, lo, hi); },
                        fmt::format("in {}..{}", lo, hi));
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const std::string want = "expected a seed, an integer in 0..18446744073709551615";
        if (s.empty()) return want + ", got an empty value";
        uint64_t v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size()) return want + ", got " + excerpt(s);
        return {};
      },
      "in 0..2^64-1");
}

CLI::Validator finite_in(double lo, double hi, bool lo_open, bool hi_open) {
  const std::string range = fmt::format("{}{:g}, {:g}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  return CLI::Validator(
      [lo, hi, lo_open, hi_open, range](std::string& s) -> std::string {
        const std::string want = "expected a finite number in " + range;
        if (s.empty()) return want + ", got an empty value";
        double v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return want + ", got " + excerpt(s);
        if (v < lo || v > hi || (lo_open && v == lo) || (hi_open && v == hi)) return want + ", got " + s;
        return {};
      },
      "in " + range);
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& s) -> std::string { return s.empty() ? "expected a value, got an empty one" : std::string(); },
      "");
}

std::vector<int64_t> parse_int_list(const std::string& option, const std::string& text, int64_t lo, int64_t hi,
                                    size_t max_items) {
  const std::vector<std::string> items = split_list(text);
  if (items.size() > max_items)
    throw BadInput(fmt::format("{}: {} items, at most {} allowed", option, items.size(), max_items));
  std::vector<int64_t> out;
  out.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string why = check_integer(items[i], lo, hi);
    if (!why.empty()) throw BadInput(fmt::format("{}: item {}: {}", option, i + 1, why));
    out.push_back(std::stoll(items[i]));
  }
  return out;
}

void refuse_json_with_value(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string file;
    if (args[i].rfind("--json=", 0) == 0) file = args[i].substr(7);
    else if (args[i] == "--json" && i + 1 < args.size() && !args[i + 1].empty() && args[i + 1][0] != '-')
      file = args[i + 1];
    else continue;
    throw BadInput("--json takes no file any more: it prints the JSON report on stdout; to write it to a file use "
                   "--json-out " + excerpt(file));
  }
}

}  // namespace pav::cli
