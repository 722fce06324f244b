"""Drafts decided from one pass over their rows, before the split histogram path searches any cutoff.

A batch given ``top_p`` without ``top_k`` finds its cutoffs by the split histogram path
(``specbench/kernels/histogram.py``), which reads every row it searches several times. Most of a request's
rows are never needed: a draft far from the acceptance test's boundary is accepted or rejected whatever the
exact cutoff, and the rows after the first rejection are not read at all. This module decides each
request's drafts first, from bounds that one pass over each draft's rows gives, so that the search runs
only on the rows the step will read (``launch.HISTOGRAM_DECIDE``, way ``"bounds"``).

1. ``STEP_SUMS`` (grid ``B x K x sides * NUM_SLICES``, slices of ``launch.BOUNDS_SHAPE``): for each draft
   row ``r < n`` of a request that decides (below), target side and, with ``TRUNCATE_DRAFT``, draft side, each
   program reads its slice of the row once and sums masses relative to the draft's: ``exp(z - z_x)``
   (``z`` the tempered logit, ``z_x`` the draft's; at most ``exp(REACH)``; 0 where ``x`` has no mass, whose
   bounds need no sums), or ``p`` for probabilities.
   Sums: every token's (``Z_s``); the tokens before the draft ``x`` in the row's order (``A_s``: larger
   value, or equal value and smaller id); and, for each depth ``d_j = 2**j`` nats (``j < DEPTHS``), the
   tokens of value above ``x``'s less ``d_j`` (``G_js``: ``z > z_x - d_j``, or ``p > p_x exp(-d_j)``). It
   also keeps the slice's largest value (a logit, or a probability; ``-0`` kept as ``+0``, as the search reads
   it). These sums stand in the partials of the histogram path, read before its first launch writes them.
   (With ``PREDICATED_SUMS`` each conditional sum takes a token's mass by a compare and a predicated add,
   ``rows.add_if_above`` / ``add_if_ahead``: the same additions as a select of the mass or 0 and an add.)
2. ``STEP_DECIDE`` (grid ``B``, one program per request; with ``FOLD``, no launch of its own: each request's last
   program of ``STEP_SUMS`` to arrive, an arrival count per request left at zero, takes it after every program of
   the request wrote its sums, the launch variants' ``-fold``): each row's sums are its slices' sums, ``p`` is
   ``x``'s own mass (1, or ``p_x``), ``M = Z`` and ``T = top_p M``. In a row of logits whose largest value
   ``z_max`` lies more than ``REACH`` above ``z_x`` (a mass clamped), ``p'(x)`` lies between 0 and
   ``exp(z_x - z_max) / top_p`` (``S >= T >= top_p`` times the largest mass). A row of no mass gives no
   bounds (the step reads a target row of no mass as invalid, a draft row of no mass as a one-hot draft).
   Otherwise ``x`` is kept iff
   ``A < T``. The cutoff token (the first whose mass, with all before it, reaches ``T``) has value at
   most ``z_x - d_j`` whenever ``G_j < T``, so its mass is at most ``c``, the least such bound (``p``
   where no depth qualifies, as the cutoff of a kept ``x`` is ``x`` or comes after it). The kept mass
   ``S`` then lies between ``max(T, A + p)`` and ``min(max(A + p, T + min(c, p)), M)``. Every comparison
   and each side of ``S`` leaves ``BRACKET_SLACK M`` for the float32 sums here and in the search, whose
   order and scale differ. So ``p'(x) = p / S`` lies in ``[p / S_hi, p / S_lo]``, and ``q'(x)`` likewise
   from the draft row (truncated draft logits), as given (draft probabilities) or 1 (one-hot). Slot ``i``
   is surely accepted when ``u q'(x)`` (``u`` the step's own uniform) lies below the least ``p'(x)`` by
   ``DECISION_MARGIN``, surely rejected when above the largest (or ``p'(x)`` is 0, or ``x`` no valid id),
   and otherwise not decided. The program writes ``(t, clean)``: ``t`` the first slot not surely
   accepted (or ``n``), ``clean`` whether it was surely rejected (or ``t = n``). Where ``t < n`` it also
   writes row ``t``'s largest values (the target's, and with truncated draft logits the draft's: the largest
   of its slices' values) to the search's state, whose first launch takes them instead of reading the row
   again (``histogram.py``, ``BOUNDS_MAX``, the launcher's way; with the launch variants' ``-noboundsmax`` they
   are written and not read): the same values, as the largest of any split of the row.

A request *decides* when it is probabilistic, valid, not greedy, with ``top_p`` on and ``top_k`` and
``min_p`` off (``min_p`` keeps tokens by the row's largest value, which one slice does not know). Any
other request writes ``(0, 0)``. The histogram path's first launch (``SKIP_DECIDED``) then passes over
the cells the step will not read: with ``clean`` every row but ``t``, without it the rows before ``t``;
the step (``truncation.py``, ``DECIDED``) emits the drafts before ``t``, starts there, and with ``clean``
stops there. Its own test at ``t`` uses the exact summaries, which lie inside these bounds, so it decides
as this program did. The tokens are the contract's either way (``specbench/verification.py``).
"""

