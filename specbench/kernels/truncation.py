"""Truncation (``top_k``, ``top_p``, ``min_p``) for the Triton backend: each truncated row's summary,
then one program per request that verifies from it.

A row's summary ``(m, S, tau, iota, n)`` and how it is found (without sorting the row) are in
``specbench/kernels/cutoffs.py``: the row's largest value, the kept mass, the cutoff ``(tau, iota)``
in the row's order (token ``y`` is kept iff ``v_y > tau`` or ``v_y == tau and y <= iota``), and the
length of its kept list (the ids and masses of at most ``MAX_FAST_K`` kept tokens, for rows with
``1 <= top_k <= 64``; 0 for a row found by the radix path). Only the rows a truncated request needs
get one: target rows ``0..n`` and, with ``TRUNCATE_DRAFT``, draft-logit rows ``0..n-1`` of
non-greedy requests with a knob on. Three ways to run a step:

1. Small batches (``FUSED`` off): ``_truncation_prepass_kernel`` (grid ``B x (K + 1) x (sides *
   SLICES)``) writes every such row's summary before the step: each of a row's ``SLICES`` programs
   writes the group maxima of its slice, and the row's last program to arrive (an arrival count per
   row, left at zero) finds the cutoff from them (or by the radix path). Every row of the batch is
   summarised at once, so the GPU is filled however small the batch.
2. Large batches (``FUSED``): no prepass; the step's program summarises each row itself when it
   first needs it, in the order it verifies them, so rows after a request's first rejection are
   never read, as without truncation.

3. A batch given ``top_p`` or ``min_p`` but no ``top_k`` (any batch size): the split histogram path
   (``specbench/kernels/histogram.py``) writes every such row's summary first, in six launches (seven
   deciding drafts, below) with each row split across programs, and the step reads them as on the prepass
   path. (The launch variants ``triton-radix-...`` write the same summaries by the split radix path,
   ``radix.py``, in ten.) Where the launcher says (``launch._decides``: probabilistic, ``top_p`` given, no
   log-probabilities, drafts one-hot, probabilities or truncated logits, a batch large enough), each
   request's drafts are first decided from bounds, and the path searches only the rows the step will read:
   the bounds from one pass over the draft rows before the search (``draft_bounds.py``; a batch given no
   ``min_p``), or from the search's first level (``histogram.STEP_DECIDE``; a batch given ``min_p`` too).
   The step (``DECIDED``) then emits the drafts decided accepted and starts at the first slot left,
   stopping there when it was decided rejected.

``_verify_truncated_kernel`` (grid ``B``): one program per request for every mode, target form and
draft form once any knob is given. A request with every knob off, or a greedy one, takes today's
arithmetic (the helpers ``sequential.py`` uses); a truncated one reads its rows' summaries: ``p'(x)
= kept(x) exp(z_x - m) / S`` (``p(x) / S`` for probabilities), ``q'(x)`` likewise for truncated draft
logits (untruncated ones: their softmax; draft probabilities as given), accepts iff ``u q'(x) <
p'(x)`` and races over ``max(p' - q', 0)`` or ``p'``: over the kept list when the row has one (every
token outside it has ``p' = 0``, and each token's race value depends only on its id, so the winner
is the row race's), otherwise over the row with the tokens outside the cutoff left out.

``DEFER`` (a step from the split histogram or radix path's summaries, way 3: on a GPU at every batch size
unless one program per request is forced, and wherever the batch splits as the untruncated step does; a
batch given ``top_k`` races over its kept lists in the step):
a race over a whole row (a row with no kept list) is not run by the request's one program, which
writes instead a record of it (the row, what it races, the token it leaves out, the token emitted
if nothing is kept, the stream, the summaries); ``_truncated_terminal_kernel`` (grid ``B x S``)
then races that row one slice per program with the same tokens' exponentials, and the request's
last program merges the slices (``split.merge_race``, as the untruncated split path does), writes
the token and the count. A residual with no mass anywhere is raced again over ``p'`` by that last
program, as the one program does. Every request's record says whether it left a race (``R_KIND``).

Scratch (float32 / int32, ``R = K + 1``, a *cell* per (request, row, side), side 0 the target row
and 1 the draft row): the summaries ``[B, R, 2, 4]`` (m, S, tau, n) and ``[B, R, 2]`` (iota) first
(the log-probability epilogue, ``logprobs.py``, reads them there), then per cell ``ceil(V / 32)``
group maxima, ``CAP_GROUPS`` gathered group ids, and the kept list: ``MAX_FAST_K`` ids, values (the
compaction's) and masses; after the split paths' state and partials (``radix.py``), with ``DEFER`` the
records ``[B, RECORD]`` and the terminal race's partials ``[B, S, 2]``, then the split histogram path's
counts and candidate lists (``histogram.py``). A cell's scratch is read only after it
was written in the same step.
"""

import triton
import triton.language as tl

