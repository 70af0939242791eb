// SPDX-License-Identifier: Apache-2.0
#pragma once
// Writing evidence (counterexamples, reports) so that it survives faults: a
// reader finds either the old file or the whole new one, never a part of it,
// and a write that fails says so instead of leaving a short file behind.
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pav {

// A file could not be written or a folder cannot take new files; what() names
// the path and the system's reason.
struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Writes `content` to `path`: into a new temporary file in the same folder,
// flushed to disk, its size checked, then renamed over `path`. On any failure
// the temporary file is removed, `path` is left as it was, and IoError is
// thrown. An existing symlink or non-regular file (a device, a pipe:
// /dev/stdout) is written in place instead, with every write checked.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

// Checks now, before a long run, that a file can later be created in `dir`:
// in `dir` itself when it exists, else in its nearest existing ancestor (the
// folder is created only when something is saved). Creates and removes a probe
// file, so it answers for the real user and file system (root, read-only
// mounts). Throws IoError starting with `what` (e.g. "--save out/").
void check_writable_dir(const std::filesystem::path& dir, const std::string& what);

// The same check for a file about to be written with write_file_atomically.
void check_writable_file(const std::filesystem::path& path, const std::string& what);

}  // namespace pav
