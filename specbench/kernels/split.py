"""Small batches: split every row's vocabulary across programs, then decide per request.

At small ``B`` one program per request leaves most multiprocessors idle, and the step is
latency-bound. Here every (request, row, slice) gets a program:

1. ``_split_stats_kernel`` (grid ``B x (K+1) x S``) reads each needed row once, slice by slice,
   and writes per-slice partials: argmax for greedy rows; softmax max and sum (target and draft
   logits fused) for draft slots; a race for the bonus row, for the synthetic mode's target
   token, and, with one-hot drafts, for the residual (``p`` without the draft), so no row is
   read twice.
2. ``_split_residual_kernel`` (grid ``B x S``, only when a draft distribution is given) walks the
   merged partials to the first rejection and races the residual ``max(p - q, 0)`` on its slice.

The last program of a request to finish (counted by an atomic per request, on counters that
start and end at zero, so no launch is spent clearing them) walks the merged
partials (the same arithmetic in every program, so the same decisions), merges the residual race
and writes the outputs: one launch with one-hot drafts, greedy or synthetic rows, two with a
draft distribution.

Rows past a request's bonus row are never read; every scratch slot that is read was written by
an earlier kernel of the same step.
"""

import triton
import triton.language as tl

from specbench import rng
from specbench.kernels.rng import seed_key, stream_key, uniform_at
from specbench.kernels.rows import argmax_slice, best_pair, race_logits_slice, race_residual_slice, softmax_stats_slice
from specbench.kernels.sequential import accept_test, request_setup

ACCEPT = tl.constexpr(rng.ACCEPT)
RESIDUAL = tl.constexpr(rng.RESIDUAL)
SAMPLE = tl.constexpr(rng.SAMPLE)
STATS_F = tl.constexpr(6)  # per slice: max or m, s, md, sd, race z, race g
STATS_I = tl.constexpr(2)  # per slice: argmax index, race index
INT32_MAX = tl.constexpr(2147483647)


@triton.jit
def _split_stats_kernel(
    stats_f_ptr,  # [B, K + 1, S, 6] float32
    stats_i_ptr,  # [B, K + 1, S, 2] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V]
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V]
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr,  # [B] int32
    temperature_ptr,  # [B] float32
    seed_ptr,  # [B] int64
    position_ptr,  # [B] int64
    conditional_rates_ptr,  # [K] float32
    arrivals_ptr,  # [B] int32, zero on entry; left at zero on exit
    out_ptr, out_stride,  # [B, K + 1] int64 (written here only when FINALIZE)
    num_emitted_ptr, num_accepted_ptr,  # [B] int32
    V, NUM_SLOTS, NUM_SPLITS, CHUNK,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    FINALIZE: tl.constexpr,
    BLOCK: tl.constexpr,
    S_BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1)
    split = tl.program_id(2)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    if r <= n:
        start = split * CHUNK
        stop = tl.minimum(start + CHUNK, V)
        t_row = target_ptr + b * target_stride_b + r * target_stride_k
        d_row = draft_ptr + b * draft_stride_b + r * draft_stride_k
        f_out = stats_f_ptr + ((b * NUM_SLOTS + r) * NUM_SPLITS + split) * STATS_F
        i_out = stats_i_ptr + ((b * NUM_SLOTS + r) * NUM_SPLITS + split) * STATS_I
        position = position + r
        if greedy:
            best_val, best_idx = argmax_slice(t_row, start, stop, BLOCK)
            tl.store(f_out, best_val)
            tl.store(i_out, best_idx)
        elif (MODE == 1) & (r < n):
            m, s, md, sd = softmax_stats_slice(t_row, d_row, start, stop, inv_temperature, DRAFT == 1, BLOCK)
            tl.store(f_out + 0, m)
            tl.store(f_out + 1, s)
            tl.store(f_out + 2, md)
            tl.store(f_out + 3, sd)
            if DRAFT == 0:
                # one-hot drafts: the residual is p without x, raced now so the row is read once
                x = tl.load(draft_ids_ptr + b * draft_ids_stride + r)
                exclude = tl.where((x >= 0) & (x < V), x, -1)
                key = stream_key(key_of_seed, position, RESIDUAL)
                rz, rg, idx = race_logits_slice(t_row, start, stop, inv_temperature, key, exclude, BLOCK)
                tl.store(f_out + 4, rz)
                tl.store(f_out + 5, rg)
                tl.store(i_out + 1, idx)
        else:
            # the bonus row, or any row of the synthetic mode: the target's own sample
            key = stream_key(key_of_seed, position, SAMPLE)
            rz, rg, idx = race_logits_slice(t_row, start, stop, inv_temperature, key, -1, BLOCK)
            tl.store(f_out + 4, rz)
            tl.store(f_out + 5, rg)
            tl.store(i_out + 1, idx)
    if FINALIZE:  # noqa: SIM102 (a constexpr test cannot join a run-time one in Triton)
        # no residual pass follows: the request's last program to finish writes its outputs
        if _last_to_arrive(arrivals_ptr, b, NUM_SLOTS * NUM_SPLITS):
            _finalize(b, out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, stats_f_ptr, stats_f_ptr,
                      stats_f_ptr, stats_i_ptr, target_ptr, target_stride_b, target_stride_k,
                      draft_ptr, draft_stride_b, draft_stride_k, draft_ids_ptr, draft_ids_stride,
                      num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, conditional_rates_ptr,
                      V, NUM_SLOTS, NUM_SPLITS, MODE, DRAFT, S_BLOCK, OUT_BLOCK)


