// SPDX-License-Identifier: Apache-2.0
// The session's words that every face prints: what an error stands for, the
// report's header and the verdict word. Built apart from the runs (with the
// stop handlers) so a face links them without the engine.
#include <fmt/core.h>

#include <new>
#include <string_view>
#include <system_error>

#include "common/durable_file.hpp"
#include "common/version.hpp"
#include "input/json_input.hpp"
#include "properties/session/session.hpp"

namespace pav::session {

std::string version_line() { return fmt::format("pav {} (commit {})", pav::version(), pav::source_commit()); }

nlohmann::ordered_json report_header(const std::string& command) {
  nlohmann::ordered_json j;
  j["command"] = command;
  j["pav_version"] = pav::version();
  j["source_commit"] = pav::source_commit();
  return j;
}

std::string verdict_text(bool passed, const std::string& message) {
  if (passed) return "PASS";
  if (message.rfind("FAIL", 0) == 0) return message;
  return "FAIL: " + message;
}

namespace {

// An error message as printed: a hostile value echoed in it (a 50 MB option or
// id) is cut, so the message stays readable and the log small. Its start and
// its end are kept: a message names the field first and says why last, and a
// long value between them (a kernel's command line with its description) must
// not cut off the reason.
std::string bounded(std::string_view what) {
  constexpr size_t kHead = 600, kTail = 400;
  if (what.size() <= kHead + kTail) return std::string(what);
  return fmt::format("{} [... {} of {} characters cut ...] {}", what.substr(0, kHead), what.size() - kHead - kTail,
                     what.size(), what.substr(what.size() - kTail));
}

ErrorText cannot_run(std::string_view what) { return {kExitCannotRun, "could not run: " + bounded(what)}; }

}  // namespace

std::string bounded_message(std::string_view what) { return bounded(what); }

ErrorText error_text(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const BadInput& e) {
    return {kExitBadInput, bounded(e.what())};
  } catch (const CannotRun& e) {
    return cannot_run(e.what());
  } catch (const pav::IoError& e) {
    return cannot_run(e.what());
  } catch (const pav::input::InputError& e) {  // a reader's error a run did not wrap
    return {kExitBadInput, bounded(e.what())};
  } catch (const pav::input::ReadError& e) {
    return cannot_run(e.what());
  } catch (const std::bad_alloc&) {
    return cannot_run("out of memory");
  } catch (const std::system_error& e) {
    // The system refused a resource (a thread, a process): not pav's bug.
    return cannot_run(e.what());
  } catch (const std::exception& e) {
    // Not a verdict about the code under test: never exit 1 for it.
    return cannot_run(std::string("internal error: ") + e.what());
  } catch (...) {
    return cannot_run("internal error: an exception of unknown type");
  }
}

}  // namespace pav::session
