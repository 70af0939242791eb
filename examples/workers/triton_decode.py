#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A split-KV paged-attention decode in Triton, run by pav as a worker on a
CUDA device:

    pav verify --kernel exec:'python3 examples/workers/triton_decode.py'

(`--device cuda:1` picks another device; the default is `cuda`.)

The cache is moved to the device as pav sends it and read there in place: the
nhd layout ([pages, page_size, Hkv, D]) with K and V as two tensors, through
their own strides, pages found through block tables or CSR lists (a CSR list is
laid out as per-sequence rows of page ids on the host; the cache itself is
never copied or converted), page sizes the powers of two from 1 to 256, cache
dtypes bf16, f16 and fp8 e4m3fn, K and V scales none or per tensor, each its
own.

Two kernels run per call. The first gives one program to each (sequence, KV
head, split of the context, block of query rows): all G*q_len query rows of the
KV head at once (padded to a power of two >= 16), keys and values gathered
token by token through the page table in blocks of BLOCK_N tokens, Q.K on the
tensor cores with float32 accumulation, the scaled logits soft-capped and
ALiBi-biased before the causal and sliding-window mask, an online softmax
with running max and sum, and a normalized float32 partial output and its
log-sum-exp per split. Blocks wholly before every row's window are never
read. The second merges each row's splits through their log-sum-exp and adds
exp(sink) to the denominator and the lse. The split count is chosen from the
longest sequence so that the first kernel's programs fill the device's SMs.