import triton
import triton.language as tl

from specbench.kernels.cutoffs import load_row, values_of
from specbench.kernels.decide import ACCEPT, DRAFT_LOGITS, draft_prob_at, request_setup, request_valid
from specbench.kernels.dependent_launch import wait_for_launch_before
from specbench.kernels.radix import _chunk
from specbench.kernels.rng import stream_key, uniform_at
from specbench.kernels.rows import add_if_above, add_if_ahead, clean, exp_in_sum
from specbench.kernels.split import last_to_arrive
from specbench.kernels.truncation import DECIDED_FIELDS, cell_program, request_knobs

STEP_SUMS = tl.constexpr(0)
STEP_DECIDE = tl.constexpr(1)
PART = tl.constexpr(8)  # partial floats per (cell, slice): the histogram path's partials, reused
P_MAX = tl.constexpr(0)  # the slice's largest value
P_ALL = tl.constexpr(1)  # Z_s
P_AHEAD = tl.constexpr(2)  # A_s
P_DEPTH = tl.constexpr(3)  # G_js, j = 0..DEPTHS - 1
DEPTHS = tl.constexpr(5)  # depth j is 2**j nats below the draft's value (1 to 16)
BRACKET_SLACK = tl.constexpr(1e-4)  # the sums' slack, relative to M (ten times the search's SUM_SLACK)
DECISION_MARGIN = tl.constexpr(1e-5)  # how far u q'(x) must be from p'(x), relative, for a sure decision
SLACK = tl.constexpr(1e-4)  # exp's rounding in a depth's mass bound
REACH = tl.constexpr(64.0)  # logits: the most nats above the draft's value a mass is taken at (V exp(64) < 2**127)


@triton.jit
def decides(truncated, greedy, k, min_p, inv_temperature):
    # whether a request decides its drafts here: probabilistic (the caller's MODE), truncated by top_p alone
    return truncated & (~greedy) & (k == 0) & (min_p == 0.0) & request_valid(inv_temperature)


@triton.jit
def bracket(p, above, target, play, cut, in_play):
    # bounds (lo, hi) on p'(x) = p / S for a token x of mass p (`in_play`) with mass `above` before it, the
    # target T, the mass in play M and a bound `cut` on the cutoff token's mass; and whether x is kept and out
    # for sure: kept iff A < T, then S between max(T, A + p) and min(max(A + p, T + min(c, p)), M), every
    # comparison and side with BRACKET_SLACK M for the float32 sums here and in the search
    slack = BRACKET_SLACK * play
    through = above + p
    s_lo = tl.maximum(target, through) - slack
    s_hi = tl.minimum(tl.maximum(through, target + tl.minimum(cut, p)), play) + slack
    kept = in_play & (above < target - slack) & (s_lo > 0.0)
    lo = tl.where(kept, p / s_hi, 0.0)
    hi = tl.where(kept, p / tl.where(kept, s_lo, 1.0), 0.0)
    return lo, hi, kept, above > target + slack


@triton.jit
def decide_slot(i, x_valid, p_lo, p_hi, q_lo, q_hi, sure, key_of_seed, position, clean_stop):
    # slot i from bounds on p'(x) and q'(x) (which hold where `sure`), by the step's own uniform: sure only
    # where u q'(x) clears p'(x) by DECISION_MARGIN (relative) either way, or p'(x) is 0; (stop here, t, clean):
    # t = i where it stops (an invalid id, not sure, or rejected), else i + 1; clean 0 where not sure
    u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
    accept = u * q_hi < p_lo * (1.0 - DECISION_MARGIN)
    reject = (p_hi == 0.0) | (u * q_lo > p_hi * (1.0 + DECISION_MARGIN))
    sure = sure & (accept | reject)
    stop = (~x_valid) | (~sure) | (~accept)
    return stop, tl.where(stop, i, i + 1), tl.where(stop & x_valid & (~sure), 0, clean_stop)


