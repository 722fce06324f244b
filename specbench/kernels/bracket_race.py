"""The stop row's race decided from the first histogram level's bracket, before the search goes on.

A batch given ``top_p`` without ``top_k`` decides each request's first drafts before its search
(``draft_bounds.py``, or ``histogram.STEP_DECIDE`` after the first level): a request that wrote ``(t, clean)``
with ``clean`` set stops at row ``t``, whose only use is the terminal race there, the residual race after a
surely rejected draft (``t < n``) or the bonus race (``t = n``). The split histogram path's later levels, its
gather and its finish exist only to give that race the row's exact cutoff. This launch, after the first level,
tries to decide the race without it; where it does, the stop row's cells are marked ``RACED`` (the later launches
pass over them as over skipped cells) and the step emits the winner.

After the first level a searching cell's state bounds its cutoff: its window ``[lo, hi)`` holds every part that
may hold the cutoff, so a token in play at distance ``d`` (``histogram._distance``) is surely kept where
``d < lo``, surely cut where ``d >= hi``, and undecided between. The kept mass ``S`` the search would find lies
between ``T`` (the cutoff's running mass reaches it) and ``T + c`` (the mass before the cutoff is below ``T``, and
the cutoff's own mass is at most ``c``, the mass at the window's start), each side widened by ``BRACKET_SLACK M``
for the sums' rounding, as ``draft_bounds.bracket`` widens its own. A cell whose first level kept every token in
play (``CLOSED``) has its exact summary already.

Each token ``y`` of the stop row then has bounds on its race weight ``w``, each side the step's own float32
arithmetic (``truncated.truncated_prob_of``) at one end of the bounds, which rounding cannot reverse (a correctly
rounded quotient or difference never decreases as its dividend or minuend grows, nor as its divisor or
subtrahend shrinks):
- the residual race (draft logits, truncated: ``q'`` from the draft row's cell the same way; draft
  probabilities: ``q`` as given): ``w = p' - q'``, least with ``p'`` at its least (``p / S_hi``, 0 where ``y``
  may be cut) and ``q'`` at its largest, largest the other way round;
- the race over ``p'`` (the bonus row, a one-hot draft with its token left out, an invalid draft id): ``w = p``,
  relative to the row's largest value and not divided by ``S``, which scales every token alike; 0 at least where
  ``y`` may be cut.
Its ratio ``w / E_y`` (``E_y`` the race's exponential, from the stream the race itself draws: ``RESIDUAL`` at the
stop row, ``SAMPLE`` at the bonus row) is bounded likewise. The race is decided where the token of largest least
ratio has a positive one that exceeds every other token's largest ratio by ``RACE_MARGIN`` (relative: the
reciprocal's and the race's own rounding, its products and logarithms, with room). That token is the race's
winner whatever the cutoff within the bracket, so it is the token the exact race emits. A race not decided, or
any request the launch does not take (not decided clean; its stop row's cell fallen back; a draft row with no value
of mass; a draft with no kept mass), goes on to the later levels, the step and the terminal race as before.

Grid ``B x NUM_SLICES``, the histogram path's slices: program ``(b, s)`` takes slice ``s`` of request ``b``'s stop
row (target, and with truncated draft logits the draft row), keeping per lane the token of largest least ratio, its
largest ratio, and the largest ratio of the lane's other tokens; it stores the slice's winner, its largest ratio
and the largest ratio of the slice's other tokens in the target cell's partials (fields the first level leaves
unused), and the row's last program to arrive merges the slices. Each request's third decision field is written
once: the winner, or -1 (by that last program, or by slice 0's program where the request is not taken).
"""

import triton
import triton.language as tl

from specbench.kernels.cutoffs import kept_by, load_row, values_of
from specbench.kernels.decide import DRAFT_LOGITS, DRAFT_NONE, RESIDUAL, SAMPLE, request_setup
from specbench.kernels.dependent_launch import wait_for_launch_before
from specbench.kernels.draft_bounds import BRACKET_SLACK, decides
from specbench.kernels.histogram import (
    CLOSED,
    F_M,
    F_PLAY,
    F_TARGET,
    FALLBACK,
    I_STAGE,
    PART,
    RACED,
    SEARCH,
    SLACK,
    STATE,
    _distance,
    _mass_at,
    _window,
)
from specbench.kernels.rng import hash_word, neg_log_of_uniform, stream_key, uniform_of
from specbench.kernels.rows import clean_prob, lowest_best, reciprocal
from specbench.kernels.split import last_to_arrive
from specbench.kernels.truncation import DECIDED_FIELDS, read_summary, request_knobs

