"""The vocabulary split: every row a request needs is read by several programs at once.

For batches too small to fill the GPU with one program per request, and for every request whose
decision needs no row statistics. Two kernels, both ending in the request's last program to
finish (an atomic arrival count per request, on counters that start and end at zero, so no launch
is spent clearing them):

1. ``_split_rows_kernel`` (grid ``B x (K+1) x S``): the rows whose statistics a decision needs,
   one slice per program: the argmax of every row of a greedy request, the target softmax
   statistics ``(m, s)`` of each draft slot's row (target logits) and the draft's ``(md, sd)``
   (draft logits). The request's last program merges the slices of every row at once, decides the
   request (its first rejection ``t``) and writes the accepted drafts. A greedy request ends there;
   the others leave a decision record (the row, what to race, its statistics) for the second kernel
   (a greedy request's record says there is nothing to race: every record the second kernel reads
   was written).
2. ``_split_terminal_kernel`` (grid ``B x S``): the race of the terminal row ``t`` on one slice per
   program (the residual after a rejection, the target's own sample at the bonus row), merged by
   the last program, which writes the token. When no statistics are needed (the synthetic mode;
   target probabilities with one-hot drafts or draft probabilities) every program decides the
   request itself from values gathered at the drafts (``DECIDE_INLINE``) and the first kernel is
   not launched: one launch in all.

Rows after the terminal row are never read, nor rows past the bonus row; every scratch slot that
is read was written earlier in the same step. Scratch layout (float32 and int32 buffers, ``R =
K + 1``, ``S`` the rows kernel's slices, ``S2`` the terminal kernel's): per-(request, row, slice)
partials ``[B, R, S, 4]`` / ``[B, R, S]``, then the race partials ``[B, S2, 2]`` / ``[B, S2, 2]``,
then the decision records ``[B, 4]`` / ``[B, 4]``.
"""

import triton
import triton.language as tl

from specbench.kernels.decide import (
    DRAFT_LOGITS,
    DRAFT_PROBS,
    MODE_PROBABILISTIC,
    MODE_SYNTHETIC,
    RESIDUAL,
    SAMPLE,
    decide_by_gathers,
    decide_from_rows,
    merge_rows,
    request_setup,
    request_valid,
    row_at,
    sample_row,
)
from specbench.kernels.rng import stream_key
from specbench.kernels.rows import (
    RACE_RESIDUAL_LOGITS,
    RACE_RESIDUAL_PROBS,
    argmax_slice,
    best_pair,
    clean_prob,
    race_logits_slice,
    race_weights_slice,
    softmax_stats_slice,
)

ROW_FIELDS = tl.constexpr(4)  # per (row, slice): argmax value or m, s, md, sd (+ one int: argmax index)
RACE_FIELDS = tl.constexpr(2)  # per slice: race (z, g) (+ two ints: its index, the fallback token)
# what the terminal kernel races (the decision record's kind)
DONE = tl.constexpr(-1)  # nothing: the request was finished by the rows kernel
RACE_P = tl.constexpr(0)  # p without token `exclude` (-1: none); then the residual races of rows.py
ARGMAX = tl.constexpr(3)  # the argmax (a greedy row's own token in the synthetic mode)


@triton.jit
def last_to_arrive(arrivals_ptr, b, expected):
    # Count this program in (or one slice of its work); True for the last of `expected` arrivals at b. The barriers
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
def take_ticket(counter_ptr, programs):
    # This program's place in the order the launch's programs started. A program that waits only for work of
    # programs with lower tickets waits for programs already running, so the launch finishes however the GPU
    # schedules it (and in program order under the interpreter). The last of `programs` to draw one leaves the
    # counter at zero for the next launch.
    ticket = tl.atomic_add(counter_ptr, 1, sem="relaxed")
    if ticket == programs - 1:
        tl.atomic_xchg(counter_ptr, 0, sem="relaxed")
    return ticket


@triton.jit
def publish(state_ptr, state):
    # Set a request's state once every thread's stores are done (they precede the release).
    tl.debug_barrier()
    tl.atomic_xchg(state_ptr, state, sem="release")


