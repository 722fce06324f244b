"""The split histogram path: the cutoff of every truncated row of a batch given no ``top_k`` (``top_p``
and/or ``min_p``), found from histograms of token *counts*, each row split across programs. It is a
faster way to the split radix path's summaries (``specbench/kernels/radix.py``: the same kept sets but
where a token's prefix mass lies within rounding of the boundary, as its sums run in another order), and
the one such a batch takes (``launch.SPLIT_SEARCH``; the launch variants ``triton-radix-...`` take the
radix path, ``triton-histogram-SLICExBLOCKxWARPS`` set this one's shape).

A token's *distance* from its row's largest value ``m``: for logits ``x = 8 (m - z)`` (eighths of a nat;
the difference rounded once, then scaled exactly), for probabilities ``x = bits(m) - bits(p)`` (the
difference of the float32 bit patterns, an integer; 2**20 of them an eighth of an octave). It never
decreases as the value decreases, so a range of distances is a run of the row's order, and tokens of one
value share every range. A *window* is a range ``[lo, hi)`` of distances cut into ``BINS`` equal parts,
whose width is a power of two (in units, or of patterns): ``lo`` and every part's edge are multiples of
it, so ``x - lo`` and the part ``floor((x - lo) / width)`` are exact (a window's distances are below 256
units, a float32 grid of at most 2**-16, and every number of parts and levels the launcher allows keeps a
part at least that wide). A part's tokens each have a mass
(``exp(z - m)``, or ``p``) between the masses at its two edges, which bounds the part's mass from its
count: that, with slack for ``exp``'s and the sums' rounding (``SLACK``, ``SUM_SLACK``), is all the counts
are used for.

1. ``STEP_MAX`` (grid ``B x (K + 1) x sides * NUM_SLICES``, one program per slice of ``SLICE`` tokens,
   the slice the device's, never the batch's): the slices' largest values; the row's last program to
   arrive (an arrival count per cell, left at zero) takes ``m``, opens the search with the first
   window (distances 0 to 256 units, the last part also taking every token further) or, for a row with
   no value of mass, writes the summary (nothing kept). Each program clears its share of the cell's
   counts for the launches after. With ``SKIP_DECIDED`` (the drafts decided before, ``draft_bounds.py``)
   the programs of a cell the step will not read (``draft_bounds.skipped``) mark it ``SKIPPED`` and leave (where
   their programs take such cells at all: not with ``ROWS_AT_STOP`` and ``ROWS_AFTER_STOP``, below);
   with ``BOUNDS_MAX`` too (the launcher's way, ``launch.HISTOGRAM_BOUNDS_MAX``), a request that decided there
   and stopped at ``t < n`` has row ``t``'s largest values in its cells' state already (``F_M``, written by that
   pass from its own read of the row), and those cells' programs read nothing: the last to arrive takes ``m``
   from there.
2. ``STEP_LEVEL``, ``levels`` launches (``launch._histogram_levels``: as many as bring a part to 1/256
   nat, or a launch variant's ``-levelsN``; fewer leave more candidates, and a row with more than the list holds
   falls back, below): each program counts its tokens *in play* (a value of mass and ``w >= min_p``, the contract's
   min-p) per part of the window (``tl.histogram``) and adds them to the cell's counts (integer atomics:
   the same in any order; with ``ATOMIC``, the launcher's default under Triton before 3.8 (whose ``tl.histogram``
   pays for every token; ``launch.HISTOGRAM_ATOMIC``, the launch variants ``-atomic`` / ``-noatomic``), the last level
   adds one for each of its tokens inside the window instead: few tokens on the rows measured, every one on a row of
   ties); at
   the first level it also sums its mass in play and finds its last token in play (smallest value, largest
   id), at the others it sums the exact mass of its tokens in play before
   the window. The last to arrive sums the slices in slice order. At the first level: ``M`` the mass in
   play and the target ``T = top_p M`` (0 for a row keeping its first token only); ``min_p`` alone
   (``top_p`` off), or ``T >= M`` (``top_p`` within rounding of 1), keeps every token in play: the
   summary ``(m, M, last token)`` is written and the search closed. Otherwise it bounds the mass before
   each part from below and the mass through it from above (from the window's start, plus the exact mass
   before the window; at the first level also as ``M`` less the mass from the part on, or after it, the
   tighter of the two) and keeps the parts that may hold
   the cutoff (the first token in the order whose mass, with all before it, reaches ``T``): those with a
   token, with the mass before them possibly ``<= T`` and the mass through them possibly ``>= T``. Their
   range is the next window, its parts the next power of two of theirs cut into ``BINS``. After the
   last level that range holds the *candidates*.
   With ``DECIDE`` the first level also sums, per slice, the mass in play before the cell's draft ``x`` in the
   row's order (``A``: tokens of larger value, or of equal value and smaller id), and its last program keeps a
   bound on the cutoff token's mass (``c``: the mass at the start of the first part that may hold it).
2b. ``STEP_DECIDE`` (with ``DECIDE``, after the first level; grid ``B``, one program per request, or with ``FOLD``
   each request's last program of the first level to arrive, an arrival count per request after the cells'): the
   request's drafts decided in order while each decision is sure, so that only the rows its step will read
   are searched further. A probabilistic request with ``top_p`` and/or ``min_p`` (``top_k`` off, not
   greedy) bounds ``p'(x)`` per row (``_bounds_at_draft``): ``x`` is kept iff ``A < T``, and then its row's
   kept mass ``S`` lies between ``max(T, A + p(x))`` and ``min(max(A + p(x), T + min(c, p(x))), M)`` (``x`` the
   cutoff, or the cutoff after ``x``, of no more mass than either; ``draft_bounds.bracket``), each side widened
   by ``BRACKET_SLACK M`` for the float32 sums here and in the search; a cell whose first level kept every
   token in play gives ``p'(x)`` from its summary; ``q'(x)`` likewise from the draft row's cell (truncated draft logits), as given (draft
   probabilities) or 1 (one-hot). Slot ``i`` is surely accepted when ``u q'(x)`` (``u`` the step's own
   uniform for the slot) lies below the least ``p'(x)`` by ``DECISION_MARGIN``, surely rejected when above
   the largest (or ``p'(x)`` is 0, or ``x`` not a valid id), and otherwise not decided. The program writes
   ``(t, clean)``: ``t`` the first slot not surely accepted (or ``n``), ``clean`` whether it was surely
   rejected (or ``n``), and marks every cell the step will not read ``SKIPPED``: with ``clean`` every row
   but ``t``, without it the rows before ``t``. Later launches pass over skipped cells as over closed ones;
   the step (``truncation.py``, ``DECIDED``) emits the drafts before ``t`` and starts there, and with
   ``clean`` stops there, so it reads only summaries that were searched. Its own test at ``t`` sees the
   exact summaries, which lie inside the bounds, so it decides as this step did. Any other request writes
   ``(0, 0)``: nothing decided, nothing skipped.
3. ``STEP_GATHER``: each program sums the exact mass of its tokens in play before the candidates and
   copies its candidates (value, id) to the cell's list (positions from an atomic count; their order
   there does not matter).
4. ``STEP_FINISH`` (grid ``B x (K + 1) x sides``, one program per cell): ``A`` the slices' sums in slice
   order; the list sorted in the row's order (value, largest first, then id; one int64 key; at the least of
   ``CAP / 8``, ``CAP / 4``, ``CAP / 2`` and ``CAP`` that holds it: the same order at any length, the running
   sums' rounding possibly not, which depends on the list alone, never on the batch), and the first
   candidate whose running mass ``A + c_j`` reaches ``T`` is the cutoff ``(tau, iota)``, ``S = A + c_j`` (the
   first candidate where ``T = 0``, when the candidates start at distance 0).

With ``SLICES_PER_PROGRAM`` above 1 (the launch variants ``-slicesN``) each program of steps 1-3 takes that
many slices of its row in turn, every slice as one program would (its own sums, its own arrival), so the
summaries are the same at any count. ``ROWS`` says which rows a program of steps 1-4 takes (step 4: its cell
where the others take their slice): ``ROWS_PER_CELL``, the row of the grid's second dimension; the others, where
the drafts were decided from one pass's bounds (``draft_bounds.py``) and most cells are skipped, with the grid's
second dimension 1, so that no program is spent on a skipped cell (one costs the latency of its loads while it
holds a place on the multiprocessor): ``ROWS_PER_REQUEST``, every row of its request in turn;
``ROWS_AT_STOP``, its request's stop row ``t`` alone (the row every request's step reads: ``t <= n``, and
``(0, 0)`` for a request that decided nothing); ``ROWS_AFTER_STOP``, the rows after ``t`` in turn where the
request did not stop clean, the rest of what its step reads, each program loading its request's decision before
anything else and doing nothing more where it stopped clean (most requests: so its programs take several slices
each, ``launch.HISTOGRAM_AFTER_SLICES``). The launcher takes ``ROWS_AT_STOP`` then ``ROWS_AFTER_STOP`` for each step,
or ``ROWS_PER_REQUEST`` alone, or ``ROWS_PER_CELL`` (``launch._histogram_rows``). Every cell the step reads is
taken once, and each as its own program would take it, so the summaries are the same.

Where the search cannot finish so, the cell is marked (stage ``FALLBACK``), the launches after skip it,
and the finish step finds its cutoff by the one-program radix search (``cutoffs.truncate_row_radix``:
exact, about 25 passes over the row, slow): no part may hold the cutoff, or the first level's window
reaches its open-ended part, or more than ``CAP`` candidates (a row whose tokens all tie), or rounding
left the cutoff outside the candidates (``A >= T``, or ``A`` plus theirs short of ``T``). Sums are float32
in this module's order (slices' sums, then slices in order; the list in the row's order), so a token
whose prefix mass lies within rounding of the boundary can fall either side, as the contract allows.

Scratch (``specbench/kernels/launch.py`` sizes it; the radix path's state and partials are reused):
per cell ``STATE`` floats (m, M, T, c, the window of logits) and ints (the stage, the window of
probabilities), per (cell, slice) ``PART`` floats (largest value,
mass in play, last value, mass before, mass before the draft) and ints (the last token's id), per cell
``COUNTS`` ints (each level's counts, then the list's length: cleared by ``STEP_MAX``) and a list of ``CAP``
values and ids; per request ``(t, clean)`` (``STEP_DECIDE``).
Every scratch slot is read only after an earlier launch of the same step, or the same program, wrote it (the
largest values of the stop rows with ``BOUNDS_MAX``: the bounds pass's decision launch, before the search).
"""

