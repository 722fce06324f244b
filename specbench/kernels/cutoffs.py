"""Each truncated row's cutoff, found without sorting the row (Triton device functions).

The contract (``specbench/verification.py``): a row's tokens are ordered by value (the cleaned,
tempered logit ``z``, or the cleaned target probability), largest first, ties to the lowest id;
every knob keeps a prefix of that order, so the kept set is described by a cutoff ``(tau, iota)``:
token ``y`` is kept iff ``v_y > tau`` or ``v_y == tau and y <= iota``. Tokens with no mass (``z =
-inf``; a probability of 0) come last in the order and are never kept (they could not be drawn).
A row's *summary* is ``(m, S, tau, iota, n)``: its largest value ``m``, the kept mass ``S`` (sum of
``w = exp(z - m)``, or of ``p``), the cutoff, and the length ``n`` of its *kept list* (0: none).

Two ways to the cutoff:

- The top-k path (rows with ``1 <= top_k <= MAX_FAST_K`` and at most ``MAX_GROUPS`` groups; any
  ``top_p`` and ``min_p`` with it). ``group_maxima`` writes the largest value of each group of
  ``GROUP`` (32) consecutive tokens to scratch: one pass over the row, which the caller may split
  across programs (a maximum is exact in any order, so the summary never depends on the split).
  ``top_k_from_groups`` then finds a bound ``c <= c_k``, ``c_k`` the k-th largest group maximum, at
  which at most ``CAP_GROUPS`` (64) groups have their maximum ``>= c`` (a bisection on the values'
  order-preserving int32 keys that stops there: often half way; it starts below the top bit, from the
  leading bits the row's largest key shares with every key of its binade or its block of eight binades,
  where k maxima lie there); those groups
  hold the row's first k tokens and every token tied with the k-th (proof at
  ``top_k_from_groups``). Their tokens (at most 2048) are gathered once and resolved in registers
  in the contract's order: ``min_p`` (a threshold on ``w``), ``top_k`` (a second bisection, which
  starts from the leading bits the largest key shares with ``c`` and stops once exactly k tokens in
  play lie at or above its bound, else ends at the k-th largest value; a tie there cut by id with a
  bisection on the ids), then the
  kept tokens (at most k) are compacted to the row's kept list in scratch and ``top_p`` is resolved
  on them from each one's prefix mass (a k x k comparison: the mass of the list tokens before it in
  the order). The list's ids and masses ``w`` (0 for a token top_p cut) let the step race over at
  most k tokens instead of the row. No sort anywhere.
- The radix path (any other row, or ties that make more than ``CAP_GROUPS`` groups qualify): a
  weighted radix select on the value keys, 4 bits a pass (a 16-bin histogram of counts or masses of
  the tokens still in play: 8 passes), one pass for the chosen value's group, and, only when
  ``top_k`` or ``top_p`` cuts inside a group of tied values, a radix select on the ids of that
  group; ``min_p`` a threshold on ``w``, then the cutoff moved to the last token in play (two
  passes). About 25 passes over the row for top_k + top_p: correct, not fast. No kept list.

(A batch given no ``top_k`` takes neither: ``specbench/kernels/radix.py`` splits the radix search across
programs, one launch per 4-bit digit.)

Masses are float32 ``exp(z - m)`` (``tl.exp``: on a GPU an approximate exponential, so a token whose
mass lies within a few ulp of ``min_p`` or whose top-p prefix lies within rounding of the boundary
can fall either side, as the contract and the oracle allow); sums are in an order of these
functions' own.
"""

import triton
import triton.language as tl

from specbench.kernels.rows import clean, clean_prob, load_probs, load_scaled

INT32_MAX = tl.constexpr(2147483647)
GROUP = tl.constexpr(32)  # tokens per group of the top-k path
MAX_FAST_K = tl.constexpr(64)  # the largest top_k the top-k path takes: also a kept list's capacity
MAX_GROUPS = 8192  # the most groups (a row of 262144 tokens) the top-k path takes


@triton.jit
def row_values(row, offs, V, inv_temperature, m, TARGET_PROBS: tl.constexpr):
    # (value, mass) of a chunk: the cleaned tempered logit (-0 read as 0: one value, one key) and
    # exp(z - m), or the cleaned probability (-inf where it has no mass) and itself. m finite.
    # (values_of(load_row(...)) is the same arithmetic; this spelling is the one the fused step's
    # loops were timed with: the other moves one of them by two instructions)
    if TARGET_PROBS:
        p = load_probs(row, offs, V)
        return tl.where(p > 0.0, p, float("-inf")), p
    z = load_scaled(row, offs, V, inv_temperature)
    z = tl.where(z == 0.0, 0.0, z)
    return z, tl.exp(z - m)


