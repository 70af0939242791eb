// SPDX-License-Identifier: Apache-2.0
// The shared JSON reader: exact messages, both sides of every limit, and input
// built to hurt (deep nesting, huge values, garbage, special files).
#include "input/json_input.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "input/limits.hpp"

namespace pav::input {
namespace {

namespace fs = std::filesystem;

// The message of the InputError f throws; "(no error)" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string nested(int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); }

TEST(JsonInput, NestingAtTheLimitIsReadAndOneDeeperIsRefused) {
  EXPECT_EQ(error_of([] { parse_json(nested(kMaxJsonDepth), "d.json"); }), "(no error)");
  std::string path;
  for (int i = 0; i < kMaxJsonDepth; ++i) path += "[0]";
  EXPECT_EQ(error_of([] { parse_json(nested(kMaxJsonDepth + 1), "d.json"); }),
            "d.json: " + path + ": nested deeper than 64 levels");
}

TEST(JsonInput, HundredThousandLevelsAreRefusedQuicklyWithoutRecursion) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string deep = nested(100000);
  const std::string e = error_of([&] { parse_json(deep, "deep.json"); });
  EXPECT_NE(e.find("nested deeper than 64 levels"), std::string::npos) << e;
  const std::string deep_obj = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100000, '}');
  }();
  const std::string e2 = error_of([&] { parse_json(deep_obj, "deep.json"); });
  EXPECT_NE(e2.find("nested deeper than 64 levels"), std::string::npos);
  EXPECT_LT(e2.size(), 64 * 2 + 100u) << "the path is at most 64 short keys";
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
}

TEST(JsonInput, ParseErrorsNameTheFieldWhereParsingStopped) {
  EXPECT_EQ(error_of([] { parse_json(R"({"a": {"b": 1e999}})", "x.json"); }),
            "x.json: a.b: malformed JSON at byte 17: number overflow parsing '1e999'");
  EXPECT_EQ(error_of([] { parse_json(R"({"lens": [1, 2, NaN]})", "x.json"); }).rfind("x.json: lens[2]: malformed JSON", 0),
            0u);
  EXPECT_EQ(error_of([] { parse_json(R"({"heads": [{"hkv": 1}, {"hkv": -}]})", "x.json"); })
                .rfind("x.json: heads[1].hkv: malformed JSON", 0),
            0u);
  EXPECT_EQ(error_of([] { parse_json(R"({"a": 1, "a": 2})", "x.json"); }), "x.json: a: duplicate key");
  EXPECT_EQ(error_of([] { parse_json("", "x.json"); }).rfind("x.json: malformed JSON at byte", 0), 0u);
  EXPECT_EQ(error_of([] { parse_json("{} x", "x.json"); }).rfind("x.json: malformed JSON at byte", 0), 0u);
  EXPECT_EQ(error_of([] { parse_json(std::string("{\"a\": \"\xff\xfe\"}"), "x.json"); }).rfind("x.json: a: malformed JSON", 0),
            0u);
  // A number past uint64 is a double, not an error here; the typed getters refuse it.
  EXPECT_EQ(parse_json("18446744073709551616", "x.json").type(), json::value_t::number_float);
}

TEST(JsonInput, MessagesQuoteAShortExcerptOfHugeValues) {
  const std::string big(5'000'000, 'x');
  const json doc = parse_json("{\"id\": \"" + big + "\", \"" + big + "\": 1}", "big.json");
  const Object o(doc, "big.json");
  const std::string e1 = error_of([&] { o.integer<int>("id", 0, 1); });
  EXPECT_LT(e1.size(), 200u);
  EXPECT_EQ(e1, "big.json: id: expected an integer, got a string \"" + std::string(kMaxExcerptChars - 1, 'x') +
                    "...");
  const std::string e2 = error_of([&] { o.only({"id"}); });
  EXPECT_LT(e2.size(), 200u) << e2.substr(0, 300);
  // A parse error's token is cut as well.
  const std::string e3 = error_of([&] { parse_json("{\"a\": " + big + "}", "t.json"); });
  EXPECT_LT(e3.size(), 300u);
  EXPECT_EQ(excerpt(json::array({1, 2, 3})), "[1,2,3]");
  EXPECT_EQ(excerpt(std::string_view("a\nb\x01")), "a\\nb\\x01");
  EXPECT_EQ(excerpt(std::string(100, 'y'), 10), "yyyyyyyyyy...");
}

