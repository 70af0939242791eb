// SPDX-License-Identifier: Apache-2.0
/* pav kernel ABI: the contract between pav and a paged-attention decode kernel
 * that pav did not build with itself (a shared library loaded with dlopen).
 *
 * Plain C, no C++ types across the boundary: a kernel written in C, C++, Rust,
 * HIP or CUDA can implement it. docs/verify-your-kernel.md ("Contract") walks
 * through every field; the worker protocol there carries the same fields as
 * JSON for kernels that run in their own process.
 *
 * Versioning: PAV_KERNEL_ABI_VERSION changes whenever a struct's layout, an enum
 * value or a function's meaning changes. Version 2 added the attention variants
 * (pav_kernel_desc.variants and lse_base, in what were reserved bytes, and the
 * fields after `stream` in pav_decode_args). Version 3 added the cache formats
 * (16-bit and e5m2 caches, the nhd and hnd layouts, K and V in one tensor,
 * padded strides, CSR page lists, per-head and mixed scales: the desc fields
 * after lse_base and the args fields after alibi_slopes). Version 4 added MLA
 * (PAV_KV_LATENT, pav_kernel_desc.mla_dims), caches of 2^31 elements or more
 * (pav_kernel_desc.large_cache), partials in fp8, and pav_decode_args.kv_storage.
 * pav loads a library of version 1 to 4: an older library is handed the prefix
 * of pav_decode_args its version knows (struct_size = PAV_DECODE_ARGS_V1_SIZE,
 * PAV_DECODE_ARGS_V2_SIZE or PAV_DECODE_ARGS_V3_SIZE) and declares none of the
 * later fields, so it is never sent a call that needs them (a packed fp8 cache
 * through block tables, and no variant below version 2; no MLA and no cache of
 * 2^31 elements below version 4). Any other version is refused with the
 * versions pav speaks named.
 * Structs also carry their own size, so pav can tell a stale header apart from
 * a corrupted call.
 *
 * Entry points (all extern "C", exported with default visibility):
 *   required: pav_kernel_abi_version, pav_kernel_describe, pav_kernel_decode
 *   optional: pav_kernel_init, pav_kernel_fini, pav_kernel_check,
 *             pav_kernel_poison_scratch
 * A missing required symbol, or an optional one whose absence pav cannot work
 * around (configuration words given but no pav_kernel_init), is an error that
 * pav reports before any call is made.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PAV_KERNEL_ABI_VERSION 4u
#define PAV_KERNEL_ABI_OLDEST 1u /* the oldest version pav still loads */

#if defined(_WIN32)
#define PAV_KERNEL_EXPORT __declspec(dllexport)
#else
#define PAV_KERNEL_EXPORT __attribute__((visibility("default")))
#endif

/* Bit of an enum value in a support mask: PAV_BIT(PAV_DTYPE_BF16). */
#define PAV_BIT(x) (1u << (unsigned)(x))

/* ---- enumerations (values are part of the ABI: append, never renumber) ---- */

/* Element types. fp8 comes in two flavours that are not interchangeable:
 * e4m3fn (OCP: bias 7, max 448, NaN 0x7f/0xff) and e4m3fnuz (bias 8, max 240,
 * NaN 0x80 only, no negative zero). bf16/f16 are IEEE-style 16-bit floats. */
typedef enum pav_dtype {
  PAV_DTYPE_NONE = 0, /* absent tensor; in pav_kernel_desc.out_dtype: "same as q" */
  PAV_DTYPE_F32 = 1,
  PAV_DTYPE_F16 = 2,
  PAV_DTYPE_BF16 = 3,
  PAV_DTYPE_FP8_E4M3FN = 4,
  PAV_DTYPE_FP8_E4M3FNUZ = 5,
  PAV_DTYPE_I32 = 6,
  PAV_DTYPE_I64 = 7,
  PAV_DTYPE_FP8_E5M2 = 8 /* version 3: bias 15, 2 mantissa bits, max 57344, inf and NaN */
} pav_dtype;