Numerics: Q is used as given (`q_quant none`: fp8 keys are widened exactly to
Q's dtype, mixed bf16/f16 operands multiplied as exact tf32 in float32). The
softmax weights exp(s - m) are rounded to bf16 for the P.V product
(`p_round bf16`; the running sum keeps the unrounded weights); `--p-round none`
keeps them in float32 with an exact float32 P.V product and declares that.
Splits store float32 partials (`partial f32`). The K scale multiplies the
logits and the V scale the partial outputs, so the cache values enter the
products as stored. lse is the natural log of the sum, -inf for a row that
sees no token.

Every attention variant is declared (docs/verify-your-kernel.md, "Attention
variants"): window, soft_cap, sinks, alibi.

--defect NAME injects one realistic bug into the Triton kernels (--list-defects
prints them).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pav_worker  # noqa: E402

try:
    import torch
    import pav_torch
    import triton
    import triton.language as tl
except ImportError as e:
    sys.exit("triton_decode.py: cannot import %s: this worker needs PyTorch and Triton" % (e.name or e))

DEFECTS = {
    "window-off-by-one": "the window's left edge taken as pos - window_left - 1: every windowed row sees one key too many",
    "cap-after-mask": "soft cap applied after the -inf mask: masked keys come out at -soft_cap and get weight",
    "sink-not-in-denominator": "the split merge ignores the sinks: exp(sink) left out of the softmax denominator and the lse",
    "int32-page-offset": "page offsets computed in int32: a page past element 2^31 of the cache is read at a wrapped address",
}

DESCRIPTION = pav_worker.description(
    "triton_decode",
    cache_dtypes=["bf16", "f16", "fp8_e4m3fn"],
    cache_layouts=["nhd"],
    kv_storage=["separate"],
    page_tables=["block_table", "csr"],
    strided_cache=True,  # the kernel takes the cache's page, slot and head strides
    large_cache=True,  # offsets in int64: caches of 2^31 elements and more
    scale_kinds=["none", "per_tensor"],
    mixed_scales=True,
    block_sizes=[1, 2, 4, 8, 16, 32, 64, 128, 256],
    head_dims=[64, 128, 256],
    gqa_ratios=list(range(1, 33)),
    q_len=[1, 16],
    profile={"q_quant": "none", "p_round": "bf16", "partial": "f32"},
    variants=["window", "soft_cap", "sinks", "alibi"],
    # Triton compiles each kernel once per set of constants (head dim, page size, tile sizes, which variants)
    # and per class of integer arguments: pav draws the decode calls in a few shapes.
    compiles_per_shape=True,
)

MAX_ROWS = 64      # query rows per program; more rows of one KV head take more row blocks
MAX_SPLITS = 256   # splits of one sequence's context

# How an operand pair meets on the tensor cores.
QK_NATIVE, QK_TF32 = 0, 1           # K in Q's dtype (exact); both widened to float32 (exact in tf32)
PV_BF16, PV_BF16_TF32, PV_F32 = 0, 1, 2  # P bf16 x V bf16; P bf16 x V f16 as tf32; P and V float32 (ieee)

TORCH_Q = {"bf16": torch.bfloat16, "f16": torch.float16}


@triton.jit
def _soft_cap(x, cap):
    """cap * tanh(x / cap), finite for any x (-inf gives -cap)."""
    y = x / cap
    e = tl.exp(-2.0 * tl.abs(y))
    th = (1.0 - e) / (1.0 + e)
    return cap * tl.where(y < 0.0, -th, th)


@triton.jit
def _attend_split(
    q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, k_scale_ptr, v_scale_ptr, slopes_ptr,
    part_o_ptr, part_lse_ptr,
    stride_qr, stride_qh,
    stride_kp, stride_ks, stride_kh,
    stride_vp, stride_vs, stride_vh,
    stride_bt,
    num_rows, num_heads, group, q_len, row_blocks, split_len,
    sm_scale, soft_cap, window_left,
    HEAD_DIM: tl.constexpr, PAGE_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CACHE_FP8: tl.constexpr, QK_MODE: tl.constexpr, PV_MODE: tl.constexpr,
    HAS_WINDOW: tl.constexpr, HAS_CAP: tl.constexpr, HAS_ALIBI: tl.constexpr,
    DEFECT_WINDOW: tl.constexpr, DEFECT_CAP: tl.constexpr, DEFECT_I32: tl.constexpr,
):
    """One (sequence, row block, KV head, split): the normalized partial output
    [rows, D] and log-sum-exp [rows] of the split's keys, into
    part_o [splits, num_rows, Hq, D] and part_lse [splits, num_rows, Hq]."""
    pid = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    seq = pid // row_blocks
    row_block = pid % row_blocks
    length = tl.load(lens_ptr + seq)

    # Row r = p*G + g of this KV head: query position p, query head kv_head*G + g.
    r = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = r < group * q_len
    p = r // group
    head = kv_head * group + r % group
    qrow = seq * q_len + p
    pos = length - q_len + p  # the row sees keys t <= pos (and, with a window, t >= first)
    d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + qrow.to(tl.int64)[:, None] * stride_qr + head[:, None] * stride_qh + d[None, :],
                mask=row_ok[:, None], other=0.0)
    if QK_MODE == 1:
        q = q.to(tl.float32)

    # This split's keys: [lo, hi), less the blocks before every row's window.
    lo = split * split_len
    hi = tl.minimum(lo + split_len, length)
    if HAS_WINDOW:
        reach = window_left
        if DEFECT_WINDOW:
            reach = window_left + 1
        first = pos - reach
        lo = tl.maximum(lo, length - q_len - reach)  # the first row's edge: no row sees a key before it
    if HAS_ALIBI:
        slope = tl.load(slopes_ptr + head, mask=row_ok, other=0.0)
    qk_scale = sm_scale * tl.load(k_scale_ptr)
    v_scale = tl.load(v_scale_ptr)
    bt_row = bt_ptr + seq.to(tl.int64) * stride_bt

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    for start in range(lo, hi, BLOCK_N):
        t = start + offs_n
        t_ok = t < hi
        page = tl.load(bt_row + t // PAGE_SIZE, mask=t_ok, other=0)
        if not DEFECT_I32:
            page = page.to(tl.int64)  # offsets past 2^31 elements (large_cache)
        slot = t % PAGE_SIZE
        k_off = page * stride_kp + slot * stride_ks + kv_head * stride_kh
        v_off = page * stride_vp + slot * stride_vs + kv_head * stride_vh
        # Slots past the length (poisoned by pav) are never loaded: zeros instead.
        kb = tl.load(k_ptr + k_off[:, None] + d[None, :], mask=t_ok[:, None], other=0)
        vb = tl.load(v_ptr + v_off[:, None] + d[None, :], mask=t_ok[:, None], other=0)
        if CACHE_FP8:
            kb = kb.to(tl.float8e4nv, bitcast=True).to(tl.float32)
            vb = vb.to(tl.float8e4nv, bitcast=True).to(tl.float32)

        if QK_MODE == 0:
            x = tl.dot(q, tl.trans(kb.to(q.dtype)))
        else:
            x = tl.dot(q, tl.trans(kb.to(tl.float32)), input_precision="tf32")
        x = x * qk_scale
        if HAS_CAP and not DEFECT_CAP:
            x = _soft_cap(x, soft_cap)
        if HAS_ALIBI:
            x = x - slope[:, None] * (pos[:, None] - t[None, :]).to(tl.float32)
        seen = row_ok[:, None] & t_ok[None, :] & (t[None, :] <= pos[:, None])
        if HAS_WINDOW:
            seen = seen & (t[None, :] >= first[:, None])
        x = tl.where(seen, x, float("-inf"))
        if HAS_CAP and DEFECT_CAP:
            x = _soft_cap(x, soft_cap)

        # Online softmax; a row with nothing seen yet keeps m = -inf, l = 0, acc = 0.
        m_new = tl.maximum(m_i, tl.max(x, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_use)
        pr = tl.exp(x - m_use[:, None])
        l_i = l_i * alpha + tl.sum(pr, 1)
        acc = acc * alpha[:, None]
        if PV_MODE == 0:
            acc += tl.dot(pr.to(tl.bfloat16), vb.to(tl.bfloat16))
        elif PV_MODE == 1:
            acc += tl.dot(pr.to(tl.bfloat16).to(tl.float32), vb.to(tl.float32), input_precision="tf32")
        else:
            acc += tl.dot(pr, vb.to(tl.float32), input_precision="ieee")
        m_i = m_new

    has = l_i > 0.0
    l_div = tl.where(has, l_i, 1.0)
    o = tl.where(has[:, None], acc * (v_scale / l_div)[:, None], 0.0)
    lse = tl.where(has, m_i + tl.log(l_div), float("-inf"))
    cell = (split.to(tl.int64) * num_rows + qrow) * num_heads + head
    tl.store(part_lse_ptr + cell, lse, mask=row_ok)
    tl.store(part_o_ptr + cell[:, None] * HEAD_DIM + d[None, :], o, mask=row_ok[:, None])


@triton.jit
def _merge_splits(
    part_o_ptr, part_lse_ptr, sinks_ptr, out_ptr, lse_ptr,
    num_heads, num_splits, split_stride,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr,
    HAS_SINKS: tl.constexpr, DEFECT_SINK: tl.constexpr,
):
    """One (row, query head): its splits merged through their log-sum-exp, the
    sink in the denominator; out [num_rows, Hq, D] and lse [num_rows, Hq]."""
    row = tl.program_id(0)
    head = tl.program_id(1)
    cell = row.to(tl.int64) * num_heads + head
    offs_s = tl.arange(0, BLOCK_S)
    lse_s = tl.load(part_lse_ptr + offs_s.to(tl.int64) * split_stride + cell,
                    mask=offs_s < num_splits, other=float("-inf"))
    m = tl.max(lse_s, 0)
    if HAS_SINKS and not DEFECT_SINK:
        sink = tl.load(sinks_ptr + head)
        m = tl.maximum(m, sink)
    m_use = tl.where(m == float("-inf"), 0.0, m)
    total = tl.sum(tl.exp(lse_s - m_use), 0)  # empty splits (lse -inf) weigh 0
    if HAS_SINKS and not DEFECT_SINK:
        total += tl.exp(sink - m_use)

    d = tl.arange(0, HEAD_DIM)
    acc = tl.zeros([HEAD_DIM], tl.float32)
    lse_p = part_lse_ptr + cell
    o_p = part_o_ptr + cell * HEAD_DIM + d
    for _ in range(0, num_splits):
        w = tl.exp(tl.load(lse_p) - m_use)
        acc += w * tl.load(o_p)
        lse_p += split_stride
        o_p += split_stride * HEAD_DIM

    has = total > 0.0
    t_div = tl.where(has, total, 1.0)
    tl.store(out_ptr + cell * HEAD_DIM + d, tl.where(has, acc / t_div, 0.0))
    tl.store(lse_ptr + cell, tl.where(has, m_use + tl.log(t_div), float("-inf")))


@triton.jit
def _probe(x_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(x_ptr + i, i.to(tl.float32) * 2.0)


def next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def cdiv(a, b):
    return -(-a // b)


class TritonDecode(pav_torch.Device):
    def __init__(self, device, defect=None, p_round="bf16"):
        super().__init__(device)
        self.defect = defect
        self.p_round = p_round
        self.sm_count = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.one = torch.ones(1, dtype=torch.float32, device=self.device)

    def scale(self, s):
        return self.one if s is None else self.tensor(np.asarray(s, dtype=np.float32).reshape(1))

    def page_rows(self, call):
        """Each sequence's page ids as a row [num_seqs, width] int32 (the
        block table as given; CSR lists laid out by rows, page ids only) and
        the sequence lengths [num_seqs] int32."""
        n = call.num_seqs
        lens = np.array([call.seq_len(s) for s in range(n)], dtype=np.int32)
        if call.page_table == "block_table":
            return np.asarray(call.block_tables, dtype=np.int32), lens
        ptr = np.asarray(call.kv_indptr, dtype=np.int64)[:n + 1]
        counts = ptr[1:] - ptr[:-1]
        table = np.zeros((n, max(1, int(counts.max()))), dtype=np.int32)
        table[np.arange(table.shape[1])[None, :] < counts[:, None]] = \
            np.asarray(call.kv_indices, dtype=np.int32)[ptr[0]:ptr[-1]]
        return table, lens

    def decode(self, call):
        dev = self.device
        rows, hq, d = call.q.shape
        hkv, page_size, q_len = call.num_kv_heads, call.page_size, call.q_len
        num_seqs = call.num_seqs
        group = hq // hkv
        fp8 = call.cache_dtype == "fp8_e4m3fn"

        q = self.tensor(np.ascontiguousarray(call.q, dtype=np.float32)).to(TORCH_Q[call.q_dtype])  # exact
        # K and V in their own dtype, strides kept (fp8 stays uint8 codes: the kernel bitcasts them).
        k = self.tensor(call.k_cache, call.cache_dtype)
        v = self.tensor(call.v_cache, call.cache_dtype)
        table, lens_np = self.page_rows(call)
        bt = self.tensor(np.ascontiguousarray(table))
        lens = self.tensor(lens_np)
        k_scale, v_scale = self.scale(call.k_scale), self.scale(call.v_scale)
        slopes = self.one if call.alibi_slopes is None else self.tensor(call.alibi_slopes)
        sinks = self.one if call.sinks is None else self.tensor(call.sinks)
        max_len = int(lens_np.max()) if num_seqs else 0
        window = call.window_left
        has_window = 0 <= window < max_len  # a window reaching back past every key is none
        cap = call.soft_cap

        qk_mode = QK_NATIVE if fp8 or call.cache_dtype == call.q_dtype else QK_TF32
        if self.p_round == "none":
            pv_mode = PV_F32
        else:
            pv_mode = PV_BF16_TF32 if call.cache_dtype == "f16" else PV_BF16
        wide = qk_mode == QK_TF32 or pv_mode != PV_BF16  # float32 operands: half the tile

        rows_per_head = group * q_len
        block_m = min(MAX_ROWS, max(16, next_pow2(rows_per_head)))
        row_blocks = cdiv(rows_per_head, block_m)
        block_n = 64 if d <= 128 else 32
        if wide:
            block_n //= 2
        num_warps = 4 if block_m * d <= 64 * 128 else 8

        # Splits: enough programs to fill the SMs, each split whole blocks of tokens.
        blocks = max(1, cdiv(max_len, block_n))
        programs = num_seqs * row_blocks * hkv
        splits = max(1, min(blocks, MAX_SPLITS, cdiv(self.sm_count, programs)))
        per_split = cdiv(blocks, splits)
        splits = cdiv(blocks, per_split)
        split_len = per_split * block_n

        part_o = torch.empty((splits, rows, hq, d), dtype=torch.float32, device=dev)
        part_lse = torch.empty((splits, rows, hq), dtype=torch.float32, device=dev)
        out = torch.empty((rows, hq, d), dtype=torch.float32, device=dev)
        lse = torch.empty((rows, hq), dtype=torch.float32, device=dev)

        _attend_split[(num_seqs * row_blocks, hkv, splits)](
            q, k, v, bt, lens, k_scale, v_scale, slopes,
            part_o, part_lse,
            q.stride(0), q.stride(1),
            k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2),
            bt.stride(0),
            rows, hq, group, q_len, row_blocks, split_len,
            float(call.softmax_scale), float(cap) if cap > 0 else 1.0, int(window) if has_window else 0,
            HEAD_DIM=d, PAGE_SIZE=page_size, BLOCK_M=block_m, BLOCK_N=block_n,
            CACHE_FP8=fp8, QK_MODE=qk_mode, PV_MODE=pv_mode,
            HAS_WINDOW=has_window, HAS_CAP=cap > 0, HAS_ALIBI=call.alibi_slopes is not None,
            DEFECT_WINDOW=self.defect == "window-off-by-one", DEFECT_CAP=self.defect == "cap-after-mask",
            DEFECT_I32=self.defect == "int32-page-offset",
            num_warps=num_warps, num_stages=2,
        )
        _merge_splits[(rows, hq)](
            part_o, part_lse, sinks, out, lse,
            hq, splits, rows * hq,
            HEAD_DIM=d, BLOCK_S=max(16, next_pow2(splits)),
            HAS_SINKS=call.sinks is not None, DEFECT_SINK=self.defect == "sink-not-in-denominator",
            num_warps=2,
        )
        return out.cpu().numpy(), lse.cpu().numpy()


def main():
    parser = pav_worker.defect_parser("triton_decode.py", DEFECTS)
    parser.add_argument("--device", default="cuda", help="CUDA device: cuda, cuda:1, ... (default cuda)")
    parser.add_argument("--p-round", choices=["bf16", "none"], default="bf16",
                        help="round the softmax weights to bf16 for P.V (bf16, the default) or keep them in "
                             "float32 with a float32 P.V (none), and describe it so")
    opts = parser.parse_args()
    if opts.list_defects:
        pav_worker.list_defects(DEFECTS)
        return
    # A device that cannot run the kernels stops the worker before it describes itself.
    try:
        dev = torch.device(opts.device)
    except RuntimeError as e:
        sys.exit("triton_decode.py: --device %s: %s" % (opts.device, e))
    if dev.type != "cuda":
        sys.exit("triton_decode.py: --device %s: the Triton kernels need a CUDA device" % opts.device)
    if not torch.cuda.is_available():
        sys.exit("triton_decode.py: no CUDA device is available to PyTorch")
    try:
        if dev.index is not None:
            torch.cuda.set_device(dev.index)  # Triton launches on the current device
        x = torch.zeros(16, dtype=torch.float32, device=dev)
        _probe[(1,)](x, N=16)
        if x.cpu().tolist() != [2.0 * i for i in range(16)]:
            raise RuntimeError("a test kernel wrote wrong values")
    except Exception as e:  # noqa: BLE001 - any failure here means the worker cannot run
        sys.exit("triton_decode.py: --device %s cannot run Triton kernels: %s: %s" % (opts.device, type(e).__name__, e))
    kernel = TritonDecode(dev, opts.defect, opts.p_round)
    desc = dict(DESCRIPTION)
    desc["profile"] = dict(DESCRIPTION["profile"], p_round=opts.p_round)
    desc["version"] = "1.0 triton %s torch %s %s" % (triton.__version__, torch.__version__, opts.device)
    if opts.defect:
        desc["version"] += " +defect." + opts.defect
    pav_worker.serve(pav_worker.Kernel(desc, kernel.decode))


if __name__ == "__main__":
    main()
