// SPDX-License-Identifier: Apache-2.0
// The pav command line as users and CI drive it: the real binary (PAV_BINARY),
// run in a child process. One exit-code scheme over every command (0 pass, 1 a
// defect found, 2 bad input or usage, 3 could not run), JSON on stdout with
// --json, help with defaults, usage errors on stderr, options refused before
// anything runs, and the faults a gate meets unattended: a full disk, a file
// size limit, a folder that takes no files, SIGINT and SIGTERM mid-run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <algorithm>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "common/fault_testing.hpp"
#include "common/test_paths.hpp"

#ifndef PAV_BINARY
#error "PAV_BINARY must name the pav executable (set by tools/CMakeLists.txt)"
#endif

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Outcome {
  int code = -1;      // exit status, -1 when killed by a signal
  int signal = 0;     // the signal that ended it, if any
  bool timed_out = false;
  std::string out, err;
  double seconds = 0;
};

struct Launch {
  std::vector<std::string> args;
  std::vector<std::string> env = {};  // extra NAME=VALUE entries (override)
  rlim_t file_size_limit = RLIM_INFINITY;
  rlim_t address_space_limit = RLIM_INFINITY;  // ulimit -v, in bytes
  std::string cwd = {};                         // "" = the test's scratch folder
  double timeout_s = 300;
  // Runs while pav does, with its pid and the files its stdout and stderr go to.
  std::function<void(pid_t, const fs::path&, const fs::path&)> during = nullptr;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A report printed on stdout, or a discarded value (is_object() false) when it
// is not JSON.
json parsed(const std::string& out) { return json::parse(out, nullptr, /*allow_exceptions=*/false); }

// The example plugin as a kernel spec, with one of its defects switched on.
std::string split_decode_with(const std::string& defect) {
  return std::string("lib:") + PAV_SPLIT_DECODE + " --defect " + defect;
}

// Splits on spaces; "" stands for an empty argument.
std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w == "\"\"" ? std::string() : w);
  return out;
}

class PavCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / (std::string("pav-cli-") + info->name() + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Outcome launch(const Launch& l) {
    const fs::path out = dir_ / ".stdout", err = dir_ / ".stderr";
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      bool overridden = false;
      for (const auto& o : l.env) overridden = overridden || kv.substr(0, kv.find('=')) == o.substr(0, o.find('='));
      if (!overridden) env.push_back(kv);
    }
    env.insert(env.end(), l.env.begin(), l.env.end());
    std::vector<char*> argv{const_cast<char*>(PAV_BINARY)}, envp;
    for (const auto& a : l.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);

    const auto t0 = Clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
      const int fo = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int fe = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fo, 1);
      dup2(fe, 2);
      const int fi = ::open("/dev/null", O_RDONLY);
      dup2(fi, 0);
      if (l.file_size_limit != RLIM_INFINITY) {
        rlimit lim{};
        getrlimit(RLIMIT_FSIZE, &lim);
        lim.rlim_cur = l.file_size_limit;
        setrlimit(RLIMIT_FSIZE, &lim);
      }
      if (l.address_space_limit != RLIM_INFINITY) {
        rlimit lim{};
        getrlimit(RLIMIT_AS, &lim);
        lim.rlim_cur = l.address_space_limit;
        setrlimit(RLIMIT_AS, &lim);
      }
      if (::chdir(l.cwd.empty() ? dir_.c_str() : l.cwd.c_str()) != 0) _exit(126);
      execve(PAV_BINARY, argv.data(), envp.data());
      _exit(127);
    }
    Outcome o;
    if (l.during) l.during(pid, out, err);
    int status = 0;
    for (;;) {
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      if (std::chrono::duration<double>(Clock::now() - t0).count() > l.timeout_s) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        o.timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    o.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (WIFEXITED(status)) o.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
    o.out = slurp(out);
    o.err = slurp(err);
    return o;
  }

  Outcome run(const std::string& args, std::vector<std::string> env = {}) {
    return launch({expand_all(args), std::move(env)});
  }

  // {dir}: this test's scratch folder; {fix}: the repository's fixtures.
  std::vector<std::string> expand_all(const std::string& args) {
    std::vector<std::string> out;
    for (std::string w : words(args)) {
      for (const auto& [key, value] : {std::pair<std::string, std::string>{"{dir}", dir_.string()},
                                       {"{fix}", std::string(PAV_SOURCE_DIR) + "/fixtures"}})
        for (size_t at; (at = w.find(key)) != std::string::npos;) w.replace(at, key.size(), value);
      out.push_back(w);
    }
    return out;
  }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }

  std::vector<std::string> files_in(const fs::path& d) {
    std::vector<std::string> out;
    if (fs::exists(d))
      for (const auto& e : fs::directory_iterator(d)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  // Input files the table rows name.
  void write_inputs() {
    const std::string decode_case = std::string(PAV_SOURCE_DIR) +
                                    "/fixtures/counterexamples/decode-causality-row-sees-next-token.json";
    json c = json::parse(slurp(decode_case));
    write("case.json", c.dump());
    json bad_meta = c;
    bad_meta["meta"] = {{"property", "gate-mirror"}, {"violate", "no_such_clause"}};
    write("bad-meta.json", bad_meta.dump());
    json number_property = c;
    number_property["meta"] = {{"property", 7}};
    write("number-property.json", number_property.dump());
    json reject = c;  // a call the gate rejects: head_dim 96
    reject["head_dim"] = 96;
    write("reject.json", reject.dump());
    write("bad.json", "{\"format\": \"pav-case/1\", \"lens\": [1, 2");
    write("plain", "not a folder");
    // Latencies of A; B is A slowed by exactly 10% (every sample, so every
    // percentile and the bootstrap intervals move by 10%).
    json a, b;
    for (int i = 0; i < 300; ++i) {
      const double x = 20.0 + double((i * 37) % 101) * 0.05;
      a["latency_ms"].push_back(x);
      b["latency_ms"].push_back(x * 1.1);
    }
    write("bench-a.json", a.dump());
    write("bench-b10.json", b.dump());
  }

  fs::path dir_;
};

struct Row {
  std::string args;
  int code;
  std::string fragment;  // in stdout for 0 and 1, in stderr for 2 and 3
  std::vector<std::string> env = {};
};

constexpr const char* kLongLengths = "{long-lengths}";

}  // namespace

// Every command, every exit code it can give without a defect in the code under
// test. (Exit 1 of verify, fuzz, replay and drift needs a defective kernel: the
// mutants under ci/mutants drive those.)
TEST_F(PavCli, ExitCodeTableOverEveryCommand) {
  write_inputs();
  std::string long_lengths, too_many;
  for (int i = 0; i < 4096; ++i) long_lengths += (i ? "," : "") + std::string("2147483647");
  too_many = long_lengths + ",1";
#ifdef PAV_HAVE_GPU
  const bool gpu_build = true;
#else
  const bool gpu_build = false;
#endif
  const std::vector<Row> rows = {
      // The dispatcher.
      {"", 2, "usage: pav"},
      {"nosuch", 2, "unknown command 'nosuch'"},
      {"help nosuch", 2, "unknown command 'nosuch'"},
      {"--version", 0, "pav "},
      {"help", 0, "exit codes: 0 pass, 1 a defect found, 2 bad input or usage, 3 could not run"},
      // verify
      {"verify --backend cpu --checks planner,decode --plan-cases 30 --decode-cases 1 --quiet --save {dir}/ce", 0,
       "verdict: PASS"},
      {"verify --plan-cases 0", 2, "--plan-cases"},
      {"verify --decode-cases 100001", 2, "--decode-cases"},
      {"verify --seed -1", 2, "--seed"},
      {"verify --checks planner,nosuch", 2, "--checks: unknown check 'nosuch'"},
      // An empty value (a variable that expanded to nothing) is not "the default".
      {"verify --checks \"\"", 2, "--checks: an empty list"},
      {"verify --checks \"\" --kernel pav:cpu", 2, "--checks: an empty list"},
      {"verify --out-dir \"\" --kernel pav:cpu --kernel pav:cpu", 2, "--out-dir"},
      {"verify --backend cpu --checks planner --json-out \"\"", 2, "--json-out"},
      {"verify --backend cpu --checks planner --save \"\"", 2, "--save"},
      {"fuzz --property planner --cases 1 --save \"\"", 2, "--save"},
      {"fuzz --property planner --cases 1 --report \"\"", 2, "--report"},
      {"fuzz --property \"\" --cases 1", 2, "--property"},
      {"fuzz --property planner --cases 1 --kernel pav:cpu --exchange-dir \"\"", 2, "--exchange-dir"},
      {"fuzz --property planner --cases 1 --trust-case-kernel", 2, "--trust-case-kernel: only with --replay"},
      {"replay {dir}/case.json --json-out \"\"", 2, "--json-out"},
      {"verify --nosuch", 2, "--nosuch"},
      {"verify --json {dir}/old.json", 2, "old.json"},
      {"verify --backend cpu --checks planner --save {dir}/plain/sub", 3, "--save"},
      {"verify --backend cpu --checks planner --json-out {dir}/missing/r.json", 3, "--json-out"},
      // fuzz
      {"fuzz --property planner --cases 40 --seed 1 --quiet --save {dir}/ce", 0, "pav fuzz: PASS"},
      {"fuzz --list", 0, "gate-mirror"},
      {"fuzz --backend cpu --replay {dir}/case.json", 0, "PASS"},
      // Both sides of each limit: the bound itself is accepted.
      {"fuzz --property planner --cases 1 --minutes 10080 --quiet --save {dir}/ce", 0, "pav fuzz: PASS"},
      {"fuzz --property planner --cases 1 --seed 18446744073709551615 --quiet --save {dir}/ce", 0, "pav fuzz: PASS"},
      {"fuzz --property planner --cases 1 --seed 0 --shrink-minutes 0 --shrink-tries 0 --quiet --save {dir}/ce", 0,
       "pav fuzz: PASS"},
      {"fuzz --minutes nan", 2, "--minutes"},
      {"fuzz --minutes inf", 2, "--minutes"},
      {"fuzz --minutes 0", 2, "--minutes"},
      {"fuzz --minutes \"\"", 2, "--minutes"},
      {"fuzz --cases 1 --minutes 10081", 2, "--minutes"},
      {"fuzz --cases 1 --shrink-minutes nan", 2, "--shrink-minutes"},
      {"fuzz --cases 1 --shrink-tries -1", 2, "--shrink-tries"},
      {"fuzz --cases 1 --seed -1", 2, "--seed"},
      {"fuzz --cases 1 --seed 18446744073709551616", 2, "--seed"},
      {"fuzz --cases 0", 2, "--cases"},
      {"fuzz --cases 1 --jobs 0", 2, "--jobs"},
      {"fuzz --shard 2/2 --cases 1", 2, "--shard"},
      {"fuzz --property nosuch --cases 1", 2, "--property: unknown property 'nosuch'"},
      {"fuzz --replay {dir}/missing.json", 2, "--replay"},
      {"fuzz --backend cpu --replay {dir}/bad.json", 2, "bad.json"},
      {"fuzz --backend cpu --replay {dir}/bad-meta.json", 2, "no_such_clause"},
      {"fuzz --property planner --cases 1 --save {dir}/plain/sub", 3, "--save"},
      // replay
      {"replay --backend cpu {dir}/case.json", 0, "verdict   PASS"},
      // One value per --kernel: the case file after it is not taken as a second kernel.
      {"replay --kernel pav:cpu {dir}/case.json --json", 0, "\"passed\": true"},
      {"replay --kernel pav:cpu --kernel pav:cpu {dir}/case.json", 2, "--kernel"},
      {"replay {dir}/missing.json", 2, "missing.json"},
      {"replay --backend cpu {dir}/bad.json", 2, "bad.json"},
      {"replay --backend cpu {dir}/bad-meta.json", 2, "no_such_clause"},
      {"replay --backend cpu {dir}/number-property.json", 2, "meta.property"},
      {"replay --backend cpu {dir}/case.json --json-out /dev/full", 3, "No space left"},
      // gate
      {"gate --clauses", 0, "head_dim"},
      {"gate {dir}/case.json", 0, "route: planned[1 seqs]\nreason: accepted"},  // the plan a dense site gets
      {"gate", 2, "CASE.json"},
      {"gate --planned-decode 2 {dir}/case.json", 2, "--planned-decode"},
      {"gate {dir}/bad.json", 2, "bad.json"},
      {"gate --clauses --json-out /dev/full", 3, "No space left"},
      // drift
      {"drift --list", 0, "cell 0"},
      {"drift --json r.json", 2, "to write it to a file use --json-out 'r.json'"},
      {"drift --json=r.json", 2, "to write it to a file use --json-out 'r.json'"},
      {"drift --list --cells nosuch", 2, "--cells: no cell 'nosuch' in this sweep (cells: 70k/b1 (0), 70k/b4 (1))"},
      {"drift --list --cells 0,,1", 2, "--cells"},
      {"drift --list --cells \"\"", 2, "--cells"},
      {"drift --seeds 1", 2, "--seeds"},
      {"drift --max-context 0", 2, "--max-context"},
      {"drift --sweep {dir}/missing.json", 2, "missing.json"},
      // An empty file option is not "the built-in sweep" or "no file".
      {"drift --list --sweep \"\"", 2, "--sweep"},
      {"drift --list --markdown \"\"", 2, "--markdown"},
      {"drift --list --plot \"\"", 2, "--plot"},
      {"drift --backend cpu --plot {dir}/p.png", 3, "gnuplot", {"PATH=/nonexistent"}},
      {"drift --list --json-out /dev/full", 3, "No space left"},
      // plan
      {"plan --lengths 5,0,9000 --kv-heads 1 --cu 8", 0, "capacity 16"},
      {"plan --lengths {long-lengths} --kv-heads 1024 --cu 4096 --budget 1048576", 0, "capacity"},
      {"plan --lengths 0 --kv-heads 1 --cu 1 --max-partitions 1 --budget 1", 0, "capacity 1"},
      {"plan --lengths 5 --kv-heads 9223372036854775808 --cu 8", 2, "--kv-heads"},
      {"plan --lengths 5 --kv-heads 0 --cu 8", 2, "--kv-heads"},
      {"plan --lengths 5 --kv-heads 1025 --cu 8", 2, "--kv-heads"},
      {"plan --lengths 5 --kv-heads 1 --cu 0", 2, "--cu"},
      {"plan --lengths 5 --kv-heads 1 --cu 4097", 2, "--cu"},
      {"plan --lengths 5 --kv-heads 1 --cu 200000000", 2, "--cu"},
      {"plan --lengths 5 --kv-heads 1 --cu 8 --budget \"\"", 2, "--budget"},
      {"plan --lengths 5 --kv-heads 1 --cu 8 --budget 1048577", 2, "--budget"},
      {"plan --lengths 5 --kv-heads 1 --cu 8 --max-partitions 9", 2, "--max-partitions 9 exceeds --cu 8"},
      {"plan --lengths 1,,2 --kv-heads 1 --cu 8", 2, "--lengths: item 2"},
      {"plan --lengths -1 --kv-heads 1 --cu 8", 2, "--lengths"},
      {"plan --lengths 2147483648 --kv-heads 1 --cu 8", 2, "--lengths"},
      {"plan --lengths {too-many} --kv-heads 1 --cu 8", 2, "--lengths: 4097 items"},
      {"plan --lengths 5 --kv-heads 1 --cu 8 --policy nosuch", 2, "--policy"},
      {"plan --lengths 5 --kv-heads 1 --cu 8 --json-out /dev/full", 3, "No space left"},
      // mcnemar: B worse with one-sided exact p = 1/1024 (10 vs 0) and 11/1024 (9 vs 1)
      {"mcnemar --counts 5,5", 0, "McNemar"},
      {"mcnemar --counts 10,0 --fail-if-worse 0.001", 1, "gate: B is significantly worse"},
      {"mcnemar --counts 10,0 --fail-if-worse 0.0009", 0, "gate: B is not significantly worse"},
      {"mcnemar --counts 9,1 --fail-if-worse 0.011", 1, "FAIL"},
      {"mcnemar --counts 9,1 --fail-if-worse 0.0107", 0, "pass"},
      {"mcnemar --counts 0,10 --fail-if-worse 0.5", 0, "pass"},
      {"mcnemar --counts 5,5 --fail-if-worse 0.5", 0, "pass"},
      {"mcnemar --counts 10,0 --fail-if-worse 1 --confidence 0.999999", 1, "FAIL"},
      {"mcnemar --counts 1", 2, "--counts"},
      {"mcnemar --counts \"\"", 2, "--counts"},
      {"mcnemar --counts 9223372036854775807,1", 2, "--counts"},
      {"mcnemar --counts 5,5 --fail-if-worse nan", 2, "--fail-if-worse"},
      {"mcnemar --counts 5,5 --fail-if-worse 1.5", 2, "--fail-if-worse"},
      {"mcnemar --counts 5,5 --confidence 1", 2, "--confidence"},
      {"mcnemar --counts 5,5 --json-out /dev/full", 3, "No space left"},
      // bench-compare: B is A slowed by 10% (interactivity -9.1%)
      {"bench-compare {fix}/stats/bench-a.json {fix}/stats/bench-b.json", 0, "p50 latency"},
      {"bench-compare {dir}/bench-a.json {dir}/bench-b10.json --max-regression 9.9", 1, "gate: FAIL"},
      {"bench-compare {dir}/bench-a.json {dir}/bench-b10.json --max-regression 10.1", 0, "gate: pass"},
      {"bench-compare {dir}/bench-a.json {dir}/bench-a.json --max-regression 0", 0, "gate: pass"},
      {"bench-compare {dir}/bench-b10.json {dir}/bench-a.json --max-regression 0", 0, "gate: pass"},
      {"bench-compare {dir}/bench-a.json {dir}/bench-b10.json --max-regression -1", 2, "--max-regression"},
      {"bench-compare {dir}/bench-a.json {dir}/bench-b10.json --max-regression nan", 2, "--max-regression"},
      {"bench-compare {dir}/bench-a.json {dir}/bench-b10.json --max-count-diff nan", 2, "--max-count-diff"},
      {"bench-compare {dir}/bench-a.json {dir}/bench-b10.json --resamples 0", 2, "--resamples"},
      {"bench-compare {dir}/bench-a.json {dir}/missing.json", 2, "missing.json"},
      {"bench-compare {dir}/bench-a.json {dir}/bench-a.json --json-out /dev/full", 3, "No space left"},
      // trace-stats
      {"trace-stats {fix}/stats/trace-small.jsonl", 0, "steps"},
      {"trace-stats {dir}/missing.jsonl", 2, "missing.jsonl"},
      {"trace-stats {fix}/stats/trace-small.jsonl --budget 0", 2, "--budget"},
      {"trace-stats {fix}/stats/trace-small.jsonl --budget \"\"", 2, "--budget"},
      {"trace-stats {fix}/stats/trace-small.jsonl --json-out /dev/full", 3, "No space left"},
      // settings: the values here; a malformed value exits 2 naming the variable and the value
      {"settings", 0, "PAV_WORK_PLAN"},
      {"settings --markdown", 0, "| `PAV_PLANNED_DECODE` | `0` |"},
      {"settings", 0, "PAV_PLANNED_DECODE   0             1 ", {"PAV_PLANNED_DECODE=1", "PAV_WORK_PLAN=0"}},
      {"settings", 2, "PAV_WORK_PLAN='2'", {"PAV_WORK_PLAN=2"}},
      {"settings", 2, "PAV_PLANNED_DECODE='-1'", {"PAV_PLANNED_DECODE=-1"}},
      {"settings", 2, "PAV_PLAN_POLICY='nosuch'", {"PAV_PLAN_POLICY=nosuch"}},
      {"settings --nosuch", 2, "--nosuch"},
      {"settings --json-out /dev/full", 3, "No space left"},
  };
  std::vector<Row> all = rows;
  if (!gpu_build)
    for (const char* cmd : {"verify --checks planner", "fuzz --cases 1", "replay {dir}/case.json", "drift --cells 0"})
      all.push_back({std::string(cmd) + " --backend gpu", 3, "--backend gpu"});
  for (const Row& row : all) {
    std::vector<std::string> args;
    for (std::string w : expand_all(row.args)) {
      if (w == kLongLengths) w = long_lengths;
      if (w == "{too-many}") w = too_many;
      args.push_back(w);
    }
    Launch l{args, row.env};
    l.timeout_s = 60;  // a row that should be refused must not become a long run
    const Outcome o = launch(l);
    const std::string shown = row.args.size() > 120 ? row.args.substr(0, 120) + "..." : row.args;
    EXPECT_EQ(o.code, row.code) << "pav " << shown << "\nstdout: " << o.out.substr(0, 2000)
                                << "\nstderr: " << o.err.substr(0, 2000);
    const std::string& where = row.code >= 2 ? o.err : o.out;
    EXPECT_NE(where.find(row.fragment), std::string::npos)
        << "pav " << shown << ": want '" << row.fragment << "' in " << (row.code >= 2 ? "stderr" : "stdout")
        << ":\n" << where.substr(0, 2000);
    if (row.code == 2) {
      // Refused before anything runs or allocates: a process start, no more.
      EXPECT_LT(o.seconds, 2.0) << "pav " << shown;
      EXPECT_EQ(o.err.find("internal error"), std::string::npos) << o.err;
    }
    EXPECT_EQ(o.signal, 0) << "pav " << shown << " died of signal " << o.signal;
  }
  EXPECT_TRUE(files_in(dir_ / "ce").empty()) << "nothing failed, so nothing may be saved";
  EXPECT_FALSE(fs::exists(dir_ / "r.json")) << "the old --json FILE form must not write";
}

