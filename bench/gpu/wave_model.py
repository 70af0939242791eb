#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A model of the planned attention's time from its plan alone, fitted to a GPU bench run.

    wave_model.py fit BENCH.json [--rows R] [--pav PAV]
    wave_model.py explore BENCH.json [--rows R] [--config NAME,...] [--budgets 2,4,8] [--pav PAV]

The attention launches one block per task (per KV head); `slots` of them are resident at once
(two per SM), and a freed slot takes the next block in launch order. The model shares the DRAM:
while n blocks run, each moves min(r_max, B / n) tiles per microsecond, B the aggregate rate
and r_max a lone block's. A block of w tiles costs w + o (o: its fixed cost, in tiles). Plans
come from `pav plan` (the planner itself, not a copy of it); uniform splits from the split rule.

fit: B, r_max / (B / slots) and o by least squares on log time over the bench's q_len-1 rows of
R query rows per pass (G x q_len; default 8), each row's measured attention against the model.
explore: the fitted model over workgroup budgets and three launch orders of the same tasks:
`head` (pav's: all of head 0's tasks, then head 1's), `task` (task i of every head, then i + 1)
and `longest` (every block by cost, longest first), beside the bound sum(w + o) / B.
"""
import argparse
import heapq
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TILE = 256  # tokens per tile (kernels/planner.hpp)


def ceil_div(a, b):
    return -(-a // b)


def tiles_of(n):
    return ceil_div(n, TILE) if n > 0 else 0


def planned_costs(pav, lens, hkv, cu, budget, policy):
    """Tiles of each plan row (padding rows 0), from `pav plan`."""
    out = subprocess.run([pav, "plan", "--lengths", ",".join(map(str, lens)), "--kv-heads", str(hkv), "--cu",
                          str(cu), "--budget", str(budget), "--policy", policy, "--json"],
                         capture_output=True, text=True, check=True).stdout
    return [w[2] - w[1] for w in json.loads(out)["work_info"]]


def uniform_blocks(lens, hkv, splits):
    """Tiles of each uniform block in launch order: slot (seq * Hkv + h) * splits + k."""
    blocks = []
    for n in lens:
        t = tiles_of(n)
        per = ceil_div(max(t, 1), splits)
        row = [max(0, min((k + 1) * per, t) - min(k * per, t)) for k in range(splits)]
        blocks += row * hkv
    return blocks


def ordered(costs, hkv, order):
    if order == "head":
        return [w for _ in range(hkv) for w in costs]
    if order == "task":
        return [w for w in costs for _ in range(hkv)]
    if order == "longest":
        return sorted((w for _ in range(hkv) for w in costs), reverse=True)
    raise ValueError(order)


def simulate(blocks, slots, rate, r_max, overhead):
    """Microseconds until the last block ends; a padding block (0 tiles) costs almost nothing."""
    work = [w + overhead if w > 0 else 0.02 for w in blocks]
    t, done, active, nxt = 0.0, 0.0, [], 0
    # active: a heap of the work units each running block will have done when it ends
    while nxt < len(work) and len(active) < slots:
        heapq.heappush(active, done + work[nxt])
        nxt += 1
    while active:
        step = min(r_max, rate / len(active))
        end = heapq.heappop(active)
        t += (end - done) / step
        done = end
        while active and active[0] <= done + 1e-9:
            heapq.heappop(active)
        while nxt < len(work) and len(active) < slots:
            heapq.heappush(active, done + work[nxt])
            nxt += 1
    return t


def bench_rows(bench, rows, pav, cu):
    """(config, variant, blocks in launch order, measured attention us) of the q_len-1 rows."""
    out = []
    for c in bench["configs"]:
        if c["q_len"] != 1 or c["group"] * c["q_len"] != rows:
            continue
        for v in c["variants"]:
            att = [k for k in v["kernels"] if k["kernel"].startswith("attend")]
            if not att:
                continue
            if v["variant"] == "uniform":
                blocks = uniform_blocks(c["lens"], c["kv_heads"], v["splits"])
            else:
                costs = planned_costs(pav, c["lens"], c["kv_heads"], cu, v["budget"], v["variant"].split("@")[0])
                blocks = ordered(costs, c["kv_heads"], "head")
            out.append((c["name"], v["variant"], blocks, att[0]["time"]["median_ms"] * 1e3))
    return out


def fit(rows, slots):
    best = None
    for rate in (r / 2 for r in range(20, 160, 2)):
        for ratio in (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.5, 3.0):
            for overhead in (0.0, 0.5, 1.0, 1.5, 2.0):
                r_max = rate / slots * ratio
                err = [math.log(simulate(b, slots, rate, r_max, overhead) / m) for _, _, b, m in rows]
                rms = math.sqrt(sum(e * e for e in err) / len(err))
                if best is None or rms < best[0]:
                    best = (rms, rate, ratio, overhead)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("fit", "explore"))
    ap.add_argument("bench", help="a pav_gpu_bench --json file")
    ap.add_argument("--rows", type=int, default=8, help="query rows per pass (G x q_len) of the rows fitted")
    ap.add_argument("--config", default="", help="explore: configurations (default: every uneven one fitted)")
    ap.add_argument("--budgets", default="2,3,4,6,8,12,16", help="explore: workgroup budgets in multiples of SMs")
    ap.add_argument("--pav", default=os.path.join(ROOT, "build", "cpu", "pav"))
    ap.add_argument("--cu", type=int, default=132)
    ap.add_argument("--blocks-per-sm", type=int, default=2)
    a = ap.parse_args()
    with open(a.bench) as f:
        bench = json.load(f)
    slots = a.cu * a.blocks_per_sm
    rows = bench_rows(bench, a.rows, a.pav, a.cu)
    if not rows:
        sys.exit(f"wave_model: no q_len-1 rows of {a.rows} query rows in {a.bench}")
    rms, rate, ratio, overhead = fit(rows, slots)
    r_max = rate / slots * ratio
    print(f"fit over {len(rows)} rows of {a.rows} query rows: B {rate:.1f} tiles/us "
          f"({rate * TILE * 128 * 2 / 1e3:.0f} GB/s of fp8 K+V at D 128), a lone block {ratio:.1f}x its share "
          f"of B, fixed cost {overhead:.1f} tiles per block; rms error {100 * rms:.1f}% (log)")
    if a.mode == "fit":
        print("| config | variant | blocks | measured us | model us | model / measured |\n|---|---|---|---|---|---|")
        for name, variant, blocks, measured in rows:
            m = simulate(blocks, slots, rate, r_max, overhead)
            print(f"| {name} | {variant} | {len(blocks)} | {measured:.0f} | {m:.0f} | {m / measured:.2f} |")
        return
    names = [n for n in a.config.split(",") if n]
    print("| config | budget | tasks per head | head order us | task order us | longest first us | bound us |")
    print("|---|---|---|---|---|---|---|")
    for c in bench["configs"]:
        if c["q_len"] != 1 or c["group"] != a.rows:
            continue
        if names and c["name"] not in names:
            continue
        if not names and max(c["lens"]) == min(c["lens"]):
            continue
        hkv = c["kv_heads"]
        for mult in (int(x) for x in a.budgets.split(",")):
            costs = planned_costs(a.pav, c["lens"], hkv, a.cu, mult * a.cu, "balanced")
            times = [simulate(ordered(costs, hkv, o), slots, rate, r_max, overhead) for o in ("head", "task", "longest")]
            bound = sum(w + overhead for w in costs if w > 0) * hkv / rate
            tasks = sum(1 for w in costs if w > 0)
            print(f"| {c['name']} | {mult} x SMs | {tasks} | {times[0]:.0f} | {times[1]:.0f} | {times[2]:.0f} | {bound:.0f} |")


if __name__ == "__main__":
    main()
