// SPDX-License-Identifier: Apache-2.0
#pragma once
// A path a test needs at run time (the source tree, a binary or plugin built
// in this build folder), looked up by name. CMake's pav_test_paths() defines
// each NAME as a macro calling pav::test_path("NAME") and compiles the values
// into one small generated source per target, so the target's own sources
// carry no build-folder path on their command lines: they compile identically
// in every build folder, and the compiler cache serves the GPU and mutant
// builds from the cpu build's objects. An unknown name aborts with its name.
namespace pav {
const char* test_path(const char* name);
}  // namespace pav
