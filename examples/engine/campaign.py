#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The reference engine's whole lifecycle campaign, as the figures in docs/verify-your-engine.md.

    python3 examples/engine/campaign.py [--torch DEVICE] [--seed N] [--rounds N] [--steps N]
                                        [--out DIR] [--json] [--defect NAME ...]

1. the correct engine: `rounds` sequences of `steps` steps must pass (steps per second);
2. each defect (all of them unless --defect names some): found from the same seeds, shrunk,
   saved to DIR/NAME.json, replayed through a fresh engine carrying the defect (it must
   reproduce) and through a fresh correct engine (it must pass: the sequence blames the
   defect, not the check).

A table for people (or one JSON object with --json) and exit 0 only when every line holds;
1 when any does not; 2 on bad usage. --torch cuda runs the torch kernel with real CUDA graphs
(torch.cuda.graph) and pav's KV pool on the device; without --torch, the NumPy kernel with
graph semantics emulated.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from pav import lifecycle  # noqa: E402
from pav.lifecycle.__main__ import hunt  # noqa: E402

from engine_adapter import factory, torch_setup  # noqa: E402
from engine_backend import DEFECTS  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(prog="examples/engine/campaign.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--torch", metavar="DEVICE", help="the torch kernel on DEVICE (cpu, cuda, ...)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--out", metavar="DIR", help="where the shrunk sequences are saved (default: a temporary "
                                                 "folder, removed)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--defect", action="append", choices=sorted(DEFECTS), help="only these defects (repeatable)")
    a = ap.parse_args(argv)
    if a.seed < 0 or a.rounds < 1 or a.steps < 1:
        print("campaign: --seed must be >= 0, --rounds and --steps >= 1", file=sys.stderr)
        return 2
    options, graphs = torch_setup(a.torch) if a.torch else ({}, None)
    graphs_name = graphs.name if graphs else lifecycle.EmulatedGraphs().name
    out_dir = a.out or tempfile.mkdtemp(prefix="pav-lifecycle-campaign-")
    os.makedirs(out_dir, exist_ok=True)
    say = (lambda *_: None) if a.json else (lambda line: print(line, flush=True))
    quiet = lambda *_: None  # noqa: E731
    info = {"example": "reference engine", "torch": a.torch}
    say(f"campaign: kernel {'torch on ' + a.torch if a.torch else 'numpy'}, graphs: {graphs_name}; seeds "
        f"{a.seed}..{a.seed + a.rounds - 1}, {a.steps} steps each; sequences saved under {out_dir}")

    t0 = time.perf_counter()
    correct = hunt(factory(None, **options), a.seed, a.steps, a.rounds, graphs,
                   os.path.join(out_dir, "correct-engine.json"), dict(info, defect=None), log=quiet)
    problems = []
    if correct["passed"]:
        say(f"correct engine: {correct['sequences']} sequences, {correct['steps']} steps passed in "
            f"{correct['seconds']:.1f} s ({correct['steps_per_second']:.0f} steps/s)")
    else:
        problems.append("the correct engine failed")
        f = correct["finding"]
        say(f"correct engine: FAIL seed {correct['seed']} step {f['step']} [{f['check']}] {f['message']}; "
            f"saved {correct['saved']}")

    rows = []
    say(f"{'defect':32} {'found':>8} {'at step':>7} {'shrunk':>6} {'shrink':>8}  {'check':27} replay / correct")
    for name in a.defect or sorted(DEFECTS):
        path = os.path.join(out_dir, f"{name}.json")
        r = hunt(factory(name, **options), a.seed, a.steps, a.rounds, graphs, path, dict(info, defect=name),
                 log=quiet)
        row = {"defect": name, "found": not r["passed"]}
        if r["passed"]:
            row.update(steps=r["steps"], seconds=r["seconds"])
            problems.append(f"{name}: not found in {r['sequences']} sequences")
            say(f"{name:32} {'NOT FOUND':>8} ({r['steps']} steps, {r['seconds']:.1f} s)")
        else:
            fresh, label = lifecycle.replay(path, factory(None, **options), graphs)
            row.update({k: r[k] for k in ("seed", "found_at_step", "seconds_to_find", "shrink_runs",
                                          "seconds_to_shrink", "replay", "saved")},
                       shrunk_steps=len(r["shrunk_steps"]), check=r["shrunk_finding"]["check"],
                       correct_engine_replay="passes" if fresh.passed else
                       f"fails: [{fresh.first.check}] {fresh.first.message}")
            if r["replay"] != "reproduced":
                problems.append(f"{name}: its saved sequence did not reproduce ({r['replay']})")
            if not fresh.passed:
                problems.append(f"{name}: the correct engine fails its saved sequence ({row['correct_engine_replay']})")
            say(f"{name:32} {r['seconds_to_find']:7.2f}s {r['found_at_step']:7d} {len(r['shrunk_steps']):6d} "
                f"{r['seconds_to_shrink']:7.2f}s  {row['check']:27} {r['replay']} / {row['correct_engine_replay']}")
        rows.append(row)
    took = time.perf_counter() - t0
    doc = {"kernel": f"torch:{a.torch}" if a.torch else "numpy", "graphs": graphs_name, "seed": a.seed,
           "rounds": a.rounds, "steps": a.steps, "correct": correct, "defects": rows, "seconds": round(took, 1),
           "problems": problems, "passed": not problems}
    if a.json:
        print(json.dumps(doc))
    else:
        found = sum(r["found"] for r in rows)
        say(f"campaign: {found} of {len(rows)} defects found, shrunk, saved and replayed in {took:.1f} s"
            + ("" if not problems else "; PROBLEMS: " + "; ".join(problems)))
    if not a.out:
        shutil.rmtree(out_dir, ignore_errors=True)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
