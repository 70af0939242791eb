# SPDX-License-Identifier: Apache-2.0
# pav_optimize_for_host(TARGET [BASELINE FLAG] [OPTIONS FLAG...])
# TARGET compiles at -O3 with AVX2 + FMA (-march=x86-64-v3) where the build
# machine runs it, else with BASELINE (none: the compiler's default), then
# OPTIONS. The code so built runs where it is built; the probe runs once per
# build folder (cached as PAV_HOST_RUNS_X86_64_V3).
include_guard(GLOBAL)
include(CheckCXXSourceRuns)

function(pav_optimize_for_host target)
  cmake_parse_arguments(A "" "BASELINE" "OPTIONS" ${ARGN})
  set(CMAKE_REQUIRED_FLAGS -march=x86-64-v3)
  check_cxx_source_runs([=[
int main() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 0 : 1; }
]=] PAV_HOST_RUNS_X86_64_V3)
  if(PAV_HOST_RUNS_X86_64_V3)
    set(march -march=x86-64-v3)
  else()
    set(march ${A_BASELINE})
  endif()
  target_compile_options(${target} PRIVATE -O3 ${march} ${A_OPTIONS})
endfunction()