@triton.jit
def _last_to_arrive(arrivals_ptr, b, expected):
    # Count this program in; True for the last of `expected` programs of request b. The barriers
    # make every thread's stores precede the release, and every later load follow the acquire.
    tl.debug_barrier()
    arrived = tl.atomic_add(arrivals_ptr + b, 1, sem="acq_rel")
    tl.debug_barrier()
    last = arrived == expected - 1
    if last:
        # every program of request b has arrived: leave the counter at zero for the next launch
        tl.store(arrivals_ptr + b, 0)
    return last


@triton.jit
def _merge_best(f_row, i_row, NUM_SPLITS, F_FIELD: tl.constexpr, I_FIELD: tl.constexpr, S_BLOCK: tl.constexpr):
    # best value over the slices and the lowest index that reaches it (-1 if none)
    splits = tl.arange(0, S_BLOCK)
    mask = splits < NUM_SPLITS
    values = tl.load(f_row + splits * STATS_F + F_FIELD, mask=mask, other=float("-inf"))
    indices = tl.load(i_row + splits * STATS_I + I_FIELD, mask=mask, other=-1)
    best = tl.max(values, axis=0)
    candidates = tl.where((values == best) & (indices >= 0), indices, INT32_MAX)
    index = tl.min(candidates, axis=0)
    return best, tl.where(index == INT32_MAX, -1, index).to(tl.int64)


@triton.jit
def _merge_race(f_row, i_row, NUM_SPLITS, S_BLOCK: tl.constexpr):
    # the race winner over the slices' (z, g, index) partials (-1 if none)
    splits = tl.arange(0, S_BLOCK)
    mask = splits < NUM_SPLITS
    zs = tl.load(f_row + splits * STATS_F + 4, mask=mask, other=float("-inf"))
    gs = tl.load(f_row + splits * STATS_F + 5, mask=mask, other=0.0)
    indices = tl.load(i_row + splits * STATS_I + 1, mask=mask, other=-1)
    _z, _g, index = best_pair(zs, gs, indices)
    return index.to(tl.int64)


