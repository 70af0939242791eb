// SPDX-License-Identifier: Apache-2.0
#pragma once
// Test support (no production code includes this): faults the durable-write and
// clean-stop tests inject honestly. A file size limit (RLIMIT_FSIZE, the
// kernel's own EFBIG), a tiny tmpfs filled to the last byte (where this machine
// lets us mount), and a folder that takes no new files whoever asks.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace pav::testing {

// A process-wide file size limit for the scope; SIGXFSZ is ignored meanwhile,
// so a write past it fails with EFBIG instead of ending the test.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  void (*old_handler_)(int) = SIG_DFL;
};

// A 64 KiB tmpfs at `dir`, filled so that no byte is left; mounted() is false
// where mounting is not allowed (not root, no CAP_SYS_ADMIN).
class FullTmpfs {
 public:
  explicit FullTmpfs(const std::filesystem::path& dir) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=64k") == 0;
    if (!mounted_) return;
    fill("filler", 4096);
    fill("filler-tail", 1);  // whatever part of a page is left
  }
  ~FullTmpfs() { unmount(); }
  FullTmpfs(const FullTmpfs&) = delete;
  FullTmpfs& operator=(const FullTmpfs&) = delete;
  bool mounted() const { return mounted_; }
  const std::filesystem::path& dir() const { return dir_; }
  void unmount() {
    if (mounted_) ::umount(dir_.c_str());
    mounted_ = false;
  }

 private:
  void fill(const char* name, size_t block) {
    std::FILE* f = std::fopen((dir_ / name).c_str(), "wb");
    if (!f) return;
    const std::string data(block, 'x');
    while (std::fwrite(data.data(), 1, data.size(), f) == data.size() && std::fflush(f) == 0) {
    }
    std::fclose(f);
  }
  std::filesystem::path dir_;
  bool mounted_ = false;
};

// A folder in which no file can be created by this process: `dir` made 0555
// when that stops us (not root), else a read-only tmpfs mounted there, else
// /proc/self (procfs takes no new files, root included). Undone on destruction.
class UnwritableDir {
 public:
  explicit UnwritableDir(const std::filesystem::path& dir) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    ::chmod(dir_.c_str(), 0555);
    if (!creatable(dir_)) return;
    ::chmod(dir_.c_str(), 0755);
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", MS_RDONLY, "size=4k") == 0) {
      mounted_ = true;
      if (!creatable(dir_)) return;
    }
    dir_ = "/proc/self";
  }
  ~UnwritableDir() {
    if (mounted_) ::umount(original_.c_str());
    ::chmod(original_.c_str(), 0755);
  }
  UnwritableDir(const UnwritableDir&) = delete;
  UnwritableDir& operator=(const UnwritableDir&) = delete;
  // The folder to use.
  const std::filesystem::path& path() const { return dir_; }
  // How it was made unwritable, for messages.
  std::string how() const {
    return dir_ == "/proc/self" ? "procfs" : mounted_ ? "read-only tmpfs" : "mode 0555";
  }

 private:
  static bool creatable(const std::filesystem::path& d) {
    const std::string probe = (d / ".pav-probe").string();
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return false;
    ::close(fd);
    ::unlink(probe.c_str());
    return true;
  }
  std::filesystem::path dir_;
  std::filesystem::path original_ = dir_;
  bool mounted_ = false;
};

// The file descriptors this process holds now (entries of /proc/self/fd, less
// the one the listing itself opens): equal before and after a call that must
// close what it opened, on its error paths too.
inline int open_descriptors() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n - 1;
}

}  // namespace pav::testing
