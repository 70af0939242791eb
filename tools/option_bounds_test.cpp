// SPDX-License-Identifier: Apache-2.0
// Every bounded option of every command, from a table written here: its help
// names exactly the bounds the table gives, a value one past either bound (or
// the bound itself where the range is open) exits 2 naming the option, and
// no command has a bounded option the table does not list. The help text is
// made from the same numbers the check uses, so a bound moved by one shows in
// the help before any run would need to reach it.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/test_paths.hpp"

namespace {

struct Outcome {
  int code = -1;
  std::string out, err;
};

// Runs pav with args (shell words); stdout and stderr apart.
Outcome pav(const std::string& args) {
  char err_path[] = "/tmp/pav-bounds-err-XXXXXX";
  const int fd = mkstemp(err_path);
  if (fd < 0) return {};
  close(fd);
  const std::string cmd = std::string(PAV_BINARY) + " " + args + " 2>" + err_path + " </dev/null";
  Outcome o;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) o.out.append(buf, n);
    const int status = pclose(p);
    o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  if (FILE* f = fopen(err_path, "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) o.err.append(buf, n);
    fclose(f);
  }
  remove(err_path);
  return o;
}

struct Bound {
  const char* command;
  const char* option;
  const char* help;                 // the range as --help prints it
  std::vector<const char*> refused;  // one past each end (the end itself when open)
};

const std::string kFix = std::string(PAV_SOURCE_DIR) + "/fixtures/stats/";

// Arguments that make each command's other inputs valid.
std::string rest_of(const std::string& command) {
  if (command == "mcnemar") return "--counts 3,1";
  if (command == "bench-compare") return kFix + "bench-a.json " + kFix + "bench-b.json";
  if (command == "trace-stats") return kFix + "trace-small.jsonl";
  if (command == "plan") return "--lengths 5,9 --kv-heads 1 --cu 8";
  return "";
}

const std::vector<Bound>& bounds() {
  static const std::vector<Bound> b = {
      {"verify", "--seed", "UINT:in 0..2^64-1", {"-1", "18446744073709551616"}},
      {"verify", "--plan-cases", "INT:in 1..1000000", {"0", "1000001"}},
      {"verify", "--decode-cases", "INT:in 1..100000", {"0", "100001"}},
      {"verify", "--decode-seconds", "FLOAT:in [1, 86400]", {"0.999", "86400.5"}},
      {"verify", "--reject-cases", "INT:in 1..1000000", {"0", "1000001"}},
      {"verify", "--stale-cases", "INT:in 1..1000000", {"0", "1000001"}},
      {"verify", "--timeout", "FLOAT:FLOAT in [0.01 - 86400]", {"0.009", "86400.5"}},
      {"verify", "--shapes", "INT:in 0..64", {"-1", "65"}},
      {"fuzz", "--minutes", "FLOAT:in (0, 10080]", {"0", "10080.5"}},
      {"fuzz", "--cases", "INT:in 1..1099511627776", {"0", "1099511627777"}},
      {"fuzz", "--seed", "UINT:in 0..2^64-1", {"-1", "18446744073709551616"}},
      {"fuzz", "--jobs", "INT:in 1..1024", {"0", "1025"}},
      {"fuzz", "--shrink-tries", "INT:in 0..1099511627776", {"-1", "1099511627777"}},
      {"fuzz", "--shrink-minutes", "FLOAT:in [0, 10080]", {"-0.5", "10080.5"}},
      {"fuzz", "--timeout", "FLOAT:FLOAT in [0.01 - 86400]", {"0.009", "86400.5"}},
      {"fuzz", "--shapes", "INT:in 0..64", {"-1", "65"}},
      {"fuzz", "--shape-seed", "UINT:in 0..2^64-1", {"-1", "18446744073709551616"}},
      {"replay", "--timeout", "FLOAT:FLOAT in [0.01 - 86400]", {"0.009", "86400.5"}},
      {"drift", "--max-context", "INT:in 1..2147483647", {"0", "2147483648"}},
      {"drift", "--seeds", "INT:in 2..10000", {"1", "10001"}},
      {"drift", "--timeout", "FLOAT:FLOAT in [0.01 - 86400]", {"0.009", "86400.5"}},
      {"compare", "--cases", "INT:in 1..10000000", {"0", "10000001"}},
      {"compare", "--seed", "UINT:in 0..2^64-1", {"-1", "18446744073709551616"}},
      {"compare", "--alpha", "FLOAT:in (0, 1]", {"0", "1.001"}},
      {"compare", "--timeout", "FLOAT:FLOAT in [0.01 - 86400]", {"0.009", "86400.5"}},
      {"plan", "--kv-heads", "INT:in 1..1024", {"0", "1025"}},
      {"plan", "--cu", "INT:in 1..4096", {"0", "4097"}},
      {"plan", "--max-partitions", "INT:in 0..4096", {"-1", "4097"}},
      {"plan", "--budget", "INT:in 0..1048576", {"-1", "1048577"}},
      {"mcnemar", "--confidence", "FLOAT:in (0, 1)", {"0", "1"}},
      {"mcnemar", "--fail-if-worse", "FLOAT:in [0, 1]", {"-0.001", "1.001"}},
      {"bench-compare", "--seed", "UINT:in 0..2^64-1", {"-1", "18446744073709551616"}},
      {"bench-compare", "--resamples", "INT:in 1..1000000", {"0", "1000001"}},
      {"bench-compare", "--confidence", "FLOAT:in (0, 1)", {"0", "1"}},
      {"bench-compare", "--max-count-diff", "FLOAT:in [0, 1]", {"-0.001", "1.001"}},
      {"bench-compare", "--max-regression", "FLOAT:in [0, 1e+06]", {"-0.001", "1000000.5"}},
      {"trace-stats", "--budget", "INT:in 1..1048576", {"0", "1048577"}},
      {"trace-stats", "--max-partitions", "INT:in 1..4096", {"0", "4097"}},
  };
  return b;
}

// The commands pav lists when run without one.
std::vector<std::string> commands() {
  const Outcome o = pav("");
  std::vector<std::string> names;
  static const std::regex line(R"(^  ([a-z][a-z-]*)  +\S)");
  size_t start = 0;
  const std::string text = o.out + o.err;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string l = text.substr(start, end - start);
    std::smatch m;
    if (std::regex_search(l, m, line)) names.push_back(m[1]);
    start = end + 1;
  }
  return names;
}