TEST(JsonInput, IntegersAreCheckedOnBothSidesOfTheirRangeBeforeConversion) {
  const json doc = parse_json(
      R"({"lo": 1, "hi": 4096, "under": 0, "over": 4097, "i64max": 9223372036854775807,
          "u64": 9223372036854775808, "u64max": 18446744073709551615, "neg": -1, "real": 2.0, "str": "7",
          "big": 18446744073709551616})",
      "r.json");
  const Object o(doc, "r.json");
  EXPECT_EQ(o.integer<int>("lo", 1, 4096), 1);
  EXPECT_EQ(o.integer<int>("hi", 1, 4096), 4096);
  EXPECT_EQ(error_of([&] { o.integer<int>("under", 1, 4096); }), "r.json: under: must be in 1..4096, got 0");
  EXPECT_EQ(error_of([&] { o.integer<int>("over", 1, 4096); }), "r.json: over: must be in 1..4096, got 4097");
  EXPECT_EQ(o.integer<int64_t>("i64max", 0, INT64_MAX), INT64_MAX);
  EXPECT_EQ(error_of([&] { o.integer<int64_t>("u64", 0, INT64_MAX); }),
            "r.json: u64: must be in 0..9223372036854775807, got 9223372036854775808");
  EXPECT_EQ(o.integer<uint64_t>("u64max", 0, UINT64_MAX), UINT64_MAX);
  EXPECT_EQ(error_of([&] { o.integer<uint64_t>("neg", 0, UINT64_MAX); }),
            "r.json: neg: must be in 0..18446744073709551615, got -1");
  EXPECT_EQ(error_of([&] { o.integer<int>("real", 0, 9); }), "r.json: real: expected an integer, got a number 2.0");
  EXPECT_EQ(error_of([&] { o.integer<int>("str", 0, 9); }), "r.json: str: expected an integer, got a string \"7\"");
  EXPECT_EQ(error_of([&] { o.integer<uint64_t>("big", 0, UINT64_MAX); }),
            "r.json: big: expected an integer, got a number 1.8446744073709552e+19");
  EXPECT_EQ(error_of([&] { o.integer<int>("absent", 0, 9); }), "r.json: absent: missing (required)");
  EXPECT_EQ(o.integer<int>("absent", 0, 9, 5), 5);
}

TEST(JsonInput, NumbersStringsChoicesAndObjects) {
  const json doc = parse_json(
      R"({"x": 0.5, "neg": -0.5, "one": 1, "s": "bf16", "o": {"k": true}, "n": null, "a": [1, 2.5, "z"]})", "v.json");
  const Object o(doc, "v.json");
  EXPECT_EQ(o.number("x", 0.0, 1.0), 0.5);
  EXPECT_EQ(o.number("one", 0.0, 1.0), 1.0);
  EXPECT_EQ(error_of([&] { o.number("neg", 0.0, 1.0); }), "v.json: neg: must be in [0, 1], got -0.5");
  EXPECT_EQ(error_of([&] { o.number("s", 0.0, 1.0); }), "v.json: s: expected a number, got a string \"bf16\"");
  EXPECT_EQ(o.choice("s", {"bf16", "f16"}), "bf16");
  EXPECT_EQ(error_of([&] { o.choice("s", {"f32", "f16"}); }),
            "v.json: s: expected one of f32, f16, got a string \"bf16\"");
  EXPECT_EQ(error_of([&] { o.string("one"); }), "v.json: one: expected a string, got an integer 1");
  EXPECT_TRUE(o.object("o").boolean("k"));
  EXPECT_EQ(error_of([&] { o.object("o").integer<int>("k", 0, 1); }),
            "v.json: o.k: expected an integer, got a boolean true");
  EXPECT_EQ(error_of([&] { o.object("x"); }), "v.json: x: expected an object, got a number 0.5");
  EXPECT_TRUE(o.has("n"));
  EXPECT_FALSE(o.given("n"));
  EXPECT_EQ(error_of([&] { o.boolean("n"); }), "v.json: n: expected true or false, got null null");
  EXPECT_EQ(error_of([&] { o.only({"x", "neg", "one", "s", "o", "n"}); }),
            "v.json: a: unknown field (known: x, neg, one, s, o, n)");
  const Array a = o.array("a", 1, 3);
  EXPECT_EQ(a.integer<int>(0, 0, 9), 1);
  EXPECT_EQ(a.number(1, 0, 9), 2.5);
  EXPECT_EQ(error_of([&] { a.number(2, 0, 9); }), "v.json: a[2]: expected a number, got a string \"z\"");
  EXPECT_EQ(error_of([&] { o.array("a", 4, 4096); }), "v.json: a: expected 4..4096 entries, got 3");
  EXPECT_EQ(error_of([&] { o.array("a", 0, 2); }), "v.json: a: expected 0..2 entries, got 3");
  EXPECT_EQ(error_of([&] { o.array("x", 0, 2); }), "v.json: x: expected an array, got a number 0.5");
  EXPECT_EQ(error_of([] { Object(json::array(), "top.json"); }), "top.json: expected an object, got an array []");
}

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("pav-input-test-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(dir); }
  ~TempDir() { fs::remove_all(dir); }
};

