# SPDX-License-Identifier: Apache-2.0
"""pav's pytest plugin: the `pav_verify` fixture runs pav's properties on a
Python kernel and fails the test with pav's verdict and the saved case's path.

Load it with `pytest -p pav.pytest_plugin` (or `pytest_plugins =
["pav.pytest_plugin"]` in a conftest.py). A test:

    def test_my_decode(pav_verify):
        pav_verify(my_decode, pav.Description("my_decode", ...))

Each test keeps its counterexamples in a folder of its own
(`--pav-save`/TEST-ID, default `.pav/counterexamples`). Every case saved there
by an earlier run is replayed first, before any new case is generated, and
kept: a fixed defect's case stays as a regression pin. Then new cases: `pav
verify` (`--pav-cases` calls of the decode check), or `pav fuzz` under a time
budget (`--pav-seconds`). `--pav-seed` sets the base seed (default: pav
verify's fixed seed, or a drawn one for a timed fuzz, printed either way).
"""
import os
import re

import pytest

import pav


def pytest_addoption(parser):
    group = parser.getgroup("pav", "pav: verify decode kernels")
    group.addoption("--pav-seed", type=int, default=None, help="base seed of pav's generated cases")
    group.addoption("--pav-cases", type=int, default=None, help="generated calls of the decode check per test")
    group.addoption("--pav-seconds", type=float, default=None,
                    help="fuzz each kernel for this long instead (pav fuzz, all its properties)")
    group.addoption("--pav-save", default=os.path.join(".pav", "counterexamples"),
                    help="where each test's counterexamples are kept (a folder per test)")


def case_folder(root, nodeid):
    """The test's own folder under root: its node id with every character
    outside [A-Za-z0-9._-] as '_'."""
    return os.path.join(root, re.sub(r"[^A-Za-z0-9._-]", "_", nodeid))


@pytest.fixture
def pav_verify(request):
    """pav_verify(kernel, description=None, **options) -> pav.Report.

    kernel: a pav.Kernel, or a callable with its description. options go to
    pav.verify (checks, cases, seed, ...) or, under --pav-seconds, pav.fuzz.
    The test fails with pav's verdict and the saved case's path."""
    config = request.config
    folder = case_folder(config.getoption("--pav-save"), request.node.nodeid)

    def run(kernel, description=None, **options):
        saved = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".json")) \
            if os.path.isdir(folder) else []
        if saved:
            replayed = pav.replay(saved, kernel, description)
            if not replayed.passed:
                pytest.fail("pav: a saved counterexample fails again\n" + replayed.failure_text(), pytrace=False)
        options.setdefault("save_dir", folder)
        seed = config.getoption("--pav-seed")
        if seed is not None:
            options["seed"] = seed
        seconds = config.getoption("--pav-seconds")
        if seconds is not None:
            options.pop("cases", None)
            options.pop("checks", None)
            options.pop("quick", None)
            report = pav.fuzz(kernel, description, seconds=seconds, **options)
        else:
            cases = config.getoption("--pav-cases")
            if cases is not None:
                options["cases"] = cases
            report = pav.verify(kernel, description, **options)
        if not report.passed:
            pytest.fail(report.failure_text(), pytrace=False)
        return report

    return run
