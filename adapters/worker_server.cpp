// SPDX-License-Identifier: Apache-2.0
#include "adapters/worker_server.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <limits>
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
      // A read may bring the end of a line past the limit with its newline.
      const bool too_long = skipping || int64_t(nl) > kernels::kMaxWorkerLineBytes;
      line = too_long ? std::string() : buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return too_long ? LineRead::too_long : LineRead::line;
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

TensorView take(Materialized& m, const input::Object& tensors, const char* name, bool with_files, const std::string& dir) {
  if (!tensors.has(name)) return {};
  const json& d = tensors.at(name);
  m.tensors.push_back(with_files ? protocol::load_tensor(d, dir, name) : protocol::describe_tensor(d, name));
  return m.tensors.back().view;
}

// An output's shape: `rank` extents, each within the protocol's bound.
std::vector<int64_t> output_shape(const input::Object& outputs, const char* name, size_t rank) {
  const input::Object o = outputs.object(name);
  return o.array("shape", rank, rank).integers<int64_t>(-protocol::kMaxExtent, protocol::kMaxExtent);
}

// The request read through the shared reader (input/json_input.hpp): every
// field typed and range-checked, "request: FIELD: why" when it is not. The
// values only need to be representable: the kernel's check judges them.
void build(Materialized& m, const json& req, bool with_files) {
  const input::Object r(req, "request");
  const input::Object tensors = r.object("tensors");
  const input::Object args = r.object("args");
  const std::string dir = with_files ? r.string("dir") : std::string();
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
  (void)kernels::parse_cache_layout(args.choice("cache_layout", {"packed", "nhd", "hnd"}, "packed"), c.layout);
  (void)kernels::parse_page_table(args.choice("page_table", {"block_table", "csr"}, "block_table"), c.page_table);
  c.context_lens = take(m, tensors, "context_lens", with_files, dir);
  c.k_scale = take(m, tensors, "k_scale", with_files, dir);
  c.v_scale = take(m, tensors, "v_scale", with_files, dir);
  if (args.string("kv_storage", "") == "latent") {  // MLA: V is K's first v_head_dim dims, one scale
    c.v_latent = true;
    const int64_t dv = args.integer<int64_t>("v_head_dim", 0, protocol::kMaxExtent, 0);
    if (c.k_cache.rank == 4) c.v_cache = kernels::latent_v(c.k_cache, dv);
    c.v_scale = c.k_scale;
  }
  const TensorView work = take(m, tensors, "work_info", with_files, dir);
  const TensorView reduce = take(m, tensors, "reduce_info", with_files, dir);
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  c.q_len = args.integer<int>("q_len", INT32_MIN, INT32_MAX);
  c.opt.softmax_scale = float(args.number("softmax_scale", -kFloatMax, kFloatMax));
  c.variant.window_left = args.integer<int32_t>("window_left", INT32_MIN, INT32_MAX, -1);
  c.variant.soft_cap = float(args.number("soft_cap", -kFloatMax, kFloatMax, 0.0));
  c.variant.sinks = take(m, tensors, "sinks", with_files, dir);
  c.variant.alibi_slopes = take(m, tensors, "alibi_slopes", with_files, dir);
  m.request.max_partitions = args.integer<int64_t>("max_partitions", INT32_MIN, INT32_MAX, 0);
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
    const input::Object outputs = r.object("outputs");
    DType t;
    const input::Object o = outputs.object("out");
    if (!kernels::parse_dtype(o.string("dtype"), t) || t == DType::none) o.fail("dtype", "unknown dtype");
    const auto shape = output_shape(outputs, "out", 3);
    const int es = std::max(kernels::dtype_size(t), 1);
    c.out = TensorView::contiguous_of(nullptr, t, {shape[0], shape[1], shape[2]});
    if (const std::string why = protocol::storage_problem(c.out, es); !why.empty())
      throw std::runtime_error("outputs.out: " + why);
    m.out.assign(size_t(std::max<int64_t>(c.out.numel(), 0) * es), 0);
    c.out.data = m.out.data();
    if (outputs.has("lse")) {
      const auto ls = output_shape(outputs, "lse", 2);
      m.request.lse = TensorView::contiguous_of(nullptr, DType::f32, {ls[0], ls[1]});
      if (const std::string why = protocol::storage_problem(m.request.lse, 4); !why.empty())
        throw std::runtime_error("outputs.lse: " + why);
      m.lse.assign(size_t(std::max<int64_t>(m.request.lse.numel(), 0) * 4), 0);
      m.request.lse.data = m.lse.data();
    }
  } else if (tensors.has("out")) {
    c.out = take(m, tensors, "out", false, dir);
    if (tensors.has("lse")) m.request.lse = take(m, tensors, "lse", false, dir);
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
    // op of any other type (a number, null, a list) is an unknown op, never an internal error.
    const json* op_field = req.is_object() && req.contains("op") ? &req["op"] : nullptr;
    const std::string op = op_field && op_field->is_string() ? op_field->get<std::string>() : std::string();
    if (op_field && !op_field->is_string()) {
      write_line(out_fd, failure(req, "error", "request: op: expected a string, got " +
                                                   std::string(op_field->type_name())).dump());
      continue;
    }
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
