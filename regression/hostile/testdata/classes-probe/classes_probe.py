# SPDX-License-Identifier: Apache-2.0
# A class module for corpus.py's loader test (HostileCorpus.LoadsClassModules):
# it uses the documented corpus API and adds one case of each kind it names.
def add_cases(corpus):
    p = corpus.write("probe/case.json", "{}")
    assert p == corpus.path("probe/case.json")
    corpus.add("probe.loaded", ["replay", p], "reject", ["lens"])
    corpus.add("probe.rng", ["plan", "--lengths", str(corpus.rng.randrange(1, 100)), "--kv-heads", "1", "--cu", "8"],
               "ok")
