"""The group maxima pass, in the variants bench_pass.py times (one program per row)."""

import triton
import triton.language as tl

from specbench.kernels.rows import clean

GROUP = tl.constexpr(32)

@triton.jit
def k_current(row, V, inv_t, out, first, last, GROUP_ROWS: tl.constexpr):
    rows = tl.arange(0, GROUP_ROWS)
    lanes = tl.arange(0, GROUP)
    stop = tl.minimum(last * GROUP, V)
    for start in range(first, last, GROUP_ROWS):
        groups = start + rows
        offs = groups[:, None] * GROUP + lanes[None, :]
        raw = tl.load(row + offs, mask=offs < stop, other=float("-inf")).to(tl.float32)
        value = clean(tl.max(raw, axis=1) * inv_t)
        value = tl.where(value == 0.0, 0.0, value)
        tl.store(out + groups, value, mask=groups < last)

@triton.jit
def k_prefetch(row, V, inv_t, out, first, last, GROUP_ROWS: tl.constexpr):
    rows = tl.arange(0, GROUP_ROWS)
    lanes = tl.arange(0, GROUP)
    stop = tl.minimum(last * GROUP, V)
    offs = (first + rows)[:, None] * GROUP + lanes[None, :]
    coming = tl.load(row + offs, mask=offs < stop, other=float("-inf"))
    for start in range(first, last, GROUP_ROWS):
        groups = start + rows
        raw = coming.to(tl.float32)
        nxt = (groups + GROUP_ROWS)[:, None] * GROUP + lanes[None, :]
        coming = tl.load(row + nxt, mask=nxt < stop, other=float("-inf"))
        value = clean(tl.max(raw, axis=1) * inv_t)
        value = tl.where(value == 0.0, 0.0, value)
        tl.store(out + groups, value, mask=groups < last)

@triton.jit
def k_inthread(row, V, inv_t, out, first, last, GROUP_ROWS: tl.constexpr, THREADS: tl.constexpr):
    # a chunk of GROUP_ROWS * GROUP tokens as [H, 8, THREADS, 4]: group (h, t) = 8 pieces of 4 tokens
    H: tl.constexpr = GROUP_ROWS * GROUP // (32 * THREADS)
    h = tl.arange(0, H)
    r = tl.arange(0, 8)
    t = tl.arange(0, THREADS)
    l = tl.arange(0, 4)
    stop = tl.minimum(last * GROUP, V)
    for start in range(first, last, GROUP_ROWS):
        offs = (start * GROUP + h[:, None, None, None] * (8 * THREADS * 4) + r[None, :, None, None] * (THREADS * 4)
                + t[None, None, :, None] * 4 + l[None, None, None, :])
        raw = tl.load(row + offs, mask=offs < stop, other=float("-inf")).to(tl.float32)
        m = tl.max(tl.max(raw, axis=3), axis=1)  # [H, THREADS]
        value = clean(m * inv_t)
        value = tl.where(value == 0.0, 0.0, value)
        groups = start + h[:, None] * THREADS + t[None, :]
        tl.store(out + groups, value, mask=groups < last)

@triton.jit
def k_inthread_prefetch(row, V, inv_t, out, first, last, GROUP_ROWS: tl.constexpr, THREADS: tl.constexpr):
    H: tl.constexpr = GROUP_ROWS * GROUP // (32 * THREADS)
    h = tl.arange(0, H)
    r = tl.arange(0, 8)
    t = tl.arange(0, THREADS)
    l = tl.arange(0, 4)
    stop = tl.minimum(last * GROUP, V)
    base = (h[:, None, None, None] * (8 * THREADS * 4) + r[None, :, None, None] * (THREADS * 4)
            + t[None, None, :, None] * 4 + l[None, None, None, :])
    offs = first * GROUP + base
    coming = tl.load(row + offs, mask=offs < stop, other=float("-inf"))
    for start in range(first, last, GROUP_ROWS):
        raw = coming.to(tl.float32)
        nxt = (start + GROUP_ROWS) * GROUP + base
        coming = tl.load(row + nxt, mask=nxt < stop, other=float("-inf"))
        m = tl.max(tl.max(raw, axis=3), axis=1)
        value = clean(m * inv_t)
        value = tl.where(value == 0.0, 0.0, value)
        groups = start + h[:, None] * THREADS + t[None, :]
        tl.store(out + groups, value, mask=groups < last)

@triton.jit
def k_contig_inthread(row, V, inv_t, out, first, last, GROUP_ROWS: tl.constexpr):
    # contiguous groups of 32, each thread loading whole groups: [8, GROUP_ROWS, 4]
    r = tl.arange(0, 8)
    g = tl.arange(0, GROUP_ROWS)
    l = tl.arange(0, 4)
    stop = tl.minimum(last * GROUP, V)
    for start in range(first, last, GROUP_ROWS):
        groups = start + g
        offs = groups[None, :, None] * GROUP + r[:, None, None] * 4 + l[None, None, :]
        raw = tl.load(row + offs, mask=offs < stop, other=float("-inf")).to(tl.float32)
        m = tl.max(tl.max(raw, axis=2), axis=0)
        value = clean(m * inv_t)
        value = tl.where(value == 0.0, 0.0, value)
        tl.store(out + groups, value, mask=groups < last)