/* Cache layouts (version 3; pav_decode_args.cache_layout says which a call has):
 * packed: K [pages, Hkv, D/16, page_size, 16], V per pav_v_layout below;
 * nhd:    K and V [pages, page_size, Hkv, D];
 * hnd:    K and V [pages, Hkv, page_size, D].
 * A version-1 or -2 library reads packed caches only. */
typedef enum pav_cache_layout {
  PAV_CACHE_LAYOUT_PACKED = 0,
  PAV_CACHE_LAYOUT_NHD = 1,
  PAV_CACHE_LAYOUT_HND = 2
} pav_cache_layout;

/* V layouts of the packed cache.
 * plain: [num_blocks, Hkv, D, block_size]
 * trans: [num_blocks, Hkv, block_size/16, D, 16]
 * A kernel tells them apart by v_cache.rank (4 or 5). */
typedef enum pav_v_layout { PAV_V_LAYOUT_PLAIN = 0, PAV_V_LAYOUT_TRANS = 1 } pav_v_layout;

/* How K and V are stored (version 3). separate: two tensors. combined: one
 * tensor kv_cache [pages, 2, ...] (nhd or hnd dims after the 2), with k_cache
 * and v_cache its [:, 0] and [:, 1] views. latent (version 4, MLA): one nhd or
 * hnd cache k_cache of one KV head and D = latent + rope dims (a pair of
 * pav_kernel_desc.mla_dims); v_cache is its [..., :latent] view (the same data
 * and strides, D_v = latent dims), v_scale is k_scale, out has D_v dims, and
 * kv_cache is absent. */
typedef enum pav_kv_storage {
  PAV_KV_SEPARATE = 0,
  PAV_KV_COMBINED = 1,
  PAV_KV_LATENT = 2 /* version 4 */
} pav_kv_storage;

/* How a sequence's pages are found (version 3). block_table: block_tables
 * [num_seqs, max_blocks]. csr: kv_indptr [num_seqs + 1] (0, then growing by
 * each sequence's ceil(len / page_size) pages), kv_indices (page ids, never
 * empty), kv_last_page_len [num_seqs] (len - (n-1)*page_size; 0 when empty);
 * block_tables is absent. A page size of 1 makes either token-level. */
typedef enum pav_page_table { PAV_PAGE_TABLE_BLOCK = 0, PAV_PAGE_TABLE_CSR = 1 } pav_page_table;

/* K/V scales: absent (rank 0), one fp32 value per tensor ([1]), per KV head
 * ([Hkv], version 3), or one per cached token ([num_blocks, Hkv, block_size],
 * contiguous). K and V have the same kind unless the kernel declares
 * mixed_scales (version 3). */
typedef enum pav_scale_kind {
  PAV_SCALE_NONE = 0,
  PAV_SCALE_PER_TENSOR = 1,
  PAV_SCALE_PER_TOKEN = 2,
  PAV_SCALE_PER_HEAD = 3
} pav_scale_kind;

/* Where the tensors of a decode call live. host: ordinary CPU memory. device:
 * CUDA/HIP device memory of the current device; pav copies inputs there and
 * the output back, and passes the stream in pav_decode_args.stream. */
typedef enum pav_memory { PAV_MEMORY_HOST = 0, PAV_MEMORY_DEVICE = 1 } pav_memory;

/* How the kernel splits a sequence's context across workgroups.
 * self: it decides by itself (optionally bounded by pav_decode_args.max_partitions).
 * plan: it runs pav's work plan, passed in pav_decode_args.work_info/reduce_info. */
typedef enum pav_split { PAV_SPLIT_SELF = 0, PAV_SPLIT_PLAN = 1 } pav_split;

/* Numerics profile, part 1: what happens to Q before Q.K.
 * none: Q is used as given (bf16/f16 values widened).
 * fp8_per_row: each query head vector (one row of D values) is quantized to
 *   the cache's fp8 flavour with q_scale = max(absmax(row)/FP8_MAX, 1e-20). */