// --json: one JSON document on stdout, naming the command, pav's version and
// the source commit; the log, if any, on stderr.
TEST_F(PavCli, JsonOnStdoutForEveryCommand) {
  write_inputs();
  const Outcome v = run("--version");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(v.out, m, std::regex(R"(pav (\d+\.\d+\.\d+) \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n)")))
      << v.out;
  const std::string version = m[1], commit = m[2];
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"verify", "verify --backend cpu --checks planner --plan-cases 20 --quiet --save {dir}/ce --json"},
      {"fuzz", "fuzz --property planner --cases 20 --seed 3 --quiet --save {dir}/ce --json"},
      {"fuzz", "fuzz --list --json"},
      {"fuzz", "fuzz --backend cpu --replay {dir}/case.json --json"},
      {"replay", "replay --backend cpu {dir}/case.json --json"},
      {"compare", "compare --kernel pav:cpu --kernel pav:cpu --cases 3 --out-dir {dir} --quiet --gate --json"},
      {"gate", "gate --clauses --json"},
      {"gate", "gate {dir}/case.json --json"},
      {"drift", "drift --list --json"},
      {"plan", "plan --lengths 5,0,9000 --kv-heads 2 --cu 8 --json"},
      {"mcnemar", "mcnemar --counts 10,0 --fail-if-worse 0.01 --json"},
      {"bench-compare", "bench-compare {dir}/bench-a.json {dir}/bench-b10.json --max-regression 5 --json"},
      {"trace-stats", "trace-stats {fix}/stats/trace-small.jsonl --json"},
      {"settings", "settings --json"},
  };
  for (const auto& [command, args] : runs) {
    const Outcome o = run(args);
    EXPECT_LE(o.code, 1) << args << "\n" << o.err;
    json j;
    try {
      j = json::parse(o.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << args << ": stdout is not one JSON document: " << e.what() << "\n" << o.out.substr(0, 500);
      continue;
    }
    EXPECT_EQ(j.value("command", ""), command) << args;
    EXPECT_EQ(j.value("pav_version", ""), version) << args;
    EXPECT_EQ(j.value("source_commit", ""), commit) << args;
  }
  // The gates' verdicts are in the JSON too.
  const json mc = json::parse(run("mcnemar --counts 10,0 --fail-if-worse 0.01 --json").out);
  EXPECT_EQ(mc["gate"]["b_worse"], true);
  EXPECT_DOUBLE_EQ(mc["gate"]["p_b_worse"].get<double>(), 1.0 / 1024);
  const json bc = json::parse(run("bench-compare {dir}/bench-a.json {dir}/bench-b10.json --max-regression 5 --json").out);
  EXPECT_EQ(bc["gate"]["regressed"], true);
  // The fixtures the other way round: p50 is 1.96% worse but its interval
  // [-1.73%, +4.54%] holds no change, so it does not fail even at 0%; p90 (+35%,
  // interval from +8%) does; throughput has no interval and fails on its estimate.
  const json rev = json::parse(
      run("bench-compare {fix}/stats/bench-b.json {fix}/stats/bench-a.json --max-regression 0 --json").out);
  std::map<std::string, json> by_metric;
  for (const auto& m : rev["gate"]["metrics"]) by_metric[m["metric"].get<std::string>()] = m;
  EXPECT_GT(by_metric["p50_ms"]["regression"].get<double>(), 0.0);
  EXPECT_EQ(by_metric["p50_ms"]["significant"], false);
  EXPECT_EQ(by_metric["p50_ms"]["fails"], false);
  EXPECT_EQ(by_metric["p90_ms"]["fails"], true);
  EXPECT_EQ(by_metric["throughput_tok_s"]["interval"], false);
  EXPECT_EQ(by_metric["throughput_tok_s"]["fails"], true);
}

namespace {

// The fields docs/json-reports.md documents for one report: path -> allowed
// types, and which paths may be absent. Paths join keys with '.', "[]" stands
// for every element of an array and "*" for every key of a map.
struct DocumentedReport {
  std::map<std::string, std::set<std::string>> types;
  std::set<std::string> optional;
};

std::map<std::string, DocumentedReport> documented_reports() {
  std::map<std::string, DocumentedReport> out;
  std::istringstream doc(slurp(fs::path(PAV_SOURCE_DIR) / "docs" / "json-reports.md"));
  std::string line, label;
  bool in_block = false;
  while (std::getline(doc, line)) {
    if (!in_block && line.rfind("```pav-json ", 0) == 0) {
      label = line.substr(12);
      in_block = true;
      EXPECT_EQ(out.count(label), 0u) << "docs/json-reports.md: report '" << label << "' documented twice";
      out[label];
      continue;
    }
    if (!in_block) continue;
    if (line == "```") {
      in_block = false;
      continue;
    }
    std::istringstream words(line);
    std::string path, types;
    words >> path >> types;
    if (path.empty()) continue;
    EXPECT_FALSE(types.empty()) << "docs/json-reports.md: '" << line << "' names no type";
    DocumentedReport& r = out[label];
    if (path.back() == '?') {
      path.pop_back();
      r.optional.insert(path);
    }
    for (size_t at = 0; at <= types.size();) {
      const size_t bar = std::min(types.find('|', at), types.size());
      r.types[path].insert(types.substr(at, bar - at));
      at = bar + 1;
    }
  }
  EXPECT_FALSE(in_block) << "docs/json-reports.md: a pav-json block is not closed";
  return out;
}

std::string json_type(const json& j) {
  switch (j.type()) {
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::null: return "null";
    default: return "other";
  }
}

using IsMap = std::function<bool(const std::string& path)>;
using Visit = std::function<void(const std::string& path, const json& value)>;

// Calls visit(path, value) for every value below j, by path: keys joined with
// '.', array elements as "[]", and the keys of an object whose path is_map
// holds folded into "*".
void for_each_value(const json& j, const std::string& path, const IsMap& is_map, const Visit& visit) {
  if (j.is_object()) {
    const bool map = is_map(path);
    for (const auto& [key, value] : j.items()) {
      const std::string child = (path.empty() ? "" : path + ".") + (map ? "*" : key);
      visit(child, value);
      for_each_value(value, child, is_map, visit);
    }
  } else if (j.is_array()) {
    for (const auto& value : j) {
      visit(path + "[]", value);
      for_each_value(value, path + "[]", is_map, visit);
    }
  }
}

}  // namespace

