// SPDX-License-Identifier: Apache-2.0
// split_decode: a small split-KV paged-attention decode written against pav's
// kernel ABI (include/pav/kernel_abi.h), independent of pav's own kernels.
//
//   pav verify --kernel lib:build/cpu/examples/kernels/libsplit_decode.so
//   pav verify --kernel 'lib:build/cpu/examples/kernels/libsplit_decode.so --defect merge-ignores-max'
//
// Each (sequence, KV head) context is cut into partitions of whole 256-token
// tiles (at most max_partitions of them when pav passes a ceiling, else at most
// kDefaultPartitions); each partition computes its softmax state (max m, sum l,
// normalized output o) in float32, and the partitions are merged through their
// log-sum-exp. Q is not quantized; the softmax weights are kept in float32, or
// rounded to bf16 with the configuration word `--p-round bf16` (the numerics
// profile the description declares follows the choice).
//
// Configuration words: --defect NAME (one realistic bug, see kDefects),
// --p-round none|bf16.
#include <pav/kernel_abi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kTile = 256;             // tokens per partition unit
constexpr int64_t kDefaultPartitions = 8;  // partitions per context without a ceiling

struct Defect {
  const char* name;
  const char* what;
};
constexpr std::array<Defect, 4> kDefects{{
    {"merge-ignores-max", "partition merge weights each partial by its sum l alone, without exp(m_p - M)"},
    {"partition-end-off-by-one", "every partition but the last stops one token early: boundary tokens are lost"},
    {"empty-row-nan", "a row that sees no token divides 0 by 0 instead of writing 0"},
    {"scale-token-major", "per-token scales indexed as [blocks, block_size, Hkv] instead of [blocks, Hkv, block_size]"},
}};

struct Instance {
  std::string defect;  // "" or one of kDefects
  bool p_bf16 = false;
  std::array<float, 256> fp8_fn{}, fp8_fnuz{};
  bool has(std::string_view d) const { return defect == d; }
};

void message(char* buf, size_t size, const std::string& text) {
  if (buf == nullptr || size == 0) return;
  std::snprintf(buf, size, "%s", text.c_str());
}

// fp8 e4m3 values by code: exponent bias 7 (fn: NaN 0x7f/0xff) or 8 (fnuz:
// NaN 0x80 only); subnormal m * 2^(-2 - bias), normal (8 + m) * 2^(e - 3 - bias).
std::array<float, 256> fp8_values(bool fnuz) {
  std::array<float, 256> t{};
  const int bias = fnuz ? 8 : 7;
  for (int c = 0; c < 256; ++c) {
    const int e = (c >> 3) & 15, m = c & 7;
    float v = e == 0 ? std::ldexp(float(m), -2 - bias) : std::ldexp(float(8 + m), e - 3 - bias);
    if (c & 0x80) v = -v;
    const bool nan = fnuz ? c == 0x80 : (c & 0x7f) == 0x7f;
    t[c] = nan ? std::numeric_limits<float>::quiet_NaN() : v;
  }
  return t;
}

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// bf16 is the top half of a float32; rounding to nearest even adds 0x7fff plus
// the lowest kept bit before truncating. NaN keeps a quiet NaN.
uint16_t to_bf16(float f) {
  const uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float round_bf16(float f) { return bits_to_float(uint32_t(to_bf16(f)) << 16); }

float load_half(const pav_tensor& t, int64_t off) {
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(t.data) + off * 2, 2);
  if (t.dtype == PAV_DTYPE_BF16) return bits_to_float(uint32_t(h) << 16);
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return float(v);
}

void store(const pav_tensor& t, int64_t off, float v) {
  char* p = static_cast<char*>(t.data);
  if (t.dtype == PAV_DTYPE_F32) {
    std::memcpy(p + off * 4, &v, 4);
  } else if (t.dtype == PAV_DTYPE_BF16) {
    const uint16_t h = to_bf16(v);
    std::memcpy(p + off * 2, &h, 2);
  } else {
    const _Float16 h = _Float16(v);
    std::memcpy(p + off * 2, &h, 2);
  }
}

