#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A decode failure of a known shape is named, and only that one: the NumPy
worker's masked-lanes-read-block-0 (a 64-token tile's lanes past the last page
read page 0 and are weighted zero) returns NaN where page 0 is the poisoned null
block, and is right when the slots past every context hold zero: its verdict
starts "NaN from masked slots", and pav replay's JSON says known_shape
nan-from-masked-slots. csr-last-page-full (the tail of a CSR list's last page
read whole, with weight) is wrong with those slots zero too: not named. (A NaN
of another origin, the C example's empty-row-nan, is not named either:
PavCli.ANaNOfAnotherOriginIsNotNamed.)

usage: known_shapes.py PAV PYTHON WORKER SAVE_DIR
"""
import json
import os
import shutil
import subprocess
import sys

pav, python, worker, save = sys.argv[1:5]
shutil.rmtree(save, ignore_errors=True)


def found(defect, seed):
    kernel = "exec:%s %s --defect %s" % (python, worker, defect)
    where = os.path.join(save, defect)
    run = subprocess.run([pav, "fuzz", "--kernel", kernel, "--property", "decode", "--cases", "400", "--seed",
                          str(seed), "--shrink-tries", "200", "--save", where, "--quiet", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, "%s: exit %d, not 1 (a defect found)\n%s" % (defect, run.returncode, run.stderr[-3000:])
    failure = json.loads(run.stdout)["runs"][0]["failure"]
    print("%s (seed %s): first %s\n  shrunk %s" % (defect, failure["seed"], failure["first_message"][:300],
                                                  failure["message"][:300]))
    replay = subprocess.run([pav, "replay", failure["saved"], "--kernel", kernel, "--json"], capture_output=True,
                            text=True, timeout=120)
    assert replay.returncode == 1, "%s: replay exit %d, not 1\n%s" % (defect, replay.returncode, replay.stderr[-2000:])
    return failure, json.loads(replay.stdout)["cases"][0]


masked, masked_replay = found("masked-lanes-read-block-0", 5)
assert masked["message"].startswith("NaN from masked slots:"), masked["message"]
assert masked_replay.get("known_shape") == "nan-from-masked-slots", masked_replay
assert masked_replay["verdict"].startswith("NaN from masked slots:"), masked_replay["verdict"]

tail, tail_replay = found("csr-last-page-full", 7)
assert "masked slots" not in tail["message"] and "masked slots" not in tail["first_message"], tail["message"]
assert "known_shape" not in tail_replay, tail_replay

print("known_shapes: PASS")
