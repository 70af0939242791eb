// SPDX-License-Identifier: Apache-2.0
#pragma once
// Which pav this is: the project version and the source commit it was built
// from, for `pav --version`, every JSON report and every saved case file.

namespace pav {

// The project version, as CMake's project(pav VERSION ...) gives it.
const char* version();
// The git commit the build came from (12 hex digits, with "-dirty" when tracked
// files differed from it at build time), or "unknown" when built outside git.
const char* source_commit();

}  // namespace pav
