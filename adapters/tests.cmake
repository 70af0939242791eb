# SPDX-License-Identifier: Apache-2.0
# Tests of the kernel contract that need the pav executable or the Python the
# examples found: included after tools/ and examples/.
if(TARGET adapters_test AND PAV_PYTHON)
  target_compile_definitions(adapters_test PRIVATE PAV_TEST_PYTHON="${PAV_PYTHON}")
endif()

# The contract exercised by pav's CPU kernels built as a plugin of the ABI.
add_test(NAME KernelCli.VerifyCpuPlugin
  COMMAND pav verify --kernel "lib:$<TARGET_FILE:pav_cpu_kernel>" --checks decode,reject
          --decode-cases 10 --reject-cases 150 --quiet --save ${CMAKE_BINARY_DIR}/kernel-cli/verify)
add_test(NAME KernelCli.VerifyCpuPluginIsolatedUniform
  COMMAND pav verify --kernel "lib:$<TARGET_FILE:pav_cpu_kernel> --path uniform --partial f32" --isolate
          --checks decode,reject --decode-cases 4 --reject-cases 40 --quiet
          --save ${CMAKE_BINARY_DIR}/kernel-cli/verify-isolated)
set_tests_properties(KernelCli.VerifyCpuPlugin KernelCli.VerifyCpuPluginIsolatedUniform
  PROPERTIES LABELS cpu TIMEOUT 300)

# Each worker fault: the verdict, the saved case, and its replay.
set(PAV_FAULT_WORKER_CMD "exec:'$<TARGET_FILE:pav_fault_worker>'")
foreach(fault_and_text
    "crash|signal 11"
    "exit|worker exited with status 7"
    "hang|worker timed out"
    "garbage|a reply line that is not JSON"
    "bad-id|carries id"
    "missing|out.npy missing"
    "wrong-shape|worker output: out.npy: shape"
    "wrong-dtype|worker output: out.npy: dtype '<f4'"
    "nan|nonfinite"
    "fifo|out.npy: a FIFO"
    "devzero|out.npy: a symbolic link"
    "non-utf8|bad bytes:"
    "reject|kernel refused the call: fault_worker refuses: reject"
    "stale-plan|stale plan: fault_worker's plan is stale")
  string(REPLACE "|" ";" parts "${fault_and_text}")
  list(GET parts 0 fault)
  list(GET parts 1 text)
  add_test(NAME KernelCli.WorkerFault.${fault}
    COMMAND ${CMAKE_SOURCE_DIR}/adapters/testdata/fault_cli.sh $<TARGET_FILE:pav>
            "${PAV_FAULT_WORKER_CMD} --fault ${fault} --min-len 300 -- --path uniform"
            "${PAV_FAULT_WORKER_CMD} --fault none -- --path uniform"
            "${text}" --timeout 0.5)
  set_tests_properties(KernelCli.WorkerFault.${fault} PROPERTIES LABELS cpu TIMEOUT 300)
endforeach()
# A hang costs the timeout per failing shrink candidate: fewer candidates.
set_tests_properties(KernelCli.WorkerFault.hang PROPERTIES ENVIRONMENT "SHRINK_TRIES=12")

# A worker started again after a fault that describes itself otherwise ends the
# run: exit 3 naming the fields that changed, no verdict, no case saved.
add_test(NAME KernelCli.WorkerDescribeChanges
  COMMAND sh -c "d=$(mktemp -d); out=$(\"$0\" fuzz --kernel \"exec:'$1' --fault describe-changes --state $d/state --min-len 300 -- --path uniform\" --property decode --cases 60 --seed 7 --save \"$d/cases\" --timeout 5 2>&1); rc=$?; printf '%s\\n' \"$out\"; n=$(ls \"$d/cases\" 2>/dev/null | wc -l); rm -rf \"$d\"; [ $rc -eq 3 ] && [ $n -eq 0 ] && printf '%s' \"$out\" | grep -qF -- 'could not run: worker restarted with another description: head_dims'"
          $<TARGET_FILE:pav> $<TARGET_FILE:pav_fault_worker>)
set_tests_properties(KernelCli.WorkerDescribeChanges PROPERTIES LABELS cpu TIMEOUT 120)

# --isolate turns a segfaulting plugin into a failure verdict with the case saved.
add_test(NAME KernelCli.IsolatedPluginSegfault
  COMMAND ${CMAKE_SOURCE_DIR}/adapters/testdata/fault_cli.sh $<TARGET_FILE:pav>
          "lib:$<TARGET_FILE:pav_fault_segv> --path uniform" "pav:cpu --path uniform"
          "signal 11" --isolate)
set_tests_properties(KernelCli.IsolatedPluginSegfault PROPERTIES LABELS cpu TIMEOUT 300)