// Every --json report has exactly the fields docs/json-reports.md lists for
// it, each of a documented type: a field dropped, renamed, written as another
// type, or added without its documentation fails here, named with its report.
// The page is the contract; the reports are the binary's.
TEST_F(PavCli, JsonReportsHaveExactlyTheDocumentedFields) {
  write_inputs();
  const std::map<std::string, DocumentedReport> docs = documented_reports();
  // Two runs feed the fleet merge: one shard each.
  fs::create_directories(dir_ / "fleet");
  ASSERT_EQ(run("fuzz --property planner --cases 5 --seed 1 --shard 0/2 --quiet --save {dir}/ce --report "
                "{dir}/fleet/s0.json").code, 0);
  ASSERT_EQ(run("fuzz --property planner --cases 5 --seed 1 --shard 1/2 --quiet --save {dir}/ce --report "
                "{dir}/fleet/s1.json").code, 0);
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"verify", "verify --backend cpu --checks planner --plan-cases 20 --quiet --save {dir}/ce --json"},
      {"fuzz", "fuzz --property planner,gate-mirror --cases 20 --seed 3 --quiet --save {dir}/ce --json"},
      {"fuzz --list", "fuzz --list --json"},
      {"fuzz --replay", "fuzz --backend cpu --replay {dir}/case.json --json"},
      {"replay", "replay --backend cpu {dir}/case.json --json"},
      {"replay", "replay --kernel pav:cpu {dir}/case.json --json"},
      {"compare", "compare --kernel pav:cpu --kernel pav:cpu --cases 3 --out-dir {dir} --quiet --gate --json"},
      {"gate --clauses", "gate --clauses --json"},
      {"gate", "gate {dir}/case.json --json"},
      {"gate", "gate {dir}/reject.json --all --json"},
      {"drift --list", "drift --list --json"},
      {"drift", "drift --cells 0 --seeds 2 --no-progress --json"},
      {"plan", "plan --lengths 5,0,9000 --kv-heads 2 --cu 8 --json"},
      {"mcnemar --counts", "mcnemar --counts 10,0 --fail-if-worse 0.01 --json"},
      {"mcnemar", "mcnemar {fix}/stats/gsm8k-a.jsonl {fix}/stats/gsm8k-b.jsonl {fix}/stats/gsm8k-a2.jsonl "
                  "{fix}/stats/gsm8k-b2.jsonl --variant A,B,A,B --fail-if-worse 0.05 --json"},
      {"bench-compare", "bench-compare {dir}/bench-a.json {dir}/bench-b10.json --max-regression 5 --json"},
      {"bench-compare", "bench-compare {fix}/stats/bench-a.json {fix}/stats/bench-b.json --json"},
      {"trace-stats", "trace-stats {fix}/stats/trace-small.jsonl --json"},
      {"settings", "settings --json"},
      {"report merge", "report merge {dir}/fleet/s0.json {dir}/fleet/s1.json --json"},
  };
  std::set<std::string> ran;
  for (const auto& [label, args] : runs) {
    SCOPED_TRACE("pav " + args);
    ran.insert(label);
    const auto d = docs.find(label);
    ASSERT_NE(d, docs.end()) << "docs/json-reports.md documents no report '" << label << "'";
    const Outcome o = run(args);
    ASSERT_LE(o.code, 1) << o.err;
    const json j = parsed(o.out);
    ASSERT_TRUE(j.is_object()) << o.out.substr(0, 500);
    // Every path with the types seen there; an object whose path the document
    // marks as a map ("path.*") has its keys folded into "*".
    std::map<std::string, std::set<std::string>> seen;
    for_each_value(
        j, "", [&](const std::string& p) { return d->second.types.count(p.empty() ? "*" : p + ".*") > 0; },
        [&](const std::string& p, const json& v) { seen[p].insert(json_type(v)); });
    for (const auto& [path, types] : seen) {
      const auto want = d->second.types.find(path);
      if (want == d->second.types.end()) {
        ADD_FAILURE() << label << ": field '" << path << "' is not documented";
        continue;
      }
      for (const std::string& t : types)
        EXPECT_EQ(want->second.count(t), 1u) << label << ": field '" << path << "' is " << t << ", documented as "
                                            << ::testing::PrintToString(want->second);
    }
    for (const auto& [path, types] : d->second.types) {
      if (!d->second.optional.count(path)) {
        EXPECT_EQ(seen.count(path), 1u) << label << ": documented field '" << path << "' is missing";
      }
    }
  }
  for (const auto& [label, doc] : docs) EXPECT_EQ(ran.count(label), 1u) << "report '" << label << "' is never run";
}

namespace {

// The ways a text report writes a number: an integer as is; a fraction as %g,
// fixed or exponent at a few precisions, or as a percentage (signed or not).
std::vector<std::string> renderings(const json& v) {
  std::vector<std::string> out;
  if (v.is_number_integer() || v.is_number_unsigned()) return {v.dump()};
  const double x = v.get<double>();
  char buf[64];
  for (int n = 1; n <= 7; ++n) out.push_back((std::snprintf(buf, sizeof buf, "%.*g", n, x), buf));
  for (int n = 0; n <= 4; ++n) out.push_back((std::snprintf(buf, sizeof buf, "%.*f", n, x), buf));
  for (int n = 1; n <= 4; ++n) out.push_back((std::snprintf(buf, sizeof buf, "%.*e", n, x), buf));
  for (int n = 0; n <= 3; ++n) {
    out.push_back((std::snprintf(buf, sizeof buf, "%.*f%%", n, 100 * x), buf));
    out.push_back((std::snprintf(buf, sizeof buf, "%+.*f%%", n, 100 * x), buf));
  }
  return out;
}

// text holds s as a whole number: no digit right before or after it, no '.' before.
bool shows(const std::string& text, const std::string& s) {
  for (size_t at = text.find(s); at != std::string::npos; at = text.find(s, at + 1)) {
    const bool clean_before = at == 0 || !(std::isdigit(uint8_t(text[at - 1])) || text[at - 1] == '.');
    const size_t end = at + s.size();
    const bool clean_after = end == text.size() || !std::isdigit(uint8_t(text[end]));
    if (clean_before && clean_after) return true;
  }
  return false;
}

}  // namespace

// What a person reads holds what a script reads: every number of a --json
// report appears in the text report of the same run, in one of the usual
// renderings, except timings and the fields listed with the reason the text
// leaves them out. A table line dropped, or a figure printed from the wrong
// variable, fails here with its path.
TEST_F(PavCli, TextShowsEveryJsonFigure) {
  write_inputs();
  json two = json::parse(slurp(dir_ / "case.json"));
  two["lens"] = {300, 0};
  two["q_len"] = 1;
  write("two.json", two.dump());
  const std::string defective = split_decode_with("merge-ignores-max");
  struct TextRun {
    std::vector<std::string> args;
    std::set<std::string> not_shown;
  };
  const std::set<std::string> bench_not_shown = {
      "max_count_diff",              // named only in the warning when the counts differ
      "gate.metrics[].regression",   // the delta of deltas[], sign-adjusted so that > 0 is worse
  };
  const std::vector<TextRun> runs = {
      {expand_all("trace-stats {fix}/stats/trace-small.jsonl"), {}},
      {expand_all("bench-compare {fix}/stats/bench-a.json {fix}/stats/bench-b.json --max-regression 5"),
       bench_not_shown},
      {expand_all("bench-compare {dir}/bench-a.json {dir}/bench-b10.json --max-regression 5"), bench_not_shown},
      {expand_all("mcnemar --counts 121,59 --fail-if-worse 0.01"), {}},
      {expand_all("mcnemar {fix}/stats/gsm8k-a.jsonl {fix}/stats/gsm8k-b.jsonl {fix}/stats/gsm8k-a2.jsonl "
                  "{fix}/stats/gsm8k-b2.jsonl --variant A,B,A,B"),
       {"pairs[].both"}},  // the text gives agreement as a fraction
      {expand_all("replay --backend cpu {dir}/two.json"), {}},
      {expand_all("compare --kernel pav:cpu --cases 12 --out-dir {dir} --quiet --kernel"), {}},
      {expand_all("drift --cells 0 --seeds 2 --no-progress"),
       {"cells[].growth[].mean_diff", "cells[].growth[].t",  // the table gives the means and p-values
        "cells[].control.mean_diff", "cells[].control.t",
        "sweep.lengths_seed", "sweep.shorter.ratio_p50", "sweep.shorter.ratio_p90", "sweep.shorter.min_len",
        "sweep.kv_scale", "sweep.q_std", "sweep.seed", "sweep.control_epsilon", "sweep.growth.alpha",
        "sweep.growth.min_relative_growth", "sweep.contexts[]", "sweep.batches[]", "sweep.heads[].hkv",
        "sweep.heads[].group", "sweep.ceilings[]", "sweep.workgroup_budget"}},  // the sweep file's settings
      {expand_all("gate {dir}/reject.json --all"), {}},
      {expand_all("plan --lengths 5,0,9000 --kv-heads 2 --cu 8"),
       {"work_info[][]"}},  // shown as each partition's tile count
  };
  for (TextRun r : runs) {
    if (r.args.back() == "--kernel") r.args.push_back(defective);
    std::string shown;
    for (const auto& a : r.args) shown += a + " ";
    SCOPED_TRACE("pav " + shown);
    const Outcome text = launch({r.args});
    std::vector<std::string> json_args = r.args;
    json_args.push_back("--json");
    const Outcome js = launch({json_args});
    ASSERT_LE(text.code, 1) << text.err;
    ASSERT_EQ(js.code, text.code) << js.err;
    const json j = parsed(js.out);
    ASSERT_TRUE(j.is_object()) << js.out.substr(0, 500);
    std::vector<std::pair<std::string, json>> figures;  // every number, by path
    for_each_value(
        j, "", [](const std::string&) { return false; },
        [&](const std::string& p, const json& v) {
          if (v.is_number()) figures.emplace_back(p, v);
        });
    int checked = 0;
    for (const auto& [path, value] : figures) {
      const std::string leaf = path.substr(path.rfind('.') == std::string::npos ? 0 : path.rfind('.') + 1);
      if (leaf.find("seconds") != std::string::npos || leaf.find("per_second") != std::string::npos ||
          path.find("seconds_by_phase") != std::string::npos || r.not_shown.count(path))
        continue;
      ++checked;
      bool found = false;
      for (const std::string& s : renderings(value)) found = found || shows(text.out, s);
      EXPECT_TRUE(found) << path << " = " << value.dump() << " is not in the text report:\n" << text.out;
    }
    EXPECT_GT(checked, 0);
  }
}

// bench-compare's table puts A's figure in A's column and B's in B's, on every
// row: each printed as the JSON's value at the table's precision. (A figure
// shown anywhere in the text is not enough: at two digits A's 34.808 requests/s
// is the "35" of "+35.39%".) The two fixture runs differ on every row but
// completed requests (48 each), so a column taken from the other run shows.
TEST_F(PavCli, BenchCompareColumnsAreAThenB) {
  const Outcome text = run("bench-compare {fix}/stats/bench-a.json {fix}/stats/bench-b.json");
  const Outcome js = run("bench-compare {fix}/stats/bench-a.json {fix}/stats/bench-b.json --json");
  ASSERT_EQ(text.code, 0) << text.err;
  ASSERT_EQ(js.code, 0) << js.err;
  const json j = parsed(js.out);
  ASSERT_TRUE(j.contains("a") && j.contains("b")) << js.out.substr(0, 300);
  const auto fixed3 = [](const json& v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", v.get<double>());
    return std::string(buf);
  };
  const auto plain = [](const json& v) { return v.dump(); };  // the shortest text that reads back, as pav prints it
  const std::vector<std::tuple<std::string, std::string, std::function<std::string(const json&)>>> rows = {
      {"p50 latency (ms)", "p50_ms", fixed3},
      {"p90 latency (ms)", "p90_ms", fixed3},
      {"p99 latency (ms)", "p99_ms", fixed3},
      {"interactivity (tok/s)", "interactivity_tok_s", fixed3},
      {"throughput (tok/s)", "throughput_tok_s", fixed3},
      {"samples", "samples", plain},
      {"completed requests", "completed", plain},
      {"duration (s)", "duration_s", plain},
      {"requests/s", "requests_per_s", fixed3},
  };
  std::istringstream lines(text.out);
  std::map<std::string, std::vector<std::string>> table;  // row name -> the words after it
  for (std::string line; std::getline(lines, line);)
    for (const auto& [name, key, format] : rows)
      if (line.rfind("  " + name + " ", 0) == 0) {
        std::istringstream words(line.substr(2 + name.size()));
        for (std::string w; words >> w;) table[name].push_back(w);
      }
  for (const auto& [name, key, format] : rows) {
    SCOPED_TRACE(name);
    ASSERT_GE(table[name].size(), 2u) << text.out;
    EXPECT_EQ(table[name][0], format(j["a"][key])) << text.out;
    EXPECT_EQ(table[name][1], format(j["b"][key])) << text.out;
  }
}

// --json-out FILE writes the report --json prints, and the text still goes to stdout.
TEST_F(PavCli, JsonOutWritesTheSameReportBesideTheText) {
  const Outcome j = run("plan --lengths 5,0,9000 --kv-heads 2 --cu 8 --json");
  const Outcome t = run("plan --lengths 5,0,9000 --kv-heads 2 --cu 8 --json-out {dir}/plan.json");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("capacity"), std::string::npos);
  EXPECT_EQ(slurp(dir_ / "plan.json"), j.out);
  EXPECT_EQ(files_in(dir_), (std::vector<std::string>{".stderr", ".stdout", "plan.json"})) << "no temporary file left";
}

TEST_F(PavCli, HelpShowsEveryCommandsOptionsWithDefaults) {
  for (const std::string cmd :
       {"verify", "fuzz", "replay", "gate", "drift", "plan", "mcnemar", "bench-compare", "trace-stats", "settings"}) {
    const Outcome h = run("help " + cmd);
    const Outcome dash = run(cmd + " --help");
    EXPECT_EQ(h.code, 0) << cmd;
    EXPECT_EQ(h.out, dash.out) << cmd << ": pav help CMD and pav CMD --help differ";
    EXPECT_TRUE(h.err.empty()) << h.err;
    EXPECT_NE(h.out.find("--json-out"), std::string::npos) << cmd << " lacks --json-out";
    EXPECT_NE(h.out.find("--json "), std::string::npos) << cmd << " lacks --json";
  }
  const std::string verify = run("help verify").out;
  EXPECT_TRUE(std::regex_search(verify, std::regex(R"(--decode-cases INT:in 1\.\.100000=search)"))) << verify;
  EXPECT_TRUE(std::regex_search(verify, std::regex(R"(--seed [^\n]*=20261129)"))) << verify;
  const std::string fuzz = run("help fuzz").out;
  EXPECT_TRUE(std::regex_search(fuzz, std::regex(R"(--seed [^\n]*=random)"))) << fuzz;
  EXPECT_TRUE(std::regex_search(fuzz, std::regex(R"(--save [^\n]*=counterexamples)"))) << fuzz;
}

