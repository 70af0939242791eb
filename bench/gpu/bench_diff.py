#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Two or more pav_gpu_bench JSON files of one device call side by side.

    bench_diff.py BASE.json NEW.json [MORE.json ...]

Per configuration and variant: each file's call time and fraction of its own
read ceiling, the last file's time against the first's, the reduce's share of
the attention; then each q_len > 1 row's time against q_len 1 of the same
batch and variant, and the refreshes of batch 256 in a graph. Rows missing
from a file show '-'.
"""
import json
import re
import sys


def load(path):
    with open(path) as f:
        d = json.load(f)
    ceiling = d["read_ceiling"]["gbps"]
    rows = {}
    for c in d["configs"]:
        for v in c["variants"]:
            k = {x["kernel"]: x["time"]["median_ms"] for x in v.get("kernels", [])}
            attn = next((t for n, t in k.items() if n.startswith("attend")), None)
            rows[(c["name"], v["variant"])] = {
                "ms": v["call"]["median_ms"],
                "frac": v["achieved_gbps"] / ceiling,
                "reduce": k.get("reduce_kernel"),
                "attn": attn,
            }
    refresh = {(r["policy"], r["kv_heads"]): r["graph_per_refresh"]["median_ms"] * 1e3 for r in d.get("refresh_256", [])}
    return ceiling, rows, refresh


def main(paths):
    runs = [load(p) for p in paths]
    print("read ceilings (GB/s): " + ", ".join(f"{r[0]:.0f}" for r in runs))
    keys = []
    for _, rows, _ in runs:
        for k in rows:
            if k not in keys:
                keys.append(k)
    head = " | ".join(f"ms{i} (of ceiling)" for i in range(len(runs)))
    print(f"| config | variant | {head} | last/first | reduce/attention first -> last |")
    print("|---|---|" + "---|" * len(runs) + "---|---|")
    for k in keys:
        cells = []
        for _, rows, _ in runs:
            r = rows.get(k)
            cells.append(f"{r['ms']:.3f} ({100 * r['frac']:.1f}%)" if r else "-")
        first, last = runs[0][1].get(k), runs[-1][1].get(k)
        ratio = f"{last['ms'] / first['ms']:.3f}" if first and last else "-"

        def share(r):
            return f"{100 * r['reduce'] / r['attn']:.1f}%" if r and r["reduce"] and r["attn"] else "-"

        print(f"| {k[0]} | {k[1]} | " + " | ".join(cells) + f" | {ratio} | {share(first)} -> {share(last)} |")
    print("\nq_len > 1 against q_len 1 of the same batch and variant (first -> last file):")
    for k in keys:
        m = re.match(r"(.*)-q([2-9])$", k[0])
        if not m:
            continue
        base = (m.group(1) + "-q1", k[1])
        out = []
        for _, rows, _ in (runs[0], runs[-1]):
            r, b = rows.get(k), rows.get(base)
            out.append(f"{r['ms'] / b['ms']:.2f}x" if r and b else "-")
        print(f"  {k[0]} {k[1]}: {out[0]} -> {out[1]}")
    print("\nrefresh of batch 256 in a graph (us): " + "; ".join(
        f"{p} h{h}: " + " -> ".join(f"{r[2].get((p, h), float('nan')):.2f}" for r in runs)
        for (p, h) in runs[0][2]))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1:])
