// SPDX-License-Identifier: Apache-2.0
#include "adapters/worker_kernel.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/core.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "adapters/npy.hpp"
#include "adapters/worker_protocol.hpp"
#include "common/durable_file.hpp"
#include "common/utf8_text.hpp"
#include "input/json_input.hpp"
#include "kernels/limits.hpp"

extern char** environ;

namespace pav::adapters {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

inline constexpr size_t kMaxLine = size_t(kernels::kMaxWorkerLineBytes);  // a reply line longer than this is garbage

// A misbehaving worker, caught by the call that saw it.
struct WorkerFault {
  std::string message;
};

std::string status_text(int st) {
  if (WIFSIGNALED(st)) return fmt::format("worker killed by signal {} ({})", WTERMSIG(st), strsignal(WTERMSIG(st)));
  if (WIFEXITED(st)) {
    const int code = WEXITSTATUS(st);
    if (code > 128 && code < 128 + NSIG)
      return fmt::format("worker exited with status {} (how a shell reports signal {}, {})", code, code - 128,
                         strsignal(code - 128));
    return fmt::format("worker exited with status {}", code);
  }
  return fmt::format("worker ended (wait status {})", st);
}

std::string exchange_base(const std::string& chosen) {
  if (!chosen.empty()) return chosen;
  if (fs::is_directory("/dev/shm") && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  if (const char* t = std::getenv("TMPDIR"); t && *t) return t;
  return "/tmp";
}

void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { ::signal(SIGPIPE, SIG_IGN); });
}

class WorkerKernel final : public KernelUnderTest {
 public:
  WorkerKernel(std::string command, std::string spec, std::string adapter, const OpenOptions& o)
      : command_(std::move(command)), spec_(std::move(spec)), adapter_(std::move(adapter)),
        timeout_(std::max(o.timeout_seconds, 0.001)), should_stop_(o.should_stop) {
    ignore_sigpipe();
    std::string base = exchange_base(o.exchange_dir);
    std::string templ = base + "/pav-XXXXXX";
    if (!::mkdtemp(templ.data()))
      throw KernelUnavailable(fmt::format("cannot make an exchange folder under {}: {}", base, std::strerror(errno)));
    root_ = templ;
    log_path_ = root_ + "/worker.log";
    try {
      start(/*first=*/true);
    } catch (...) {
      stop();
      std::error_code ec;
      fs::remove_all(root_, ec);
      throw;
    }
  }