@triton.jit
def skipped(r, t, clean_stop):
    # whether the step reads no summary of row r of a request that wrote (t, clean_stop)
    return tl.where(clean_stop == 1, r != t, r < t)


@triton.jit
def _threshold(x_value, J: tl.constexpr, TARGET_PROBS: tl.constexpr):
    # the value 2**J nats below the draft's
    depth = tl.full([], 1 << J, tl.float32)
    if TARGET_PROBS:
        return x_value * tl.exp(-depth)
    return x_value - depth


@triton.jit
def _slice_sums(row, x, V, inv_temperature, start, part, SLICE: tl.constexpr, TARGET_PROBS: tl.constexpr,
                BLOCK: tl.constexpr, PREFETCH: tl.constexpr, FTZ_SUMS: tl.constexpr,
                PREDICATED_SUMS: tl.constexpr):
    # STEP_SUMS for one slice, in one read: the masses relative to the draft's (exp(z - z_x), at most
    # exp(REACH); probabilities as they are), and the slice's largest value (logits: where it lies more than
    # REACH above z_x, the sums are clamped and the decision will not use them)
    x_value, _x_mass = values_of(load_row(row, x, V, TARGET_PROBS), inv_temperature, 0.0, TARGET_PROBS)
    # (x of no mass: its bounds need no sums, every mass taken as 0; the slice's largest value still found)
    reference = tl.where(x_value > float("-inf"), x_value, float("inf"))
    t0 = _threshold(x_value, 0, TARGET_PROBS)
    t1 = _threshold(x_value, 1, TARGET_PROBS)
    t2 = _threshold(x_value, 2, TARGET_PROBS)
    t3 = _threshold(x_value, 3, TARGET_PROBS)
    t4 = _threshold(x_value, 4, TARGET_PROBS)
    high = tl.full([BLOCK], float("-inf"), tl.float32)
    total = tl.zeros([BLOCK], tl.float32)
    ahead = tl.zeros([BLOCK], tl.float32)
    g0 = tl.zeros([BLOCK], tl.float32)
    g1 = tl.zeros([BLOCK], tl.float32)
    g2 = tl.zeros([BLOCK], tl.float32)
    g3 = tl.zeros([BLOCK], tl.float32)
    g4 = tl.zeros([BLOCK], tl.float32)
    coming = load_row(row, start + tl.arange(0, BLOCK), V, TARGET_PROBS) if PREFETCH else high
    for chunk in range(0, SLICE, BLOCK):
        offs = start + chunk + tl.arange(0, BLOCK)
        raw, coming = _chunk(row, offs, V, coming, PREFETCH, TARGET_PROBS, BLOCK)
        if TARGET_PROBS:
            value, mass = values_of(raw, inv_temperature, 0.0, TARGET_PROBS)
        else:
            value = clean(raw * inv_temperature)
            if FTZ_SUMS:  # (every sum holds x's own mass, 1)
                mass = exp_in_sum(tl.minimum(value - reference, REACH))
            else:
                mass = tl.exp(tl.minimum(value - reference, REACH))
        high = tl.maximum(high, value)
        total += mass
        if PREDICATED_SUMS:  # (the same additions: two instructions a depth, four for the order)
            ahead = add_if_ahead(ahead, value, x_value, offs, x, mass)
            g0 = add_if_above(g0, value, t0, mass)
            g1 = add_if_above(g1, value, t1, mass)
            g2 = add_if_above(g2, value, t2, mass)
            g3 = add_if_above(g3, value, t3, mass)
            g4 = add_if_above(g4, value, t4, mass)
        else:
            ahead += tl.where((value > x_value) | ((value == x_value) & (offs < x)), mass, 0.0)
            g0 += tl.where(value > t0, mass, 0.0)
            g1 += tl.where(value > t1, mass, 0.0)
            g2 += tl.where(value > t2, mass, 0.0)
            g3 += tl.where(value > t3, mass, 0.0)
            g4 += tl.where(value > t4, mass, 0.0)
    top = tl.max(high, axis=0)
    tl.store(part + P_MAX, tl.where(top == 0.0, 0.0, top))  # (a -0 as +0, as values_of reads it: the search's m)
    tl.store(part + P_ALL, tl.sum(total, axis=0))
    tl.store(part + P_AHEAD, tl.sum(ahead, axis=0))
    tl.store(part + P_DEPTH + 0, tl.sum(g0, axis=0))
    tl.store(part + P_DEPTH + 1, tl.sum(g1, axis=0))
    tl.store(part + P_DEPTH + 2, tl.sum(g2, axis=0))
    tl.store(part + P_DEPTH + 3, tl.sum(g3, axis=0))
    tl.store(part + P_DEPTH + 4, tl.sum(g4, axis=0))


