# SPDX-License-Identifier: Apache-2.0
"""pav in Python: verify a decode kernel written in Python (NumPy, PyTorch,
Triton, ...) in this process, through the same properties, shrinking, saved
cases, replay and reports as `pav verify --kernel ...` on the command line.

    import pav
    report = pav.verify(my_decode, pav.Description("my_decode", q_dtypes=["bf16"], ...))
    assert report.passed, report.failure_text()

`my_decode(call)` gets a `pav.worker.Call` over pav's own memory and writes
`call.out` (and `call.lse`) or returns them (pav.inprocess says what it may
return). docs/python.md has the whole interface; the pytest plugin
(`-p pav.pytest_plugin`) gives tests the `pav_verify` fixture.

`pav.worker` (the worker protocol's helper) needs only NumPy; the rest needs
the extension pav._pav, built with the project (`cmake --build --preset cpu`).
"""
from pav.api import (  # noqa: F401
    CannotRun,
    Description,
    Interrupted,
    Kernel,
    Report,
    UsageError,
    compare,
    drift,
    fuzz,
    replay,
    verify,
    version,
)
