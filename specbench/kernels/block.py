"""Block verification (Sun et al. 2024, arXiv 2403.10444, alg. 2): one program per request.

The rule is ``specbench/verification.py``'s ("Verification methods", ``block``). A program walks its
request's draft rows forward once, one pass per row for the softmax statistics (target and draft
logits fused), which give ``p(x)``, ``q(x)`` and the weights ``w_1..w_n``. Then the paper's backward
pass: ``A`` is the largest length whose stop test passes, so the tests run from ``n`` down and stop at
the first that passes. Test ``n`` (``u_{n-1} q(x) < w_{n-1} p(x)``) needs no more reading; test
``i < n`` one pass over row ``i`` for its residual mass ``r_i = sum max(w_i p_i - q_i, 0)``. A request
that accepts everything thus reads each row once, as the token rule's kernel does. One race pass over
row ``A`` emits its token (the bonus, or the block residual ``max(w_A p_A - q_A, 0)``). Greedy rows run
the greedy rule (one argmax pass per row).

Correct first, not tuned: the residual race is not screened (the bonus race is, as the token kernel's),
and untruncated inputs only (a truncated call is refused by the launcher).
"""

import triton
import triton.language as tl

from specbench.kernels.decide import (
    ACCEPT,
    DRAFT_LOGITS,
    DRAFT_NONE,
    DRAFT_PROBS,
    MODE_PROBABILISTIC,
    RESIDUAL,
    SAMPLE,
    draft_chunk,
    draft_prob_of,
    read_at_draft,
    request_setup,
    request_valid,
    row_at,
    sample_row,
    target_chunk,
    target_prob_of,
)
from specbench.kernels.rng import hash_word, neg_log_of_uniform, stream_key, uniform_at, uniform_of
from specbench.kernels.rows import argmax_slice, best_pair, softmax_stats_slice


@triton.jit
def _row_chunk(t_row, d_row, offs, V, inv_temperature, m, s, md, sd, x, x_valid, DRAFT: tl.constexpr,
               TARGET_PROBS: tl.constexpr):
    # p and q over a chunk of a row (decide.target_chunk, decide.draft_chunk); q = 0 everywhere when x is not
    # a valid id
    p = target_chunk(t_row, offs, V, inv_temperature, m, s, TARGET_PROBS)
    q = draft_chunk(d_row, offs, V, inv_temperature, md, sd, x, DRAFT)
    return p, tl.where(x_valid, q, 0.0)