TEST_F(PavCli, UsageErrorsGoToStderrWithNothingOnStdout) {
  for (const std::string args : {"", "nosuch", "verify --nosuch", "fuzz --cases x", "plan --lengths 1"}) {
    const Outcome o = run(args);
    EXPECT_EQ(o.code, 2) << args;
    EXPECT_TRUE(o.out.empty()) << args << ": " << o.out;
    EXPECT_FALSE(o.err.empty()) << args;
  }
  const Outcome o = run("fuzz --cases x");
  EXPECT_NE(o.err.find("--cases"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("pav fuzz --help"), std::string::npos) << o.err;
}

// Without a terminal, progress comes as plain lines: no carriage returns or
// escape sequences in a CI log.
TEST_F(PavCli, ProgressInALogIsPlainLines) {
  const Outcome o = run("fuzz --property planner --cases 300 --seed 2 --save {dir}/ce");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("[pav fuzz] planner:"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find('\r'), std::string::npos);
  EXPECT_EQ(o.err.find('\033'), std::string::npos);
}

// ---- faults ---------------------------------------------------------------------

// A full disk under --json-out: exit 3 naming the file and the reason, the
// summary still printed, and neither a partial file nor a temporary one left.
TEST_F(PavCli, AFullDiskFailsTheWriteHonestly) {
  pav::testing::FullTmpfs full(dir_ / "full");
  std::string lengths;
  for (int i = 0; i < 500; ++i) lengths += (i ? "," : "") + std::to_string(1000 + i);
  Outcome o;
  fs::path target;
  if (full.mounted()) {
    target = full.dir() / "plan.json";
    o = launch({{"plan", "--lengths", lengths, "--kv-heads", "1", "--cu", "8", "--json-out", target.string()}});
  } else {
    // No mount here: a file size limit fails the same write (EFBIG).
    target = dir_ / "plan.json";
    Launch l{{"plan", "--lengths", lengths, "--kv-heads", "1", "--cu", "8", "--json-out", target.string()}};
    l.file_size_limit = 4096;
    o = launch(l);
  }
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_NE(o.err.find("cannot write " + target.string()), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(full.mounted() ? "No space left" : "File too large"), std::string::npos) << o.err;
  EXPECT_NE(o.out.find("active tasks"), std::string::npos) << "the summary must still print";
  EXPECT_FALSE(fs::exists(target));
  for (const auto& f : files_in(target.parent_path()))
    EXPECT_TRUE(f.rfind("filler", 0) == 0 || f.rfind(".std", 0) == 0) << "left behind: " << f;
}

// A passing pav fuzz whose --report cannot be written (a file size limit on the
// child, past the start-up checks) exits 3, "could not run", naming the file:
// a run whose record is lost is no pass.
TEST_F(PavCli, AFuzzPassWhoseReportIsLostCouldNotRun) {
  const fs::path report = dir_ / "report.json";
  Launch l{{"fuzz", "--property", "planner", "--cases", "3", "--seed", "1", "--quiet", "--report", report.string()}};
  l.file_size_limit = 256;
  const Outcome o = launch(l);
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_EQ(o.signal, 0);
  EXPECT_NE(o.err.find("cannot write " + report.string()), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(report));
}

// A file size limit (ulimit -f) on the child: the write fails, pav says so.
TEST_F(PavCli, AFileSizeLimitFailsTheWriteHonestly) {
  std::string lengths;
  for (int i = 0; i < 500; ++i) lengths += (i ? "," : "") + std::to_string(1000 + i);
  const fs::path target = dir_ / "out" / "plan.json";
  fs::create_directories(target.parent_path());
  Launch l{{"plan", "--lengths", lengths, "--kv-heads", "1", "--cu", "8", "--json-out", target.string()}};
  l.file_size_limit = 4096;
  const Outcome o = launch(l);
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_EQ(o.signal, 0) << "killed by SIGXFSZ instead of reporting the failed write";
  EXPECT_NE(o.err.find("File too large"), std::string::npos) << o.err;
  EXPECT_TRUE(files_in(target.parent_path()).empty()) << "a partial file was left";
}

// A --save or --json-out folder that takes no files is refused at start-up, in
// well under a second, before a single case runs.
TEST_F(PavCli, AnUnwritableFolderIsRefusedAtStartUp) {
  pav::testing::UnwritableDir ro(dir_ / "ro");
  const std::string d = ro.path().string();
  for (const std::string& args :
       {"fuzz --property decode --minutes 5 --save " + d, "verify --backend cpu --save " + d,
        "verify --backend cpu --checks planner --save " + d + "/sub",
        "fuzz --property planner --cases 10 --json-out " + d + "/r.json"}) {
    Launch l{expand_all(args)};
    l.timeout_s = 20;
    const Outcome o = launch(l);
    EXPECT_EQ(o.code, 3) << args << " (" << ro.how() << ")\n" << o.err;
    EXPECT_NE(o.err.find(args.find("--json-out") != std::string::npos ? "--json-out" : "--save"), std::string::npos)
        << o.err;
    EXPECT_NE(o.err.find("cannot create files in " + d), std::string::npos) << o.err;
    EXPECT_EQ(o.out.find("cases in"), std::string::npos) << "a case ran before the refusal:\n" << o.out;
    EXPECT_LT(o.seconds, 2.0) << args;
  }
}

namespace {

// Waits until `file` contains `text` (or the timeout), then some more.
void wait_for(const fs::path& file, const std::string& text, double then_s, double timeout_s = 15) {
  const auto t0 = Clock::now();
  while (slurp(file).find(text) == std::string::npos &&
         std::chrono::duration<double>(Clock::now() - t0).count() < timeout_s)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::duration<double>(then_s));
}

// A run of pav that gets SIGINT a second after its stdout shows `text`, and
// has 20 s in all to stop.
Launch interrupted_after(std::vector<std::string> args, std::string text) {
  Launch l{std::move(args)};
  l.timeout_s = 20;
  l.during = [text = std::move(text)](pid_t pid, const fs::path& out, const fs::path&) {
    wait_for(out, text, 1.0);
    kill(pid, SIGINT);
  };
  return l;
}

}  // namespace