import triton
import triton.language as tl

from specbench.kernels.cutoffs import _order_key32, load_row, truncate_row_radix, value_of_key32, values_of
from specbench.kernels.decide import DRAFT_LOGITS, draft_prob_at, request_setup, request_valid
from specbench.kernels.dependent_launch import wait_for_launch_before
from specbench.kernels.draft_bounds import bracket, decide_slot, decides, skipped
from specbench.kernels.radix import _slice_max
from specbench.kernels.rows import add_if_above, clean, exp_in_sum
from specbench.kernels.split import last_to_arrive
from specbench.kernels.truncation import (
    DECIDED_FIELDS,
    cell_program,
    read_summary,
    request_knobs,
    store_summary,
    summary_wanted,
    truncated_prob_of,
)

STEP_MAX = tl.constexpr(0)
STEP_LEVEL = tl.constexpr(1)
STEP_GATHER = tl.constexpr(2)
STEP_FINISH = tl.constexpr(3)
STEP_DECIDE = tl.constexpr(4)
MAX_BINS = 256  # the most bins a level's histogram may have (launch.HISTOGRAM_BINS)
MAX_LEVELS = 6
# each level's counts, then the list's length: room for the most parts in all levels the launcher allows (parts **
# levels at most 2**24: 16 parts in six levels, 32 or 64 in four, 128 or 256 in three)
COUNTS = tl.constexpr(3 * MAX_BINS + 1)
STATE = tl.constexpr(8)  # state floats and ints per cell
PART = tl.constexpr(8)  # partial floats and ints per (cell, slice)
RANGE_UNITS = tl.constexpr(256.0)  # logits: the first level's parts span 256 units (32 nats), the last open-ended
UNITS_PER_NAT = tl.constexpr(8.0)
RANGE_SHIFT = tl.constexpr(28)  # probabilities: the first level spans 2**28 bit patterns (256 units of 2**20, 32 octaves)
SLACK = tl.constexpr(1e-4)  # a part's mass bounds' relative slack (exp's rounding and the bounds' sums, with room)
SUM_SLACK = tl.constexpr(1e-5)  # the exact sums' (M, the mass before a window): float32 sums of at most ~2**18
# tokens, per lane, then across lanes and slices (1e-4 here kept ten parts at a level on rows whose top_p
# tail is 1e-3 of M, where this keeps two to four: results/h200-histogram/README.md)
# stages (I_STAGE)
CLOSED = tl.constexpr(-1)  # the summary is written
SKIPPED = tl.constexpr(-2)  # DECIDE: the step reads no summary of this cell (none is written)
SEARCH = tl.constexpr(0)
FALLBACK = tl.constexpr(1)  # the finish step searches the row in one program
RACED = tl.constexpr(-3)  # the stop row's race was decided from the first level's bracket (bracket_race.py): the
# step reads no summary of this cell (none is written)
# the rows a program takes (ROWS)
ROWS_PER_CELL = tl.constexpr(0)  # the grid's second dimension's
ROWS_PER_REQUEST = tl.constexpr(1)  # every row of its request in turn
ROWS_AT_STOP = tl.constexpr(2)  # its request's stop row t (drafts decided from the bounds)
ROWS_AFTER_STOP = tl.constexpr(3)  # the rows after t in turn, where its request did not stop clean (its decision
# loaded first, and nothing else where it stopped clean)
# state fields
F_M = tl.constexpr(0)
F_PLAY = tl.constexpr(1)
F_TARGET = tl.constexpr(2)
F_CUT = tl.constexpr(3)  # DECIDE: a bound on the cutoff token's mass, after the first level
F_LO = tl.constexpr(4)  # logits: the window [lo, hi) in units and its parts' width
F_HI = tl.constexpr(5)
F_WIDTH = tl.constexpr(6)
I_STAGE = tl.constexpr(0)
I_LO = tl.constexpr(2)  # probabilities: the window [lo, hi) in bit patterns and log2 of its parts' width
I_HI = tl.constexpr(3)
I_SHIFT = tl.constexpr(4)
# partial fields per (cell, slice)
P_MAX = tl.constexpr(0)
P_PLAY = tl.constexpr(1)
P_LOW = tl.constexpr(2)
P_BEFORE = tl.constexpr(3)
P_ABOVE = tl.constexpr(4)  # DECIDE: the mass in play before the cell's draft in the row's order (first level)
P_LOW_ID = tl.constexpr(0)


@triton.jit
def _distance(value, m, TARGET_PROBS: tl.constexpr):
    # a token's distance from m (value <= m): units of an eighth of a nat (float32, a rounded difference
    # scaled exactly), or the difference of the float32 bit patterns (int32)
    if TARGET_PROBS:
        dist = m.to(tl.int32, bitcast=True) - value.to(tl.int32, bitcast=True)
    else:
        dist = (m - value) * UNITS_PER_NAT
    return dist


@triton.jit
def _part(dist, lo, width, TARGET_PROBS: tl.constexpr):
    # the part of a window starting at lo a distance falls in (parts of `width` units, or of 2**width bit
    # patterns): exact, as lo and the width are powers of two apart from the distances' own grid
    if TARGET_PROBS:
        part = (dist - lo) >> width
    else:
        part = ((dist - lo) * (1.0 / width)).to(tl.int32)
    return part


