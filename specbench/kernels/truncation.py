"""Truncation (``top_k``, ``top_p``, ``min_p``) for the Triton backend: a prepass that finds each row's
cutoff, and one program per request that verifies from it.

The contract (``specbench/verification.py``): a row's tokens are ordered by value (the cleaned,
tempered logit ``z``, or the cleaned target probability), largest first, ties to the lowest id;
every knob keeps a prefix of that order, so the kept set is described by a cutoff ``(tau, iota)``:
token ``y`` is kept iff ``v_y > tau`` or ``v_y == tau and y <= iota``. Tokens with no mass (``z =
-inf``; a probability of 0) come last in the order and are never kept (they could not be drawn).

1. ``_truncation_prepass_kernel`` (grid ``B x (K + 1) x 2``): for every row that needs it (a
   non-greedy request with a knob on; target rows ``0..n``, and draft-logit rows ``0..n-1`` when
   they are truncated) it writes the summary ``(m, S, tau, iota)``: the row's largest value ``m``,
   the kept mass ``S`` (sum of ``w = exp(z - m)``, or of ``p``), the cutoff. No row is sorted:
   ``select_cutoff`` is a weighted radix select on the values' order-preserving 32-bit keys, 4
   bits a pass (a 16-bin histogram of counts or masses of the tokens still in play, so 16 pivots
   a pass, 8 passes), one pass for the chosen value's group, and, only when ``top_k`` or ``top_p``
   cuts inside a group of tied values, a radix select on the ids of that group (4 bits a pass). The
   knobs go in the contract's order: ``min_p`` (a threshold on ``w``: no search), ``top_k`` (count
   select among what ``min_p`` kept), ``top_p`` (mass select, the target ``top_p * M`` with ``M``
   the mass of what ``min_p`` and ``top_k`` kept); with ``min_p`` on, the cutoff is then moved to
   the last token still in play (two passes), so ``(tau, iota)`` alone says what is kept. Out of
   range knobs as the contract says (``request_knobs``: ``top_p <= 0`` and ``min_p > 1`` are
   ``top_k = 1``). Cost per row of this radix path, in passes over it: 1 (max), ``top_k`` 9 (+ 1 to
   5 for a tie cut by id), ``top_p`` 10 (+ ids), 1 (S), ``min_p`` 2: about 25 for top_k + top_p.

   The fast path (``_top_k_fast``, rows with ``1 <= top_k <= 64`` and ``V <= 262144``; any top_p and
   min_p with it): ONE pass over the row, writing the maximum of each group of 32 consecutive tokens
   to scratch (``m`` is their maximum); ``c_k``, the k-th largest group maximum, by a 32-step
   bisection on their order keys in registers; the groups whose maximum is ``>= c_k`` hold the
   row's first k tokens and every token tied with the k-th (the proof is at ``_top_k_fast``); when
   at most ``CAP_GROUPS`` (64) qualify, their tokens (at most 2048, read once more from the row) are
   sorted in registers by (value desc, id asc) and the knobs resolved on them exactly, in the
   contract's order. Cost: 1 pass + at most 2048 tokens gathered. More groups (ties at the top) or
   any other row: the radix path (the fast path's pass is then lost).
2. ``_verify_truncated_kernel`` (grid ``B``): one program per request for every mode, target form
   and draft form once any knob is given. A request with every knob off, or a greedy one, takes
   today's arithmetic (the same helpers as ``sequential.py``); a truncated one reads its rows'
   summaries: ``p'(x) = kept(x) exp(z_x - m) / S`` (``p(x) / S`` for probabilities), ``q'(x)`` likewise
   for truncated draft logits (untruncated ones: their softmax; draft probabilities as given),
   accepts iff ``u q'(x) < p'(x)`` and races over ``max(p' - q', 0)`` or ``p'`` with the tokens outside
   the cutoff left out.

Masses are float32 ``exp(z - m)`` (``tl.exp``: on a GPU an approximate exponential, so a token
whose mass lies within a few ulp of ``min_p`` or whose top-p prefix lies within rounding of the
boundary can fall either side, as the contract and the oracle allow); sums are lane sums then a
tree reduction, in an order of this kernel's own.

Scratch (float32 / int32, ``R = K + 1``): the summaries ``[B, R, 2, 4]`` (m, S, tau, unused) and
``[B, R, 2]`` (iota); side 0 the target row, side 1 the draft row; then, for the fast path, per
(row, side) ``ceil(V / 32)`` group maxima and ``CAP_GROUPS`` gathered group ids, each read only
after the same program wrote it. Only rows the prepass wrote are read. The summary is also what the log-probability epilogue reads (``logprobs.py``).
"""

import triton
import triton.language as tl

from specbench.kernels.decide import (
    ACCEPT,
    DRAFT_LOGITS,
    DRAFT_NONE,
    DRAFT_PROBS,
    MODE_SYNTHETIC,
    RESIDUAL,
    SAMPLE,
    accept_test,
    read_at_draft,
    request_setup,
    request_valid,
    sample_row,
)
from specbench.kernels.rng import hash_word, neg_log_of_uniform, stream_key, uniform_at, uniform_of
from specbench.kernels.rows import (
    argmax_slice,
    best_pair,
    clean,
    clean_prob,
    load_probs,
    load_scaled,
    softmax_stats_slice,
)
from specbench.kernels.sequential import _residual_token

