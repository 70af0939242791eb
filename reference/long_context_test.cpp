// SPDX-License-Identifier: Apache-2.0
// ~100k-token context: the streaming path at a length the cpu label can afford.
#include "reference/long_context.hpp"

namespace pav::reference {
namespace {

TEST(ReferenceLongContext, Streams100kTokensInBoundedMemory) { testing::check_long_context(100003, 30.0); }

}  // namespace
}  // namespace pav::reference
