# SPDX-License-Identifier: Apache-2.0
"""The sequence file: a versioned JSON document that replays a lifecycle
sequence (its seed, the pool's shape, the steps, and the finding it showed).

    {"format": "pav-lifecycle-sequence", "version": 1, "seed": 7,
     "shape": {...}, "engine": {...}, "steps": [{"op": "admit", "len": 9}, ...],
     "finding": {"check": "output", "step": 5, "message": "..."}}

`load` refuses anything else with a message naming the field at fault.
"""
import json

from pav.lifecycle.run import OPS, run
from pav.lifecycle.world import Shape

FORMAT = "pav-lifecycle-sequence"
VERSION = 1


class SequenceError(ValueError):
    pass


def save(path, seed, steps, shape=None, engine=None, finding=None):
    shape = shape or Shape()
    doc = {"format": FORMAT, "version": VERSION, "seed": seed, "shape": shape.to_json(),
           "engine": engine or {}, "steps": steps, "finding": finding.to_json() if finding else None}
    validate(doc, path)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def validate(doc, where="sequence"):
    def bad(msg):
        raise SequenceError(f"{where}: {msg}")

    if not isinstance(doc, dict):
        bad(f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        bad(f"'format' must be '{FORMAT}', got {doc.get('format')!r}")
    if doc.get("version") != VERSION:
        bad(f"'version' {doc.get('version')!r} is not one this pav reads (it reads {VERSION})")
    known = {"format", "version", "seed", "shape", "engine", "steps", "finding"}
    extra = sorted(set(doc) - known)
    if extra:
        bad(f"unknown field(s) {', '.join(extra)}")
    if not _int(doc.get("seed")) or doc["seed"] < 0:
        bad(f"'seed' must be an integer >= 0, got {doc.get('seed')!r}")
    if not isinstance(doc.get("shape"), dict):
        bad("'shape' must be an object")
    try:
        Shape(**doc["shape"])
    except (TypeError, ValueError) as e:
        bad(f"'shape': {e}")
    if not isinstance(doc.get("engine", {}), dict):
        bad("'engine' must be an object")
    steps = doc.get("steps")
    if not isinstance(steps, list):
        bad("'steps' must be a list")
    for i, st in enumerate(steps):
        if not isinstance(st, dict):
            bad(f"step {i}: expected an object, got {type(st).__name__}")
        op = st.get("op")
        if op not in OPS:
            bad(f"step {i}: unknown op {op!r} (known: {', '.join(OPS)})")
        fields = OPS[op]
        for f in sorted(set(st) - set(fields) - {"op"}):
            bad(f"step {i} ({op}): unknown field '{f}'")
        for f, (lo, hi) in fields.items():
            if f not in st:
                if f in ("eager", "dummy"):
                    continue
                bad(f"step {i} ({op}): missing field '{f}'")
            v = st[f]
            if f == "eager":
                if not isinstance(v, bool):
                    bad(f"step {i} ({op}): '{f}' must be true or false, got {v!r}")
                continue
            if not _int(v):
                bad(f"step {i} ({op}): '{f}' must be an integer, got {v!r}")
            if f == "dummy" and v == 0:
                continue
            if not lo <= v <= hi:
                bad(f"step {i} ({op}): '{f}' = {v} is outside {lo}..{hi}")
    fd = doc.get("finding")
    if fd is not None and (not isinstance(fd, dict) or not isinstance(fd.get("check"), str)):
        bad("'finding' must be null or an object with a 'check' string")
    return doc


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise SequenceError(f"{path}: not JSON ({e})") from None
    return validate(doc, path)


def replay(path, factory, graphs=None):
    """Replay a saved sequence through a fresh engine from `factory`. Returns (outcome, label):
    'reproduced' (it fails the saved check again), 'passed' (it passes), or 'not reproduced'
    (it was saved failing and now fails differently or not at all)."""
    doc = load(path)
    out = run(factory, doc["steps"], doc["seed"], Shape(**doc["shape"]), graphs)
    saved = doc.get("finding")
    if out.first is not None and saved and out.first.check == saved["check"]:
        return out, "reproduced"
    if out.passed:
        return out, "passed" if not saved else "not reproduced"
    return out, "not reproduced" if saved else "failed"
