#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Stale scratch: poisoned by pav, found on the call that reads it; undeclared, saved as the sequence that fails.

    stale_scratch.py PAV PYTHON WORKER WORKDIR

The NumPy worker's stale-empty-split defect merges a request's empty
partitions from scratch an earlier call left.
1. The worker declares its scratch ("scratch": true): pav asks it to poison
   the scratch before every call, so the stale read is NaN on the call that
   makes it. pav fuzz finds it, and the shrunk case fails again in a fresh
   worker (`fresh`), by pav replay too.
2. --no-scratch-poison: undeclared, one call alone in a fresh worker is
   right. pav fuzz must still find it (exit 1), see that a fresh worker passes
   the shrunk case, find the earlier call it needs and save the sequence
   (`sequence`, pav-case/2 with a prelude of at most 4 calls); pav replay and
   pav fuzz --replay of it in a fresh worker fail with the saved failure, and
   the correct worker passes the whole sequence.
3. scratch-pool-exhausted reads stale slots only once a pool of fresh buffers
   is used up. With a pool of 100 calls, within the 256 pav keeps, the case is
   saved with a prelude of 100 to 256 calls (`sequence`) that fails again in a
   fresh worker and passes through the correct one. With a pool of 300, past
   what pav keeps: labelled `state-dependent` (reproduced false, no case id) in
   its report, its log and the saved case; pav replay of that case carries the
   label (JSON and text).