RACE_MARGIN = tl.constexpr(1e-4)  # how far the winner's least ratio must clear every other token's largest (relative)
# the slices' partials, in the target cell's (histogram.PART fields a slice; the first level uses 0-4 and 0)
P_WIN_LO = tl.constexpr(5)  # the slice's largest least ratio
P_WIN_HI = tl.constexpr(6)  # that token's largest ratio
P_REST = tl.constexpr(7)  # the largest ratio of the slice's other tokens
P_WIN_ID = tl.constexpr(1)  # (int) that token's id, -1 for none


@triton.jit
def _cell_bounds(state_f_ptr, state_i_ptr, summary_f_ptr, summary_i_ptr, b, r, side, wanted, NUM_SLOTS,
                 TARGET_PROBS: tl.constexpr):
    # a stop cell's bracket after the first level (nothing read unless `wanted`): (usable, m, S_lo, S_hi, lo, hi, tau,
    # iota, closed); a closed cell (every token in play kept) gives its summary's exact S and cutoff, a searching one
    # its window and bounds on S
    cell = (b * NUM_SLOTS + r) * 2 + side
    state = state_f_ptr + cell * STATE
    istate = state_i_ptr + cell * STATE
    stage = tl.load(istate + I_STAGE, mask=wanted, other=FALLBACK)
    closed = stage == CLOSED
    m = tl.full([], float("-inf"), tl.float32)
    s_lo = tl.full([], 0.0, tl.float32)
    s_hi = tl.full([], 0.0, tl.float32)
    tau = tl.full([], float("inf"), tl.float32)
    iota = tl.full([], -1, tl.int32)
    if TARGET_PROBS:
        lo = tl.zeros([], tl.int32)
        hi = tl.zeros([], tl.int32)
    else:
        lo = tl.zeros([], tl.float32)
        hi = tl.zeros([], tl.float32)
    if closed:
        m, s_lo, tau, iota = read_summary(summary_f_ptr, summary_i_ptr, b, r, side, NUM_SLOTS)
        s_hi = s_lo
    elif stage == SEARCH:
        lo, hi, _width = _window(state, istate, TARGET_PROBS)
        m = tl.load(state + F_M)
        play = tl.load(state + F_PLAY)
        target = tl.load(state + F_TARGET)
        cut = _mass_at(lo, m, TARGET_PROBS) * (1.0 + SLACK)  # the cutoff's own mass, at most
        s_lo = target - BRACKET_SLACK * play
        s_hi = tl.minimum(target + cut, play) + BRACKET_SLACK * play
    usable = (m > float("-inf")) & (s_lo > 0.0)
    return usable, m, s_lo, s_hi, lo, hi, tau, iota, closed


@triton.jit
def _kept_between(raw, offs, inv_temperature, m, s_lo, s_hi, lo, hi, tau, iota, closed, TARGET_PROBS: tl.constexpr):
    # a chunk's truncated probabilities at their least and largest: (p / S_hi where surely kept, p / S_lo where
    # possibly kept, p itself where possibly kept), 0 elsewhere; p as truncated_prob_of computes it
    value, p = values_of(raw, inv_temperature, m, TARGET_PROBS)
    play = value > float("-inf")
    dist = _distance(value, m, TARGET_PROBS)
    sure = play & tl.where(closed, kept_by(value, offs, tau, iota), dist < lo)
    maybe = sure | (play & (~closed) & (dist >= lo) & (dist < hi))
    return (tl.where(sure, p / s_hi, 0.0), tl.where(maybe, p / s_lo, 0.0), tl.where(maybe, p, 0.0),
            tl.where(sure, p, 0.0))