@triton.jit
def _residual_mass(t_row, d_row, V, inv_temperature, weight, m, s, md, sd, x, x_valid, DRAFT: tl.constexpr,
                   TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # r = sum_y max(w p(y) - q(y), 0) over the row
    total = tl.zeros([BLOCK], tl.float32)
    for chunk in range(0, V, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        p, q = _row_chunk(t_row, d_row, offs, V, inv_temperature, m, s, md, sd, x, x_valid, DRAFT, TARGET_PROBS)
        total += tl.where(offs < V, tl.maximum(weight * p - q, 0.0), 0.0)
    return tl.sum(total, axis=0)


@triton.jit
def _residual_race(t_row, d_row, V, inv_temperature, weight, m, s, md, sd, x, x_valid, key, DRAFT: tl.constexpr,
                   TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # the race over max(w p - q, 0): argmax_y of its weight over E_y, compared as w * E' > w' * E (ties to
    # the lowest id); -1 when the weights are zero everywhere
    lane_w = tl.zeros([BLOCK], tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    for chunk in range(0, V, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        p, q = _row_chunk(t_row, d_row, offs, V, inv_temperature, m, s, md, sd, x, x_valid, DRAFT, TARGET_PROBS)
        w = tl.where(offs < V, weight * p - q, 0.0)
        e = neg_log_of_uniform(uniform_of(hash_word(key, offs)))  # E_y
        better = w * lane_e > lane_w * e  # only w > 0 races; strict, so each lane keeps its earliest
        lane_idx = tl.where(better, offs, lane_idx)
        lane_w = tl.where(better, w, lane_w)
        lane_e = tl.where(better, e, lane_e)
    ratio = tl.where(lane_idx >= 0, tl.log(tl.where(lane_idx >= 0, lane_w, 1.0)) - tl.log(lane_e), float("-inf"))
    _z, _g, index = best_pair(ratio, tl.zeros_like(ratio), lane_idx)
    return index


@triton.jit
def _row_stats(t_row, d_row, V, inv_temperature, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
               BLOCK: tl.constexpr):
    # (m, s, md, sd): the target's softmax statistics (0, 1 for probabilities) and the draft's (draft
    # logits; md = 0 marks draft probabilities, md = -inf one-hot drafts)
    if TARGET_PROBS:
        md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, 0, V, inv_temperature, False, BLOCK)
        m = 0.0
        s = 1.0
        if DRAFT == DRAFT_PROBS:
            md = 0.0
        if DRAFT == DRAFT_NONE:
            md = float("-inf")
    else:
        m, s, md, sd = softmax_stats_slice(t_row, d_row, 0, V, inv_temperature, DRAFT == DRAFT_LOGITS, BLOCK)
        if DRAFT == DRAFT_PROBS:
            md = 0.0
    return m, s, md, sd


@triton.jit
def _verify_block_kernel(
    out_ptr, out_stride,  # [B, K + 1] int64
    num_emitted_ptr,  # [B] int32
    num_accepted_ptr,  # [B] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits or probs (unused if DRAFT == 0)
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr,  # [B] int32
    temperature_ptr,  # [B] float32
    seed_ptr,  # [B] int64
    position_ptr,  # [B] int64
    V, NUM_SLOTS,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE_PROBABILISTIC)
    slots = tl.arange(0, OUT_BLOCK)
    drafts = tl.load(draft_ids_ptr + b * draft_ids_stride + slots, mask=slots < n, other=-1)
    t_base = target_ptr + b * target_stride_b
    d_base = draft_ptr + b * draft_stride_b
    tokens = tl.full([OUT_BLOCK], -1, tl.int64)
    num_accepted = 0
    token = tl.sum(drafts * 0, axis=0) - 1  # int64 -1
    if greedy:
        # every method's rule on a greedy row: accept while the draft is the argmax, then emit it
        i = 0
        done = 0
        while done == 0:
            x = tl.load(draft_ids_ptr + b * draft_ids_stride + i, mask=i < n, other=-1)
            _best_val, best_idx = argmax_slice(t_base + i * target_stride_k, 0, V, TARGET_PROBS, BLOCK)
            accepted = (x >= 0) & (x < V) & (i < n) & (x == best_idx)
            token = tl.where(accepted, x, best_idx.to(tl.int64))
            tokens = tl.where(slots == i, token, tokens)
            num_accepted += accepted.to(tl.int32)
            i += 1
            done = ((~accepted) | (i > n)).to(tl.int32)
    else:
        # forward: each draft row's statistics (one pass) and the weights w_1..w_n from p(x), q(x); lane i
        # of these vectors holds row i's
        weights = tl.full([OUT_BLOCK], 1.0, tl.float32)  # w_i (w_0 = 1)
        ms = tl.zeros([OUT_BLOCK], tl.float32)
        ss = tl.zeros([OUT_BLOCK], tl.float32)
        mds = tl.zeros([OUT_BLOCK], tl.float32)
        sds = tl.zeros([OUT_BLOCK], tl.float32)
        weight = 1.0
        last = n < 0  # the test of length n (a bool)
        for i in range(n):
            t_row = t_base + i * target_stride_k
            d_row = d_base + i * draft_stride_k
            x = tl.load(draft_ids_ptr + b * draft_ids_stride + i)
            x_valid = (x >= 0) & (x < V)
            t_at_x, d_at_x = read_at_draft(t_row, d_row, x, x_valid, DRAFT)
            m, s, md, sd = _row_stats(t_row, d_row, V, inv_temperature, DRAFT, TARGET_PROBS, BLOCK)
            at_i = slots == i
            ms = tl.where(at_i, m, ms)
            ss = tl.where(at_i, s, ss)
            mds = tl.where(at_i, md, mds)
            sds = tl.where(at_i, sd, sds)
            p_x = target_prob_of(t_at_x, inv_temperature, m, s, TARGET_PROBS)
            q_x = draft_prob_of(d_at_x, inv_temperature, md, sd, DRAFT)
            p_x = tl.where(x_valid & (p_x > 0.0), p_x, 0.0)  # NaN (a row with no mass) and invalid ids: 0
            q_x = tl.where(x_valid, q_x, 0.0)
            # the test of length n, the token rule's test on w_{n-1} p(x): u q(x) < w p(x)
            last = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0) * q_x < weight * p_x
            mass = weight * p_x
            weight = tl.where(mass > 0.0, tl.where(mass >= q_x, 1.0, mass / tl.where(q_x > 0.0, q_x, 1.0)), 0.0)
            weights = tl.where(slots == i + 1, weight, weights)
        # backward (the paper's pass): A is the largest length whose test passes, so the tests run from n down
        # and stop at the first that passes; test n needs nothing more, test i < n one pass over row i for
        # r_i, and u_{i-1} < h_i = r_i / (r_i + 1 - w_i)
        terminal = tl.where(last, n, 0)
        i = n - 1
        while (i > 0) & (terminal == 0):
            x = tl.sum(tl.where(slots == i, drafts, 0), axis=0)
            x_valid = (x >= 0) & (x < V)
            w_i = row_at(weights, slots, i)
            r = _residual_mass(t_base + i * target_stride_k, d_base + i * draft_stride_k, V, inv_temperature, w_i,
                               row_at(ms, slots, i), row_at(ss, slots, i), row_at(mds, slots, i),
                               row_at(sds, slots, i), x, x_valid, DRAFT, TARGET_PROBS, BLOCK)
            stop = tl.where(r > 0.0, r / (r + 1.0 - w_i), 0.0)
            if uniform_at(stream_key(key_of_seed, position + i - 1, ACCEPT), 0) < stop:
                terminal = i
            i -= 1
        num_accepted = terminal
        t_row = t_base + terminal * target_stride_k
        if terminal == n:
            # the bonus race, screened as the token kernel's (the same winner, fewer logarithms)
            _z, _g, bonus = sample_row(t_row, 0, V, inv_temperature,
                                       stream_key(key_of_seed, position + terminal, SAMPLE), TARGET_PROBS, True,
                                       BLOCK // 2)
            token = bonus.to(tl.int64)
        else:
            x = tl.sum(tl.where(slots == terminal, drafts, 0), axis=0)
            x_valid = (x >= 0) & (x < V)
            key = stream_key(key_of_seed, position + terminal, RESIDUAL)
            index = _residual_race(t_row, d_base + terminal * draft_stride_k, V, inv_temperature,
                                   row_at(weights, slots, terminal), row_at(ms, slots, terminal),
                                   row_at(ss, slots, terminal), row_at(mds, slots, terminal),
                                   row_at(sds, slots, terminal), x, x_valid, key, DRAFT, TARGET_PROBS, BLOCK)
            if index < 0:  # nothing left: the race over p with the same E_y
                _z, _g, index = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, False, BLOCK)
            token = index.to(tl.int64)
        tokens = tl.where(slots < terminal, drafts, tl.where(slots == terminal, token, tokens))
    num_emitted = num_accepted + (token >= 0).to(tl.int32)
    valid = request_valid(inv_temperature)  # an invalid request emits nothing
    tl.store(out_ptr + b * out_stride + slots, tl.where(valid, tokens, -1), mask=slots < NUM_SLOTS)
    tl.store(num_emitted_ptr + b, tl.where(valid, num_emitted, 0))
    tl.store(num_accepted_ptr + b, tl.where(valid, num_accepted, 0))
