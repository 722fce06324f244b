"""Triton helpers that walk one vocabulary row: clean, argmax, softmax statistics, races.

Every helper reads a row (or a slice ``[start, stop)`` of it) in chunks of ``BLOCK`` tokens and
returns scalars, so the same code serves the one-program-per-request kernels (whole rows) and
the split kernels (one slice per program, partials merged afterwards).

Races sample without normalising: ``argmax_y (log w(y) - log E_y)`` with ``E_y = -log U_y``
is a draw from ``w / sum(w)`` (the exponential race, equivalently Gumbel-max with
``G = -log(-log U)``). Ties go to the lowest token id, as everywhere in specbench.

Target probabilities (``TARGET_PROBS``) are read as given, cleaned entry by entry (``clean_prob``):
NaN and negative entries are 0 and entries above 1 are 1; nothing is normalised, so the races
compare the weights themselves.

Running state is kept per lane (a ``[BLOCK]`` vector; the softmax statistics per thread) and
reduced once after the loop. A race score is kept as the pair ``(z, g)`` (log weight, ``-log E``)
and compared through differences, ``(z - z') + (g - g') > 0``: with logits near the float32
maximum a plain sum ``z + g`` would round the noise away.

Races are screened. ``E = -log u >= 1 - u`` for every ``u`` in (0, 1), so a token's score is at
most ``w / (1 - u)``: a chunk none of whose tokens could reach the best score found so far (less
a margin) is skipped without its logarithms or comparisons, which are most of a race's work.
Only the hash that gives ``u`` is paid for every token. The best score only grows, so after the
first few chunks most are skipped; the winner, and every token within rounding of it, is always
raced, so the result is the one the unscreened race gives.
"""

import triton
import triton.language as tl

from specbench.kernels.rng import hash_word, neg_log_of_uniform, one_minus_uniform, uniform_of

FLOAT32_MAX = tl.constexpr(3.4028234663852886e38)

# The races' screen: a chunk whose every token is below the best score so far by more than this
# margin (relative, plus absolute for log scores) is not raced; the margin is far above the
# rounding of a score (E within 1.04 ulp of -log u, a few ulp for the products and exps), so a
# screened chunk never held the winner nor a token within rounding of it.
SCREEN_RELATIVE = tl.constexpr(2.0**-16)
SCREEN_ABSOLUTE = tl.constexpr(2.0**-14)
SCREEN_RATIO_LIMIT = tl.constexpr(2.0**100)

# kinds of race_residual_slice (the DRAFT codes of the kernels)
RACE_RESIDUAL_LOGITS = tl.constexpr(1)  # w = max(p - q, 0), q = softmax of the draft logits
RACE_RESIDUAL_PROBS = tl.constexpr(2)  # w = max(p - q, 0), q given as probabilities


@triton.jit
def clean(z):
    # NaN -> -inf (probability 0); +inf -> largest float32 (several +inf share the mass equally)
    # (max.f32 returns the operand that is not NaN: one instruction for the NaN rule)
    return tl.minimum(tl.maximum(z, float("-inf")), FLOAT32_MAX)


@triton.jit
def load_scaled(row_ptr, offs, stop, inv_temperature):
    # cleaned logits / temperature in float32; lanes past `stop` are -inf
    z = tl.load(row_ptr + offs, mask=offs < stop, other=float("-inf")).to(tl.float32)
    return clean(z * inv_temperature)


@triton.jit
def clean_prob(p):
    # a target probability as the contract reads it: NaN and negative -> 0, above 1 (+inf too) -> 1
    # (max.f32 returns the operand that is not NaN: NaN -> 0 in the same instruction as negatives)
    return tl.minimum(tl.maximum(p, 0.0), 1.0)


@triton.jit
def load_probs(row_ptr, offs, stop):
    # cleaned probabilities in float32; lanes past `stop` are 0
    return clean_prob(tl.load(row_ptr + offs, mask=offs < stop, other=0.0).to(tl.float32))