SUMMARY_FIELDS = tl.constexpr(4)  # per (request, row, side): m, S, tau, unused (+ one int: iota)
INT32_MAX = tl.constexpr(2147483647)
GROUP = tl.constexpr(32)  # tokens per group of the top_k fast path
MAX_FAST_K = tl.constexpr(64)  # the largest top_k the fast path takes
# the residual's draft side in the truncated races
Q_NONE = tl.constexpr(0)  # w = p' (a token `exclude` left out)
Q_TRUNCATED_LOGITS = tl.constexpr(1)  # q' from the draft row's summary
Q_LOGITS = tl.constexpr(2)  # q = softmax of the draft logits (md, 1 / sd)
Q_PROBS = tl.constexpr(3)  # q as given (NaN counts as 0)


@triton.jit
def request_knobs(b, top_k_ptr, top_p_ptr, min_p_ptr, V, HAS_TOP_K: tl.constexpr, HAS_TOP_P: tl.constexpr,
                  HAS_MIN_P: tl.constexpr):
    # Request b's knobs, normalised: (truncated, k, top_p, min_p) with k = 0, top_p = 1, min_p = 0
    # where off. top_k <= 0 or >= V, top_p NaN or >= 1, min_p NaN or <= 0 are off; top_p <= 0 and
    # min_p > 1 keep only the first token, which is k = 1.
    k = 0
    if HAS_TOP_K:
        k = tl.load(top_k_ptr + b)
        k = tl.where((k > 0) & (k < V), k, 0)
    p = 1.0
    if HAS_TOP_P:
        p = tl.load(top_p_ptr + b)
        p = tl.where(p < 1.0, p, 1.0)  # NaN and >= 1: off
    mp = 0.0
    if HAS_MIN_P:
        mp = tl.load(min_p_ptr + b)
        mp = tl.where(mp > 0.0, mp, 0.0)  # NaN and <= 0: off
    truncated = (k > 0) | (p < 1.0) | (mp > 0.0)
    first_only = (p <= 0.0) | (mp > 1.0)
    k = tl.where(first_only, 1, k)
    p = tl.where(p <= 0.0, 1.0, p)
    mp = tl.where(mp > 1.0, 0.0, mp)
    return truncated, k, p, mp


@triton.jit
def row_values(row, offs, V, inv_temperature, m, TARGET_PROBS: tl.constexpr):
    # (value, mass) of a chunk: the cleaned tempered logit (-0 read as 0: one value, one key) and
    # exp(z - m), or the cleaned probability (-inf where it has no mass) and itself. m finite.
    if TARGET_PROBS:
        p = load_probs(row, offs, V)
        return tl.where(p > 0.0, p, float("-inf")), p
    z = load_scaled(row, offs, V, inv_temperature)
    z = tl.where(z == 0.0, 0.0, z)
    return z, tl.exp(z - m)


@triton.jit
def kept_by(value, index, tau, iota):
    # whether a token is at or before the cutoff (tau, iota) in the row's order
    return (value > tau) | ((value == tau) & (index <= iota))


@triton.jit
def _in_play(value, mass, offs, minp_threshold, tau, iota):
    # a token with mass, kept by min_p (mass >= threshold) and at or before the cutoff so far
    return (value > float("-inf")) & (mass >= minp_threshold) & kept_by(value, offs, tau, iota)


@triton.jit
def _order_key(value):
    # float32 -> int64 in [0, 2**32), in the same order as the values
    bits = value.to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF).to(tl.int64) + 2147483648


@triton.jit
def _set_mass(row, V, inv_temperature, m, minp_threshold, tau, iota, TARGET_PROBS: tl.constexpr,
              BLOCK: tl.constexpr):
    # the mass of the tokens in play (float32, lane sums then one reduction)
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        value, mass = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
        total += tl.where(_in_play(value, mass, offs, minp_threshold, tau, iota), mass, 0.0)
    return tl.sum(total, axis=0)


