// SPDX-License-Identifier: Apache-2.0
#pragma once
#include "input/json_input.hpp"

namespace pav::stats {

// Bad user input; what() names the file and, where there is one, the line
// ("a.jsonl:3: ...") and the field at fault. The CLI maps it to exit code 2.
using InputError = input::InputError;

}  // namespace pav::stats