@triton.jit
def load_ranked(row_ptr, offs, stop, TARGET_PROBS: tl.constexpr):
    # what the argmax ranks: cleaned logits, or probabilities with 0 as -inf (no mass: never the argmax)
    if TARGET_PROBS:
        p = load_probs(row_ptr, offs, stop)
        return tl.where(p > 0.0, p, float("-inf"))
    return load_scaled(row_ptr, offs, stop, 1.0)


@triton.jit
def lowest_best(values, indices):
    # (max of values, lowest index among the lanes that reach it; -1 if none is above -inf)
    best = tl.max(values, axis=0)
    candidates = tl.where((values == best) & (indices >= 0), indices, 2147483647)
    index = tl.min(candidates, axis=0)
    return best, tl.where(index == 2147483647, -1, index)


@triton.jit
def argmax_slice(row_ptr, start, stop, TARGET_PROBS: tl.constexpr, BLOCK: tl.constexpr):
    # (max value, its lowest index) over [start, stop); index -1 when every value is -inf/NaN
    # (probabilities: when none is positive). The next chunk is loaded before this one is used,
    # so a load is always in flight.
    lane_val = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    offs = start + tl.arange(0, BLOCK)
    z_next = load_ranked(row_ptr, offs, stop, TARGET_PROBS)
    for chunk in range(start, stop, BLOCK):
        z = z_next
        offs = chunk + tl.arange(0, BLOCK)
        z_next = load_ranked(row_ptr, offs + BLOCK, stop, TARGET_PROBS)
        better = z > lane_val  # strict: each lane keeps its earliest maximum
        lane_idx = tl.where(better, offs, lane_idx)
        lane_val = tl.where(better, z, lane_val)
    return lowest_best(lane_val, lane_idx)


def _with_ptx(ptx, interpreted):
    # the function of inline PTX where kernels compile, its plain Triton twin under the interpreter (which runs no
    # PTX; there @triton.jit gives no JITFunction)
    return ptx if isinstance(ptx, triton.runtime.JITFunction) else interpreted


@triton.jit
def _exp2_one_instruction(x):
    # 2**x as one MUFU.EX2: results below 2**-126 flush to zero, where Triton's exp2 adds a range
    # fix-up of three instructions; a sum here holds a 1 (the exp of its maximum), which leaves no trace of such a
    # term but through a chain of exact rounding ties (exp_in_sum, below)
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def _exp2_interpreted(x):
    return tl.exp2(x)


# the interpreter runs no PTX: there 2**x is numpy's
exp2 = _with_ptx(_exp2_one_instruction, _exp2_interpreted)
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _exp_in_sum_one_instruction(x):
    # e**x as tl.exp computes it (x times log2(e) in float32, then 2**that) in one MUFU.EX2: results below 2**-126
    # flush to zero, where tl.exp's 2**x keeps them with a fix-up of three instructions
    return _exp2_one_instruction(x * LOG2E)


@triton.jit
def _exp_in_sum_interpreted(x):
    return tl.exp(x)


# e**x for a mass that only enters float32 sums holding a mass of at least 1 (the row's largest value's, or the
# draft's own), as the truncated rows' summing passes do. A term below 2**-126 changes a partial sum only while that
# sum is below about 2**-102, by less than half a unit in its last place, and a term of at least 1 joining it leaves
# no difference, but for one case: a chain of partial sums each landing exactly halfway between two floats (a tie
# rounds to even, and the flushed term decides which way) carries its bit up to the sum's last place, which needs
# masses at exact powers of two across a hundred binades. So the same sums as tl.exp gives, but for such chains, and
# within float32 rounding always. (A partial sum whose every term lies below 2**-126, such as a slice's far from its
# row's largest value, is 0 here against their sum there: tiny, and gone once the row's sum takes it.) Anything else
# (a mass compared with min_p's threshold, a draft's probability, a race's weight) keeps tl.exp. Under the
# interpreter: tl.exp itself (numpy's)
exp_in_sum = _with_ptx(_exp_in_sum_one_instruction, _exp_in_sum_interpreted)


