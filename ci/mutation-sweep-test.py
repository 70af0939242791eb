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
                  "bench/gpu/results/h200-2026-12-01c-gate.log"]:
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


if __name__ == "__main__":
    unittest.main()