@triton.jit
def load_row(row, offs, V, TARGET_PROBS: tl.constexpr):
    # a chunk as stored, in float32 (lanes at or past V: a logit of -inf, a probability of 0), for values_of
    if TARGET_PROBS:
        return tl.load(row + offs, mask=offs < V, other=0.0).to(tl.float32)
    return tl.load(row + offs, mask=offs < V, other=float("-inf")).to(tl.float32)


@triton.jit
def values_of(raw, inv_temperature, m, TARGET_PROBS: tl.constexpr):
    # row_values from a chunk load_row read (so a load can be issued a chunk ahead of its use)
    if TARGET_PROBS:
        p = clean_prob(raw)
        return tl.where(p > 0.0, p, float("-inf")), p
    z = clean(raw * inv_temperature)
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
def _order_key32(value):
    # float32 -> int32 in the same order as the values (signed); INT32_MIN is no value's key (a NaN's)
    bits = value.to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)


@triton.jit
def value_of_key32(key):
    # the float32 value of an _order_key32 (the map is its own inverse on the bit patterns)
    return tl.where(key >= 0, key, key ^ 0x7FFFFFFF).to(tl.float32, bitcast=True)


@triton.jit
def _order_key(value):
    # float32 -> int64 in [0, 2**32), in the same order as the values (the radix path's digits need
    # them unsigned): _order_key32 shifted up by 2**31
    return _order_key32(value).to(tl.int64) + 2147483648


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
def truncate_row_radix(row, V, inv_temperature, k, top_p, min_p, TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
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
def top_k_path(k, V, GROUP_BLOCK: tl.constexpr):
    # whether a row with these knobs (normalised by request_knobs) takes the top-k path
    return (k >= 1) & (k <= MAX_FAST_K) & (tl.cdiv(V, GROUP) <= GROUP_BLOCK)


@triton.jit
def group_maxima(row, V, inv_temperature, group_max_ptr, first, last, TARGET_PROBS: tl.constexpr,
                 GROUP_ROWS: tl.constexpr, PREFETCH: tl.constexpr = False):
    # the largest value of groups first .. last - 1 of GROUP consecutive tokens, to their scratch
    # slots (-inf for a group with no value of mass). A value is a monotone function of the stored
    # entry (a positive scale, then clamps; the maximum skips NaN entries, which have no mass), so it
    # is taken of each group's largest entry, not of every token. The one exception, temperature +inf
    # (a scale of 0): a +inf logit becomes NaN there (no mass), so it is dropped before the maximum.
    # The chunk's offsets are contiguous along a group and its mask constant along one (V and the
    # slice's end are multiples of 16 or masked per token): the loads go out as wide vectors, several
    # per thread in flight. PREFETCH: each chunk is loaded one iteration ahead, so the next chunk's loads
    # are in flight while this one is reduced (the last iteration's is masked whole and reads nothing):
    # the fused step's pass, a whole row by a program with few warps beside it (1.2x faster at B = 256,
    # results/h200-pass-prefetch/). The prepass does not: where its programs read one chunk or two (B <= 8)
    # it was level or slower, and where they read a row (B = 64) 1.5% faster, within a run's spread
    rows = tl.arange(0, GROUP_ROWS)
    lanes = tl.arange(0, GROUP)
    stop = tl.minimum(last * GROUP, V)  # tokens past the slice or the row read nothing
    if PREFETCH:
        coming = load_row(row, (first + rows)[:, None] * GROUP + lanes[None, :], stop, TARGET_PROBS)
    for start in range(first, last, GROUP_ROWS):
        groups = start + rows
        if PREFETCH:
            stored = coming
            coming = load_row(row, (groups + GROUP_ROWS)[:, None] * GROUP + lanes[None, :], stop, TARGET_PROBS)
        else:
            stored = load_row(row, groups[:, None] * GROUP + lanes[None, :], stop, TARGET_PROBS)
        if TARGET_PROBS:
            largest = clean_prob(tl.max(stored, axis=1))
            value = tl.where(largest > 0.0, largest, float("-inf"))
        else:
            if inv_temperature == 0.0:  # (a uniform branch: no cost at other temperatures)
                stored = tl.where(stored == float("inf"), float("-inf"), stored)
            value = clean(tl.max(stored, axis=1) * inv_temperature)
            value = tl.where(value == 0.0, 0.0, value)
        tl.store(group_max_ptr + groups, value, mask=groups < last)


@triton.jit
def _kth_largest_bound(key, k, enough):
    # (c, count): a lower bound c on the k-th largest of the keys `key` (int32 order keys; INT32_MIN:
    # no entry), k >= 1, and count, the number of keys >= c (>= k unless fewer than k are given). A
    # bisection from the top bit, keeping c with at least k keys >= c, that stops as soon as at most
    # `enough` keys are >= c; run to the last bit it ends at the k-th largest key itself (INT32_MIN
    # when fewer than k keys are given). Each step is one count over the block, in registers.
    c = tl.full([], -2147483648, tl.int32)
    count = tl.sum((key > c).to(tl.int32), axis=0)
    return _bisect_down(key, k, enough, c, count, tl.full([], 0x80000000, tl.uint32))


@triton.jit
def _bisect_down(key, k, enough, c, count, bit):
    # the bisection's steps from bound c (count keys >= it, c's bits from `bit` down 0; bit: uint32, one bit set
    # or none): each bit, highest first, set where at least k keys stay >= c, until at most `enough` are
    while (bit != 0) & (count > enough):
        trial = c ^ bit.to(tl.int32, bitcast=True)  # (bit 31: to 0, the bisection's order)
        at_least = tl.sum((key >= trial).to(tl.int32), axis=0)
        c = tl.where(at_least >= k, trial, c)
        count = tl.where(at_least >= k, at_least, count)
        bit = bit >> 1
    return c, count


@triton.jit
def _shared_bits(high, guess):
    # (start, bit) for two int32 order keys: start holds the top bits of `high` that `guess` shares, in the
    # bisection's order (the keys' bits with bit 31 flipped), and 0 below them; bit is the highest bit where
    # they differ (0 where they are equal). Every key from start to high has those top bits.
    differ = (high ^ guess).to(tl.uint32, bitcast=True)
    below = differ | (differ >> 1)  # the differing bit and every bit under it
    below = below | (below >> 2)
    below = below | (below >> 4)
    below = below | (below >> 8)
    below = below | (below >> 16)
    sign = tl.full([], -2147483648, tl.int32)
    start = ((high ^ sign) & ~below.to(tl.int32, bitcast=True)) ^ sign
    return start, below ^ (below >> 1)


@triton.jit
def _kth_largest_bound_from(key, k, enough, high, near, far):
    # _kth_largest_bound's (c, count), by a bisection that may start below the top bit. Where it starts:
    # `high` is at least every key; `near` and `far` are guesses near the k-th largest (any keys: a guess above
    # it only wastes its count). If at least k keys are >= the bits high shares with near (_shared_bits), the
    # k-th largest has those bits too (it lies between that start and high), so the bisection starts there, at
    # the first bit they differ; else from the bits high shares with far; else from the top bit. (One count
    # tells which; run to the last bit, it ends where the bisection from the top bit does, and any stop on the
    # way is a bound as above.)
    entry = key > -2147483648
    start_near, bit_near = _shared_bits(high, near)
    start_far, bit_far = _shared_bits(high, far)
    counts = tl.sum(((key >= start_near) & entry).to(tl.int32) + (((key >= start_far) & entry).to(tl.int32) << 16),
                    axis=0)  # two counts of at most 8192 in one sum
    count_near = counts & 0xFFFF
    count_far = counts >> 16
    c = tl.where(count_near >= k, start_near, tl.where(count_far >= k, start_far, -2147483648))
    bit = tl.where(count_near >= k, bit_near, tl.where(count_far >= k, bit_far, tl.full([], 0x80000000, tl.uint32)))
    count = tl.where(count_near >= k, count_near, count_far)
    if count < k:  # neither start holds k keys: from the top bit, all entries counted
        count = tl.sum(entry.to(tl.int32), axis=0)
    return _bisect_down(key, k, enough, c, count, bit)


@triton.jit
def _kth_smallest_id(ids, rank):
    # the rank-th smallest of `ids` (int32 >= 0; INT32_MAX: no entry), rank >= 1: the largest c
    # with fewer than rank ids below it, built bit by bit from the top
    c = tl.full([], 0, tl.int32)
    for step in range(31):
        trial = c | (tl.full([], 1, tl.int32) << (30 - step))
        below = tl.sum((ids < trial).to(tl.int32), axis=0)
        c = tl.where(below < rank, trial, c)
    return c


@triton.jit
def top_k_from_groups(row, V, inv_temperature, k, top_p, min_p, group_max_ptr, group_ids_ptr, list_ids_ptr,
                      list_v_ptr, list_w_ptr, TARGET_PROBS: tl.constexpr, GROUP_BLOCK: tl.constexpr,
                      CAP_GROUPS: tl.constexpr, SHARED_START: tl.constexpr):
    # The summary (done, m, S, tau, iota, n) of a top-k path row whose group maxima are in scratch,
    # its kept list written (n ids and masses; list_v holds the compaction's values); done = False
    # (nothing else meaningful) when more than CAP_GROUPS groups qualify, for the radix path.
    #
    # Why the gathered groups hold the answer: let c_k be the k-th largest group maximum (counting
    # multiplicity), tau_k the row's k-th largest value, and c <= c_k the bound whose groups (maximum
    # >= c) are gathered. The k largest group maxima are k distinct tokens of value >= c_k, so tau_k
    # >= c_k >= c. Every token of the row's first k (and every token tied with tau_k) has value >=
    # tau_k >= c, so its group's maximum is >= c: it is gathered. A token not gathered has value <= its
    # group maximum < c <= tau_k, so it comes after all of those in
    # the row's order, and the first k gathered tokens (in that order) are the row's first k. min_p
    # keeps a prefix of the order and top_k and top_p act on the first k only, so resolving the knobs
    # among the gathered tokens is exact. (Fewer than k groups with mass: every such group is gathered.)
    groups = tl.arange(0, GROUP_BLOCK)
    num_groups = tl.cdiv(V, GROUP)
    group_max = tl.load(group_max_ptr + groups, mask=groups < num_groups, other=float("-inf"))
    m = tl.max(group_max, axis=0)
    done = True
    mass = tl.full([], 0.0, tl.float32)
    tau = tl.full([], float("inf"), tl.float32)
    iota = tl.full([], -1, tl.int32)
    length = tl.full([], 0, tl.int32)
    if m > float("-inf"):  # (else nothing is kept, as on the radix path)
        has_mass = (groups < num_groups) & (group_max > float("-inf"))
        key = tl.where(has_mass, _order_key32(group_max), -2147483648)
        # any c at or below c_k keeps the argument below; stop once at most CAP_GROUPS groups are >= c.
        # SHARED_START: the bisections start from shared bits (_kth_largest_bound_from), this one from the
        # bits the largest key shares with any key of its binade (sign and exponent: 9 bits), or of its block
        # of 8 binades (6 bits), where k keys lie there
        top = _order_key32(m)
        if SHARED_START:
            c_groups, count = _kth_largest_bound_from(key, k, CAP_GROUPS, top, top ^ 0x00400000, top ^ 0x02000000)
        else:
            c_groups, count = _kth_largest_bound(key, k, CAP_GROUPS)
        qualify = has_mass & (key >= c_groups)
        done = count <= CAP_GROUPS
        if done:
            # compact the qualifying group ids (in id order) to scratch slots 0 .. count - 1, then
            # gather their tokens (unused slots read nothing)
            slot_of = tl.cumsum(qualify.to(tl.int32), axis=0) - 1
            tl.store(group_ids_ptr + slot_of, groups, mask=qualify)
            tl.debug_barrier()
            gathered = tl.arange(0, CAP_GROUPS * GROUP)
            slot = gathered // GROUP
            group_id = tl.load(group_ids_ptr + slot, mask=slot < count, other=0)
            offs = tl.where(slot < count, group_id * GROUP + gathered % GROUP, V)
            value, weight = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
            minp_threshold = min_p
            if TARGET_PROBS:
                minp_threshold = min_p * m
            play = (value > float("-inf")) & (weight >= minp_threshold) & (offs < V)
            # top_k among what min_p kept: the k-th largest value c (counting ties), then of the
            # tokens tied at c the lowest ids, as many as the first k still need
            value_key = tl.where(play, _order_key32(value), -2147483648)
            # c: the k-th largest value's key, or any bound with exactly k keys >= it (then no tie is
            # cut), or INT32_MIN when fewer than k are in play
            if SHARED_START:  # from the bits the largest key shares with c_groups (at or below the k-th
                # largest value, as above, unless min_p left fewer than k tokens there)
                c, _count = _kth_largest_bound_from(value_key, k, k, top, c_groups, top ^ -2147483648)
            else:
                c, _count = _kth_largest_bound(value_key, k, k)
            above = tl.sum((value_key > c).to(tl.int32), axis=0)
            tie = play & (value_key == c)
            cut_id = tl.full([], INT32_MAX, tl.int32)
            if tl.sum(tie.to(tl.int32), axis=0) > k - above:
                cut_id = _kth_smallest_id(tl.where(tie, offs, INT32_MAX), k - above)
            kept = play & ((value_key > c) | (tie & (offs <= cut_id)))
            # the kept tokens (at most k) to the kept list, in gathered order
            length = tl.sum(kept.to(tl.int32), axis=0)
            list_slot = tl.cumsum(kept.to(tl.int32), axis=0) - 1
            tl.store(list_ids_ptr + list_slot, offs, mask=kept)
            tl.store(list_v_ptr + list_slot, value, mask=kept)
            tl.debug_barrier()
            j = tl.arange(0, MAX_FAST_K)
            listed = j < length
            ids = tl.load(list_ids_ptr + j, mask=listed, other=INT32_MAX)
            values = tl.load(list_v_ptr + j, mask=listed, other=float("-inf"))
            if TARGET_PROBS:
                w = values
            else:
                w = tl.exp(values - m)
            w = tl.where(listed, w, 0.0)
            survive = listed
            if top_p < 1.0:
                # token j survives iff the mass of the list tokens before it in the order is below
                # top_p * M (M the list's mass); the first token always survives
                earlier = ((values[None, :] > values[:, None])
                           | ((values[None, :] == values[:, None]) & (ids[None, :] < ids[:, None]))) & listed[None, :]
                before = tl.sum(tl.where(earlier, w[None, :], 0.0), axis=1)
                first = tl.sum(earlier.to(tl.int32), axis=1) == 0
                survive = listed & ((before < top_p * tl.sum(w, axis=0)) | first)
            mass = tl.sum(tl.where(survive, w, 0.0), axis=0)
            tau = tl.min(tl.where(survive, values, float("inf")), axis=0)
            iota = tl.max(tl.where(survive & (values == tau), ids, -1), axis=0)
            tl.store(list_w_ptr + j, tl.where(survive, w, 0.0), mask=listed)
            tl.debug_barrier()
    return done, m, mass, tau, iota, length


@triton.jit
def summarize_row(row, V, inv_temperature, k, top_p, min_p, group_max_ptr, group_ids_ptr, list_ids_ptr, list_v_ptr,
                  list_w_ptr, TARGET_PROBS: tl.constexpr, RADIX_BLOCK: tl.constexpr, GROUP_ROWS: tl.constexpr,
                  GROUP_BLOCK: tl.constexpr, CAP_GROUPS: tl.constexpr, WRITE_MAXIMA: tl.constexpr):
    # A row's summary (m, S, tau, iota, n) under the knobs (normalised by request_knobs): the top-k
    # path where it applies (its group maxima written here with WRITE_MAXIMA, else already in
    # scratch), the radix path otherwise (or when ties made it give up), by this program alone.
    # m = -inf and nothing kept for a row with no value of mass. The search's bisections start from shared
    # bits (top_k_from_groups' SHARED_START) except in the fused step (WRITE_MAXIMA) over more than 4096 groups:
    # that step spilled at 4 warps, and the start's values moved its spills (B = 256, V = 151936: 233.2 to 265.0
    # µs from draft probabilities; elsewhere 4-12% faster; results/h200-search-start/). (The fused step now runs
    # 8 warps with its registers capped, launch._register_cap; the start there was not timed at that shape.)
    done = False
    m = tl.full([], float("-inf"), tl.float32)
    mass = tl.full([], 0.0, tl.float32)
    tau = tl.full([], float("-inf"), tl.float32)
    iota = tl.full([], INT32_MAX, tl.int32)
    length = tl.full([], 0, tl.int32)
    if top_k_path(k, V, GROUP_BLOCK):
        if WRITE_MAXIMA:
            group_maxima(row, V, inv_temperature, group_max_ptr, 0, tl.cdiv(V, GROUP), TARGET_PROBS, GROUP_ROWS,
                         True)
            tl.debug_barrier()  # the maxima written by every thread of the program
        done, m, mass, tau, iota, length = top_k_from_groups(
            row, V, inv_temperature, k, top_p, min_p, group_max_ptr, group_ids_ptr, list_ids_ptr, list_v_ptr,
            list_w_ptr, TARGET_PROBS, GROUP_BLOCK, CAP_GROUPS, (not WRITE_MAXIMA) or (GROUP_BLOCK <= 4096))
    if not done:
        m, mass, tau, iota = truncate_row_radix(row, V, inv_temperature, k, top_p, min_p, TARGET_PROBS, RADIX_BLOCK)
        length = tl.full([], 0, tl.int32)
    return m, mass, tau, iota, length