# A kernel that prints on stdout while it decodes, run isolated: its lines go to
# the worker's stderr, never into the protocol on stdout, so verify passes.
add_test(NAME KernelCli.IsolatedPluginPrintsOnStdout
  COMMAND pav verify --kernel "lib:$<TARGET_FILE:pav_fault_chatty> --path uniform --partial f32" --isolate
          --checks decode --decode-cases 4 --quiet)
set_tests_properties(KernelCli.IsolatedPluginPrintsOnStdout PROPERTIES LABELS cpu TIMEOUT 300
  PASS_REGULAR_EXPRESSION "verdict: PASS")

# Text a plugin hands pav that is not UTF-8 (its name, a decode error filling
# the buffer without a NUL) is evidence kept: the case is saved and replays.
add_test(NAME KernelCli.PluginBadText
  COMMAND ${CMAKE_SOURCE_DIR}/adapters/testdata/fault_cli.sh $<TARGET_FILE:pav>
          "lib:$<TARGET_FILE:pav_fault_bad_text> --path uniform" "pav:cpu --path uniform"
          "kernel error: fault plugin says")
set_tests_properties(KernelCli.PluginBadText PROPERTIES LABELS cpu TIMEOUT 300)

# A library that calls exit(0), while it loads or during a call, never ends pav
# with 0: exit 3 naming the library, and no case saved.
add_test(NAME KernelCli.PluginExit.load
  COMMAND sh -c "out=$(\"$0\" verify --kernel \"lib:$1\" 2>&1); rc=$?; printf '%s\\n' \"$out\"; [ $rc -eq 3 ] && printf '%s' \"$out\" | grep -qF -- \"the kernel library lib:$1 called exit(0) inside its constructors\""
          $<TARGET_FILE:pav> $<TARGET_FILE:pav_fault_exit_load>)
add_test(NAME KernelCli.PluginExit.decode
  COMMAND sh -c "d=$(mktemp -d); out=$(\"$0\" fuzz --kernel \"lib:$1 --path uniform\" --property decode --cases 60 --seed 7 --save \"$d\" 2>&1); rc=$?; printf '%s\\n' \"$out\"; n=$(ls \"$d\" | wc -l); rm -rf \"$d\"; [ $rc -eq 3 ] && [ $n -eq 0 ] && printf '%s' \"$out\" | grep -qF -- 'called exit(0) inside pav_kernel_decode'"
          $<TARGET_FILE:pav> $<TARGET_FILE:pav_fault_exit_decode>)
set_tests_properties(KernelCli.PluginExit.load KernelCli.PluginExit.decode PROPERTIES LABELS cpu TIMEOUT 120)

# A truncated copy of a plugin: exit 2 naming the file and what is wrong, never SIGBUS.
add_test(NAME KernelCli.TruncatedPlugin
  COMMAND sh -c "d=$(mktemp -d); head -c 20000 \"$1\" > \"$d/libcut.so\"; out=$(\"$0\" verify --kernel \"lib:$d/libcut.so\" 2>&1); rc=$?; printf '%s\\n' \"$out\"; rm -rf \"$d\"; [ $rc -eq 2 ] && printf '%s' \"$out\" | grep -qF -- \"lib:$d/libcut.so: not a loadable shared library: truncated\""
          $<TARGET_FILE:pav> $<TARGET_FILE:pav_cpu_kernel>)
set_tests_properties(KernelCli.TruncatedPlugin PROPERTIES LABELS cpu TIMEOUT 60)

# Plugin faults are bad input: exit 2 with the reason.
foreach(fault_and_text
    "missing_decode|missing required symbol pav_kernel_decode"
    "abi_version|kernel ABI version 5, this pav speaks versions 1 to 4"
    "describe|head_dims: empty")
  string(REPLACE "|" ";" parts "${fault_and_text}")
  list(GET parts 0 fault)
  list(GET parts 1 text)
  add_test(NAME KernelCli.PluginFault.${fault}
    COMMAND sh -c "out=$(\"$0\" verify --kernel \"lib:$1\" 2>&1); rc=$?; printf '%s\\n' \"$out\"; [ $rc -eq 2 ] && printf '%s' \"$out\" | grep -qF -- \"$2\""
            $<TARGET_FILE:pav> $<TARGET_FILE:pav_fault_${fault}> "${text}")
  set_tests_properties(KernelCli.PluginFault.${fault} PROPERTIES LABELS cpu TIMEOUT 60)
endforeach()

# A plugin that cannot run on this machine (a GPU kernel without a device) is
# not bad input: exit 3, with the plugin's reason.
add_test(NAME KernelCli.PluginUnavailable
  COMMAND sh -c "out=$(\"$0\" verify --kernel \"lib:$1\" 2>&1); rc=$?; printf '%s\\n' \"$out\"; [ $rc -eq 3 ] && printf '%s' \"$out\" | grep -qF -- 'cannot run on this machine: no usable GPU device'"
          $<TARGET_FILE:pav> $<TARGET_FILE:pav_fault_unavailable>)
set_tests_properties(KernelCli.PluginUnavailable PROPERTIES LABELS cpu TIMEOUT 60)