@triton.jit
def _merge_softmax(f_row, NUM_SPLITS, M_FIELD: tl.constexpr, S_FIELD: tl.constexpr, S_BLOCK: tl.constexpr):
    splits = tl.arange(0, S_BLOCK)
    mask = splits < NUM_SPLITS
    ms = tl.load(f_row + splits * STATS_F + M_FIELD, mask=mask, other=float("-inf"))
    ss = tl.load(f_row + splits * STATS_F + S_FIELD, mask=mask, other=0.0)
    m = tl.max(ms, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return m, tl.sum(ss * tl.exp(ms - m_safe), axis=0)


@triton.jit
def _walk_request(
    b, stats_f_ptr, stats_i_ptr,
    target_ptr, target_stride_b, target_stride_k,
    draft_ptr, draft_stride_b, draft_stride_k,
    draft_ids_ptr, draft_ids_stride,
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, conditional_rates_ptr,
    V, NUM_SLOTS, NUM_SPLITS,
    MODE: tl.constexpr, DRAFT: tl.constexpr, S_BLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr,
):
    # Decide request b from the merged partials. A rejection whose residual needs a race over a
    # draft distribution is left pending: its row, its race kind and what the race needs.
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    slots = tl.arange(0, OUT_BLOCK)
    tokens = tl.full([OUT_BLOCK], -1, tl.int64)
    num_emitted = 0
    num_accepted = 0
    pending_row = -1
    pending_kind = 0
    pending_x = (n * 0 - 1).to(tl.int64)
    pm = 0.0
    ps = 1.0
    pmd = 0.0
    psd = 1.0
    i = 0
    done = 0
    while done == 0:
        f_row = stats_f_ptr + (b * NUM_SLOTS + i) * NUM_SPLITS * STATS_F
        i_row = stats_i_ptr + (b * NUM_SLOTS + i) * NUM_SPLITS * STATS_I
        t_row = target_ptr + b * target_stride_b + i * target_stride_k
        d_row = draft_ptr + b * draft_stride_b + i * draft_stride_k
        x = tl.load(draft_ids_ptr + b * draft_ids_stride + i, mask=i < n, other=-1)
        x_valid = (x >= 0) & (x < V) & (i < n)
        token = x * 0 - 1
        accepted = x_valid & (i < 0)
        if MODE == 2:
            u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
            rate = tl.load(conditional_rates_ptr + i, mask=i < n, other=0.0)
            accepted = x_valid & (u < rate)
            if accepted:
                token = x
            elif greedy:
                _v, token = _merge_best(f_row, i_row, NUM_SPLITS, 0, 0, S_BLOCK)
            else:
                token = _merge_race(f_row, i_row, NUM_SPLITS, S_BLOCK)
        elif greedy:
            _v, best_idx = _merge_best(f_row, i_row, NUM_SPLITS, 0, 0, S_BLOCK)
            accepted = x_valid & (x == best_idx)
            token = tl.where(accepted, x, best_idx)
        elif i == n:
            token = _merge_race(f_row, i_row, NUM_SPLITS, S_BLOCK)
        else:
            m, s = _merge_softmax(f_row, NUM_SPLITS, 0, 1, S_BLOCK)
            md = 0.0
            sd = 1.0
            if DRAFT == 0:
                md = float("-inf")
            if DRAFT == 1:
                md, sd = _merge_softmax(f_row, NUM_SPLITS, 2, 3, S_BLOCK)
            if m != float("-inf"):
                u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
                accepted = accept_test(u, x, x_valid, t_row, d_row, inv_temperature, m, s, md, sd, DRAFT)
                if accepted:
                    token = x
                elif DRAFT == 0:
                    res_idx = _merge_race(f_row, i_row, NUM_SPLITS, S_BLOCK)
                    token = tl.where(res_idx >= 0, res_idx, x)
                else:
                    pending_row = i
                    pending_kind = tl.where((md == float("-inf")) | (~x_valid), 0, DRAFT)
                    pending_x = tl.where(x_valid, x, -1)
                    pm = m
                    ps = s
                    pmd = md
                    psd = sd
        tokens = tl.where(slots == i, token, tokens)
        num_emitted += (token >= 0).to(tl.int32)
        num_accepted += accepted.to(tl.int32)
        i += 1
        done = ((~accepted) | (i > n)).to(tl.int32)
    return tokens, num_emitted, num_accepted, pending_row, pending_kind, pending_x, pm, ps, pmd, psd, inv_temperature


@triton.jit
def _finalize(
    b, out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, residual_f_ptr, residual_i_ptr,
    stats_f_ptr, stats_i_ptr,
    target_ptr, target_stride_b, target_stride_k,
    draft_ptr, draft_stride_b, draft_stride_k,
    draft_ids_ptr, draft_ids_stride,
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, conditional_rates_ptr,
    V, NUM_SLOTS, NUM_SPLITS,
    MODE: tl.constexpr, DRAFT: tl.constexpr, S_BLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr,
):
    # Walk request b, merge its pending residual race (if any), write its outputs.
    tokens, num_emitted, num_accepted, row, kind, x, _m, _s, _md, _sd, _it = _walk_request(
        b, stats_f_ptr, stats_i_ptr, target_ptr, target_stride_b, target_stride_k,
        draft_ptr, draft_stride_b, draft_stride_k, draft_ids_ptr, draft_ids_stride,
        num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, conditional_rates_ptr,
        V, NUM_SLOTS, NUM_SPLITS, MODE, DRAFT, S_BLOCK, OUT_BLOCK)
    slots = tl.arange(0, OUT_BLOCK)
    if row >= 0:
        residual_f = residual_f_ptr + b * NUM_SPLITS * 4
        residual_i = residual_i_ptr + b * NUM_SPLITS * 2
        splits = tl.arange(0, S_BLOCK)
        mask = splits < NUM_SPLITS
        _z, _g, idx = best_pair(tl.load(residual_f + splits * 4, mask=mask, other=float("-inf")),
                                tl.load(residual_f + splits * 4 + 1, mask=mask, other=0.0),
                                tl.load(residual_i + splits * 2, mask=mask, other=-1))
        _fz, _fg, fb_idx = best_pair(tl.load(residual_f + splits * 4 + 2, mask=mask, other=float("-inf")),
                                     tl.load(residual_f + splits * 4 + 3, mask=mask, other=0.0),
                                     tl.load(residual_i + splits * 2 + 1, mask=mask, other=-1))
        # no token with w > 0: one-hot draft -> x itself; a real residual -> the race over p
        fallback = tl.where(kind == 0, x, fb_idx.to(tl.int64))
        token = tl.where(idx < 0, fallback, idx.to(tl.int64))
        tokens = tl.where(slots == row, token, tokens)
        num_emitted += (token >= 0).to(tl.int32)
    tl.store(out_ptr + b * out_stride + slots, tokens, mask=slots < NUM_SLOTS)
    tl.store(num_emitted_ptr + b, num_emitted)
    tl.store(num_accepted_ptr + b, num_accepted)


@triton.jit
def _split_residual_kernel(
    out_ptr, out_stride,  # [B, K + 1] int64
    num_emitted_ptr, num_accepted_ptr,  # [B] int32
    residual_f_ptr,  # [B, S, 4] float32: residual race (z, g), fallback (p) race (z, g)
    residual_i_ptr,  # [B, S, 2] int32: their indices
    arrivals_ptr,  # [B] int32, zero on entry; left at zero on exit
    stats_f_ptr, stats_i_ptr,  # partials of _split_stats_kernel
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V]
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V]
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, conditional_rates_ptr,  # [B] x 4, [K]
    V, NUM_SLOTS, NUM_SPLITS, CHUNK,
    MODE: tl.constexpr, DRAFT: tl.constexpr, BLOCK: tl.constexpr, S_BLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    _t, _e, _a, row, kind, x, m, s, md, sd, inv_temperature = _walk_request(
        b, stats_f_ptr, stats_i_ptr, target_ptr, target_stride_b, target_stride_k,
        draft_ptr, draft_stride_b, draft_stride_k, draft_ids_ptr, draft_ids_stride,
        num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, conditional_rates_ptr,
        V, NUM_SLOTS, NUM_SPLITS, MODE, DRAFT, S_BLOCK, OUT_BLOCK)
    if row >= 0:
        start = split * CHUNK
        stop = tl.minimum(start + CHUNK, V)
        t_row = target_ptr + b * target_stride_b + row * target_stride_k
        d_row = draft_ptr + b * draft_stride_b + row * draft_stride_k
        key = stream_key(seed_key(tl.load(seed_ptr + b)), tl.load(position_ptr + b) + row, RESIDUAL)
        out_f = residual_f_ptr + (b * NUM_SPLITS + split) * 4
        out_i = residual_i_ptr + (b * NUM_SPLITS + split) * 2
        fz = float("-inf")
        fg = 0.0
        fidx = -1
        if kind == 0:
            # w = p without x (one-hot draft), or p itself when x is not a valid id
            rz, rg, idx = race_logits_slice(t_row, start, stop, inv_temperature, key, x, BLOCK)
        else:
            rz, rg, idx, fz, fg, fidx = race_residual_slice(t_row, d_row, start, stop, inv_temperature, key,
                                                            m, s, md, sd, DRAFT, True, BLOCK)
        tl.store(out_f + 0, rz)
        tl.store(out_f + 1, rg)
        tl.store(out_f + 2, fz)
        tl.store(out_f + 3, fg)
        tl.store(out_i + 0, idx)
        tl.store(out_i + 1, fidx)
    # the request's last program to finish merges the slices and writes the outputs
    if _last_to_arrive(arrivals_ptr, b, NUM_SPLITS):
        _finalize(b, out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, residual_f_ptr, residual_i_ptr,
                  stats_f_ptr, stats_i_ptr, target_ptr, target_stride_b, target_stride_k,
                  draft_ptr, draft_stride_b, draft_stride_k, draft_ids_ptr, draft_ids_stride,
                  num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, conditional_rates_ptr,
                  V, NUM_SLOTS, NUM_SPLITS, MODE, DRAFT, S_BLOCK, OUT_BLOCK)