from specbench.kernels.cutoffs import (
    GROUP,
    INT32_MAX,
    MAX_FAST_K,
    group_maxima,
    kept_by,
    summarize_row,
    top_k_path,
)
from specbench.kernels.decide import (
    ACCEPT,
    DRAFT_LOGITS,
    DRAFT_NONE,
    DRAFT_PROBS,
    MODE_SYNTHETIC,
    RESIDUAL,
    SAMPLE,
    accept_test,
    draft_prob_of,
    read_at_draft,
    request_setup,
    request_valid,
    sample_row,
)
from specbench.kernels.dependent_launch import wait_for_launch_before
from specbench.kernels.rng import hash_word, neg_log_of_uniform, stream_key, uniform_at, uniform_of
from specbench.kernels.rows import (
    argmax_slice,
    best_pair,
    clean,
    clean_prob,
    load_scaled,
    race_lanes,
    ratio_best,
    softmax_stats_slice,
)
from specbench.kernels.sequential import _residual_token
from specbench.kernels.split import RACE_FIELDS, _terminal_key, last_to_arrive, merge_race, store_race

SUMMARY_FIELDS = tl.constexpr(4)  # per cell: m, S, tau, n (the kept list's length) (+ one int: iota)
# the residual's draft side in the truncated races
Q_NONE = tl.constexpr(0)  # w = p' (a token `exclude` left out)
Q_TRUNCATED_LOGITS = tl.constexpr(1)  # q' from the draft row's summary
Q_LOGITS = tl.constexpr(2)  # q = softmax of the draft logits (md, 1 / sd)
Q_PROBS = tl.constexpr(3)  # q as given (cleaned as target probabilities are)
# DEFER: a request's terminal race over a whole row (a row with no kept list), left by the step to
# _truncated_terminal_kernel in a record of RECORD float32 and RECORD int32 per request
RECORD = tl.constexpr(8)
# per request, where its first drafts were decided before the search (draft_bounds.py, histogram.STEP_DECIDE): t, the
# first slot not surely accepted; clean, whether the step stops there; the stop row's race winner where
# bracket_race.py decided it (-1: not decided; written only where that launch runs)
DECIDED_FIELDS = tl.constexpr(3)
NO_RACE = tl.constexpr(-1)  # the record's kinds: the step emitted every token itself;
RACE_KEPT = tl.constexpr(0)  # the race over p' (token `exclude` left out);
RACE_RESIDUAL = tl.constexpr(1)  # the race over max(p' - q', 0), q by the draft form
R_KIND = tl.constexpr(0)  # int fields: the race (a kind above), its row, the token it leaves out,
R_ROW = tl.constexpr(1)  # the token emitted when a race over p' finds no mass, the stream's purpose, and the
R_EXCLUDE = tl.constexpr(2)  # cutoff ids of the target and draft rows
R_FALLBACK = tl.constexpr(3)
R_PURPOSE = tl.constexpr(4)
R_IOTA = tl.constexpr(5)
R_IOTAD = tl.constexpr(6)
R_M = tl.constexpr(0)  # float fields: the target row's summary (m, S, tau), the draft side's (md, sd, taud)
R_MASS = tl.constexpr(1)
R_TAU = tl.constexpr(2)
R_MD = tl.constexpr(3)
R_SD = tl.constexpr(4)
R_TAUD = tl.constexpr(5)


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
def store_summary(summary_f_ptr, summary_i_ptr, cell, m, mass, tau, iota, length):
    tl.store(summary_f_ptr + cell * SUMMARY_FIELDS + 0, m)
    tl.store(summary_f_ptr + cell * SUMMARY_FIELDS + 1, mass)
    tl.store(summary_f_ptr + cell * SUMMARY_FIELDS + 2, tau)
    tl.store(summary_f_ptr + cell * SUMMARY_FIELDS + 3, length.to(tl.float32))
    tl.store(summary_i_ptr + cell, iota)


@triton.jit
def summary_wanted(truncated, greedy, r, n, side, TRUNCATE_DRAFT: tl.constexpr):
    # whether the cell (row r, side) of a request has a summary written before the step: target rows
    # 0..n and, with TRUNCATE_DRAFT, draft rows 0..n-1 of a non-greedy request with a knob on
    wanted = truncated & (~greedy) & (r <= n) & (side == 0)
    if TRUNCATE_DRAFT:
        wanted = wanted | (truncated & (~greedy) & (r < n) & (side == 1))
    return wanted


@triton.jit
def read_summary(summary_f_ptr, summary_i_ptr, b, r, side, NUM_SLOTS):
    # (m, S, tau, iota) of row r (side 0: target, 1: draft) of request b
    cell = (b * NUM_SLOTS + r) * 2 + side
    return (tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 0), tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 1),
            tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 2), tl.load(summary_i_ptr + cell))


@triton.jit
def _row_summary(cell, row, V, inv_temperature, k, top_p, min_p, summary_f_ptr, summary_i_ptr, group_max_ptr,
                 group_ids_ptr, list_ids_ptr, list_v_ptr, list_w_ptr, FUSED: tl.constexpr,
                 TARGET_PROBS: tl.constexpr, RADIX_BLOCK: tl.constexpr, GROUP_ROWS: tl.constexpr,
                 GROUP_BLOCK: tl.constexpr, CAP_GROUPS: tl.constexpr):
    # The summary (m, S, tau, iota, n) of a cell: found here and stored (FUSED), or the prepass's
    if FUSED:
        m, mass, tau, iota, length = summarize_row(
            row, V, inv_temperature, k, top_p, min_p, group_max_ptr + cell * tl.cdiv(V, GROUP),
            group_ids_ptr + cell * CAP_GROUPS, list_ids_ptr + cell * MAX_FAST_K, list_v_ptr + cell * MAX_FAST_K,
            list_w_ptr + cell * MAX_FAST_K, TARGET_PROBS, RADIX_BLOCK, GROUP_ROWS, GROUP_BLOCK, CAP_GROUPS, True)
        store_summary(summary_f_ptr, summary_i_ptr, cell, m, mass, tau, iota, length)
    else:
        m = tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 0)
        mass = tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 1)
        tau = tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 2)
        length = tl.load(summary_f_ptr + cell * SUMMARY_FIELDS + 3).to(tl.int32)
        iota = tl.load(summary_i_ptr + cell)
    return m, mass, tau, iota, length


