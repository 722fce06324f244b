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

Running state is kept per lane (a ``[BLOCK]`` vector) and reduced once after the loop, so no
iteration waits on a block-wide reduction. A race score is kept as the pair ``(z, g)`` (log
weight, ``-log E``) and compared through differences, ``(z - z') + (g - g') > 0``: with logits
near the float32 maximum a plain sum ``z + g`` would round the noise away.
"""

import triton
import triton.language as tl

from specbench.kernels.rng import neg_log_uniform

FLOAT32_MAX = tl.constexpr(3.4028234663852886e38)

# kinds of race_residual_slice (the DRAFT codes of the kernels)
RACE_RESIDUAL_LOGITS = tl.constexpr(1)  # w = max(p - q, 0), q = softmax of the draft logits
RACE_RESIDUAL_PROBS = tl.constexpr(2)  # w = max(p - q, 0), q given as probabilities


@triton.jit
def clean(z):
    # NaN -> -inf (probability 0); +inf -> largest float32 (several +inf share the mass equally)
    z = tl.where(z != z, float("-inf"), z)  # noqa: PLR0124 (NaN test)
    return tl.minimum(z, FLOAT32_MAX)


@triton.jit
def load_scaled(row_ptr, offs, stop, inv_temperature):
    # cleaned logits / temperature in float32; lanes past `stop` are -inf
    z = tl.load(row_ptr + offs, mask=offs < stop, other=float("-inf")).to(tl.float32)
    return clean(z * inv_temperature)


@triton.jit
def clean_prob(p):
    # a target probability as the contract reads it: NaN and negative -> 0, above 1 (+inf too) -> 1
    return tl.where(p > 0.0, tl.minimum(p, 1.0), 0.0)


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
def _lowest_best(values, indices):
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
    return _lowest_best(lane_val, lane_idx)


@triton.jit
def _fold(m, s, z):
    # Per-lane online softmax: fold z into running (max m, sum s of exp(z - m)) with one exp:
    # of exp(m - m_new) and exp(z - m_new) one is always exp(0) = 1, the other exp(-|z - m|).
    # m starts at -FLOAT32_MAX, not -inf, so no guard is needed: z = -inf gives exp(-inf) = 0, and
    # a finite z far above the start gives exp(-inf) too while z > m restarts s at 1. The loop is
    # bound by instruction issue; a select per token costs about 7%.
    e = tl.exp(-tl.abs(z - m))
    s = tl.where(z > m, s * e + 1.0, s + e)
    return tl.maximum(m, z), s


@triton.jit
def _reduce_stats(m, s):
    # the lanes' (m, s) merged; a row with no finite value (every s 0) comes back as (-inf, 0)
    m_row = tl.max(m, axis=0)
    s_row = tl.sum(s * tl.exp(m - m_row), axis=0)
    return tl.where(s_row == 0.0, float("-inf"), m_row), s_row


@triton.jit
def softmax_stats_slice(t_row, d_row, start, stop, inv_temperature, HAS_DRAFT_LOGITS: tl.constexpr,
                        BLOCK: tl.constexpr):
    # max and sum of exp over [start, stop) of the target row and (fused) the draft row;
    # the next chunk is loaded before this one is used, so a load is always in flight
    m = tl.full([BLOCK], -FLOAT32_MAX, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    md = tl.full([BLOCK], -FLOAT32_MAX, tl.float32)
    sd = tl.zeros([BLOCK], tl.float32)
    offs = start + tl.arange(0, BLOCK)
    z_next = load_scaled(t_row, offs, stop, inv_temperature)
    zd_next = z_next
    if HAS_DRAFT_LOGITS:
        zd_next = load_scaled(d_row, offs, stop, inv_temperature)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + BLOCK + tl.arange(0, BLOCK)
        z = z_next
        z_next = load_scaled(t_row, offs, stop, inv_temperature)
        if HAS_DRAFT_LOGITS:
            zd = zd_next
            zd_next = load_scaled(d_row, offs, stop, inv_temperature)
            md, sd = _fold(md, sd, zd)
        m, s = _fold(m, s, z)
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
    _best, index = _lowest_best(relative, indices)
    winner = indices == index
    z = tl.max(tl.where(winner, zs, float("-inf")), axis=0)
    g = tl.max(tl.where(winner, gs, float("-inf")), axis=0)
    return z, g, index


@triton.jit
def race_logits_slice(t_row, start, stop, inv_temperature, key, exclude, BLOCK: tl.constexpr):
    # The race over p itself, read from the cleaned logits (no normaliser needed), on [start, stop),
    # token `exclude` left out (-1: none). A lane keeps its best (z, E) and a token beats it iff
    # z - log E > z_best - log E_best, i.e. exp(z - z_best) * E_best > E: one exp and the one log
    # of E per token. Returns the winner's (z, -log E, index), index -1 when every logit is -inf.
    lane_z = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    z_next = load_scaled(t_row, start + tl.arange(0, BLOCK), stop, inv_temperature)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        z = z_next
        z_next = load_scaled(t_row, offs + BLOCK, stop, inv_temperature)
        e = neg_log_uniform(key, offs)  # E_y
        z = tl.where(offs == exclude, float("-inf"), z)
        # -inf never wins (exp gives 0, or NaN against a -inf best); anything finite beats a -inf best
        # (exp gives +inf); strict, so each lane keeps its earliest
        better = tl.exp(z - lane_z) * lane_e > e
        lane_idx = tl.where(better, offs, lane_idx)
        lane_z = tl.where(better, z, lane_z)
        lane_e = tl.where(better, e, lane_e)
    return best_pair(lane_z, -tl.log(lane_e), lane_idx)


@triton.jit
def _target_weight(t_row, offs, stop, inv_temperature, m_safe, inv_s, TARGET_PROBS: tl.constexpr):
    # p over a chunk: the cleaned probabilities, or exp(z - m) / s from the logits and their statistics
    if TARGET_PROBS:
        return load_probs(t_row, offs, stop)
    return tl.exp(load_scaled(t_row, offs, stop, inv_temperature) - m_safe) * inv_s


@triton.jit
def race_weights_slice(t_row, d_row, start, stop, inv_temperature, key, exclude, m, s, md, sd,
                       TARGET_PROBS: tl.constexpr, KIND: tl.constexpr, WITH_FALLBACK: tl.constexpr,
                       BLOCK: tl.constexpr):
    # The race over weights w on [start, stop): argmax w(y) / E_y over w > 0, compared as
    # w * E' > w' * E (no logarithm but E's own). p comes from probabilities (TARGET_PROBS) or from
    # the logits with their statistics (m, s). KIND 0: w = p without token `exclude` (-1: none);
    # RACE_RESIDUAL_LOGITS: w = max(p - q, 0), q the softmax of the draft logits (statistics md, sd);
    # RACE_RESIDUAL_PROBS: w = max(p - q, 0), q given. Returns the winner as (log(w / E), 0, index),
    # index -1 when w is zero everywhere, then, WITH_FALLBACK, the winner of the race over p with
    # the same E_y (what a residual with no mass falls back to), else (-inf, 0, -1).
    lane_w = tl.zeros([BLOCK], tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    lane_fw = tl.zeros([BLOCK], tl.float32)
    lane_fe = tl.full([BLOCK], 1.0, tl.float32)
    lane_fidx = tl.full([BLOCK], -1, tl.int32)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    md_safe = tl.where(md == float("-inf"), 0.0, md)
    inv_s = 1.0 / tl.where(s == 0.0, 1.0, s)  # a zero sum only where its row has no mass to race
    inv_sd = 1.0 / tl.where(sd == 0.0, 1.0, sd)
    offs = start + tl.arange(0, BLOCK)
    p_next = _target_weight(t_row, offs, stop, inv_temperature, m_safe, inv_s, TARGET_PROBS)
    d_next = p_next
    if KIND != 0:
        d_next = tl.load(d_row + offs, mask=offs < stop, other=0.0).to(tl.float32)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        p = p_next
        p_next = _target_weight(t_row, offs + BLOCK, stop, inv_temperature, m_safe, inv_s, TARGET_PROBS)
        e = neg_log_uniform(key, offs)  # E_y
        if KIND == 0:
            w = tl.where(offs == exclude, 0.0, p)
        else:
            d = d_next
            d_next = tl.load(d_row + offs + BLOCK, mask=offs + BLOCK < stop, other=0.0).to(tl.float32)
            if KIND == RACE_RESIDUAL_LOGITS:
                q = tl.exp(clean(d * inv_temperature) - md_safe) * inv_sd
            else:
                q = tl.where(d != d, 0.0, d)  # noqa: PLR0124 (NaN test)
            w = p - q
        # only w > 0 races (lane_w starts at 0 and E > 0, so w <= 0 and NaN never pass); strict, so
        # each lane keeps its earliest
        better = w * lane_e > lane_w * e
        lane_idx = tl.where(better, offs, lane_idx)
        lane_w = tl.where(better, w, lane_w)
        lane_e = tl.where(better, e, lane_e)
        if WITH_FALLBACK:
            better_fb = p * lane_fe > lane_fw * e
            lane_fidx = tl.where(better_fb, offs, lane_fidx)
            lane_fw = tl.where(better_fb, p, lane_fw)
            lane_fe = tl.where(better_fb, e, lane_fe)
    z_best, g_best, idx = _ratio_best(lane_w, lane_e, lane_idx)
    fz, fg, fidx = _ratio_best(lane_fw, lane_fe, lane_fidx)
    return z_best, g_best, idx, fz, fg, fidx


@triton.jit
def _ratio_best(lane_w, lane_e, lane_idx):
    # the lanes' (w, E) bests reduced to one winner as the pair (log(w / E), 0, index)
    ratio = tl.where(lane_idx >= 0, tl.log(tl.where(lane_idx >= 0, lane_w, 1.0)) - tl.log(lane_e), float("-inf"))
    return best_pair(ratio, tl.zeros_like(ratio), lane_idx)