@triton.jit
def _slice_race(t_row, d_row, start, V, inv_temperature, key, exclude, target, draft, RESIDUAL_RACE: tl.constexpr,
                DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr, SLICE: tl.constexpr, BLOCK: tl.constexpr):
    # one slice's bounded race: (the token of largest least ratio, -1 for none; its least and largest ratios; the
    # largest ratio of every other token of the slice)
    m, s_lo, s_hi, lo, hi, tau, iota, closed = target
    md, sd_lo, sd_hi, lod, hid, taud, iotad, closedd = draft
    best_lo = tl.zeros([BLOCK], tl.float32)
    best_hi = tl.zeros([BLOCK], tl.float32)
    best_id = tl.full([BLOCK], -1, tl.int32)
    other = tl.zeros([BLOCK], tl.float32)
    for chunk in range(0, SLICE, BLOCK):
        offs = start + chunk + tl.arange(0, BLOCK)
        p_lo, p_hi, p_may, p_sure = _kept_between(load_row(t_row, offs, V, TARGET_PROBS), offs, inv_temperature, m,
                                                  s_lo, s_hi, lo, hi, tau, iota, closed, TARGET_PROBS)
        if RESIDUAL_RACE:
            if DRAFT == DRAFT_LOGITS:
                q_lo, q_hi, _q_may, _q_sure = _kept_between(load_row(d_row, offs, V, False), offs, inv_temperature,
                                                            md, sd_lo, sd_hi, lod, hid, taud, iotad, closedd, False)
            else:
                q_lo = clean_prob(tl.load(d_row + offs, mask=offs < V, other=0.0).to(tl.float32))
                q_hi = q_lo
            w_lo = p_lo - q_hi
            w_hi = p_hi - q_lo
        else:
            w_lo = tl.where(offs == exclude, 0.0, p_sure)
            w_hi = tl.where(offs == exclude, 0.0, p_may)
        inv_e = reciprocal(neg_log_of_uniform(uniform_of(hash_word(key, offs))))
        r_lo = tl.where(w_lo > 0.0, w_lo * inv_e, 0.0)
        r_hi = tl.where(w_hi > 0.0, w_hi * inv_e, 0.0)
        better = r_lo > best_lo  # (ids rise along a lane: a tie keeps the earlier token)
        other = tl.maximum(other, tl.where(better, best_hi, r_hi))
        best_lo = tl.where(better, r_lo, best_lo)
        best_hi = tl.where(better, r_hi, best_hi)
        best_id = tl.where(better, offs, best_id)
    win_lo, win = lowest_best(tl.where(best_id >= 0, best_lo, float("-inf")), best_id)
    mine = best_id == win
    rest = tl.maximum(tl.max(other, axis=0), tl.max(tl.where(mine, 0.0, best_hi), axis=0))
    return win, tl.maximum(win_lo, 0.0), tl.max(tl.where(mine, best_hi, 0.0), axis=0), rest


@triton.jit
def _merge(part_f, part_i, NUM_SLICES, P_BLOCK: tl.constexpr):
    # the slices' partials merged: the race's winner where its least ratio clears every other token's largest ratio
    # by RACE_MARGIN, else -1
    slices = tl.arange(0, P_BLOCK)
    present = slices < NUM_SLICES
    ids = tl.load(part_i + slices * PART + P_WIN_ID, mask=present, other=-1)
    win_lo = tl.load(part_f + slices * PART + P_WIN_LO, mask=present, other=0.0)
    win_hi = tl.load(part_f + slices * PART + P_WIN_HI, mask=present, other=0.0)
    rest = tl.load(part_f + slices * PART + P_REST, mask=present, other=0.0)
    best, winner = lowest_best(tl.where(ids >= 0, win_lo, float("-inf")), ids)
    others = tl.maximum(tl.max(rest, axis=0), tl.max(tl.where(ids == winner, 0.0, win_hi), axis=0))
    decided = (winner >= 0) & (best > 0.0) & (best > others * (1.0 + RACE_MARGIN))
    return tl.where(decided, winner, -1)