@triton.jit
def cell_program(num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, top_k_ptr, top_p_ptr, min_p_ptr, V,
                  NUM_SLOTS, NUM_SLICES, ONE_PER_CELL: tl.constexpr, MODE: tl.constexpr, HAS_TOP_K: tl.constexpr,
                  HAS_TOP_P: tl.constexpr, HAS_MIN_P: tl.constexpr):
    # a program of the launches that summarise cells before a step (the prepass, radix.py, histogram.py):
    # grid (B, K + 1, sides * NUM_SLICES), or (B, K + 1, sides) for a step of one program per cell (slice 0);
    # (b, r, side, s), the request's draft count (s: the slice, or for histogram.py's -slicesN programs the
    # group of slices), greediness and 1 / temperature, and its knobs (request_knobs)
    b = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1)
    if ONE_PER_CELL:
        side = tl.program_id(2)
        s = 0
    else:
        side = tl.program_id(2) // NUM_SLICES
        s = tl.program_id(2) % NUM_SLICES
    n, greedy, inv_temperature, _position, _key = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    truncated, k, top_p, min_p = request_knobs(b, top_k_ptr, top_p_ptr, min_p_ptr, V, HAS_TOP_K, HAS_TOP_P,
                                               HAS_MIN_P)
    return b, r, side, s, n, greedy, inv_temperature, truncated, k, top_p, min_p


@triton.jit
def _truncation_prepass_kernel(
    summary_f_ptr, summary_i_ptr,  # [B, K + 1, 2, 4] float32 and [B, K + 1, 2] int32 scratch
    group_max_ptr, group_ids_ptr,  # [B, K + 1, 2, ceil(V / GROUP)] float32, [B, K + 1, 2, CAP_GROUPS] int32 scratch
    list_ids_ptr, list_v_ptr, list_w_ptr,  # [B, K + 1, 2, MAX_FAST_K] int32, float32, float32 scratch
    arrivals_ptr,  # [B * (K + 1) * 2] int32, zero on entry and exit (read only when SLICES > 1)
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits (read only with TRUNCATE_DRAFT)
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B]
    top_k_ptr, top_p_ptr, min_p_ptr,  # [B] int32, float32, float32 (read only where HAS_*)
    V, NUM_SLOTS,
    SLICES, SLICE_GROUPS,  # programs per row, and the groups of each one's slice
    MODE: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    TRUNCATE_DRAFT: tl.constexpr,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    RADIX_BLOCK: tl.constexpr,  # tokens per chunk of the radix path
    GROUP_ROWS: tl.constexpr,  # groups per chunk of the group maxima pass
    GROUP_BLOCK: tl.constexpr,  # a power of two >= the row's groups (up to MAX_GROUPS; more: the radix path)
    CAP_GROUPS: tl.constexpr,  # the most groups the top-k path gathers
    PDL: tl.constexpr = False,  # programmatic dependent launch (dependent_launch.py; the launcher's launch_pdl)
):
    wait_for_launch_before(PDL)  # (first: nothing above reads or writes memory)
    b, r, side, s, n, greedy, inv_temperature, truncated, k, top_p, min_p = cell_program(
        num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, top_k_ptr, top_p_ptr, min_p_ptr, V, NUM_SLOTS,
        SLICES, False, MODE, HAS_TOP_K, HAS_TOP_P, HAS_MIN_P)
    if summary_wanted(truncated, greedy, r, n, side, TRUNCATE_DRAFT):
        cell = (b * NUM_SLOTS + r) * 2 + side
        num_groups = tl.cdiv(V, GROUP)
        group_max = group_max_ptr + cell * num_groups
        t_row = target_ptr + b * target_stride_b + r * target_stride_k
        d_row = draft_ptr + b * draft_stride_b + r * draft_stride_k
        fast = top_k_path(k, V, GROUP_BLOCK)
        if fast:
            first = s * SLICE_GROUPS
            last = tl.minimum(first + SLICE_GROUPS, num_groups)
            if side == 0:
                group_maxima(t_row, V, inv_temperature, group_max, first, last, TARGET_PROBS, GROUP_ROWS)
            else:
                group_maxima(d_row, V, inv_temperature, group_max, first, last, False, GROUP_ROWS)
        finisher = True
        if SLICES > 1:
            finisher = last_to_arrive(arrivals_ptr, cell, SLICES)
        else:
            tl.debug_barrier()  # the maxima written by every thread of the program
        if finisher:
            lists = cell * MAX_FAST_K
            if side == 0:
                m, mass, tau, iota, length = summarize_row(
                    t_row, V, inv_temperature, k, top_p, min_p, group_max, group_ids_ptr + cell * CAP_GROUPS,
                    list_ids_ptr + lists, list_v_ptr + lists, list_w_ptr + lists, TARGET_PROBS, RADIX_BLOCK, GROUP_ROWS,
                    GROUP_BLOCK, CAP_GROUPS, False)
            else:
                m, mass, tau, iota, length = summarize_row(
                    d_row, V, inv_temperature, k, top_p, min_p, group_max, group_ids_ptr + cell * CAP_GROUPS,
                    list_ids_ptr + lists, list_v_ptr + lists, list_w_ptr + lists, False, RADIX_BLOCK, GROUP_ROWS,
                    GROUP_BLOCK, CAP_GROUPS, False)
            store_summary(summary_f_ptr, summary_i_ptr, cell, m, mass, tau, iota, length)


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
def _race_kept_logits(t_row, start, stop, inv_temperature, key, exclude, tau, iota, BLOCK: tl.constexpr):
    # the race over p' of a logit row on [start, stop): the logits race with every token outside the
    # cutoff (and `exclude`) at -inf; the winner as (z, -log E, index), index -1 when nothing is kept
    lane_z = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        z = load_scaled(t_row, offs, stop, inv_temperature)
        kept = kept_by(tl.where(z == 0.0, 0.0, z), offs, tau, iota) & (offs != exclude)
        z = tl.where(kept, z, float("-inf"))
        e = neg_log_of_uniform(uniform_of(hash_word(key, offs)))
        better = tl.exp(z - lane_z) * lane_e > e
        lane_idx = tl.where(better, offs, lane_idx)
        lane_z = tl.where(better, z, lane_z)
        lane_e = tl.where(better, e, lane_e)
    return best_pair(lane_z, -tl.log(lane_e), lane_idx)