// "--option TYPE...in RANGE" lines of a help text: option -> range text.
std::map<std::string, std::string> bounded_options(const std::string& help) {
  std::map<std::string, std::string> found;
  static const std::regex line(R"(^\s+(?:-\w, )?(--[a-z0-9-]+)\s+([A-Z]+:(?:[A-Z]+ )?in (?:[^=\n]*[\]\)]|[^ =\n]+)))");
  size_t start = 0;
  while (start < help.size()) {
    const size_t end = std::min(help.find('\n', start), help.size());
    const std::string l = help.substr(start, end - start);
    std::smatch m;
    if (std::regex_search(l, m, line)) found[m[1]] = m[2];
    start = end + 1;
  }
  return found;
}

TEST(OptionBounds, HelpNamesEveryBoundTheTableGives) {
  std::map<std::string, std::map<std::string, std::string>> listed;
  for (const Bound& b : bounds()) listed[b.command][b.option] = b.help;
  const std::vector<std::string> names = commands();
  ASSERT_GE(names.size(), 11u) << "the command list could not be read";
  for (const Bound& b : bounds())
    EXPECT_NE(std::find(names.begin(), names.end(), b.command), names.end()) << b.command << " is not a command";
  for (const std::string& command : names) {
    const Outcome h = pav(command + " --help");
    ASSERT_EQ(h.code, 0) << command << "\n" << h.err;
    const auto found = bounded_options(h.out);
    EXPECT_EQ(found, listed[command]) << command << " --help:\n" << h.out;
  }
}

TEST(OptionBounds, OnePastEitherEndExits2NamingTheOption) {
  for (const Bound& b : bounds()) {
    for (const char* v : b.refused) {
      const std::string args = std::string(b.command) + " " + rest_of(b.command) + " " + b.option + " " + v;
      const Outcome o = pav(args);
      EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
      EXPECT_NE(o.err.find(b.option), std::string::npos) << args << "\n" << o.err;
    }
  }
}

}  // namespace