  ~WorkerKernel() override {
    stop();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  const KernelDescription& description() const override { return description_; }
  std::string adapter() const override { return adapter_; }
  std::string spec() const override { return spec_; }
  int64_t decode_calls() const override { return decode_calls_.load(); }

  CallResult check(const DecodeRequest& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    return guarded([&]() -> CallResult {
      const int64_t id = ++next_id_;
      const json reply = exchange(protocol::check_request(id, r), id);
      if (!reply.at("ok").get<bool>()) return {Outcome::kernel_error, error_text(reply)};
      if (!reply.contains("accept") || !reply.at("accept").is_boolean())
        throw WorkerFault{"worker protocol error: a check reply without a boolean 'accept': " + input::excerpt(reply, 200)};
      if (reply.at("accept").get<bool>()) return CallResult::success();
      const std::string reason = string_member(reply, "reason");
      return {Outcome::rejected, reason.empty() ? "(no reason given)" : reason};
    });
  }

  CallResult decode(const DecodeRequest& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++decode_calls_;
    const std::string dir = root_ + "/call";
    CallResult res = guarded([&]() -> CallResult {
      const int64_t id = ++next_id_;
      // The folder is made once; made again (its inputs with it) when the
      // worker removed or replaced it.
      struct stat st {};
      if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_ino != call_folder_.first ||
          st.st_dev != call_folder_.second) {
        inputs_.clear();
        make_call_folder(dir);
        if (::lstat(dir.c_str(), &st) != 0)
          throw IoError(fmt::format("--exchange-dir: the call folder {} vanished: {}", dir, std::strerror(errno)));
        call_folder_ = {st.st_ino, st.st_dev};
      }
      remove_outputs(dir);
      // The inputs stay in their files between calls: a file is rewritten
      // only where the call's bytes differ from the call before's.
      for (const protocol::NamedTensor& t : protocol::inputs_of(r)) {
        auto it = inputs_.find(t.name);
        if (it == inputs_.end())
          it = inputs_.emplace(t.name, std::make_unique<npy::KeptFile>(dir + "/" + t.name + ".npy")).first;
        try {
          it->second->put(protocol::sent_as_span(t.view) ? protocol::span_view(t.view) : t.view);
        } catch (const npy::Error& e) {
          // pav's own write (a full --exchange-dir, an I/O error): no verdict
          // about the kernel, the run cannot go on (exit 3).
          throw IoError(std::string("--exchange-dir: cannot write a call's inputs: ") + e.what());
        }
      }
      const json reply = exchange(protocol::decode_request(id, dir, r, description_.scratch), id);
      if (!reply.at("ok").get<bool>()) {
        const std::string status = reply.contains("status") ? string_member(reply, "status") : "error";
        Outcome outcome = Outcome::kernel_error;
        if (protocol::outcome_of_status(status, outcome)) return {outcome, error_text(reply)};
        return {Outcome::kernel_error, fmt::format("{} (status '{}', not one of the protocol's)", error_text(reply),
                                                   utf8_clean(status, 64))};
      }
      read_output(dir + "/out.npy", r.call.out, "out.npy");
      if (r.lse.present()) read_output(dir + "/lse.npy", r.lse, "lse.npy");
      return CallResult::success();
    });
    remove_outputs(dir);
    return res;
  }

 private:
  // Runs one exchange; a fault kills the worker (restarted on the next call)
  // and becomes the call's result, with what the worker wrote to stderr.
  // pav's own failures (the call folder, its inputs, a pipe for a restart)
  // are thrown as IoError: never a verdict about the kernel. Every message
  // that carries the worker's text is valid UTF-8 of bounded length.
  template <class F>
  CallResult guarded(F f) {
    log_mark_ = log_size();
    CallResult res;
    try {
      if (pid_ < 0) {
        try {
          start(/*first=*/false);
        } catch (const KernelUnavailable& e) {
          throw IoError(std::string("cannot restart the worker: ") + e.what());
        }
      }
      res = f();
    } catch (const WorkerFault& w) {
      stop();
      res = {Outcome::fault, utf8_clean(w.message, size_t(kernels::kMaxKernelMessageBytes)) + log_tail()};
    } catch (const IoError&) {
      stop();
      throw;
    } catch (const json::exception& e) {  // a reply of the wrong shape somewhere
      stop();
      res = {Outcome::fault, std::string("worker protocol error: ") + e.what() + log_tail()};
    }
    res.message = utf8_clean(res.message, size_t(kernels::kMaxKernelMessageBytes + kernels::kMaxWorkerStderrBytes + 64));
    return res;
  }

