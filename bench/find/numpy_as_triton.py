#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The NumPy example worker (examples/workers/numpy_decode.py) answering with the
Triton example's description (examples/workers/triton_decode.py's DESCRIPTION:
large_cache, compiles_per_shape, a bf16 P, its cache formats and variants), so
pav's side of a run of the Triton example (its draws, case building, reference,
files) can be measured on a machine without a GPU:

  pav fuzz --kernel 'exec:python3 bench/find/numpy_as_triton.py' --property decode \
      --cases 100 --seed 1 --regions --shapes 8 --json

The description is read from triton_decode.py's source (it imports torch and
Triton): its call's arguments evaluated with list() and range() only."""
import ast
import os
import sys

import numpy as np

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "workers")
sys.path.insert(0, WORKERS)
import numpy_decode  # noqa: E402
import pav_worker  # noqa: E402


def triton_description():
    tree = ast.parse(open(os.path.join(WORKERS, "triton_decode.py")).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["DESCRIPTION"]:
            call = node.value
            names = {"__builtins__": {}, "list": list, "range": range}
            value = lambda n: eval(compile(ast.Expression(n), "triton_decode.py", "eval"), names)  # noqa: E731,S307
            return pav_worker.description(*[value(a) for a in call.args], **{k.arg: value(k.value) for k in call.keywords})
    sys.exit("numpy_as_triton.py: no DESCRIPTION = pav_worker.description(...) in triton_decode.py")


if __name__ == "__main__":
    kernel = numpy_decode.NumpyDecode()
    np.seterr(all="ignore")  # as numpy_decode.py: -inf - -inf in masked rows is handled there
    pav_worker.serve(pav_worker.Kernel(triton_description(), kernel.decode))
