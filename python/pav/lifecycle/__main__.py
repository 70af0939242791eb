# SPDX-License-Identifier: Apache-2.0
"""python3 -m pav.lifecycle: put an engine's adapter under the lifecycle check.

    python3 -m pav.lifecycle --engine FILE.py:FUNC [--seed N] [--rounds N] [--steps N]
                             [--save FILE] [--json]
    python3 -m pav.lifecycle --engine FILE.py:FUNC --replay FILE [--json]

FUNC() returns the factory pav calls for each fresh engine, (hooks, pool, shape) -> adapter.
Draws `rounds` sequences from `seed` on (each seed printed); on the first failing one it shrinks
it, saves it (--save, default lifecycle-failure.json) and replays the saved file through a fresh
engine. --json prints one JSON object instead of the lines for people. Exit status: 0 every
sequence passed (or the replay passed), 1 a finding, 2 bad usage or a malformed file.
"""
import argparse
import importlib.util
import json
import os
import sys
import time

from pav.lifecycle.run import explore, run
from pav.lifecycle.seqfile import SequenceError, replay, save
from pav.lifecycle.shrink import shrink


class UsageError(Exception):
    pass


def load_factory(spec):
    """FILE.py:FUNC -> FUNC(), the engine factory."""
    path, sep, func = spec.rpartition(":")
    if not sep or not path or not func:
        raise UsageError(f"--engine wants FILE.py:FUNC, got {spec!r}")
    if not os.path.isfile(path):
        raise UsageError(f"--engine: no file {path!r}")
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    mod_spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    if not callable(getattr(mod, func, None)):
        raise UsageError(f"--engine: {path} has no function {func!r}")
    return getattr(mod, func)()


def parser(prog="python3 -m pav.lifecycle", engine=True):
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    if engine:
        ap.add_argument("--engine", required=True, metavar="FILE.py:FUNC",
                        help="FUNC() returns the factory (hooks, pool, shape) -> adapter")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--save", default="lifecycle-failure.json")
    ap.add_argument("--replay", metavar="FILE")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return ap


def check(a, make, graphs=None, engine_info=None, out=print):
    """Run what the parsed arguments `a` ask for; return the exit status."""
    for name in ("seed", "rounds", "steps"):
        if getattr(a, name) < (0 if name == "seed" else 1):
            raise UsageError(f"--{name} must be >= {0 if name == 'seed' else 1}, got {getattr(a, name)}")
    quiet = a.json

    def say(line):
        if not quiet:
            out(line)

    if a.replay:
        res, label = replay(a.replay, make, graphs)
        if a.json:
            out(json.dumps({"replay": a.replay, "label": label, "passed": res.passed, "steps": res.steps,
                            "findings": [f.to_json() for f in res.findings]}))
        else:
            say(f"pav lifecycle: replay of {a.replay}: {label}"
                + (f": step {res.first.step} [{res.first.check}] {res.first.message}" if res.first else ""))
        return 0 if res.passed else 1
    r = hunt(make, a.seed, a.steps, a.rounds, graphs, a.save, engine_info, log=(lambda *_: None) if quiet else out)
    if a.json:
        out(json.dumps(r))
    if r["passed"]:
        say(f"pav lifecycle: {r['sequences']} sequences, {r['steps']} steps passed in {r['seconds']:.1f} s "
            f"({r['steps_per_second']:.0f} steps/s)")
        return 0
    f = r["finding"]
    say(f"pav lifecycle: seed {r['seed']} fails at step {f['step']} [{f['check']}] after "
        f"{r['seconds_to_find']:.2f} s: {f['message']}")
    say(f"pav lifecycle: shrunk to {len(r['shrunk_steps'])} steps in {r['shrink_runs']} runs, saved {r['saved']}:")
    for i, st in enumerate(r["shrunk_steps"]):
        say(f"  {i}: " + " ".join(f"{k}={v}" for k, v in st.items()))
    say(f"  -> [{r['shrunk_finding']['check']}] {r['shrunk_finding']['message']}")
    say(f"pav lifecycle: replay through a fresh engine: {r['replay']}")
    return 1


def hunt(make, seed, n_steps, rounds, graphs, save_path, engine_info=None, log=print):
    """Draw `rounds` sequences from `seed` on; on the first that fails, shrink it, save it to
    `save_path` and replay the file through a fresh engine. Returns a JSON-ready dict: `passed`;
    when it passed, seeds, sequences, steps, seconds and steps_per_second; when it failed, seed,
    found_at_step, seconds_to_find, finding, shrunk_steps, shrink_runs, seconds_to_shrink,
    shrunk_finding, saved and replay (the replay's label)."""
    t0 = time.perf_counter()
    found, steps, res = explore(make, seed, n_steps, rounds=rounds, graphs=graphs, log=log)
    took = time.perf_counter() - t0
    if found is None:
        n = sum(o.steps for o in res)
        return {"passed": True, "seeds": [seed, seed + rounds - 1], "sequences": len(res), "steps": n,
                "seconds": round(took, 3), "steps_per_second": round(n / took, 1)}
    f = res.first
    t1 = time.perf_counter()
    small, runs = shrink(make, steps, found, f.check, graphs=graphs)
    again = run(make, small, found, graphs=graphs)
    save(save_path, found, small, engine=engine_info, finding=again.first)
    shrunk = time.perf_counter() - t1
    _, label = replay(save_path, make, graphs)
    return {"passed": False, "seed": found, "found_at_step": f.step, "seconds_to_find": round(took, 3),
            "finding": f.to_json(), "shrunk_steps": small, "shrink_runs": runs,
            "seconds_to_shrink": round(shrunk, 3), "shrunk_finding": again.first.to_json(), "saved": save_path,
            "replay": label}


def main(argv=None):
    a = parser().parse_args(argv)
    try:
        make = load_factory(a.engine)
        return check(a, make, engine_info={"engine": a.engine})
    except (UsageError, SequenceError) as e:
        print(f"pav lifecycle: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
