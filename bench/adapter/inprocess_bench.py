#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Adapter overhead per call, with a Python kernel in pav's own process beside
the built-in set (lib:, lib: --isolate, exec: workers), in one run of
bench/adapter_bench inside the Python extension:

    PYTHONPATH=build/cpu/python python3 bench/adapter/inprocess_bench.py [adapter_bench options]

The Python kernel does no attention, as the others: it fills pav's out with
zeros and lse with -inf, in place (`python (in process)`), or returns them as
new arrays (`python (returns out)`). What is timed is pav's side of a call:
the arrays over pav's memory, the Call built on them (q widened to float32,
as a worker's), the output checks and copies. Options after the script name
go to adapter_bench (--calls, --format, --json-out, ...).
"""
import os
import sys

import numpy as np

import pav
from pav import api

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import null_worker  # noqa: E402


def null_in_place(call):
    call.out.fill(0)
    if call.want_lse:
        call.lse.fill(-np.inf)


def null_returned(call):
    out = np.zeros(call.out_shape, dtype=np.float32)
    lse = np.full(call.lse_shape, -np.inf, dtype=np.float32) if call.want_lse else None
    return out, lse


def null_lib():
    """The null plugin of the build this extension belongs to (BUILD/bench)."""
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(api.__file__))))
    return os.path.join(build, "bench", "libpav_null_kernel.so")


def main(argv):
    ext = api._extension()
    if not hasattr(ext, "adapter_bench"):
        raise SystemExit("inprocess_bench: this pav extension was built without the benchmarks (PAV_BUILD_BENCH=OFF)")
    description = pav.Description(null_worker.DESCRIPTION)
    with api._Registered() as reg:
        entries = [("python (in process)", reg.spec(pav.Kernel(null_in_place, description, check=False), None)),
                   ("python (returns out)", reg.spec(pav.Kernel(null_returned, description, check=False), None))]
        args = list(argv)
        if "--kernel" not in args:
            # The built-in set after the Python entries, in the same run.
            here = os.path.dirname(os.path.abspath(__file__))
            worker = "exec:%s %s" % (sys.executable, os.path.join(here, "null_worker.py"))
            builtin = ["lib:" + null_lib(), worker, worker + " --load"]
        else:
            builtin = []
        for label, spec in entries:
            print("%-22s %s" % (label, spec))
        kernels = []
        for spec in [s for _, s in entries] + builtin:
            kernels += ["--kernel", spec]
        return ext.adapter_bench(kernels + args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
