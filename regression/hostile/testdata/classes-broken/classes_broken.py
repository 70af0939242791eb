# SPDX-License-Identifier: Apache-2.0
# A class module whose add_cases fails: the corpus run must fail, naming it
# (HostileCorpus.ABrokenClassModuleFailsTheRun).
def add_cases(corpus):
    raise ValueError("this class is broken on purpose")
