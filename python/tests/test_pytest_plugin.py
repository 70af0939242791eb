# SPDX-License-Identifier: Apache-2.0
"""pav's pytest plugin, run as a user runs it (pytest in a child process on a
test file of their own): a defect fails the test with pav's verdict and the
saved case's path; the next run replays that case first; the options reach pav."""
import os
import re
import subprocess
import sys
import textwrap

from test_inprocess import CHILD_TIMEOUT_S, SOURCE

USER_TESTS = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {workers!r})
    import numpy_decode

    DEFECT = os.environ.get("USER_DEFECT") or None
    KERNEL = numpy_decode.NumpyDecode(defect=DEFECT)

    def user_decode(call):
        return KERNEL.decode(call)

    def test_user_kernel(pav_verify):
        pav_verify(user_decode, numpy_decode.DESCRIPTION, checks=["decode"], quick=True)
""")


def run_pytest(folder, *options, defect=None):
    env = dict(os.environ)
    env["USER_DEFECT"] = defect or ""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pav.pytest_plugin",
               "--pav-save", str(folder / "saved")] + list(options) + [str(folder / "test_user.py")]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=folder, env=env)
    except subprocess.TimeoutExpired as e:
        printed = "".join(b.decode(errors="replace") if isinstance(b, bytes) else b
                          for b in (e.stdout or "", e.stderr or ""))
        raise AssertionError(f"the nested pytest run {' '.join(options)} did not end within {CHILD_TIMEOUT_S} s "
                             f"(a hang); it printed:\n{printed}") from None


def test_a_defect_fails_the_test_and_its_case_is_replayed_first_next_time(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS.format(workers=os.path.join(SOURCE, "examples", "workers")))
    first = run_pytest(tmp_path, "--pav-cases", "200", "--pav-seed", "3", defect="gqa-interleaved")
    assert first.returncode == 1, first.stdout + first.stderr
    assert "pav verify: FAIL" in first.stdout and "decode: seed " in first.stdout
    saved = re.findall(r"saved (\S+\.json)", first.stdout)
    assert saved and os.path.isfile(saved[0]), first.stdout
    folder = tmp_path / "saved" / "test_user.py__test_user_kernel"
    assert os.path.dirname(saved[0]) == str(folder)

    # Next run: the saved case is replayed before any new case, and fails again.
    second = run_pytest(tmp_path, "--pav-cases", "1", defect="gqa-interleaved")
    assert second.returncode == 1
    assert "a saved counterexample fails again" in second.stdout and saved[0] in second.stdout

    # Fixed: the saved case passes and stays as a regression pin.
    fixed = run_pytest(tmp_path, "--pav-cases", "4")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert os.path.isfile(saved[0])


def test_a_time_budget_runs_pav_fuzz(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS.format(workers=os.path.join(SOURCE, "examples", "workers")))
    r = run_pytest(tmp_path, "--pav-seconds", "2", "--pav-seed", "9", "-s")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pav fuzz: base seed 9" in r.stdout
