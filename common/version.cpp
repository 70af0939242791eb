// SPDX-License-Identifier: Apache-2.0
#include "common/version.hpp"

namespace pav {

namespace detail {
const char* source_commit_text();  // generated at build time (version_stamp.cmake)
}

const char* version() { return PAV_VERSION_STRING; }
const char* source_commit() { return detail::source_commit_text(); }

}  // namespace pav