@triton.jit
def _select_id(row, V, inv_temperature, m, minp_threshold, tau, iota, group_value, rank,
               TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # the rank-th smallest id (1-based) among the tokens in play (at or before the cutoff (tau,
    # iota)) of value group_value: a radix select on the ids, 4 bits a pass from the highest digit
    # V - 1 has
    bins = tl.arange(0, 16)
    top = 0
    while ((V - 1) >> (top + 4)) > 0:
        top += 4
    prefix = top * 0
    high = top * 0
    remaining = rank
    for step in range(top // 4 + 1):
        shift = top - 4 * step
        hist = tl.zeros([16], tl.int32)
        for start in range(0, V, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            value, mass = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
            match = _in_play(value, mass, offs, minp_threshold, tau, iota) & (value == group_value)
            match = match & ((offs & high) == prefix)
            digit = (offs >> shift) & 15
            hist += tl.sum(((digit[:, None] == bins[None, :]) & match[:, None]).to(tl.int32), axis=0)
        below = tl.sum(tl.where(bins[:, None] < bins[None, :], hist[:, None], 0), axis=0)  # ids of lower digits
        chosen = tl.min(tl.where((below + hist >= remaining) & (hist > 0), bins, 16), axis=0)
        chosen = tl.minimum(chosen, 15)
        remaining -= tl.sum(tl.where(bins == chosen, below, 0), axis=0)
        prefix = prefix | (chosen << shift)
        high = high | (15 << shift)
    return prefix


@triton.jit
def select_cutoff(row, V, inv_temperature, m, minp_threshold, tau, iota, target, USE_MASS: tl.constexpr,
                  TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # Among the tokens in play (at or before (tau, iota), kept by min_p), keep those whose prefix
    # before them (in the row's order; count, or mass with USE_MASS) is below `target`: returns the
    # new cutoff, (tau, iota) itself when that keeps all of them. Weighted radix select on the value
    # keys, 4 bits (16 bins) a pass, most significant first: each pass finds the digit where the
    # prefix from the top crosses the target. Then the group of the chosen value: the prefix before
    # it (B), its size and each token's mass a; its first r tokens (by id) are kept, r = target - B
    # (count) or the number of i >= 0 with B + i a < target (mass).
    bins = tl.arange(0, 16)
    prefix = _order_key(m) * 0
    high = prefix
    remaining = target
    found = target > float("-inf")  # the search found the target (it is finite)
    for step in range(8):
        shift = 28 - 4 * step
        hist = tl.zeros([16], tl.float32)
        for start in range(0, V, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            value, mass = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
            key = _order_key(value)
            match = _in_play(value, mass, offs, minp_threshold, tau, iota) & ((key & high) == prefix)
            if USE_MASS:
                weight = tl.where(match, mass, 0.0)
            else:
                weight = tl.where(match, 1.0, 0.0)
            digit = ((key >> shift.to(tl.int64)) & 15).to(tl.int32)
            hist += tl.sum(tl.where(digit[:, None] == bins[None, :], weight[:, None], 0.0), axis=0)
        above = tl.sum(tl.where(bins[:, None] > bins[None, :], hist[:, None], 0.0), axis=0)  # higher digits
        chosen = tl.max(tl.where((above + hist >= remaining) & (hist > 0.0), bins, -1), axis=0)
        found = found & (chosen >= 0)
        chosen = tl.maximum(chosen, 0)
        remaining -= tl.sum(tl.where(bins == chosen, above, 0.0), axis=0)
        prefix = prefix | (chosen.to(tl.int64) << shift.to(tl.int64))
        high = high | (tl.full([], 15, tl.int64) << shift.to(tl.int64))
    # the chosen value's group among the tokens in play
    before = tl.zeros([BLOCK], tl.float32)
    size = tl.zeros([BLOCK], tl.int32)
    group_mass = tl.zeros([BLOCK], tl.float32)
    group_value = tl.full([BLOCK], float("-inf"), tl.float32)
    last_id = tl.full([BLOCK], -1, tl.int32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        value, mass = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
        key = _order_key(value)
        play = _in_play(value, mass, offs, minp_threshold, tau, iota)
        if USE_MASS:
            before += tl.where(play & (key > prefix), mass, 0.0)
        else:
            before += tl.where(play & (key > prefix), 1.0, 0.0)
        in_group = play & (key == prefix)
        size += in_group.to(tl.int32)
        group_mass = tl.maximum(group_mass, tl.where(in_group, mass, 0.0))
        group_value = tl.maximum(group_value, tl.where(in_group, value, float("-inf")))
        last_id = tl.maximum(last_id, tl.where(in_group, offs, -1))
    before_total = tl.sum(before, axis=0)
    group_size = tl.sum(size, axis=0)
    a = tl.max(group_mass, axis=0)
    new_tau = tl.max(group_value, axis=0)
    if USE_MASS:
        wanted = tl.where(a > 0.0, tl.ceil((target - before_total) / tl.where(a > 0.0, a, 1.0)), group_size * 1.0)
    else:
        wanted = target - before_total
    rank = tl.minimum(tl.maximum(wanted, 1.0), group_size * 1.0).to(tl.int32)
    found = found & (group_size > 0)
    new_iota = tl.max(last_id, axis=0)
    if found & (rank < group_size):
        new_iota = _select_id(row, V, inv_temperature, m, minp_threshold, tau, iota, new_tau, rank, TARGET_PROBS,
                              BLOCK)
    return tl.where(found, new_tau, tau), tl.where(found, new_iota, iota)


@triton.jit
def _group_maxima(row, V, inv_temperature, group_max_ptr, TARGET_PROBS: tl.constexpr, GROUP_ROWS: tl.constexpr):
    # one pass over the row: the largest value of each group of GROUP consecutive tokens, to scratch
    # (slots 0 .. ceil(V / GROUP) - 1; -inf for a group with no value of mass)
    rows = tl.arange(0, GROUP_ROWS)
    lanes = tl.arange(0, GROUP)
    num_groups = tl.cdiv(V, GROUP)
    for start in range(0, num_groups, GROUP_ROWS):
        groups = start + rows
        offs = groups[:, None] * GROUP + lanes[None, :]
        value, _mass = row_values(row, offs, V, inv_temperature, 0.0, TARGET_PROBS)
        tl.store(group_max_ptr + groups, tl.max(value, axis=1), mask=groups < num_groups)


@triton.jit
def _kth_largest_key(key, k):
    # the k-th largest of the order keys `key` (int64 in [0, 2**32); -1: no entry), k >= 1: the
    # largest c with at least k keys >= c, built bit by bit from the top (32 counts over the block,
    # in registers); 0 when fewer than k keys are given
    c = tl.full([], 0, tl.int64)
    for step in range(32):
        trial = c | (tl.full([], 1, tl.int64) << (31 - step))
        at_least = tl.sum((key >= trial).to(tl.int32), axis=0)
        c = tl.where(at_least >= k, trial, c)
    return c


@triton.jit
def _value_of_key(key):
    # the inverse of _order_key (int64 in [0, 2**32) -> float32)
    shifted = (key - 2147483648).to(tl.int32)
    return tl.where(shifted >= 0, shifted, shifted ^ 0x7FFFFFFF).to(tl.float32, bitcast=True)


@triton.jit
def _top_k_fast(row, V, inv_temperature, k, top_p, min_p, group_max_ptr, group_ids_ptr, TARGET_PROBS: tl.constexpr,
                GROUP_ROWS: tl.constexpr, GROUP_BLOCK: tl.constexpr, CAP_GROUPS: tl.constexpr):
    # The summary (done, m, S, tau, iota) of a row with 1 <= k <= MAX_FAST_K, in one pass over the
    # row plus a gather of at most CAP_GROUPS groups; done = False (nothing else meaningful) when more
    # than CAP_GROUPS groups qualify (ties), and the caller takes the radix path.
    #
    # Why the gathered groups hold the answer: let c_k be the k-th largest group maximum (counting
    # multiplicity) and tau_k the row's k-th largest value. The k largest group maxima are k distinct
    # tokens of value >= c_k, so tau_k >= c_k. Every token of the row's first k (and every token tied
    # with tau_k) has value >= tau_k >= c_k, so its group's maximum is >= c_k: it is gathered. A token
    # not gathered has value <= its group maximum < c_k <= tau_k, so it comes after all of those in
    # the row's order, and the first k gathered tokens (in that order) are the row's first k. min_p
    # keeps a prefix of the order and top_k and top_p act on the first k only, so resolving the knobs
    # among the gathered tokens is exact. (Fewer than k groups with mass: every such group is gathered.)
    _group_maxima(row, V, inv_temperature, group_max_ptr, TARGET_PROBS, GROUP_ROWS)
    tl.debug_barrier()  # the maxima written by every thread of the program
    groups = tl.arange(0, GROUP_BLOCK)
    num_groups = tl.cdiv(V, GROUP)
    group_max = tl.load(group_max_ptr + groups, mask=groups < num_groups, other=float("-inf"))
    m = tl.max(group_max, axis=0)
    done = True
    mass = tl.full([], 0.0, tl.float32)
    tau = tl.full([], float("inf"), tl.float32)
    iota = tl.full([], -1, tl.int32)
    if m > float("-inf"):  # (else nothing is kept, as in truncate_row)
        has_mass = (groups < num_groups) & (group_max > float("-inf"))
        key = tl.where(has_mass, _order_key(group_max), -1)
        qualify = has_mass & (key >= _kth_largest_key(key, k))
        count = tl.sum(qualify.to(tl.int32), axis=0)
        done = count <= CAP_GROUPS
        if done:
            # compact the qualifying group ids (in id order) to scratch slots 0 .. count - 1
            slot_of = tl.cumsum(qualify.to(tl.int32), axis=0) - 1
            tl.store(group_ids_ptr + slot_of, groups, mask=qualify)
            tl.debug_barrier()
            slots = tl.arange(0, CAP_GROUPS)
            ids = tl.load(group_ids_ptr + slots, mask=slots < count, other=0)
            offs = ids[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
            offs = tl.where((slots < count)[:, None], offs, V)  # unused slots: read nothing
            value, weight = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
            minp_threshold = min_p
            if TARGET_PROBS:
                minp_threshold = min_p * m
            play = (value > float("-inf")) & (weight >= minp_threshold) & (offs < V)
            # sort keys in the row's order: value key (order-preserving, 32 bits) high, then the id
            # reversed, so a descending sort puts ties lowest id first; -1 (no token) sorts last
            id_max = tl.full([], INT32_MAX, tl.int64)
            order = tl.where(play, (_order_key(value) << 31) + (id_max - offs), -1)
            order = tl.sort(tl.reshape(order, [CAP_GROUPS * GROUP]), descending=True)
            rank = tl.arange(0, CAP_GROUPS * GROUP)
            ranked_value = _value_of_key(order >> 31)
            ranked_id = (id_max - (order & id_max)).to(tl.int32)
            if TARGET_PROBS:
                ranked_mass = ranked_value
            else:
                ranked_mass = tl.exp(ranked_value - m)
            kept = (order >= 0) & (rank < k)  # min_p, then top_k
            ranked_mass = tl.where(kept, ranked_mass, 0.0)
            if top_p < 1.0:
                # a token survives iff the kept mass before it is below top_p * M (the first one always)
                before = tl.cumsum(ranked_mass, axis=0) - ranked_mass
                kept = kept & ((before < top_p * tl.sum(ranked_mass, axis=0)) | (rank == 0))
            last = tl.max(tl.where(kept, rank, -1), axis=0)
            mass = tl.sum(tl.where(kept, ranked_mass, 0.0), axis=0)
            tau = tl.sum(tl.where(rank == last, ranked_value, 0.0), axis=0)
            iota = tl.sum(tl.where(rank == last, ranked_id, 0), axis=0)
    return done, m, mass, tau, iota


@triton.jit
def truncate_row(row, V, inv_temperature, k, top_p, min_p, group_max_ptr, group_ids_ptr, TARGET_PROBS: tl.constexpr,
                 BLOCK: tl.constexpr, GROUP_ROWS: tl.constexpr, GROUP_BLOCK: tl.constexpr,
                 CAP_GROUPS: tl.constexpr):
    # A row's summary (m, S, tau, iota) under the knobs (normalised by request_knobs): m = -inf and
    # nothing kept for a row with no value of mass. Rows with 1 <= k <= MAX_FAST_K (and at most
    # GROUP_BLOCK groups) try the one-pass path first; the radix path below is the fallback.
    done = False
    m = tl.full([], float("-inf"), tl.float32)
    mass = tl.full([], 0.0, tl.float32)
    tau = tl.full([], float("-inf"), tl.float32)
    iota = tl.full([], INT32_MAX, tl.int32)
    if (k >= 1) & (k <= MAX_FAST_K) & (tl.cdiv(V, GROUP) <= GROUP_BLOCK):
        done, m, mass, tau, iota = _top_k_fast(row, V, inv_temperature, k, top_p, min_p, group_max_ptr,
                                               group_ids_ptr, TARGET_PROBS, GROUP_ROWS, GROUP_BLOCK, CAP_GROUPS)
    if not done:
        m, mass, tau, iota = _truncate_row_radix(row, V, inv_temperature, k, top_p, min_p, TARGET_PROBS, BLOCK)
    return m, mass, tau, iota


@triton.jit
def _truncate_row_radix(row, V, inv_temperature, k, top_p, min_p, TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # the radix path (any knobs): a row's summary (m, S, tau, iota)
    high = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        value, _mass = row_values(row, offs, V, inv_temperature, 0.0, TARGET_PROBS)
        high = tl.maximum(high, value)
    m = tl.max(high, axis=0)
    tau = tl.full([], float("-inf"), tl.float32)
    iota = tl.full([], INT32_MAX, tl.int32)
    mass = tl.full([], 0.0, tl.float32)
    if m == float("-inf"):
        tau = float("inf")
        iota = -1
    else:
        minp_threshold = min_p
        if TARGET_PROBS:
            minp_threshold = min_p * m
        if k > 0:
            tau, iota = select_cutoff(row, V, inv_temperature, m, minp_threshold, tau, iota, k.to(tl.float32), False,
                                      TARGET_PROBS, BLOCK)
        if top_p < 1.0:
            kept_mass = _set_mass(row, V, inv_temperature, m, minp_threshold, tau, iota, TARGET_PROBS, BLOCK)
            tau, iota = select_cutoff(row, V, inv_temperature, m, minp_threshold, tau, iota, top_p * kept_mass, True,
                                      TARGET_PROBS, BLOCK)
        mass = _set_mass(row, V, inv_temperature, m, minp_threshold, tau, iota, TARGET_PROBS, BLOCK)
        # min_p folded into the cutoff: every kept token has mass >= the threshold, and the order puts
        # them first, so the last of them bounds the cutoff
        if min_p > 0.0:
            tau_min, iota_min = _lowest_kept(row, V, inv_temperature, m, minp_threshold, tau, iota, TARGET_PROBS,
                                             BLOCK)
            tau = tau_min
            iota = iota_min
    return m, mass, tau, iota


@triton.jit
def _lowest_kept(row, V, inv_temperature, m, minp_threshold, tau, iota, TARGET_PROBS: tl.constexpr,
                 BLOCK: tl.constexpr):
    # the last token in play in the row's order, as a cutoff (value, its largest id)
    low = tl.full([BLOCK], float("inf"), tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        value, mass = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
        low = tl.minimum(low, tl.where(_in_play(value, mass, offs, minp_threshold, tau, iota), value, float("inf")))
    low_value = tl.min(low, axis=0)
    last = tl.full([BLOCK], -1, tl.int32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        value, mass = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
        play = _in_play(value, mass, offs, minp_threshold, tau, iota) & (value == low_value)
        last = tl.maximum(last, tl.where(play, offs, -1))
    return low_value, tl.max(last, axis=0)


@triton.jit
def _truncation_prepass_kernel(
    summary_f_ptr, summary_i_ptr,  # [B, K + 1, 2, 4] float32 and [B, K + 1, 2] int32 scratch
    group_max_ptr, group_ids_ptr,  # [B, K + 1, 2, ceil(V / GROUP)] float32, [B, K + 1, 2, CAP_GROUPS] int32 scratch
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits (read only with TRUNCATE_DRAFT)
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B]
    top_k_ptr, top_p_ptr, min_p_ptr,  # [B] int32, float32, float32 (read only where HAS_*)
    V, NUM_SLOTS,
    MODE: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    TRUNCATE_DRAFT: tl.constexpr,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    BLOCK: tl.constexpr,
    GROUP_ROWS: tl.constexpr,  # groups per chunk of the fast path's pass
    GROUP_BLOCK: tl.constexpr,  # a power of two >= the row's groups (up to 8192; more: the radix path)
    CAP_GROUPS: tl.constexpr,  # the most groups the fast path gathers
):
    b = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1)
    side = tl.program_id(2)
    n, greedy, inv_temperature, _position, _key = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    truncated, k, top_p, min_p = request_knobs(b, top_k_ptr, top_p_ptr, min_p_ptr, V, HAS_TOP_K, HAS_TOP_P,
                                               HAS_MIN_P)
    wanted = truncated & (~greedy) & (r <= n) & (side == 0)
    if TRUNCATE_DRAFT:
        wanted = wanted | (truncated & (~greedy) & (r < n) & (side == 1))
    if wanted:
        cell = (b * NUM_SLOTS + r) * 2 + side
        group_max = group_max_ptr + cell * tl.cdiv(V, GROUP)
        group_ids = group_ids_ptr + cell * CAP_GROUPS
        if side == 0:
            m, mass, tau, iota = truncate_row(target_ptr + b * target_stride_b + r * target_stride_k, V,
                                              inv_temperature, k, top_p, min_p, group_max, group_ids, TARGET_PROBS,
                                              BLOCK, GROUP_ROWS, GROUP_BLOCK, CAP_GROUPS)
        else:
            m, mass, tau, iota = truncate_row(draft_ptr + b * draft_stride_b + r * draft_stride_k, V,
                                              inv_temperature, k, top_p, min_p, group_max, group_ids, False,
                                              BLOCK, GROUP_ROWS, GROUP_BLOCK, CAP_GROUPS)
        tl.store(summary_f_ptr + cell * SUMMARY_FIELDS + 0, m)
        tl.store(summary_f_ptr + cell * SUMMARY_FIELDS + 1, mass)
        tl.store(summary_f_ptr + cell * SUMMARY_FIELDS + 2, tau)
        tl.store(summary_f_ptr + cell * SUMMARY_FIELDS + 3, 0.0)
        tl.store(summary_i_ptr + cell, iota)


@triton.jit
def read_summary(summary_f_ptr, summary_i_ptr, b, r, side, NUM_SLOTS):
    # (m, S, tau, iota) of row r (side 0: target, 1: draft) of request b
    cell = (b * NUM_SLOTS + r) * 2 + side
    return (tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 0), tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 1),
            tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 2), tl.load(summary_i_ptr + cell))


@triton.jit
def truncated_prob_of(raw, index, inv_temperature, m, mass, tau, iota, TARGET_PROBS: tl.constexpr):
    # p'(y) from the row's stored value at y and its summary: 0 outside the cutoff and for a row
    # with no value of mass
    raw = raw.to(tl.float32)
    if TARGET_PROBS:
        p = clean_prob(raw)
        value = tl.where(p > 0.0, p, float("-inf"))
    else:
        z = clean(raw * inv_temperature)
        value = tl.where(z == 0.0, 0.0, z)
        p = tl.exp(value - tl.where(m == float("-inf"), 0.0, m))
    kept = kept_by(value, index, tau, iota) & (value > float("-inf"))
    # (a row with no mass keeps nothing: S = 0; tested apart, a scalar)
    return tl.where(mass > 0.0, tl.where(kept, p / tl.where(mass > 0.0, mass, 1.0), 0.0), 0.0)


@triton.jit
def _race_kept_logits(t_row, V, inv_temperature, key, exclude, tau, iota, BLOCK: tl.constexpr):
    # the race over p' of a logit row: the logits race with every token outside the cutoff (and
    # `exclude`) at -inf; the winner's index, -1 when nothing is kept
    lane_z = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        z = load_scaled(t_row, offs, V, inv_temperature)
        kept = kept_by(tl.where(z == 0.0, 0.0, z), offs, tau, iota) & (offs != exclude)
        z = tl.where(kept, z, float("-inf"))
        e = neg_log_of_uniform(uniform_of(hash_word(key, offs)))
        better = tl.exp(z - lane_z) * lane_e > e
        lane_idx = tl.where(better, offs, lane_idx)
        lane_z = tl.where(better, z, lane_z)
        lane_e = tl.where(better, e, lane_e)
    _z, _g, index = best_pair(lane_z, -tl.log(lane_e), lane_idx)
    return index


@triton.jit
def _race_kept_weights(t_row, d_row, V, inv_temperature, key, exclude, m, mass, tau, iota, md, sd, taud, iotad,
                       Q: tl.constexpr, TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # the race over w = max(p' - q', 0) (Q: what q is; Q_NONE: w = p' without `exclude`): argmax
    # w / E over w > 0, compared as w E' > w' E; the winner's index, -1 when w is zero everywhere
    lane_w = tl.zeros([BLOCK], tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        raw = tl.load(t_row + offs, mask=offs < V, other=0.0)
        w = truncated_prob_of(raw, offs, inv_temperature, m, mass, tau, iota, TARGET_PROBS)
        if Q == Q_NONE:
            w = tl.where(offs == exclude, 0.0, w)
        else:
            d = tl.load(d_row + offs, mask=offs < V, other=0.0).to(tl.float32)
            if Q == Q_TRUNCATED_LOGITS:
                q = truncated_prob_of(d, offs, inv_temperature, md, sd, taud, iotad, False)
            elif Q == Q_LOGITS:
                q = tl.exp(clean(d * inv_temperature) - tl.where(md == float("-inf"), 0.0, md)) / sd
            else:
                q = tl.where(d != d, 0.0, d)  # noqa: PLR0124 (NaN test)
            w = w - q
        w = tl.where(offs < V, w, 0.0)
        e = neg_log_of_uniform(uniform_of(hash_word(key, offs)))
        better = w * lane_e > lane_w * e
        lane_idx = tl.where(better, offs, lane_idx)
        lane_w = tl.where(better, w, lane_w)
        lane_e = tl.where(better, e, lane_e)
    ratio = tl.where(lane_idx >= 0, tl.log(tl.where(lane_idx >= 0, lane_w, 1.0)) - tl.log(lane_e), float("-inf"))
    _z, _g, index = best_pair(ratio, tl.zeros_like(ratio), lane_idx)
    return index


@triton.jit
def _sample_kept(t_row, V, inv_temperature, key, exclude, m, mass, tau, iota, TARGET_PROBS: tl.constexpr,
                 BLOCK: tl.constexpr):
    # the race over p' (token `exclude` left out; -1: none)
    if TARGET_PROBS:
        index = _race_kept_weights(t_row, t_row, V, 1.0, key, exclude, m, mass, tau, iota, 0.0, 1.0, 0.0, 0,
                                   Q_NONE, True, BLOCK)
    else:
        index = _race_kept_logits(t_row, V, inv_temperature, key, exclude, tau, iota, BLOCK)
    return index


@triton.jit
def _verify_truncated_kernel(
    out_ptr, out_stride,  # [B, K + 1] int64
    num_emitted_ptr, num_accepted_ptr,  # [B] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits or probs (unused if DRAFT == 0)
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B]
    conditional_rates_ptr,  # [max(K, 1)] float32 (the synthetic mode)
    top_k_ptr, top_p_ptr, min_p_ptr,  # [B]
    summary_f_ptr, summary_i_ptr,  # the prepass's summaries
    V, NUM_SLOTS,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    TRUNCATE_DRAFT: tl.constexpr,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    truncated, _k, _p, _mp = request_knobs(b, top_k_ptr, top_p_ptr, min_p_ptr, V, HAS_TOP_K, HAS_TOP_P, HAS_MIN_P)
    truncated = truncated & (~greedy)

    slots = tl.arange(0, OUT_BLOCK)
    tokens = tl.full([OUT_BLOCK], -1, tl.int64)
    num_emitted = 0
    num_accepted = 0
    i = 0
    done = 0
    while done == 0:
        t_row = target_ptr + b * target_stride_b + i * target_stride_k
        d_row = draft_ptr + b * draft_stride_b + i * draft_stride_k
        x = tl.load(draft_ids_ptr + b * draft_ids_stride + i, mask=i < n, other=-1)
        x_valid = (x >= 0) & (x < V) & (i < n)
        token = x * 0 - 1
        accepted = x_valid & (i < 0)
        own_token = i < 0  # the target's own sample at this row (bonus row; synthetic rejection)
        if MODE == MODE_SYNTHETIC:
            u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
            rate = tl.load(conditional_rates_ptr + i, mask=i < n, other=0.0)
            accepted = x_valid & (u < rate)
            if accepted:
                token = x
            elif greedy:
                _best_val, best_idx = argmax_slice(t_row, 0, V, TARGET_PROBS, BLOCK)
                token = best_idx.to(tl.int64)
            else:
                own_token = i >= 0
        elif greedy:
            _best_val, best_idx = argmax_slice(t_row, 0, V, TARGET_PROBS, BLOCK)
            accepted = x_valid & (x == best_idx)
            token = tl.where(accepted, x, best_idx.to(tl.int64))
        elif i == n:
            own_token = i >= 0
        elif truncated:
            token, accepted = _truncated_draft(t_row, d_row, b, i, x, x_valid, inv_temperature, key_of_seed,
                                               position, summary_f_ptr, summary_i_ptr, V, NUM_SLOTS, DRAFT,
                                               TARGET_PROBS, TRUNCATE_DRAFT, BLOCK)
        else:
            token, accepted = _untruncated_draft(t_row, d_row, x, x_valid, inv_temperature, key_of_seed, position + i,
                                                 V, DRAFT, TARGET_PROBS, BLOCK)
        if own_token:
            key = stream_key(key_of_seed, position + i, SAMPLE)
            if truncated:
                m, mass, tau, iota = read_summary(summary_f_ptr, summary_i_ptr, b, i, 0, NUM_SLOTS)
                token = _sample_kept(t_row, V, inv_temperature, key, -1, m, mass, tau, iota, TARGET_PROBS,
                                     BLOCK).to(tl.int64)
            else:
                _z, _g, own = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, True, BLOCK)
                token = own.to(tl.int64)
        tokens = tl.where(slots == i, token, tokens)
        num_emitted += (token >= 0).to(tl.int32)
        num_accepted += accepted.to(tl.int32)
        i += 1
        done = ((~accepted) | (i > n)).to(tl.int32)

    valid = request_valid(inv_temperature)  # an invalid request emits nothing
    tl.store(out_ptr + b * out_stride + slots, tl.where(valid, tokens, -1), mask=slots < NUM_SLOTS)
    tl.store(num_emitted_ptr + b, tl.where(valid, num_emitted, 0))
    tl.store(num_accepted_ptr + b, tl.where(valid, num_accepted, 0))


@triton.jit
def _untruncated_draft(t_row, d_row, x, x_valid, inv_temperature, key_of_seed, position, V, DRAFT: tl.constexpr,
                       TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # today's arithmetic for one draft slot of a probabilistic request: (token, accepted); the
    # token is -1 for a target row with no finite value (the request stops there)
    t_at_x, d_at_x = read_at_draft(t_row, d_row, x, x_valid, DRAFT)
    u = uniform_at(stream_key(key_of_seed, position, ACCEPT), 0)
    if TARGET_PROBS:
        m = 0.0
        s = 1.0
        md = float("-inf")  # one-hot drafts: the residual leaves x out
        sd = 1.0
        if DRAFT == DRAFT_LOGITS:
            md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, 0, V, inv_temperature, False, BLOCK)
        if DRAFT == DRAFT_PROBS:
            md = 0.0
    else:
        m, s, md, sd = softmax_stats_slice(t_row, d_row, 0, V, inv_temperature, DRAFT == DRAFT_LOGITS, BLOCK)
        if DRAFT == DRAFT_PROBS:
            md = 0.0
    token = x * 0 - 1
    accepted = x_valid & (position < 0) & (position > 0)
    if m != float("-inf"):
        accepted = accept_test(u, x_valid, t_at_x, d_at_x, inv_temperature, m, s, md, sd, DRAFT, TARGET_PROBS)
        if accepted:
            token = x
        else:
            token = _residual_token(t_row, d_row, V, inv_temperature, stream_key(key_of_seed, position, RESIDUAL), x,
                                    x_valid, m, s, md, sd, DRAFT, TARGET_PROBS, True, BLOCK)
    return token, accepted


@triton.jit
def _truncated_draft(t_row, d_row, b, i, x, x_valid, inv_temperature, key_of_seed, position, summary_f_ptr,
                     summary_i_ptr, V, NUM_SLOTS, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                     TRUNCATE_DRAFT: tl.constexpr, BLOCK: tl.constexpr):
    # one draft slot of a truncated probabilistic request: accept iff u q'(x) < p'(x); on rejection
    # the race over max(p' - q', 0) (p' without x for a one-hot draft, p' itself for an id outside
    # [0, V) or when nothing is left); (token, accepted)
    t_at_x, d_at_x = read_at_draft(t_row, d_row, x, x_valid, DRAFT)
    u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
    m, mass, tau, iota = read_summary(summary_f_ptr, summary_i_ptr, b, i, 0, NUM_SLOTS)
    x_safe = tl.where(x_valid, x, 0)
    p_x = truncated_prob_of(t_at_x, x_safe, inv_temperature, m, mass, tau, iota, TARGET_PROBS)
    md = tl.full([], float("-inf"), tl.float32)  # one-hot
    sd = tl.full([], 1.0, tl.float32)
    taud = tl.full([], float("-inf"), tl.float32)
    iotad = tl.full([], INT32_MAX, tl.int32)
    q_x = tl.full([], 1.0, tl.float32)
    if DRAFT == DRAFT_LOGITS:
        if TRUNCATE_DRAFT:
            md, sd, taud, iotad = read_summary(summary_f_ptr, summary_i_ptr, b, i, 1, NUM_SLOTS)
            q_x = truncated_prob_of(d_at_x, x_safe, inv_temperature, md, sd, taud, iotad, False)
        else:
            md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, 0, V, inv_temperature, False, BLOCK)
            q_x = tl.exp(clean(d_at_x.to(tl.float32) * inv_temperature) - tl.where(md == float("-inf"), 0.0, md))
            q_x = q_x / tl.where(sd == 0.0, 1.0, sd)
        q_x = tl.where(md == float("-inf"), 1.0, q_x)  # no finite draft logit: one-hot
    if DRAFT == DRAFT_PROBS:
        md = tl.full([], 0.0, tl.float32)
        q_x = d_at_x.to(tl.float32)
        q_x = tl.where(q_x != q_x, 0.0, q_x)  # noqa: PLR0124 (NaN test)
    token = x * 0 - 1
    accepted = x_valid & (u * q_x < p_x)
    if TARGET_PROBS:
        row_valid = m <= float("inf")  # a probability row with no mass rejects (p'(x) = 0) and emits nothing
    else:
        row_valid = m != float("-inf")
        accepted = accepted & row_valid
    if accepted:
        token = x
    elif row_valid:
        key = stream_key(key_of_seed, position + i, RESIDUAL)
        if (md == float("-inf")) | (~x_valid):
            exclude = tl.where(x_valid, x, -1)
            index = _sample_kept(t_row, V, inv_temperature, key, exclude, m, mass, tau, iota, TARGET_PROBS, BLOCK)
            token = tl.where(index >= 0, index.to(tl.int64), tl.where(x_valid & (p_x > 0.0), x, -1))
        else:
            if DRAFT == DRAFT_LOGITS:
                if TRUNCATE_DRAFT:
                    index = _race_kept_weights(t_row, d_row, V, inv_temperature, key, -1, m, mass, tau, iota, md, sd,
                                               taud, iotad, Q_TRUNCATED_LOGITS, TARGET_PROBS, BLOCK)
                else:
                    index = _race_kept_weights(t_row, d_row, V, inv_temperature, key, -1, m, mass, tau, iota, md, sd,
                                               taud, iotad, Q_LOGITS, TARGET_PROBS, BLOCK)
            else:
                index = _race_kept_weights(t_row, d_row, V, inv_temperature, key, -1, m, mass, tau, iota, md, sd,
                                           taud, iotad, Q_PROBS, TARGET_PROBS, BLOCK)
            if index < 0:
                index = _sample_kept(t_row, V, inv_temperature, key, -1, m, mass, tau, iota, TARGET_PROBS, BLOCK)
            token = index.to(tl.int64)
    return token, accepted


__all__ = ["DRAFT_NONE", "_truncation_prepass_kernel", "_verify_truncated_kernel"]
