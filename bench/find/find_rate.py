#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How often, and how soon, pav's decode search finds each defect of an example worker.

    bench/find/find_rate.py PAV --worker 'exec:CMD' [--defect NAME ...] [--seeds 20] [--cases 900]
                            [--jobs 2] [--regions] [--shapes N] [--json OUT]

For each defect (all that `CMD --list-defects` prints unless --defect names some) and N base
seeds 1 + 1000003 i (i = 0..N-1; case k of base seed B has seed B + k, so nearby base seeds would
run nearly the same cases), runs `pav fuzz --kernel 'CMD --defect NAME' --property decode --seed S
--cases CASES --shrink-tries 0` and records the index of the first failing case. With --regions
(`pav fuzz --regions`) the calls are drawn as `pav verify`'s decode search draws them from its
--seed, so a failure at case k is one that `pav verify --seed S` reaches once its search has run
k + 1 calls: with the default 40 s, the correct NumPy worker gets about 900 on the 2-core
development machine, about 470 when the machine is shared. With --shapes N (`pav fuzz --shapes
N`) every call is in one of N shapes drawn from the base seed, as `pav verify` draws for a kernel
that compiles per shape. Prints, per defect, how many seeds
found it within CASES, the median and worst index, and the seeds that did not; --json writes
every run. Exit 0.
"""
import argparse
import concurrent.futures
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def one(pav, kernel, seed, cases, regions, shapes):
    with tempfile.TemporaryDirectory() as save:
        args = [pav, "fuzz", "--kernel", kernel, "--property", "decode", "--seed", str(seed), "--cases", str(cases),
                "--shrink-tries", "0", "--save", save, "--json", "--quiet"] + (["--regions"] if regions else []) \
            + (["--shapes", str(shapes)] if shapes else [])
        t0 = time.monotonic()
        r = subprocess.run(args, capture_output=True, text=True)
        took = time.monotonic() - t0
    if r.returncode not in (0, 1):
        return {"seed": seed, "error": f"exit {r.returncode}: {r.stderr[-400:]}", "seconds": took}
    run = json.loads(r.stdout)["runs"][0]
    found = run.get("failure") is not None
    # Case k of seed base B (one job, one shard) has seed B + k.
    return {"seed": seed, "found": found, "case": run["failure"]["seed"] - seed if found else None,
            "cases": run["cases"], "seconds": took}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pav")
    ap.add_argument("--worker", required=True, help="the worker's --kernel text, without --defect")
    ap.add_argument("--defect", action="append", default=[])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--cases", type=int, default=900)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--regions", action="store_true",
                    help="draw as pav verify does: half the calls from the decode regions (pav fuzz --regions)")
    ap.add_argument("--shapes", type=int, default=0,
                    help="every call in one of N shapes drawn from the base seed (pav fuzz --shapes N)")
    ap.add_argument("--json", help="write the results as JSON to this file")
    o = ap.parse_args()
    defects = o.defect
    if not defects:
        cmd = shlex.split(o.worker.split(":", 1)[1]) + ["--list-defects"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        defects = [line.split()[0] for line in out.splitlines() if line.strip() and not line.startswith(" ")]
    results = {}
    with concurrent.futures.ThreadPoolExecutor(o.jobs) as pool:
        for d in defects:
            kernel = f"{o.worker} --defect {d}"
            seeds = [1 + 1000003 * i for i in range(o.seeds)]
            runs = list(pool.map(lambda s: one(o.pav, kernel, s, o.cases, o.regions, o.shapes), seeds))
            results[d] = runs
            at = [r["case"] for r in runs if r.get("found")]
            errors = [r for r in runs if "error" in r]
            print(f"{d:32s} found at {len(at):2d} of {len(runs)} seeds within {o.cases} cases; case index median "
                  f"{statistics.median(at) if at else '-'}, worst {max(at) if at else '-'}; seeds not found "
                  f"{[r['seed'] for r in runs if not r.get('found') and 'error' not in r]}"
                  f"{'; ERRORS ' + str(errors) if errors else ''}", flush=True)
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"worker": o.worker, "seeds": o.seeds, "cases": o.cases, "regions": o.regions, "shapes": o.shapes,
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