// SIGINT and SIGTERM mid-run: pav fuzz stops within a case, prints the summary
// of what ran, writes its report whole, leaves no partial file, and exits 3
// (the budget was not spent: not a pass).
TEST_F(PavCli, FuzzStopsCleanlyOnSigintAndSigterm) {
  for (const int sig : {SIGINT, SIGTERM}) {
    const fs::path save = dir_ / ("ce-" + std::to_string(sig));
    const fs::path report = dir_ / ("report-" + std::to_string(sig) + ".json");
    Launch l{{"fuzz", "--property", "planner,decode", "--minutes", "30", "--seed", "11", "--save", save.string(),
              "--json-out", report.string()}};
    l.timeout_s = 20;
    double sent_at = 0;
    l.during = [&](pid_t pid, const fs::path& out, const fs::path&) {
      wait_for(out, "job 0: seeds", 1.0);
      sent_at = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
      kill(pid, sig);
    };
    const Outcome o = launch(l);
    const double stop_s = std::chrono::duration<double>(Clock::now().time_since_epoch()).count() - sent_at;
    const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    EXPECT_FALSE(o.timed_out) << name;
    EXPECT_EQ(o.signal, 0) << name << ": pav died of the signal instead of stopping";
    EXPECT_EQ(o.code, 3) << name << "\n" << o.out << o.err;
    EXPECT_LT(stop_s, 5.0) << name << ": took too long to stop";
    EXPECT_NE(o.out.find("stopped by " + name + " after"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("planner: "), std::string::npos) << "the summary of what ran:\n" << o.out;
    json j;
    ASSERT_NO_THROW(j = json::parse(slurp(report))) << name << ": the report is not whole";
    EXPECT_EQ(j["interrupted"], true);
    EXPECT_EQ(j["signal"], name);
    EXPECT_EQ(j["passed"], false);
    ASSERT_GE(j["runs"].size(), 1u);
    EXPECT_GT(j["runs"][0]["cases"].get<int64_t>(), 0);
    for (const auto& f : files_in(dir_)) EXPECT_EQ(f.find(".tmp-"), std::string::npos) << "left behind: " << f;
    EXPECT_TRUE(files_in(save).empty()) << "nothing failed, nothing may be saved";
  }
}

TEST_F(PavCli, VerifyStopsCleanlyOnSigint) {
  const Outcome o = launch(interrupted_after({"verify", "--backend", "cpu", "--checks", "planner,decode",
                                              "--plan-cases", "1000000", "--save", (dir_ / "ce").string()},
                                             "job 0: seeds"));
  EXPECT_EQ(o.signal, 0);
  EXPECT_EQ(o.code, 3) << o.out << o.err;
  EXPECT_NE(o.out.find("verdict: STOPPED"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("stopped by SIGINT"), std::string::npos) << o.out;
  EXPECT_TRUE(std::regex_search(o.out, std::regex(R"(planner\s+\d+\s+stopped)"))) << o.out;
  EXPECT_EQ(o.out.find("\ndecode "), std::string::npos) << "the decode check must not start after the stop";
}

// pav compare names its two kernels before the run starts: when its progress
// (stderr) shows the first case, the A/B header is already in its stdout (a
// file here, fully buffered: the header must have been flushed, not left to
// the end of the run). The run is then stopped.
TEST_F(PavCli, CompareNamesItsKernelsBeforeTheRunStarts) {
  std::string seen_out;
  bool saw_progress = false;
  Launch l{{"compare", "--kernel", "pav:cpu", "--kernel", "pav:cpu", "--cases", "1000000", "--out-dir", dir_.string()}};
  l.timeout_s = 30;
  l.during = [&](pid_t pid, const fs::path& out, const fs::path& err) {
    wait_for(err, "[compare]", 0.0);
    saw_progress = slurp(err).find("[compare]") != std::string::npos;
    seen_out = slurp(out);
    kill(pid, SIGINT);
  };
  const Outcome o = launch(l);
  ASSERT_TRUE(saw_progress) << o.err;
  EXPECT_NE(seen_out.find("\nA         pav-cpu-planned"), std::string::npos) << "stdout when the run had started:\n" << seen_out;
  EXPECT_NE(seen_out.find("\nB         pav-cpu-planned"), std::string::npos) << seen_out;
  EXPECT_EQ(o.code, 3) << o.err;
}

// Two kernels on identical cases: the verification fails when either kernel is
// wrong on any case, on whichever side it stands; it passes only when both are
// right on every case. SIGINT stops it cleanly, and a stop is not a pass.
TEST_F(PavCli, VerifyTwoKernelsFailsWhenEitherIsWrong) {
  const std::string good = "pav:cpu";
  const std::string bad = split_decode_with("merge-ignores-max");
  struct Pair {
    std::string a, b;
    int code;
    const char* verdict;
  };
  for (const Pair& p : {Pair{good, good, 0, "PASS"}, Pair{good, bad, 1, "FAIL"}, Pair{bad, good, 1, "FAIL"},
                        Pair{bad, bad, 1, "FAIL"}}) {
    SCOPED_TRACE("A " + p.a + ", B " + p.b);
    const Outcome o = launch({{"verify", "--kernel", p.a, "--kernel", p.b, "--decode-cases", "12", "--out-dir",
                               dir_.string(), "--quiet", "--json"}});
    EXPECT_EQ(o.code, p.code) << o.err;
    const json j = parsed(o.out);
    ASSERT_TRUE(j.is_object()) << o.out.substr(0, 500);
    EXPECT_EQ(j["verdict"], p.verdict);
    EXPECT_EQ(j["passed"], p.code == 0);
    EXPECT_EQ(j["a_correct"].get<int64_t>() == 12, p.a == good);
    EXPECT_EQ(j["b_correct"].get<int64_t>() == 12, p.b == good);
  }
  const Outcome o = launch(interrupted_after(
      {"verify", "--kernel", good, "--kernel", good, "--decode-cases", "100000", "--out-dir", dir_.string()},
      "pav verify: two kernels"));
  EXPECT_FALSE(o.timed_out) << "verify of two kernels did not stop";
  EXPECT_EQ(o.signal, 0) << "pav died of SIGINT instead of stopping";
  EXPECT_EQ(o.code, 3) << o.out << o.err;
  EXPECT_NE(o.out.find("verdict: STOPPED (not a pass)"), std::string::npos) << o.out;
}

// pav compare --gate fails only when B is the significantly worse kernel: a
// significant difference in B's favour passes. (alpha 0.3 makes three
// discordant cases, exact p = 0.25, significant in a quick run.)
TEST_F(PavCli, CompareGateFailsOnlyWhenBIsSignificantlyWorse) {
  const std::string good = "pav:cpu";
  const std::string bad = split_decode_with("partition-end-off-by-one");
  struct Pair {
    std::string a, b;
    int code;
    const char* comparison;
  };
  for (const Pair& p : {Pair{bad, good, 0, "B is better (exact p = 0.25 < 0.3)"},
                        Pair{good, bad, 1, "A is better (exact p = 0.25 < 0.3)"}}) {
    SCOPED_TRACE("A " + p.a + ", B " + p.b);
    const Outcome o = launch({{"compare", "--kernel", p.a, "--kernel", p.b, "--cases", "16", "--alpha", "0.3",
                               "--gate", "--out-dir", dir_.string(), "--quiet", "--json"}});
    EXPECT_EQ(o.code, p.code) << o.err;
    const json j = parsed(o.out);
    ASSERT_TRUE(j.is_object()) << o.out.substr(0, 500);
    EXPECT_EQ(j["comparison"], p.comparison);
    EXPECT_EQ(j["passed"], p.code == 0);
  }
}

// Two kernels with no case in common (here: one reads only fp8_e4m3fn caches,
// the other only fp8_e4m3fnuz) cannot be compared: bad input, exit 2, naming
// what they do not share; never a comparison of zero cases.
TEST_F(PavCli, TwoKernelsThatShareNoCaseAreBadInput) {
  for (const char* cmd : {"compare", "verify"}) {
    SCOPED_TRACE(cmd);
    const Outcome o = launch({{cmd, "--kernel", "pav:cpu --arch sm90", "--kernel", "pav:cpu --arch gfx942",
                               std::string(cmd) == "compare" ? "--cases" : "--decode-cases", "2", "--out-dir",
                               dir_.string(), "--quiet"}});
    EXPECT_EQ(o.code, 2) << o.out << o.err;
    EXPECT_NE(o.err.find("the two kernels share no case: cache_dtypes"), std::string::npos) << o.err;
    EXPECT_FALSE(fs::exists(dir_ / "compare-a.jsonl")) << "no per-case verdicts of a comparison that did not run";
  }
}

// replay runs a decode case on the path the case records, or on the one
// --path asks for, and reports the path it ran.
TEST_F(PavCli, ReplayRunsTheCasePathOrTheOneAsked) {
  write_inputs();
  json planned = json::parse(slurp(dir_ / "case.json"));
  ASSERT_EQ(planned["path"], "uniform");
  planned["path"] = "planned";
  write("planned.json", planned.dump());
  struct Run {
    std::string file, path_option, ran;
  };
  for (const Run& r : {Run{"case.json", "", "uniform"}, Run{"planned.json", "", "planned"},
                       Run{"case.json", "planned", "planned"}, Run{"planned.json", "uniform", "uniform"},
                       Run{"case.json", "uniform", "uniform"}, Run{"planned.json", "planned", "planned"}}) {
    SCOPED_TRACE(r.file + " --path " + r.path_option);
    std::vector<std::string> args = {"replay", "--backend", "cpu", (dir_ / r.file).string(), "--json"};
    if (!r.path_option.empty()) args.insert(args.end(), {"--path", r.path_option});
    const Outcome o = launch({args});
    ASSERT_LE(o.code, 1) << o.err;
    const json j = parsed(o.out);
    ASSERT_TRUE(j.is_object()) << o.out.substr(0, 500);
    EXPECT_EQ(j["cases"][0]["path"], r.ran);
  }
}

// verify's drift check through a kernel runs the quick sweep narrowed to what
// the kernel declares: its own partial dtype and no control arm (pav's injected
// defect cannot run inside someone else's kernel). (Without a kernel the same
// sweep, control included, is DriftQuickSweep's.)
TEST_F(PavCli, VerifyDriftCheckThroughAKernelIsNarrowedToIt) {
  const Outcome o = launch({{"verify", "--kernel", std::string("lib:") + PAV_SPLIT_DECODE, "--checks", "drift",
                             "--quiet", "--json"}});
  EXPECT_EQ(o.signal, 0);
  ASSERT_EQ(o.code, 0) << o.err;
  const json j = parsed(o.out);
  ASSERT_TRUE(j.is_object()) << o.out.substr(0, 500);
  ASSERT_EQ(j["checks"].size(), 1u);
  const json& c = j["checks"][0];
  EXPECT_EQ(c["skipped"], "");
  EXPECT_EQ(c["cases"], 2);
  EXPECT_EQ(c["passed"], true);
  EXPECT_EQ(c["detail"]["verdict"], "PASS: no growth (2 cells)");
}

// verify's stale check: in the default checks of a kernel that runs pav's plan
// (before drift) and not of one that splits by itself, where asking for it
// names why it is skipped; without --kernel, pav's own kernels take it.
// The decode check searches by default: calls for --decode-seconds, not a fixed
// count, and the report says so; --quick fixes every count (its own, or the one
// also given) and turns the search off.
TEST_F(PavCli, VerifyDecodeSearchesForItsSecondsAndQuickFixesTheCounts) {
  struct Case {
    std::vector<std::string> extra;
    bool quick;
    std::string budget;
    int64_t cases;  // -1: a search, any count
  };
  const std::vector<Case> cases{
      {{"--decode-seconds", "2"}, false, "search of 2 s", -1},
      {{"--quick"}, true, "64 cases", 64},
      {{"--quick", "--decode-cases", "5"}, true, "5 cases", 5},
      {{"--decode-cases", "7"}, false, "7 cases", 7},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args{"verify", "--backend", "cpu", "--checks", "planner,decode", "--quiet", "--json",
                                  "--save", (dir_ / "ce").string()};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const Outcome o = launch({args});
    ASSERT_EQ(o.code, 0) << o.err;
    const json j = parsed(o.out);
    ASSERT_TRUE(j.is_object()) << o.out.substr(0, 500);
    EXPECT_EQ(j["quick"], c.quick);
    EXPECT_EQ(j["checks"][0]["budget"], c.quick ? "200 cases" : "500 cases");
    const json& decode = j["checks"][1];
    EXPECT_EQ(decode["budget"], c.budget);
    if (c.cases >= 0) {
      EXPECT_EQ(decode["cases"], c.cases);
    } else {  // ran until its budget was spent, well past the 64 a fixed default once ran
      EXPECT_GE(decode["detail"]["seconds"].get<double>(), 1.9) << decode.dump();
      EXPECT_GT(decode["cases"].get<int64_t>(), 0);
      EXPECT_NE(o.err.find("(2 s per property)"), std::string::npos) << o.err;
    }
  }
}

// pav verify's decode search draws half its calls from the decode regions and
// counts them per region; pav fuzz does so with --regions (and says so in its
// report), and a failure found so is drawn again by its reproduce command.
TEST_F(PavCli, RegionsAreCountedAndAFailureFoundInThemIsDrawnAgainBySeed) {
  auto region_sum = [](const json& regions) {
    int64_t n = 0;
    for (const auto& [name, count] : regions.items()) n += count.get<int64_t>();
    return n;
  };
  const std::string good = "pav:cpu --path uniform";
  const Outcome v = launch({{"verify", "--kernel", good, "--checks", "decode", "--decode-cases", "48", "--quiet",
                             "--json", "--save", (dir_ / "ce").string()}});
  ASSERT_EQ(v.code, 0) << v.err;
  const json vj = parsed(v.out);
  ASSERT_TRUE(vj.is_object()) << v.out.substr(0, 500);
  const json& counted = vj["checks"][0]["detail"]["regions"];
  EXPECT_EQ(region_sum(counted), 48) << counted.dump();
  EXPECT_TRUE(counted.contains("general")) << counted.dump();
  EXPECT_GE(counted.size(), 4u) << counted.dump();

  for (bool regions : {false, true}) {
    std::vector<std::string> args{"fuzz", "--kernel", good, "--property", "decode", "--cases", "30", "--seed", "9",
                                  "--quiet", "--json", "--save", (dir_ / "ce").string()};
    if (regions) args.push_back("--regions");
    const Outcome f = launch({args});
    ASSERT_EQ(f.code, 0) << f.err;
    const json fj = parsed(f.out);
    ASSERT_TRUE(fj.is_object()) << f.out.substr(0, 500);
    EXPECT_EQ(fj["regions"], regions);
    EXPECT_EQ(region_sum(fj["runs"][0]["regions"]), regions ? 30 : 0) << fj["runs"][0]["regions"].dump();
  }
  // A report resumes only a run drawn the same way: the cases of a seed differ.
  const std::string plain_report = (dir_ / "plain.json").string();
  ASSERT_EQ(launch({{"fuzz", "--kernel", good, "--property", "decode", "--cases", "4", "--seed", "9", "--quiet",
                     "--report", plain_report, "--save", (dir_ / "ce").string()}})
                .code,
            0);
  const Outcome mixed = launch({{"fuzz", "--kernel", good, "--resume", plain_report, "--cases", "4", "--regions",
                                 "--quiet", "--save", (dir_ / "ce").string()}});
  EXPECT_EQ(mixed.code, 2) << mixed.err;
  EXPECT_NE(mixed.err.find("decode regions off"), std::string::npos) << mixed.err;
  EXPECT_EQ(launch({{"fuzz", "--kernel", good, "--resume", plain_report, "--cases", "4", "--quiet", "--save",
                     (dir_ / "ce").string()}})
                .code,
            0);
  const Outcome own = launch({{"fuzz", "--property", "decode", "--cases", "3", "--regions", "--quiet"}});
  EXPECT_EQ(own.code, 2) << own.err;
  EXPECT_NE(own.err.find("--regions"), std::string::npos) << own.err;

  const std::string bad = split_decode_with("merge-ignores-max");
  const Outcome b = launch({{"fuzz", "--kernel", bad, "--property", "decode", "--cases", "300", "--seed", "3",
                             "--regions", "--shrink-tries", "20", "--quiet", "--json", "--save", (dir_ / "ce").string()}});
  ASSERT_EQ(b.code, 1) << b.err;
  const json bj = parsed(b.out);
  ASSERT_TRUE(bj.is_object()) << b.out.substr(0, 500);
  const json& failure = bj["runs"][0]["failure"];
  EXPECT_NE(failure["reproduce"].get<std::string>().find(" --regions"), std::string::npos) << failure.dump();
  EXPECT_TRUE(failure["region"].is_string()) << failure.dump();
  const std::string seed = std::to_string(failure["seed"].get<uint64_t>());
  const Outcome again = launch({{"fuzz", "--kernel", bad, "--property", "decode", "--cases", "1", "--seed", seed,
                                 "--regions", "--shrink-tries", "0", "--quiet", "--json", "--save", (dir_ / "ce").string()}});
  ASSERT_EQ(again.code, 1) << again.err;
  const json aj = parsed(again.out);
  ASSERT_TRUE(aj.is_object()) << again.out.substr(0, 500);
  EXPECT_EQ(aj["runs"][0]["failure"]["first_message"], failure["first_message"]);
  EXPECT_EQ(aj["runs"][0]["failure"]["region"], failure["region"]);
}

// --shapes: every decode call in one of N shapes drawn from the shape seed
// (the base seed unless --shape-seed), counted in the report; the limits on
// both sides; a resumed run draws its shapes as the report did; a failure
// found in them is drawn again by its reproduce command.
TEST_F(PavCli, ShapesHoldEveryCallAndAFailureFoundInThemIsDrawnAgain) {
  const std::string good = "pav:cpu --path uniform";
  const std::string ce = (dir_ / "ce").string();
  struct Bound {
    std::vector<std::string> args;
    int code;
    std::string fragment;  // in stderr for 2
  };
  const std::vector<Bound> bounds = {
      {{"fuzz", "--kernel", good, "--property", "decode", "--cases", "2", "--shapes", "65"}, 2, "--shapes"},
      {{"fuzz", "--kernel", good, "--property", "decode", "--cases", "2", "--shapes", "-1"}, 2, "--shapes"},
      {{"fuzz", "--kernel", good, "--property", "decode", "--cases", "2", "--shapes", "64"}, 0, ""},
      {{"fuzz", "--kernel", good, "--property", "decode", "--cases", "2", "--shapes", "1"}, 0, ""},
      {{"fuzz", "--property", "decode", "--cases", "2", "--shapes", "3"}, 2, "a kernel under test"},
      {{"fuzz", "--kernel", good, "--property", "decode", "--cases", "2", "--shape-seed", "5"}, 2,
       "--shape-seed: only with --shapes"},
      {{"verify", "--kernel", good, "--checks", "decode", "--decode-cases", "2", "--shapes", "65"}, 2, "--shapes"},
      {{"verify", "--kernel", good, "--checks", "decode", "--decode-cases", "2", "--shapes", "64"}, 0, ""},
      {{"verify", "--checks", "decode", "--decode-cases", "2", "--shapes", "2"}, 2, "a kernel under test"},
  };
  for (const Bound& b : bounds) {
    std::vector<std::string> args = b.args;
    args.insert(args.end(), {"--quiet", "--save", ce});
    const Outcome o = launch({args});
    std::string line;
    for (const std::string& a : b.args) line += a + " ";
    EXPECT_EQ(o.code, b.code) << line << "\n" << o.err;
    if (b.code == 2) {
      EXPECT_NE(o.err.find(b.fragment), std::string::npos) << o.err;
    }
  }

  for (const int shapes : {0, 3}) {
    std::vector<std::string> args{"fuzz", "--kernel", good, "--property", "decode", "--cases", "30", "--seed", "9",
                                  "--quiet", "--json", "--save", ce};
    if (shapes) args.insert(args.end(), {"--shapes", std::to_string(shapes)});
    const Outcome f = launch({args});
    ASSERT_EQ(f.code, 0) << f.err;
    const json fj = parsed(f.out);
    ASSERT_TRUE(fj.is_object()) << f.out.substr(0, 500);
    EXPECT_EQ(fj["shapes"], shapes);
    EXPECT_EQ(fj["shape_seed"], shapes ? json(9) : json(nullptr));
    const int64_t seen = fj["runs"][0]["shapes"].get<int64_t>();
    if (shapes) EXPECT_TRUE(seen >= 1 && seen <= shapes) << seen;
    else EXPECT_GE(seen, 20) << "30 calls drawn freely, " << seen << " shapes";
  }
  const Outcome v = launch({{"verify", "--kernel", good, "--checks", "decode", "--decode-cases", "40", "--shapes", "2",
                             "--quiet", "--json", "--save", ce}});
  ASSERT_EQ(v.code, 0) << v.err;
  const json vj = parsed(v.out);
  ASSERT_TRUE(vj.is_object()) << v.out.substr(0, 500);
  EXPECT_EQ(vj["shapes"], 2);
  EXPECT_LE(vj["checks"][0]["detail"]["shapes"].get<int64_t>(), 2);
  EXPECT_NE(v.err.find("decode draws its calls in 2 shape(s), drawn from seed 20261129 (--shapes 2)"),
            std::string::npos)
      << v.err;
  // pav's own kernels do not compile per shape: the default draws each call's own.
  const Outcome d = launch({{"verify", "--kernel", good, "--checks", "decode", "--decode-cases", "10", "--quiet",
                             "--json", "--save", ce}});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(parsed(d.out)["shapes"], 0);

  // A report resumes only a run drawn in the same shapes.
  const std::string report = (dir_ / "shaped.json").string();
  ASSERT_EQ(launch({{"fuzz", "--kernel", good, "--property", "decode", "--cases", "4", "--seed", "9", "--shapes", "3",
                     "--quiet", "--report", report, "--save", ce}})
                .code,
            0);
  for (const auto& [more, code] : std::vector<std::pair<std::vector<std::string>, int>>{
           {{}, 2}, {{"--shapes", "4"}, 2}, {{"--shapes", "3", "--shape-seed", "10"}, 2}, {{"--shapes", "3"}, 0},
           {{"--shapes", "3", "--shape-seed", "9"}, 0}}) {
    std::vector<std::string> args{"fuzz", "--kernel", good, "--resume", report, "--cases", "4", "--quiet", "--save", ce};
    args.insert(args.end(), more.begin(), more.end());
    const Outcome r = launch({args});
    EXPECT_EQ(r.code, code) << (more.empty() ? "no --shapes" : more[1]) << "\n" << r.err;
    if (code == 2) {
      EXPECT_NE(r.err.find("a run in 3 shapes from shape seed 9"), std::string::npos) << r.err;
    }
  }

  const std::string bad = split_decode_with("merge-ignores-max");
  const Outcome b = launch({{"fuzz", "--kernel", bad, "--property", "decode", "--cases", "300", "--seed", "3",
                             "--shapes", "3", "--shape-seed", "77", "--regions", "--shrink-tries", "20", "--quiet",
                             "--json", "--save", ce}});
  ASSERT_EQ(b.code, 1) << b.err;
  const json bj = parsed(b.out);
  ASSERT_TRUE(bj.is_object()) << b.out.substr(0, 500);
  const json& failure = bj["runs"][0]["failure"];
  EXPECT_NE(failure["reproduce"].get<std::string>().find(" --regions --shapes 3 --shape-seed 77"), std::string::npos)
      << failure.dump();
  const std::string seed = std::to_string(failure["seed"].get<uint64_t>());
  const Outcome again = launch({{"fuzz", "--kernel", bad, "--property", "decode", "--cases", "1", "--seed", seed,
                                 "--regions", "--shapes", "3", "--shape-seed", "77", "--shrink-tries", "0", "--quiet",
                                 "--json", "--save", ce}});
  ASSERT_EQ(again.code, 1) << again.err;
  const json aj = parsed(again.out);
  ASSERT_TRUE(aj.is_object()) << again.out.substr(0, 500);
  EXPECT_EQ(aj["runs"][0]["failure"]["first_message"], failure["first_message"]);
}

TEST_F(PavCli, VerifyStaleCheckIsAPlanKernelsOwn) {
  struct Case {
    std::vector<std::string> args;
    int code;
    std::vector<std::string> names;
    std::string skipped;
  };
  const std::vector<Case> cases{
      {{"verify", "--kernel", "pav:cpu --path planned --cu 32", "--checks", "stale", "--stale-cases", "6"}, 0, {"stale"}, ""},
      {{"verify", "--kernel", "pav:cpu --path uniform", "--checks", "stale"}, 0, {"stale"},
       "the kernel splits by itself (split = self): it is handed no plan"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), {"--quiet", "--json", "--save", (dir_ / "ce").string()});
    const Outcome o = launch({args});
    ASSERT_EQ(o.code, c.code) << o.err << o.out.substr(0, 400);
    const json j = parsed(o.out);
    ASSERT_TRUE(j.is_object()) << o.out.substr(0, 500);
    std::vector<std::string> names;
    for (const json& k : j["checks"]) names.push_back(k["name"]);
    EXPECT_EQ(names, c.names);
    EXPECT_EQ(j["checks"][0]["skipped"], c.skipped);
    if (c.skipped.empty()) {
      EXPECT_EQ(j["checks"][0]["cases"], 6);
    }
  }
  // The default checks of a plan kernel (one case each; a self-splitting
  // kernel's defaults, without stale, are the older ones other tests run).
  const Outcome o = launch({{"verify", "--kernel", "pav:cpu --path planned --cu 32", "--decode-cases", "1",
                             "--reject-cases", "1", "--stale-cases", "1", "--quiet", "--json", "--save",
                             (dir_ / "ce").string()}});
  ASSERT_EQ(o.code, 0) << o.err;
  const json report = parsed(o.out);
  ASSERT_TRUE(report.is_object()) << o.out.substr(0, 500);
  std::vector<std::string> names;
  for (const json& k : report["checks"]) names.push_back(k["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"decode", "reject", "stale", "drift"}));
  // pav's own kernels take the reject and stale checks through the same
  // adapter: named without --kernel, both run (cases drawn, none skipped).
  const Outcome own = launch({{"verify", "--checks", "reject,stale", "--reject-cases", "20", "--stale-cases", "5",
                               "--quiet", "--json", "--save", (dir_ / "ce-own").string()}});
  ASSERT_EQ(own.code, 0) << own.err;
  const json own_report = parsed(own.out);
  ASSERT_TRUE(own_report.is_object()) << own.out.substr(0, 500);
  ASSERT_EQ(own_report["checks"].size(), 2u);
  EXPECT_EQ(own_report["checks"][0]["name"], "reject");
  EXPECT_EQ(own_report["checks"][0]["cases"], 20);
  EXPECT_EQ(own_report["checks"][1]["name"], "stale");
  EXPECT_EQ(own_report["checks"][1]["cases"], 5);
  for (const json& k : own_report["checks"]) EXPECT_EQ(k["skipped"], "") << k.dump();
}

// drift --list shows every arm of the sweep once per cell, the same arms in
// every cell: a planned arm with its plan's capacity and splits, a uniform arm
// with its split count and no plan.
TEST_F(PavCli, DriftListShowsEachArmOncePerCell) {
  const Outcome o = run("drift --list --cells 0,1");
  ASSERT_EQ(o.code, 0) << o.err;
  std::vector<std::vector<std::string>> cells;  // the arm names of each cell, in order
  std::istringstream in(o.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cell ", 0) == 0) {
      cells.emplace_back();
      continue;
    }
    if (line.rfind("  lens ", 0) == 0 || line.rfind("  ", 0) != 0) continue;
    ASSERT_FALSE(cells.empty()) << line;
    std::string name = line.substr(2, 20);
    name.erase(name.find_last_not_of(' ') + 1);
    const bool uniform = name.rfind("uniform", 0) == 0;
    EXPECT_EQ(line.find("uniform splits ") != std::string::npos, uniform) << line;
    EXPECT_EQ(line.find("capacity ") != std::string::npos, !uniform) << line;
    cells.back().push_back(name);
  }
  ASSERT_EQ(cells.size(), 2u) << o.out;
  EXPECT_EQ(cells[0], cells[1]);
  std::set<std::string> unique(cells[0].begin(), cells[0].end());
  EXPECT_EQ(unique.size(), cells[0].size()) << o.out;
  EXPECT_GE(std::count_if(cells[0].begin(), cells[0].end(),
                          [](const std::string& n) { return n.rfind("uniform", 0) == 0; }),
            1)
      << "the quick sweep has a uniform arm";
}

// pav gate says when the uniform kernel rejects the call too, on every uniform
// route (a gate reject, the feature off), and only then: a call that only the
// planned kernel rejects, or one the planned route takes, says nothing of it.
TEST_F(PavCli, GateSaysWhenTheUniformKernelRejectsToo) {
  write_inputs();
  json window = json::parse(slurp(dir_ / "case.json"));
  window["options"]["sliding_window"] = 128;  // neither kernel has a sliding window
  write("window.json", window.dump());
  const std::string both = "sliding_window: opt.sliding_window = 128: sliding window is not supported (must be 0)";
  struct Run {
    std::vector<std::string> args;
    std::string route, reason, uniform_rejects;
  };
  const std::vector<Run> runs = {
      {{"gate", (dir_ / "window.json").string()}, "uniform", "gate_reject", both},
      {{"gate", (dir_ / "window.json").string(), "--planned-decode", "0"}, "uniform", "feature_off", both},
      {{"gate", (dir_ / "reject.json").string()}, "uniform", "gate_reject", ""},  // head_dim 96: planned only
      {{"gate", (dir_ / "case.json").string()}, "planned[1 seqs]", "accepted", ""},
  };
  for (const Run& r : runs) {
    SCOPED_TRACE(r.args[1] + (r.args.size() > 2 ? " " + r.args[2] + " " + r.args[3] : ""));
    std::vector<std::string> args = r.args;
    args.push_back("--json");
    const Outcome js = launch({args});
    ASSERT_EQ(js.code, 0) << js.err;
    const json j = parsed(js.out);
    ASSERT_TRUE(j.is_object()) << js.out.substr(0, 500);
    EXPECT_EQ(j["route"], r.route);
    EXPECT_EQ(j["reason"], r.reason);
    EXPECT_EQ(j.value("uniform_also_rejects", std::string()), r.uniform_rejects);
    const Outcome text = launch({r.args});
    EXPECT_EQ(text.out.find("uniform kernel also rejects: " + r.uniform_rejects) != std::string::npos,
              !r.uniform_rejects.empty())
        << text.out;
  }
}

// trace-stats on a trace of one step still gives every line of its report,
// the headroom count included.
TEST_F(PavCli, TraceStatsOfOneStep) {
  write("one.jsonl", "{\"step\": 1, \"context_lens\": [70000, 300, 20]}\n");
  const Outcome o = launch({{"trace-stats", (dir_ / "one.jsonl").string()}});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(std::regex_search(o.out, std::regex(R"(\b[01] of 1 steps above 1 )"))) << o.out;
  const Outcome js = launch({{"trace-stats", (dir_ / "one.jsonl").string(), "--json"}});
  ASSERT_EQ(js.code, 0) << js.err;
  const json j = parsed(js.out);
  ASSERT_TRUE(j.is_object()) << js.out.substr(0, 500);
  EXPECT_EQ(j["steps"], 1);
  EXPECT_EQ(j["headroom"]["steps"], 1);
}

// Every option a report echoes carries the value given, not the default: each
// value below differs from its option's default.
TEST_F(PavCli, ReportsEchoTheOptionsGiven) {
  struct Echo {
    std::string args;
    std::vector<std::pair<std::string, json>> fields;
  };
  const std::vector<Echo> echoes = {
      {"bench-compare {fix}/stats/bench-a.json {fix}/stats/bench-b.json --max-count-diff 0.25 --seed 7 "
       "--resamples 300 --confidence 0.9",
       {{"/max_count_diff", 0.25}, {"/seed", 7}, {"/resamples", 300}, {"/confidence", 0.9}}},
      {"compare --kernel pav:cpu --kernel pav:cpu --cases 3 --seed 99 --alpha 0.01 --out-dir {dir} --quiet",
       {{"/seed", 99}, {"/cases", 3}, {"/alpha", 0.01}}},
      {"verify --kernel pav:cpu --kernel pav:cpu --decode-cases 3 --seed 99 --out-dir {dir} --quiet",
       {{"/seed", 99}, {"/cases", 3}}},
      {"verify --backend cpu --checks planner --plan-cases 5 --seed 1234 --quiet --save {dir}/saved",
       {{"/seed", 1234}, {"/save_dir", dir_.string() + "/saved"}}},
      {"mcnemar {fix}/stats/gsm8k-a.jsonl {fix}/stats/gsm8k-b.jsonl --confidence 0.8", {{"/confidence", 0.8}}},
      {"trace-stats {fix}/stats/trace-small.jsonl --budget 77 --max-partitions 33",
       {{"/budget", 77}, {"/max_partitions", 33}}},
      // Shrinking's limits: as given, and a scheduler's time budget caps the time.
      {"fuzz --property planner --cases 3 --seed 5 --shrink-minutes 2 --shrink-tries 77 --quiet --save {dir}/ce",
       {{"/base_seed", 5}, {"/budget/cases_per_property", 3}, {"/budget/shrink_seconds", 120.0},
        {"/budget/shrink_tries", 77}, {"/save_dir", dir_.string() + "/ce"}}},
      {"fuzz --property planner --cases 3 --seed 5 --time-budget 90s --shrink-minutes 2 --quiet --save {dir}/ce",
       {{"/budget/minutes", 1.5}, {"/budget/shrink_seconds", 90.0}}},
      {"fuzz --property planner --cases 3 --seed 5 --time-budget 1h --shrink-minutes 2 --quiet --save {dir}/ce",
       {{"/budget/minutes", 60.0}, {"/budget/shrink_seconds", 120.0}}},
  };
  for (const Echo& e : echoes) {
    SCOPED_TRACE("pav " + e.args);
    std::vector<std::string> args = expand_all(e.args);
    args.push_back("--json");
    const Outcome o = launch({args});
    ASSERT_EQ(o.code, 0) << o.err;
    const json j = parsed(o.out);
    ASSERT_TRUE(j.is_object()) << o.out.substr(0, 500);
    for (const auto& [field, value] : e.fields) EXPECT_EQ(j.value(json::json_pointer(field), json()), value) << field;
  }
}

TEST_F(PavCli, DriftStopsCleanlyOnSigint) {
  const fs::path report = dir_ / "drift.json";
  const Outcome o =
      launch(interrupted_after({"drift", "--backend", "cpu", "--json-out", report.string()}, "pav drift: sweep"));
  EXPECT_FALSE(o.timed_out) << "drift did not stop";
  EXPECT_EQ(o.signal, 0);
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_NE(o.err.find("stopped by SIGINT"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(report)) << "no report of a sweep that did not end";
  for (const auto& f : files_in(dir_)) EXPECT_EQ(f.find(".tmp-"), std::string::npos) << "left behind: " << f;
}

// A hostile value is not echoed whole into the error message.
TEST_F(PavCli, AHugeValueIsNotEchoedWhole) {
  const std::string huge(100000, 'a');
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"verify", "--backend", huge}, {"fuzz", "--cases", "1", "--property", huge},
        {"plan", "--lengths", huge, "--kv-heads", "1", "--cu", "8"}, {"mcnemar", "--counts", huge},
        {"fuzz", "--seed", huge}, {huge}}) {
    const Outcome o = launch({args});
    EXPECT_EQ(o.code, 2) << args[0];
    EXPECT_LT(o.err.size(), 3000u) << args[0] << ": " << o.err.size() << " bytes of error";
    EXPECT_FALSE(o.err.empty());
  }
  // The cut keeps the message's end, where it says why.
  const Outcome o = launch({{"verify", "--backend", huge}});
  EXPECT_NE(o.err.find("not in {cpu,gpu,auto}"), std::string::npos) << o.err.substr(o.err.size() - 300);
  EXPECT_NE(o.err.find("of 100033 characters cut"), std::string::npos) << o.err.substr(0, 300);
}