typedef enum pav_q_quant {
  PAV_Q_QUANT_NONE = 0,
  PAV_Q_QUANT_FP8_PER_ROW = 1,
  PAV_Q_QUANT_CACHE_DTYPE = 2 /* version 3: each Q value cast to the cache's dtype (no scale) */
} pav_q_quant;

/* Numerics profile, part 2: how the softmax weights P are rounded before P.V.
 * none: kept in fp32.
 * fp8_running_max: exp(s - m) with m the running max, times FP8_MAX, cast to
 *   the cache's fp8 flavour (the scale is undone after the product).
 * bf16 / f16: exp(s - m) rounded to that 16-bit type. */
typedef enum pav_p_round {
  PAV_P_ROUND_NONE = 0,
  PAV_P_ROUND_FP8_RUNNING_MAX = 1,
  PAV_P_ROUND_BF16 = 2,
  PAV_P_ROUND_F16 = 3,
  PAV_P_ROUND_FP8 = 4 /* version 3: exp(s - m) rounded to the cache's fp8 flavour as it is
                         (no FP8_MAX scale; values below its subnormals flush to 0) */
} pav_p_round;

/* Attention variants (version 2), bits of pav_kernel_desc.variants. A call
 * carries a variant only for a kernel that declares it. Row r = p*G + g of a
 * sequence of length L sits at position pos = L - q_len + p; with x = scale *
 * q.k_t the scaled logit of key t:
 *   SOFT_CAP: x -> soft_cap * tanh(x / soft_cap), before the bias and the mask;
 *   ALIBI:    x -> x - alibi_slopes[head] * (pos - t);
 *   WINDOW:   only keys pos - window_left <= t <= pos are seen;
 *   SINKS:    exp(sinks[head]) joins the softmax denominator (and the lse),
 *             never the numerator. */
typedef enum pav_variant {
  PAV_VARIANT_WINDOW = 0,
  PAV_VARIANT_SOFT_CAP = 1,
  PAV_VARIANT_SINKS = 2,
  PAV_VARIANT_ALIBI = 3
} pav_variant;

/* The base of the lse a kernel writes (version 2). */
typedef enum pav_lse_base { PAV_LSE_BASE_E = 0, PAV_LSE_BASE_2 = 1 } pav_lse_base;

/* Return codes of pav_kernel_init / describe / check / decode. */
typedef enum pav_status {
  PAV_OK = 0,         /* success; from check: the call is accepted */
  PAV_REJECT = 1,     /* check: the kernel refuses this call (reason filled in);
                         decode: the kernel refused the call it was handed */
  PAV_STALE_PLAN = 2, /* decode (split = plan): the plan does not match the live
                         context_lens; the kernel did not attend over it */
  PAV_ERROR = 3,      /* anything else (message filled in) */
  PAV_UNAVAILABLE = 4 /* init: the kernel cannot run on this machine (no device,
                         no driver); pav says it cannot run here (exit 3)
                         instead of blaming the kernel's configuration (exit 2) */
} pav_status;

/* ---- tensors ---- */

#define PAV_MAX_RANK 6

/* A strided view. Shape and strides count elements, not bytes. An absent
 * optional tensor has rank 0 and data NULL. Strides are never negative. */
typedef struct pav_tensor {
  void* data;
  int32_t dtype; /* pav_dtype */
  int32_t rank;
  int64_t shape[PAV_MAX_RANK];
  int64_t stride[PAV_MAX_RANK];
} pav_tensor;

/* ---- the description ---- */

#define PAV_NAME_LEN 64
#define PAV_MAX_BLOCK_SIZES 16
#define PAV_MAX_HEAD_DIMS 64
#define PAV_MAX_GQA_RATIOS 64
#define PAV_MAX_MLA_DIMS 3