@triton.jit
def _nap(value):
    # 0, after the warp sleeps about 100 ns (PTX nanosleep), so that waiting programs leave the multiprocessor's
    # issue slots and the memory system to the programs they wait for (never reached under the interpreter,
    # where a program waits only for programs that have finished)
    return tl.inline_asm_elementwise("nanosleep.u32 100;\n mov.u32 $0, 0;", "=r,r", [value], dtype=tl.int32,
                                     is_pure=False, pack=1)


@triton.jit
def wait_until(state_ptr, at_least):
    # Spin until a request's state reaches `at_least` (volatile loads, which skip the L1 cache), then read it
    # with an acquire and return what that read, so this program's later loads see what was stored before it was
    # published. The caller must use the value: Triton turns an atomic add of 0 into a load of the same ordering
    # and drops it where nothing reads it, and with it the invalidation of the L1 cache that an acquire compiles to
    # (tests/compile_kernels.py counts the acquire loads of the kernels that wait).
    seen = tl.load(state_ptr, volatile=True)
    while seen < at_least:
        seen = tl.load(state_ptr + _nap(seen), volatile=True)
    state = tl.atomic_add(state_ptr, 0, sem="acquire")
    tl.debug_barrier()
    return state


@triton.jit
def store_row_partial(f_out, i_out, v0, v1, v2, v3, idx):
    tl.store(f_out + 0, v0)
    tl.store(f_out + 1, v1)
    tl.store(f_out + 2, v2)
    tl.store(f_out + 3, v3)
    tl.store(i_out, idx)


@triton.jit
def write_request(out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, b, tokens, num_emitted, num_accepted,
                   NUM_SLOTS, OUT_BLOCK: tl.constexpr):
    slots = tl.arange(0, OUT_BLOCK)
    tl.store(out_ptr + b * out_stride + slots, tokens, mask=slots < NUM_SLOTS)
    tl.store(num_emitted_ptr + b, num_emitted)
    tl.store(num_accepted_ptr + b, num_accepted)


@triton.jit
def finish_greedy(b, n, inv_temperature, position, key_of_seed, rows_f, rows_i, NUM_SPLITS,
                   target_ptr, target_stride_b, target_stride_k, draft_ids_ptr, draft_ids_stride, V,
                   out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, NUM_SLOTS,
                   TARGET_PROBS: tl.constexpr, OUT_BLOCK: tl.constexpr, S_BLOCK: tl.constexpr):
    # a greedy request from its rows' argmax partials: accept while the draft is the argmax, then
    # emit the argmax of the terminal row (nothing for a row with no finite value)
    best_idx, m, s, md, sd = merge_rows(rows_f, rows_i, n + 1, NUM_SPLITS, ROW_FIELDS, OUT_BLOCK, S_BLOCK)
    t, x, _x_t, _x_t_valid, best_at_t, _valid = decide_from_rows(
        b, n, True, inv_temperature, position, key_of_seed, best_idx, m, s, md, sd,
        target_ptr + b * target_stride_b, target_stride_k, target_ptr, 0, draft_ids_ptr, draft_ids_stride, V,
        0, TARGET_PROBS, OUT_BLOCK)
    slots = tl.arange(0, OUT_BLOCK)
    tokens = tl.where(slots < t, x, -1)
    tokens = tl.where(slots == t, best_at_t.to(tl.int64), tokens)
    write_request(out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, b, tokens,
                   t + (best_at_t >= 0).to(tl.int32), t, NUM_SLOTS, OUT_BLOCK)


