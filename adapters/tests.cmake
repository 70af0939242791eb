# Tests of the kernel contract that need the pav executable or the Python the
# examples found: included after tools/ and examples/.
if(TARGET adapters_test AND PAV_PYTHON)
  target_compile_definitions(adapters_test PRIVATE PAV_TEST_PYTHON="${PAV_PYTHON}")
endif()
