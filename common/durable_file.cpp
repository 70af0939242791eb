// SPDX-License-Identifier: Apache-2.0
#include "common/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace pav {

namespace fs = std::filesystem;

namespace {

std::string reason(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& what, int err) { throw IoError(what + ": " + reason(err)); }

fs::path folder_of(const fs::path& path) {
  const fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// Writes all of content to fd; 0 or the errno of the first failure.
int write_all(int fd, std::string_view content) {
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    left -= size_t(n);
  }
  return 0;
}

// A fresh name in `dir` for a temporary file, opened exclusively.
int open_temporary(const fs::path& dir, const std::string& base, fs::path& tmp) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = dir / ("." + base + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

// Syncs the folder so the rename itself survives a crash; some file systems
// cannot sync a folder, which is not a failure of the write.
void sync_folder(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_in_place(const fs::path& path, std::string_view content) {
  const std::string what = "cannot write " + path.string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) fail(what, errno);
  int err = write_all(fd, content);
  struct stat st {};
  if (err == 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err) fail(what, err);
}

}  // namespace

void write_file_atomically(const fs::path& path, std::string_view content) {
  std::error_code ec;
  const auto link = fs::symlink_status(path, ec);
  if (!ec && fs::exists(link) && (fs::is_symlink(link) || !fs::is_regular_file(link))) {
    if (fs::is_directory(path, ec)) throw IoError("cannot write " + path.string() + ": it is a directory");
    write_in_place(path, content);
    return;
  }
  const fs::path dir = folder_of(path);
  const std::string what = "cannot write " + path.string();
  fs::path tmp;
  const int fd = open_temporary(dir, path.filename().string(), tmp);
  if (fd < 0) fail(what, errno);
  int err = write_all(fd, content);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  struct stat st {};
  if (err == 0 && ::fstat(fd, &st) != 0) err = errno;
  if (err == 0 && uint64_t(st.st_size) != content.size()) err = EIO;  // short file: never rename it in
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    fail(what, err);
  }
  sync_folder(dir);
}

void check_writable_dir(const fs::path& dir, const std::string& what) {
  fs::path probe_in = dir.empty() ? fs::path(".") : dir;
  std::error_code ec;
  // The folder, or the nearest ancestor that exists (created on the first save).
  while (!fs::exists(probe_in, ec)) {
    if (ec) fail(what + ": cannot check " + probe_in.string(), ec.value());
    const fs::path up = probe_in.parent_path();
    if (up.empty() || up == probe_in) {
      probe_in = ".";
      break;
    }
    probe_in = up;
  }
  if (!fs::is_directory(probe_in, ec))
    throw IoError(what + ": " + probe_in.string() + " is not a directory");
  fs::path tmp;
  const int fd = open_temporary(probe_in, "pav-write-probe", tmp);
  if (fd < 0) fail(what + ": cannot create files in " + probe_in.string(), errno);
  ::close(fd);
  ::unlink(tmp.c_str());
}

void check_writable_file(const fs::path& path, const std::string& what) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw IoError(what + ": " + path.string() + " is a directory");
  const auto link = fs::symlink_status(path, ec);
  if (!ec && fs::exists(link) && (fs::is_symlink(link) || !fs::is_regular_file(link))) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail(what + ": cannot write " + path.string(), errno);
    ::close(fd);
    return;
  }
  const fs::path dir = folder_of(path);
  if (!fs::is_directory(dir, ec)) throw IoError(what + ": folder " + dir.string() + " does not exist");
  check_writable_dir(dir, what);
}

}  // namespace pav