@triton.jit
def _edge(lo, j, width, TARGET_PROBS: tl.constexpr):
    # the distance where part j of a window starts
    if TARGET_PROBS:
        edge = lo + (j << width)
    else:
        edge = lo + j.to(tl.float32) * width
    return edge


@triton.jit
def _mass_at(dist, m, TARGET_PROBS: tl.constexpr):
    # the mass of a token at a distance from m (a pattern below 0 is no mass)
    if TARGET_PROBS:
        mass = tl.maximum(m.to(tl.int32, bitcast=True) - dist, 0).to(tl.float32, bitcast=True)
    else:
        mass = tl.exp(-dist / UNITS_PER_NAT)
    return mass


@triton.jit
def _in_play(value, mass, minp_threshold, HAS_MIN_P: tl.constexpr):
    # a token with a value of mass, kept by min_p (without HAS_MIN_P the threshold is 0, which every such
    # token's mass meets)
    play = value > float("-inf")
    if HAS_MIN_P:
        play = play & (mass >= minp_threshold)
    return play


@triton.jit
def _window(state, istate, TARGET_PROBS: tl.constexpr):
    # (lo, hi, width) of the cell's window, as _part and _edge take them
    if TARGET_PROBS:
        window = tl.load(istate + I_LO), tl.load(istate + I_HI), tl.load(istate + I_SHIFT)
    else:
        window = tl.load(state + F_LO), tl.load(state + F_HI), tl.load(state + F_WIDTH)
    return window


@triton.jit
def _slice_level(row, V, inv_temperature, m, minp_threshold, lo, hi, width, start, counts, part_f, part_i, x,
                 FIRST: tl.constexpr, SLICE: tl.constexpr, BINS: tl.constexpr, TARGET_PROBS: tl.constexpr,
                 HAS_MIN_P: tl.constexpr, DECIDE: tl.constexpr, BLOCK: tl.constexpr, ATOMIC: tl.constexpr,
                 FTZ_SUMS: tl.constexpr, PREDICATED_SUMS: tl.constexpr):
    # this slice's counts of the window's parts (added to the cell's); at the first level (the window the
    # whole row, its last part open-ended) its mass in play and last token in play (and with DECIDE its mass
    # in play before token x, the cell's draft, in the row's order), at the others its mass
    # in play before the window. The later levels of logits take the fewest instructions a token (they
    # bound the search's cost, ncu on an H200): a logit of -inf (NaN cleaned to it) is at distance +inf,
    # inside no window and before none, so only min_p decides whether a token is in play there, and -0 and
    # +0 have the same distance and mass, so the value is not normalised
    tl.static_assert(not (FIRST and ATOMIC), "the first level counts by tl.histogram (its counts and sums go together)")
    hist = tl.zeros([BINS], tl.int32)
    total = tl.zeros([BLOCK], tl.float32)
    low = tl.full([BLOCK], float("inf"), tl.float32)
    low_id = tl.full([BLOCK], -1, tl.int32)
    above = tl.zeros([BLOCK], tl.float32)
    x_value = tl.full([], float("inf"), tl.float32)
    if FIRST and DECIDE:
        x_value, _x_mass = values_of(load_row(row, x, V, TARGET_PROBS), inv_temperature, m, TARGET_PROBS)
    for chunk in range(0, SLICE, BLOCK):
        offs = start + chunk + tl.arange(0, BLOCK)
        if FIRST or TARGET_PROBS:
            value, mass = values_of(load_row(row, offs, V, TARGET_PROBS), inv_temperature, m, TARGET_PROBS)
            play = _in_play(value, mass, minp_threshold, HAS_MIN_P)
            if FTZ_SUMS and not (TARGET_PROBS or HAS_MIN_P):  # (the mass only summed: M, and A with DECIDE)
                mass = exp_in_sum(value - m)
        else:
            value = clean(load_row(row, offs, V, False) * inv_temperature)
            if FTZ_SUMS and not HAS_MIN_P:  # (the mass only summed, before the window)
                mass = exp_in_sum(value - m)
            else:
                mass = tl.exp(value - m)
                play = mass >= minp_threshold  # (only read with HAS_MIN_P)
        dist = _distance(value, m, TARGET_PROBS)
        if FIRST:  # (the last part open-ended: the distance clamped before it is made an integer)
            if TARGET_PROBS:
                part = tl.minimum(dist >> width, BINS - 1)
            else:
                part = tl.minimum(dist * (1.0 / width), BINS - 1.0).to(tl.int32)
            hist += tl.histogram(tl.where(play, part, 0), BINS, mask=play)
            if PREDICATED_SUMS and not (TARGET_PROBS or HAS_MIN_P):  # (out of play: a logit of -inf, of mass +0)
                total += mass
            else:
                total += tl.where(play, mass, 0.0)
            later = play & (value <= low)  # ids rise along a lane: a tie moves to the larger id
            low = tl.where(later, value, low)
            low_id = tl.where(later, offs, low_id)
            if DECIDE:
                ahead = play & ((value > x_value) | ((value == x_value) & (offs < x)))
                above += tl.where(ahead, mass, 0.0)
        else:
            inside = (dist >= lo) & (dist < hi)
            before = dist < lo
            if TARGET_PROBS or HAS_MIN_P:
                inside = inside & play
                before = before & play
            if ATOMIC:  # (the last level, whose window held few tokens on the rows measured: each counted)
                tl.atomic_add(counts + tl.where(inside, _part(dist, lo, width, TARGET_PROBS), 0), 1, mask=inside,
                              sem="relaxed")
            else:
                hist += tl.histogram(tl.where(inside, _part(dist, lo, width, TARGET_PROBS), 0), BINS, mask=inside)
            if PREDICATED_SUMS and not (TARGET_PROBS or HAS_MIN_P):  # (lo > dist: the same as `before`)
                total = add_if_above(total, lo, dist, mass)
            else:
                total += tl.where(before, mass, 0.0)
    if not ATOMIC:
        tl.atomic_add(counts + tl.arange(0, BINS), hist, sem="relaxed")
    if FIRST:
        slice_low = tl.min(low, axis=0)
        tl.store(part_f + P_PLAY, tl.sum(total, axis=0))
        tl.store(part_f + P_LOW, slice_low)
        tl.store(part_i + P_LOW_ID, tl.max(tl.where(low == slice_low, low_id, -1), axis=0))
        if DECIDE:
            tl.store(part_f + P_ABOVE, tl.sum(above, axis=0))
    else:
        tl.store(part_f + P_BEFORE, tl.sum(total, axis=0))


