// SPDX-License-Identifier: Apache-2.0
#include "input/json_input.hpp"

#include <fmt/core.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

namespace pav::input {

namespace {

// Appends one byte for display: printable ASCII as is, the rest escaped.
void put_char(std::string& out, unsigned char c, bool quoted) {
  if (quoted && (c == '"' || c == '\\')) {
    out += '\\';
    out += char(c);
  } else if (c >= 0x20 && c < 0x7f) {
    out += char(c);
  } else if (c == '\n') {
    out += "\\n";
  } else if (c == '\t') {
    out += "\\t";
  } else {
    out += fmt::format("\\x{:02x}", c);
  }
}

// Writes at most a little past `limit` characters of v; the caller cuts.
void emit(const json& v, std::string& out, std::size_t limit) {
  if (out.size() > limit) return;
  switch (v.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
        if (!first) out += ',';
        first = false;
        out += '"';
        for (std::size_t i = 0; i < it.key().size() && out.size() <= limit; ++i)
          put_char(out, static_cast<unsigned char>(it.key()[i]), true);
        out += "\":";
        emit(it.value(), out, limit);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      for (std::size_t i = 0; i < v.size() && out.size() <= limit; ++i) {
        if (i) out += ',';
        emit(v[i], out, limit);
      }
      out += ']';
      return;
    }
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      out += '"';
      for (std::size_t i = 0; i < s.size() && out.size() <= limit; ++i)
        put_char(out, static_cast<unsigned char>(s[i]), true);
      out += '"';
      return;
    }
    case json::value_t::binary:
      out += "<binary>";
      return;
    default:
      out += v.dump();  // null, boolean, number: short
  }
}

std::string cut(std::string s, std::size_t max) {
  if (s.size() > max) {
    s.resize(max);
    s += "...";
  }
  return s;
}

// nlohmann's what() reads "[json.exception.parse_error.101] parse error at
// line 1, column 5: syntax error ..."; keep the reason after the position.
std::string parse_reason(const json::exception& e) {
  std::string what = e.what();
  if (const auto close = what.find("] "); close != std::string::npos) what = what.substr(close + 2);
  if (what.rfind("parse error", 0) == 0)
    if (const auto colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
  return what;
}

// Builds the DOM from nlohmann's SAX events, tracking the path of the value
// being read (for messages) and the nesting depth (to refuse deep input before
// any recursion over it), and refusing duplicate keys.
class DomBuilder {
 public:
  explicit DomBuilder(json& root) : root_(root) {}

  bool null() { return put(json(nullptr)); }
  bool boolean(bool b) { return put(json(b)); }
  bool number_integer(json::number_integer_t v) { return put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return put(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) {
    if (!std::isfinite(v)) return stop("number overflows a double");
    return put(json(v));
  }
  bool string(json::string_t& s) { return put(json(std::move(s))); }
  bool binary(json::binary_t&) { return stop("binary value"); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    if (f.node->contains(k)) {
      f.key = std::move(k);
      f.has_key = true;
      return stop("duplicate key");
    }
    f.key = std::move(k);
    f.has_key = true;
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t position, const std::string&, const json::exception& e) {
    if (error_.empty()) {
      position_ = position;
      from_parser_ = true;
      error_ = excerpt(parse_reason(e), 160);
      error_path_ = path();
    }
    return false;
  }

  const std::string& error() const { return error_; }
  bool from_parser() const { return from_parser_; }
  const std::string& error_path() const { return error_path_; }
  std::size_t position() const { return position_; }

 private:
  struct Frame {
    json* node;
    std::string key;          // objects: the key of the value being read
    bool has_key = false;     // objects: key names the value being read
    bool child_open = false;  // the last element or key holds an open container
  };

  bool stop(const std::string& why) {
    error_ = why;
    error_path_ = path();
    return false;
  }

  // Puts a value where the parser is: the root, the end of the open array, or
  // the open object's current key. A container stays "open" in its parent
  // until close(), so paths point inside it.
  json* place(json&& v) {
    const bool container = v.is_structured();
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    json* slot;
    if (f.node->is_array()) {
      f.node->push_back(std::move(v));
      slot = &f.node->back();
    } else {
      slot = &(*f.node)[f.key];
      *slot = std::move(v);
    }
    f.child_open = container;
    if (!container) f.has_key = false;
    return slot;
  }

  bool put(json&& v) {
    place(std::move(v));
    return true;
  }

  bool open(json&& container) {
    if (int(frames_.size()) >= kMaxJsonDepth)
      return stop(fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    json* node = place(std::move(container));
    frames_.push_back({node, {}, false, false});
    return true;
  }

  bool close() {
    frames_.pop_back();
    if (!frames_.empty()) {
      frames_.back().child_open = false;
      frames_.back().has_key = false;
    }
    return true;
  }

  // "options.cu", "lens[3]": the value being read when parsing stopped.
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.node->is_array()) {
        p += fmt::format("[{}]", f.node->size() - (f.child_open ? 1 : 0));
      } else if (f.has_key) {
        if (!p.empty()) p += '.';
        p += excerpt(f.key, 40);
      } else {
        break;
      }
    }
    return p;
  }

  json& root_;
  std::vector<Frame> frames_;
  std::string error_, error_path_;
  std::size_t position_ = 0;
  bool from_parser_ = false;
};

