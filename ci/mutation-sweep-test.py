#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Tests of ci/mutation-sweep's mutant generator (the part a wrong heuristic
would silently bias): what it mutates, what it must leave alone, stable ids."""
import importlib.machinery
import importlib.util
import sys
import unittest
from pathlib import Path

_path = Path(__file__).resolve().parent / "mutation-sweep"
_loader = importlib.machinery.SourceFileLoader("mutation_sweep", str(_path))
_spec = importlib.util.spec_from_loader("mutation_sweep", _loader)
sweep = importlib.util.module_from_spec(_spec)
sys.modules["mutation_sweep"] = sweep
_loader.exec_module(sweep)


def mutants(src, op=None):
    return [m for m in sweep.generate("x.cpp", src) if op is None or m.op == op]


def applied(src, op=None):
    return [sweep.apply(src, m) for m in mutants(src, op)]


class Generator(unittest.TestCase):
    def test_relational_boundaries_both_ways(self):
        src = "bool f(int a, int b) { return a < b || a >= b; }\n"
        got = applied(src, "relational")
        self.assertIn("bool f(int a, int b) { return a <= b || a >= b; }\n", got)
        self.assertIn("bool f(int a, int b) { return a < b || a > b; }\n", got)
        self.assertEqual(len(got), 2)

    def test_template_brackets_are_not_relational(self):
        src = ("std::vector<int32_t> v; auto p = x.as<const int32_t>(); "
               "std::map<std::string, std::vector<int>> m; int k = std::min<int64_t>(a, b);\n")
        self.assertEqual(applied(src, "relational"), [])

    def test_comments_strings_and_preprocessor_are_left_alone(self):
        src = ('#include <vector>\n#define N 3\n// a < b + 1\n/* x == y */\n'
               'const char* s = "a < b + 1 == 2"; char c = \'-\';\n')
        self.assertEqual(mutants(src), [])

    def test_logging_and_assert_lines_are_left_alone(self):
        src = ('void f(int a) {\n  std::cerr << a + 1 << "\\n";\n  assert(a < 3);\n'
               '  fmt::print(stderr, "{}", a - 1);\n}\n')
        self.assertEqual(mutants(src), [])

    def test_error_message_wording_is_left_alone_but_its_condition_is_not(self):
        src = 'void f(int v) {\n  if (v < 1) throw std::invalid_argument("v = " + std::to_string(v + 1));\n}\n'
        lines = {m.op for m in mutants(src)}
        self.assertIn("relational", lines)
        self.assertIn("negate", lines)
        self.assertNotIn("arithmetic", lines)
        for m in mutants(src):
            self.assertLess(m.start, src.index("throw") + len("throw"), m)

    def test_unary_minus_is_not_arithmetic(self):
        src = "int f(int a) { return -a + f(-1); }\n"
        got = applied(src, "arithmetic")
        self.assertEqual(got, ["int f(int a) { return -a - f(-1); }\n"])

    def test_constants_off_by_one_but_not_enumerators_or_case_labels(self):
        src = "enum class E { a = 1, b = 2 };\nint f(int x) { switch (x) { case 3: return 0; } return x + 0x10; }\n"
        got = applied(src, "constant")
        self.assertIn("enum class E { a = 1, b = 2 };\nint f(int x) { switch (x) { case 3: return 1; } return x + 0x10; }\n", got)
        self.assertIn("enum class E { a = 1, b = 2 };\nint f(int x) { switch (x) { case 3: return 0; } return x + 0x11; }\n", got)
        self.assertIn("enum class E { a = 1, b = 2 };\nint f(int x) { switch (x) { case 3: return 0; } return x + 0xf; }\n", got)
        self.assertEqual(len(got), 3)   # 0 -> 1 only, 0x10 -> 0x11 and 0xf

    def test_negated_conditions(self):
        src = "void f(int a) { if (a == 1) g(); while (a) --a; if constexpr (true) g(); }\n"
        got = applied(src, "negate")
        self.assertIn("void f(int a) { if (!(a == 1)) g(); while (a) --a; if constexpr (true) g(); }\n", got)
        self.assertIn("void f(int a) { if (a == 1) g(); while (!(a)) --a; if constexpr (true) g(); }\n", got)
        self.assertEqual(len(got), 2)

    def test_deleted_statements_are_expression_statements_only(self):
        src = ("void f(std::vector<int>& v, int n) {\n  int k = 0;\n  std::vector<int> w(n);\n"
               "  Plan p = make();\n  for (int i = 0; i < n; ++i) k += i;\n  v.push_back(k);\n"
               "  if (n) return;\n  continue_here();\n}\n")
        deleted = {src[m.start:m.end] for m in mutants(src, "delete")}
        self.assertEqual(deleted, {"k += i;", "v.push_back(k);", "return;", "continue_here();"})

    def test_swapped_arguments_skip_commutative_calls(self):
        src = "int f(int a, int b) { return g(a, b) + std::min(a, b) + h(a, a); }\n"
        got = applied(src, "swap-args")
        self.assertEqual(got, ["int f(int a, int b) { return g(b, a) + std::min(a, b) + h(a, a); }\n"])

    def test_logical_operators(self):
        src = "bool f(bool a, bool b) { return a && b; }\n"
        self.assertEqual(applied(src, "logical"), ["bool f(bool a, bool b) { return a || b; }\n"])

    def test_ids_are_stable_when_lines_move_and_distinct_otherwise(self):
        src = "int f(int a) { return a + 1; }\n"
        moved = "// a new first line\n\n" + src
        ids = sorted(m.id for m in sweep.generate("x.cpp", src))
        self.assertEqual(ids, sorted(m.id for m in sweep.generate("x.cpp", moved)))
        self.assertEqual(len(ids), len(set(ids)))
        twice = src + src.replace("f(", "g(")
        all_ids = [m.id for m in sweep.generate("x.cpp", twice)]
        self.assertEqual(len(all_ids), len(set(all_ids)))

    def test_glob_stays_in_its_folder(self):
        self.assertTrue(sweep.glob_match("kernels/planner.cpp", "kernels/*.cpp"))
        self.assertFalse(sweep.glob_match("kernels/hip/host.cpp", "kernels/*.cpp"))
        self.assertTrue(sweep.glob_match("kernels/hip/host.cpp", "kernels/**.cpp"))


class BuildAndCoverage(unittest.TestCase):
    def test_compile_commands_keyed_by_object_with_or_without_output(self):
        # A test binary that runs another executable names it in a compile
        # definition; the definition is found through its object's command.
        db = [{"directory": "/b", "file": "/s/t.cpp",
               "command": "/usr/bin/c++ -DBIN=\\\"/b/k/tool\\\" -O2 -o k/CMakeFiles/t.dir/t.cpp.o -c /s/t.cpp"},
              {"directory": "/b", "file": "/s/u.cpp", "output": "k/u.o",
               "command": "/usr/bin/c++ -DX=1 -c /s/u.cpp -ok/ignored.o"},
              {"directory": "/b", "file": "/s/v.cpp",
               "arguments": ["/usr/bin/c++", "-DY=2", "-o", "k/v.o", "-c", "/s/v.cpp"]}]
        by_obj = sweep.compile_commands_by_object(db)
        self.assertEqual(sorted(by_obj), ["k/CMakeFiles/t.dir/t.cpp.o", "k/u.o", "k/v.o"])
        self.assertTrue(sweep.named("/b/k/tool", by_obj["k/CMakeFiles/t.dir/t.cpp.o"]))
        self.assertIn("-DX=1", by_obj["k/u.o"])
        self.assertIn("-DY=2", by_obj["k/v.o"])

    def test_parse_ninja_link_edges(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            text = (
                "cmake_ninja_workdir = " + d + "/\n"
                "build k/libk.a: CXX_STATIC_LIBRARY_LINKER__k_Rel k/a.o k/b.o || dep\n"
                "build k/k_test k/k_test[1]_tests.cmake | ${cmake_ninja_workdir}k/k_test[1]_tests.cmake: "
                "CXX_EXECUTABLE_LINKER__k_test_Rel k/t.o $\n    k/u.o | k/libk.a /usr/lib/libgtest.a || k/libk.a\n"
                "build k/CMakeFiles/x.o: CXX_COMPILER__k_Rel ../../k/x.cpp\n")
            path = sweep.Path(d) / "build.ninja"
            path.write_text(text)
            exes, libs = sweep.parse_ninja(path)
            self.assertEqual(list(exes), [d + "/k/k_test"])
            objects, exe_libs = exes[d + "/k/k_test"]
            self.assertEqual(objects, [d + "/k/t.o", d + "/k/u.o"])
            self.assertEqual(exe_libs, [d + "/k/libk.a", "/usr/lib/libgtest.a"])
            self.assertEqual(libs, {d + "/k/libk.a": [d + "/k/a.o", d + "/k/b.o"]})

    def test_covering_tells_unknown_lines_from_unexecuted_ones(self):
        cov = sweep.Coverage.__new__(sweep.Coverage)
        cov.tests = ["A.a", "B.b", "C.c"]
        cov.lines = {"k/x.cpp": {10, 11, 12, 20}}
        cov.hits = {"k/x.cpp": {10: {0}, 12: {1, 2}}}
        self.assertEqual(cov.covering("k/x.cpp", 10, 10), {"A.a"})
        self.assertEqual(cov.covering("k/x.cpp", 10, 12), {"A.a", "B.b", "C.c"})
        self.assertEqual(cov.covering("k/x.cpp", 20, 20), set())      # executable, never run
        self.assertIsNone(cov.covering("k/x.cpp", 13, 19))            # gcov knows none of them
        self.assertIsNone(cov.covering("k/other.cpp", 10, 10))

    def test_the_coverage_build_gets_every_core_it_is_given(self):
        import tempfile
        import types
        with tempfile.TemporaryDirectory() as d:
            worker = types.SimpleNamespace(src=sweep.Path(d), dir=sweep.Path(d), jobs=1, preset="cpu", env={})
            cov = sweep.Coverage(worker, 6)
            cov.bld.mkdir(parents=True)
            (cov.bld / "build.ninja").write_text("")
            calls = []
            real_run = sweep.run
            sweep.run = lambda cmd, **kw: (calls.append(cmd), (0, "", 0.0))[1]
            try:
                cov._build()
            finally:
                sweep.run = real_run
        ninja = [c for c in calls if c[0] == "ninja"]
        self.assertEqual(len(ninja), 1)
        self.assertEqual(ninja[0][ninja[0].index("-j") + 1], "6")

    def test_only_prose_results_kept_mutants_and_the_sweep_leave_the_coverage_key(self):
        for f in ["README.md", "docs/json-reports.md", "results/mutation-sweep/seed-2027.json",
                  "ci/mutants/route-log-misses-the-largest-batch.patch", "ci/mutation-sweep-equivalent.txt",
                  "results/gpu-bench/h200-2026-12-01c-gate.log"]:
            self.assertTrue(sweep.coverage_neutral(f), f)
        for f in ["ci/mutation-sweep", "ci/mutation-sweep-test.py"]:
            self.assertTrue(sweep.coverage_neutral(f), f)   # Python; COVERAGE_FORMAT covers it
        for f in ["kernels/planner.cpp", "tools/cli_test.cpp", "ci/mutants.sh", "ci/mutants-refresh-test.sh",
                  "fixtures/stats/trace-small.jsonl", "CMakeLists.txt", "ci/sanitize.sh", "docs.cpp",
                  "results.hpp", "tools/md_table.hpp", "bench/gpu/gpu_bench.cpp"]:
            self.assertFalse(sweep.coverage_neutral(f), f)

    def test_listed_equivalents_are_set_aside_unjudged_and_the_next_one_is_drawn(self):
        src = "int f(int a) { return a + 1; }\n"
        ms = sweep.generate("x.cpp", src)
        self.assertGreaterEqual(len(ms), 3)
        queue = list(ms)
        listed = {ms[0].id: "why", ms[1].id: "why not"}
        m, aside = sweep.draw(queue, listed, {"x.cpp": src})
        self.assertIs(m, ms[2])
        self.assertEqual([a.id for a in aside], [ms[0].id, ms[1].id])
        for a, why in zip(aside, ["why", "why not"]):
            self.assertEqual(a.status, "equivalent")
            self.assertTrue(a.note.startswith(why), a.note)
            self.assertIn("+++ b/x.cpp", a.diff)
        self.assertEqual(queue, ms[3:])
        # Unlisted mutants come one at a time; an empty queue draws nothing.
        m, aside = sweep.draw(queue, {}, {"x.cpp": src})
        self.assertEqual((m, aside), (ms[3] if len(ms) > 3 else None, []))
        self.assertEqual(sweep.draw([], listed, {"x.cpp": src}), (None, []))
        only_listed = [ms[0]]
        self.assertEqual(sweep.draw(only_listed, listed, {"x.cpp": src})[0], None)
        self.assertEqual(only_listed, [])

    def test_a_saved_report_is_triaged_again_by_todays_list(self):
        import contextlib
        import io
        import json
        import tempfile

        def mutant(i, status, note=""):
            return {"file": "k/x.cpp", "op": "constant", "start": i, "end": i + 1, "replacement": "2",
                    "line": i, "id": f"id{i}", "status": status, "note": note, "diff": f"diff {i}\n"}
        saved = {"seed": 7, "sample": 6, "population": 50, "files": ["k/x.cpp"], "partial": True,
                 "revision": "abc123", "minutes": 3.0, "rerun": "ci/mutation-sweep --seed 7 --sample 6 --jobs 3",
                 "baseline_failures": [],
                 "mutants": [mutant(1, "killed"), mutant(2, "survived"),
                             mutant(3, "equivalent", "old reason"),           # triaged then, not now
                             mutant(4, "equivalent", "why" + sweep.SET_ASIDE),  # set aside unjudged
                             mutant(5, "no-compile"), mutant(6, "timeout")]}
        real = sweep.load_equivalent
        sweep.load_equivalent = lambda: {"id2": "listed now"}
        try:
            with tempfile.TemporaryDirectory() as d:
                src, dst = sweep.Path(d) / "in.json", sweep.Path(d) / "out.json"
                src.write_text(json.dumps(saved))
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    rc = sweep.report_saved(str(src), str(dst))
                doc = json.loads(dst.read_text())
                bad = sweep.Path(d) / "bad.json"
                bad.write_text('{"seed": 1}')
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    self.assertEqual(sweep.report_saved(str(bad), ""), 2)
                self.assertIn("not a sweep report", err.getvalue())
        finally:
            sweep.load_equivalent = real
        self.assertEqual(rc, 0)
        text = out.getvalue()
        # killed 1 + timeout 1 of killed 1, timeout 1, survived 1 (id3): 2/3.
        self.assertIn("score: 2/3 = 66.7%", text)
        self.assertIn("sources abc123", text)
        self.assertIn("stopped before its sample was judged", text)
        self.assertIn("# id3 k/x.cpp:3", text)
        self.assertNotIn("# id2 ", text)
        self.assertIn("rerun: ci/mutation-sweep --seed 7 --sample 6 --jobs 3", text)
        self.assertEqual(doc["totals"], {"killed": 1, "timeout": 1, "survived": 1, "equivalent": 2,
                                         "no-compile": 1, "not-built": 0})
        self.assertEqual((doc["revision"], doc["partial"], doc["seed"], doc["rerun"]),
                         ("abc123", True, 7, "ci/mutation-sweep --seed 7 --sample 6 --jobs 3"))
        self.assertEqual({m["id"]: m["status"] for m in doc["mutants"]}["id4"], "equivalent")

    def test_the_revision_names_the_commit_and_marks_a_changed_tree(self):
        import subprocess
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            git = ["git", "-C", d, "-c", "user.name=t", "-c", "user.email=t@t"]
            subprocess.run(git + ["init", "-q"], check=True)
            (sweep.Path(d) / "a.cpp").write_text("int a;\n")
            subprocess.run(git + ["add", "a.cpp"], check=True)
            subprocess.run(git + ["commit", "-q", "-m", "a"], check=True)
            head = subprocess.run(git + ["rev-parse", "--short=12", "HEAD"], check=True, capture_output=True,
                                  text=True).stdout.strip()
            real = sweep.ROOT
            sweep.ROOT = sweep.Path(d)
            try:
                clean = sweep.source_revision()
                (sweep.Path(d) / "new.cpp").write_text("int n;\n")   # untracked: mirrored too
                untracked = sweep.source_revision()
                (sweep.Path(d) / "new.cpp").unlink()
                (sweep.Path(d) / "a.cpp").write_text("int b;\n")
                changed = sweep.source_revision()
                sweep.ROOT = sweep.Path(d) / "no-repo-here"
                none = sweep.source_revision()
            finally:
                sweep.ROOT = real
        self.assertEqual((clean, untracked, changed, none), (head, head + "+", head + "+", ""))


CTX = {"enums": {"Clause", "Status"}, "exit_codes": {"kExitOk", "kExitFail", "kExitBadInput", "kExitCannotRun"}}


def realistic(src, op, path="x.cpp"):
    return [sweep.apply(src, m) for m in sweep.generate(path, src, CTX) if m.op == op]


class RealisticOperators(unittest.TestCase):
    def test_field_swap_takes_a_similar_sibling_on_the_same_base(self):
        src = ("float f(const Spec& spec, const Call& c) {\n"
               "  float a = spec.k_scale * 2;\n  float b = spec.v_scale;\n"
               "  int n = c.lens[0] + c.max_lens[0];\n  return a + b + spec.data[0] + n;\n}\n")
        got = realistic(src, "field-swap")
        self.assertIn(src.replace("a = spec.k_scale", "a = spec.v_scale"), got)
        self.assertIn(src.replace("b = spec.v_scale", "b = spec.k_scale"), got)
        self.assertIn(src.replace("c.lens[0]", "c.max_lens[0]"), got)
        self.assertIn(src.replace("c.max_lens[0]", "c.lens[0]"), got)
        # data shares no word with the scales: a different type, likely; never swapped.
        self.assertFalse(any("spec.data" not in g for g in got))
        self.assertEqual(len(got), 4)

    def test_field_swap_stays_in_one_function_and_one_base(self):
        src = ("int f(const S& s, const S& t) { return s.k_scale + t.v_scale; }\n"
               "int g(const S& s) { return s.v_scale; }\n"
               "int h(S* p) { p->num_seqs = 1; return p->num_heads + p->size(); }\n")
        got = realistic(src, "field-swap")
        self.assertEqual(sorted(got), sorted([
            src.replace("p->num_seqs", "p->num_heads"), src.replace("p->num_heads +", "p->num_seqs +")]))

    def test_field_swap_leaves_method_calls_and_wording_alone(self):
        src = ('std::string f(const S& s) {\n  if (s.min_len < 0) throw E(fmt::format("{} {}", s.min_len, s.max_len));\n'
               '  return fmt::format("{}", s.max_len) + s.name();\n}\n')
        got = realistic(src, "field-swap")
        self.assertEqual(got, [src.replace("(s.min_len < 0)", "(s.max_len < 0)")])

    def test_drop_guard_deletes_a_throwing_or_returning_guard_whole(self):
        src = ("int f(int n, const std::string& s) {\n  if (n < 0) throw std::invalid_argument(\"n\");\n"
               "  if (s.empty()) {\n    log_it();\n    return -1;\n  }\n  if (n > 9) bad(\"n\", n);\n"
               "  if (n == 3) return compute(n);\n  if (n == 4) x = 1;\n  return n;\n}\n")
        got = realistic(src, "drop-guard")
        self.assertIn(src.replace("if (n < 0) throw std::invalid_argument(\"n\");", ";"), got)
        self.assertIn(src.replace("if (s.empty()) {\n    log_it();\n    return -1;\n  }", ";"), got)
        self.assertIn(src.replace("if (n > 9) bad(\"n\", n);", ";"), got)
        self.assertEqual(len(got), 3)   # not the main path's return compute(n), not an assignment

    def test_drop_guard_leaves_if_else_and_keeps_a_body_a_statement(self):
        src = ("void f(int n) {\n  if (n < 0) throw E(); else g();\n  for (;;) if (n) return;\n"
               "  if (a) g(); else if (n > 2) throw E();\n}\n")
        got = realistic(src, "drop-guard")
        self.assertEqual(sorted(got), sorted([
            src.replace("for (;;) if (n) return;", "for (;;) {}"),
            src.replace("else if (n > 2) throw E();", "else {}")]))

    def test_status_swap_takes_the_nearest_siblings_used_in_the_file(self):
        src = ("Status f(int n) {\n  if (n < 0) return Status::reject;\n  if (n == 0) return Status::error;\n"
               "  switch (n) { case Status::ok: break; }\n  return Status::ok;\n}\n")
        got = realistic(src, "status-swap")
        self.assertIn(src.replace("return Status::reject", "return Status::error"), got)
        self.assertIn(src.replace("return Status::reject", "return Status::ok"), got)
        self.assertIn(src.replace("return Status::ok;", "return Status::error;"), got)
        self.assertFalse(any("case Status::ok" not in g for g in got))   # case labels left alone
        self.assertEqual(len(got), 6)

    def test_status_swap_leaves_other_scopes_and_enum_bodies_alone(self):
        src = ("enum class Clause { a, b };\nint f() { return std::max(Other::x, Other::y) + Clause::make(); }\n")
        self.assertEqual(realistic(src, "status-swap"), [])

    def test_status_swap_of_exit_codes_named_and_literal(self):
        src = "int run(bool ok) {\n  if (!ok) return cli::kExitBadInput;\n  return 0;\n}\n"
        got = realistic(src, "status-swap", "tools/cmd_x.cpp")
        for other in ("kExitOk", "kExitFail", "kExitCannotRun"):
            self.assertIn(src.replace("kExitBadInput", other), got)
        for other in ("1", "2", "3"):
            self.assertIn(src.replace("return 0;", f"return {other};"), got)
        self.assertEqual(len(got), 6)
        # A literal return outside tools/, or in a function with no other code, is no exit code.
        self.assertEqual(realistic(src.replace("cli::kExitBadInput", "x"), "status-swap", "tools/cmd_x.cpp"), [])
        self.assertEqual(len(realistic(src, "status-swap", "kernels/x.cpp")), 3)

    def test_unit_slip_drops_a_byte_factor(self):
        src = ("void f(int64_t n, int es, std::vector<float>& v) {\n  copy(n * es);\n"
               "  copy(n * int64_t(sizeof(float)));\n  copy(sizeof(float) * n);\n"
               "  copy(v.size() * kernels::dtype_size(d));\n  char line[8];\n  put(line, sizeof line);\n"
               "  const int k = dtype_size(d);\n}\n")
        got = realistic(src, "unit-slip")
        self.assertIn(src.replace("copy(n * es)", "copy(n)"), got)
        self.assertIn(src.replace("copy(n * int64_t(sizeof(float)))", "copy(n)"), got)
        self.assertIn(src.replace("copy(sizeof(float) * n)", "copy(n)"), got)
        self.assertIn(src.replace("copy(v.size() * kernels::dtype_size(d))", "copy(v.size())"), got)
        self.assertEqual(len(got), 4)   # a sizeof alone or a byte count named is no factor to drop

    def test_unit_slip_scales_and_binary_units(self):
        src = ("double f(double us, long t) {\n  auto d = std::chrono::milliseconds(5);\n"
               "  const int64_t lim = int64_t(64) << 20;\n  int h = (e << 10) | m;\n"
               "  return us / 1000 + t * 1e-6 + 1000 + 3 * 7;\n}\n")
        got = realistic(src, "unit-slip")
        self.assertIn(src.replace("us / 1000", "us / 1000000"), got)
        self.assertIn(src.replace("t * 1e-6", "t * 1e-3"), got)
        self.assertIn(src.replace("t * 1e-6", "t * 1e-9"), got)
        self.assertIn(src.replace("chrono::milliseconds", "chrono::microseconds"), got)
        self.assertIn(src.replace("chrono::milliseconds", "chrono::seconds"), got)
        self.assertIn(src.replace("<< 20", "<< 10"), got)
        self.assertIn(src.replace("<< 20", "<< 30"), got)
        self.assertEqual(len(got), 7)   # not the bit shift e << 10, not a sum's 1000, not 3 * 7
        # An int shifted past 31 bits is undefined, not a unit slip: 1 << 30 only goes down.
        narrow = "int f() { return 1 << 30; }\n"
        self.assertEqual(realistic(narrow, "unit-slip"), [narrow.replace("<< 30", "<< 20")])
        wide = "long f() { return 1LL << 30; }\n"
        self.assertEqual(len(realistic(wide, "unit-slip")), 2)

    def test_skip_durable_deletes_or_skips_flush_sync_rename_close_truncate(self):
        src = ("void f(int fd, const char* a, const char* b, std::ofstream& out) {\n"
               "  int g = ::open(a, O_WRONLY | O_TRUNC | O_CLOEXEC);\n  ::fsync(fd);\n"
               "  if (::rename(a, b) != 0) throw E();\n  std::fflush(stdout);\n  out.flush();\n"
               "  if (err) ::close(fd);\n  std::ofstream o(a, std::ios::binary | std::ios::trunc);\n}\n")
        got = realistic(src, "skip-durable")
        self.assertIn(src.replace("O_WRONLY | O_TRUNC | O_CLOEXEC", "O_WRONLY  | O_CLOEXEC"), got)
        self.assertIn(src.replace("  ::fsync(fd);", "  ;"), got)
        self.assertIn(src.replace("::rename(a, b) != 0", "0 != 0"), got)
        self.assertIn(src.replace("std::fflush(stdout);", ";"), got)
        self.assertIn(src.replace("out.flush();", ";"), got)
        self.assertIn(src.replace("if (err) ::close(fd);", "if (err) {}"), got)
        self.assertIn(src.replace("std::ios::binary | std::ios::trunc", "std::ios::binary "), got)
        self.assertEqual(len(got), 7)

    def test_skip_durable_leaves_declarations_and_other_closes_alone(self):
        src = ("void sync_folder(const fs::path& dir);\nint close(int fd);\n"
               "bool end_object() { return close(); }\nvoid g(P& p) { p.close(1); p.closer(); }\n")
        self.assertEqual(realistic(src, "skip-durable"), [])

    def test_every_operator_is_selectable_and_counted(self):
        self.assertEqual(sweep.ALL_OPERATORS[-5:], ["field-swap", "drop-guard", "status-swap", "unit-slip",
                                                     "skip-durable"])
        import subprocess
        out = subprocess.run([sys.executable, str(_path), "--help"], capture_output=True, text=True).stdout
        for op in sweep.ALL_OPERATORS:
            self.assertIn(op, out.replace("-\n", "-").replace(" ", "").replace("\n", ""), op)

    def test_even_ops_deal_operators_in_turn_keeping_each_order(self):
        ms = [sweep.Mutant("x.cpp", op, i, i, "", 1, id=f"{op}{i}")
              for i, op in enumerate(["a", "a", "a", "b", "a", "c", "b"])]
        got = [m.id for m in sweep.interleave_ops(ms)]
        self.assertEqual(got, ["a0", "b3", "c5", "a1", "b6", "a2", "a4"])


class CtestVerdicts(unittest.TestCase):
    def test_a_command_test_is_judged_as_ctest_judges_it(self):
        def group(**kw):
            return sweep.TestGroup("t", "/bin/sh", [], ["/bin/sh"], "/", {}, **kw)
        self.assertTrue(group().passed(0, ""))
        self.assertFalse(group().passed(1, ""))
        # PASS_REGULAR_EXPRESSION: what it prints decides, not the exit code.
        expects = group(pass_regex=["broken on purpose"])
        self.assertTrue(expects.passed(1, "x: broken on purpose\n"))
        self.assertFalse(expects.passed(0, "all fine\n"))
        self.assertFalse(group(fail_regex=["FAIL"]).passed(0, "FAIL: x\n"))
        self.assertTrue(group(will_fail=True).passed(2, ""))
        self.assertFalse(group(will_fail=True).passed(0, ""))
        self.assertEqual(sweep.as_list("a"), ["a"])
        self.assertEqual(sweep.as_list(["a", "b"]), ["a", "b"])
        self.assertEqual(sweep.as_list(None), [])


class OwnTests(unittest.TestCase):
    def test_a_test_belongs_to_the_folder_that_registered_or_built_it(self):
        src, bld = "/s", "/s/build/cpu"
        self.assertEqual(sweep.test_module("/s/adapters/tests.cmake", "/usr/bin/sh", src, bld), "adapters")
        self.assertEqual(sweep.test_module("", "/s/build/cpu/kernels/kernels_test", src, bld), "kernels")
        self.assertEqual(sweep.test_module("/s/build/cpu/tools/t[1]_tests.cmake",
                                           "/s/build/cpu/tools/cli_test", src, bld), "tools")
        self.assertEqual(sweep.test_module("/s/CMakeLists.txt", "/usr/bin/python3", src, bld), ".")
        self.assertEqual(sweep.test_module("", "/usr/bin/bash", src, bld), "?")
        graph = {"files": ["/s/a/CMakeLists.txt"], "nodes": [{"file": 0}]}
        self.assertEqual(sweep.registered_in({"backtrace": 0}, graph), "/s/a/CMakeLists.txt")
        self.assertEqual(sweep.registered_in({}, graph), "")

    def test_the_report_gives_each_module_its_own_tests_figure(self):
        import contextlib
        import io
        import json
        import tempfile

        def mutant(i, f, status, own, killer=""):
            return {"file": f, "op": "field-swap", "start": i, "end": i + 1, "replacement": "x", "line": i,
                    "id": f"id{i}", "status": status, "own_status": own, "killed_by": killer,
                    "killer_module": "regression" if killer else "", "diff": f"diff {i}\n"}
        saved = {"seed": 3, "sample": 5, "population": 9, "files": ["k/x.cpp", "t/y.cpp"], "minutes": 1.0,
                 "rerun": "ci/mutation-sweep --seed 3 --sample 5 --own-tests", "own_tests": True,
                 "mutants": [mutant(1, "k/x.cpp", "killed", "killed"),
                             mutant(2, "k/x.cpp", "killed", "survived", "Pin.Elsewhere"),
                             mutant(3, "k/x.cpp", "survived", "survived"),
                             mutant(4, "t/y.cpp", "timeout", "timeout"),
                             mutant(5, "t/y.cpp", "no-compile", "no-compile")]}
        real = sweep.load_equivalent
        sweep.load_equivalent = lambda: {}
        try:
            with tempfile.TemporaryDirectory() as d:
                src, dst = sweep.Path(d) / "in.json", sweep.Path(d) / "out.json"
                src.write_text(json.dumps(saved))
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    self.assertEqual(sweep.report_saved(str(src), str(dst)), 0)
                doc = json.loads(dst.read_text())
        finally:
            sweep.load_equivalent = real
        self.assertEqual(doc["per_module"], {"k": {"judged": 3, "own": 1, "elsewhere": 1, "survived": 1},
                                             "t": {"judged": 1, "own": 1, "elsewhere": 0, "survived": 0}})
        text = out.getvalue()
        self.assertIn("score: 3/4 = 75.0%", text)
        self.assertIn("own-tests score: 2/4 = 50.0%", text)
        self.assertIn("# id2 k/x.cpp:2 field-swap (killed by Pin.Elsewhere, module regression)", text)
        self.assertTrue(doc["own_tests"])


if __name__ == "__main__":
    unittest.main()