@triton.jit
def _finish_level(m, top_p, state, istate, cell_f, cell_i, counts, summary_f_ptr, summary_i_ptr, cell, NUM_SLICES,
                  FIRST: tl.constexpr, LAST: tl.constexpr, BINS: tl.constexpr, BINS_SHIFT: tl.constexpr,
                  CAP: tl.constexpr, TARGET_PROBS: tl.constexpr, DECIDE: tl.constexpr, P_BLOCK: tl.constexpr):
    # the row's last program of a level: the parts that may hold the cutoff become the next window (or,
    # after the last level, the candidates); the first level also takes M and T, and writes the summary
    # where every token in play is kept (with DECIDE, also a bound on the cutoff token's mass: the mass at
    # the start of the first part that may hold it)
    slices = tl.arange(0, P_BLOCK)
    present = slices < NUM_SLICES
    if FIRST:
        play = tl.sum(tl.load(cell_f + slices * PART + P_PLAY, mask=present, other=0.0), axis=0)
        lows = tl.load(cell_f + slices * PART + P_LOW, mask=present, other=float("inf"))
        low = tl.min(lows, axis=0)
        low_id = tl.max(tl.where(present & (lows == low), tl.load(cell_i + slices * PART + P_LOW_ID, mask=present,
                                                                  other=-1), -1), axis=0)
        target = top_p * play
        tl.store(state + F_PLAY, play)
        tl.store(state + F_TARGET, target)
        before = tl.full([], 0.0, tl.float32)
        keep_all = (top_p >= 1.0) | (target >= play)
        if keep_all:
            # min_p alone, or the target within rounding of the mass in play: every token in play is kept
            store_summary(summary_f_ptr, summary_i_ptr, cell, m, play, low, low_id, tl.full([], 0, tl.int32))
            tl.store(istate + I_STAGE, CLOSED)
    else:  # (a later level runs only where the first kept a search open)
        play = tl.load(state + F_PLAY)
        target = tl.load(state + F_TARGET)
        before = tl.sum(tl.load(cell_f + slices * PART + P_BEFORE, mask=present, other=0.0), axis=0)
        keep_all = tl.full([], 0, tl.int1)
    if not keep_all:
        lo, _hi, width = _window(state, istate, TARGET_PROBS)
        parts = tl.arange(0, BINS)
        hist = tl.load(counts + parts)
        many = hist.to(tl.float32)
        upper = many * _mass_at(_edge(lo, parts, width, TARGET_PROBS), m, TARGET_PROBS) * (1.0 + SLACK)
        lower = many * _mass_at(_edge(lo, parts + 1, width, TARGET_PROBS), m, TARGET_PROBS) * (1.0 - SLACK)
        if FIRST:
            lower = tl.where(parts == BINS - 1, 0.0, lower)  # the open-ended last part
        # the mass before part j (at least) and through it (at most), bounded from the window's start, and at the
        # first level also as M less the mass from j on (at most) and after j (at least), where the tighter; part
        # j may hold the cutoff where the first is at most T and the second at least T
        through_lo = before * (1.0 - SUM_SLACK) + tl.cumsum(lower, axis=0)
        through_hi = before * (1.0 + SUM_SLACK) + tl.cumsum(upper, axis=0)
        before_lo = through_lo - lower
        if FIRST:  # (before is 0 here: the cumulative sums are the parts' own)
            after_hi = tl.sum(upper, axis=0) - through_hi
            after_lo = tl.sum(lower, axis=0) - through_lo
            before_lo = tl.maximum(before_lo, play * (1.0 - SUM_SLACK) - (after_hi + upper))
            through_hi = tl.minimum(through_hi, play * (1.0 + SUM_SLACK) - after_lo)
        possible = (hist > 0) & (before_lo <= target) & (through_hi >= target)
        first = tl.min(tl.where(possible, parts, BINS), axis=0)
        last = tl.max(tl.where(possible, parts, -1), axis=0)
        if FIRST and DECIDE:
            tl.store(state + F_CUT, _mass_at(_edge(lo, first, width, TARGET_PROBS), m, TARGET_PROBS) * (1.0 + SLACK))
        # the next window: those parts, cut into BINS parts of a power of two of theirs each
        span = last - first + 1
        grow = tl.zeros([], tl.int32)
        for step in tl.static_range(1, BINS_SHIFT + 1):
            grow = tl.where(span > (1 << (step - 1)), step, grow)  # log2 of span, rounded up
        if TARGET_PROBS:
            tl.store(istate + I_LO, _edge(lo, first, width, TARGET_PROBS))
            tl.store(istate + I_HI, _edge(lo, last + 1, width, TARGET_PROBS))
            tl.store(istate + I_SHIFT, width + grow - BINS_SHIFT)
        else:
            tl.store(state + F_LO, _edge(lo, first, width, TARGET_PROBS))
            tl.store(state + F_HI, _edge(lo, last + 1, width, TARGET_PROBS))
            tl.store(state + F_WIDTH, width * (tl.full([], 1, tl.int32) << grow).to(tl.float32) / BINS)
        fallback = last < 0
        if FIRST:
            fallback = fallback | (last == BINS - 1)  # the open-ended part: no parts to cut it into
        if LAST:
            fallback = fallback | (tl.sum(tl.where((parts >= first) & (parts <= last), hist, 0), axis=0) > CAP)
        tl.store(istate + I_STAGE, tl.where(fallback, FALLBACK, SEARCH))


@triton.jit
def _slice_gather(row, V, inv_temperature, m, minp_threshold, lo, hi, start, length, list_f, list_i, part_f,
                  SLICE: tl.constexpr, CAP: tl.constexpr, TARGET_PROBS: tl.constexpr, HAS_MIN_P: tl.constexpr,
                  BLOCK: tl.constexpr, FTZ_SUMS: tl.constexpr, PREDICATED_SUMS: tl.constexpr):
    # this slice's mass in play before the candidates, and its candidates copied to the cell's list
    before = tl.zeros([BLOCK], tl.float32)
    for chunk in range(0, SLICE, BLOCK):
        offs = start + chunk + tl.arange(0, BLOCK)
        value, mass = values_of(load_row(row, offs, V, TARGET_PROBS), inv_temperature, m, TARGET_PROBS)
        play = _in_play(value, mass, minp_threshold, HAS_MIN_P)
        if FTZ_SUMS and not (TARGET_PROBS or HAS_MIN_P):  # (the mass only summed)
            mass = exp_in_sum(value - m)
        dist = _distance(value, m, TARGET_PROBS)
        if PREDICATED_SUMS and not (TARGET_PROBS or HAS_MIN_P):  # (a token of no mass is at distance +inf)
            before = add_if_above(before, lo, dist, mass)
        else:
            before += tl.where(play & (dist < lo), mass, 0.0)
        chosen = play & (dist >= lo) & (dist < hi)
        if tl.max(chosen.to(tl.int32), axis=0) > 0:  # (most chunks hold none)
            at = tl.atomic_add(length + tl.zeros([BLOCK], tl.int32), 1, mask=chosen, sem="relaxed")
            keep = chosen & (at < CAP)
            tl.store(list_f + at, value, mask=keep)
            tl.store(list_i + at, offs, mask=keep)
    tl.store(part_f + P_BEFORE, tl.sum(before, axis=0))


@triton.jit
def _cutoff_in_list(list_f, list_i, size, before, target, m, N: tl.constexpr, TARGET_PROBS: tl.constexpr):
    # the list's first `size` candidates (size <= N) in the row's order, and the first whose running mass
    # (before + theirs through it) reaches target: (its place, or N if none does; S; tau; iota)
    at = tl.arange(0, N)
    present = at < size
    value = tl.load(list_f + at, mask=present, other=0.0)
    ids = tl.load(list_i + at, mask=present, other=0)
    # the row's order as one ascending int64: value largest first (its order key inverted), then id
    order = tl.where(present, ((~_order_key32(value)).to(tl.int64) << 32) | ids.to(tl.int64),
                     9223372036854775807)
    order = tl.sort(order)
    value = value_of_key32(~((order >> 32).to(tl.int32)))
    ids = (order & 0xFFFFFFFF).to(tl.int32)
    if TARGET_PROBS:
        mass = value
    else:
        mass = tl.exp(value - m)
    through = before + tl.cumsum(tl.where(present, mass, 0.0), axis=0)
    j = tl.min(tl.where(present & (through >= target), at, N), axis=0)
    j = tl.where(target <= 0.0, 0, j)  # a row keeping its first token only
    pick = at == j
    return (j, tl.max(tl.where(pick, through, float("-inf")), axis=0),
            tl.max(tl.where(pick, value, float("-inf")), axis=0), tl.max(tl.where(pick, ids, -1), axis=0))


