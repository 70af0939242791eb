// SPDX-License-Identifier: Apache-2.0
#pragma once
// A kernel under test: what it supports and how it computes (a description),
// an optional check entry (accept or refuse a call) and a decode entry. pav's
// properties, fuzzing, replay, drift and comparisons run against this interface
// and never know which adapter is behind it: pav's own kernels (pav:cpu,
// pav:gpu), a shared library through include/pav/kernel_abi.h (lib:PATH.so),
// the same library in a child process (--isolate) or a process worker speaking
// the JSON/.npy protocol (exec:CMD). docs/verify-your-kernel.md is the spec.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/durable_file.hpp"
#include "kernels/cache_format.hpp"
#include "kernels/call.hpp"
#include "kernels/numerics_profile.hpp"
#include "kernels/planner.hpp"

namespace pav::adapters {

// The enumerations follow the C header's meanings (its values are mapped in
// adapters/abi.cpp).
enum class Memory : uint8_t { host, device };
enum class Split : uint8_t { self, plan };
using Scales = kernels::ScaleKind;
// K and V as two tensors, as the halves of one [pages, 2, ...] tensor, or
// (MLA) one tensor whose keys' first D_v dims are the values.
enum class KvStorage : uint8_t { separate, combined, latent };
// An MLA head's dims: q and K have latent + rope, V and out latent.
struct MlaDims {
  int64_t latent = 512, rope = 64;
  auto operator<=>(const MlaDims&) const = default;
};
// Attention variants a kernel may declare (kernels::AttentionVariant says what
// each computes); pav sends a call with one only to a kernel that declares it.
enum class Feature : uint8_t { window, soft_cap, sinks, alibi };
// The base of the lse a kernel writes: natural log or log2.
enum class LseBase : uint8_t { e, two };
using kernels::PRound;
using kernels::QQuant;

// What the kernel declares about its arithmetic; the reference and the
// comparison standard follow it. partial is none for a kernel that never
// splits a row (its numerics are those of f32 partials).
struct Profile {
  QQuant q_quant = QQuant::none;
  PRound p_round = PRound::none;
  kernels::DType partial = kernels::DType::none;
  bool operator==(const Profile&) const = default;
  kernels::NumericsProfile numerics() const {
    return {q_quant, p_round, partial == kernels::DType::none ? kernels::DType::f32 : partial};
  }
};

struct KernelDescription {
  std::string name, version;
  Memory memory = Memory::host;
  std::vector<kernels::DType> q_dtypes;
  kernels::DType out_dtype = kernels::DType::none;  // none: out has q's dtype
  std::vector<kernels::DType> cache_dtypes;
  // The cache formats it reads (kernels/cache_format.hpp); a version-1 or -2
  // library and a description that names none read packed caches through
  // block tables, K and V separate.
  std::vector<kernels::CacheLayout> cache_layouts = {kernels::CacheLayout::packed};
  std::vector<kernels::VLayout> v_layouts;  // packed layout only
  std::vector<KvStorage> kv_storage = {KvStorage::separate};
  std::vector<MlaDims> mla_dims;  // the (latent, rope) pairs of its MLA calls (kv_storage latent)
  std::vector<kernels::PageTable> page_tables = {kernels::PageTable::block_table};
  bool strided_cache = false;  // nhd, hnd: page and head strides other than the contiguous ones
  bool large_cache = false;    // caches spanning 2^31 elements or more (offsets past int32)
  // It keeps scratch between calls (partials, LSEs, a workspace) and fills it
  // with NaN when a decode request asks (poison_scratch): pav asks before every
  // call, so a read of a slot this call did not write shows on that call.
  bool scratch = false;
  // It compiles once per shape (a Triton or torch.compile kernel): pav verify
  // then draws its decode calls in a few shapes (--shapes), so the run's
  // time goes to calls, not compilation.
  bool compiles_per_shape = false;
  std::vector<Scales> scale_kinds;
  bool mixed_scales = false;   // K's and V's scales may be of different kinds
  std::vector<int64_t> block_sizes, head_dims, gqa_ratios;
  int64_t min_q_len = 1, max_q_len = 1;
  int64_t max_num_seqs = 0, max_kv_heads = 0, max_context_len = 0;  // 0: no limit
  bool strided_q = false;
  Split split = Split::self;
  bool split_ceiling = false;
  int64_t max_split_ceiling = 0;  // 0: no limit
  bool writes_lse = false;
  LseBase lse_base = LseBase::e;
  std::vector<Feature> features;  // attention variants it computes ("variants" in the protocol)
  bool thread_safe = false;
  bool has_check = false;
  Profile profile;

