// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading JSON that other tools wrote: the one path every pav reader (case
// files, drift sweeps, fuzz shard reports, JSONL accuracy runs, bench runs,
// traces) takes from a file name to typed, range-checked values.
//
// - Files are checked before they are read: a missing file, a directory or
//   another non-regular file, and a file past its size limit are refused by
//   name.
// - Parsing is bounded: nesting deeper than kMaxJsonDepth, a duplicate key, a
//   number that overflows a double (1e999) and trailing garbage are refused,
//   naming the field where the parser stopped.
// - Object and Array read typed fields: an integer within its range (checked
//   before any conversion, so 2^63 never wraps), a finite number, a string
//   from a fixed set, an array whose length is checked before it is walked.
// - Every message is "SOURCE: FIELD: why" (SOURCE is the file, or "file:line"
//   in JSONL) and quotes at most kMaxExcerptChars of the offending value.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <istream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "input/limits.hpp"

namespace pav::input {

using nlohmann::json;

// Bad input: what() names the source and the field. The CLI exits 2.
struct InputError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// An input that exists but could not be read (an I/O error mid-file). The CLI
// exits 3.
struct ReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// At most `max` characters of text ("..." appended when cut), with control
// characters and non-ASCII bytes escaped, so a message stays one short line.
std::string excerpt(std::string_view text, std::size_t max = kMaxExcerptChars);
inline std::string excerpt(const std::string& text, std::size_t max = kMaxExcerptChars) {
  return excerpt(std::string_view(text), max);
}
inline std::string excerpt(const char* text, std::size_t max = kMaxExcerptChars) {
  return excerpt(std::string_view(text), max);
}
// A JSON value as compact JSON text, at most `max` characters; it walks no more
// of the value than it prints.
std::string excerpt(const json& value, std::size_t max = kMaxExcerptChars);

// "SOURCE: FIELD: why", or "SOURCE: why" when field is empty.
[[noreturn]] void fail(const std::string& source, const std::string& field, const std::string& why);

// One JSON document from text. Rejects nesting deeper than kMaxJsonDepth,
// duplicate keys, numbers that overflow a double and anything after the
// document; the InputError names the source, the field path where parsing
// stopped and the byte offset.
json parse_json(std::string_view text, const std::string& source);

// Opens a regular file for reading. Refuses, naming the path: a missing file,
// a directory or other non-regular file, a file longer than max_bytes, a file
// that cannot be opened.
std::ifstream open_input(const std::string& path, int64_t max_bytes);

// Reads a whole stream of at most max_bytes (InputError past it, ReadError on
// an I/O error).
std::string read_all(std::istream& in, const std::string& source, int64_t max_bytes);

// open_input + read_all + parse_json, with kMaxJsonFileBytes.
json read_json_file(const std::string& path);

// Calls on_line(text, number) for every line of a JSONL stream that is not
// blank; numbers count every physical line from 1. A line longer than
// kMaxJsonlLineBytes is refused by number before it is held in memory.
void for_each_line(std::istream& in, const std::string& source,
                   const std::function<void(std::string_view line, long number)>& on_line);

class Array;

// A view of one JSON object inside a source, reading typed fields. `at` is the
// object's own path ("" for the top level, "options", "heads[2]").
class Object {
 public:
  // Throws InputError unless value is an object.
  Object(const json& value, std::string source, std::string at = {});

  const std::string& source() const { return source_; }
  const json& value() const { return *j_; }
  // The field's path for messages: "options.cu"; a long key is cut.
  std::string path(std::string_view key) const;
  [[noreturn]] void fail(std::string_view key, const std::string& why) const;
  [[noreturn]] void fail_here(const std::string& why) const;

  // Refuses the first field not in `known`.
  void only(std::initializer_list<std::string_view> known) const;
  bool has(std::string_view key) const;    // present, null included
  bool given(std::string_view key) const;  // present and not null
  const json& at(std::string_view key) const;  // required: "missing" when absent

