#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Put the reference engine under pav.lifecycle.

    python3 examples/engine/run.py [--defect NAME] [--seed N] [--rounds N] [--steps N] [--save FILE]
                                   [--torch DEVICE]
    python3 examples/engine/run.py --replay FILE [--defect NAME] [--torch DEVICE]

--torch cuda runs the torch kernel with its graphs captured by torch.cuda.graph
and pav's KV pool on the device; --torch cpu runs the torch kernel on the CPU
with graph semantics emulated.

Draws `rounds` sequences from `seed` on; on the first failing one, shrinks it,
saves it (--save, default lifecycle-failure.json) and replays it through a
fresh engine. Exit status: 0 all passed, 1 a finding, 2 bad usage.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from pav import lifecycle  # noqa: E402

from engine_adapter import factory  # noqa: E402
from engine_backend import DEFECTS  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--defect", choices=sorted(DEFECTS), help="switch in one lifecycle bug")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--save", default="lifecycle-failure.json")
    ap.add_argument("--replay", metavar="FILE")
    ap.add_argument("--torch", metavar="DEVICE", help="the torch kernel on DEVICE (cpu, cuda, cuda:1, ...)")
    a = ap.parse_args(argv)
    graphs, options = None, {}
    if a.torch:
        from engine_kernel_torch import TorchKernel
        options["kernel"] = TorchKernel(a.torch)
        graphs = lifecycle.TorchGraphs(a.torch) if a.torch.startswith("cuda") else \
            lifecycle.EmulatedGraphs(pool_device=a.torch)
        print(f"pav lifecycle: torch kernel on {a.torch}, graphs: {graphs.name}")
    make = factory(a.defect, **options)
    if a.replay:
        try:
            out, label = lifecycle.replay(a.replay, make, graphs)
        except lifecycle.SequenceError as e:
            print(f"pav lifecycle: {e}", file=sys.stderr)
            return 2
        print(f"pav lifecycle: replay of {a.replay}: {label}"
              + (f": step {out.first.step} [{out.first.check}] {out.first.message}" if out.first else ""))
        return 0 if out.passed else 1
    t0 = time.perf_counter()
    seed, steps, res = lifecycle.explore(make, a.seed, a.steps, rounds=a.rounds, graphs=graphs)
    took = time.perf_counter() - t0
    if seed is None:
        n = sum(o.steps for o in res)
        print(f"pav lifecycle: {len(res)} sequences, {n} steps passed in {took:.1f} s ({n / took:.0f} steps/s)")
        return 0
    f = res.first
    print(f"pav lifecycle: seed {seed} fails at step {f.step} [{f.check}] after {took:.2f} s: {f.message}")
    small, runs = lifecycle.shrink(make, steps, seed, f.check, graphs=graphs)
    out = lifecycle.run(make, small, seed, graphs=graphs)
    lifecycle.save(a.save, seed, small, engine={"example": "reference engine", "defect": a.defect},
                   finding=out.first)
    print(f"pav lifecycle: shrunk to {len(small)} steps in {runs} runs, saved {a.save}:")
    for i, st in enumerate(small):
        print(f"  {i}: " + " ".join(f"{k}={v}" for k, v in st.items()))
    print(f"  -> [{out.first.check}] {out.first.message}")
    again, label = lifecycle.replay(a.save, factory(a.defect, **options), graphs)
    print(f"pav lifecycle: replay through a fresh engine: {label}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
