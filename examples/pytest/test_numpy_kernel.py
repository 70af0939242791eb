# SPDX-License-Identifier: Apache-2.0
"""The NumPy example decode (examples/workers/numpy_decode.py) tested in
pytest as an in-process kernel, through pav's plugin:

    PYTHONPATH=build/cpu/python python3 -m pytest -p pav.pytest_plugin examples/pytest

test_numpy_decode_passes_pav is what a kernel's own CI runs: pav's
properties on the kernel, its earlier counterexamples replayed first. The
defect tests show what a failure looks like: each injected bug is found,
shrunk, saved, fails again on replay and passes through the correct kernel.
"""
import os
import sys

import pytest

import pav

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workers")
sys.path.insert(0, WORKERS)
import numpy_decode  # noqa: E402


def numpy_kernel(defect=None):
    """The example as a pav.Kernel; its saved cases replay from the command
    line through the same decode run as a worker (numpy_decode.py)."""
    worker = "exec:%s %s" % (sys.executable, os.path.abspath(os.path.join(WORKERS, "numpy_decode.py")))
    if defect:
        worker += " --defect " + defect
    return pav.Kernel(numpy_decode.NumpyDecode(defect=defect).decode, numpy_decode.DESCRIPTION, replay_spec=worker)


def test_numpy_decode_passes_pav(pav_verify):
    # quick: the pre-commit counts; without it the decode check searches for 40 s.
    report = pav_verify(numpy_kernel(), quick=True)
    assert [c["name"] for c in report.checks][:2] == ["decode", "reject"]


@pytest.mark.parametrize("defect", ["gqa-interleaved", "drop-last-partial-page", "softmax-scale-ignored"])
def test_pav_finds_the_defect(defect, tmp_path):
    report = pav.verify(numpy_kernel(defect), checks=["decode"], cases=200, seed=1, save_dir=str(tmp_path))
    assert not report.passed, "pav missed %s" % defect
    [case] = report.saved_cases()
    assert not pav.replay(case, numpy_kernel(defect)).passed
    assert pav.replay(case, numpy_kernel()).passed
