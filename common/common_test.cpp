// SPDX-License-Identifier: Apache-2.0
// pav_common: durable writes under faults (a full file system, a file size
// limit, a folder that takes no files), the progress reporter on a terminal and
// in a log, the comma-list parser and the UTF-8 cleaning of kernel-supplied text.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pty.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "common/durable_file.hpp"
#include "common/fault_testing.hpp"
#include "common/progress.hpp"
#include "common/text_list.hpp"
#include "common/utf8_text.hpp"
#include "common/version.hpp"

namespace fs = std::filesystem;

namespace {

// The files (device, inode) this process has fsync'ed: the fsync below takes
// the C library's place for the durable writer (linked into this executable
// statically), records what it syncs, and forwards the call.
std::mutex synced_mutex;
std::set<std::pair<dev_t, ino_t>> synced_files;

bool was_synced(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return false;
  const std::lock_guard<std::mutex> lock(synced_mutex);
  return synced_files.count({st.st_dev, st.st_ino}) != 0;
}

void forget_synced() {
  const std::lock_guard<std::mutex> lock(synced_mutex);
  synced_files.clear();
}

}  // namespace

extern "C" int fsync(int fd) {
  static const auto real = reinterpret_cast<int (*)(int)>(::dlsym(RTLD_NEXT, "fsync"));
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    const std::lock_guard<std::mutex> lock(synced_mutex);
    synced_files.insert({st.st_dev, st.st_ino});
  }
  return real(fd);
}

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("pav-common-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Everything in dir but `keep` (temporary files left behind show up here).
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string expect_io_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const pav::IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no IoError";
  return {};
}

}  // namespace

TEST(DurableFile, WritesANewFileAndReplacesAnOldOneWhole) {
  const fs::path dir = scratch("write");
  const fs::path f = dir / "report.json";
  pav::write_file_atomically(f, "first\n");
  EXPECT_EQ(slurp(f), "first\n");
  pav::write_file_atomically(f, std::string(100000, 'y'));
  EXPECT_EQ(slurp(f), std::string(100000, 'y'));
  EXPECT_EQ(entries(dir), std::vector<std::string>{"report.json"}) << "a temporary file was left behind";
  pav::write_file_atomically(f, "");
  EXPECT_EQ(fs::file_size(f), 0u);
  fs::remove_all(dir);
}

TEST(DurableFile, AFileSizeLimitFailsTheWriteAndLeavesTheOldFile) {
  const fs::path dir = scratch("fsize");
  const fs::path f = dir / "case.json";
  pav::write_file_atomically(f, "old content\n");
  std::string what;
  {
    pav::testing::FileSizeLimit limit(1000);
    what = expect_io_error([&] { pav::write_file_atomically(f, std::string(5000, 'z')); });
  }
  EXPECT_NE(what.find(f.string()), std::string::npos) << what;
  EXPECT_NE(what.find("File too large"), std::string::npos) << what;
  EXPECT_EQ(slurp(f), "old content\n") << "the old file must survive a failed write";
  EXPECT_EQ(entries(dir), std::vector<std::string>{"case.json"}) << "a partial temporary file was left";
  // Just under the limit the same write goes through.
  {
    pav::testing::FileSizeLimit limit(5000);
    pav::write_file_atomically(f, std::string(5000, 'z'));
  }
  EXPECT_EQ(fs::file_size(f), 5000u);
  fs::remove_all(dir);
}

TEST(DurableFile, AFullFileSystemFailsTheWriteWithNothingLeft) {
  const fs::path dir = scratch("full");
  pav::testing::FullTmpfs full(dir / "mnt");
  if (!full.mounted()) {
    // No mount here (not root, no CAP_SYS_ADMIN): the full device stands in for
    // a full disk, through the in-place path.
    const std::string what = expect_io_error([] { pav::write_file_atomically("/dev/full", "data\n"); });
    EXPECT_NE(what.find("No space left"), std::string::npos) << what;
    fs::remove_all(dir);
    return;
  }
  const auto before = entries(full.dir());
  const std::string what =
      expect_io_error([&] { pav::write_file_atomically(full.dir() / "case.json", std::string(3000, 'c')); });
  EXPECT_NE(what.find("No space left"), std::string::npos) << what;
  EXPECT_EQ(entries(full.dir()), before) << "no partial file, no temporary file";
  full.unmount();
  fs::remove_all(dir);
}