@triton.jit
def _race_kept_weights(t_row, d_row, start, stop, inv_temperature, key, exclude, m, mass, tau, iota, md, sd, taud,
                       iotad, Q: tl.constexpr, TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # the race over w = max(p' - q', 0) (Q: what q is; Q_NONE: w = p' without `exclude`) on [start,
    # stop): argmax w / E over w > 0, compared as w E' > w' E; the winner as (log(w / E), 0, index),
    # index -1 when w is zero everywhere
    lane_w = tl.zeros([BLOCK], tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        raw = tl.load(t_row + offs, mask=offs < stop, other=0.0)
        w = truncated_prob_of(raw, offs, inv_temperature, m, mass, tau, iota, TARGET_PROBS)
        if Q == Q_NONE:
            w = tl.where(offs == exclude, 0.0, w)
        else:
            d = tl.load(d_row + offs, mask=offs < stop, other=0.0).to(tl.float32)
            if Q == Q_TRUNCATED_LOGITS:
                q = truncated_prob_of(d, offs, inv_temperature, md, sd, taud, iotad, False)
            elif Q == Q_LOGITS:
                q = tl.exp(clean(d * inv_temperature) - tl.where(md == float("-inf"), 0.0, md)) / sd
            else:
                q = clean_prob(d)
            w = w - q
        w = tl.where(offs < stop, w, 0.0)
        e = neg_log_of_uniform(uniform_of(hash_word(key, offs)))
        lane_w, lane_e, lane_idx = race_lanes(lane_w, lane_e, lane_idx, w, e, offs)
    return ratio_best(lane_w, lane_e, lane_idx)


@triton.jit
def _race_list(list_ids, list_w, length, mass, key, exclude, d_row, inv_temperature, md, sd, taud, iotad,
               Q: tl.constexpr):
    # the race over w = max(p' - q', 0) (Q: what q is; Q_NONE: w = p' without `exclude`) on a kept
    # list: p' is 0 off the list, and a token's exponential E depends on its id alone, so argmax w / E
    # over the list is the row race's winner; -1 when w is zero everywhere
    j = tl.arange(0, MAX_FAST_K)
    listed = j < length
    ids = tl.load(list_ids + j, mask=listed, other=0)
    w = tl.load(list_w + j, mask=listed, other=0.0) / tl.where(mass > 0.0, mass, 1.0)
    if Q == Q_NONE:
        w = tl.where(ids == exclude, 0.0, w)
    else:
        d = tl.load(d_row + ids, mask=listed, other=0.0).to(tl.float32)
        if Q == Q_TRUNCATED_LOGITS:
            q = truncated_prob_of(d, ids, inv_temperature, md, sd, taud, iotad, False)
        elif Q == Q_LOGITS:
            q = tl.exp(clean(d * inv_temperature) - tl.where(md == float("-inf"), 0.0, md)) / sd
        else:
            q = clean_prob(d)
        w = w - q
    w = tl.where(listed & (w > 0.0), w, 0.0)
    e = neg_log_of_uniform(uniform_of(hash_word(key, ids)))
    ratio = tl.where(w > 0.0, tl.log(tl.where(w > 0.0, w, 1.0)) - tl.log(e), float("-inf"))
    best = tl.max(ratio, axis=0)
    winner = tl.min(tl.where((ratio == best) & (w > 0.0), ids, INT32_MAX), axis=0)
    return tl.where(best > float("-inf"), winner, -1)


@triton.jit
def _sample_kept(t_row, V, inv_temperature, key, exclude, m, mass, tau, iota, list_ids, list_w, length,
                 TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # the race over p' (token `exclude` left out; -1: none): on the kept list when there is one
    if length > 0:
        index = _race_list(list_ids, list_w, length, mass, key, exclude, t_row, inv_temperature, 0.0, 1.0, 0.0, 0,
                           Q_NONE)
    else:
        _z, _g, index = _race_kept_slice(t_row, 0, V, inv_temperature, key, exclude, m, mass, tau, iota, TARGET_PROBS,
                                         BLOCK)
    return index


@triton.jit
def _race_kept_slice(t_row, start, stop, inv_temperature, key, exclude, m, mass, tau, iota, TARGET_PROBS: tl.constexpr,
                     BLOCK: tl.constexpr):
    # the race over p' (token `exclude` left out; -1: none) on [start, stop), as (z, g, index)
    if TARGET_PROBS:
        z, g, index = _race_kept_weights(t_row, t_row, start, stop, 1.0, key, exclude, m, mass, tau, iota, 0.0, 1.0,
                                         0.0, 0, Q_NONE, True, BLOCK)
    else:
        z, g, index = _race_kept_logits(t_row, start, stop, inv_temperature, key, exclude, tau, iota, BLOCK)
    return z, g, index


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
    summary_f_ptr, summary_i_ptr,  # [B, K + 1, 2, 4] float32, [B, K + 1, 2] int32: the summaries
    group_max_ptr, group_ids_ptr,  # the cells' group maxima and gathered groups (written only with FUSED)
    list_ids_ptr, list_v_ptr, list_w_ptr,  # [B, K + 1, 2, MAX_FAST_K] the kept lists
    record_f_ptr, record_i_ptr,  # [B, RECORD] float32 and int32: the deferred races (written only with DEFER)
    decided_ptr,  # [B, DECIDED_FIELDS] int32: (t, clean, winner) per request, decided before the search (read only
    # with DECIDED; the winner only with RACED)
    V, NUM_SLOTS,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    TRUNCATE_DRAFT: tl.constexpr,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    FUSED: tl.constexpr,  # summarise each row here when first needed (else the prepass did)
    DEFER: tl.constexpr,  # leave a terminal race over a whole row to _truncated_terminal_kernel (a record)
    SUMMARIZE_EMITTED: tl.constexpr,  # FUSED: also the rows whose draft the synthetic mode accepts (logprobs)
    DECIDED: tl.constexpr,  # each request's first drafts decided before the search (draft_bounds.py or histogram.STEP_DECIDE)
    RACED: tl.constexpr,  # DECIDED: the stop row's race was tried from the first level's bracket (bracket_race.py)
    BLOCK: tl.constexpr,
    RADIX_BLOCK: tl.constexpr,  # tokens per chunk of the radix path (FUSED)
    OUT_BLOCK: tl.constexpr,
    GROUP_ROWS: tl.constexpr,
    GROUP_BLOCK: tl.constexpr,
    CAP_GROUPS: tl.constexpr,
    PDL: tl.constexpr = False,  # programmatic dependent launch (dependent_launch.py; the launcher's launch_pdl)
):
    wait_for_launch_before(PDL)  # (first: nothing above reads or writes memory)
    b = tl.program_id(0).to(tl.int64)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    truncated, k, top_p, min_p = request_knobs(b, top_k_ptr, top_p_ptr, min_p_ptr, V, HAS_TOP_K, HAS_TOP_P,
                                               HAS_MIN_P)
    truncated = truncated & (~greedy)

    slots = tl.arange(0, OUT_BLOCK)
    tokens = tl.full([OUT_BLOCK], -1, tl.int64)
    num_emitted = 0
    num_accepted = 0
    race_kind = tl.full([], NO_RACE, tl.int32)  # a deferred race's kind (DEFER)
    record_f = record_f_ptr + b * RECORD
    record_i = record_i_ptr + b * RECORD
    i = 0
    stop_at = NUM_SLOTS  # DECIDED: the last slot the step may reach
    if DECIDED:
        # slots before t accepted already (their rows have no summaries); with clean, t is the last slot
        i = tl.load(decided_ptr + b * DECIDED_FIELDS)
        stop_at = tl.where(tl.load(decided_ptr + b * DECIDED_FIELDS + 1) != 0, i, NUM_SLOTS)
        decided = slots < i
        tokens = tl.where(decided, tl.load(draft_ids_ptr + b * draft_ids_stride + slots, mask=decided, other=-1),
                          tokens)
        num_emitted = i
        num_accepted = i
    done = 0
    if RACED:  # (the race at a clean stop t decided already: its winner, and no summary of row t was found)
        winner = tl.load(decided_ptr + b * DECIDED_FIELDS + 2)
        if winner >= 0:
            tokens = tl.where(slots == i, winner.to(tl.int64), tokens)
            num_emitted += 1
            done = 1
    while done == 0:
        t_row = target_ptr + b * target_stride_b + i * target_stride_k
        d_row = draft_ptr + b * draft_stride_b + i * draft_stride_k
        x = tl.load(draft_ids_ptr + b * draft_ids_stride + i, mask=i < n, other=-1)
        x_valid = (x >= 0) & (x < V) & (i < n)
        token = x * 0 - 1
        accepted = x_valid & (i < 0)
        own_token = i < 0  # the target's own sample at this row (bonus row; synthetic rejection)
        needed = truncated  # whether this row's target summary is read (one place finds it: the code is large)
        if MODE == MODE_SYNTHETIC:
            u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
            rate = tl.load(conditional_rates_ptr + i, mask=i < n, other=0.0)
            accepted = x_valid & (u < rate)
            if not SUMMARIZE_EMITTED:
                needed = truncated & (~accepted)  # an accepted draft reads no summary unless logprobs will
        cell = (b * NUM_SLOTS + i) * 2
        m = tl.full([], float("-inf"), tl.float32)
        mass = tl.full([], 0.0, tl.float32)
        tau = tl.full([], float("-inf"), tl.float32)
        iota = tl.full([], INT32_MAX, tl.int32)
        length = tl.full([], 0, tl.int32)
        if needed:
            m, mass, tau, iota, length = _row_summary(
                cell, t_row, V, inv_temperature, k, top_p, min_p, summary_f_ptr, summary_i_ptr, group_max_ptr,
                group_ids_ptr, list_ids_ptr, list_v_ptr, list_w_ptr, FUSED, TARGET_PROBS, RADIX_BLOCK, GROUP_ROWS,
                GROUP_BLOCK, CAP_GROUPS)
        if MODE == MODE_SYNTHETIC:
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
            token, accepted, race_kind = _truncated_draft(
                t_row, d_row, cell, i, x, x_valid, inv_temperature, key_of_seed, position, k, top_p, min_p,
                m, mass, tau, iota, length, summary_f_ptr, summary_i_ptr, group_max_ptr, group_ids_ptr, list_ids_ptr,
                list_v_ptr, list_w_ptr, record_f, record_i, V, DRAFT, TARGET_PROBS, TRUNCATE_DRAFT, FUSED, DEFER, BLOCK,
                RADIX_BLOCK, GROUP_ROWS, GROUP_BLOCK, CAP_GROUPS)
        else:
            token, accepted = _untruncated_draft(t_row, d_row, x, x_valid, inv_temperature, key_of_seed, position + i,
                                                 V, DRAFT, TARGET_PROBS, BLOCK)
        if own_token:
            key = stream_key(key_of_seed, position + i, SAMPLE)
            if truncated:
                if _defers(length, DEFER):
                    _defer_race(record_f, record_i, i, x * 0 - 1, x * 0 - 1, SAMPLE, m, mass, tau, iota, 0.0, 1.0, 0.0,
                                0)
                    race_kind = tl.full([], RACE_KEPT, tl.int32)
                    token = x * 0 - 1
                else:
                    token = _sample_kept(t_row, V, inv_temperature, key, -1, m, mass, tau, iota,
                                         list_ids_ptr + cell * MAX_FAST_K, list_w_ptr + cell * MAX_FAST_K, length,
                                         TARGET_PROBS, BLOCK).to(tl.int64)
            else:
                _z, _g, own = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, True, BLOCK)
                token = own.to(tl.int64)
        tokens = tl.where(slots == i, token, tokens)
        num_emitted += (token >= 0).to(tl.int32)
        num_accepted += accepted.to(tl.int32)
        i += 1
        done = ((~accepted) | (i > n)).to(tl.int32)
        if DECIDED:
            done = done | (i > stop_at).to(tl.int32)

    valid = request_valid(inv_temperature)  # an invalid request emits nothing
    tl.store(out_ptr + b * out_stride + slots, tl.where(valid, tokens, -1), mask=slots < NUM_SLOTS)
    tl.store(num_emitted_ptr + b, tl.where(valid, num_emitted, 0))
    tl.store(num_accepted_ptr + b, tl.where(valid, num_accepted, 0))
    if DEFER:
        tl.store(record_i + R_KIND, tl.where(valid, race_kind, NO_RACE))  # every request's record has its kind


@triton.jit
def _defers(length, DEFER: tl.constexpr):
    # whether the step leaves this terminal race to _truncated_terminal_kernel: with DEFER, a row with
    # no kept list (a race over the whole row); without, never (a comparison the compiler folds to false,
    # so nothing of the deferral is compiled into the other steps)
    if DEFER:
        return length == 0
    return length != length  # noqa: PLR0124 (always false, folded)


@triton.jit
def _defer_race(record_f, record_i, row, exclude, fallback, purpose, m, mass, tau, iota, md, sd, taud, iotad):
    # a deferred race's record, all but its kind (the step writes that last, for every request)
    tl.store(record_i + R_ROW, row)
    tl.store(record_i + R_EXCLUDE, exclude.to(tl.int32))
    tl.store(record_i + R_FALLBACK, fallback.to(tl.int32))
    tl.store(record_i + R_PURPOSE, purpose)
    tl.store(record_i + R_IOTA, iota)
    tl.store(record_i + R_IOTAD, iotad)
    tl.store(record_f + R_M, m)
    tl.store(record_f + R_MASS, mass)
    tl.store(record_f + R_TAU, tau)
    tl.store(record_f + R_MD, md)
    tl.store(record_f + R_SD, sd)
    tl.store(record_f + R_TAUD, taud)

@triton.jit
def _race_residual(t_row, d_row, V, inv_temperature, key, m, mass, tau, iota, list_ids, list_w, length, md, sd, taud,
                   iotad, Q: tl.constexpr, TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # the race over max(p' - q', 0): on the kept list when there is one; -1 when it is zero everywhere
    if length > 0:
        index = _race_list(list_ids, list_w, length, mass, key, -1, d_row, inv_temperature, md, sd, taud, iotad, Q)
    else:
        _z, _g, index = _race_kept_weights(t_row, d_row, 0, V, inv_temperature, key, -1, m, mass, tau, iota, md, sd,
                                           taud, iotad, Q, TARGET_PROBS, BLOCK)
    return index

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
def _truncated_draft(t_row, d_row, cell, i, x, x_valid, inv_temperature, key_of_seed, position, k, top_p, min_p,
                     m, mass, tau, iota, length, summary_f_ptr, summary_i_ptr, group_max_ptr, group_ids_ptr,
                     list_ids_ptr, list_v_ptr, list_w_ptr, record_f, record_i, V, DRAFT: tl.constexpr,
                     TARGET_PROBS: tl.constexpr, TRUNCATE_DRAFT: tl.constexpr, FUSED: tl.constexpr,
                     DEFER: tl.constexpr, BLOCK: tl.constexpr, RADIX_BLOCK: tl.constexpr, GROUP_ROWS: tl.constexpr,
                     GROUP_BLOCK: tl.constexpr, CAP_GROUPS: tl.constexpr):
    # one draft slot of a truncated probabilistic request (its target row's summary given, the draft
    # side of its cell found here): accept iff u q'(x) < p'(x); on rejection
    # the race over max(p' - q', 0) (p' without x for a one-hot draft, p' itself for an id outside
    # [0, V) or when nothing is left), or its record where the step defers it (_defers);
    # (token, accepted, the deferred race's kind or NO_RACE)
    t_at_x, d_at_x = read_at_draft(t_row, d_row, x, x_valid, DRAFT)
    u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
    list_ids = list_ids_ptr + cell * MAX_FAST_K
    list_w = list_w_ptr + cell * MAX_FAST_K
    x_safe = tl.where(x_valid, x, 0)
    p_x = truncated_prob_of(t_at_x, x_safe, inv_temperature, m, mass, tau, iota, TARGET_PROBS)
    md = tl.full([], float("-inf"), tl.float32)  # one-hot
    sd = tl.full([], 1.0, tl.float32)
    taud = tl.full([], float("-inf"), tl.float32)
    iotad = tl.full([], INT32_MAX, tl.int32)
    q_x = tl.full([], 1.0, tl.float32)
    if DRAFT == DRAFT_LOGITS:
        if TRUNCATE_DRAFT:
            md, sd, taud, iotad, _length = _row_summary(
                cell + 1, d_row, V, inv_temperature, k, top_p, min_p, summary_f_ptr, summary_i_ptr, group_max_ptr,
                group_ids_ptr, list_ids_ptr, list_v_ptr, list_w_ptr, FUSED, False, RADIX_BLOCK, GROUP_ROWS, GROUP_BLOCK,
                CAP_GROUPS)
            q_x = tl.where(md == float("-inf"), 1.0,  # no finite draft logit: one-hot
                           truncated_prob_of(d_at_x, x_safe, inv_temperature, md, sd, taud, iotad, False))
        else:
            md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, 0, V, inv_temperature, False, BLOCK)
            q_x = draft_prob_of(d_at_x, inv_temperature, md, sd, DRAFT)
    if DRAFT == DRAFT_PROBS:
        md = tl.full([], 0.0, tl.float32)
        q_x = draft_prob_of(d_at_x, inv_temperature, md, sd, DRAFT)  # (cleaned as the contract reads them)
    token = x * 0 - 1
    race_kind = tl.full([], NO_RACE, tl.int32)
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
        defer = _defers(length, DEFER)
        if (md == float("-inf")) | (~x_valid):
            exclude = tl.where(x_valid, x, -1)
            fallback = tl.where(x_valid & (p_x > 0.0), x, -1)
            if defer:
                _defer_race(record_f, record_i, i, exclude, fallback, RESIDUAL, m, mass, tau, iota, md, sd, taud, iotad)
                race_kind = tl.full([], RACE_KEPT, tl.int32)
            else:
                index = _sample_kept(t_row, V, inv_temperature, key, exclude, m, mass, tau, iota, list_ids, list_w,
                                     length, TARGET_PROBS, BLOCK)
                token = tl.where(index >= 0, index.to(tl.int64), fallback)
        elif defer:
            _defer_race(record_f, record_i, i, x * 0 - 1, x * 0 - 1, RESIDUAL, m, mass, tau, iota, md, sd, taud, iotad)
            race_kind = tl.full([], RACE_RESIDUAL, tl.int32)
        else:
            if DRAFT == DRAFT_LOGITS:
                if TRUNCATE_DRAFT:
                    index = _race_residual(t_row, d_row, V, inv_temperature, key, m, mass, tau, iota, list_ids, list_w,
                                           length, md, sd, taud, iotad, Q_TRUNCATED_LOGITS, TARGET_PROBS, BLOCK)
                else:
                    index = _race_residual(t_row, d_row, V, inv_temperature, key, m, mass, tau, iota, list_ids, list_w,
                                           length, md, sd, taud, iotad, Q_LOGITS, TARGET_PROBS, BLOCK)
            else:
                index = _race_residual(t_row, d_row, V, inv_temperature, key, m, mass, tau, iota, list_ids, list_w,
                                       length, md, sd, taud, iotad, Q_PROBS, TARGET_PROBS, BLOCK)
            if index < 0:
                index = _sample_kept(t_row, V, inv_temperature, key, -1, m, mass, tau, iota, list_ids, list_w, length,
                                     TARGET_PROBS, BLOCK)
            token = index.to(tl.int64)
    return token, accepted, race_kind


@triton.jit
def _race_residual_slice(t_row, d_row, start, stop, inv_temperature, key, m, mass, tau, iota, md, sd, taud, iotad,
                         DRAFT: tl.constexpr, TRUNCATE_DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                         BLOCK: tl.constexpr):
    # the race over max(p' - q', 0) on [start, stop), q by the draft form, as (z, g, index)
    if DRAFT == DRAFT_LOGITS:
        if TRUNCATE_DRAFT:
            z, g, idx = _race_kept_weights(t_row, d_row, start, stop, inv_temperature, key, -1, m, mass, tau, iota, md,
                                           sd, taud, iotad, Q_TRUNCATED_LOGITS, TARGET_PROBS, BLOCK)
        else:
            z, g, idx = _race_kept_weights(t_row, d_row, start, stop, inv_temperature, key, -1, m, mass, tau, iota, md,
                                           sd, taud, iotad, Q_LOGITS, TARGET_PROBS, BLOCK)
    else:
        z, g, idx = _race_kept_weights(t_row, d_row, start, stop, inv_temperature, key, -1, m, mass, tau, iota, md, sd,
                                       taud, iotad, Q_PROBS, TARGET_PROBS, BLOCK)
    return z, g, idx


@triton.jit
def _truncated_terminal_kernel(
    record_f_ptr, record_i_ptr,  # [B, RECORD] float32 and int32: the step's records (DEFER)
    race_f_ptr, race_i_ptr,  # [B, NUM_SPLITS, 2] float32 and int32 scratch: the slices' race partials
    arrivals_ptr,  # [B] int32, zero on entry; left at zero on exit
    out_ptr, out_stride,  # [B, K + 1] int64
    num_emitted_ptr,  # [B] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits or probs (read for a residual race)
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B]
    V, NUM_SLOTS, NUM_SPLITS, CHUNK,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    TRUNCATE_DRAFT: tl.constexpr,
    BLOCK: tl.constexpr,
    S_BLOCK: tl.constexpr,  # a power of two >= NUM_SPLITS
    PDL: tl.constexpr = False,  # programmatic dependent launch (dependent_launch.py; the launcher's launch_pdl)
):
    # grid (B, NUM_SPLITS): the race a request's record defers, one slice of its row per program
    # (the one-program race's tokens and streams), merged by the request's last program, which
    # writes the token and the count
    wait_for_launch_before(PDL)  # (first: nothing above reads or writes memory)
    b = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    record_f = record_f_ptr + b * RECORD
    record_i = record_i_ptr + b * RECORD
    kind = tl.load(record_i + R_KIND)
    if kind != NO_RACE:
        _n, _greedy, inv_temperature, position, key_of_seed = request_setup(
            b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
        t = tl.load(record_i + R_ROW)
        key = _terminal_key(key_of_seed, position + t, tl.load(record_i + R_PURPOSE))
        m = tl.load(record_f + R_M)
        mass = tl.load(record_f + R_MASS)
        tau = tl.load(record_f + R_TAU)
        iota = tl.load(record_i + R_IOTA)
        t_row = target_ptr + b * target_stride_b + t * target_stride_k
        start = split * CHUNK
        stop = tl.where(split == NUM_SPLITS - 1, V, start + CHUNK)  # every slice ends on a block edge but the last
        if kind == RACE_KEPT:  # (every race of one-hot drafts: p' with the draft left out)
            z, g, idx = _race_kept_slice(t_row, start, stop, inv_temperature, key, tl.load(record_i + R_EXCLUDE), m,
                                         mass, tau, iota, TARGET_PROBS, BLOCK)
        else:
            z, g, idx = _race_residual_slice(t_row, draft_ptr + b * draft_stride_b + t * draft_stride_k, start, stop,
                                             inv_temperature, key, m, mass, tau, iota, tl.load(record_f + R_MD),
                                             tl.load(record_f + R_SD), tl.load(record_f + R_TAUD),
                                             tl.load(record_i + R_IOTAD), DRAFT, TRUNCATE_DRAFT, TARGET_PROBS, BLOCK)
        race_f = race_f_ptr + b * NUM_SPLITS * RACE_FIELDS
        race_i = race_i_ptr + b * NUM_SPLITS * 2
        store_race(race_f, race_i, split, z, g, idx, -1)
        if last_to_arrive(arrivals_ptr, b, NUM_SPLITS):
            token = merge_race(race_f, race_i, NUM_SPLITS, S_BLOCK)
            if token < 0:
                if kind == RACE_KEPT:  # nothing kept but the token left out: that token, where p' > 0
                    token = tl.load(record_i + R_FALLBACK).to(tl.int64)
                else:  # a residual with no mass anywhere: the race over p', one program over the whole row
                    _z, _g, index = _race_kept_slice(t_row, 0, V, inv_temperature, key, -1, m, mass, tau, iota,
                                                     TARGET_PROBS, BLOCK)
                    token = index.to(tl.int64)
            tl.store(out_ptr + b * out_stride + t, token)
            tl.store(num_emitted_ptr + b, t + (token >= 0).to(tl.int32))


__all__ = ["DRAFT_NONE", "_truncated_terminal_kernel", "_truncation_prepass_kernel", "_verify_truncated_kernel"]