/* What a kernel supports and how it computes. pav zero-fills the struct, sets
 * struct_size and abi_version, and the kernel fills in the rest. pav generates
 * only calls inside these sets (except its reject property, which aims outside
 * on purpose and needs pav_kernel_check). A count of 0 in a list, or a 0 mask,
 * means "nothing": describe must name what it supports. */
typedef struct pav_kernel_desc {
  uint32_t struct_size; /* set by pav: sizeof(pav_kernel_desc) */
  uint32_t abi_version; /* set by pav: PAV_KERNEL_ABI_VERSION */

  char name[PAV_NAME_LEN];    /* NUL-terminated, e.g. "my_decode" */
  char version[PAV_NAME_LEN]; /* NUL-terminated, e.g. "1.4.0" or a commit */

  int32_t memory; /* pav_memory */

  uint32_t q_dtypes;     /* mask of PAV_BIT(pav_dtype): BF16 and/or F16 */
  int32_t out_dtype;     /* PAV_DTYPE_NONE: out has q's dtype; else F32/BF16/F16 */
  uint32_t cache_dtypes; /* mask: FP8_E4M3FN, FP8_E4M3FNUZ; version 3 also BF16, F16, FP8_E5M2 */
  uint32_t v_layouts;    /* mask of PAV_BIT(pav_v_layout) */
  uint32_t scale_kinds;  /* mask of PAV_BIT(pav_scale_kind) */

  int32_t num_block_sizes;
  int32_t block_sizes[PAV_MAX_BLOCK_SIZES]; /* tokens per cache block, e.g. 16, 64 */
  int32_t num_head_dims;
  int32_t head_dims[PAV_MAX_HEAD_DIMS];     /* each a multiple of 16 */
  int32_t num_gqa_ratios;
  int32_t gqa_ratios[PAV_MAX_GQA_RATIOS];   /* Hq / Hkv values */

  int32_t min_q_len, max_q_len; /* query positions per sequence (MTP); 1..max */
  int32_t max_num_seqs;         /* 0: no limit */
  int32_t max_kv_heads;         /* 0: no limit */
  int64_t max_context_len;      /* tokens per sequence; 0: no limit */
  int32_t strided_q;            /* 1: q and out may have a row stride > Hq*D */

  int32_t split;            /* pav_split */
  int32_t split_ceiling;    /* 1: honours pav_decode_args.max_partitions */
  int32_t max_split_ceiling;/* largest ceiling it honours (0: no limit) */
  int32_t writes_lse;       /* 1: fills pav_decode_args.lse when present */
  int32_t thread_safe;      /* 1: pav may call decode/check concurrently on one instance */

  /* Numerics profile: the reference and the comparison standard follow it. */
  int32_t q_quant;       /* pav_q_quant */
  int32_t p_round;       /* pav_p_round */
  int32_t partial_dtype; /* dtype of the split partials: F32, BF16, F16 or an fp8
                            flavour (FP8_E4M3FN, FP8_E4M3FNUZ, FP8_E5M2);
                            NONE when the kernel never splits a row */
  /* Version 2 (zero in a version-1 library: no variant, natural-log lse). */
  uint32_t variants;     /* mask of PAV_BIT(pav_variant) */
  int32_t lse_base;      /* pav_lse_base */
  /* Version 3. A zero mask here means what an older library reads (packed,
   * separate, block tables), so a library rebuilt against this header without
   * filling them keeps working. */
  uint32_t cache_layouts; /* mask of PAV_BIT(pav_cache_layout) */
  uint32_t kv_storage;    /* mask of PAV_BIT(pav_kv_storage) */
  uint32_t page_tables;   /* mask of PAV_BIT(pav_page_table) */
  int32_t strided_cache;  /* 1: nhd/hnd page and head strides other than the contiguous ones */
  int32_t mixed_scales;   /* 1: k_scale and v_scale may be of different kinds */
  /* Version 4 (zero in an older library: no MLA, no cache of 2^31 elements). */
  int32_t large_cache;    /* 1: caches spanning 2^31 elements or more (offsets past int32) */
  int32_t num_mla_dims;   /* (latent, rope) pairs below, with PAV_KV_LATENT in kv_storage */
  int32_t mla_dims[PAV_MAX_MLA_DIMS][2]; /* e.g. {512, 64}: D = 576 must be in head_dims */
  uint8_t reserved[4];    /* zero; room for later fields */
} pav_kernel_desc;

