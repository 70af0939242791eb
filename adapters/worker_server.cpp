// SPDX-License-Identifier: Apache-2.0
#include "adapters/worker_server.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/core.h>

#include "adapters/npy.hpp"
#include "adapters/worker_protocol.hpp"
#include "input/json_input.hpp"
#include "kernels/limits.hpp"

namespace pav::adapters {

using kernels::DType;
using kernels::TensorView;
using nlohmann::json;

namespace {

enum class LineRead { line, too_long, end };

// One request line; a line longer than kMaxWorkerLineBytes is skipped to its
// newline without being held (too_long).
LineRead read_line(int fd, std::string& buffer, std::string& line) {
  bool skipping = false;
  for (;;) {
    const auto nl = buffer.find('\n');
    if (nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return skipping ? LineRead::too_long : LineRead::line;
    }
    if (int64_t(buffer.size()) > kernels::kMaxWorkerLineBytes) {
      skipping = true;
      buffer.clear();
    }
    char chunk[65536];
    const ssize_t r = ::read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return LineRead::end;
    buffer.append(chunk, size_t(r));
  }
}

void write_line(int fd, const std::string& text) {
  const std::string line = text + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t w = ::write(fd, line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += size_t(w);
  }
}

// The buffers of one request, alive while the kernel runs.
struct Materialized {
  std::vector<protocol::OwnedTensor> tensors;
  std::vector<uint8_t> out, lse;
  kernels::PlanView plan;
  DecodeRequest request;
};

TensorView take(Materialized& m, const json& tensors, const char* name, bool with_files, const std::string& dir) {
  if (!tensors.contains(name)) return {};
  const json& d = tensors.at(name);
  m.tensors.push_back(with_files ? protocol::load_tensor(d, dir, name) : protocol::describe_tensor(d, name));
  return m.tensors.back().view;
}

void build(Materialized& m, const json& req, bool with_files) {
  const json& tensors = req.at("tensors");
  const json& args = req.at("args");
  const std::string dir = with_files ? req.at("dir").get<std::string>() : std::string();
  m.tensors.reserve(16);
  kernels::DecodeCall& c = m.request.call;
  c.q = take(m, tensors, "q", with_files, dir);
  c.k_cache = take(m, tensors, "k_cache", with_files, dir);
  c.v_cache = take(m, tensors, "v_cache", with_files, dir);
  c.kv_cache = take(m, tensors, "kv_cache", with_files, dir);
  if (c.kv_cache.present() && c.kv_cache.rank >= 2) {  // K and V are its [:, 0] and [:, 1] halves
    c.k_cache = kernels::kv_half(c.kv_cache, 0);
    c.v_cache = kernels::kv_half(c.kv_cache, 1);
  }
  c.block_tables = take(m, tensors, "block_tables", with_files, dir);
  c.kv_indptr = take(m, tensors, "kv_indptr", with_files, dir);
  c.kv_indices = take(m, tensors, "kv_indices", with_files, dir);
  c.kv_last_page_len = take(m, tensors, "kv_last_page_len", with_files, dir);
  if (!kernels::parse_cache_layout(args.value("cache_layout", std::string("packed")), c.layout))
    throw std::runtime_error("args.cache_layout: unknown layout");
  if (!kernels::parse_page_table(args.value("page_table", std::string("block_table")), c.page_table))
    throw std::runtime_error("args.page_table: unknown page table");
  c.context_lens = take(m, tensors, "context_lens", with_files, dir);
  c.k_scale = take(m, tensors, "k_scale", with_files, dir);
  c.v_scale = take(m, tensors, "v_scale", with_files, dir);
  if (args.value("kv_storage", std::string()) == "latent") {  // MLA: V is K's first v_head_dim dims, one scale
    c.v_latent = true;
    if (c.k_cache.rank == 4) c.v_cache = kernels::latent_v(c.k_cache, args.value("v_head_dim", int64_t(0)));
    c.v_scale = c.k_scale;
  }
  const TensorView work = take(m, tensors, "work_info", with_files, dir);
  const TensorView reduce = take(m, tensors, "reduce_info", with_files, dir);
  c.q_len = args.at("q_len").get<int>();
  c.opt.softmax_scale = args.at("softmax_scale").get<float>();
  c.variant.window_left = args.value("window_left", -1);
  c.variant.soft_cap = args.value("soft_cap", 0.0f);
  c.variant.sinks = take(m, tensors, "sinks", with_files, dir);
  c.variant.alibi_slopes = take(m, tensors, "alibi_slopes", with_files, dir);
  m.request.max_partitions = args.value("max_partitions", int64_t(0));
  if (work.present() || reduce.present()) {
    m.plan.work_info = work.rank == 2 && work.dtype == DType::i32 ? work.as<int32_t>() : nullptr;
    m.plan.reduce_info = reduce.rank == 2 && reduce.dtype == DType::i32 ? reduce.as<int32_t>() : nullptr;
    m.plan.capacity = work.rank == 2 ? work.shape[0] : 0;
    m.plan.num_seqs = reduce.rank == 2 ? reduce.shape[0] : 0;
    m.plan.kv_heads = c.k_cache.rank >= 3 ? c.k_cache.shape[c.layout == kernels::CacheLayout::nhd ? 2 : 1] : 0;
    m.plan.max_partitions = m.request.max_partitions;
    m.request.plan = &m.plan;
  }
  if (with_files) {
    const json& outputs = req.at("outputs");
    const json& o = outputs.at("out");
    DType t;
    if (!kernels::parse_dtype(o.at("dtype").get<std::string>(), t)) throw std::runtime_error("outputs.out: unknown dtype");
    const auto shape = o.at("shape").get<std::vector<int64_t>>();
    if (shape.size() != 3) throw std::runtime_error("outputs.out: expected rank 3");
    const int es = std::max(kernels::dtype_size(t), 1);
    c.out = TensorView::contiguous_of(nullptr, t, {shape[0], shape[1], shape[2]});
    if (const std::string why = protocol::storage_problem(c.out, es); !why.empty())
      throw std::runtime_error("outputs.out: " + why);
    m.out.assign(size_t(std::max<int64_t>(c.out.numel(), 0) * es), 0);
    c.out.data = m.out.data();
    if (outputs.contains("lse")) {
      const auto ls = outputs.at("lse").at("shape").get<std::vector<int64_t>>();
      if (ls.size() != 2) throw std::runtime_error("outputs.lse: expected rank 2");
      m.request.lse = TensorView::contiguous_of(nullptr, DType::f32, {ls[0], ls[1]});
      if (const std::string why = protocol::storage_problem(m.request.lse, 4); !why.empty())
        throw std::runtime_error("outputs.lse: " + why);
      m.lse.assign(size_t(std::max<int64_t>(m.request.lse.numel(), 0) * 4), 0);
      m.request.lse.data = m.lse.data();
    }
  } else if (tensors.contains("out")) {
    c.out = take(m, tensors, "out", false, dir);
    if (tensors.contains("lse")) m.request.lse = take(m, tensors, "lse", false, dir);
  }
}

json failure(const json& req, const std::string& status, const std::string& why) {
  json r = {{"ok", false}, {"status", status}, {"error", why}};
  if (req.is_object() && req.contains("id")) r["id"] = req.at("id");
  return r;
}

void send_reply(int fd, const ServeHooks& hooks, const json& req, const json& reply) {
  if (hooks.replace_reply)
    if (auto replaced = hooks.replace_reply(req, reply)) {
      write_line(fd, *replaced);
      return;
    }
  write_line(fd, reply.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace

int serve_worker(KernelUnderTest& kernel, int in_fd, int out_fd, const ServeHooks& hooks) {
  std::string buffer, line;
  for (LineRead got; (got = read_line(in_fd, buffer, line)) != LineRead::end;) {
    if (got == LineRead::too_long) {
      write_line(out_fd, failure(json(), "error",
                                 fmt::format("request line longer than {} bytes", kernels::kMaxWorkerLineBytes))
                             .dump());
      continue;
    }
    json req;
    try {
      req = input::parse_json(line, "request");
    } catch (const input::InputError& e) {
      write_line(out_fd, failure(json(), "error", std::string("request is not JSON: ") + e.what()).dump());
      continue;
    }
    const std::string op = req.is_object() ? req.value("op", std::string()) : std::string();
    if (op == "quit") return 0;
    if (op == "describe") {
      json d = to_json(kernel.description());
      d["memory"] = "host";  // what crosses the protocol is host memory, whatever the kernel behind it uses
      send_reply(out_fd, hooks, req, json({{"ok", true}, {"protocol", protocol::kVersion}, {"kernel", d}}));
      continue;
    }
    if (std::find(protocol::kOps.begin(), protocol::kOps.end(), op) == protocol::kOps.end()) {
      write_line(out_fd, failure(req, "error", "unknown op '" + op + "'").dump());
      continue;
    }
    json reply;
    try {
      Materialized m;
      build(m, req, op == "decode");
      if (op == "check") {
        const CallResult r = kernel.check(m.request);
        if (r.ok()) reply = {{"id", req.at("id")}, {"ok", true}, {"accept", true}};
        else if (r.outcome == Outcome::rejected)
          reply = {{"id", req.at("id")}, {"ok", true}, {"accept", false}, {"reason", r.message}};
        else reply = failure(req, "error", r.message);
      } else {
        const CallResult r = kernel.decode(m.request);
        if (r.ok()) {
          const std::string dir = req.at("dir").get<std::string>();
          npy::write(dir + "/out.npy", m.request.call.out);
          if (m.request.lse.present()) npy::write(dir + "/lse.npy", m.request.lse);
          reply = {{"id", req.at("id")}, {"ok", true}};
        } else {
          reply = failure(req, std::string(protocol::status_of(r.outcome)), r.message);
        }
      }
    } catch (const std::exception& e) {
      reply = failure(req, "error", std::string("malformed request: ") + e.what());
    }
    send_reply(out_fd, hooks, req, reply);
  }
  return 0;
}

}  // namespace pav::adapters