int32_t i32_at(const pav_tensor& t, int64_t i, int64_t j = 0) {
  return static_cast<const int32_t*>(t.data)[i * t.stride[0] + (t.rank > 1 ? j * t.stride[1] : 0)];
}

struct Dims {
  int64_t num_seqs, q_len, hq, hkv, d, g, bs, num_blocks, rows;
  bool trans;
};

// Softmax state of one partition for every row of a (sequence, KV head).
struct Partial {
  std::vector<float> m, l, o;  // [rows], [rows], [rows, D] (o normalized by l)
};

// One partition of one (sequence, KV head): tokens [begin, end).
struct Task {
  int64_t seq, kv, len, begin, end;
  size_t slot;  // index of its Partial
};

class Decoder {
 public:
  Decoder(const Instance& in, const pav_decode_args& a, const Dims& dm) : in_(in), a_(a), dm_(dm) {
    lut_ = a.k_cache.dtype == PAV_DTYPE_FP8_E4M3FNUZ ? in.fp8_fnuz.data() : in.fp8_fn.data();
  }

  void run() {
    // Partitions: whole 256-token tiles, at most the ceiling of them per context.
    std::vector<std::vector<size_t>> slots(size_t(dm_.num_seqs * dm_.hkv));
    for (int64_t seq = 0; seq < dm_.num_seqs; ++seq) {
      const int64_t len = i32_at(a_.context_lens, seq);
      const int64_t tiles = (len + kTile - 1) / kTile;
      const int64_t ceiling = a_.max_partitions > 0 ? a_.max_partitions : kDefaultPartitions;
      const int64_t parts = std::max<int64_t>(1, std::min(tiles, ceiling));
      const int64_t per_part = std::max<int64_t>(1, (tiles + parts - 1) / parts);
      for (int64_t kv = 0; kv < dm_.hkv; ++kv)
        for (int64_t p = 0; p * per_part < std::max<int64_t>(tiles, 1); ++p) {
          const int64_t begin = p * per_part * kTile;
          int64_t end = std::min(len, (p + 1) * per_part * kTile);
          if (end < len && in_.has("partition-end-off-by-one")) end -= 1;
          slots[size_t(seq * dm_.hkv + kv)].push_back(tasks_.size());
          tasks_.push_back({seq, kv, len, begin, std::max(begin, end), tasks_.size()});
        }
    }
    partials_.resize(tasks_.size());
    // Partitions are independent until the merge: spread them over threads.
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t t; (t = next.fetch_add(1)) < tasks_.size();) partials_[t] = attend(tasks_[t]);
    };
    const size_t threads =
        std::min<size_t>(tasks_.size(), std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    for (int64_t seq = 0; seq < dm_.num_seqs; ++seq)
      for (int64_t kv = 0; kv < dm_.hkv; ++kv) merge(seq, kv, slots[size_t(seq * dm_.hkv + kv)]);
  }

 private:
  float scale_at(const pav_tensor& s, int64_t blk, int64_t h, int64_t off) const {
    if (s.rank == 0) return 1.0f;
    const float* p = static_cast<const float*>(s.data);
    if (s.rank == 1) return p[0];
    if (in_.has("scale-token-major")) return p[(blk * dm_.bs + off) * dm_.hkv + h];  // as if [nb, bs, Hkv]
    return p[(blk * dm_.hkv + h) * dm_.bs + off];
  }

  // Tokens [begin, end) of the context; row r = p*G + j sees t < len - q_len + 1 + p.
  Partial attend(const Task& task) const {
    const int64_t rows = dm_.rows, D = dm_.d, bs = dm_.bs, kv = task.kv;
    Partial out{std::vector<float>(rows, -std::numeric_limits<float>::infinity()), std::vector<float>(rows, 0.0f),
                std::vector<float>(rows * D, 0.0f)};
    const int64_t n = task.end - task.begin;
    if (n <= 0) return out;
    // Queries [rows, D]; keys transposed [D, n] and values [n, D], dequantized:
    // the inner loops below then run over contiguous floats and vectorize.
    std::vector<float> q(rows * D), kt(D * n), v(n * D), s(n);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = task.seq * dm_.q_len + r / dm_.g, head = kv * dm_.g + r % dm_.g;
      for (int64_t x = 0; x < D; ++x)
        q[r * D + x] = load_half(a_.q, row * a_.q.stride[0] + head * a_.q.stride[1] + x);
    }
    const auto* kc = static_cast<const uint8_t*>(a_.k_cache.data);
    const auto* vc = static_cast<const uint8_t*>(a_.v_cache.data);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = task.begin + i, blk = i32_at(a_.block_tables, task.seq, t / bs), off = t % bs;
      const float ks = scale_at(a_.k_scale, blk, kv, off), vs = scale_at(a_.v_scale, blk, kv, off);
      const int64_t head_base = blk * dm_.hkv + kv;
      for (int64_t x = 0; x < D; ++x) {
        const int64_t ko = (head_base * (D / 16) + x / 16) * bs * 16 + off * 16 + x % 16;
        const int64_t vo = dm_.trans ? (head_base * (bs / 16) + off / 16) * D * 16 + x * 16 + off % 16
                                     : (head_base * D + x) * bs + off;
        kt[x * n + i] = lut_[kc[ko]] * ks;
        v[i * D + x] = lut_[vc[vo]] * vs;
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t p = r / dm_.g;
      const int64_t visible = std::min(task.end, task.len - dm_.q_len + 1 + p) - task.begin;
      if (visible <= 0) continue;
      std::fill(s.begin(), s.begin() + visible, 0.0f);
      for (int64_t x = 0; x < D; ++x) {
        const float qx = q[r * D + x];
        const float* krow = &kt[x * n];
        for (int64_t i = 0; i < visible; ++i) s[i] += qx * krow[i];
      }
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < visible; ++i) m = std::max(m, s[i] *= a_.softmax_scale);
      float l = 0.0f;
      float* o = &out.o[r * D];
      for (int64_t i = 0; i < visible; ++i) {
        float w = std::exp(s[i] - m);
        l += w;
        if (in_.p_bf16) w = round_bf16(w);
        const float* vi = &v[i * D];
        for (int64_t x = 0; x < D; ++x) o[x] += w * vi[x];
      }
      for (int64_t x = 0; x < D; ++x) o[x] /= l;
      out.m[r] = m;
      out.l[r] = l;
    }
    return out;
  }

  void merge(int64_t seq, int64_t kv, const std::vector<size_t>& slots) const {
    const int64_t D = dm_.d;
    std::vector<float> acc(D);
    for (int64_t r = 0; r < dm_.rows; ++r) {
      float M = -std::numeric_limits<float>::infinity();
      for (size_t slot : slots) M = std::max(M, partials_[slot].m[r]);
      std::fill(acc.begin(), acc.end(), 0.0f);
      float L = 0.0f;
      for (size_t slot : slots) {
        const Partial& p = partials_[slot];
        if (p.l[r] == 0.0f) continue;  // an empty partition adds nothing (and m = -inf)
        const float w = in_.has("merge-ignores-max") ? p.l[r] : p.l[r] * std::exp(p.m[r] - M);
        L += w;
        for (int64_t x = 0; x < D; ++x) acc[x] += w * p.o[r * D + x];
      }
      const bool empty = L == 0.0f && !in_.has("empty-row-nan");
      const int64_t row = seq * dm_.q_len + r / dm_.g, head = kv * dm_.g + r % dm_.g;
      for (int64_t x = 0; x < D; ++x)
        store(a_.out, row * a_.out.stride[0] + head * a_.out.stride[1] + x, empty ? 0.0f : acc[x] / L);
      if (a_.lse.rank == 2)
        static_cast<float*>(a_.lse.data)[row * a_.lse.shape[1] + head] =
            empty ? -std::numeric_limits<float>::infinity() : M + std::log(L);
    }
  }

  const Instance& in_;
  const pav_decode_args& a_;
  const Dims& dm_;
  const float* lut_;
  std::vector<Task> tasks_;
  std::vector<Partial> partials_;
};

