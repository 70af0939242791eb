#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Tests of ci/layers.py on small trees: what it refuses, how it names it, and
what it leaves alone (tests, third-party headers, an area's own headers)."""
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

CHECKER = Path(__file__).resolve().parent / "layers.py"

TABLE = """\
# comment
low:
mid: low
mid/sub: mid
top: mid low/one.hpp
"""


def run(files, table=TABLE):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "ci").mkdir()
        (root / "ci" / "layers.txt").write_text(table)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        r = subprocess.run([sys.executable, str(CHECKER), "--root", d], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


BASE = {
    "low/one.hpp": "#pragma once\n",
    "low/two.hpp": "#pragma once\n",
    "mid/m.hpp": '#pragma once\n#include "low/one.hpp"\n',
    "mid/sub/s.hpp": '#pragma once\n#include "mid/m.hpp"\n',
    "top/t.cpp": '#include <vector>\n#include "mid/m.hpp"\n#include "low/one.hpp"\n',
}


class Layers(unittest.TestCase):
    def test_a_tree_that_follows_the_table_passes(self):
        rc, out = run(BASE)
        self.assertEqual(rc, 0, out)

    def test_a_forbidden_include_is_named_by_file_line_and_header(self):
        rc, out = run({**BASE, "low/bad.cpp": '// x\n#include <cstdint>\n#include "mid/m.hpp"\n'})
        self.assertEqual(rc, 1, out)
        self.assertIn('low/bad.cpp:3: "mid/m.hpp" (area low may not include area mid', out)

    def test_angle_brackets_and_local_includes_are_checked_too(self):
        rc, out = run({**BASE, "low/bad.hpp": "#include <mid/m.hpp>\n", "mid/sub/x.cpp": '#include "../m.hpp"\n',
                       "low/y.cpp": '#include "../mid/sub/s.hpp"\n'})
        self.assertEqual(rc, 1, out)
        self.assertIn('low/bad.hpp:1: "mid/m.hpp"', out)
        self.assertIn('low/y.cpp:1: "../mid/sub/s.hpp" (area low may not include area mid/sub', out)
        self.assertNotIn("mid/sub/x.cpp", out)  # mid/sub may include mid

    def test_a_missing_header_of_an_area_counts_as_that_areas(self):
        rc, out = run({**BASE, "low/z.cpp": '#include "mid/not_yet.hpp"\n#include "nlohmann/json.hpp"\n'})
        self.assertEqual(rc, 1, out)
        self.assertIn('low/z.cpp:1: "mid/not_yet.hpp" (area low may not include area mid', out)
        self.assertNotIn("nlohmann", out)

    def test_a_sub_area_is_not_its_parents(self):
        # mid may not include mid/sub: the longer area wins.
        rc, out = run({**BASE, "mid/uses_sub.cpp": '#include "mid/sub/s.hpp"\n'})
        self.assertEqual(rc, 1, out)
        self.assertIn('mid/uses_sub.cpp:1: "mid/sub/s.hpp" (area mid may not include area mid/sub', out)

    def test_a_single_header_entry_allows_that_header_only(self):
        rc, out = run({**BASE, "top/u.cpp": '#include "low/two.hpp"\n'})
        self.assertEqual(rc, 1, out)
        self.assertIn('top/u.cpp:1: "low/two.hpp"', out)
        self.assertNotIn("top/t.cpp", out)

    def test_tests_may_include_any_area(self):
        rc, out = run({**BASE, "low/a_test.cpp": '#include "top/t.cpp"\n', "low/tests/h.hpp": '#include "mid/m.hpp"\n',
                       "low/testdata/f.cpp": '#include "mid/m.hpp"\n', "low/test_call.hpp": '#include "mid/m.hpp"\n'})
        self.assertEqual(rc, 0, out)

    def test_a_source_in_no_area_is_refused(self):
        rc, out = run({**BASE, "loose/x.cpp": "int x;\n"})
        self.assertEqual(rc, 2, out)
        self.assertIn("loose/x.cpp: in no area", out)

    def test_a_table_naming_what_does_not_exist_is_refused(self):
        rc, out = run(BASE, TABLE + "gone: low\n")
        self.assertEqual(rc, 2, out)
        self.assertIn("area gone is not a folder", out)
        rc, out = run(BASE, TABLE.replace("top: mid", "top: mid nowhere"))
        self.assertEqual(rc, 2, out)
        self.assertIn("'nowhere' is neither an area nor a file", out)


if __name__ == "__main__":
    unittest.main()