TEST(JsonInput, FilesAreCheckedBeforeTheyAreRead) {
  TempDir t;
  const std::string missing = (t.dir / "missing.json").string();
  EXPECT_EQ(error_of([&] { read_json_file(missing); }), missing + ": no such file");
  EXPECT_EQ(error_of([&] { read_json_file(t.dir.string()); }), t.dir.string() + ": is a directory, expected a file");
  const std::string big = (t.dir / "big.json").string();
  {
    std::ofstream f(big);
  }
  fs::resize_file(big, kMaxJsonFileBytes);  // sparse: at the limit
  EXPECT_NE(error_of([&] { read_json_file(big); }).find("malformed JSON"), std::string::npos)
      << "a file at the limit is read (and is not JSON)";
  fs::resize_file(big, kMaxJsonFileBytes + 1);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of([&] { read_json_file(big); }),
            big + ": 67108865 bytes, more than the limit of 67108864 bytes");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.1);
  EXPECT_EQ(error_of([] { read_json_file("/dev/null"); }), "/dev/null: not a regular file");
  const std::string ok = (t.dir / "ok.json").string();
  {
    std::ofstream f(ok);
    f << "{\"a\": [1]}";
  }
  EXPECT_EQ(read_json_file(ok)["a"][0], 1);
}

TEST(JsonInput, JsonlLinesAreNumberedAndALongLineIsRefusedByNumber) {
  std::istringstream in("{\"a\":1}\n\n  \r\n{\"a\":2}\r\n{\"a\":3}");
  std::vector<std::pair<std::string, long>> seen;
  for_each_line(in, "l.jsonl", [&](std::string_view s, long n) { seen.emplace_back(std::string(s), n); });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], (std::pair<std::string, long>{"{\"a\":1}", 1}));
  EXPECT_EQ(seen[1], (std::pair<std::string, long>{"{\"a\":2}\r", 4}));
  EXPECT_EQ(seen[2], (std::pair<std::string, long>{"{\"a\":3}", 5}));

  const std::string at_limit(size_t(kMaxJsonlLineBytes), ' ');
  std::istringstream ok("x\n" + at_limit + "\ny\n");
  long lines = 0;
  for_each_line(ok, "l.jsonl", [&](std::string_view, long) { ++lines; });
  EXPECT_EQ(lines, 2) << "a blank line at the limit is read and skipped";
  std::istringstream too_long("x\n" + at_limit + "z\ny\n");
  EXPECT_EQ(error_of([&] { for_each_line(too_long, "l.jsonl", [](std::string_view, long) {}); }),
            "l.jsonl:2: line longer than 16777216 bytes");
}

}  // namespace
}  // namespace pav::input