// A kernel's spec can run to kilobytes (a worker's command line with its
// description): the message names its start and keeps the reason whole.
TEST_F(PavCli, ALongKernelSpecLeavesTheReasonInTheMessage) {
  const std::string spec = "exec:/no/such/program --x " + std::string(5000, 'a');
  const Outcome o = launch({{"verify", "--kernel", spec, "--decode-cases", "1"}});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_NE(o.err.find("--kernel exec:/no/such/program --x aaa"), std::string::npos) << o.err.substr(0, 300);
  const size_t reason = o.err.find(": worker exited with status 127; worker stderr: | ");
  ASSERT_NE(reason, std::string::npos) << o.err;
  EXPECT_NE(o.err.find("/no/such/program", reason), std::string::npos) << "the shell's own words: " << o.err;
  EXPECT_LT(o.err.size(), 1500u) << o.err;
}

// pav plan prints the planner's answer: each value worked out by hand.
// lens 5, 0, 9000 (tiles 1, 0, 36), Hkv 2, cu 8: budget 16, per head 8;
// proportional capacity min(3*8, max(3, 8)) = 8, remaining 6, total 37: counts
// 1, 0, 1 + floor(37*6/37) - floor(1*6/37) = 7, request 2's tiles floor(p*36/7).
// Balanced: capacity min(24, 3 + 8) = 11, task limit 8; target 7 (at 6 the long
// request needs ceil(36/5) = 8 tasks, 9 in all), so ceil(36/6) = 6 tasks of 6 tiles.
// --max-partitions 4 --budget 10: per head 5, capacity 5, remaining 3: counts 1, 0,
// min(1 + 3, 4) = 4 of 9 tiles each.
// drift --list applies the cell selection: --cells keeps exactly the cells
// named, --max-context keeps cells at most that long (the limit itself
// included), and a single long request takes every partition its ceiling
// allows (the split counts of its one row are the ceiling).
TEST_F(PavCli, DriftSelectsExactlyTheCellsAsked) {
  const Outcome one = run("drift --list --cells 1");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("cell 1 70k/b4"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("cell 0 "), std::string::npos) << "--cells 1 listed cell 0:\n" << one.out;
  const Outcome by_name = run("drift --list --cells 70k/b1");
  ASSERT_EQ(by_name.code, 0) << by_name.err;
  EXPECT_NE(by_name.out.find("cell 0 70k/b1"), std::string::npos) << by_name.out;
  EXPECT_EQ(by_name.out.find("cell 1 "), std::string::npos) << by_name.out;
  // Every cell of the built-in sweep is 70000 tokens long.
  const Outcome at = run("drift --list --max-context 70000");
  ASSERT_EQ(at.code, 0) << at.err;
  EXPECT_NE(at.out.find("cell 0 "), std::string::npos);
  EXPECT_NE(at.out.find("cell 1 "), std::string::npos);
  for (const char* below : {"drift --list --max-context 69999", "drift --list --max-context 1"}) {
    const Outcome o = run(below);
    EXPECT_EQ(o.code, 2) << below << "\n" << o.out;
    EXPECT_NE(o.err.find("no cell of the sweep is left"), std::string::npos) << below << ": " << o.err;
  }
  for (const char* line : {"planned c8 bf16      capacity     8, splits min/median/max 8/8/8",
                           "planned c256 f32     capacity   256, splits min/median/max 256/256/256",
                           "control c64 bf16     capacity    64, splits min/median/max 64/64/64"})
    EXPECT_NE(by_name.out.find(line), std::string::npos) << line << "\n" << by_name.out;
}

