// SPDX-License-Identifier: Apache-2.0
// A 764k-token context (label slow): never materialized whole, still exact.
#include "reference/long_context.hpp"

namespace pav::reference {
namespace {

TEST(ReferenceLongContextSlow, Streams764kTokensInBoundedMemory) { testing::check_long_context(764000, 120.0); }

}  // namespace
}  // namespace pav::reference