@triton.jit
def _merged(cell_f, slices, present, field):
    # a sum over the row from its slices'
    return tl.sum(tl.load(cell_f + slices * PART + field, mask=present, other=0.0), axis=0)


@triton.jit
def _depth_bound(cell_f, slices, present, J: tl.constexpr, x_value, target, slack, TARGET_PROBS: tl.constexpr):
    # the bound on the cutoff token's mass from depth J where G_J < T (else +inf), relative to the draft's mass
    # (logits: exp of the threshold's own difference from z_x, with SLACK for exp's rounding) or as it is
    threshold = _threshold(x_value, J, TARGET_PROBS)
    if TARGET_PROBS:
        mass = threshold
    else:
        mass = tl.exp(threshold - x_value) * (1.0 + SLACK)
    return tl.where(_merged(cell_f, slices, present, P_DEPTH + J) < target - slack, mass, float("inf"))


@triton.jit
def _bounds(row, cell_f, x, V, inv_temperature, top_p, NUM_SLICES, TARGET_PROBS: tl.constexpr,
            P_BLOCK: tl.constexpr):
    # bounds (lo, hi) on p'(x) of a row from its slices' sums (x a valid id), whether they hold, and the row's
    # largest value
    slices = tl.arange(0, P_BLOCK)
    present = slices < NUM_SLICES
    high = tl.max(tl.load(cell_f + slices * PART + P_MAX, mask=present, other=float("-inf")), axis=0)
    x_value, p = values_of(load_row(row, x, V, TARGET_PROBS), inv_temperature, 0.0, TARGET_PROBS)
    in_play = x_value > float("-inf")
    reached = in_play
    far_hi = tl.zeros([], tl.float32)
    if not TARGET_PROBS:
        p = tl.where(in_play, 1.0, 0.0)  # (the masses are relative to x's)
        reached = high - x_value <= REACH  # (no token's mass clamped)
        # x more than REACH below the row's largest value: p'(x) <= p(x) / T <= exp(z_x - high) / top_p
        # (x of no mass: 0)
        far_hi = tl.where(in_play, tl.exp(tl.maximum(x_value - high, -REACH - 64.0)) * (1.0 + SLACK) / top_p, 0.0)
    play = _merged(cell_f, slices, present, P_ALL)
    target = top_p * play
    slack = BRACKET_SLACK * play
    cut = tl.minimum(tl.minimum(_depth_bound(cell_f, slices, present, 0, x_value, target, slack, TARGET_PROBS),
                                _depth_bound(cell_f, slices, present, 1, x_value, target, slack, TARGET_PROBS)),
                     tl.minimum(_depth_bound(cell_f, slices, present, 2, x_value, target, slack, TARGET_PROBS),
                                _depth_bound(cell_f, slices, present, 3, x_value, target, slack, TARGET_PROBS)))
    cut = tl.minimum(cut, _depth_bound(cell_f, slices, present, 4, x_value, target, slack, TARGET_PROBS))
    # (a row of no mass, no value above -inf, gives no bounds: the step reads a target row of no mass as invalid, and
    # a draft row of no mass as a one-hot draft, q'(x) = 1)
    has_mass = high > float("-inf")
    lo, hi, kept, out = bracket(p, _merged(cell_f, slices, present, P_AHEAD), target, play, cut, reached & has_mass)
    hi = tl.where(kept | reached, hi, far_hi)
    return lo, hi, has_mass & (kept | (~reached) | out), high