@triton.jit
def _split_rows_kernel(
    scratch_f_ptr, scratch_i_ptr,  # float32 and int32 scratch (layout: module docstring)
    arrivals_ptr,  # [B] int32, zero on entry; left at zero on exit
    out_ptr, out_stride,  # [B, K + 1] int64
    num_emitted_ptr, num_accepted_ptr,  # [B] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits or probs (unused if DRAFT == 0)
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B] int32, float32, int64, int64
    V, NUM_SLOTS, NUM_SPLITS, RACE_SPLITS, CHUNK,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    BLOCK: tl.constexpr,
    S_BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1)
    split = tl.program_id(2)
    batch = tl.num_programs(0)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    start = split * CHUNK
    stop = tl.where(split == NUM_SPLITS - 1, V, start + CHUNK)  # every slice ends on a block edge but the last
    t_row = target_ptr + b * target_stride_b + r * target_stride_k
    d_row = draft_ptr + b * draft_stride_b + r * draft_stride_k
    request_f = scratch_f_ptr + b * NUM_SLOTS * NUM_SPLITS * ROW_FIELDS
    request_i = scratch_i_ptr + b * NUM_SLOTS * NUM_SPLITS
    f_out = request_f + (r * NUM_SPLITS + split) * ROW_FIELDS
    i_out = request_i + r * NUM_SPLITS + split
    if greedy:
        if r <= n:
            best_val, best_idx = argmax_slice(t_row, start, stop, TARGET_PROBS, BLOCK)
            store_row_partial(f_out, i_out, best_val, 0.0, float("-inf"), 0.0, best_idx)
    elif r < n:
        if TARGET_PROBS:
            # p(x) is read at the draft; only the draft logits need statistics
            md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, start, stop, inv_temperature, False, BLOCK)
            store_row_partial(f_out, i_out, 0.0, 0.0, md, sd, -1)
        else:
            m, s, md, sd = softmax_stats_slice(t_row, d_row, start, stop, inv_temperature, DRAFT == DRAFT_LOGITS,
                                               BLOCK)
            store_row_partial(f_out, i_out, m, s, md, sd, -1)
    if last_to_arrive(arrivals_ptr, b, NUM_SLOTS * NUM_SPLITS):
        race_end_f = batch * NUM_SLOTS * NUM_SPLITS * ROW_FIELDS + batch * RACE_SPLITS * RACE_FIELDS
        race_end_i = batch * NUM_SLOTS * NUM_SPLITS + batch * RACE_SPLITS * 2
        record_i = scratch_i_ptr + race_end_i + b * 4
        if greedy:
            finish_greedy(b, n, inv_temperature, position, key_of_seed, request_f, request_i, NUM_SPLITS,
                           target_ptr, target_stride_b, target_stride_k, draft_ids_ptr, draft_ids_stride, V,
                           out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, NUM_SLOTS,
                           TARGET_PROBS, OUT_BLOCK, S_BLOCK)
            # the terminal kernel reads every request's record: this one says there is nothing to race
            _store_record_i(record_i, n * 0, n * 0 + DONE, n * 0 - 1, n * 0 + SAMPLE)
        else:
            _decide_probabilistic(b, n, inv_temperature, position, key_of_seed, request_f, request_i, NUM_SPLITS,
                                  scratch_f_ptr + race_end_f + b * 4, record_i,
                                  target_ptr, target_stride_b, target_stride_k, draft_ptr, draft_stride_b,
                                  draft_stride_k, draft_ids_ptr, draft_ids_stride, V,
                                  out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, NUM_SLOTS,
                                  DRAFT, TARGET_PROBS, OUT_BLOCK, S_BLOCK)


@triton.jit
def _decide_probabilistic(b, n, inv_temperature, position, key_of_seed, request_f, request_i, NUM_SPLITS,
                          record_f, record_i,
                          target_ptr, target_stride_b, target_stride_k, draft_ptr, draft_stride_b, draft_stride_k,
                          draft_ids_ptr, draft_ids_stride, V,
                          out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, NUM_SLOTS,
                          DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr, OUT_BLOCK: tl.constexpr,
                          S_BLOCK: tl.constexpr):
    # A probabilistic request from its draft rows' statistics: write the accepted drafts, and the
    # decision record the terminal kernel races from: (t, kind, excluded token, stream purpose)
    # and the terminal row's (m, s, md, sd).
    best_idx, m, s, md, sd = merge_rows(request_f, request_i, n, NUM_SPLITS, ROW_FIELDS, OUT_BLOCK, S_BLOCK)
    t, x, x_t, x_t_valid, _best_at_t, row_valid = decide_from_rows(
        b, n, False, inv_temperature, position, key_of_seed, best_idx, m, s, md, sd,
        target_ptr + b * target_stride_b, target_stride_k, draft_ptr + b * draft_stride_b, draft_stride_k,
        draft_ids_ptr, draft_ids_stride, V, DRAFT, TARGET_PROBS, OUT_BLOCK)
    slots = tl.arange(0, OUT_BLOCK)
    md_t = row_at(md, slots, t)
    kind = t * 0 + RACE_P
    exclude = x_t * 0 - 1
    purpose = t * 0 + SAMPLE
    if t < n:
        purpose = RESIDUAL
        exclude = tl.where(x_t_valid, x_t, -1)  # w = p without x (one-hot), or p for an id outside [0, V)
        if DRAFT == DRAFT_LOGITS:
            kind = tl.where(x_t_valid & (md_t != float("-inf")), RACE_RESIDUAL_LOGITS, RACE_P)
        if DRAFT == DRAFT_PROBS:
            kind = tl.where(x_t_valid, RACE_RESIDUAL_PROBS, RACE_P)
        if not TARGET_PROBS:
            kind = tl.where(row_valid, kind, DONE)  # no finite target logit: the request stops, emitting nothing
    # an invalid request emits nothing: no draft, no race
    valid = request_valid(inv_temperature)
    kind = tl.where(valid, kind, DONE)
    t = tl.where(valid, t, 0)
    _store_record_i(record_i, t, kind, exclude, purpose)
    tl.store(record_f + 0, row_at(m, slots, t))
    tl.store(record_f + 1, row_at(s, slots, t))
    tl.store(record_f + 2, md_t)
    tl.store(record_f + 3, row_at(sd, slots, t))
    write_request(out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, b, tl.where(slots < t, x, -1), t, t,
                   NUM_SLOTS, OUT_BLOCK)