constexpr std::array<int32_t, 5> kBlockSizes{16, 32, 64, 128, 256};
constexpr std::array<int32_t, 6> kHeadDims{64, 80, 96, 128, 256, 512};
constexpr int32_t kMaxQLen = 8;
constexpr int32_t kMaxGqa = 32;

template <class A>
bool contains(const A& list, int64_t v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

bool is_half(int32_t dt) { return dt == PAV_DTYPE_BF16 || dt == PAV_DTYPE_F16; }

bool contiguous(const pav_tensor& t) {
  int64_t want = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.stride[i] != want) return false;
    want *= t.shape[i];
  }
  return true;
}

bool positive(const pav_tensor& t) {
  for (int i = 0; i < t.rank; ++i)
    if (t.shape[i] < 1) return false;
  return true;
}

// q and out: head_dim stride 1, heads dense, rows at least Hq*D apart.
std::string rows_problem(const char* name, const pav_tensor& t) {
  if (t.stride[2] != 1) return std::string(name) + ": head_dim stride must be 1";
  if (t.stride[1] != t.shape[2] || t.stride[0] < t.shape[1] * t.shape[2])
    return std::string(name) + ": heads must be dense and rows at least Hq*D apart";
  return "";
}

// The reason a call is outside what this kernel runs, or "" when it runs it:
// the contract's rules (docs/verify-your-kernel.md) over this description, so
// check refuses exactly the calls decode cannot run. Reads shapes, dtypes and
// strides, plus the host-side lengths and block table; trusts no extent.
std::string refuse_reason(const pav_decode_args& a, Dims& dm) {
  const pav_tensor &q = a.q, &out = a.out, &k = a.k_cache, &v = a.v_cache;
  if (q.rank != 3 || !positive(q)) return "q must be [rows, Hq, D] with extents >= 1";
  if (!is_half(q.dtype)) return "q dtype must be bf16 or f16";
  if (auto why = rows_problem("q", q); !why.empty()) return why;
  if (out.rank != 3 || out.shape[0] != q.shape[0] || out.shape[1] != q.shape[1] || out.shape[2] != q.shape[2])
    return "out shape differs from q";
  if (out.dtype != q.dtype) return "out dtype must equal q's";
  if (auto why = rows_problem("out", out); !why.empty()) return why;
  dm.hq = q.shape[1];
  dm.d = q.shape[2];
  if (!contains(kHeadDims, dm.d)) return "head_dim " + std::to_string(dm.d) + " not supported";
  if (k.rank != 5 || !positive(k)) return "k_cache must be [nb, Hkv, D/16, bs, 16] with extents >= 1";
  if (k.dtype != PAV_DTYPE_FP8_E4M3FN && k.dtype != PAV_DTYPE_FP8_E4M3FNUZ) return "k_cache must be fp8";
  if (k.shape[4] != 16 || k.shape[2] * 16 != dm.d) return "k_cache does not hold head_dim in groups of 16";
  if (!contiguous(k)) return "k_cache must be contiguous";
  dm.num_blocks = k.shape[0];
  dm.hkv = k.shape[1];
  dm.bs = k.shape[3];
  if (!contains(kBlockSizes, dm.bs)) return "block_size " + std::to_string(dm.bs) + " not supported";
  if (dm.hq % dm.hkv != 0 || dm.hq / dm.hkv > kMaxGqa) return "Hq / Hkv is not a supported GQA ratio";
  dm.g = dm.hq / dm.hkv;
  if (v.dtype != k.dtype) return "v_cache dtype differs from k_cache";
  if (v.rank == 4 && v.shape[0] == dm.num_blocks && v.shape[1] == dm.hkv && v.shape[2] == dm.d && v.shape[3] == dm.bs)
    dm.trans = false;
  else if (v.rank == 5 && dm.bs % 16 == 0 && v.shape[0] == dm.num_blocks && v.shape[1] == dm.hkv &&
           v.shape[2] == dm.bs / 16 && v.shape[3] == dm.d && v.shape[4] == 16)
    dm.trans = true;
  else
    return "v_cache matches neither layout";
  if (!contiguous(v)) return "v_cache must be contiguous";
  const pav_tensor &bt = a.block_tables, &cl = a.context_lens;
  if (cl.rank != 1 || cl.dtype != PAV_DTYPE_I32 || cl.shape[0] < 1 || cl.stride[0] != 1)
    return "context_lens must be a contiguous [num_seqs >= 1] i32";
  dm.num_seqs = cl.shape[0];
  dm.q_len = a.q_len;
  if (dm.q_len < 1 || dm.q_len > kMaxQLen) return "q_len " + std::to_string(dm.q_len) + " outside 1..8";
  if (q.shape[0] != dm.num_seqs * dm.q_len) return "q rows differ from num_seqs * q_len";
  if (bt.rank != 2 || bt.dtype != PAV_DTYPE_I32 || bt.shape[0] < dm.num_seqs || bt.shape[1] < 1 || !contiguous(bt))
    return "block_tables must be a contiguous [>= num_seqs, >= 1] i32";
  if (bt.data == nullptr || cl.data == nullptr) return "block_tables and context_lens must be readable";
  for (int64_t s = 0; s < dm.num_seqs; ++s) {
    const int64_t len = i32_at(cl, s);
    if (len < 0) return "context_lens[" + std::to_string(s) + "] is negative";
    const int64_t pages = (len + dm.bs - 1) / dm.bs;
    if (pages > bt.shape[1]) return "context_lens[" + std::to_string(s) + "] needs more blocks than block_tables has";
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t b = i32_at(bt, s, i);
      if (b < 0 || b >= dm.num_blocks)
        return "block_tables[" + std::to_string(s) + "][" + std::to_string(i) + "] is outside the cache";
    }
  }
  const pav_tensor &ks = a.k_scale, &vs = a.v_scale;
  if ((ks.rank == 0) != (vs.rank == 0)) return "k_scale and v_scale must come together";
  int kind = 0;  // 0 none, 1 per tensor, 2 per token
  for (const pav_tensor* s : {&ks, &vs}) {
    if (s->rank == 0) continue;
    if (s->dtype != PAV_DTYPE_F32) return "scales must be f32";
    int here;
    if (s->rank == 1 && s->shape[0] == 1)
      here = 1;
    else if (s->rank == 3 && s->shape[0] == dm.num_blocks && s->shape[1] == dm.hkv && s->shape[2] == dm.bs &&
             contiguous(*s))
      here = 2;
    else
      return "scales must be [1] or a contiguous [num_blocks, Hkv, block_size]";
    if (s == &vs && here != kind) return "k_scale and v_scale kinds differ";
    kind = here;
  }
  if (a.lse.rank != 0 && (a.lse.rank != 2 || a.lse.dtype != PAV_DTYPE_F32 || a.lse.shape[0] != q.shape[0] ||
                          a.lse.shape[1] != dm.hq || !contiguous(a.lse)))
    return "lse must be a contiguous f32 [rows, Hq]";
  if (a.work_info.rank != 0 || a.reduce_info.rank != 0) return "a plan given to a kernel that splits by itself";
  if (a.max_partitions < 0) return "max_partitions must be >= 0";
  dm.rows = dm.q_len * dm.g;
  return "";
}

}  // namespace