const char* type_phrase(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

std::string got(const json& v) { return fmt::format("got {} {}", type_phrase(v), excerpt(v)); }

double positive_value(const json& v, const std::string& source, const std::string& path) {
  const double x = v.is_number() ? v.get<double>() : 0.0;
  if (!(v.is_number() && std::isfinite(x) && x > 0.0))
    fail(source, path, "expected a positive finite number, got " + (v.is_number() ? excerpt(v) : got(v).substr(4)));
  return x;
}

std::string i128_text(__int128 v) {
  if (v >= 0) return std::to_string(static_cast<unsigned long long>(v));
  return std::to_string(static_cast<long long>(v));
}

std::string join(std::initializer_list<std::string_view> words) {
  std::string s;
  for (auto w : words) s += (s.empty() ? "" : ", ") + std::string(w);
  return s;
}

}  // namespace

std::string excerpt(std::string_view text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && out.size() <= max; ++i)
    put_char(out, static_cast<unsigned char>(text[i]), false);
  return cut(std::move(out), max);
}

std::string excerpt(const json& value, std::size_t max) {
  std::string out;
  emit(value, out, max);
  return cut(std::move(out), max);
}

void fail(const std::string& source, const std::string& field, const std::string& why) {
  if (field.empty()) throw InputError(source + ": " + why);
  throw InputError(source + ": " + field + ": " + why);
}

json parse_json(std::string_view text, const std::string& source) {
  json root;
  DomBuilder builder(root);
  const bool ok = json::sax_parse(text.begin(), text.end(), &builder);
  if (ok) return root;
  std::string why = builder.error();
  if (builder.from_parser() || why.empty())
    why = fmt::format("malformed JSON at byte {}: {}", builder.position(), why.empty() ? "parse error" : why);
  fail(source, builder.error_path(), why);
}

std::ifstream open_input(const std::string& path, int64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) fail(path, "", "no such file");
  if (fs::is_directory(st)) fail(path, "", "is a directory, expected a file");
  if (!fs::is_regular_file(st)) fail(path, "", "not a regular file");
  const auto size = fs::file_size(path, ec);
  if (ec) fail(path, "", "cannot read its size (" + ec.message() + ")");
  if (int64_t(size) > max_bytes)
    fail(path, "", fmt::format("{} bytes, more than the limit of {} bytes", size, max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "", fmt::format("cannot open ({})", std::strerror(errno)));
  return in;
}

std::string read_all(std::istream& in, const std::string& source, int64_t max_bytes) {
  std::string text;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    const auto n = in.gcount();
    if (int64_t(text.size()) + n > max_bytes)
      fail(source, "", fmt::format("more than the limit of {} bytes", max_bytes));
    text.append(buf, std::size_t(n));
  }
  if (in.bad()) throw ReadError(source + ": read error");
  return text;
}

json read_json_file(const std::string& path) {
  auto in = open_input(path, kMaxJsonFileBytes);
  return parse_json(read_all(in, path, kMaxJsonFileBytes), path);
}

void for_each_line(std::istream& in, const std::string& source,
                   const std::function<void(std::string_view, long)>& on_line) {
  std::string line;
  long number = 1;
  bool too_long = false;
  auto finish = [&] {
    if (too_long) fail(fmt::format("{}:{}", source, number), "", fmt::format("line longer than {} bytes", kMaxJsonlLineBytes));
    if (line.find_first_not_of(" \t\r\n\f\v") != std::string::npos) on_line(line, number);
    line.clear();
    ++number;
  };
  char buf[1 << 16];
  auto* sb = in.rdbuf();
  if (!sb) return;
  for (;;) {
    const std::streamsize n = sb->sgetn(buf, sizeof buf);
    if (n <= 0) break;
    std::size_t start = 0;
    for (std::size_t i = 0; i < std::size_t(n); ++i) {
      if (buf[i] != '\n') continue;
      if (int64_t(line.size() + (i - start)) > kMaxJsonlLineBytes) too_long = true;
      if (!too_long) line.append(buf + start, i - start);
      finish();
      start = i + 1;
    }
    if (int64_t(line.size() + (std::size_t(n) - start)) > kMaxJsonlLineBytes) too_long = true;
    if (!too_long) line.append(buf + start, std::size_t(n) - start);
    if (too_long) finish();  // refuse now, not after reading the rest of the line
  }
  if (!line.empty()) finish();
}

// ---- Object -------------------------------------------------------------------------

Object::Object(const json& value, std::string source, std::string at)
    : j_(&value), source_(std::move(source)), at_(std::move(at)) {
  if (!value.is_object()) input::fail(source_, at_, "expected an object, " + got(value));
}

std::string Object::path(std::string_view key) const {
  const std::string k = excerpt(key, 40);
  return at_.empty() ? k : at_ + "." + k;
}