@triton.jit
def _store_record_i(record_i, t, kind, exclude, purpose):
    # the decision record's int fields: (t, kind, excluded token, stream purpose)
    tl.store(record_i + 0, t)
    tl.store(record_i + 1, kind)
    tl.store(record_i + 2, exclude.to(tl.int32))
    tl.store(record_i + 3, purpose)


@triton.jit
def _race_slice(t_row, d_row, start, stop, inv_temperature, key, kind, exclude, m, s, md, sd,
                DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr, SCREEN: tl.constexpr, BLOCK: tl.constexpr):
    # One slice of the terminal race of `kind`, as (z, g, index), and the token that takes over
    # when the race finds no mass: for the race over p without token `exclude`, that token itself,
    # where it has mass (for target logits the row is valid, so it has; it is in one slice only).
    # A residual with no mass is raced again over p by the request's last program (_finish_race).
    z = float("-inf")
    g = 0.0
    idx = -1
    fidx = -1
    if kind == ARGMAX:
        z, idx = argmax_slice(t_row, start, stop, TARGET_PROBS, BLOCK)
    elif kind == RACE_P:
        if TARGET_PROBS:
            z, g, idx = race_weights_slice(t_row, d_row, start, stop, 1.0, key, exclude, m, s, md, sd, True, 0, SCREEN,
                                           BLOCK)
            in_slice = (exclude >= start) & (exclude < stop)
            p_excluded = clean_prob(tl.load(t_row + tl.where(in_slice, exclude, start)).to(tl.float32))
            fidx = tl.where(in_slice & (p_excluded > 0.0), exclude, -1)
        else:
            z, g, idx = race_logits_slice(t_row, start, stop, inv_temperature, key, exclude, SCREEN, BLOCK)
            fidx = tl.where((exclude >= start) & (exclude < stop), exclude, -1)
    else:
        if DRAFT == DRAFT_LOGITS:
            z, g, idx = race_weights_slice(t_row, d_row, start, stop, inv_temperature, key, -1, m, s, md, sd,
                                           TARGET_PROBS, RACE_RESIDUAL_LOGITS, SCREEN, BLOCK)
        if DRAFT == DRAFT_PROBS:
            z, g, idx = race_weights_slice(t_row, d_row, start, stop, inv_temperature, key, -1, m, s, md, sd,
                                           TARGET_PROBS, RACE_RESIDUAL_PROBS, SCREEN, BLOCK)
    return z, g, idx, fidx


@triton.jit
def merge_race(race_f, race_i, NUM_SPLITS, S_BLOCK: tl.constexpr):
    # the token of the slices' race partials: the race's winner, else the fallback token (-1: none)
    splits = tl.arange(0, S_BLOCK)
    mask = splits < NUM_SPLITS
    _z, _g, idx = best_pair(tl.load(race_f + splits * RACE_FIELDS, mask=mask, other=float("-inf")),
                            tl.load(race_f + splits * RACE_FIELDS + 1, mask=mask, other=0.0),
                            tl.load(race_i + splits * 2, mask=mask, other=-1))
    if idx < 0:
        idx = tl.max(tl.load(race_i + splits * 2 + 1, mask=mask, other=-1), axis=0)
    return idx.to(tl.int64)


