"""The split radix path: the cutoff of every truncated row of a batch given no ``top_k`` (``top_p`` and/or
``min_p``), found by programs that each read one slice of the row, one launch per step of the search:
the launch variants ``triton-radix-...`` (``launch.SPLIT_SEARCH``; such a batch takes the split histogram
path, ``histogram.py``, by default). (A batch given ``top_k`` takes the prepass or the step's own search, ``specbench/kernels/truncation.py``,
for every row.) A row that keeps only its first token (``top_p <= 0``, ``min_p > 1``) is searched with
a target mass of 0: the search ends at the row's largest value, and of its tokens the first by id.

The one-program radix path (``specbench/kernels/cutoffs.py``) reads a 128256-token row about 25
times in one program: 2.1 ms a step at B = 1 for ``top_p`` alone on an H200. Here each row is cut
into slices of ``SLICE`` tokens (a number that depends on the device only, never on the batch, so
a row's sums, and so its summary, are the same in every batch and launch shape), one program per
slice, and the search is a fixed sequence of launches that a CUDA graph can hold:

1. ``STEP_MAX``: each program the largest value of its slice; the row's last program to arrive (an
   arrival count per cell, left at zero) takes the row's largest value ``m`` and opens the search
   (a row with no value of mass gets its summary: nothing kept).
2. ``STEP_DIGIT`` for ``digit`` 0..7: a weighted radix select on the values' 32-bit order keys, 4
   bits a launch from the top. Each program adds up, per value of the digit, the mass ``w`` of its
   tokens *in play* (a value of mass and ``w >= min_p``, the contract's min-p) whose key agrees with
   the prefix chosen so far; at digit 0 also their total mass and the last of them in the row's
   order (smallest value, largest id among ties). The last to arrive sums the 16 masses over the
   slices in slice order and picks the digit where the mass from the top reaches the target
   (``top_p`` times the mass in play). At digit 7 the prefix is a whole key, one value ``tau``,
   and each program also counts its tokens of that value.
3. ``STEP_ID`` (one program per cell): of the tokens of value ``tau`` the first ``r`` by id are
   kept, ``r`` the fewest of them whose mass (each ``a = w(tau)``) brings the kept mass to the
   target (at least 1, at most all); the program whose slice holds the ``r``-th of them finds its
   id ``iota`` and writes the summary ``(m, S, tau, iota, n = 0)``, ``S`` the mass above ``tau``
   plus ``r a``.

A row with ``top_p`` off (``min_p`` alone) is finished at digit 0: its cutoff is the last token in
play. Should rounding leave the mass of the histograms short of the target (``top_p`` within
rounding of 1), the same cutoff is taken: every token in play is kept. The sums are float32 in
this module's order (the slices' sums, then the slices in order), so a token whose prefix mass lies
within rounding of the boundary can fall either side, as the contract allows.

Scratch (``specbench/kernels/launch.py`` sizes it): per cell a state of ``STATE`` floats (m, the
mass in play, the target still to reach, the mass above the prefix, the last token's value, and once
the last digit is chosen tau and the kept mass) and ``STATE`` ints (the prefix, the last token's id,
the id step's slice, -1 once the search is closed, and rank), then per (cell,
slice) ``PART_F`` floats (16 masses, the mass in play, the smallest value) and ``PART_I`` ints (16
counts, the last token's id). Every scratch slot is read only after an earlier launch of the same
step, or the same program, wrote it.
"""

import triton
import triton.language as tl

from specbench.kernels.cutoffs import _order_key32, load_row, row_values, value_of_key32, values_of
from specbench.kernels.dependent_launch import wait_for_launch_before
from specbench.kernels.split import last_to_arrive
from specbench.kernels.truncation import cell_program, store_summary, summary_wanted

