"""Block verification (Sun et al. 2024, arXiv 2403.10444, alg. 2): one program per request.

The rule is ``specbench/verification.py``'s ("Verification methods", ``block``). A program walks its
request's draft rows forward once, one pass per row for the softmax statistics (target and draft
logits fused), which give ``p(x)``, ``q(x)`` and the weights ``w_1..w_n``. Then the paper's backward
pass: ``A`` is the largest length whose stop test passes, so the tests run from ``n`` down and stop at
the first that passes. Test ``n`` (``u_{n-1} q(x) < w_{n-1} p(x)``) needs no more reading; test
``i < n`` one pass over row ``i`` for its residual mass ``r_i = sum max(w_i p_i - q_i, 0)``, unless
``u_{i-1} >= w_i``: ``h_i <= w_i``, so the test fails unread (as SGLang's kernel skips it). A request
that accepts everything thus reads each row once, as the token rule's kernel does. One race pass over
row ``A`` emits its token (the bonus, or the block residual ``max(w_A p_A - q_A, 0)``). Greedy rows run
the greedy rule (one argmax pass per row).

This one-program kernel is correct first, not tuned: its residual race is not screened (its bonus race is, as
the token kernel's). Untruncated inputs only, on either path (a truncated call is refused by the launcher).

The split path (``launch.strategy("split")``, what a GPU runs) splits each row across programs, in three launches
that each end in the request's last program. ``_block_rows_kernel``: the rows' statistics, then the forward pass
from the values at the drafts (where no weight needs statistics, target probabilities with draft probabilities or
one-hot drafts, one program per request runs the forward pass alone, and the masses kernel takes a greedy
request's argmax). ``_block_masses_kernel``: every ``r_i`` the backward pass may need (``i = 1..n-1`` with
``u_{i-1} < w_i``, unless the test of length ``n`` passed), then the backward pass; with ``SKIP`` (large batches)
its programs run row by row from the last, each row's last program runs its stop test, and a program whose row
lies below a test known to have passed reads nothing (the backward pass stops there). ``_block_race_kernel``: the
terminal row's race, screened at large batches as the token kernels' races. The same arithmetic as the one-program
kernel, so the same tokens up to the float sums' order.
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
    merge_rows,
    read_at_draft,
    request_setup,
    request_valid,
    row_at,
    sample_row,
    target_chunk,
    target_prob_of,
)
from specbench.kernels.rng import hash_word, neg_log_of_uniform, one_minus_uniform, stream_key, uniform_at, uniform_of
from specbench.kernels.rows import (
    argmax_slice,
    chunk_raced,
    race_lanes,
    ratio_best,
    screen_ratio,
    softmax_stats_slice,
)
from specbench.kernels.split import (
    finish_greedy,
    last_to_arrive,
    merge_race,
    store_race,
    store_row_partial,
    write_request,
)


@triton.jit
def _row_chunk(t_row, d_row, offs, V, inv_temperature, m, s, md, sd, x, x_valid, DRAFT: tl.constexpr,
               TARGET_PROBS: tl.constexpr):
    # p and q over a chunk of a row (decide.target_chunk, decide.draft_chunk); q = 0 everywhere when x is not
    # a valid id
    p = target_chunk(t_row, offs, V, inv_temperature, m, s, TARGET_PROBS)
    q = draft_chunk(d_row, offs, V, inv_temperature, md, sd, x, DRAFT)
    return p, tl.where(x_valid, q, 0.0)


@triton.jit
def _test_possible(u, weight):
    # whether stop test i can pass, so whether row i's residual mass is needed: h_i = min(r_i / (r_i + 1 - w_i),
    # w_i) <= w_i, so u_{i-1} >= w_i fails the test unread (w_i = 0 too: u >= 0), as SGLang 0.5.23's kernel skips
    return u < weight


@triton.jit
def _stop_probability(r, weight):
    # h_i = min(r / (r + 1 - w), w), 0 when r = 0 (verification.py, "block"); a NaN r fails the test, as in torch
    return tl.where(r > 0.0, tl.minimum(r / (r + 1.0 - weight), weight, propagate_nan=tl.PropagateNan.ALL), 0.0)


@triton.jit
def _residual_mass(t_row, d_row, start, stop, inv_temperature, weight, m, s, md, sd, x, x_valid,
                   DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # r = sum_y max(w p(y) - q(y), 0) over [start, stop) of the row
    total = tl.zeros([BLOCK], tl.float32)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        p, q = _row_chunk(t_row, d_row, offs, stop, inv_temperature, m, s, md, sd, x, x_valid, DRAFT, TARGET_PROBS)
        total += tl.where(offs < stop, tl.maximum(weight * p - q, 0.0), 0.0)
    return tl.sum(total, axis=0)


@triton.jit
def _residual_race(t_row, d_row, start, stop, inv_temperature, weight, m, s, md, sd, x, x_valid, key,
                   DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr, SCREEN: tl.constexpr, BLOCK: tl.constexpr):
    # the race over max(w p - q, 0) on [start, stop): argmax_y of its weight over E_y, compared as
    # w * E' > w' * E (ties to the lowest id), as a race pair (log(w / E), 0, index); index -1 when the weights
    # are zero there. Screened as rows.race_weights_slice (SCREEN): a chunk none of whose tokens could beat the best
    # so far (w > r (1 - u), r the best w / E less a margin) skips its logarithms.
    lane_w = tl.zeros([BLOCK], tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    ratio_screen = weight * 0.0  # nothing screened before the first raced chunk
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        p, q = _row_chunk(t_row, d_row, offs, stop, inv_temperature, m, s, md, sd, x, x_valid, DRAFT, TARGET_PROBS)
        w = tl.where(offs < stop, weight * p - q, 0.0)
        word = hash_word(key, offs)
        if chunk_raced(w - ratio_screen * one_minus_uniform(word), SCREEN):  # 1 - u is at most E_y
            e = neg_log_of_uniform(uniform_of(word))  # E_y
            lane_w, lane_e, lane_idx = race_lanes(lane_w, lane_e, lane_idx, w, e, offs)
            if SCREEN:
                ratio_screen = screen_ratio(lane_w, lane_e)
    return ratio_best(lane_w, lane_e, lane_idx)


@triton.jit
def _forward_step(t_at_x, d_at_x, x_valid, weight, inv_temperature, m, s, md, sd, key_of_seed, t,
                  DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr):
    # one row of the forward pass, from the values at its draft: whether the test of the block ending here
    # passes (the token rule's test on w p(x): u q(x) < w p(x)), and the next weight
    p_x = target_prob_of(t_at_x, inv_temperature, m, s, TARGET_PROBS)
    q_x = draft_prob_of(d_at_x, inv_temperature, md, sd, DRAFT)
    p_x = tl.where(x_valid & (p_x > 0.0), p_x, 0.0)  # NaN (a row with no mass) and invalid ids: 0
    q_x = tl.where(x_valid, q_x, 0.0)
    passes = uniform_at(stream_key(key_of_seed, t, ACCEPT), 0) * q_x < weight * p_x
    mass = weight * p_x
    weight = tl.where(mass > 0.0, tl.where(mass >= q_x, 1.0, mass / tl.where(q_x > 0.0, q_x, 1.0)), 0.0)
    return passes, weight


@triton.jit
def _row_stats(t_row, d_row, V, inv_temperature, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
               BLOCK: tl.constexpr):
    # (m, s, md, sd): the target's softmax statistics (0, 1 for probabilities) and the draft's (draft
    # logits; md = 0 marks draft probabilities, md = -inf one-hot drafts)
    if TARGET_PROBS:
        m = 0.0
        s = 1.0
        sd = 1.0
        if DRAFT == DRAFT_LOGITS:  # the only row read here: probabilities and one-hot drafts need no statistics
            md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, 0, V, inv_temperature, False, BLOCK)
        elif DRAFT == DRAFT_PROBS:
            md = 0.0
        else:
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
            last, weight = _forward_step(t_at_x, d_at_x, x_valid, weight, inv_temperature, m, s, md, sd,
                                         key_of_seed, position + i, DRAFT, TARGET_PROBS)
            weights = tl.where(slots == i + 1, weight, weights)
        # backward (the paper's pass): A is the largest length whose test passes, so the tests run from n down
        # and stop at the first that passes; test n needs nothing more, test i < n one pass over row i for
        # r_i unless u_{i-1} >= w_i fails it unread, and u_{i-1} < h_i = min(r_i / (r_i + 1 - w_i), w_i)
        terminal = tl.where(last, n, 0)
        i = n - 1
        while (i > 0) & (terminal == 0):
            x = tl.sum(tl.where(slots == i, drafts, 0), axis=0)
            x_valid = (x >= 0) & (x < V)
            w_i = row_at(weights, slots, i)
            u = uniform_at(stream_key(key_of_seed, position + i - 1, ACCEPT), 0)
            r = 0.0
            if _test_possible(u, w_i):
                r = _residual_mass(t_base + i * target_stride_k, d_base + i * draft_stride_k, 0, V, inv_temperature,
                                   w_i, row_at(ms, slots, i), row_at(ss, slots, i), row_at(mds, slots, i),
                                   row_at(sds, slots, i), x, x_valid, DRAFT, TARGET_PROBS, BLOCK)
            if u < _stop_probability(r, w_i):
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
            _z, _g, index = _residual_race(t_row, d_base + terminal * draft_stride_k, 0, V, inv_temperature,
                                           row_at(weights, slots, terminal), row_at(ms, slots, terminal),
                                           row_at(ss, slots, terminal), row_at(mds, slots, terminal),
                                           row_at(sds, slots, terminal), x, x_valid, key, DRAFT, TARGET_PROBS,
                                           False, BLOCK)
            if index < 0:  # nothing left: the race over p with the same E_y
                _z, _g, index = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, False, BLOCK)
            token = index.to(tl.int64)
        tokens = tl.where(slots < terminal, drafts, tl.where(slots == terminal, token, tokens))
    num_emitted = num_accepted + (token >= 0).to(tl.int32)
    valid = request_valid(inv_temperature)  # an invalid request emits nothing
    tl.store(out_ptr + b * out_stride + slots, tl.where(valid, tokens, -1), mask=slots < NUM_SLOTS)
    tl.store(num_emitted_ptr + b, tl.where(valid, num_emitted, 0))
    tl.store(num_accepted_ptr + b, tl.where(valid, num_accepted, 0))


# The split path (launch.strategy("split")): three launches, each ending in the request's last program (arrival
# counters as specbench/kernels/split.py's). Per request (R = K + 1 slots, S the slices of a row, S2 the race's):
# row partials [R, S, 4] / [R, S], the residual masses' partials [R, S], the race partials [S2, 2] / [S2, 2], the
# forward record (w, m, s, md, sd) x OUT_BLOCK / (the test of length n, the request's kind, the terminal). In the
# counters (zero on entry, left at zero): the request's arrivals [B], the largest row whose stop test passed, plus
# one (0: none yet) [B], each row's arrivals [B, R].
_ROW_FIELDS = tl.constexpr(4)
_DONE = tl.constexpr(0)  # nothing left to do (a finished greedy request, an emptied invalid one)
_DECIDE = tl.constexpr(1)  # the masses kernel settles the terminal row, the race kernel its token
_GREEDY = tl.constexpr(2)  # a greedy request the masses kernel finishes (STATS off: the rows kernel reads no row)
_BONUS = tl.constexpr(3)  # what the race kernel races: the bonus over p_n
_RESIDUAL = tl.constexpr(4)  # ... or the block residual max(w_A p_A - q_A, 0)
_WRITTEN = tl.constexpr(65536)  # what a row arrival that wrote its partial adds beyond 1 (S < 65536)


@triton.jit
def _split_bases(scratch_f_ptr, scratch_i_ptr, b, batch, NUM_SLOTS, ROW_SPLITS, RACE_SPLITS, OUT_BLOCK: tl.constexpr):
    # request b's rows partials, mass partials, race partials and record, in the scratch
    rows_f = scratch_f_ptr + b * NUM_SLOTS * ROW_SPLITS * _ROW_FIELDS
    rows_i = scratch_i_ptr + b * NUM_SLOTS * ROW_SPLITS
    after_f = batch * NUM_SLOTS * ROW_SPLITS * _ROW_FIELDS
    after_i = batch * NUM_SLOTS * ROW_SPLITS
    masses = scratch_f_ptr + after_f + b * NUM_SLOTS * ROW_SPLITS
    after_f += batch * NUM_SLOTS * ROW_SPLITS
    race_f = scratch_f_ptr + after_f + b * RACE_SPLITS * 2
    race_i = scratch_i_ptr + after_i + b * RACE_SPLITS * 2
    record_f = scratch_f_ptr + after_f + batch * RACE_SPLITS * 2 + b * 5 * OUT_BLOCK
    record_i = scratch_i_ptr + after_i + batch * RACE_SPLITS * 2 + b * 3
    return rows_f, rows_i, masses, race_f, race_i, record_f, record_i


@triton.jit
def _block_rows_kernel(
    scratch_f_ptr, scratch_i_ptr, counters_ptr,
    out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr,
    target_ptr, target_stride_b, target_stride_k,
    draft_ptr, draft_stride_b, draft_stride_k,
    draft_ids_ptr, draft_ids_stride,
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,
    V, NUM_SLOTS, ROW_SPLITS, RACE_SPLITS, CHUNK,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    STATS: tl.constexpr,
    BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
    S_BLOCK: tl.constexpr,
):
    # Launch 1. With STATS (a weight needs a row's softmax statistics: target or draft logits; grid B x (K + 1) x S):
    # slot r's slice of the rows (a greedy request: target row r's argmax; the others: draft row r < n's softmax
    # statistics, fused with target row r's for target logits); the last program finishes a greedy request, or runs
    # the forward pass from the merged statistics and the values at the drafts, and records the weights, the
    # statistics and the test of length n. Without (grid B): one program per request runs the forward pass from the
    # values at the drafts alone, and leaves a greedy request to the masses kernel.
    b = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1)
    split = tl.program_id(2)
    batch = tl.num_programs(0)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE_PROBABILISTIC)
    rows_f, rows_i, _masses, _race_f, _race_i, record_f, record_i = _split_bases(
        scratch_f_ptr, scratch_i_ptr, b, batch, NUM_SLOTS, ROW_SPLITS, RACE_SPLITS, OUT_BLOCK)
    t_base = target_ptr + b * target_stride_b
    d_base = draft_ptr + b * draft_stride_b
    finishing = b >= 0  # every program without STATS: it is its request's only one
    if STATS:
        start = split * CHUNK
        stop = tl.where(split == ROW_SPLITS - 1, V, start + CHUNK)  # every slice ends on a block edge but the last
        t_row = t_base + r * target_stride_k
        d_row = d_base + tl.minimum(r, NUM_SLOTS - 2).to(tl.int64) * draft_stride_k  # read for r < n only
        cell = r * ROW_SPLITS + split
        if greedy:
            if r <= n:
                best_val, best_idx = argmax_slice(t_row, start, stop, TARGET_PROBS, BLOCK)
                store_row_partial(rows_f + cell * _ROW_FIELDS, rows_i + cell, best_val, 0.0, float("-inf"), 0.0,
                                  best_idx)
        elif r < n:
            if TARGET_PROBS:
                md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, start, stop, inv_temperature, False, BLOCK)
                store_row_partial(rows_f + cell * _ROW_FIELDS, rows_i + cell, 0.0, 0.0, md, sd, -1)
            else:
                m, s, md, sd = softmax_stats_slice(t_row, d_row, start, stop, inv_temperature, DRAFT == DRAFT_LOGITS,
                                                   BLOCK)
                store_row_partial(rows_f + cell * _ROW_FIELDS, rows_i + cell, m, s, md, sd, -1)
        finishing = last_to_arrive(counters_ptr, b, NUM_SLOTS * ROW_SPLITS)
    if finishing:
        valid = request_valid(inv_temperature)
        kind = _DONE
        slots = tl.arange(0, OUT_BLOCK)
        if greedy:
            if STATS:
                finish_greedy(b, n, inv_temperature, position, key_of_seed, rows_f, rows_i, ROW_SPLITS,
                              target_ptr, target_stride_b, target_stride_k, draft_ids_ptr, draft_ids_stride, V,
                              out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, NUM_SLOTS,
                              TARGET_PROBS, OUT_BLOCK, S_BLOCK)
            else:
                kind = _GREEDY
        else:
            ms = tl.zeros([OUT_BLOCK], tl.float32)  # probabilities as given: (m, s) = (0, 1)
            ss = tl.full([OUT_BLOCK], 1.0, tl.float32)
            mds = tl.zeros([OUT_BLOCK], tl.float32)  # q from draft probabilities (md = 0) or one-hot (md = -inf)
            sds = tl.full([OUT_BLOCK], 1.0, tl.float32)
            if STATS:
                _best, ms_rows, ss_rows, mds_rows, sds_rows = merge_rows(rows_f, rows_i, n, ROW_SPLITS, _ROW_FIELDS,
                                                                         OUT_BLOCK, S_BLOCK)
                if not TARGET_PROBS:
                    ms = ms_rows
                    ss = ss_rows
                if DRAFT == DRAFT_LOGITS:
                    mds = mds_rows
                    sds = sds_rows
            if DRAFT == DRAFT_NONE:
                mds = tl.full([OUT_BLOCK], float("-inf"), tl.float32)
            weights = tl.full([OUT_BLOCK], 1.0, tl.float32)  # w_i (w_0 = 1)
            weight = 1.0
            last = n < 0
            for i in range(n):
                x = tl.load(draft_ids_ptr + b * draft_ids_stride + i)
                x_valid = (x >= 0) & (x < V)
                t_at_x, d_at_x = read_at_draft(t_base + i * target_stride_k, d_base + i * draft_stride_k, x, x_valid,
                                               DRAFT)
                last, weight = _forward_step(t_at_x, d_at_x, x_valid, weight, inv_temperature, row_at(ms, slots, i),
                                             row_at(ss, slots, i), row_at(mds, slots, i), row_at(sds, slots, i),
                                             key_of_seed, position + i, DRAFT, TARGET_PROBS)
                weights = tl.where(slots == i + 1, weight, weights)
            tl.store(record_f + slots, weights)
            tl.store(record_f + OUT_BLOCK + slots, ms)
            tl.store(record_f + 2 * OUT_BLOCK + slots, ss)
            tl.store(record_f + 3 * OUT_BLOCK + slots, mds)
            tl.store(record_f + 4 * OUT_BLOCK + slots, sds)
            tl.store(record_i + 0, last.to(tl.int32))
            kind = tl.where(valid, _DECIDE, _DONE)
        if ~valid:
            write_request(out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, b, tl.full([OUT_BLOCK], -1, tl.int64),
                          0, 0, NUM_SLOTS, OUT_BLOCK)
        tl.store(record_i + 1, kind)


@triton.jit
def _arrive_at_row(row_arrivals_ptr, written, ROW_SPLITS):
    # Count this program in at a row, with whether it wrote its partial there; for the row's last program, whether
    # every program wrote one (the barriers and acq_rel as split.last_to_arrive's; the last leaves the count at 0)
    tl.debug_barrier()
    before = tl.atomic_add(row_arrivals_ptr, 1 + written * _WRITTEN, sem="acq_rel")
    tl.debug_barrier()
    last = (before % _WRITTEN) == ROW_SPLITS - 1
    if last:
        tl.store(row_arrivals_ptr, 0)
    return last & (before // _WRITTEN + written == ROW_SPLITS)


@triton.jit
def _block_masses_kernel(
    scratch_f_ptr, scratch_i_ptr, counters_ptr,
    out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr,
    target_ptr, target_stride_b, target_stride_k,
    draft_ptr, draft_stride_b, draft_stride_k,
    draft_ids_ptr, draft_ids_stride,
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,
    V, NUM_SLOTS, ROW_SPLITS, RACE_SPLITS, CHUNK,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    SKIP: tl.constexpr,
    BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
    S_BLOCK: tl.constexpr,
):
    # Launch 2 (grid B x (K + 1) x S; with SKIP the same programs in one dimension, row by row from the last: slot
    # r = K first, for every request).
    # Unless the test of length n passed, slot i in 1..n-1's slice of the residual mass r_i = sum max(w_i p_i - q_i,
    # 0), unless u_{i-1} >= w_i fails test i unread. The request's last program finds A, the largest length whose
    # test passes (the paper's backward pass), writes the accepted drafts and leaves the terminal row's race.
    # With SKIP (large batches, where a row's programs start after the rows above have been read), a row is not
    # read once a later row's test has passed either (the backward pass stops there): a row's last program sums its
    # partials (in slice order, when every program wrote one) and runs its stop test, and a pass raises the request's
    # passed row. Rows above the largest passed row were read by every program (none could have seen a pass above
    # them), so their tests ran and failed: the largest passed row is A (0 if none). Without STATS, a greedy
    # request's rows' argmax partials are taken here (slot r's slice of row r <= n) and its last program finishes it
    # (the rows kernel then reads no row).
    if SKIP:  # one grid dimension, row by row from the last
        pid = tl.program_id(0)
        batch = tl.num_programs(0) // (NUM_SLOTS * ROW_SPLITS)
        r = NUM_SLOTS - 1 - pid // (batch * ROW_SPLITS)
        b = ((pid % (batch * ROW_SPLITS)) // ROW_SPLITS).to(tl.int64)
        split = pid % ROW_SPLITS
    else:  # the rows kernel's grid
        b = tl.program_id(0).to(tl.int64)
        r = tl.program_id(1)
        split = tl.program_id(2)
        batch = tl.num_programs(0)
    rows_f, rows_i, masses, _race_f, _race_i, record_f, record_i = _split_bases(
        scratch_f_ptr, scratch_i_ptr, b, batch, NUM_SLOTS, ROW_SPLITS, RACE_SPLITS, OUT_BLOCK)
    passed_ptr = counters_ptr + batch + b
    splits = tl.arange(0, S_BLOCK)
    kind = tl.load(record_i + 1)
    if kind != _DONE:
        n, _greedy, inv_temperature, position, key_of_seed = request_setup(
            b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE_PROBABILISTIC)
        t_base = target_ptr + b * target_stride_b
        d_base = draft_ptr + b * draft_stride_b
        start = split * CHUNK
        stop = tl.where(split == ROW_SPLITS - 1, V, start + CHUNK)
        if (kind == _GREEDY) & (r <= n):
            best_val, best_idx = argmax_slice(t_base + r * target_stride_k, start, stop, TARGET_PROBS, BLOCK)
            cell = r * ROW_SPLITS + split
            store_row_partial(rows_f + cell * _ROW_FIELDS, rows_i + cell, best_val, 0.0, float("-inf"), 0.0, best_idx)
        if kind == _DECIDE:
            last = tl.load(record_i + 0) != 0
            w_r = tl.load(record_f + r)  # r <= K < OUT_BLOCK: inside the record's weights
            u_r = uniform_at(stream_key(key_of_seed, position + r - 1, ACCEPT), 0)
            if ~last & (r >= 1) & (r < n) & _test_possible(u_r, w_r):
                written = n * 0
                reading = r >= 1
                if SKIP:  # no later row has passed yet: the passed row read by one thread and shared (threads reading
                    # it at other moments could see other values, and a branch on it would split the warps apart)
                    reading = tl.atomic_add(passed_ptr, 0, sem="relaxed") <= r
                if reading:
                    x = tl.load(draft_ids_ptr + b * draft_ids_stride + r)
                    x_valid = (x >= 0) & (x < V)
                    partial = _residual_mass(t_base + r * target_stride_k, d_base + r * draft_stride_k, start, stop,
                                             inv_temperature, w_r, tl.load(record_f + OUT_BLOCK + r),
                                             tl.load(record_f + 2 * OUT_BLOCK + r),
                                             tl.load(record_f + 3 * OUT_BLOCK + r),
                                             tl.load(record_f + 4 * OUT_BLOCK + r), x, x_valid, DRAFT, TARGET_PROBS,
                                             BLOCK)
                    tl.store(masses + r * ROW_SPLITS + split, partial)
                    written = n * 0 + 1
                # SKIP: a row every program read: its last program runs the stop test
                if SKIP:  # noqa: SIM102 (a constexpr: the branch is compiled in or out)
                    if _arrive_at_row(counters_ptr + 2 * batch + b * NUM_SLOTS + r, written, ROW_SPLITS):
                        r_i = tl.sum(tl.load(masses + r * ROW_SPLITS + splits, mask=splits < ROW_SPLITS, other=0.0),
                                     axis=0)
                        if u_r < _stop_probability(r_i, w_r):
                            tl.atomic_max(passed_ptr, r + 1, sem="relaxed")
        if last_to_arrive(counters_ptr, b, NUM_SLOTS * ROW_SPLITS):
            if kind == _GREEDY:
                finish_greedy(b, n, inv_temperature, position, key_of_seed, rows_f, rows_i, ROW_SPLITS,
                              target_ptr, target_stride_b, target_stride_k, draft_ids_ptr, draft_ids_stride, V,
                              out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, NUM_SLOTS,
                              TARGET_PROBS, OUT_BLOCK, S_BLOCK)
                tl.store(record_i + 1, _DONE)
            else:
                last = tl.load(record_i + 0) != 0
                if SKIP:
                    passed = tl.atomic_xchg(passed_ptr, 0, sem="relaxed")  # read, and left at zero for the next launch
                    terminal = tl.where(last, n, tl.maximum(passed - 1, 0))
                else:
                    # the backward pass: the tests from n - 1 down, each on its row's summed partials (written where
                    # u_{i-1} < w_i, the others fail unread), stopping at the first that passes
                    terminal = tl.where(last, n, 0)
                    i = n - 1
                    while (i > 0) & (terminal == 0):
                        w_i = tl.load(record_f + i)
                        u = uniform_at(stream_key(key_of_seed, position + i - 1, ACCEPT), 0)
                        r_i = 0.0
                        if _test_possible(u, w_i):
                            r_i = tl.sum(tl.load(masses + i * ROW_SPLITS + splits, mask=splits < ROW_SPLITS,
                                                 other=0.0), axis=0)
                        if u < _stop_probability(r_i, w_i):
                            terminal = i
                        i -= 1
                slots = tl.arange(0, OUT_BLOCK)
                drafts = tl.load(draft_ids_ptr + b * draft_ids_stride + slots, mask=slots < n, other=-1)
                write_request(out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, b,
                              tl.where(slots < terminal, drafts, -1), terminal, terminal, NUM_SLOTS, OUT_BLOCK)
                tl.store(record_i + 1, tl.where(terminal == n, _BONUS, _RESIDUAL))
                tl.store(record_i + 2, terminal)


@triton.jit
def _block_race_kernel(
    scratch_f_ptr, scratch_i_ptr, counters_ptr,
    out_ptr, out_stride, num_emitted_ptr,
    target_ptr, target_stride_b, target_stride_k,
    draft_ptr, draft_stride_b, draft_stride_k,
    draft_ids_ptr, draft_ids_stride,
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,
    V, NUM_SLOTS, ROW_SPLITS, RACE_SPLITS, CHUNK,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    SCREEN: tl.constexpr,
    BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
    S_BLOCK: tl.constexpr,
):
    # Launch 3 (grid B x S2): the terminal row's race on one slice per program (the bonus over p, or the block
    # residual max(w p - q, 0); screened with SCREEN); the last program merges the slices (over p with the same
    # stream when the residual has no mass anywhere) and writes the token
    b = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    batch = tl.num_programs(0)
    _rows_f, _rows_i, _masses, race_f, race_i, record_f, record_i = _split_bases(
        scratch_f_ptr, scratch_i_ptr, b, batch, NUM_SLOTS, ROW_SPLITS, RACE_SPLITS, OUT_BLOCK)
    kind = tl.load(record_i + 1)
    if kind != _DONE:
        terminal = tl.load(record_i + 2)
        _n, _greedy, inv_temperature, position, key_of_seed = request_setup(
            b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE_PROBABILISTIC)
        t_row = target_ptr + b * target_stride_b + terminal * target_stride_k
        start = split * CHUNK
        stop = tl.where(split == RACE_SPLITS - 1, V, start + CHUNK)
        if kind == _BONUS:
            key = stream_key(key_of_seed, position + terminal, SAMPLE)
            z, g, idx = sample_row(t_row, start, stop, inv_temperature, key, TARGET_PROBS, SCREEN, BLOCK)
        else:
            key = stream_key(key_of_seed, position + terminal, RESIDUAL)
            x = tl.load(draft_ids_ptr + b * draft_ids_stride + terminal)
            x_valid = (x >= 0) & (x < V)
            z, g, idx = _residual_race(t_row, draft_ptr + b * draft_stride_b + terminal * draft_stride_k, start, stop,
                                       inv_temperature, tl.load(record_f + terminal),
                                       tl.load(record_f + OUT_BLOCK + terminal),
                                       tl.load(record_f + 2 * OUT_BLOCK + terminal),
                                       tl.load(record_f + 3 * OUT_BLOCK + terminal),
                                       tl.load(record_f + 4 * OUT_BLOCK + terminal), x, x_valid, key, DRAFT,
                                       TARGET_PROBS, SCREEN, BLOCK)
        store_race(race_f, race_i, split, z, g, idx, -1)
        if last_to_arrive(counters_ptr, b, RACE_SPLITS):
            token = merge_race(race_f, race_i, RACE_SPLITS, S_BLOCK)
            if (token < 0) & (kind == _RESIDUAL):  # nothing left: the race over p with the same E_y
                _z, _g, index = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, False, BLOCK)
                token = index.to(tl.int64)
            tl.store(out_ptr + b * out_stride + terminal, token)
            tl.store(num_emitted_ptr + b, terminal + (token >= 0).to(tl.int32))
