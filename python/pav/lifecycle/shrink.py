# SPDX-License-Identifier: Apache-2.0
"""Shrinking a failing sequence: fewest steps first, then the smallest batches,
lengths, q_lens and draft depths, each candidate run through a fresh engine and
kept only when it still fails the same check."""
from pav.lifecycle.run import run

# smaller values worth trying per field, in order; booleans and optional fields go to 0
_NUMERIC = {"len": 1, "n": 1, "k": 1, "bs": 1, "q_len": 1, "req": 0, "dummy": 0, "eager": 0}
_BATCH = ("n", "bs", "dummy")


def _candidates(v, low):
    out = []
    for c in (low, v // 2, v - 1):
        if low <= c < v and c not in out:
            out.append(c)
    return out


def shrink(factory, steps, seed, check, shape=None, graphs=None, budget=600):
    """Return (steps, runs): the smallest sequence found that still fails `check`."""
    runs = 0

    def fails(cand):
        nonlocal runs
        runs += 1
        out = run(factory, cand, seed, shape, graphs)
        return out.first is not None and out.first.check == check, out

    ok, out = fails(steps)
    if not ok:
        return steps, runs
    steps = list(steps[:out.steps])           # nothing after the failing step matters
    changed = True
    while changed and runs < budget:
        changed = False
        size = max(1, len(steps) // 2)
        while size >= 1 and runs < budget:   # drop chunks, largest first
            i = 0
            while i < len(steps) and runs < budget:
                cand = steps[:i] + steps[i + size:]
                ok, out = fails(cand)
                if ok:
                    steps = cand[:out.steps]
                    changed = True
                else:
                    i += size
            size //= 2
        for cut in (lambda v: v // 2, lambda v: v - 1):   # batch sizes together: a capture and its replays
            if runs >= budget:
                break
            cand = [dict(st, **{f: max(1, cut(st[f])) for f in _BATCH if st.get(f)}) for st in steps]
            if cand != steps:
                ok, out = fails(cand)
                if ok:
                    steps = cand[:out.steps]
                    changed = True
        for i in range(len(steps)):           # then each field towards its floor
            for f, low in _NUMERIC.items():
                if i >= len(steps) or f not in steps[i]:
                    continue
                v = int(steps[i][f])
                for c in _candidates(v, low):
                    if runs >= budget:
                        break
                    cand = [dict(s) for s in steps]
                    cand[i][f] = type(steps[i][f])(c) if not isinstance(steps[i][f], bool) else bool(c)
                    ok, out = fails(cand)
                    if ok:
                        steps = cand[:out.steps]
                        changed = True
                        break
    return steps, runs