@triton.jit
def _decide_request(b, slot, part_f, decided_ptr, row_max_ptr, t_row0, t_stride_k, d_row0, d_stride_k, draft_ids_ptr,
                    draft_ids_stride, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, top_k_ptr, top_p_ptr,
                    min_p_ptr, V, NUM_SLOTS, NUM_SLICES, MODE: tl.constexpr, DRAFT: tl.constexpr,
                    TARGET_PROBS: tl.constexpr, HAS_TOP_K: tl.constexpr, HAS_TOP_P: tl.constexpr,
                    HAS_MIN_P: tl.constexpr, ROUNDS: tl.constexpr, P_BLOCK: tl.constexpr,
                    ROW_MAX_STRIDE: tl.constexpr):
    # STEP_DECIDE: request b's (t, clean), from its draft rows' sums: every slot in order, or (ROUNDS) slot
    # `slot` alone where the rounds before accepted every slot before it (t == slot, clean); and where it stops
    # at t < n, row t's largest values (each side the search reads) for the search
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    truncated, k, top_p, min_p = request_knobs(b, top_k_ptr, top_p_ptr, min_p_ptr, V, HAS_TOP_K, HAS_TOP_P,
                                               HAS_MIN_P)
    deciding = decides(truncated, greedy, k, min_p, inv_temperature)
    t = tl.zeros([], tl.int32)
    clean_stop = deciding.to(tl.int32)  # (t = 0 = n, or nothing decided)
    last = n
    going = deciding & (n > 0)
    if ROUNDS:
        last = tl.minimum(slot + 1, n)
        if slot > 0:
            t = tl.load(decided_ptr + b * DECIDED_FIELDS)
            clean_stop = tl.load(decided_ptr + b * DECIDED_FIELDS + 1)
            going = deciding & (t == slot) & (clean_stop == 1) & (slot < n)
    written = going | (slot == 0)  # (a later round leaves a request that is not going as it is)
    i = slot
    while going:
        x = tl.load(draft_ids_ptr + b * draft_ids_stride + i)
        x_valid = (x >= 0) & (x < V)
        x_safe = tl.where(x_valid, x, 0).to(tl.int32)
        cell = (b * NUM_SLOTS + i) * 2
        p_lo, p_hi, sure, p_high = _bounds(t_row0 + i * t_stride_k, part_f + cell * NUM_SLICES * PART, x_safe, V,
                                           inv_temperature, top_p, NUM_SLICES, TARGET_PROBS, P_BLOCK)
        if DRAFT == DRAFT_LOGITS:  # (truncated: the launcher decides no other draft logits)
            q_lo, q_hi, q_sure, q_high = _bounds(d_row0 + i * d_stride_k, part_f + (cell + 1) * NUM_SLICES * PART,
                                                 x_safe, V, inv_temperature, top_p, NUM_SLICES, False, P_BLOCK)
            sure = sure & q_sure
        else:  # one-hot drafts: 1; draft probabilities cleaned, as the step reads them
            q_lo = draft_prob_at(d_row0 + i * d_stride_k + x_safe, x_valid, 1.0, 0.0, 1.0, DRAFT)
            q_hi = q_lo
        stop, t, clean_stop = decide_slot(i, x_valid, p_lo, p_hi, q_lo, q_hi, sure, key_of_seed, position, clean_stop)
        # (stopped here: the step reads this row, t = i < n, and the search takes its largest values from here)
        tl.store(row_max_ptr + cell * ROW_MAX_STRIDE, p_high, mask=stop)
        if DRAFT == DRAFT_LOGITS:
            tl.store(row_max_ptr + (cell + 1) * ROW_MAX_STRIDE, q_high, mask=stop)
        i += 1
        going = (~stop) & (i < last)
    if written:
        tl.store(decided_ptr + b * DECIDED_FIELDS, t)
        tl.store(decided_ptr + b * DECIDED_FIELDS + 1, clean_stop)