STEP_MAX = tl.constexpr(0)
STEP_DIGIT = tl.constexpr(1)
STEP_ID = tl.constexpr(2)
DIGITS = 8  # 4-bit digits of a 32-bit key
STATE = tl.constexpr(8)
PART_F = tl.constexpr(18)
PART_I = tl.constexpr(17)
# state fields
F_M = tl.constexpr(0)
F_PLAY = tl.constexpr(1)  # the mass in play
F_REMAINING = tl.constexpr(2)  # the target less the mass above the prefix
F_ABOVE = tl.constexpr(3)  # the mass in play above the prefix
F_LOW = tl.constexpr(4)  # the last token in play: its value
F_TAU = tl.constexpr(5)  # the cutoff's value, once the last digit is chosen
F_KEPT = tl.constexpr(6)  # the kept mass, likewise
I_PREFIX = tl.constexpr(0)  # the chosen key bits (a _radix_key's)
I_LOW = tl.constexpr(1)  # the last token in play: its id
I_SLICE = tl.constexpr(2)  # the id step: the slice holding the r-th token of value tau, and its rank there
I_RANK = tl.constexpr(3)


@triton.jit
def _radix_key(value):
    # a value's order key with its top bit flipped: as unsigned 32-bit numbers (held in int32) the keys
    # are in the values' order, so a radix select reads its digits from the top bit down
    return _order_key32(value) ^ -2147483648


@triton.jit
def _value_of_key(key):
    # the float32 value of a _radix_key
    return value_of_key32(key ^ -2147483648)


@triton.jit
def _mass_of(value, m, TARGET_PROBS: tl.constexpr):
    # a token's mass from its value, as row_values computes it
    if TARGET_PROBS:
        return value
    return tl.exp(value - m)