void Object::fail(std::string_view key, const std::string& why) const { input::fail(source_, path(key), why); }
void Object::fail_here(const std::string& why) const { input::fail(source_, at_, why); }

void Object::only(std::initializer_list<std::string_view> known) const {
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    bool ok = false;
    for (auto k : known) ok = ok || it.key() == k;
    if (!ok) fail(it.key(), "unknown field (known: " + join(known) + ")");
  }
}

bool Object::has(std::string_view key) const { return j_->contains(key); }

bool Object::given(std::string_view key) const {
  const auto it = j_->find(key);
  return it != j_->end() && !it->is_null();
}

const json& Object::at(std::string_view key) const {
  const auto it = j_->find(key);
  if (it == j_->end()) fail(key, "missing (required)");
  return *it;
}

double Object::number(std::string_view key, double lo, double hi) const {
  const json& v = at(key);
  if (!v.is_number()) fail(key, "expected a number, " + got(v));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) fail(key, fmt::format("must be in [{}, {}], got {}", lo, hi, excerpt(v)));
  return x;
}

double Object::number(std::string_view key, double lo, double hi, double fallback) const {
  return has(key) ? number(key, lo, hi) : fallback;
}

double Object::positive(std::string_view key) const { return positive_value(at(key), source_, path(key)); }

bool Object::boolean(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_boolean()) fail(key, "expected true or false, " + got(v));
  return v.get<bool>();
}

bool Object::boolean(std::string_view key, bool fallback) const { return has(key) ? boolean(key) : fallback; }

std::string Object::string(std::string_view key) const {
  const json& v = at(key);
  if (!v.is_string()) fail(key, "expected a string, " + got(v));
  return v.get<std::string>();
}

std::string Object::string(std::string_view key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

std::string Object::choice(std::string_view key, std::initializer_list<std::string_view> allowed) const {
  const json& v = at(key);
  if (v.is_string())
    for (auto a : allowed)
      if (v.get_ref<const std::string&>() == a) return std::string(a);
  fail(key, "expected one of " + join(allowed) + ", " + got(v));
}

std::string Object::choice(std::string_view key, std::initializer_list<std::string_view> allowed,
                           const std::string& fallback) const {
  return has(key) ? choice(key, allowed) : fallback;
}

Object Object::object(std::string_view key) const { return Object(at(key), source_, path(key)); }

Array Object::array(std::string_view key, std::size_t min_size, std::size_t max_size) const {
  return Array(at(key), source_, path(key), min_size, max_size);
}

// ---- Array --------------------------------------------------------------------------

Array::Array(const json& value, std::string source, std::string at, std::size_t min_size, std::size_t max_size)
    : j_(&value), source_(std::move(source)), at_(std::move(at)) {
  if (!value.is_array()) input::fail(source_, at_, "expected an array, " + got(value));
  if (value.size() < min_size || value.size() > max_size) {
    const std::string want = min_size == max_size                              ? fmt::format("{}", min_size)
                             : max_size == std::numeric_limits<std::size_t>::max() ? fmt::format("at least {}", min_size)
                                                                                    : fmt::format("{}..{}", min_size, max_size);
    input::fail(source_, at_, fmt::format("expected {} entries, got {}", want, value.size()));
  }
}

std::string Array::path(std::size_t i) const { return fmt::format("{}[{}]", at_, i); }
void Array::fail(std::size_t i, const std::string& why) const { input::fail(source_, path(i), why); }
void Array::fail_here(const std::string& why) const { input::fail(source_, at_, why); }

double Array::number(std::size_t i, double lo, double hi) const {
  const json& v = (*j_)[i];
  if (!v.is_number()) fail(i, "expected a number, " + got(v));
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) fail(i, fmt::format("must be in [{}, {}], got {}", lo, hi, excerpt(v)));
  return x;
}

double Array::positive(std::size_t i) const { return positive_value((*j_)[i], source_, path(i)); }

std::string Array::string(std::size_t i) const {
  const json& v = (*j_)[i];
  if (!v.is_string()) fail(i, "expected a string, " + got(v));
  return v.get<std::string>();
}

Object Array::object(std::size_t i) const { return Object((*j_)[i], source_, path(i)); }

Array Array::array(std::size_t i, std::size_t min_size, std::size_t max_size) const {
  return Array((*j_)[i], source_, path(i), min_size, max_size);
}

std::vector<double> Array::numbers(double lo, double hi) const {
  std::vector<double> out;
  out.reserve(size());
  for (std::size_t i = 0; i < size(); ++i) out.push_back(number(i, lo, hi));
  return out;
}

namespace detail {

__int128 integer_in(const json& v, const std::string& source, const std::string& path, __int128 lo, __int128 hi) {
  __int128 x = 0;
  if (v.is_number_unsigned()) x = v.get<uint64_t>();
  else if (v.is_number_integer()) x = v.get<int64_t>();
  else input::fail(source, path, "expected an integer, " + got(v));
  if (x < lo || x > hi)
    input::fail(source, path, fmt::format("must be in {}..{}, got {}", i128_text(lo), i128_text(hi), i128_text(x)));
  return x;
}

}  // namespace detail

}  // namespace pav::input