TEST(DurableFile, ADeviceIsWrittenInPlaceAndItsErrorsReported) {
  const std::string what = expect_io_error([] { pav::write_file_atomically("/dev/full", "data\n"); });
  EXPECT_NE(what.find("/dev/full"), std::string::npos) << what;
  EXPECT_NE(what.find("No space left"), std::string::npos) << what;
  pav::write_file_atomically("/dev/null", "data\n");  // a device that takes it: no error
}

TEST(DurableFile, ASymlinkIsWrittenThroughNotReplaced) {
  const fs::path dir = scratch("link");
  pav::write_file_atomically(dir / "target", "old");
  fs::create_symlink(dir / "target", dir / "link");
  pav::write_file_atomically(dir / "link", "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  EXPECT_EQ(slurp(dir / "target"), "new");
  fs::remove_all(dir);
}

// A shorter content over a longer file leaves nothing of the old one past its
// end, on each path: a regular file replaced, a file written through a symlink
// (in place), and an empty content last.
TEST(DurableFile, AShorterWriteOverALongerFileLeavesNoTail) {
  const fs::path dir = scratch("shrink");
  pav::write_file_atomically(dir / "target", std::string(4096, 'o') + "\n");
  fs::create_symlink(dir / "target", dir / "link");
  for (const fs::path& f : {dir / "plain.json", dir / "link"}) {
    SCOPED_TRACE(f.string());
    pav::write_file_atomically(f, std::string(4096, 'o') + "\n");
    pav::write_file_atomically(f, "{\"short\": 1}\n");
    EXPECT_EQ(slurp(f), "{\"short\": 1}\n");
    pav::write_file_atomically(f, "");
    EXPECT_EQ(slurp(f), "");
  }
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  EXPECT_EQ(slurp(dir / "target"), "");
  fs::remove_all(dir);
}

// Every path syncs the file it writes before it is relied on (the new file
// before its rename, and the folder after it; a file written in place through
// a symlink) and closes every descriptor it opened, whether it succeeds or
// fails (a full device, a file size limit, a missing folder).
TEST(DurableFile, EveryPathSyncsWhatItWritesAndClosesWhatItOpens) {
  const fs::path dir = scratch("sync");
  pav::write_file_atomically(dir / "target", "old");
  fs::create_symlink(dir / "target", dir / "link");
  const int before = pav::testing::open_descriptors();
  for (const fs::path& f : {dir / "new.json", dir / "target", dir / "link"}) {
    SCOPED_TRACE(f.string());
    forget_synced();
    pav::write_file_atomically(f, "content\n");
    EXPECT_TRUE(was_synced(f)) << "the file was not synced";
    if (!fs::is_symlink(f)) {
      EXPECT_TRUE(was_synced(dir)) << "the folder was not synced after the rename";
    }
    EXPECT_EQ(pav::testing::open_descriptors(), before);
  }
  (void)expect_io_error([] { pav::write_file_atomically("/dev/full", "data\n"); });
  EXPECT_EQ(pav::testing::open_descriptors(), before) << "the in-place path's error leaked a descriptor";
  {
    pav::testing::FileSizeLimit limit(10);
    (void)expect_io_error([&] { pav::write_file_atomically(dir / "big.json", std::string(100, 'b')); });
    (void)expect_io_error([&] { pav::write_file_atomically(dir / "link", std::string(100, 'b')); });
  }
  EXPECT_EQ(pav::testing::open_descriptors(), before) << "an error of a write leaked a descriptor";
  (void)expect_io_error([&] { pav::write_file_atomically(dir / "no" / "f.json", "x"); });
  EXPECT_EQ(pav::testing::open_descriptors(), before);
  fs::remove_all(dir);
}

TEST(DurableFile, RefusesDirectoriesAndMissingFolders) {
  const fs::path dir = scratch("refuse");
  EXPECT_NE(expect_io_error([&] { pav::write_file_atomically(dir, "x"); }).find("directory"), std::string::npos);
  EXPECT_NE(expect_io_error([&] { pav::write_file_atomically(dir / "no" / "such" / "f.json", "x"); })
                .find("No such file"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(WritableCheck, AcceptsAFolderToBeCreatedAndCreatesNothing) {
  const fs::path dir = scratch("check");
  const int descriptors = pav::testing::open_descriptors();
  pav::check_writable_dir(dir / "a" / "b", "--save");
  EXPECT_EQ(pav::testing::open_descriptors(), descriptors) << "the probe file was left open";
  EXPECT_FALSE(fs::exists(dir / "a")) << "the check must not create the folder";
  EXPECT_TRUE(entries(dir).empty()) << "the probe file was left behind";
  pav::check_writable_dir(dir, "--save");
  EXPECT_TRUE(entries(dir).empty());
  pav::check_writable_file(dir / "r.json", "--json-out");
  EXPECT_TRUE(entries(dir).empty());
  fs::remove_all(dir);
}

TEST(WritableCheck, RefusesAFileInTheWayAndAFolderThatTakesNoFiles) {
  const fs::path dir = scratch("refuse-check");
  pav::write_file_atomically(dir / "plain", "x");
  std::string what = expect_io_error([&] { pav::check_writable_dir(dir / "plain" / "sub", "--save X"); });
  EXPECT_EQ(what.rfind("--save X", 0), 0u) << what;
  EXPECT_NE(what.find("not a directory"), std::string::npos) << what;
  {
    pav::testing::UnwritableDir ro(dir / "ro");
    what = expect_io_error([&] { pav::check_writable_dir(ro.path(), "--save RO"); });
    EXPECT_NE(what.find("cannot create files in " + ro.path().string()), std::string::npos) << what << " (" << ro.how() << ")";
    what = expect_io_error([&] { pav::write_file_atomically(ro.path() / "case.json", "x"); });
    EXPECT_NE(what.find("cannot write"), std::string::npos) << what;
  }
  what = expect_io_error([&] { pav::check_writable_file(dir / "missing" / "r.json", "--json-out"); });
  EXPECT_NE(what.find("does not exist"), std::string::npos) << what;
  what = expect_io_error([&] { pav::check_writable_file(dir, "--json-out"); });
  EXPECT_NE(what.find("is a directory"), std::string::npos) << what;
  fs::remove_all(dir);
}

TEST(Progress, InALogPrintsPlainLinesAtMostEveryInterval) {
  std::FILE* f = std::tmpfile();
  {
    pav::ProgressReporter p(f, true, 0.2);
    EXPECT_FALSE(p.terminal());
    p.show("one");    // the first line shows at once
    p.show("two");    // too soon
    p.show("three", true);  // forced
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    p.show("four");   // the interval has passed
    p.done();
  }
  std::rewind(f);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  EXPECT_EQ(std::string(buf, n), "one\nthree\nfour\n") << "no carriage returns or escapes in a log";
}

TEST(Progress, DisabledPrintsNothing) {
  std::FILE* f = std::tmpfile();
  {
    pav::ProgressReporter p(f, false);
    p.show("x", true);
  }
  EXPECT_EQ(std::ftell(f), 0);
  std::fclose(f);
}

TEST(Progress, OnATerminalRedrawsOneLineAndClearsIt) {
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::FILE* f = fdopen(slave, "w");
  {
    pav::ProgressReporter p(f, true);
    EXPECT_TRUE(p.terminal());
    p.show("a");
    p.show("b");  // within a quarter second: skipped
    p.show("c", true);
  }  // done(): clears the line
  std::fclose(f);
  std::string got;
  char buf[256];
  fcntl(master, F_SETFL, O_NONBLOCK);
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
  ::close(master);
  EXPECT_EQ(got, "\r\033[Ka\r\033[Kc\r\033[K");
}

TEST(TextList, SplitsTrimsAndKeepsEmptyItems) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pav::split_list("a,b,c"), (V{"a", "b", "c"}));
  EXPECT_EQ(pav::split_list(" a , b,c "), (V{"a", "b", "c"}));
  EXPECT_EQ(pav::split_list(""), (V{""}));
  EXPECT_EQ(pav::split_list("a,,b"), (V{"a", "", "b"}));
  EXPECT_EQ(pav::split_list(","), (V{"", ""}));
  EXPECT_EQ(pav::split_list("x,"), (V{"x", ""}));
  EXPECT_EQ(pav::split_list("   "), (V{""}));
  EXPECT_EQ(pav::split_list("120k/b8"), (V{"120k/b8"}));
}

// Expected values are written out byte by byte (Unicode 15, section 3.9: one
// U+FFFD per maximal subpart of an ill-formed sequence).
TEST(Utf8Text, ValidTextPassesUnchanged) {
  for (const char* t : {"", "plain ascii", "caf\xc3\xa9", "\xe2\x82\xac 5", "\xf0\x9f\x98\x80", "\xed\x9f\xbf",
                        "\xf4\x8f\xbf\xbf", "\xef\xbf\xbd"}) {
    EXPECT_TRUE(pav::is_valid_utf8(t)) << t;
    EXPECT_EQ(pav::utf8_clean(t), t);
  }
}

TEST(Utf8Text, EveryIllFormedSequenceBecomesReplacementCharacters) {
  const std::string fffd = "\xef\xbf\xbd";
  struct Bad {
    std::string in, out;
  };
  const Bad cases[] = {
      {"a\xff" "b", "a" + fffd + "b"},                  // a byte that never occurs
      {"\x80", fffd},                                      // a lone continuation byte
      {"\xc0\xaf", fffd + fffd},                           // overlong '/'
      {"\xe0\x80\xaf", fffd + fffd + fffd},                // overlong, three bytes
      {"\xed\xa0\x80", fffd + fffd + fffd},                // a surrogate (U+D800)
      {"\xf4\x90\x80\x80", fffd + fffd + fffd + fffd},     // past U+10FFFF
      {"\xe2\x82", fffd},                                  // a sequence cut short at the end
      {"\xe2\x82x", fffd + "x"},                           // cut short inside the text
      {"\xf0\x9f\x98", fffd},                              // a four-byte sequence missing its last byte
      {std::string("nul\0in", 6), std::string("nul\0in", 6)},  // NUL is valid UTF-8
  };
  for (const Bad& b : cases) {
    EXPECT_EQ(pav::is_valid_utf8(b.in), b.in == b.out);
    const std::string got = pav::utf8_clean(b.in);
    EXPECT_EQ(got, b.out);
    EXPECT_TRUE(pav::is_valid_utf8(got));
  }
}

TEST(Utf8Text, CutsOnlyAtCharacterBoundariesAndMarksTheCut) {
  // Four euro signs (3 bytes each): 12 bytes.
  const std::string euros = "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac";
  EXPECT_EQ(pav::utf8_clean(euros, 12), euros);                       // fits: unchanged, no mark
  EXPECT_EQ(pav::utf8_clean(euros, 11), "\xe2\x82\xac\xe2\x82\xac...");  // 6 + 3 bytes
  EXPECT_EQ(pav::utf8_clean(euros, 9), "\xe2\x82\xac\xe2\x82\xac...");
  EXPECT_EQ(pav::utf8_clean(euros, 8), "\xe2\x82\xac...");
  EXPECT_EQ(pav::utf8_clean(euros, 3), "...");
  EXPECT_EQ(pav::utf8_clean(euros, 2), "");
  EXPECT_EQ(pav::utf8_clean("abcdef", 5), "ab...");
  EXPECT_EQ(pav::utf8_clean(std::string(1000000, 'x'), 100).size(), 100u);
  // Replacement characters count at their own size (3 bytes), not the byte they replace.
  EXPECT_EQ(pav::utf8_clean("\xff\xff\xff", 8), "\xef\xbf\xbd...");
  EXPECT_EQ(pav::utf8_boundary(euros, 4), 3u);
  EXPECT_EQ(pav::utf8_boundary(euros, 3), 3u);
  EXPECT_EQ(pav::utf8_boundary(euros, 2), 0u);
  EXPECT_EQ(pav::utf8_boundary(euros, 100), 12u);
  // A cut at every byte of a mixed text stays valid and within the bound.
  const std::string mixed = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z\xff";
  for (std::size_t max = 0; max <= mixed.size() + 4; ++max) {
    const std::string got = pav::utf8_clean(mixed, max);
    EXPECT_LE(got.size(), max);
    EXPECT_TRUE(pav::is_valid_utf8(got)) << max;
  }
}

TEST(Version, IsTheProjectVersionAndACommitOrUnknown) {
  const std::string v = pav::version();
  EXPECT_EQ(v, PAV_EXPECTED_VERSION);
  const std::string c = pav::source_commit();
  const bool hex12 = c.size() >= 12 && c.substr(0, 12).find_first_not_of("0123456789abcdef") == std::string::npos &&
                     (c.size() == 12 || c.substr(12) == "-dirty");
  EXPECT_TRUE(c == "unknown" || hex12) << c;
}