/* ---- one decode call ---- */

/* The tensors and options of one call (see docs, "Contract"). Shapes:
 *   q            [num_seqs*q_len, Hq, D]  bf16/f16, head_dim stride 1
 *   out          like q (D_v head dims with kv_storage latent), dtype per
 *                pav_kernel_desc.out_dtype
 *   k_cache      packed: [num_blocks, Hkv, D/16, block_size, 16], contiguous;
 *                nhd / hnd (cache_layout): see pav_cache_layout; the cache dtype
 *                is one of pav_kernel_desc.cache_dtypes
 *   v_cache      packed: plain [num_blocks, Hkv, D, block_size] or
 *                trans [num_blocks, Hkv, block_size/16, D, 16]; latent: k_cache's
 *                [..., :D_v] view (kv_storage)
 *   block_tables [num_seqs, max_blocks] i32 (absent with CSR page lists: pav_page_table)
 *   context_lens [num_seqs] i32
 *   k_scale, v_scale  absent, [1], [Hkv] or [num_blocks, Hkv, block_size] f32
 *   lse          [num_seqs*q_len, Hq] f32, natural log (log2 when lse_base
 *                says so); present only when the kernel declares writes_lse;
 *                -inf for a row that sees no token (the sink with sinks)
 *   work_info    [capacity, 4] i32 (sequence, first tile, end tile, length);
 *   reduce_info  [num_seqs, 2] i32 (first slot, count): present only for
 *                split = plan kernels; tiles are 256 tokens
 * Row r = p*G + g of sequence s (G = Hq/Hkv, p < q_len) sees tokens
 * t < len - q_len + 1 + p; a row that sees no token must be exactly 0.
 * Cache bytes outside each sequence's context may be NaN: a correct kernel
 * never lets them into the result. */
typedef struct pav_decode_args {
  uint32_t struct_size; /* sizeof(pav_decode_args) */
  int32_t q_len;
  float softmax_scale;    /* resolved: never 0 (pav passes 1/sqrt(D) by default) */
  int32_t max_partitions; /* split ceiling (split_ceiling or split = plan); 0: kernel's choice */
  pav_tensor q, out;
  pav_tensor k_cache, v_cache;
  pav_tensor block_tables, context_lens;
  pav_tensor k_scale, v_scale;
  pav_tensor lse;
  pav_tensor work_info, reduce_info;
  void* stream; /* memory = device: the cudaStream_t / hipStream_t to run on (may be NULL) */
  /* Version 2: the attention variant (absent tensors have rank 0). */
  int32_t window_left;     /* -1: no window */
  float soft_cap;          /* 0: no cap */
  pav_tensor sinks;        /* [Hq] f32, or absent */
  pav_tensor alibi_slopes; /* [Hq] f32, or absent */
  /* Version 3: the cache format. */
  int32_t cache_layout;    /* pav_cache_layout */
  int32_t page_table;      /* pav_page_table */
  pav_tensor kv_cache;     /* combined storage [pages, 2, ...], or absent (then K and V are separate) */
  pav_tensor kv_indptr, kv_indices, kv_last_page_len; /* page_table = csr: i32 lists (host memory in check) */
  /* Version 4. */
  int32_t kv_storage;      /* pav_kv_storage: separate, combined (kv_cache given) or latent (MLA) */
} pav_decode_args;