TEST_F(PavCli, PlanPrintsTheHandComputedPlans) {
  const Outcome p = run("plan --lengths 5,0,9000 --kv-heads 2 --cu 8 --json");
  ASSERT_EQ(p.code, 0) << p.err;
  const json j = json::parse(p.out);
  EXPECT_EQ(j["capacity"], 8);
  EXPECT_EQ(j["max_partitions"], 8);
  EXPECT_EQ(j["reduce_info"], json::parse("[[0,1],[1,0],[1,7]]"));
  EXPECT_EQ(j["work_info"], json::parse("[[0,0,1,5],[2,0,5,9000],[2,5,10,9000],[2,10,15,9000],[2,15,20,9000],"
                                        "[2,20,25,9000],[2,25,30,9000],[2,30,36,9000]]"));
  const Outcome t = run("plan --lengths 5,0,9000 --kv-heads 2 --cu 8");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("3 seqs, Hkv 2, cu 8, max_partitions 8, budget 16, capacity 8, active tasks 8"),
            std::string::npos) << t.out;
  EXPECT_TRUE(std::regex_search(t.out, std::regex(R"(\n +2 +9000 +36 +1 +7 +5 5 5 5 5 5 6\n)"))) << t.out;
  EXPECT_TRUE(std::regex_search(t.out, std::regex(R"(\n +1 +0 +0 +1 +0 *\n)"))) << t.out;

  const Outcome b = run("plan --lengths 5,0,9000 --kv-heads 2 --cu 8 --policy balanced --json");
  ASSERT_EQ(b.code, 0) << b.err;
  const json k = json::parse(b.out);
  EXPECT_EQ(k["capacity"], 11);
  EXPECT_EQ(k["reduce_info"], json::parse("[[0,1],[1,0],[1,6]]"));
  EXPECT_EQ(k["work_info"], json::parse("[[0,0,1,5],[2,0,6,9000],[2,6,12,9000],[2,12,18,9000],[2,18,24,9000],"
                                        "[2,24,30,9000],[2,30,36,9000],[0,0,0,0],[0,0,0,0],[0,0,0,0],[0,0,0,0]]"));

  const Outcome c = run("plan --lengths 5,0,9000 --kv-heads 2 --cu 8 --max-partitions 4 --budget 10");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("max_partitions 4, budget 10, capacity 5, active tasks 5"), std::string::npos) << c.out;
  EXPECT_TRUE(std::regex_search(c.out, std::regex(R"(\n +2 +9000 +36 +1 +4 +9 9 9 9\n)"))) << c.out;
}

// ---- replaying what a kernel under test failed ------------------------------------

