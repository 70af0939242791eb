#pragma once
#include <stdexcept>

namespace pav::stats {

// Bad user input; what() names the file and, where there is one, the line
// ("a.jsonl:3: ...") or the field at fault. The CLI maps it to exit code 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace pav::stats