/* The size of a version-1 pav_decode_args: the fields up to `stream`. */
#define PAV_DECODE_ARGS_V1_SIZE (offsetof(pav_decode_args, window_left))
/* The size of a version-2 pav_decode_args: the fields up to alibi_slopes. */
#define PAV_DECODE_ARGS_V2_SIZE (offsetof(pav_decode_args, cache_layout))
/* The size of a version-3 pav_decode_args: the fields up to kv_last_page_len. */
#define PAV_DECODE_ARGS_V3_SIZE (offsetof(pav_decode_args, kv_storage))

/* ---- entry points ---- */

/* Required. Returns PAV_KERNEL_ABI_VERSION as the library was compiled. */
PAV_KERNEL_EXPORT uint32_t pav_kernel_abi_version(void);

/* Optional. Creates one instance from configuration words (e.g. {"--defect",
 * "NAME"} from --kernel 'lib:PATH.so --defect NAME'); *instance is passed back
 * to every other entry. Without it, instance is NULL and pav refuses
 * configuration words. Unknown words must be refused (PAV_ERROR, message). */
PAV_KERNEL_EXPORT int pav_kernel_init(int argc, const char* const* argv, void** instance,
                                      char* err, size_t err_size);

/* Optional. Releases an instance made by pav_kernel_init. */
PAV_KERNEL_EXPORT void pav_kernel_fini(void* instance);

/* Required. Fills desc (see pav_kernel_desc); PAV_OK, or PAV_ERROR with a message. */
PAV_KERNEL_EXPORT int pav_kernel_describe(void* instance, pav_kernel_desc* desc, char* err,
                                          size_t err_size);

/* Optional. Says whether the kernel can run this call: PAV_OK (accept) or
 * PAV_REJECT with a one-line reason naming the field at fault. It sees the
 * shapes, dtypes, strides and options of the call; the tables (block_tables,
 * context_lens, work_info, reduce_info, and the CSR lists kv_indptr,
 * kv_indices, kv_last_page_len) point at host memory whatever the
 * memory side; every other data pointer is NULL. It must not crash on any shape (a negative or zero
 * extent, a rank up to PAV_MAX_RANK, an unknown dtype value). */
PAV_KERNEL_EXPORT int pav_kernel_check(void* instance, const pav_decode_args* args, char* reason,
                                       size_t reason_size);

/* Optional. For a kernel that keeps scratch between calls (partials, LSEs, a
 * workspace): fills all of it with NaN (or, for integer scratch, a value no
 * index may take). A library that exports it is described as keeping scratch,
 * and pav calls it before every pav_kernel_decode, so a read of a slot the
 * call did not write shows on that call. PAV_OK, or PAV_ERROR with a message
 * (the call is then a kernel error). */
PAV_KERNEL_EXPORT int pav_kernel_poison_scratch(void* instance, char* err, size_t err_size);

/* Required. Runs the call: writes every element of out (and lse when present),
 * nothing else of pav's memory. Returns PAV_OK when done (for memory = device:
 * when the work is enqueued on args->stream; pav synchronizes), PAV_REJECT /
 * PAV_STALE_PLAN / PAV_ERROR with a message otherwise. */
PAV_KERNEL_EXPORT int pav_kernel_decode(void* instance, const pav_decode_args* args, char* err,
                                        size_t err_size);

/* Function types of the entries, for loaders. */
typedef uint32_t (*pav_kernel_abi_version_fn)(void);
typedef int (*pav_kernel_init_fn)(int, const char* const*, void**, char*, size_t);
typedef void (*pav_kernel_fini_fn)(void*);
typedef int (*pav_kernel_describe_fn)(void*, pav_kernel_desc*, char*, size_t);
typedef int (*pav_kernel_check_fn)(void*, const pav_decode_args*, char*, size_t);
typedef int (*pav_kernel_decode_fn)(void*, const pav_decode_args*, char*, size_t);
typedef int (*pav_kernel_poison_scratch_fn)(void*, char*, size_t);

#ifdef __cplusplus
} /* extern "C" */
#endif