@triton.jit
def _finish_race(race_f, race_i, NUM_SPLITS, kind, t_row, V, inv_temperature, key, TARGET_PROBS: tl.constexpr,
                 SCREEN: tl.constexpr, BLOCK: tl.constexpr, S_BLOCK: tl.constexpr):
    # the terminal token from the slices' partials; a residual with no mass anywhere (rare: p <= q
    # everywhere) takes the race over p with the same E_y, over the whole row in this one program
    token = merge_race(race_f, race_i, NUM_SPLITS, S_BLOCK)
    if (token < 0) & (kind >= RACE_RESIDUAL_LOGITS) & (kind <= RACE_RESIDUAL_PROBS):
        _z, _g, idx = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, SCREEN, BLOCK)
        token = idx.to(tl.int64)
    return token


@triton.jit
def _split_terminal_kernel(
    scratch_f_ptr, scratch_i_ptr,  # float32 and int32 scratch (layout: module docstring)
    arrivals_ptr,  # [B] int32, zero on entry; left at zero on exit
    out_ptr, out_stride,  # [B, K + 1] int64
    num_emitted_ptr, num_accepted_ptr,  # [B] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits or probs (unused if DRAFT == 0)
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B] int32, float32, int64, int64
    conditional_rates_ptr,  # [K] float32
    V, NUM_SLOTS, ROW_SPLITS, NUM_SPLITS, CHUNK,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    DECIDE_INLINE: tl.constexpr,
    SCREEN: tl.constexpr,
    BLOCK: tl.constexpr,
    S_BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    batch = tl.num_programs(0)
    start = split * CHUNK
    stop = tl.where(split == NUM_SPLITS - 1, V, start + CHUNK)  # every slice ends on a block edge but the last
    race_start_f = batch * NUM_SLOTS * ROW_SPLITS * ROW_FIELDS
    race_start_i = batch * NUM_SLOTS * ROW_SPLITS
    race_f = scratch_f_ptr + race_start_f + b * NUM_SPLITS * RACE_FIELDS
    race_i = scratch_i_ptr + race_start_i + b * NUM_SPLITS * 2
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    t_base = target_ptr + b * target_stride_b
    d_base = draft_ptr + b * draft_stride_b
    slots = tl.arange(0, OUT_BLOCK)
    if DECIDE_INLINE:
        # An invalid request emits nothing: its last program says so from 1/T, or, where the races are
        # screened, from its temperature read again there. Measured on an H200 (results/h200-issues-19-26):
        # 1/T kept live across the race costs 3% at B=256 K=7 with target and draft probabilities, the
        # second read 0.2-0.3 us at B <= 8, where a step is latency.
        valid = request_valid(inv_temperature)
        if greedy & (MODE == MODE_PROBABILISTIC):
            # a greedy request in a probabilistic batch: every row's argmax on this slice (no early exit)
            request_f = scratch_f_ptr + b * NUM_SLOTS * ROW_SPLITS * ROW_FIELDS
            request_i = scratch_i_ptr + b * NUM_SLOTS * ROW_SPLITS
            for r in range(n + 1):
                best_val, best_idx = argmax_slice(t_base + r * target_stride_k, start, stop, TARGET_PROBS, BLOCK)
                store_row_partial(request_f + (r * ROW_SPLITS + split) * ROW_FIELDS, request_i + r * ROW_SPLITS + split,
                                   best_val, 0.0, float("-inf"), 0.0, best_idx)
            if last_to_arrive(arrivals_ptr, b, NUM_SPLITS):
                finish_greedy(b, n, inv_temperature, position, key_of_seed, request_f, request_i, ROW_SPLITS,
                               target_ptr, target_stride_b, target_stride_k, draft_ids_ptr, draft_ids_stride, V,
                               out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, NUM_SLOTS,
                               TARGET_PROBS, OUT_BLOCK, S_BLOCK)
        else:
            t, x, x_t, x_t_valid = decide_by_gathers(b, n, greedy, inv_temperature, position, key_of_seed,
                                                t_base, target_stride_k, d_base, draft_stride_k,
                                                draft_ids_ptr, draft_ids_stride, conditional_rates_ptr, V,
                                                MODE, DRAFT, TARGET_PROBS, OUT_BLOCK)
            kind = t * 0 + RACE_P
            exclude = t * 0 - 1
            purpose = t * 0 + SAMPLE
            if MODE == MODE_SYNTHETIC:
                kind = tl.where(greedy, ARGMAX, RACE_P)  # on rejection the target's own token
            elif t < n:
                purpose = RESIDUAL
                exclude = tl.where(x_t_valid, x_t, -1).to(tl.int32)
                if DRAFT == DRAFT_PROBS:
                    kind = tl.where(x_t_valid, RACE_RESIDUAL_PROBS, RACE_P)
            key = _terminal_key(key_of_seed, position + t, purpose)
            t_row = t_base + t * target_stride_k
            z, g, idx, fidx = _race_slice(t_row, d_base + t * draft_stride_k, start, stop, inv_temperature, key, kind,
                                          exclude, 0.0, 1.0, 0.0, 1.0, DRAFT, TARGET_PROBS, SCREEN, BLOCK)
            store_race(race_f, race_i, split, z, g, idx, fidx)
            if last_to_arrive(arrivals_ptr, b, NUM_SPLITS):
                token = _finish_race(race_f, race_i, NUM_SPLITS, kind, t_row, V, inv_temperature, key, TARGET_PROBS,
                                     SCREEN, BLOCK, S_BLOCK)
                if SCREEN:
                    valid = tl.load(temperature_ptr + b) >= 0.0  # False for a negative or NaN temperature
                tokens = tl.where(slots < t, x, -1)
                tokens = tl.where(slots == t, token, tokens)
                emitted = tl.where(valid, t + (token >= 0).to(tl.int32), 0)
                write_request(out_ptr, out_stride, num_emitted_ptr, num_accepted_ptr, b,
                               tl.where(valid, tokens, -1), emitted, tl.where(valid, t, 0), NUM_SLOTS, OUT_BLOCK)
    else:
        record_f = scratch_f_ptr + race_start_f + batch * NUM_SPLITS * RACE_FIELDS + b * 4
        record_i = scratch_i_ptr + race_start_i + batch * NUM_SPLITS * 2 + b * 4
        # the record is read whatever the request, in one round trip with the request's own values
        # (the rows kernel leaves one for every request: DONE for a greedy one, which it finished)
        t = tl.load(record_i + 0)
        kind = tl.load(record_i + 1)
        exclude = tl.load(record_i + 2)
        purpose = tl.load(record_i + 3)
        if kind != DONE:
            key = _terminal_key(key_of_seed, position + t, purpose)
            t_row = t_base + t * target_stride_k
            z, g, idx, fidx = _race_slice(t_row, d_base + t * draft_stride_k, start, stop, inv_temperature, key, kind,
                                          exclude, tl.load(record_f + 0), tl.load(record_f + 1), tl.load(record_f + 2),
                                          tl.load(record_f + 3), DRAFT, TARGET_PROBS, SCREEN, BLOCK)
            store_race(race_f, race_i, split, z, g, idx, fidx)
            if last_to_arrive(arrivals_ptr, b, NUM_SPLITS):
                token = _finish_race(race_f, race_i, NUM_SPLITS, kind, t_row, V, inv_temperature, key, TARGET_PROBS,
                                     SCREEN, BLOCK, S_BLOCK)
                tl.store(out_ptr + b * out_stride + t, token)
                tl.store(num_emitted_ptr + b, t + (token >= 0).to(tl.int32))


@triton.jit
def _terminal_key(key_of_seed, position, purpose):
    # the stream of the terminal race: RESIDUAL after a rejection, SAMPLE for the target's own token
    return tl.where(purpose == RESIDUAL, stream_key(key_of_seed, position, RESIDUAL),
                    stream_key(key_of_seed, position, SAMPLE))


@triton.jit
def store_race(race_f, race_i, split, z, g, idx, fidx):
    tl.store(race_f + split * RACE_FIELDS + 0, z)
    tl.store(race_f + split * RACE_FIELDS + 1, g)
    tl.store(race_i + split * 2 + 0, idx)
    tl.store(race_i + split * 2 + 1, fidx)
