# SPDX-License-Identifier: Apache-2.0
# pav fuzz: command-line tests, the fuzz demonstration, and re-discovery of the
# counterexample replay tests. Included after regression/ and tools/ are added
# (it names the pav and regression_test targets).

# The replay tests (regression/replay_test.cpp) are one gtest per file of
# fixtures/counterexamples; make a file added or changed there rebuild and so
# re-discover them.
file(GLOB PAV_COUNTEREXAMPLE_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fixtures/counterexamples/*.json)
if(TARGET regression_test AND PAV_COUNTEREXAMPLE_FILES)
  set_property(SOURCE ${CMAKE_SOURCE_DIR}/regression/replay_test.cpp TARGET_DIRECTORY regression_test
    APPEND PROPERTY OBJECT_DEPENDS ${PAV_COUNTEREXAMPLE_FILES})
endif()

if(PAV_BUILD_TESTS)
  # Cheap: 300 planner cases from a fixed seed, and the property list.
  add_test(NAME FuzzCli.PlanProperty300Cases
    COMMAND pav fuzz --property planner --cases 300 --seed 1 --quiet
            --save ${CMAKE_BINARY_DIR}/fuzz-smoke)
  set_tests_properties(FuzzCli.PlanProperty300Cases PROPERTIES LABELS cpu TIMEOUT 120)
  add_test(NAME FuzzCli.ListNamesEveryProperty
    COMMAND sh -c "out=$(\"$0\" fuzz --list) || exit 1; for p in planner decode gate-mirror batch-invariance; do printf '%s\\n' \"$out\" | grep -q \"^$p \" || { echo \"missing $p\"; exit 1; }; done; printf '%s\\n' \"$out\""
            $<TARGET_FILE:pav>)
  set_tests_properties(FuzzCli.ListNamesEveryProperty PROPERTIES LABELS cpu TIMEOUT 60)

  # Builds pav twice in a scratch tree (with and without an injected defect).
  add_test(NAME FuzzDemo.InjectedCausalityDefect
    COMMAND ${CMAKE_SOURCE_DIR}/ci/fuzz-demo.sh decode-causality-off-by-one)
  set_tests_properties(FuzzDemo.InjectedCausalityDefect PROPERTIES LABELS slow TIMEOUT 5400
    ENVIRONMENT "PAV_FUZZ_DEMO_DIR=${CMAKE_BINARY_DIR}/fuzz-demo")
endif()