@triton.jit
def _bracket_race_kernel(
    state_f_ptr, state_i_ptr,  # the histogram path's state per cell (histogram.STATE floats and ints)
    part_f_ptr, part_i_ptr,  # its partials per (cell, slice) (histogram.PART floats and ints)
    arrivals_ptr,  # [B * (K + 1) * 2] int32, zero on entry and exit
    summary_f_ptr, summary_i_ptr,  # the summaries (read for a cell its first level closed)
    decided_ptr,  # [B, DECIDED_FIELDS] int32: (t, clean) read, the race's winner (or -1) written
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits (truncated) or probabilities, read at t < n
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B]
    top_k_ptr, top_p_ptr, min_p_ptr,  # [B] (read only where HAS_*)
    V, NUM_SLOTS, NUM_SLICES,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,  # DRAFT_NONE (one-hot), DRAFT_LOGITS (truncated), DRAFT_PROBS
    TARGET_PROBS: tl.constexpr,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    SLICE: tl.constexpr,  # the histogram path's slice (a multiple of BLOCK)
    BLOCK: tl.constexpr,
    P_BLOCK: tl.constexpr,  # a power of two >= NUM_SLICES
    PDL: tl.constexpr = False,  # programmatic dependent launch (dependent_launch.py; the launcher's launch_pdl)
):
    wait_for_launch_before(PDL)  # (first: nothing above reads or writes memory)
    b = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    t = tl.load(decided_ptr + b * DECIDED_FIELDS)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    truncated, k, _top_p, min_p = request_knobs(b, top_k_ptr, top_p_ptr, min_p_ptr, V, HAS_TOP_K, HAS_TOP_P,
                                                HAS_MIN_P)
    taken = (decides(truncated, greedy, k, min_p, inv_temperature) != 0) & (
        tl.load(decided_ptr + b * DECIDED_FIELDS + 1) != 0)
    x = tl.load(draft_ids_ptr + b * draft_ids_stride + t, mask=taken & (t < n), other=-1)
    x_valid = (x >= 0) & (x < V) & (t < n)
    residual = x_valid & (DRAFT != DRAFT_NONE)  # (else the race over p', x left out where one-hot)
    usable, m, s_lo, s_hi, lo, hi, tau, iota, closed = _cell_bounds(
        state_f_ptr, state_i_ptr, summary_f_ptr, summary_i_ptr, b, t, 0, taken, NUM_SLOTS, TARGET_PROBS)
    target = (m, s_lo, s_hi, lo, hi, tau, iota, closed)
    draft = target  # (read only for truncated draft logits)
    if DRAFT == DRAFT_LOGITS:
        d_usable, md, sd_lo, sd_hi, lod, hid, taud, iotad, closedd = _cell_bounds(
            state_f_ptr, state_i_ptr, summary_f_ptr, summary_i_ptr, b, t, 1, taken & residual, NUM_SLOTS, False)
        draft = (md, sd_lo, sd_hi, lod, hid, taud, iotad, closedd)
        usable = usable & (d_usable | (~residual))
    taken = taken & usable
    cell = (b * NUM_SLOTS + t) * 2
    part_f = part_f_ptr + cell * NUM_SLICES * PART
    part_i = part_i_ptr + cell * NUM_SLICES * PART
    if taken:
        t_row = target_ptr + b * target_stride_b + t * target_stride_k
        d_row = draft_ptr + b * draft_stride_b + t * draft_stride_k
        if t < n:
            key = stream_key(key_of_seed, position + t, RESIDUAL)
        else:
            key = stream_key(key_of_seed, position + t, SAMPLE)
        exclude = tl.where(x_valid, x, -1).to(tl.int32)
        if residual:
            win, win_lo, win_hi, rest = _slice_race(t_row, d_row, s * SLICE, V, inv_temperature, key, exclude, target,
                                                    draft, True, DRAFT, TARGET_PROBS, SLICE, BLOCK)
        else:
            win, win_lo, win_hi, rest = _slice_race(t_row, d_row, s * SLICE, V, inv_temperature, key, exclude, target,
                                                    draft, False, DRAFT, TARGET_PROBS, SLICE, BLOCK)
        tl.store(part_f + s * PART + P_WIN_LO, win_lo)
        tl.store(part_f + s * PART + P_WIN_HI, win_hi)
        tl.store(part_f + s * PART + P_REST, rest)
        tl.store(part_i + s * PART + P_WIN_ID, win)
        if last_to_arrive(arrivals_ptr, cell, NUM_SLICES):
            winner = _merge(part_f, part_i, NUM_SLICES, P_BLOCK)
            tl.store(decided_ptr + b * DECIDED_FIELDS + 2, winner)
            if winner >= 0:  # the later launches pass over the stop row's cells
                tl.store(state_i_ptr + cell * STATE + I_STAGE, RACED)
                if (DRAFT == DRAFT_LOGITS) and residual:
                    tl.store(state_i_ptr + (cell + 1) * STATE + I_STAGE, RACED)
    elif s == 0:
        tl.store(decided_ptr + b * DECIDED_FIELDS + 2, -1)


__all__ = ["_bracket_race_kernel"]