namespace {

// The case files saved under a folder, as paths.
std::vector<fs::path> case_files(const fs::path& d) {
  std::vector<fs::path> out;
  if (fs::exists(d))
    for (const auto& e : fs::directory_iterator(d))
      if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The two ways to replay a case: pav replay and pav fuzz --replay, with the
// array their --json report lists the cases in.
struct ReplayCommand {
  std::vector<std::string> words;
  const char* key;
};
const ReplayCommand kReplayCommands[] = {{{"replay"}, "cases"}, {{"fuzz", "--replay"}, "replays"}};

std::vector<std::string> replay_args(const ReplayCommand& c, const fs::path& file, std::vector<std::string> more) {
  std::vector<std::string> args = c.words;
  args.push_back(file.string());
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

// A decode case for pav's own kernels that names a compute type they do not
// have (i64) is refused by both replay commands, naming options.compute: the
// adapter computes in the arch's type, so a PASS would say nothing about it.
// The same case in bf16 replays and passes.
TEST_F(PavCli, AReplayRefusesAComputeTypePavsKernelsDoNotHave) {
  json c = json::parse(slurp(fs::path(PAV_SOURCE_DIR) / "fixtures/counterexamples/decode-causality-row-sees-next-token.json"));
  for (const auto& [compute, code] : std::vector<std::pair<std::string, int>>{{"i64", 2}, {"f32", 2}, {"bf16", 0}}) {
    c["options"]["compute"] = compute;
    const std::string file = "compute-" + compute + ".json";
    write(file, c.dump());
    for (const ReplayCommand& r : kReplayCommands) {
      const Outcome o = launch({replay_args(r, dir_ / file, {"--backend", "cpu"})});
      EXPECT_EQ(o.code, code) << r.words.front() << " compute " << compute << "\n" << o.out << o.err;
      if (code == 2) {
        EXPECT_NE(o.err.find("options.compute: " + compute + " is no compute type"), std::string::npos) << o.err;
      }
    }
  }
}

// A case replays through the property it names or not at all: a stale case
// on pav's uniform kernel (which splits by itself and is handed no plan), or a
// property no kernel has, is refused naming meta.property, on both replay
// commands; it replayed as decode and passed. Named decode, it replays.
TEST_F(PavCli, AReplayRunsThePropertyTheCaseNamesOrRefusesIt) {
  json c = json::parse(slurp(fs::path(PAV_SOURCE_DIR) / "fixtures/counterexamples/decode-causality-row-sees-next-token.json"));
  c["path"] = "uniform";
  for (const auto& [property, code] :
       std::vector<std::pair<std::string, int>>{{"stale", 2}, {"no-such-property", 2}, {"decode", 0}}) {
    c["meta"] = {{"property", property}, {"stale", {{"plan_lens", {1}}, {"torn_row", -1}}}};
    const std::string file = "named-" + property + ".json";
    write(file, c.dump());
    for (const ReplayCommand& r : kReplayCommands) {
      const Outcome o = launch({replay_args(r, dir_ / file, {"--backend", "cpu"})});
      EXPECT_EQ(o.code, code) << r.words.front() << " " << property << "\n" << o.out << o.err;
      if (code == 2) {
        EXPECT_NE(o.err.find("meta.property: the case is of property '" + property + "'"), std::string::npos) << o.err;
        EXPECT_EQ(o.out.find("PASS"), std::string::npos) << o.out;
      }
    }
  }
}

// A failing gate-mirror case replays to exit 1 on both replay commands, and
// the same case with the claim true to exit 0: a case that says a call of
// head dim 80 (a dim pav's kernels refuse) breaks no clause fails, since the
// gate rejects it (head_dim); at head dim 128 the gate accepts and the kernel
// runs it right.
TEST_F(PavCli, AFailingGateMirrorCaseReplaysToExitOne) {
  json c = json::parse(slurp(fs::path(PAV_SOURCE_DIR) / "fixtures/counterexamples/gate-mirror-scratch-single-row-padding.json"));
  c["meta"]["violate"] = "none";
  c["meta"]["variant"] = 0;
  for (const auto& [head_dim, code] : std::vector<std::pair<int, int>>{{80, 1}, {128, 0}}) {
    c["head_dim"] = head_dim;
    const std::string file = "gate-" + std::to_string(head_dim) + ".json";
    write(file, c.dump());
    for (const ReplayCommand& r : kReplayCommands) {
      const Outcome o = launch({replay_args(r, dir_ / file, {"--backend", "cpu", "--json"})});
      EXPECT_EQ(o.code, code) << r.words.front() << " head_dim " << head_dim << "\n" << o.out << o.err;
      const json j = parsed(o.out);
      ASSERT_TRUE(j.is_object()) << o.out.substr(0, 500) << o.err;
      EXPECT_EQ(j[r.key][0]["property"], "gate-mirror");
      EXPECT_EQ(j[r.key][0]["passed"], code == 0) << j.dump();
      if (code == 1) {
        EXPECT_NE(j[r.key][0]["verdict"].get<std::string>().find("the gate rejects a valid call (head_dim)"),
                  std::string::npos)
            << j.dump();
      }
    }
  }
}

// A failing stale-plan case replays to exit 1 on both replay commands: a
// planned kernel that answers a stale plan's call PAV_OK (its stale rows
// attended over nothing) is found by pav verify's stale check and saved, and
// each replay fails the case again; through the kernel as it is (it answers
// PAV_STALE_PLAN) the same case replays to exit 0.
TEST_F(PavCli, AFailingStaleCaseReplaysToExitOne) {
  auto kernel = [](const std::string& mode) {
    return std::string("lib:") + PAV_FAULT_MODES + " --fault " + mode + " --path planned";
  };
  const Outcome v = launch({{"verify", "--kernel", kernel("decode-stale-silent"), "--checks", "stale",
                             "--stale-cases", "30", "--seed", "1", "--json", "--save", (dir_ / "ce").string()}});
  ASSERT_EQ(v.code, 1) << v.out.substr(0, 2000) << v.err;
  const json j = parsed(v.out);
  ASSERT_TRUE(j.is_object()) << v.out.substr(0, 500);
  const std::string saved = j["checks"][0]["detail"]["failure"].value("saved", "");
  ASSERT_FALSE(saved.empty()) << j["checks"][0].dump();
  for (const auto& [mode, code] : std::vector<std::pair<std::string, int>>{{"decode-stale-silent", 1}, {"none", 0}})
    for (const ReplayCommand& r : kReplayCommands) {
      const Outcome o = launch({replay_args(r, saved, {"--kernel", kernel(mode), "--json"})});
      EXPECT_EQ(o.code, code) << r.words.front() << " " << mode << "\n" << o.out.substr(0, 2000) << o.err;
      const json rj = parsed(o.out);
      ASSERT_TRUE(rj.is_object()) << o.out.substr(0, 500) << o.err;
      EXPECT_EQ(rj[r.key][0]["property"], "stale") << rj.dump();
      EXPECT_EQ(rj[r.key][0]["passed"], code == 0) << rj.dump();
    }
}

// NaN that does not come from masked slots is not named as if it did: the C
// example's empty-row-nan divides 0 by 0 in a row that sees no token, NaN
// with the slots past every context zero too (the NumPy worker's
// masked-lanes-read-block-0 is named: ExampleNumpy.NamesNaNFromMaskedSlots).
TEST_F(PavCli, ANaNOfAnotherOriginIsNotNamed) {
  const std::string bad = split_decode_with("empty-row-nan");
  const Outcome f = launch({{"fuzz", "--kernel", bad, "--property", "decode", "--cases", "300", "--seed", "1",
                             "--shrink-tries", "50", "--quiet", "--json", "--save", (dir_ / "ce").string()}});
  ASSERT_EQ(f.code, 1) << f.err;
  const json j = parsed(f.out);
  ASSERT_TRUE(j.is_object()) << f.out.substr(0, 500);
  const json& failure = j["runs"][0]["failure"];
  const std::string first = failure["first_message"].get<std::string>();
  EXPECT_EQ(first.find("masked slots"), std::string::npos) << first;
  EXPECT_EQ(failure["message"].get<std::string>().find("masked slots"), std::string::npos) << failure.dump();
  const Outcome r = launch({{"replay", failure["saved"].get<std::string>(), "--kernel", bad, "--json"}});
  ASSERT_EQ(r.code, 1) << r.err;
  const json rj = parsed(r.out);
  ASSERT_TRUE(rj.is_object()) << r.out.substr(0, 500);
  EXPECT_GT(rj["cases"][0]["nonfinite"].get<int64_t>(), 0) << rj.dump();
  EXPECT_FALSE(rj["cases"][0].contains("known_shape")) << rj.dump();
}

// A case found through a foreign kernel (lib:, in process and under --isolate)
// records it, how it was opened and where from; replayed, it runs through that
// kernel with that isolation on both replay commands (exit 1, the defect), or
// is refused by name (exit 2) when nothing says the file may load it; never
// exit 0 from pav's own kernel standing in for the one that failed.
TEST_F(PavCli, AReplayRunsTheKernelTheCaseWasFoundWith) {
  const std::string bad = split_decode_with("merge-ignores-max");
  for (const bool isolate : {false, true}) {
    SCOPED_TRACE(isolate ? "--isolate" : "in process");
    const fs::path save = dir_ / (isolate ? "isolated" : "in-process");
    std::vector<std::string> fuzz = {"fuzz",      "--kernel", bad,          "--property", "decode", "--cases",
                                     "200",       "--seed",   "1",          "--save",     save.string(),
                                     "--quiet",   "--shrink-tries", "100",  "--timeout",  "30"};
    if (isolate) fuzz.push_back("--isolate");
    const Outcome f = launch({fuzz});
    ASSERT_EQ(f.code, 1) << f.out << f.err;
    const auto files = case_files(save);
    ASSERT_EQ(files.size(), 1u);
    const json meta = json::parse(slurp(files[0]))["meta"];
    EXPECT_EQ(meta["kernel"]["spec"], bad);
    EXPECT_EQ(meta["kernel"]["adapter"], isolate ? "lib (isolated)" : "lib");
    EXPECT_EQ(meta["kernel"]["isolate"], isolate);
    EXPECT_EQ(meta["kernel"]["timeout_seconds"], 30);
    EXPECT_EQ(meta["kernel"]["cwd"], dir_.string());
    for (const ReplayCommand& c : kReplayCommands) {
      SCOPED_TRACE(c.words.front());
      const Outcome refused = launch({replay_args(c, files[0], {"--backend", "cpu"})});
      EXPECT_EQ(refused.code, 2) << refused.out << refused.err;
      EXPECT_NE(refused.err.find("'" + bad + "' (meta.kernel.spec)"), std::string::npos) << refused.err;
      EXPECT_NE(refused.err.find("--kernel SPEC"), std::string::npos) << refused.err;
      EXPECT_NE(refused.err.find("--trust-case-kernel"), std::string::npos) << refused.err;
      EXPECT_EQ(refused.out.find("PASS"), std::string::npos) << refused.out;

      const Outcome trusted = launch({replay_args(c, files[0], {"--trust-case-kernel", "--json"})});
      EXPECT_EQ(trusted.code, 1) << trusted.out << trusted.err;
      const json j = parsed(trusted.out);
      ASSERT_TRUE(j.is_object()) << trusted.out.substr(0, 500) << trusted.err;
      const json& r = j[c.key][0];
      EXPECT_EQ(r["kernel"]["spec"], bad);
      EXPECT_EQ(r["kernel"]["adapter"], isolate ? "lib (isolated)" : "lib");
      EXPECT_EQ(r["kernel_recorded_in_case"], true);
      EXPECT_EQ(r["passed"], false);

      // --kernel wins over the recorded one: the kernel without the defect passes.
      const Outcome fixed =
          launch({replay_args(c, files[0], {"--kernel", std::string("lib:") + PAV_SPLIT_DECODE, "--json"})});
      EXPECT_EQ(fixed.code, 0) << fixed.out << fixed.err;
      const json k = parsed(fixed.out);
      ASSERT_TRUE(k.is_object()) << fixed.out.substr(0, 500);
      EXPECT_EQ(k[c.key][0]["kernel_recorded_in_case"], false);
      EXPECT_EQ(k[c.key][0]["kernel"]["spec"], std::string("lib:") + PAV_SPLIT_DECODE);
    }
  }
}

// A case file from someone else's CI never runs a command or loads a library by
// itself: a recorded exec: kernel whose command would leave a marker file, and
// a lib: one, are refused (exit 2) by both replay commands, naming the spec and
// both ways to run it, and the marker is not there. --trust-case-kernel runs the
// command (the marker appears); --kernel runs the kernel named instead.
TEST_F(PavCli, ACaseFileNeverRunsItsKernelOnItsOwn) {
  write_inputs();
  const json base = json::parse(slurp(dir_ / "case.json"));
  const fs::path marker = dir_ / "marker";
  json exec_case = base;
  exec_case["meta"] = {{"property", "decode"},
                       {"kernel", {{"adapter", "exec"}, {"spec", "exec:touch " + marker.string()}}}};
  write("exec-case.json", exec_case.dump());
  json lib_case = base;
  lib_case["meta"] = {{"property", "decode"},
                      {"kernel", {{"adapter", "lib"}, {"spec", std::string("lib:") + PAV_SPLIT_DECODE}}}};
  write("lib-case.json", lib_case.dump());
  for (const ReplayCommand& c : kReplayCommands)
    for (const char* name : {"exec-case.json", "lib-case.json"}) {
      SCOPED_TRACE(c.words.front() + std::string(" ") + name);
      const json& doc = std::string(name) == "exec-case.json" ? exec_case : lib_case;
      const Outcome o = launch({replay_args(c, dir_ / name, {"--backend", "cpu"})});
      EXPECT_EQ(o.code, 2) << o.out << o.err;
      EXPECT_NE(o.err.find(doc["meta"]["kernel"]["spec"].get<std::string>()), std::string::npos) << o.err;
      EXPECT_NE(o.err.find("--kernel SPEC"), std::string::npos) << o.err;
      EXPECT_NE(o.err.find("--trust-case-kernel"), std::string::npos) << o.err;
      EXPECT_FALSE(fs::exists(marker)) << "a case file ran its command";
      // --kernel names the kernel: the recorded one is not touched.
      const Outcome named = launch({replay_args(c, dir_ / name, {"--kernel", "pav:cpu", "--json"})});
      EXPECT_EQ(named.code, 0) << named.out << named.err;
      EXPECT_FALSE(fs::exists(marker)) << "--kernel given, yet the case's command ran";
    }
  // Trusted, the command runs (touch is no worker: the replay cannot go on).
  const Outcome t = launch({{"replay", (dir_ / "exec-case.json").string(), "--trust-case-kernel", "--timeout", "5"}});
  EXPECT_GE(t.code, 2) << t.out << t.err;
  EXPECT_EQ(t.signal, 0);
  EXPECT_TRUE(fs::exists(marker)) << "--trust-case-kernel did not run the recorded kernel\n" << t.err;
}

// A relative path in a recorded spec is relative to the folder the case was
// found in (meta.kernel.cwd): a replay from elsewhere loads the same library
// and runs the same command there; a recorded folder missing here is refused
// by name.
TEST_F(PavCli, ARelativeKernelPathReplaysFromTheFolderItWasFoundIn) {
  const fs::path found = dir_ / "found", elsewhere = dir_ / "elsewhere";
  fs::create_directories(found / "k");
  fs::create_directories(elsewhere);
  fs::copy_file(PAV_SPLIT_DECODE, found / "k" / "libsd.so");
  Launch f{{"fuzz", "--kernel", "lib:k/libsd.so --defect merge-ignores-max", "--property", "decode", "--cases",
            "200", "--seed", "1", "--save", (dir_ / "ce").string(), "--quiet", "--shrink-tries", "50"}};
  f.cwd = found.string();
  const Outcome o = launch(f);
  ASSERT_EQ(o.code, 1) << o.out << o.err;
  const auto files = case_files(dir_ / "ce");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(json::parse(slurp(files[0]))["meta"]["kernel"]["cwd"], found.string());
  Launch r{{"replay", files[0].string(), "--trust-case-kernel", "--json"}};
  r.cwd = elsewhere.string();
  const Outcome rr = launch(r);
  EXPECT_EQ(rr.code, 1) << "the library was not loaded from " << found << "\n" << rr.out << rr.err;

  // exec: a relative command runs in the recorded folder.
  const fs::path rec = dir_ / "rec";
  write("rec/w.sh", "pwd > ran-in\n");
  json c = json::parse(slurp(fs::path(PAV_SOURCE_DIR) / "fixtures/counterexamples/decode-causality-row-sees-next-token.json"));
  c["meta"] = {{"property", "decode"}, {"kernel", {{"adapter", "exec"}, {"spec", "exec:sh w.sh"}, {"cwd", rec.string()}}}};
  write("rel-exec.json", c.dump());
  Launch e{{"replay", (dir_ / "rel-exec.json").string(), "--trust-case-kernel", "--timeout", "5"}};
  e.cwd = elsewhere.string();
  const Outcome eo = launch(e);
  EXPECT_EQ(eo.signal, 0);
  EXPECT_NE(eo.code, 0);
  EXPECT_EQ(slurp(rec / "ran-in"), rec.string() + "\n") << eo.err;
  EXPECT_FALSE(fs::exists(elsewhere / "ran-in"));

  c["meta"]["kernel"]["cwd"] = (dir_ / "gone").string();
  write("gone-exec.json", c.dump());
  Launch g{{"replay", (dir_ / "gone-exec.json").string(), "--trust-case-kernel"}};
  const Outcome go = launch(g);
  EXPECT_EQ(go.code, 2) << go.err;
  EXPECT_NE(go.err.find("meta.kernel.cwd"), std::string::npos) << go.err;
}

// Built with AddressSanitizer: GCC says so with __SANITIZE_ADDRESS__, Clang
// through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define PAV_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PAV_TEST_UNDER_ASAN 1
#endif
#endif
#ifndef PAV_TEST_UNDER_ASAN
#define PAV_TEST_UNDER_ASAN 0
#endif

// --jobs the system cannot give (threads refused under an address-space limit,
// ulimit -v) is "could not run": exit 3 naming --jobs, never an abort.
TEST_F(PavCli, JobsTheSystemCannotGiveAreCouldNotRun) {
#if PAV_TEST_UNDER_ASAN
  // AddressSanitizer reserves terabytes of shadow address space at start-up, so
  // no sanitized process starts under a 2 GiB address-space limit at all; the
  // plain build runs this test.
  GTEST_SKIP() << "not under AddressSanitizer: its shadow memory cannot fit an address-space limit";
#endif
  Launch l{expand_all("fuzz --property planner --cases 1000000 --jobs 1024 --seed 1 --quiet --save {dir}/ce")};
  l.address_space_limit = rlim_t(2) << 30;
  l.timeout_s = 120;
  const Outcome o = launch(l);
  EXPECT_FALSE(o.timed_out);
  EXPECT_EQ(o.signal, 0) << "pav died of signal " << o.signal << "\n" << o.err;
  EXPECT_EQ(o.code, 3) << o.out << o.err;
  EXPECT_NE(o.err.find("--jobs 1024"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("internal error"), std::string::npos) << o.err;
  EXPECT_TRUE(files_in(dir_ / "ce").empty());
}

// Memory the system cannot give (an address-space limit of 500 MiB under a
// case that needs about 770 MB of host buffers, within pav's own limit) is
// "could not run": exit 3 saying out of memory, never a failure verdict or an
// abort.
TEST_F(PavCli, MemoryTheSystemCannotGiveIsCouldNotRun) {
#if PAV_TEST_UNDER_ASAN
  GTEST_SKIP() << "not under AddressSanitizer: its shadow memory cannot fit an address-space limit";
#endif
  const fs::path big = dir_ / "big.json";
  std::ofstream(big) << R"({"format": "pav-case/1", "lens": [3000000], "head_dim": 128, "path": "uniform"})";
  Launch l{{"replay", big.string()}};
  l.address_space_limit = rlim_t(500) << 20;
  l.timeout_s = 120;
  const Outcome o = launch(l);
  EXPECT_EQ(o.signal, 0) << o.err;
  EXPECT_EQ(o.code, 3) << o.out << o.err;
  EXPECT_NE(o.err.find("pav replay: could not run: out of memory"), std::string::npos) << o.err;
}

// A defect found wins over its case file that could not be saved (a full
// folder): exit 1, and the report says the case was NOT saved and why. A save
// folder that takes no files, named by --save or PAV_COUNTEREXAMPLE_DIR, is
// "could not run" (exit 3) before a case runs.
TEST_F(PavCli, ADefectWinsOverACaseThatCouldNotBeSaved) {
  pav::testing::UnwritableDir ro(dir_ / "ro");
  const Outcome env = launch({expand_all("fuzz --property planner --cases 10 --quiet"),
                              {"PAV_COUNTEREXAMPLE_DIR=" + ro.path().string()}});
  EXPECT_EQ(env.code, 3) << env.err;
  EXPECT_NE(env.err.find("cannot create files in " + ro.path().string()), std::string::npos) << env.err;

  pav::testing::FullTmpfs full(dir_ / "full");
  if (!full.mounted()) GTEST_SKIP() << "no tmpfs can be mounted here: the full-folder half needs one";
  const std::string bad = split_decode_with("merge-ignores-max");
  const Outcome f = launch({{"fuzz", "--kernel", bad, "--property", "decode", "--cases", "200", "--seed", "1",
                             "--save", full.dir().string(), "--shrink-tries", "50", "--quiet", "--json"}});
  EXPECT_EQ(f.code, 1) << f.err;
  EXPECT_NE(f.err.find("counterexample NOT SAVED: "), std::string::npos) << f.err;
  const json j = parsed(f.out);
  ASSERT_TRUE(j.is_object()) << f.out.substr(0, 500);
  EXPECT_TRUE(j["runs"][0]["failure"]["saved"].is_null());
  EXPECT_NE(j["runs"][0]["failure"]["save_error"].get<std::string>().find("No space left"), std::string::npos);
  EXPECT_NE(j["runs"][0]["failure"]["reproduce"].get<std::string>().find("--kernel"), std::string::npos)
      << "the reproduce command must name the kernel that failed";
  const Outcome v = launch({{"verify", "--kernel", bad, "--checks", "decode", "--save", full.dir().string(),
                             "--quiet", "--json"}});
  EXPECT_EQ(v.code, 1) << v.err;
  const json k = parsed(v.out);
  ASSERT_TRUE(k.is_object()) << v.out.substr(0, 500);
  EXPECT_NE(k["checks"][0]["first_failure"].get<std::string>().find("NOT SAVED"), std::string::npos);
  EXPECT_EQ(k["verdict"], "FAIL");
}