@triton.jit
def _add_if_above_predicated(total, value, threshold, mass):
    # total + mass where value > threshold (ordered: never for NaN), else total, as one compare and one predicated
    # add (FSETP, @P FADD; the move where the test fails is the register's own, which ptxas drops); Triton's
    # where-then-add compiles to a select and an add besides the compare. Every input is read before $0 is written
    # (the output may share a register with any input)
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.gt.f32 p, $2, $3; @p add.rn.f32 $0, $1, $4; @!p mov.b32 $0, $1; }",
        "=f,f,f,f,f", [total, value, threshold, mass], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _add_if_above_interpreted(total, value, threshold, mass):
    return total + tl.where(value > threshold, mass, 0.0)


@triton.jit
def _add_if_ahead_predicated(total, value, pivot, offs, pivot_id, mass):
    # total + mass where the token (value, offs) comes before the pivot (pivot_id, of value `pivot`) in the row's
    # order (larger value, or the same value and a smaller id), else total: one integer and two chained float
    # compares (v > pivot, or v >= pivot and a smaller id: the same as v == pivot there) and a predicated add, four
    # instructions (ISETP, FSETP.GE.AND, FSETP.GT.OR, @P FADD) where the where-then-add takes six; ids below 2**31
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.lt.s32 p, $4, $5; setp.ge.and.f32 p, $2, $3, p; setp.gt.or.f32 p, $2, $3, p; "
        "@p add.rn.f32 $0, $1, $6; @!p mov.b32 $0, $1; }",
        "=f,f,f,f,r,r,f", [total, value, pivot, offs.to(tl.int32), pivot_id.to(tl.int32), mass], dtype=tl.float32,
        is_pure=True, pack=1)


@triton.jit
def _add_if_ahead_interpreted(total, value, pivot, offs, pivot_id, mass):
    return total + tl.where((value > pivot) | ((value == pivot) & (offs < pivot_id)), mass, 0.0)


@triton.jit
def _reciprocal_one_instruction(x):
    # 1 / x as one MUFU.RCP (rcp.approx.ftz: within an ulp; a subnormal x or result flushes to 0), where Triton's
    # division (div.full) adds a multiply and a range fix-up of about seven instructions
    return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def _reciprocal_interpreted(x):
    return 1.0 / x


# 1 / x within an ulp, for a value only compared within a margin far above that (the tree's race candidates: an
# exponential E_y, a normal float below 17). Under the interpreter: numpy's quotient
reciprocal = _with_ptx(_reciprocal_one_instruction, _reciprocal_interpreted)


# Sums of the masses of the tokens above a threshold, or ahead of a token in the row's order, one token at a time:
# the same float32 additions as adding the mass where the condition holds and 0 where not, given a total that is
# never -0 (a sum of masses starts at +0 and adds masses of at least +0: adding 0 leaves it as it is, where -0 + 0
# would be +0), in fewer instructions (above: two, where the where-then-add takes three; ahead: four against six).
# The add is add.rn (never fused with a product); the where-then-add's add is not fused either, as long as the mass
# is not itself a product at the add (it is an exp's result or a loaded, clamped probability). Under the
# interpreter: that where-then-add itself
add_if_above = _with_ptx(_add_if_above_predicated, _add_if_above_interpreted)
add_if_ahead = _with_ptx(_add_if_ahead_predicated, _add_if_ahead_interpreted)

TILE = tl.constexpr(4)  # tokens a thread loads at once (16 bytes of float32) and folds on its own


