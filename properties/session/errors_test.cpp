// SPDX-License-Identifier: Apache-2.0
// The one rule every face maps a run's errors through (session::error_text):
// each kind of error, its exit code and its words, and a long message cut in
// the middle with its start and its end kept.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

#include "common/durable_file.hpp"
#include "input/json_input.hpp"
#include "properties/session/session.hpp"

namespace pav::session {
namespace {

template <class E>
ErrorText text_of(const E& e) {
  return error_text(std::make_exception_ptr(e));
}

TEST(SessionErrors, EachKindHasItsExitCodeAndItsWords) {
  struct Row {
    ErrorText got;
    int code;
    std::string message;
  };
  const Row rows[] = {
      {text_of(BadInput("--seed: bad")), kExitBadInput, "--seed: bad"},
      {text_of(input::InputError("case.json: lens: bad")), kExitBadInput, "case.json: lens: bad"},
      {text_of(CannotRun("no device")), kExitCannotRun, "could not run: no device"},
      {text_of(pav::IoError("out.json: disk full")), kExitCannotRun, "could not run: out.json: disk full"},
      {text_of(input::ReadError("case.json: I/O error")), kExitCannotRun, "could not run: case.json: I/O error"},
      {text_of(std::bad_alloc()), kExitCannotRun, "could not run: out of memory"},
      {text_of(std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again), "thread")),
       kExitCannotRun, ""},
      {text_of(std::logic_error("oops")), kExitCannotRun, "could not run: internal error: oops"},
      {text_of(42), kExitCannotRun, "could not run: internal error: an exception of unknown type"},
  };
  for (const Row& r : rows) {
    // Never 1: an error is not a verdict about the code under test.
    EXPECT_EQ(r.got.exit_code, r.code) << r.got.message;
    if (!r.message.empty()) {
      EXPECT_EQ(r.got.message, r.message);
    }
  }
  EXPECT_EQ(rows[6].got.message.rfind("could not run: thread", 0), 0u) << rows[6].got.message;
}

TEST(SessionErrors, ALongMessageKeepsItsStartAndItsEnd) {
  const std::string field = "meta.kernel.spec: ", reason = ": the reason comes last";
  const std::string message = field + std::string(5000, 'x') + reason;
  const ErrorText t = text_of(BadInput(message));
  EXPECT_LT(t.message.size(), 1100u);
  EXPECT_EQ(t.message.rfind(field, 0), 0u);
  EXPECT_EQ(t.message.substr(t.message.size() - reason.size()), reason);
  EXPECT_NE(t.message.find("characters cut"), std::string::npos) << t.message;
  const std::string short_one(1000, 'y');
  EXPECT_EQ(text_of(BadInput(short_one)).message, short_one) << "1,000 characters are not cut";
}

}  // namespace
}  // namespace pav::session