  bool operator==(const KernelDescription&) const = default;
  // The output dtype of a call whose q has dtype q.
  kernels::DType out_dtype_for(kernels::DType q) const {
    return out_dtype == kernels::DType::none ? q : out_dtype;
  }
  bool declares(Feature f) const;
};

// Names as the worker protocol writes them ("fp8_per_row", "per_token", ...).
std::string_view to_string(Memory m);
std::string_view to_string(Split s);
using kernels::to_string;  // ScaleKind, CacheLayout, PageTable
std::string_view to_string(KvStorage s);  // "separate", "combined", "latent"
std::string_view to_string(kernels::VLayout l);
std::string_view to_string(Feature f);  // "window", "soft_cap", "sinks", "alibi"
std::string_view to_string(LseBase b);  // "e", "2"

// Thrown for a kernel pav cannot use as given: a bad --kernel value, a library
// without a required symbol or of another ABI version, a description that
// breaks the contract's rules, configuration words the kernel refuses. pav
// reports it and exits 2.
class KernelSpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Thrown when a valid kernel cannot run here (no device for a device-memory
// kernel, the exchange folder cannot be made): exit 3.
class KernelUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by a call when the kernel stopped being the one the run began with (a
// worker restarted after a fault that describes itself otherwise): no verdict,
// since the cases drawn so far fit the first description and a case saved now
// would replay against a fresh worker. It is a pav::IoError so that it ends
// the run the same way (thrown on through the properties, exit 3).
class KernelChanged : public IoError {
 public:
  using IoError::IoError;
};

// Sorts every set of the description (dtypes, layouts, scale kinds, sizes) so
// two descriptions of the same kernel compare equal whatever order they listed.
void canonicalize(KernelDescription& d);

// The contract's rules on a description itself (lists non-empty, head dims
// multiples of 16, q_len range ordered, ...). Empty when valid, else the first
// broken rule naming the field.
std::string description_problem(const KernelDescription& d);

// The description as the worker protocol's JSON, and back. from_json throws
// KernelSpecError naming the field (unknown fields included) and validates.
nlohmann::json to_json(const KernelDescription& d);
KernelDescription description_from_json(const nlohmann::json& j);
// The fields in which two descriptions differ, by their JSON names, each as
// "field before -> after" ("head_dims [64, 128] -> [128]; profile.partial f32
// -> bf16"); empty when they are equal.
std::string description_change(const KernelDescription& before, const KernelDescription& after);
// One line for people: "name version (adapter): bf16/f16, fp8_e4m3fn, ...".
std::string summary(const KernelDescription& d);

// One decode call (host memory on pav's side). lse is present ([rows, Hq] f32) when the
// kernel writes it; plan is set for split = plan kernels; max_partitions is
// the split ceiling (0: the kernel's choice).
struct DecodeRequest {
  kernels::DecodeCall call;
  kernels::TensorView lse;
  const kernels::PlanView* plan = nullptr;
  int64_t max_partitions = 0;
  void* stream = nullptr;  // memory = device (inside a plugin): the stream the ABI call handed over
};

// What a call through an adapter came to. For check: ok = accepted,
// rejected = refused with message as the reason. `fault` is the adapter's own
// finding (a worker that crashed, hung, wrote garbage or a bad output file).
enum class Outcome : uint8_t { ok, rejected, stale_plan, kernel_error, fault };
std::string_view to_string(Outcome o);

struct CallResult {
  Outcome outcome = Outcome::ok;
  std::string message;
  bool ok() const { return outcome == Outcome::ok; }
  static CallResult success() { return {}; }
};

// The first reason a call is outside what a kernel with this description may
// be handed: the layout of the call's tensors (kernels/validate.hpp, the rule
// pav's kernels validate by too), the cache's format and page table
// (kernels/cache_format.hpp: context lengths within the tables, pages within
// the cache) and the description's sets and limits. Empty when the call is
// inside. Reads only the values of the page table and context_lens (host memory).
std::string contract_violation(const DecodeRequest& r, const KernelDescription& d);

class KernelUnderTest {
 public:
  virtual ~KernelUnderTest() = default;
  virtual const KernelDescription& description() const = 0;
  // "pav", "lib", "lib (isolated)" or "exec".
  virtual std::string adapter() const = 0;
  // The --kernel text it was opened from.
  virtual std::string spec() const = 0;
  // Only when description().has_check. Never calls decode.
  virtual CallResult check(const DecodeRequest& r) = 0;
  // Writes call.out (and lse when present). Adapters never throw for what the
  // kernel does; a kernel that misbehaves comes back as a CallResult. pav's
  // own failures on its side of the call (writing a worker's inputs into a full
  // --exchange-dir, making the call's folder) are thrown as pav::IoError: not a
  // verdict about the kernel, and the run ends with exit 3 (check() too).
  virtual CallResult decode(const DecodeRequest& r) = 0;
  // How many times decode() reached the kernel (properties check that a
  // refused call never does).
  virtual int64_t decode_calls() const = 0;
};

// Calls this thread cut short because the run's stop was asked (a worker
// killed before it answered, an in-process call interrupted): such a call's
// verdict is no finding. A caller compares the count before and after its
// calls (CutShort in properties/engine).
int64_t calls_cut_short_on_this_thread();
void note_call_cut_short();

// "name version via adapter (spec)".
std::string identity(const KernelUnderTest& k);
// {"name", "version", "adapter", "spec", "profile": {...}} for case files and JSON output.
nlohmann::json identity_json(const KernelUnderTest& k);

struct OpenOptions {
  bool isolate = false;          // lib: run the library in a child process
  double timeout_seconds = 60;   // exec / isolate / in process: per-call limit
  std::string exchange_dir;      // exec / isolate: where per-call folders go ("" = /dev/shm or $TMPDIR)
  std::string self_exe;          // the pav binary (for --isolate); "" = /proc/self/exe
  // The run's stop (a signal): a call in progress is abandoned when it
  // returns true (exec / isolate: the worker is killed; in process: the call is
  // interrupted), and the run's engine drops that call's verdict. Empty: never.
  std::function<bool()> should_stop;
};

// Opens `--kernel` text: "pav:cpu [WORDS]", "pav:gpu [WORDS]",
// "lib:PATH.so [WORDS]", "exec:CMD ARGS". Throws KernelSpecError (exit 2) or
// KernelUnavailable (exit 3).
std::unique_ptr<KernelUnderTest> open_kernel(const std::string& spec, const OpenOptions& options = {});

// Splits configuration words like a shell: whitespace separates, single and
// double quotes group, backslash escapes. Throws KernelSpecError on an
// unterminated quote.
std::vector<std::string> split_words(const std::string& text);
// Quotes a word for /bin/sh (and for split_words).
std::string shell_quote(const std::string& word);
// The pav options that open this kernel again: "--kernel 'SPEC'" (and --isolate).
std::string kernel_option_text(const KernelUnderTest& k);

}  // namespace pav::adapters