extern "C" {

PAV_KERNEL_EXPORT uint32_t pav_kernel_abi_version(void) { return PAV_KERNEL_ABI_VERSION; }

PAV_KERNEL_EXPORT int pav_kernel_init(int argc, const char* const* argv, void** instance, char* err,
                                      size_t err_size) {
  auto* in = new Instance;
  in->fp8_fn = fp8_values(false);
  in->fp8_fnuz = fp8_values(true);
  for (int i = 0; i < argc; ++i) {
    const std::string_view word = argv[i];
    const bool has_value = i + 1 < argc;
    if (word == "--defect" && has_value) {
      const std::string_view name = argv[++i];
      const auto it = std::find_if(kDefects.begin(), kDefects.end(), [&](const Defect& d) { return name == d.name; });
      if (it == kDefects.end()) {
        std::string known;
        for (const Defect& d : kDefects) known += std::string(known.empty() ? "" : ", ") + d.name;
        message(err, err_size, "--defect: unknown defect '" + std::string(name) + "' (known: " + known + ")");
        delete in;
        return PAV_ERROR;
      }
      in->defect = std::string(name);
    } else if (word == "--p-round" && has_value) {
      const std::string_view mode = argv[++i];
      if (mode != "none" && mode != "bf16") {
        message(err, err_size, "--p-round: expected none or bf16, got '" + std::string(mode) + "'");
        delete in;
        return PAV_ERROR;
      }
      in->p_bf16 = mode == "bf16";
    } else {
      message(err, err_size, "unknown or incomplete configuration word '" + std::string(word) +
                                 "' (known: --defect NAME, --p-round none|bf16)");
      delete in;
      return PAV_ERROR;
    }
  }
  *instance = in;
  return PAV_OK;
}

PAV_KERNEL_EXPORT void pav_kernel_fini(void* instance) { delete static_cast<Instance*>(instance); }

PAV_KERNEL_EXPORT int pav_kernel_describe(void* instance, pav_kernel_desc* d, char* err, size_t err_size) {
  const auto* in = static_cast<const Instance*>(instance);
  if (in == nullptr || d == nullptr) {
    message(err, err_size, "describe needs an instance from pav_kernel_init");
    return PAV_ERROR;
  }
  std::snprintf(d->name, sizeof d->name, "split_decode");
  std::snprintf(d->version, sizeof d->version, "1.0%s%s%s", in->p_bf16 ? " p-bf16" : "",
                in->defect.empty() ? "" : " +defect.", in->defect.c_str());
  d->memory = PAV_MEMORY_HOST;
  d->q_dtypes = PAV_BIT(PAV_DTYPE_BF16) | PAV_BIT(PAV_DTYPE_F16);
  d->out_dtype = PAV_DTYPE_NONE;
  d->cache_dtypes = PAV_BIT(PAV_DTYPE_FP8_E4M3FN) | PAV_BIT(PAV_DTYPE_FP8_E4M3FNUZ);
  d->v_layouts = PAV_BIT(PAV_V_LAYOUT_PLAIN) | PAV_BIT(PAV_V_LAYOUT_TRANS);
  d->scale_kinds = PAV_BIT(PAV_SCALE_NONE) | PAV_BIT(PAV_SCALE_PER_TENSOR) | PAV_BIT(PAV_SCALE_PER_TOKEN);
  d->num_block_sizes = int32_t(kBlockSizes.size());
  std::copy(kBlockSizes.begin(), kBlockSizes.end(), d->block_sizes);
  d->num_head_dims = int32_t(kHeadDims.size());
  std::copy(kHeadDims.begin(), kHeadDims.end(), d->head_dims);
  d->num_gqa_ratios = kMaxGqa;
  for (int32_t g = 1; g <= kMaxGqa; ++g) d->gqa_ratios[g - 1] = g;
  d->min_q_len = 1;
  d->max_q_len = kMaxQLen;
  d->strided_q = 1;
  d->split = PAV_SPLIT_SELF;
  d->split_ceiling = 1;
  d->max_split_ceiling = 0;
  d->writes_lse = 1;
  d->thread_safe = 1;
  d->q_quant = PAV_Q_QUANT_NONE;
  d->p_round = in->p_bf16 ? PAV_P_ROUND_BF16 : PAV_P_ROUND_NONE;
  d->partial_dtype = PAV_DTYPE_F32;
  return PAV_OK;
}

PAV_KERNEL_EXPORT int pav_kernel_check(void* instance, const pav_decode_args* args, char* reason, size_t reason_size) {
  Dims dm{};
  const std::string why = refuse_reason(*args, dm);
  if (why.empty()) return PAV_OK;
  message(reason, reason_size, why);
  return PAV_REJECT;
}

PAV_KERNEL_EXPORT int pav_kernel_decode(void* instance, const pav_decode_args* args, char* err, size_t err_size) {
  const auto* in = static_cast<const Instance*>(instance);
  Dims dm{};
  const std::string why = refuse_reason(*args, dm);
  if (!why.empty()) {
    message(err, err_size, why);
    return PAV_REJECT;
  }
  Decoder(*in, *args, dm).run();
  return PAV_OK;
}

}  // extern "C"
