#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Put the reference engine under pav.lifecycle.

    python3 examples/engine/run.py [--defect NAME] [--torch DEVICE] [--seed N] [--rounds N]
                                   [--steps N] [--save FILE] [--json]
    python3 examples/engine/run.py --replay FILE [--defect NAME] [--torch DEVICE] [--json]

The options and the exit status are those of `python3 -m pav.lifecycle`, plus
--defect (switch in one of the engine's lifecycle bugs) and --torch DEVICE (the
torch kernel: on cuda with graphs captured by torch.cuda.graph and pav's KV
pool on the device; on cpu with graph semantics emulated).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from pav import lifecycle  # noqa: E402
from pav.lifecycle.__main__ import UsageError, check, parser  # noqa: E402

from engine_adapter import factory, torch_setup  # noqa: E402
from engine_backend import DEFECTS  # noqa: E402


def main(argv=None):
    ap = parser(prog="examples/engine/run.py", engine=False)
    ap.add_argument("--defect", choices=sorted(DEFECTS), help="switch in one lifecycle bug")
    ap.add_argument("--torch", metavar="DEVICE", help="the torch kernel on DEVICE (cpu, cuda, cuda:1, ...)")
    a = ap.parse_args(argv)
    graphs, options = None, {}
    if a.torch:
        options, graphs = torch_setup(a.torch)
        if not a.json:
            print(f"pav lifecycle: torch kernel on {a.torch}, graphs: {graphs.name}")
    try:
        return check(a, factory(a.defect, **options), graphs,
                     engine_info={"example": "reference engine", "defect": a.defect, "torch": a.torch})
    except (UsageError, lifecycle.SequenceError) as e:
        print(f"pav lifecycle: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