  // Integers: the JSON value must be an integer (2.0 is not) within lo..hi.
  template <class T>
  T integer(std::string_view key, T lo, T hi) const;
  template <class T>
  T integer(std::string_view key, T lo, T hi, T fallback) const;  // fallback when absent
  // Finite numbers within [lo, hi] (integers accepted).
  double number(std::string_view key, double lo, double hi) const;
  double number(std::string_view key, double lo, double hi, double fallback) const;
  // A finite number > 0 (a duration, a latency).
  double positive(std::string_view key) const;
  bool boolean(std::string_view key) const;
  bool boolean(std::string_view key, bool fallback) const;
  std::string string(std::string_view key) const;
  std::string string(std::string_view key, const std::string& fallback) const;
  // A string from a fixed set; the message lists the set.
  std::string choice(std::string_view key, std::initializer_list<std::string_view> allowed) const;
  std::string choice(std::string_view key, std::initializer_list<std::string_view> allowed,
                     const std::string& fallback) const;
  Object object(std::string_view key) const;
  // An array of min_size..max_size elements (checked before it is walked).
  Array array(std::string_view key, std::size_t min_size, std::size_t max_size) const;

 private:
  const json* j_;
  std::string source_, at_;
};

// A view of one JSON array inside a source.
class Array {
 public:
  Array(const json& value, std::string source, std::string at, std::size_t min_size, std::size_t max_size);

  std::size_t size() const { return j_->size(); }
  const json& operator[](std::size_t i) const { return (*j_)[i]; }
  const std::string& source() const { return source_; }
  std::string path(std::size_t i) const;
  [[noreturn]] void fail(std::size_t i, const std::string& why) const;
  [[noreturn]] void fail_here(const std::string& why) const;

  template <class T>
  T integer(std::size_t i, T lo, T hi) const;
  double number(std::size_t i, double lo, double hi) const;
  double positive(std::size_t i) const;
  std::string string(std::size_t i) const;
  Object object(std::size_t i) const;
  Array array(std::size_t i, std::size_t min_size, std::size_t max_size) const;

  // Every element, converted.
  template <class T>
  std::vector<T> integers(T lo, T hi) const;
  std::vector<double> numbers(double lo, double hi) const;

 private:
  const json* j_;
  std::string source_, at_;
};

// ---- the checks the templates share (not for direct use) -------------------------

namespace detail {
// The value as a 128-bit integer, range-checked; InputError naming source and
// path otherwise.
__int128 integer_in(const json& v, const std::string& source, const std::string& path, __int128 lo, __int128 hi);
}  // namespace detail

// A value reached without an Object or Array (a reader walking a document of
// its own) as an integer in lo..hi, by the same rule: never a real, never
// wrapped past T's range. InputError "WHAT: why" otherwise.
template <class T>
T integer_value(const json& v, const std::string& what, T lo, T hi) {
  static_assert(std::is_integral_v<T>);
  return T(detail::integer_in(v, what, "", lo, hi));
}

template <class T>
T Object::integer(std::string_view key, T lo, T hi) const {
  static_assert(std::is_integral_v<T>);
  return T(detail::integer_in(at(key), source_, path(key), lo, hi));
}

template <class T>
T Object::integer(std::string_view key, T lo, T hi, T fallback) const {
  return has(key) ? integer<T>(key, lo, hi) : fallback;
}

template <class T>
T Array::integer(std::size_t i, T lo, T hi) const {
  static_assert(std::is_integral_v<T>);
  return T(detail::integer_in((*j_)[i], source_, path(i), lo, hi));
}

template <class T>
std::vector<T> Array::integers(T lo, T hi) const {
  std::vector<T> out;
  out.reserve(size());
  for (std::size_t i = 0; i < size(); ++i) out.push_back(integer<T>(i, lo, hi));
  return out;
}

}  // namespace pav::input
