#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The reject property's counterexamples shrink as decode's do: a worker whose
accepted calls are wrong (attention sinks left out of the denominator) fails
the reject property, and its saved case is simplified past the generator's
shrink tree (simplify_steps > 0) to one request of no token, its sink left;
replayed (pav replay, pav fuzz --replay) it fails with the defect, exit 1, and
passes without.
Before, a reject counterexample kept every request and token it was found with.

usage: reject_shrinks.py PAV PYTHON WORKER SAVE_DIR
"""
import json
import shutil
import subprocess
import sys

pav, python, worker, save = sys.argv[1:5]
shutil.rmtree(save, ignore_errors=True)
kernel = "exec:%s %s --defect sink-not-in-denominator" % (python, worker)
run = subprocess.run([pav, "fuzz", "--kernel", kernel, "--property", "reject", "--cases", "300", "--seed", "120",
                      "--save", save, "--quiet", "--json"], capture_output=True, text=True, timeout=300)
print(run.stderr[-4000:])
assert run.returncode == 1, "exit %d, not 1 (a defect found)" % run.returncode
report = json.loads(run.stdout)
failure = report["runs"][0]["failure"]
print("shrunk case:", failure["shrunk_case"])
with open(failure["saved"]) as f:
    case = json.load(f)
shrink = case["meta"]["shrink"]
print("shrink:", shrink, "lens:", case["lens"])
assert shrink["simplify_steps"] > 0, "the reject counterexample was not simplified: %s" % shrink
assert case["lens"] == [0], "expected one request of no token (its sink left), got lens %s" % case["lens"]
# The summary line carries the call's variants (the sinks) as decode's does.
assert "sinks" in failure["shrunk_case"], failure["shrunk_case"]
# Replayed, the reject case fails with the defect (exit 1, on both replay commands) and passes without.
correct = "exec:%s %s" % (python, worker)
for words in (["replay"], ["fuzz", "--replay"]):
    for k, want in ((kernel, 1), (correct, 0)):
        r = subprocess.run([pav] + words + [failure["saved"], "--kernel", k, "--json"], capture_output=True, text=True,
                           timeout=120)
        print(" ".join(words), "--kernel", k, "->", r.returncode)
        assert r.returncode == want, "%s with %s: exit %d, not %d\n%s" % (" ".join(words), k, r.returncode, want,
                                                                        r.stderr[-2000:])
        replayed = json.loads(r.stdout)["cases" if words == ["replay"] else "replays"][0]
        assert replayed["property"] == "reject" and replayed["passed"] == (want == 0), replayed
print("PASS")
