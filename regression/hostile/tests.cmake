# SPDX-License-Identifier: Apache-2.0
# The hostile-input corpus (regression/hostile/corpus.py) against the real pav:
# no signal, no hang, bounded output, exit 2 naming the field for every input
# that must be rejected. The default set (every class, a few seeded random
# inputs per kind) runs in about a minute; the large seeded random set carries
# the slow label. Under the sanitizers (PAV_SANITIZE, ci/sanitize.sh) every
# instrumented run is slower, so the default set there keeps every class and
# fewer random inputs, and each input's hang limit is four times as long (a
# 50 MB case file takes 16 s to refuse under ASan alone, 1 s without: the
# JSON lexer's per-character calls each take a fake stack frame). Included from regression/CMakeLists.txt; the pav target
# is named by generator expression.
find_program(PAV_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(PAV_BUILD_TESTS AND PAV_PYTHON3)
  if(PAV_SANITIZE)
    set(PAV_CORPUS_RANDOM 12)
    set(PAV_CORPUS_TIME_SCALE 4)
  else()
    set(PAV_CORPUS_RANDOM 60)
    set(PAV_CORPUS_TIME_SCALE 1)
  endif()
  add_test(NAME HostileCorpus.EveryCommandRejectsBadInputByName
    COMMAND ${PAV_PYTHON3} ${CMAKE_SOURCE_DIR}/regression/hostile/corpus.py
            --pav $<TARGET_FILE:pav> --work ${CMAKE_BINARY_DIR}/hostile-corpus --jobs 2
            --random ${PAV_CORPUS_RANDOM} --time-scale ${PAV_CORPUS_TIME_SCALE})
  set_tests_properties(HostileCorpus.EveryCommandRejectsBadInputByName PROPERTIES LABELS cpu TIMEOUT 900)
  # The class-module loader: a probe module's cases are listed, run and judged.
  add_test(NAME HostileCorpus.LoadsClassModules
    COMMAND ${PAV_PYTHON3} ${CMAKE_SOURCE_DIR}/regression/hostile/corpus.py
            --pav $<TARGET_FILE:pav> --work ${CMAKE_BINARY_DIR}/hostile-corpus-probe --jobs 2 --random 0
            --classes-dir ${CMAKE_SOURCE_DIR}/regression/hostile/testdata/classes-probe --filter probe.
            --expect-count 2)
  set_tests_properties(HostileCorpus.LoadsClassModules PROPERTIES LABELS cpu TIMEOUT 300)
  # A module that cannot add its cases fails the run, named; it never drops out.
  add_test(NAME HostileCorpus.ABrokenClassModuleFailsTheRun
    COMMAND ${PAV_PYTHON3} ${CMAKE_SOURCE_DIR}/regression/hostile/corpus.py
            --pav $<TARGET_FILE:pav> --work ${CMAKE_BINARY_DIR}/hostile-corpus-broken --jobs 2 --random 0
            --classes-dir ${CMAKE_SOURCE_DIR}/regression/hostile/testdata/classes-broken --filter probe. --list)
  set_tests_properties(HostileCorpus.ABrokenClassModuleFailsTheRun PROPERTIES LABELS cpu TIMEOUT 300
    PASS_REGULAR_EXPRESSION "classes_broken.py: add_cases failed: ValueError: this class is broken on purpose")
  add_test(NAME HostileCorpus.RandomDamageNeverCrashesOrHangs
    COMMAND ${PAV_PYTHON3} ${CMAKE_SOURCE_DIR}/regression/hostile/corpus.py
            --pav $<TARGET_FILE:pav> --work ${CMAKE_BINARY_DIR}/hostile-corpus-large --jobs 2 --size large
            --random 3000 --time-scale ${PAV_CORPUS_TIME_SCALE})
  set_tests_properties(HostileCorpus.RandomDamageNeverCrashesOrHangs PROPERTIES LABELS slow TIMEOUT 3600)
endif()