@triton.jit
def _tile_offsets(first, BLOCK: tl.constexpr):
    # offsets of BLOCK tokens from `first` as [BLOCK // TILE, TILE] tiles, a tile's tokens in one thread
    return first + tl.arange(0, BLOCK // TILE)[:, None] * TILE + tl.arange(0, TILE)[None, :]


@triton.jit
def _fold_tiles(m, s, z):
    # Online softmax per thread: fold a tile of cleaned logits z [N, TILE] into the running (max m,
    # sum s of exp(z - m)) [N]. m starts at -FLOAT32_MAX, not -inf, so no guard is needed: z = -inf
    # gives exp(-inf) = 0, and a rescale from the start value is exp(-FLOAT32_MAX - m) = 0 or exp(0)
    # with s still 0. A tile costs one max and one exp per token and one rescale per thread, about
    # half of what a running state per token costs.
    m_new = tl.maximum(m, tl.max(z, axis=1))
    terms = exp2((z - m_new[:, None]) * LOG2E)
    return m_new, s * exp2((m - m_new) * LOG2E) + tl.sum(terms, axis=1)


@triton.jit
def rounded_product(a, b):
    # a * b rounded on its own. A sum over threads of plain products lets the compiler fuse a thread's own
    # product into the first cross-thread add (an fma), while its partner adds the rounded product: the
    # threads that hold one row's total then disagree in the last bit, and which value a later layout
    # change keeps depends on timing (compute-sanitizer racecheck reports it). fma(a, b, 0) is not fused.
    return tl.fma(a, b, 0.0)


@triton.jit
def _reduce_stats(m, s):
    # the threads' (m, s) merged; a row with no finite value (every s 0) comes back as (-inf, 0)
    m_row = tl.max(m, axis=0)
    s_row = tl.sum(rounded_product(s, tl.exp(m - m_row)), axis=0)
    return tl.where(s_row == 0.0, float("-inf"), m_row), s_row


@triton.jit
def softmax_stats_slice(t_row, d_row, start, stop, inv_temperature, HAS_DRAFT_LOGITS: tl.constexpr,
                        BLOCK: tl.constexpr):
    # max and sum of exp over [start, stop) of the target row and (fused) the draft row;
    # the next chunk is loaded before this one is used, so a load is always in flight
    m = tl.full([BLOCK // TILE], -FLOAT32_MAX, tl.float32)
    s = tl.zeros([BLOCK // TILE], tl.float32)
    md = tl.full([BLOCK // TILE], -FLOAT32_MAX, tl.float32)
    sd = tl.zeros([BLOCK // TILE], tl.float32)
    offs = _tile_offsets(start, BLOCK)
    z_next = load_scaled(t_row, offs, stop, inv_temperature)
    zd_next = z_next
    if HAS_DRAFT_LOGITS:
        zd_next = load_scaled(d_row, offs, stop, inv_temperature)
    for chunk in range(start, stop, BLOCK):
        offs = _tile_offsets(chunk + BLOCK, BLOCK)
        z = z_next
        z_next = load_scaled(t_row, offs, stop, inv_temperature)
        if HAS_DRAFT_LOGITS:
            zd = zd_next
            zd_next = load_scaled(d_row, offs, stop, inv_temperature)
            md, sd = _fold_tiles(md, sd, zd)
        m, s = _fold_tiles(m, s, z)
    m_row, s_row = _reduce_stats(m, s)
    md_row, sd_row = _reduce_stats(md, sd)
    return m_row, s_row, md_row, sd_row


@triton.jit
def prob_of(z, m, s):
    # p = exp(z - m) / s from a cleaned logit and its row's softmax statistics
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return tl.exp(z - m_safe) / tl.where(s == 0.0, 1.0, s)  # s is 0 only for a row with no mass (p = 0)


@triton.jit
def best_pair(zs, gs, indices):
    # reduce per-lane (or per-slice) race pairs: (z, g, index) of the winner, lowest index on ties
    top = tl.max(zs, axis=0)
    top_safe = tl.where(top == float("-inf"), 0.0, top)
    relative = tl.where(zs == float("-inf"), float("-inf"), (zs - top_safe) + gs)
    _best, index = lowest_best(relative, indices)
    winner = indices == index
    z = tl.max(tl.where(winner, zs, float("-inf")), axis=0)
    g = tl.max(tl.where(winner, gs, float("-inf")), axis=0)
    return z, g, index


@triton.jit
def _any_positive(values):
    # whether any lane of a block is above 0 (one reduction across the program)
    return tl.max(values, axis=0) > 0.0


@triton.jit
def race_logits_slice(t_row, start, stop, inv_temperature, key, exclude, SCREEN: tl.constexpr, BLOCK: tl.constexpr):
    # The race over p itself, read from the cleaned logits (no normaliser needed), on [start, stop),
    # token `exclude` left out (-1: none). A lane keeps its best (z, E) and a token beats it iff
    # z - log E > z_best - log E_best, i.e. exp(z - z_best) * E_best > E: one exp and the one log
    # of E per token. Screened (SCREEN, module docstring): a chunk is raced only if one of its tokens
    # could beat the best score so far, k, given E >= 1 - u: exp(z - k') > 1 - u, with k' = k less
    # a margin far above the rounding of either side. Returns the winner's (z, -log E, index),
    # index -1 when every logit is -inf.
    lane_z = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    # nothing is screened before the first raced chunk; never -inf, so z - k_screen is never NaN
    k_screen = tl.max(lane_e, axis=0) * -FLOAT32_MAX
    z_next = load_scaled(t_row, start + tl.arange(0, BLOCK), stop, inv_temperature)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        z = z_next
        z_next = load_scaled(t_row, offs + BLOCK, stop, inv_temperature)
        z = tl.where(offs == exclude, float("-inf"), z)
        word = hash_word(key, offs)
        if chunk_raced(exp2((z - k_screen) * LOG2E) - one_minus_uniform(word), SCREEN):
            e = neg_log_of_uniform(uniform_of(word))  # E_y
            # -inf never wins (exp gives 0, or NaN against a -inf best); anything finite beats a -inf
            # best (exp gives +inf); strict, so each lane keeps its earliest
            better = tl.exp(z - lane_z) * lane_e > e
            lane_idx = tl.where(better, offs, lane_idx)
            lane_z = tl.where(better, z, lane_z)
            lane_e = tl.where(better, e, lane_e)
            if SCREEN:
                k_best = tl.max(lane_z - tl.log(lane_e), axis=0)
                k_screen = tl.maximum(k_best - (tl.abs(k_best) * SCREEN_RELATIVE + SCREEN_ABSOLUTE), -FLOAT32_MAX)
    return best_pair(lane_z, -tl.log(lane_e), lane_idx)


@triton.jit
def target_weight(t_row, offs, stop, inv_temperature, m_safe, inv_s, TARGET_PROBS: tl.constexpr):
    # p over a chunk: the cleaned probabilities, or exp(z - m) times 1 / s from the logits and their statistics (a
    # product where a division takes about nine instructions a token; within float rounding of the quotient)
    if TARGET_PROBS:
        return load_probs(t_row, offs, stop)
    return tl.exp(load_scaled(t_row, offs, stop, inv_temperature) - m_safe) * inv_s


@triton.jit
def race_weights_slice(t_row, d_row, start, stop, inv_temperature, key, exclude, m, s, md, sd,
                       TARGET_PROBS: tl.constexpr, KIND: tl.constexpr, SCREEN: tl.constexpr,
                       BLOCK: tl.constexpr):
    # The race over weights w on [start, stop): argmax w(y) / E_y over w > 0, compared as
    # w * E' > w' * E (no logarithm but E's own). p comes from probabilities (TARGET_PROBS) or from
    # the logits with their statistics (m, s). KIND 0: w = p without token `exclude` (-1: none);
    # RACE_RESIDUAL_LOGITS: w = max(p - q, 0), q the softmax of the draft logits (statistics md, sd);
    # RACE_RESIDUAL_PROBS: w = max(p - q, 0), q given. Screened (SCREEN, module docstring): a chunk
    # is raced only if some token has w > r (1 - u), r the best w / E so far less a margin.
    # Returns the winner as (log(w / E), 0, index), index -1 when w is zero everywhere (a residual
    # with no mass: the caller races p with the same E_y, which is rare enough for a second pass).
    lane_w = tl.zeros([BLOCK], tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    md_safe = tl.where(md == float("-inf"), 0.0, md)
    inv_s = 1.0 / tl.where(s == 0.0, 1.0, s)  # a zero sum only where its row has no mass to race
    inv_sd = 1.0 / tl.where(sd == 0.0, 1.0, sd)
    ratio_screen = inv_s * 0.0  # nothing screened before the first raced chunk
    offs = start + tl.arange(0, BLOCK)
    p_next = target_weight(t_row, offs, stop, inv_temperature, m_safe, inv_s, TARGET_PROBS)
    d_next = p_next
    if KIND != 0:
        d_next = tl.load(d_row + offs, mask=offs < stop, other=0.0).to(tl.float32)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        p = p_next
        p_next = target_weight(t_row, offs + BLOCK, stop, inv_temperature, m_safe, inv_s, TARGET_PROBS)
        if KIND == 0:
            w = p  # token `exclude` is left out below, where the chunk is raced
        else:
            d = d_next
            d_next = tl.load(d_row + offs + BLOCK, mask=offs + BLOCK < stop, other=0.0).to(tl.float32)
            if KIND == RACE_RESIDUAL_LOGITS:
                q = tl.exp(clean(d * inv_temperature) - md_safe) * inv_sd
            else:
                q = clean_prob(d)
            w = p - q
        word = hash_word(key, offs)
        if chunk_raced(w - ratio_screen * one_minus_uniform(word), SCREEN):  # 1 - u is at most E_y
            e = neg_log_of_uniform(uniform_of(word))  # E_y
            if KIND == 0:
                w = tl.where(offs == exclude, 0.0, w)
            lane_w, lane_e, lane_idx = race_lanes(lane_w, lane_e, lane_idx, w, e, offs)
            if SCREEN:
                ratio_screen = screen_ratio(lane_w, lane_e)
    return ratio_best(lane_w, lane_e, lane_idx)


@triton.jit
def chunk_raced(slack, SCREEN: tl.constexpr):
    # whether a chunk is raced: always unscreened, else when some token's slack is above 0
    if SCREEN:
        return _any_positive(slack)
    return True


@triton.jit
def screen_ratio(lane_w, lane_e):
    # the best w / E so far less a margin; 0 (no screening) once ratios get too large to bound safely
    best = tl.max(lane_w / lane_e, axis=0)
    return tl.where(best < SCREEN_RATIO_LIMIT, best * (1.0 - SCREEN_RELATIVE), 0.0)


@triton.jit
def race_lanes(lane_w, lane_e, lane_idx, w, e, offs):
    # one chunk of a race over weights w with exponentials e: a lane takes the chunk's token where
    # w / e beats its best, compared as w * E' > w' * E (lane_w starts at 0 and E > 0, so w <= 0 and NaN
    # never pass; strict, so each lane keeps its earliest)
    better = w * lane_e > lane_w * e
    return tl.where(better, w, lane_w), tl.where(better, e, lane_e), tl.where(better, offs, lane_idx)


@triton.jit
def ratio_best(lane_w, lane_e, lane_idx):
    # the lanes' (w, E) bests reduced to one winner as the pair (log(w / E), 0, index)
    ratio = tl.where(lane_idx >= 0, tl.log(tl.where(lane_idx >= 0, lane_w, 1.0)) - tl.log(lane_e), float("-inf"))
    return best_pair(ratio, tl.zeros_like(ratio), lane_idx)