@triton.jit
def _draft_bounds_kernel(
    part_f_ptr,  # [B * (K + 1) * 2, NUM_SLICES, PART] float32 scratch (the histogram path's partials)
    decided_ptr,  # [B, DECIDED_FIELDS] int32: (t, clean) per request written by STEP_DECIDE (the third field after)
    row_max_ptr,  # float32: the largest value of each cell c of a row a request stops at (t < n), at c * ROW_MAX_STRIDE
    # (the search's state, m)
    arrivals_ptr,  # [B] int32 arrival counts, zero on entry and exit (read only with FOLD)
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits (truncated) or probabilities, or any
    # row (one-hot drafts: never read)
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B]
    top_k_ptr, top_p_ptr, min_p_ptr,  # [B] int32, float32, float32 (read only where HAS_*)
    V, NUM_SLOTS, NUM_SLICES,
    slot,  # ROUNDS: the round's slot (else 0)
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,  # the draft form (DRAFT_NONE, DRAFT_LOGITS truncated, DRAFT_PROBS)
    TARGET_PROBS: tl.constexpr,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    STEP: tl.constexpr,  # STEP_SUMS or STEP_DECIDE
    ROUNDS: tl.constexpr,  # one round per slot (grid (B, 1, ...) and (B,) each), so rows past a rejection are not read
    SLICE: tl.constexpr,  # tokens of a row per program (a multiple of BLOCK)
    BLOCK: tl.constexpr,  # tokens per chunk
    PREFETCH: tl.constexpr,  # each chunk loaded one iteration ahead
    P_BLOCK: tl.constexpr,  # a power of two >= NUM_SLICES
    ROW_MAX_STRIDE: tl.constexpr,  # floats from a cell's largest value to the next cell's
    FTZ_SUMS: tl.constexpr,  # logits: the masses summed by rows.exp_in_sum, not tl.exp (launch.HISTOGRAM_FTZ_SUMS)
    PREDICATED_SUMS: tl.constexpr,  # the sums above a depth and ahead of the draft by rows.add_if_above / add_if_ahead
    FOLD: tl.constexpr,  # STEP_SUMS: each request's last program to arrive also takes its STEP_DECIDE (no launch for it)
    PDL: tl.constexpr = False,  # programmatic dependent launch (dependent_launch.py; the launcher's launch_pdl)
):
    # grid (B, K, sides * NUM_SLICES), or (B, 1, sides * NUM_SLICES) a round; STEP_DECIDE (B,)
    wait_for_launch_before(PDL)  # (first: nothing above reads or writes memory)
    if STEP == STEP_DECIDE:
        b = tl.program_id(0).to(tl.int64)
        _decide_request(b, slot, part_f_ptr, decided_ptr, row_max_ptr, target_ptr + b * target_stride_b,
                        target_stride_k, draft_ptr + b * draft_stride_b, draft_stride_k, draft_ids_ptr,
                        draft_ids_stride, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, top_k_ptr, top_p_ptr,
                        min_p_ptr, V, NUM_SLOTS, NUM_SLICES, MODE, DRAFT, TARGET_PROBS, HAS_TOP_K, HAS_TOP_P, HAS_MIN_P,
                        ROUNDS, P_BLOCK, ROW_MAX_STRIDE)
    else:
        b, r, side, s, n, greedy, inv_temperature, truncated, k, _top_p, min_p = cell_program(
            num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, top_k_ptr, top_p_ptr, min_p_ptr, V, NUM_SLOTS,
            NUM_SLICES, False, MODE, HAS_TOP_K, HAS_TOP_P, HAS_MIN_P)
        r += slot
        going = decides(truncated, greedy, k, min_p, inv_temperature) & (r < n)
        if ROUNDS:  # noqa: SIM102 (a constexpr test, then a runtime one: a later round reads the last one's)
            if slot > 0:
                decision = decided_ptr + b * DECIDED_FIELDS
                going = going & (tl.load(decision) == r) & (tl.load(decision + 1) == 1)
        if going:
            x = tl.load(draft_ids_ptr + b * draft_ids_stride + r)
            x = tl.where((x >= 0) & (x < V), x, 0).to(tl.int32)  # (an invalid id is rejected whatever the sums)
            part = part_f_ptr + (((b * NUM_SLOTS + r) * 2 + side) * NUM_SLICES + s) * PART
            if side == 0:
                _slice_sums(target_ptr + b * target_stride_b + r * target_stride_k, x, V, inv_temperature, s * SLICE,
                            part, SLICE, TARGET_PROBS, BLOCK, PREFETCH, FTZ_SUMS, PREDICATED_SUMS)
            else:
                _slice_sums(draft_ptr + b * draft_stride_b + r * draft_stride_k, x, V, inv_temperature, s * SLICE,
                            part, SLICE, False, BLOCK, PREFETCH, FTZ_SUMS, PREDICATED_SUMS)
        # (every program of the request arrives, those that read nothing too, so that the last sees every sum)
        if FOLD:  # noqa: SIM102 (a constexpr test, then a runtime one)
            if last_to_arrive(arrivals_ptr, b, tl.num_programs(1) * tl.num_programs(2)):
                _decide_request(b, slot, part_f_ptr, decided_ptr, row_max_ptr, target_ptr + b * target_stride_b,
                                target_stride_k, draft_ptr + b * draft_stride_b, draft_stride_k, draft_ids_ptr,
                                draft_ids_stride, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, top_k_ptr,
                                top_p_ptr, min_p_ptr, V, NUM_SLOTS, NUM_SLICES, MODE, DRAFT, TARGET_PROBS, HAS_TOP_K,
                                HAS_TOP_P, HAS_MIN_P, ROUNDS, P_BLOCK, ROW_MAX_STRIDE)