@triton.jit
def _finish(row, V, inv_temperature, k, top_p, min_p, m, stage, state, istate, cell_f, counts, list_f, list_i,
            summary_f_ptr, summary_i_ptr, cell, NUM_SLICES, CAP: tl.constexpr, TARGET_PROBS: tl.constexpr,
            BLOCK: tl.constexpr, P_BLOCK: tl.constexpr):
    # the cutoff among the candidates, or, where the search could not finish there, by one program
    found = stage == SEARCH
    if stage == SEARCH:
        slices = tl.arange(0, P_BLOCK)
        before = tl.sum(tl.load(cell_f + slices * PART + P_BEFORE, mask=slices < NUM_SLICES, other=0.0), axis=0)
        target = tl.load(state + F_TARGET)
        size = tl.load(counts + COUNTS - 1)
        # (sorted at the least of CAP / 8, CAP / 4, CAP / 2 and CAP that holds the list: a sort's time grows with its
        # length, and one program sorting at CAP was the longest launch of a step at B = 8; a list of fewer than 8,
        # which only tests ask for, at CAP)
        if CAP < 8:
            j, mass, tau, iota = _cutoff_in_list(list_f, list_i, size, before, target, m, CAP, TARGET_PROBS)
        else:
            if size <= CAP // 8:
                j, mass, tau, iota = _cutoff_in_list(list_f, list_i, size, before, target, m, CAP // 8, TARGET_PROBS)
            elif size <= CAP // 4:
                j, mass, tau, iota = _cutoff_in_list(list_f, list_i, size, before, target, m, CAP // 4, TARGET_PROBS)
            elif size <= CAP // 2:
                j, mass, tau, iota = _cutoff_in_list(list_f, list_i, size, before, target, m, CAP // 2, TARGET_PROBS)
            else:
                j, mass, tau, iota = _cutoff_in_list(list_f, list_i, size, before, target, m, CAP, TARGET_PROBS)
        lo, _hi, _width = _window(state, istate, TARGET_PROBS)
        if target <= 0.0:
            found = lo == 0  # the first token: among the candidates iff they start at the row's largest value
        else:
            # (rounding can leave the cutoff outside: the mass before them reaching T, or theirs short of it)
            found = (before < target) & (j < size) & (size <= CAP)
        if found:
            store_summary(summary_f_ptr, summary_i_ptr, cell, m, mass, tau, iota, tl.full([], 0, tl.int32))
    if not found:
        _m, mass, tau, iota = truncate_row_radix(row, V, inv_temperature, k, top_p, min_p, TARGET_PROBS, BLOCK)
        store_summary(summary_f_ptr, summary_i_ptr, cell, m, mass, tau, iota, tl.full([], 0, tl.int32))


@triton.jit
def _histogram_row(row, cell, s, x, known, V, inv_temperature, k, top_p, min_p, level, state_f, state_i, part_f, part_i,
                   counts_ptr, list_f_ptr, list_i_ptr, arrivals_ptr, summary_f_ptr, summary_i_ptr, NUM_SLICES,
                   ZERO_SHARE, STEP: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr, SLICE: tl.constexpr,
                   BINS: tl.constexpr, BINS_SHIFT: tl.constexpr, CAP: tl.constexpr, TARGET_PROBS: tl.constexpr,
                   HAS_MIN_P: tl.constexpr, DECIDE: tl.constexpr, BLOCK: tl.constexpr, P_BLOCK: tl.constexpr,
                   ATOMIC: tl.constexpr, FTZ_SUMS: tl.constexpr, PREDICATED_SUMS: tl.constexpr):
    # one program's share of one step for one cell (row `row`, slice s; x the cell's draft, read only with
    # DECIDE at the first level; `known`: STEP_MAX, the row's largest value is in the cell's state already); top_p
    # the request's (the search takes 0 for a row keeping its first token only, k = 1; the fallback the knobs as
    # they are)
    state = state_f + cell * STATE
    istate = state_i + cell * STATE
    cell_f = part_f + cell * NUM_SLICES * PART
    cell_i = part_i + cell * NUM_SLICES * PART
    counts = counts_ptr + cell * COUNTS
    list_f = list_f_ptr + cell * CAP
    list_i = list_i_ptr + cell * CAP
    if STEP == STEP_MAX:
        for zero in range(s * ZERO_SHARE, (s + 1) * ZERO_SHARE, 256):  # this program's share of the counts
            lanes = zero + tl.arange(0, 256)
            tl.store(counts + lanes, tl.zeros([256], tl.int32), mask=(lanes < (s + 1) * ZERO_SHARE) & (lanes < COUNTS))
        if not known:
            tl.store(cell_f + s * PART + P_MAX, _slice_max(row, V, inv_temperature, s * SLICE, SLICE, TARGET_PROBS,
                                                           BLOCK, False))
        if last_to_arrive(arrivals_ptr, cell, NUM_SLICES):
            if known:
                m = tl.load(state + F_M)
            else:
                slices = tl.arange(0, P_BLOCK)
                m = tl.max(tl.load(cell_f + slices * PART + P_MAX, mask=slices < NUM_SLICES, other=float("-inf")),
                           axis=0)
            tl.store(state + F_M, m)
            # the first window: the whole row, in BINS parts
            tl.store(state + F_LO, 0.0)
            tl.store(state + F_HI, float("inf"))
            tl.store(state + F_WIDTH, RANGE_UNITS / BINS)
            tl.store(istate + I_LO, 0)
            tl.store(istate + I_HI, 2147483647)
            tl.store(istate + I_SHIFT, RANGE_SHIFT - BINS_SHIFT)
            open_search = m > float("-inf")
            tl.store(istate + I_STAGE, tl.where(open_search, SEARCH, CLOSED))
            if not open_search:  # no value of mass: nothing kept
                store_summary(summary_f_ptr, summary_i_ptr, cell, m, tl.full([], 0.0, tl.float32),
                              tl.full([], float("inf"), tl.float32), tl.full([], -1, tl.int32),
                              tl.full([], 0, tl.int32))
    else:
        stage = tl.load(istate + I_STAGE)  # the launch before wrote it
        if stage >= SEARCH:
            m = tl.load(state + F_M)
            minp_threshold = min_p
            if TARGET_PROBS:
                minp_threshold = min_p * m
            if STEP == STEP_FINISH:
                _finish(row, V, inv_temperature, k, top_p, min_p, m, stage, state, istate, cell_f, counts, list_f,
                        list_i, summary_f_ptr, summary_i_ptr, cell, NUM_SLICES, CAP, TARGET_PROBS, BLOCK, P_BLOCK)
            elif stage == SEARCH:
                lo, hi, width = _window(state, istate, TARGET_PROBS)
                if STEP == STEP_LEVEL:
                    _slice_level(row, V, inv_temperature, m, minp_threshold, lo, hi, width, s * SLICE,
                                 counts + level * BINS, cell_f + s * PART, cell_i + s * PART, x, FIRST, SLICE, BINS,
                                 TARGET_PROBS, HAS_MIN_P, DECIDE, BLOCK, ATOMIC, FTZ_SUMS, PREDICATED_SUMS)
                    if last_to_arrive(arrivals_ptr, cell, NUM_SLICES):
                        _finish_level(m, tl.where(k == 1, 0.0, top_p), state, istate, cell_f, cell_i,
                                      counts + level * BINS, summary_f_ptr, summary_i_ptr, cell, NUM_SLICES, FIRST,
                                      LAST, BINS, BINS_SHIFT, CAP, TARGET_PROBS, DECIDE, P_BLOCK)
                else:
                    _slice_gather(row, V, inv_temperature, m, minp_threshold, lo, hi, s * SLICE, counts + COUNTS - 1,
                                  list_f, list_i, cell_f + s * PART, SLICE, CAP, TARGET_PROBS, HAS_MIN_P, BLOCK,
                                  FTZ_SUMS, PREDICATED_SUMS)


@triton.jit
def _bounds_at_draft(row, b, r, side, x, V, inv_temperature, min_p, state_f, state_i, part_f, summary_f_ptr,
                     summary_i_ptr, NUM_SLOTS, NUM_SLICES, TARGET_PROBS: tl.constexpr, HAS_MIN_P: tl.constexpr,
                     P_BLOCK: tl.constexpr):
    # DECIDE, after the first level: bounds (lo, hi) on p'(x) of the cell (row r, side) of request b (x a valid
    # id), and whether they hold.
    # A cell closed with its summary (every token in play kept) gives p'(x) itself, as the step computes it. A
    # cell still searching bounds it from M, T, the mass A before x in play and the bound on the cutoff's mass
    # c (draft_bounds.bracket): x is kept iff A < T; if kept, the kept mass S is at least T and A + p(x)
    # (everything through x), and at most M and the larger of A + p(x) (x the cutoff) and T + min(c, p(x)) (the
    # cutoff after x, of no more mass than x or c); each side widened by BRACKET_SLACK M for the sums' rounding.
    # Any other cell (no value of mass, the search fallen back) gives no bounds.
    cell = (b * NUM_SLOTS + r) * 2 + side
    state = state_f + cell * STATE
    stage = tl.load(state_i + cell * STATE + I_STAGE)
    raw = load_row(row, x, V, TARGET_PROBS)
    lo = tl.zeros([], tl.float32)
    hi = tl.zeros([], tl.float32)
    sure = stage == SEARCH
    if stage == CLOSED:
        sm, smass, stau, siota = read_summary(summary_f_ptr, summary_i_ptr, b, r, side, NUM_SLOTS)
        p = truncated_prob_of(raw, x, inv_temperature, sm, smass, stau, siota, TARGET_PROBS)
        lo = p
        hi = p
        sure = sm > float("-inf")
    elif stage == SEARCH:
        m = tl.load(state + F_M)
        value, mass = values_of(raw, inv_temperature, m, TARGET_PROBS)
        minp_threshold = min_p
        if TARGET_PROBS:
            minp_threshold = min_p * m
        in_play = _in_play(value, mass, minp_threshold, HAS_MIN_P)
        slices = tl.arange(0, P_BLOCK)
        above = tl.sum(tl.load(part_f + (cell * NUM_SLICES + slices) * PART + P_ABOVE, mask=slices < NUM_SLICES,
                               other=0.0), axis=0)
        lo, hi, kept, out = bracket(mass, above, tl.load(state + F_TARGET), tl.load(state + F_PLAY),
                                    tl.load(state + F_CUT), in_play)
        sure = kept | (~in_play) | out
    return lo, hi, sure


@triton.jit
def _decide_request(b, state_f, state_i, part_f, summary_f_ptr, summary_i_ptr, decided_ptr, t_base, t_stride_k,
                    d_base, d_stride_k, draft_ids_ptr, draft_ids_stride, num_draft_ptr, temperature_ptr, seed_ptr,
                    position_ptr, top_k_ptr, top_p_ptr, min_p_ptr, V, NUM_SLOTS, NUM_SLICES, MODE: tl.constexpr,
                    DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr, TRUNCATE_DRAFT: tl.constexpr,
                    HAS_TOP_K: tl.constexpr, HAS_TOP_P: tl.constexpr, HAS_MIN_P: tl.constexpr, P_BLOCK: tl.constexpr):
    # STEP_DECIDE (one program per request, after the first level): the request's drafts decided in order
    # from each cell's bounds on p'(x) and q'(x) while every decision is sure, that is while u q'(x) lies
    # below the bounds' least p'(x) or above their largest by DECISION_MARGIN (so the step's own test on the
    # exact summaries agrees); writes (t, clean) for the step: slots before t are accepted, and with clean the
    # step stops at t (t the first slot not surely accepted, or n; clean: it was surely rejected, or n).
    # Every other cell of the request is then skipped:
    # with clean, every row but t; at a decision that is not sure (clean 0, t that slot), the rows before t.
    # A request that is not a probabilistic one with top_p and/or min_p alone (top_k off) writes (0, 0).
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
    truncated, k, _top_p, min_p = request_knobs(b, top_k_ptr, top_p_ptr, min_p_ptr, V, HAS_TOP_K, HAS_TOP_P,
                                                HAS_MIN_P)
    t = tl.zeros([], tl.int32)
    clean_stop = tl.zeros([], tl.int32)
    if truncated & (~greedy) & (k == 0) & request_valid(inv_temperature):
        t = n
        clean_stop = tl.full([], 1, tl.int32)
        i = 0
        going = n > 0
        while going:
            x = tl.load(draft_ids_ptr + b * draft_ids_stride + i)
            x_valid = (x >= 0) & (x < V)
            x_safe = tl.where(x_valid, x, 0).to(tl.int32)
            p_lo, p_hi, sure = _bounds_at_draft(t_base + i * t_stride_k, b, i, 0, x_safe, V, inv_temperature, min_p,
                                                state_f, state_i, part_f, summary_f_ptr, summary_i_ptr, NUM_SLOTS,
                                                NUM_SLICES, TARGET_PROBS, HAS_MIN_P, P_BLOCK)
            if DRAFT == DRAFT_LOGITS:  # (truncated: the launcher decides no other draft logits)
                q_lo, q_hi, q_sure = _bounds_at_draft(d_base + i * d_stride_k, b, i, 1, x_safe, V, inv_temperature,
                                                      min_p, state_f, state_i, part_f, summary_f_ptr, summary_i_ptr,
                                                      NUM_SLOTS, NUM_SLICES, False, HAS_MIN_P, P_BLOCK)
                sure = sure & q_sure
            else:  # one-hot drafts: 1; draft probabilities cleaned, as the step reads them
                q_lo = draft_prob_at(d_base + i * d_stride_k + x_safe, x_valid, 1.0, 0.0, 1.0, DRAFT)
                q_hi = q_lo
            stop, t, clean_stop = decide_slot(i, x_valid, p_lo, p_hi, q_lo, q_hi, sure, key_of_seed, position,
                                              clean_stop)
            i += 1
            going = (~stop) & (i < n)
        for r in range(NUM_SLOTS):
            skip = (r <= n) & skipped(r, t, clean_stop)
            if skip:
                cell = (b * NUM_SLOTS + r) * 2
                tl.store(state_i + cell * STATE + I_STAGE, SKIPPED)
                if TRUNCATE_DRAFT:  # (a constexpr: the draft cell's test stays apart)
                    tl.store(state_i + (cell + 1) * STATE + I_STAGE, SKIPPED, mask=r < n)
    tl.store(decided_ptr + b * DECIDED_FIELDS, t)
    tl.store(decided_ptr + b * DECIDED_FIELDS + 1, clean_stop)


@triton.jit
def _histogram_slice(request, s, pointers, V, NUM_SLOTS, NUM_SLICES, ZERO_SHARE, level, TARGET_PROBS: tl.constexpr,
                     TRUNCATE_DRAFT: tl.constexpr, HAS_MIN_P: tl.constexpr, STEP: tl.constexpr, DECIDE: tl.constexpr,
                     SKIP_DECIDED: tl.constexpr, BOUNDS_MAX: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr,
                     SLICE: tl.constexpr, BLOCK: tl.constexpr, BINS: tl.constexpr, BINS_SHIFT: tl.constexpr,
                     CAP: tl.constexpr, P_BLOCK: tl.constexpr, ATOMIC: tl.constexpr, FTZ_SUMS: tl.constexpr,
                     PREDICATED_SUMS: tl.constexpr):
    # a program's share of a step for slice s of its cell (the request's row r, side), where the step reads it
    b, r, side, n, greedy, inv_temperature, truncated, k, top_p, min_p = request
    (state_f_ptr, state_i_ptr, part_f_ptr, part_i_ptr, counts_ptr, list_f_ptr, list_i_ptr, arrivals_ptr, summary_f_ptr,
     summary_i_ptr, decided_ptr, target_ptr, target_stride_b, target_stride_k, draft_ptr, draft_stride_b,
     draft_stride_k, draft_ids_ptr, draft_ids_stride) = pointers
    wanted = summary_wanted(truncated, greedy, r, n, side, TRUNCATE_DRAFT)
    known = tl.zeros([], tl.int1)  # (STEP_MAX: whether the row's largest value is in the cell's state)
    if SKIP_DECIDED and (STEP == STEP_MAX):
        # the drafts were decided before this launch (draft_bounds.py): a cell the step will not read is
        # marked skipped, for the launches after, and passed over; with BOUNDS_MAX a request that decided there
        # and stopped at t < n left row t's largest values in its cells' state
        t = tl.load(decided_ptr + b * DECIDED_FIELDS)
        skip = wanted & skipped(r, t, tl.load(decided_ptr + b * DECIDED_FIELDS + 1))
        if skip & (s == 0):
            tl.store(state_i_ptr + ((b * NUM_SLOTS + r) * 2 + side) * STATE + I_STAGE, SKIPPED)
        wanted = wanted & (~skip)
        if BOUNDS_MAX:
            known = (decides(truncated, greedy, k, min_p, inv_temperature) != 0) & (r == t) & (t < n)
    if wanted:
        cell = (b * NUM_SLOTS + r) * 2 + side
        x = r * 0  # the cell's draft (the first level with DECIDE; the bonus row's and an invalid id: 0)
        if DECIDE and FIRST:
            x = tl.load(draft_ids_ptr + b * draft_ids_stride + r, mask=r < n, other=0)
            x = tl.where((x >= 0) & (x < V), x, 0).to(tl.int32)
        if side == 0:
            _histogram_row(target_ptr + b * target_stride_b + r * target_stride_k, cell, s, x, known, V,
                           inv_temperature, k, top_p, min_p, level, state_f_ptr, state_i_ptr, part_f_ptr, part_i_ptr,
                           counts_ptr, list_f_ptr, list_i_ptr, arrivals_ptr, summary_f_ptr, summary_i_ptr, NUM_SLICES,
                           ZERO_SHARE, STEP, FIRST, LAST, SLICE, BINS, BINS_SHIFT, CAP, TARGET_PROBS, HAS_MIN_P, DECIDE,
                           BLOCK, P_BLOCK, ATOMIC, FTZ_SUMS, PREDICATED_SUMS)
        else:
            _histogram_row(draft_ptr + b * draft_stride_b + r * draft_stride_k, cell, s, x, known, V, inv_temperature,
                           k, top_p, min_p, level, state_f_ptr, state_i_ptr, part_f_ptr, part_i_ptr, counts_ptr,
                           list_f_ptr, list_i_ptr, arrivals_ptr, summary_f_ptr, summary_i_ptr, NUM_SLICES, ZERO_SHARE,
                           STEP, FIRST, LAST, SLICE, BINS, BINS_SHIFT, CAP, False, HAS_MIN_P, DECIDE, BLOCK, P_BLOCK,
                           ATOMIC, FTZ_SUMS, PREDICATED_SUMS)


@triton.jit
def _split_histogram_kernel(
    state_f_ptr, state_i_ptr,  # [B * (K + 1) * 2, STATE] float32 and int32 scratch
    part_f_ptr, part_i_ptr,  # [B * (K + 1) * 2, NUM_SLICES, PART] float32 and int32 scratch
    counts_ptr,  # [B * (K + 1) * 2, COUNTS] int32 scratch (cleared by STEP_MAX)
    list_f_ptr, list_i_ptr,  # [B * (K + 1) * 2, CAP] float32 and int32 scratch
    arrivals_ptr,  # [B * (K + 1) * 2] int32 per cell, then with FOLD [B] per request; zero on entry and exit
    summary_f_ptr, summary_i_ptr,  # the summaries [B, K + 1, 2, 4] float32 and [B, K + 1, 2] int32
    decided_ptr,  # [B, DECIDED_FIELDS] int32: (t, clean) per request (written by STEP_DECIDE, or before STEP_MAX by
    # draft_bounds.py)
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits (read only with TRUNCATE_DRAFT), or
    # with DECIDE the draft row of any form (draft probabilities read at the drafts)
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64 (read only with DECIDE)
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B]
    top_k_ptr, top_p_ptr, min_p_ptr,  # [B] int32, float32, float32 (read only where HAS_*)
    V, NUM_SLOTS, NUM_SLICES,
    ZERO_SHARE,  # STEP_MAX: the counts each program clears, a multiple of 256
    level,  # STEP_LEVEL: which level, from 0
    MODE: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    TRUNCATE_DRAFT: tl.constexpr,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    STEP: tl.constexpr,  # STEP_MAX, STEP_LEVEL, STEP_GATHER, STEP_FINISH or STEP_DECIDE
    DECIDE: tl.constexpr,  # the first level: also each draft's mass before it (for STEP_DECIDE, launched after)
    SKIP_DECIDED: tl.constexpr,  # STEP_MAX: the drafts were decided before (draft_bounds.py): pass over what the
    # step will not read
    BOUNDS_MAX: tl.constexpr,  # STEP_MAX with SKIP_DECIDED: row t's largest values from that pass (cells' state)
    DRAFT: tl.constexpr,  # STEP_DECIDE: the draft form (DRAFT_NONE, DRAFT_LOGITS truncated, DRAFT_PROBS)
    FIRST: tl.constexpr,  # STEP_LEVEL: the first level
    LAST: tl.constexpr,  # STEP_LEVEL: the last level
    SLICE: tl.constexpr,  # tokens of a row per program (a multiple of BLOCK)
    BLOCK: tl.constexpr,  # tokens per chunk
    BINS: tl.constexpr,  # parts of a level's window (a power of two, at most MAX_BINS)
    BINS_SHIFT: tl.constexpr,  # log2(BINS)
    CAP: tl.constexpr,  # the most candidates a row's list holds (a power of two)
    P_BLOCK: tl.constexpr,  # a power of two >= NUM_SLICES
    ATOMIC: tl.constexpr,  # STEP_LEVEL, a later level: its window's tokens counted by atomics, not tl.histogram
    SLICES_PER_PROGRAM: tl.constexpr,  # the slices of a row each program takes, one after another
    ROWS: tl.constexpr,  # the rows a program takes: ROWS_PER_CELL, ROWS_PER_REQUEST, ROWS_AT_STOP, ROWS_AFTER_STOP
    ROW_BLOCK: tl.constexpr,  # a request's rows in turn (ROWS_PER_REQUEST, ROWS_AFTER_STOP): a power of 2 >= NUM_SLOTS
    FTZ_SUMS: tl.constexpr,  # logits without min_p: the masses that are only summed by rows.exp_in_sum, not tl.exp
    # (the same sums but for chains of exact rounding ties; launch.HISTOGRAM_FTZ_SUMS)
    PREDICATED_SUMS: tl.constexpr,  # logits without min_p: the later levels' and the gather's masses before the window
    # added by rows.add_if_above (a compare and a predicated add), the first level's mass in play by a plain add (a
    # token out of play has mass +0); the same sums (launch.HISTOGRAM_PREDICATED_SUMS)
    FOLD: tl.constexpr,  # the first level with DECIDE (ROWS_PER_CELL): each request's last program to arrive also takes
    # STEP_DECIDE, with the draft form DRAFT (no launch for it; launch.DECISION_FOLD_MAX_BATCH)
    PDL: tl.constexpr = False,  # programmatic dependent launch (dependent_launch.py; the launcher's launch_pdl)
):
    # grid (B, K + 1, sides * cdiv(NUM_SLICES, SLICES_PER_PROGRAM)); STEP_FINISH (B, K + 1, sides); STEP_DECIDE (B,);
    # the second dimension 1 unless ROWS_PER_CELL
    wait_for_launch_before(PDL)  # (first: nothing above reads or writes memory)
    tl.static_assert(not FOLD or ((STEP == STEP_LEVEL) and FIRST and DECIDE and (ROWS == ROWS_PER_CELL)),
                     "FOLD folds STEP_DECIDE into the first level of a launch whose programs take a cell each")
    if STEP == STEP_DECIDE:
        b = tl.program_id(0).to(tl.int64)
        _decide_request(b, state_f_ptr, state_i_ptr, part_f_ptr, summary_f_ptr, summary_i_ptr, decided_ptr,
                        target_ptr + b * target_stride_b, target_stride_k, draft_ptr + b * draft_stride_b,
                        draft_stride_k, draft_ids_ptr, draft_ids_stride, num_draft_ptr, temperature_ptr, seed_ptr,
                        position_ptr, top_k_ptr, top_p_ptr, min_p_ptr, V, NUM_SLOTS, NUM_SLICES, MODE, DRAFT,
                        TARGET_PROBS, TRUNCATE_DRAFT, HAS_TOP_K, HAS_TOP_P, HAS_MIN_P, P_BLOCK)
    else:
        going = tl.full([], 1, tl.int1)
        if ROWS == ROWS_AFTER_STOP:  # (its request's decision first: nothing more where it stopped clean)
            going = tl.load(decided_ptr + tl.program_id(0).to(tl.int64) * DECIDED_FIELDS + 1) == 0
        if going:
            b, r, side, group, n, greedy, inv_temperature, truncated, k, top_p, min_p = cell_program(
                num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, top_k_ptr, top_p_ptr, min_p_ptr, V, NUM_SLOTS,
                tl.cdiv(NUM_SLICES, SLICES_PER_PROGRAM), STEP == STEP_FINISH, MODE, HAS_TOP_K, HAS_TOP_P, HAS_MIN_P)
            pointers = (state_f_ptr, state_i_ptr, part_f_ptr, part_i_ptr, counts_ptr, list_f_ptr, list_i_ptr,
                        arrivals_ptr, summary_f_ptr, summary_i_ptr, decided_ptr, target_ptr, target_stride_b,
                        target_stride_k, draft_ptr, draft_stride_b, draft_stride_k, draft_ids_ptr, draft_ids_stride)
            if ROWS == ROWS_AT_STOP:
                r = tl.load(decided_ptr + b * DECIDED_FIELDS)  # (the request's stop t)
            request = (b, r, side, n, greedy, inv_temperature, truncated, k, top_p, min_p)
            if (ROWS != ROWS_PER_CELL) and (ROWS != ROWS_AT_STOP):  # (a request's rows in turn)
                # rows in turn, each as its own program would take it (where the drafts were decided first, most
                # rows are passed over, and a program passing over one costs what its loads wait). After the first
                # launch the rows' stages are loaded at once first (wanted cells only: the others' state is never
                # written), so that a row passed over costs no wait of its own; a cell taken loads its stage again,
                # from the cache
                rows = tl.arange(0, ROW_BLOCK)
                taken = rows < NUM_SLOTS
                if ROWS != ROWS_PER_REQUEST:  # (the rows after the stop t: `going`, the request did not stop clean)
                    taken = taken & (rows > tl.load(decided_ptr + b * DECIDED_FIELDS))
                stages = tl.where(taken, SEARCH, CLOSED)
                if STEP != STEP_MAX:
                    at_rows = (summary_wanted(truncated, greedy, rows, n, side, TRUNCATE_DRAFT) != 0) & taken
                    stages = tl.load(state_i_ptr + ((b * NUM_SLOTS + rows) * 2 + side) * STATE + I_STAGE,
                                     mask=at_rows, other=CLOSED)
                for row in range(NUM_SLOTS):
                    if tl.max(tl.where(rows == row, stages, CLOSED), axis=0) >= SEARCH:
                        _program_slices((b, row, side, n, greedy, inv_temperature, truncated, k, top_p, min_p),
                                        group, pointers, V, NUM_SLOTS, NUM_SLICES, ZERO_SHARE, level, TARGET_PROBS,
                                        TRUNCATE_DRAFT, HAS_MIN_P, STEP, DECIDE, SKIP_DECIDED, BOUNDS_MAX, FIRST, LAST,
                                        SLICE, BLOCK, BINS, BINS_SHIFT, CAP, P_BLOCK, ATOMIC, SLICES_PER_PROGRAM,
                                        FTZ_SUMS, PREDICATED_SUMS)
            else:
                _program_slices(request, group, pointers, V, NUM_SLOTS, NUM_SLICES, ZERO_SHARE, level, TARGET_PROBS,
                                TRUNCATE_DRAFT, HAS_MIN_P, STEP, DECIDE, SKIP_DECIDED, BOUNDS_MAX, FIRST, LAST, SLICE,
                                BLOCK, BINS, BINS_SHIFT, CAP, P_BLOCK, ATOMIC, SLICES_PER_PROGRAM, FTZ_SUMS,
                                PREDICATED_SUMS)
        # (FOLD: every program of the request arrives, after its row's level was finished where it was the row's last,
        # so the request's last to arrive sees every cell's first level)
        if FOLD:
            b = tl.program_id(0).to(tl.int64)
            if last_to_arrive(arrivals_ptr + tl.num_programs(0) * NUM_SLOTS * 2, b,
                              tl.num_programs(1) * tl.num_programs(2)):
                _decide_request(b, state_f_ptr, state_i_ptr, part_f_ptr, summary_f_ptr, summary_i_ptr, decided_ptr,
                                target_ptr + b * target_stride_b, target_stride_k, draft_ptr + b * draft_stride_b,
                                draft_stride_k, draft_ids_ptr, draft_ids_stride, num_draft_ptr, temperature_ptr,
                                seed_ptr, position_ptr, top_k_ptr, top_p_ptr, min_p_ptr, V, NUM_SLOTS, NUM_SLICES,
                                MODE, DRAFT, TARGET_PROBS, TRUNCATE_DRAFT, HAS_TOP_K, HAS_TOP_P, HAS_MIN_P, P_BLOCK)


@triton.jit
def _program_slices(request, group, pointers, V, NUM_SLOTS, NUM_SLICES, ZERO_SHARE, level, TARGET_PROBS: tl.constexpr,
                    TRUNCATE_DRAFT: tl.constexpr, HAS_MIN_P: tl.constexpr, STEP: tl.constexpr, DECIDE: tl.constexpr,
                    SKIP_DECIDED: tl.constexpr, BOUNDS_MAX: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr,
                    SLICE: tl.constexpr, BLOCK: tl.constexpr, BINS: tl.constexpr, BINS_SHIFT: tl.constexpr,
                    CAP: tl.constexpr, P_BLOCK: tl.constexpr, ATOMIC: tl.constexpr, SLICES_PER_PROGRAM: tl.constexpr,
                    FTZ_SUMS: tl.constexpr, PREDICATED_SUMS: tl.constexpr):
    # a program's share of a step for one cell: its slice (or group of slices), or with STEP_FINISH the cell
    if (STEP == STEP_FINISH) or (SLICES_PER_PROGRAM == 1):  # (STEP_FINISH: one program a cell, group 0)
        _histogram_slice(request, group, pointers, V, NUM_SLOTS, NUM_SLICES, ZERO_SHARE, level, TARGET_PROBS,
                         TRUNCATE_DRAFT, HAS_MIN_P, STEP, DECIDE, SKIP_DECIDED, BOUNDS_MAX, FIRST, LAST, SLICE, BLOCK,
                         BINS, BINS_SHIFT, CAP, P_BLOCK, ATOMIC, FTZ_SUMS, PREDICATED_SUMS)
    else:
        # the program's slices in turn; each arrives apart, so the row's last slice to arrive finishes the step, as
        # with one slice a program
        for j in range(SLICES_PER_PROGRAM):
            s = group * SLICES_PER_PROGRAM + j
            if s < NUM_SLICES:
                _histogram_slice(request, s, pointers, V, NUM_SLOTS, NUM_SLICES, ZERO_SHARE, level, TARGET_PROBS,
                                 TRUNCATE_DRAFT, HAS_MIN_P, STEP, DECIDE, SKIP_DECIDED, BOUNDS_MAX, FIRST, LAST, SLICE,
                                 BLOCK, BINS, BINS_SHIFT, CAP, P_BLOCK, ATOMIC, FTZ_SUMS, PREDICATED_SUMS)