@triton.jit
def _chunk(row, offs, V, ahead, PREFETCH: tl.constexpr, TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # (this chunk as stored, the next one's): with PREFETCH the chunk loaded one iteration ahead and the
    # next one's load issued now (so a load is in flight while a chunk is worked on; the last one reads
    # past the slice, within the row or masked), else this chunk's load alone
    if PREFETCH:
        return ahead, load_row(row, offs + BLOCK, V, TARGET_PROBS)
    return load_row(row, offs, V, TARGET_PROBS), ahead


@triton.jit
def _slice_max(row, V, inv_temperature, start, SLICE: tl.constexpr, TARGET_PROBS: tl.constexpr,
               BLOCK: tl.constexpr, PREFETCH: tl.constexpr):
    high = tl.full([BLOCK], float("-inf"), tl.float32)
    ahead = load_row(row, start + tl.arange(0, BLOCK), V, TARGET_PROBS) if PREFETCH else high
    for chunk in range(0, SLICE, BLOCK):
        offs = start + chunk + tl.arange(0, BLOCK)
        raw, ahead = _chunk(row, offs, V, ahead, PREFETCH, TARGET_PROBS, BLOCK)
        value, _mass = values_of(raw, inv_temperature, 0.0, TARGET_PROBS)
        high = tl.maximum(high, value)
    return tl.max(high, axis=0)


@triton.jit
def _slice_digit(row, V, inv_temperature, m, minp_threshold, prefix, start, shift, part_f, part_i,
                 FIRST: tl.constexpr, LAST: tl.constexpr, SLICE: tl.constexpr, TARGET_PROBS: tl.constexpr,
                 BLOCK: tl.constexpr, PREFETCH: tl.constexpr):
    # this slice's partials of one digit: the mass (and at the last digit the count) of the tokens in
    # play under the prefix, per value of the digit; at the first digit also the mass in play and the
    # last token in play (smallest value, largest id). The 16 sums are kept per lane, [16, BLOCK] with
    # a chunk's tokens along the lanes and the digit's values in each thread's registers, and reduced
    # once after the slice: no exchange between threads inside the loop.
    bins = tl.arange(0, 16)[:, None]
    high = tl.where(shift >= 28, 0, tl.full([], -1, tl.int32) << (shift + 4))  # the bits above the digit
    hist = tl.zeros([16, BLOCK], tl.float32)
    count = tl.zeros([16, BLOCK], tl.int32)
    total = tl.zeros([1, BLOCK], tl.float32)
    low = tl.full([1, BLOCK], float("inf"), tl.float32)
    low_id = tl.full([1, BLOCK], -1, tl.int32)
    ahead = load_row(row, start + tl.arange(0, BLOCK)[None, :], V, TARGET_PROBS) if PREFETCH else total
    for chunk in range(0, SLICE, BLOCK):
        offs = start + chunk + tl.arange(0, BLOCK)[None, :]
        raw, ahead = _chunk(row, offs, V, ahead, PREFETCH, TARGET_PROBS, BLOCK)
        value, mass = values_of(raw, inv_temperature, m, TARGET_PROBS)
        play = (value > float("-inf")) & (mass >= minp_threshold)
        key = _radix_key(value)
        match = play & ((key & high) == prefix)
        digit = tl.where(match, ((key >> shift) & 15).to(tl.int32), 16)  # 16: no bin
        hit = digit == bins
        hist += tl.where(hit, mass, 0.0)
        if LAST:
            count += hit.to(tl.int32)
        if FIRST:
            total += tl.where(play, mass, 0.0)
            later = play & (value <= low)  # ids rise along a lane: a tie moves to the larger id
            low = tl.where(later, value, low)
            low_id = tl.where(later, offs, low_id)
    lanes = tl.arange(0, 16)
    tl.store(part_f + lanes, tl.sum(hist, axis=1))
    if LAST:
        tl.store(part_i + lanes, tl.sum(count, axis=1))
    if FIRST:
        slice_low = tl.min(tl.min(low, axis=1), axis=0)
        tl.store(part_f + 16, tl.sum(tl.sum(total, axis=1), axis=0))
        tl.store(part_f + 17, slice_low)
        tl.store(part_i + 16, tl.max(tl.max(tl.where(low == slice_low, low_id, -1), axis=1), axis=0))


@triton.jit
def _finish_digit(cell, m, top_p, prefix, shift, state_f, state_i, part_f, part_i, summary_f_ptr, summary_i_ptr,
                  NUM_SLICES, FIRST: tl.constexpr, LAST: tl.constexpr, TARGET_PROBS: tl.constexpr,
                  P_BLOCK: tl.constexpr):
    # the row's last program of a digit: the slices' partials summed in slice order, the digit chosen
    slices = tl.arange(0, P_BLOCK)
    bins = tl.arange(0, 16)
    present = slices < NUM_SLICES
    parts = tl.load(part_f + slices[:, None] * PART_F + bins[None, :], mask=present[:, None], other=0.0)
    hist = tl.sum(parts, axis=0)
    state = state_f + cell * STATE
    istate = state_i + cell * STATE
    if FIRST:
        play = tl.sum(tl.load(part_f + slices * PART_F + 16, mask=present, other=0.0), axis=0)
        lows = tl.load(part_f + slices * PART_F + 17, mask=present, other=float("inf"))
        low = tl.min(lows, axis=0)
        low_id = tl.max(tl.where(present & (lows == low), tl.load(part_i + slices * PART_I + 16, mask=present,
                                                                  other=-1), -1), axis=0)
        tl.store(state + F_PLAY, play)
        tl.store(state + F_LOW, low)
        tl.store(istate + I_LOW, low_id)
        remaining = top_p * play
        above_prefix = tl.full([], 0.0, tl.float32)
    else:
        play = tl.load(state + F_PLAY)
        low = tl.load(state + F_LOW)
        low_id = tl.load(istate + I_LOW)
        remaining = tl.load(state + F_REMAINING)
        above_prefix = tl.load(state + F_ABOVE)
    above = tl.sum(tl.where(bins[:, None] > bins[None, :], hist[:, None], 0.0), axis=0)  # mass of higher digits
    chosen = tl.max(tl.where((above + hist >= remaining) & (hist > 0.0), bins, -1), axis=0)
    if (top_p >= 1.0) | (chosen < 0):
        # min_p alone, or the target beyond the histograms' mass: every token in play is kept
        store_summary(summary_f_ptr, summary_i_ptr, cell, m, play, low, low_id, tl.full([], 0, tl.int32))
        tl.store(istate + I_SLICE, -1)
    else:
        above_chosen = tl.sum(tl.where(bins == chosen, above, 0.0), axis=0)
        prefix = prefix | (chosen << shift)
        tl.store(state + F_REMAINING, remaining - above_chosen)
        tl.store(state + F_ABOVE, above_prefix + above_chosen)
        tl.store(istate + I_PREFIX, prefix)
        if LAST:
            # the prefix is tau's key: keep the first r of its tokens by id, found by the id step
            counts = tl.load(part_i + slices * PART_I + chosen, mask=present, other=0)
            size = tl.sum(counts, axis=0)
            tau = _value_of_key(prefix)
            a = _mass_of(tau, m, TARGET_PROBS)  # each of its tokens' mass
            rank = tl.minimum(tl.maximum(tl.ceil((remaining - above_chosen) / a), 1.0), size * 1.0).to(tl.int32)
            through = tl.cumsum(counts, axis=0)
            holder = tl.min(tl.where(present & (through >= rank), slices, P_BLOCK), axis=0)
            tl.store(istate + I_SLICE, holder)
            tl.store(istate + I_RANK, rank - tl.sum(tl.where(slices < holder, counts, 0), axis=0))
            tl.store(state + F_KEPT, above_prefix + above_chosen + rank * a)
            tl.store(state + F_TAU, tau)


@triton.jit
def _radix_row(row, cell, s, V, inv_temperature, top_p, min_p, digit, state_f, state_i, part_f, part_i, arrivals_ptr,
               summary_f_ptr, summary_i_ptr, NUM_SLICES, STEP: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr,
               SLICE: tl.constexpr, TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr, P_BLOCK: tl.constexpr,
               PREFETCH: tl.constexpr):
    # one program's share of one step for one cell (row `row`, slice s)
    state = state_f + cell * STATE
    istate = state_i + cell * STATE
    cell_f = part_f + cell * NUM_SLICES * PART_F
    cell_i = part_i + cell * NUM_SLICES * PART_I
    if STEP == STEP_MAX:
        tl.store(cell_f + s * PART_F, _slice_max(row, V, inv_temperature, s * SLICE, SLICE, TARGET_PROBS, BLOCK,
                                                 PREFETCH))
        if last_to_arrive(arrivals_ptr, cell, NUM_SLICES):
            slices = tl.arange(0, P_BLOCK)
            m = tl.max(tl.load(cell_f + slices * PART_F, mask=slices < NUM_SLICES, other=float("-inf")), axis=0)
            tl.store(state + F_M, m)
            tl.store(istate + I_PREFIX, 0)
            open_search = m > float("-inf")
            tl.store(istate + I_SLICE, tl.where(open_search, 0, -1))
            if not open_search:  # no value of mass: nothing kept
                store_summary(summary_f_ptr, summary_i_ptr, cell, m, tl.full([], 0.0, tl.float32),
                              tl.full([], float("inf"), tl.float32), tl.full([], -1, tl.int32),
                              tl.full([], 0, tl.int32))
    elif STEP == STEP_DIGIT:
        if tl.load(istate + I_SLICE) >= 0:  # the search is open (the launch before wrote it)
            m = tl.load(state + F_M)
            minp_threshold = min_p
            if TARGET_PROBS:
                minp_threshold = min_p * m
            prefix = tl.load(istate + I_PREFIX)
            shift = tl.full([], 28, tl.int32) - 4 * digit  # (digit may arrive as a constant)
            _slice_digit(row, V, inv_temperature, m, minp_threshold, prefix, s * SLICE, shift, cell_f + s * PART_F,
                         cell_i + s * PART_I, FIRST, LAST, SLICE, TARGET_PROBS, BLOCK, PREFETCH)
            if last_to_arrive(arrivals_ptr, cell, NUM_SLICES):
                _finish_digit(cell, m, top_p, prefix, shift, state_f, state_i, cell_f, cell_i, summary_f_ptr,
                              summary_i_ptr, NUM_SLICES, FIRST, LAST, TARGET_PROBS, P_BLOCK)
    else:
        holder = tl.load(istate + I_SLICE)
        if holder >= 0:  # the search reached tau: the rank-th of its tokens in slice `holder`, by id
            m = tl.load(state + F_M)
            minp_threshold = min_p
            if TARGET_PROBS:
                minp_threshold = min_p * m
            key = tl.load(istate + I_PREFIX)
            rank = tl.load(istate + I_RANK)
            seen = tl.full([], 0, tl.int32)
            iota = tl.full([], -1, tl.int32)
            for chunk in range(0, SLICE, BLOCK):
                offs = holder * SLICE + chunk + tl.arange(0, BLOCK)
                value, mass = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
                tied = (value > float("-inf")) & (mass >= minp_threshold) & (_radix_key(value) == key)
                through = seen + tl.cumsum(tied.to(tl.int32), axis=0)
                iota = tl.maximum(iota, tl.max(tl.where(tied & (through == rank), offs, -1), axis=0))
                seen += tl.sum(tied.to(tl.int32), axis=0)
            store_summary(summary_f_ptr, summary_i_ptr, cell, m, tl.load(state + F_KEPT), tl.load(state + F_TAU),
                          iota, tl.full([], 0, tl.int32))


@triton.jit
def _split_radix_kernel(
    state_f_ptr, state_i_ptr,  # [B * (K + 1) * 2, STATE] float32 and int32 scratch
    part_f_ptr, part_i_ptr,  # [B * (K + 1) * 2, NUM_SLICES, PART_F / PART_I] float32 and int32 scratch
    arrivals_ptr,  # [B * (K + 1) * 2] int32, zero on entry and exit
    summary_f_ptr, summary_i_ptr,  # the summaries [B, K + 1, 2, 4] float32 and [B, K + 1, 2] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits (read only with TRUNCATE_DRAFT)
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B]
    top_k_ptr, top_p_ptr, min_p_ptr,  # [B] int32, float32, float32 (read only where HAS_*)
    V, NUM_SLOTS, NUM_SLICES,
    digit,  # STEP_DIGIT: which digit, 0 (the top 4 bits) to 7
    MODE: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    TRUNCATE_DRAFT: tl.constexpr,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    STEP: tl.constexpr,  # STEP_MAX, STEP_DIGIT or STEP_ID
    FIRST: tl.constexpr,  # STEP_DIGIT: digit 0 (also the mass in play and the last token in play)
    LAST: tl.constexpr,  # STEP_DIGIT: digit 7 (also the counts, and the id step's slice and rank)
    SLICE: tl.constexpr,  # tokens of a row per program (a multiple of BLOCK)
    BLOCK: tl.constexpr,  # tokens per chunk
    P_BLOCK: tl.constexpr,  # a power of two >= NUM_SLICES
    PREFETCH: tl.constexpr,  # STEP_MAX and STEP_DIGIT load each chunk one iteration ahead
    PDL: tl.constexpr = False,  # programmatic dependent launch (dependent_launch.py; the launcher's launch_pdl)
):
    # grid (B, K + 1, sides * NUM_SLICES) for STEP_MAX and STEP_DIGIT, (B, K + 1, sides) for STEP_ID
    wait_for_launch_before(PDL)  # (first: nothing above reads or writes memory)
    b, r, side, s, n, greedy, inv_temperature, truncated, k, top_p, min_p = cell_program(
        num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, top_k_ptr, top_p_ptr, min_p_ptr, V, NUM_SLOTS,
        NUM_SLICES, STEP == STEP_ID, MODE, HAS_TOP_K, HAS_TOP_P, HAS_MIN_P)
    top_p = tl.where(k == 1, 0.0, top_p)  # the first token only (request_knobs' k = 1): the target's mass 0
    if summary_wanted(truncated, greedy, r, n, side, TRUNCATE_DRAFT):
        cell = (b * NUM_SLOTS + r) * 2 + side
        if side == 0:
            _radix_row(target_ptr + b * target_stride_b + r * target_stride_k, cell, s, V, inv_temperature, top_p,
                       min_p, digit, state_f_ptr, state_i_ptr, part_f_ptr, part_i_ptr, arrivals_ptr, summary_f_ptr,
                       summary_i_ptr,
                       NUM_SLICES, STEP, FIRST, LAST, SLICE, TARGET_PROBS, BLOCK, P_BLOCK, PREFETCH)
        else:
            _radix_row(draft_ptr + b * draft_stride_b + r * draft_stride_k, cell, s, V, inv_temperature, top_p,
                       min_p, digit, state_f_ptr, state_i_ptr, part_f_ptr, part_i_ptr, arrivals_ptr, summary_f_ptr,
                       summary_i_ptr,
                       NUM_SLICES, STEP, FIRST, LAST, SLICE, False, BLOCK, P_BLOCK, PREFETCH)