  // The calls' folder, new: whatever the worker left under that name is
  // removed first (never followed), so no input lands in a FIFO or through a
  // link it planted.
  static void make_call_folder(const std::string& dir) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (::mkdir(dir.c_str(), 0700) != 0)
      throw IoError(fmt::format("--exchange-dir: cannot make the call's folder {}: {}", dir, std::strerror(errno)));
  }

  // The outputs of a call, and whatever a worker left under their names
  // (never followed): a call never reads the output of the call before.
  static void remove_outputs(const std::string& dir) {
    std::error_code ec;
    for (const char* name : {"out.npy", "lse.npy", "out.npy.part", "lse.npy.part"}) fs::remove_all(dir + "/" + name, ec);
  }

  // A string member of a reply ("" when absent); a member of another type is
  // a protocol error.
  static std::string string_member(const json& reply, const char* key) {
    const auto it = reply.find(key);
    if (it == reply.end()) return {};
    if (!it->is_string())
      throw WorkerFault{fmt::format("worker protocol error: '{}' is not a string: {}", key, input::excerpt(*it))};
    return utf8_clean(it->get<std::string>(), size_t(kernels::kMaxKernelMessageBytes));
  }

  json exchange(const json& request, int64_t id) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_));
    send(request.dump() + "\n", deadline, id);
    const std::string line = receive(deadline, id);
    json reply;
    try {
      reply = input::parse_json(line, "reply");
    } catch (const input::InputError& e) {
      throw WorkerFault{"worker protocol error: a reply line that is not JSON: " + clip(line) + " (" + e.what() + ")"};
    }
    if (!reply.is_object() || !reply.contains("ok") || !reply.at("ok").is_boolean())
      throw WorkerFault{"worker protocol error: a reply without a boolean 'ok': " + clip(line)};
    if (!reply.contains("id") || !reply.at("id").is_number_integer() || reply.at("id").get<int64_t>() != id)
      throw WorkerFault{fmt::format("worker protocol error: a reply to request {} carries id {}", id,
                                    reply.contains("id") ? input::excerpt(reply.at("id")) : std::string("(none)"))};
    return reply;
  }

  static std::string error_text(const json& reply) {
    const auto it = reply.find("error");
    if (it != reply.end() && it->is_string() && !it->get<std::string>().empty())
      return utf8_clean(it->get<std::string>(), size_t(kernels::kMaxKernelMessageBytes));
    return "(no message)";
  }

  // A line the worker wrote, quoted: valid UTF-8, at most 200 bytes, one line.
  static std::string clip(const std::string& s) {
    std::string out = utf8_clean(s, 200);
    for (char& c : out)
      if (c == '\n' || c == '\r') c = ' ';
    return "'" + out + "'";
  }

  // An output file: a regular file in the call's folder (no symlink, FIFO or
  // device; see npy::read) no longer than the view's shape calls for.
  void read_output(const std::string& path, const kernels::TensorView& view, const char* name) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec)))
      throw WorkerFault{fmt::format("worker output: {} missing after an ok reply", name)};
    const int64_t bytes = std::max<int64_t>(view.numel(), 0) * std::max(kernels::dtype_size(view.dtype), 1);
    try {
      npy::copy_into(npy::read(path, bytes), view, name);
    } catch (const npy::Error& e) {
      throw WorkerFault{std::string("worker output: ") + e.what()};
    }
  }

  // ---- the process ----

  void start(bool first) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) throw KernelUnavailable(std::string("pipe: ") + std::strerror(errno));
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      throw KernelUnavailable(std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, def;
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setpgroup(&attr, 0);  // its own group: a timeout kills the shell and what it started
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    const char* argv[] = {"/bin/sh", "-c", command_.c_str(), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      ::close(in[1]);
      ::close(out[0]);
      const std::string why = fmt::format("cannot start /bin/sh -c '{}': {}", command_, std::strerror(rc));
      if (first) throw KernelSpecError("--kernel " + spec_excerpt() + ": " + why);
      throw WorkerFault{why};
    }
    pid_ = pid;
    to_worker_ = in[1];
    from_worker_ = out[0];
    ::fcntl(to_worker_, F_SETFL, ::fcntl(to_worker_, F_GETFL) | O_NONBLOCK);
    ::fcntl(from_worker_, F_SETFL, ::fcntl(from_worker_, F_GETFL) | O_NONBLOCK);
    buffer_.clear();
    if (!first) ++restarts_;
    handshake(first);
  }

  void handshake(bool first) {
    const int64_t mark = first ? 0 : log_mark_;
    try {
      const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(timeout_));
      send(json({{"op", "describe"}, {"protocol", protocol::kVersion}}).dump() + "\n", deadline, 0);
      const std::string line = receive(deadline, 0);
      json reply;
      try {
        reply = input::parse_json(line, "describe reply");
      } catch (const input::InputError& e) {
        throw WorkerFault{"worker protocol error: the describe reply is not JSON: " + clip(line) + " (" + e.what() +
                          ")"};
      }
      if (!reply.is_object() || !reply.contains("ok") || reply.at("ok") != true || !reply.contains("kernel"))
        throw WorkerFault{"worker protocol error: the describe reply lacks ok: true and kernel: " + clip(line)};
      if (reply.contains("protocol") && reply.at("protocol") != protocol::kVersion)
        throw WorkerFault{fmt::format("worker speaks protocol {}, pav speaks {}", input::excerpt(reply.at("protocol")),
                                      protocol::kVersion)};
      KernelDescription d;
      try {
        d = description_from_json(reply.at("kernel"));
      } catch (const KernelSpecError& e) {
        throw WorkerFault{e.what()};
      } catch (const json::exception& e) {
        throw WorkerFault{std::string("description: ") + e.what()};
      }
      if (d.memory != Memory::host) throw WorkerFault{"description: a worker's memory must be host"};
      if (first) {
        description_ = std::move(d);
      } else if (!(d == description_)) {
        // Not a verdict on the call that restarted it: the cases drawn so far
        // fit the first description, and a case saved now would replay against
        // a fresh worker. The run ends (exit 3).
        const std::string tail = log_tail();
        throw KernelChanged(utf8_clean("worker restarted with another description: " +
                                           description_change(description_, d),
                                       size_t(kernels::kMaxKernelMessageBytes)) +
                            tail);
      }
    } catch (const WorkerFault& w) {
      log_mark_ = mark;
      if (first) {
        const std::string tail = log_tail();
        stop();
        throw KernelSpecError(utf8_clean(fmt::format("--kernel {}: {}", spec_excerpt(), w.message),
                                         size_t(kernels::kMaxKernelMessageBytes)) +
                              tail);
      }
      throw WorkerFault{"worker restart failed: " + w.message};
    }
  }

  void send(const std::string& text, Clock::time_point deadline, int64_t id) {
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t w = ::write(to_worker_, text.data() + done, text.size() - done);
      if (w > 0) {
        done += size_t(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) {
        wait_fd(to_worker_, POLLOUT, deadline, id);
        continue;
      }
      // EPIPE: the worker closed its stdin. It may still have answered (a
      // reply already in the pipe); receive() finds that, or its exit.
      return;
    }
  }

  std::string receive(Clock::time_point deadline, int64_t id) {
    for (;;) {
      const auto nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        // A read may bring the end of a line past the limit with its newline.
        if (nl > kMaxLine) throw WorkerFault{line_too_long()};
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      if (buffer_.size() > kMaxLine) throw WorkerFault{line_too_long()};
      char chunk[65536];
      const ssize_t r = ::read(from_worker_, chunk, sizeof chunk);
      if (r > 0) {
        buffer_.append(chunk, size_t(r));
        continue;
      }
      if (r == 0) throw WorkerFault{ended_text()};
      if (errno == EINTR) continue;
      if (errno != EAGAIN) throw WorkerFault{std::string("reading the worker's stdout: ") + std::strerror(errno)};
      wait_fd(from_worker_, POLLIN, deadline, id);
    }
  }

  static std::string line_too_long() {
    return fmt::format("worker protocol error: a reply line longer than {} bytes", kMaxLine);
  }

  void wait_fd(int fd, short events, Clock::time_point deadline, int64_t id) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw WorkerFault{timeout_text(id)};
    // A stop asked during the call (a signal) ends the wait: the worker is
    // killed, and the run's engine drops the call's verdict.
    if (should_stop_ && should_stop_()) {
      note_call_cut_short();
      throw WorkerFault{fmt::format("pav was asked to stop while waiting for the reply to {}; the worker was killed",
                                    id ? fmt::format("request {}", id) : std::string("describe"))};
    }
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, int(std::min<int64_t>(left, 100)));
    if (rc < 0 && errno != EINTR) throw WorkerFault{std::string("poll: ") + std::strerror(errno)};
  }

  std::string timeout_text(int64_t id) const {
    return fmt::format("worker timed out: no reply to {} within {:g} s (--timeout); killed", 
                       id ? fmt::format("request {}", id) : std::string("describe"), timeout_);
  }

  // The worker stopped talking: wait briefly for it to exit and say how.
  std::string ended_text() {
    int st = 0;
    for (int i = 0; i < 200; ++i) {
      const pid_t w = ::waitpid(pid_, &st, WNOHANG);
      if (w == pid_) {
        pid_ = -1;
        return status_text(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return "worker closed its stdout and did not exit";
  }

  void stop() {
    if (to_worker_ >= 0) {
      if (pid_ > 0) {
        const std::string quit = "{\"op\":\"quit\"}\n";
        [[maybe_unused]] ssize_t ignored = ::write(to_worker_, quit.data(), quit.size());
      }
      ::close(to_worker_);
      to_worker_ = -1;
    }
    if (from_worker_ >= 0) {
      ::close(from_worker_);
      from_worker_ = -1;
    }
    if (pid_ > 0) {
      int st = 0;
      bool gone = false;
      for (int i = 0; i < 50 && !gone; ++i) {  // a well-behaved worker exits on quit / end of stdin
        gone = ::waitpid(pid_, &st, WNOHANG) == pid_;
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (!gone) {
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
      }
    }
    pid_ = -1;
    buffer_.clear();
  }

  int64_t log_size() const {
    std::error_code ec;
    const auto n = fs::file_size(log_path_, ec);
    return ec ? 0 : int64_t(n);
  }

  // What the worker wrote to stderr since the call began, last lines only.
  std::string log_tail() const {
    std::ifstream f(log_path_, std::ios::binary);
    if (!f) return {};
    f.seekg(0, std::ios::end);
    const int64_t end = f.tellg();
    const int64_t from = std::max(log_mark_, end - kernels::kMaxWorkerStderrBytes);
    if (end <= from) return {};
    std::string raw(size_t(end - from), '\0');
    f.seekg(from);
    f.read(raw.data(), std::streamsize(raw.size()));
    raw.resize(size_t(std::max<std::streamsize>(f.gcount(), 0)));
    // The excerpt may start inside a character: drop its continuation bytes
    // (at most three), then make the rest valid UTF-8.
    size_t skip = 0;
    if (from > log_mark_)
      while (skip < 3 && skip < raw.size() && (static_cast<unsigned char>(raw[skip]) & 0xc0) == 0x80) ++skip;
    std::string text = utf8_clean(std::string_view(raw).substr(skip));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    std::vector<std::string> lines;
    size_t start = 0;
    while (start <= text.size()) {
      const size_t nl = text.find('\n', start);
      lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    const size_t first = lines.size() > 6 ? lines.size() - 6 : 0;
    std::string out = "; worker stderr:";
    for (size_t i = first; i < lines.size(); ++i) out += " | " + lines[i];
    return out;
  }

  // The spec as a message names it: its start (the program and the kernel;
  // a description on its command line can run to kilobytes), so the reason
  // after it is never what a bounded message cuts off.
  std::string spec_excerpt() const { return utf8_clean(spec_, 300); }

  std::string command_, spec_, adapter_;
  double timeout_;
  std::function<bool()> should_stop_;
  std::string root_, log_path_;
  KernelDescription description_;
  pid_t pid_ = -1;
  int to_worker_ = -1, from_worker_ = -1;
  std::string buffer_;
  int64_t next_id_ = 0;
  // The inputs' files, kept between calls, and the folder's identity (inode, device).
  std::map<std::string, std::unique_ptr<npy::KeptFile>> inputs_;
  std::pair<ino_t, dev_t> call_folder_{0, 0};
  int64_t log_mark_ = 0;
  int64_t restarts_ = 0;
  std::mutex mu_;
  std::atomic<int64_t> decode_calls_{0};
};

}  // namespace

std::unique_ptr<KernelUnderTest> open_worker_kernel(const std::string& command, const std::string& spec,
                                                    const OpenOptions& options, const std::string& adapter) {
  return std::make_unique<WorkerKernel>(command, spec, adapter, options);
}

}  // namespace pav::adapters