4. A defect that needs no earlier call (causal-off-by-one) is `fresh`.
Every command and its output is printed.
"""
import glob
import json
import os
import shutil
import subprocess
import sys


def run(args):
    print("+ " + " ".join(args), flush=True)
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    print(r.stdout[-3000:] + r.stderr[-3000:] + f"[exit {r.returncode}]", flush=True)
    return r


def fail(why):
    print(f"stale_scratch: FAIL: {why}")
    sys.exit(1)


KEPT_CALLS = 256  # kMaxPrelude (properties/case/case_format.hpp): the earlier calls pav keeps and saves


def fuzz(pav, kernel, work, cases, extra=()):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    r = run([pav, "fuzz", "--kernel", kernel, "--property", "decode", "--cases", str(cases), "--seed", "1",
             "--save", work, "--shrink-tries", "400", "--json", *extra])
    if r.returncode != 1:
        fail(f"pav fuzz exited {r.returncode}, expected 1 (the defect found)")
    failure = json.loads(r.stdout)["runs"][0]["failure"]
    files = glob.glob(os.path.join(work, "*.json"))
    if len(files) != 1:
        fail(f"expected one saved case in {work}, found {len(files)}")
    return failure, files[0], r.stderr


def main():
    if len(sys.argv) != 5:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    pav, python, worker, work = sys.argv[1:]
    kernel = f"exec:{python} {worker} --defect "

    f, case, _ = fuzz(pav, kernel + "stale-empty-split", os.path.join(work, "poisoned"), 400)
    if (f["reproduced"], f["reproduction"]) != (True, "fresh") or "NaN" not in f["first_message"]:
        fail(f"stale-empty-split with its scratch poisoned: reproduced {f['reproduced']}, reproduction "
             f"{f['reproduction']}, first failure {f['first_message'][:200]!r}; expected a NaN output seen again "
             "in a fresh worker")
    r = run([pav, "replay", case, "--trust-case-kernel"])
    if r.returncode != 1:
        fail(f"pav replay of the poisoned-scratch case in a fresh worker exited {r.returncode}, expected 1")

    f, case, log = fuzz(pav, kernel + "stale-empty-split --no-scratch-poison", os.path.join(work, "stale"), 400)
    if (f["reproduced"], f["reproduction"]) != (True, "sequence") or not f["case_id"] or f["earlier_calls"] < 1:
        fail(f"stale-empty-split undeclared: reproduced {f['reproduced']}, reproduction {f['reproduction']}, "
             f"earlier_calls {f['earlier_calls']}, case_id {f['case_id']}; expected a sequence of at least one "
             "earlier call that fails again from a fresh worker")
    if "reproduction: sequence" not in log:
        fail("the log does not say sequence")
    saved = json.load(open(case))
    meta = saved["meta"]
    if saved["format"] != "pav-case/2" or len(saved.get("prelude", [])) != f["earlier_calls"]:
        fail(f"the saved case is {saved['format']} with {len(saved.get('prelude', []))} earlier calls; expected "
             f"pav-case/2 with {f['earlier_calls']}")
    if f["earlier_calls"] > 4:
        fail(f"the sequence was not shrunk: {f['earlier_calls']} earlier calls kept")
    if (meta.get("reproduced"), meta.get("reproduction")) != (True, "sequence"):
        fail(f"the saved case's meta says reproduced {meta.get('reproduced')}, reproduction "
             f"{meta.get('reproduction')}")
    # A fresh worker replays the sequence to the same failure; the correct worker passes it.
    for how in (["pav", "replay"], ["pav", "fuzz", "--replay"]):
        r = run([pav] + how[1:] + [case, "--trust-case-kernel"])
        if r.returncode != 1 or meta["message"] not in r.stdout + r.stderr:
            fail(f"{' '.join(how)} of the sequence in a fresh worker: exit {r.returncode}, expected 1 with the "
                 f"saved failure {meta['message'][:120]!r}")
    r = run([pav, "replay", case, "--kernel", f"exec:{python} {worker} --no-scratch-poison", "--json"])
    doc = json.loads(r.stdout)["cases"][0]
    if r.returncode != 0 or not doc["passed"] or doc["earlier_calls"] != f["earlier_calls"]:
        fail(f"the sequence through the correct worker: exit {r.returncode}, passed {doc['passed']}, earlier_calls "
             f"{doc['earlier_calls']}; expected a pass of the whole sequence")

    # A pool of 100 fresh buffers used up first: the sequence that fails again
    # is the 100 calls that use it up (or more, where the search stops at its
    # limit) and the case. Shrinking is held to 30 s, as the sequence search
    # is by its own limit.
    short = ["--shrink-minutes", "0.5"]
    f, case, _ = fuzz(pav, kernel + "scratch-pool-exhausted", os.path.join(work, "pool100"), 400, short)
    if (f["reproduced"], f["reproduction"]) != (True, "sequence") or not f["case_id"] or \
            not 100 <= f["earlier_calls"] <= KEPT_CALLS:
        fail(f"scratch-pool-exhausted (a pool of 100): reproduced {f['reproduced']}, reproduction "
             f"{f['reproduction']}, earlier_calls {f['earlier_calls']}; expected a sequence of 100..{KEPT_CALLS} "
             "earlier calls that fails again from a fresh worker")
    saved = json.load(open(case))
    if saved["format"] != "pav-case/2" or len(saved["prelude"]) != f["earlier_calls"]:
        fail(f"the pool case is {saved['format']} with {len(saved.get('prelude', []))} earlier calls")
    r = run([pav, "replay", case, "--trust-case-kernel"])
    if r.returncode != 1 or saved["meta"]["message"] not in r.stdout + r.stderr:
        fail(f"pav replay of the pool sequence in a fresh worker: exit {r.returncode}, expected 1 with the saved "
             "failure")
    r = run([pav, "replay", case, "--kernel", f"exec:{python} {worker}", "--json"])
    if r.returncode != 0 or not json.loads(r.stdout)["cases"][0]["passed"]:
        fail(f"the pool sequence through the correct worker: exit {r.returncode}, expected a pass")

    # A pool of 300, past the calls pav keeps: no sequence reproduces it, and
    # pav says so.
    f, case, log = fuzz(pav, kernel + "scratch-pool-exhausted --pool-calls 300", os.path.join(work, "pool"), 400,
                        short)
    got = (f["reproduced"], f["reproduction"], f["case_id"])
    if got != (False, "state-dependent", None):
        fail(f"scratch-pool-exhausted (a pool of 300): (reproduced, reproduction, case_id) = {got}, expected "
             f"(False, 'state-dependent', None): neither the case nor a sequence of {KEPT_CALLS} calls fails in "
             "a fresh worker")
    # The note says what was tried: every sequence of the calls kept, or as
    # many as the search's limit (30 s here) allowed.
    note = f["reproduction_note"]
    if "reproduction: state-dependent" not in log or ("calls kept" not in note and "ended at its limit" not in note):
        fail("the log does not say state-dependent, or the note does not say the sequences tried")
    meta = json.load(open(case))["meta"]
    if (meta.get("reproduced"), meta.get("reproduction")) != (False, "state-dependent"):
        fail(f"the saved case's meta says reproduced {meta.get('reproduced')}, reproduction "
             f"{meta.get('reproduction')}")
    r = run([pav, "replay", case, "--trust-case-kernel", "--json"])
    doc = json.loads(r.stdout)["cases"][0]
    if r.returncode != 0 or not doc["passed"] or doc["saved_reproduction"] != "state-dependent":
        fail("pav replay in a fresh worker: expected a PASS labelled state-dependent, got exit "
             f"{r.returncode}, passed {doc['passed']}, saved_reproduction {doc['saved_reproduction']}")
    r = run([pav, "replay", case, "--trust-case-kernel"])
    if "saved as state-dependent" not in r.stdout:
        fail("pav replay's text does not say the case was saved as state-dependent")

    f, case, _ = fuzz(pav, kernel + "causal-off-by-one", os.path.join(work, "fresh"), 200)
    if (f["reproduced"], f["reproduction"]) != (True, "fresh") or not f["case_id"]:
        fail(f"causal-off-by-one: reproduced {f['reproduced']}, reproduction {f['reproduction']}, expected fresh")
    print("stale_scratch: fresh, sequence and state-dependent failures labelled and replayed as such")
    return 0


if __name__ == "__main__":
    sys.exit(main())
