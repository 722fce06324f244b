"""Triton helpers that walk one vocabulary row: clean, argmax, softmax statistics, races.

Every helper reads a row (or a slice ``[start, stop)`` of it) in chunks of ``BLOCK`` tokens and
returns scalars, so the same code serves the one-program-per-request kernels (whole rows) and
the split kernels (one slice per program, partials merged afterwards).

Races sample without normalising: ``argmax_y (log w(y) - log E_y)`` with ``E_y = -log U_y``
is a draw from ``w / sum(w)`` (the exponential race, equivalently Gumbel-max with
``G = -log(-log U)``). Ties go to the lowest token id, as everywhere in specbench.

Running state is kept per lane (a ``[BLOCK]`` vector) and reduced once after the loop, so no
iteration waits on a block-wide reduction. A race score is kept as the pair ``(z, g)`` (log
weight, ``-log E``) and compared through differences, ``(z - z') + (g - g') > 0``: with logits
near the float32 maximum a plain sum ``z + g`` would round the noise away.
"""

import triton
import triton.language as tl

from specbench.kernels.rng import uniform_at

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
def _lowest_best(values, indices):
    # (max of values, lowest index among the lanes that reach it; -1 if none is above -inf)
    best = tl.max(values, axis=0)
    candidates = tl.where((values == best) & (indices >= 0), indices, 2147483647)
    index = tl.min(candidates, axis=0)
    return best, tl.where(index == 2147483647, -1, index)


@triton.jit
def argmax_slice(row_ptr, start, stop, BLOCK: tl.constexpr):
    # (max value, its lowest index) over [start, stop); index -1 when every value is -inf/NaN.
    # The next chunk is loaded before this one is used, so a load is always in flight.
    lane_val = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    offs = start + tl.arange(0, BLOCK)
    z_next = load_scaled(row_ptr, offs, stop, 1.0)
    for chunk in range(start, stop, BLOCK):
        z = z_next
        offs = chunk + tl.arange(0, BLOCK)
        z_next = load_scaled(row_ptr, offs + BLOCK, stop, 1.0)
        better = z > lane_val  # strict: each lane keeps its earliest maximum
        lane_idx = tl.where(better, offs, lane_idx)
        lane_val = tl.where(better, z, lane_val)
    return _lowest_best(lane_val, lane_idx)


@triton.jit
def _fold(m, s, z):
    # Per-lane online softmax: fold z into running (max m, sum s of exp(z - m)) with one exp:
    # of exp(m - m_new) and exp(z - m_new) one is always exp(0) = 1, the other exp(-|z - m|).
    # While m is -inf, z - m is +inf (e = 0, and z > m restarts s at 1) or NaN (z = -inf, e = 0).
    # No guard on m: the loop is bound by instruction issue, and a select per token costs 7%.
    e = tl.where(z == float("-inf"), 0.0, tl.exp(-tl.abs(z - m)))
    s = tl.where(z > m, s * e + 1.0, s + e)
    return tl.maximum(m, z), s


@triton.jit
def _reduce_stats(m, s):
    m_row = tl.max(m, axis=0)
    m_safe = tl.where(m_row == float("-inf"), 0.0, m_row)
    return m_row, tl.sum(s * tl.exp(m - m_safe), axis=0)


@triton.jit
def softmax_stats_slice(t_row, d_row, start, stop, inv_temperature, HAS_DRAFT_LOGITS: tl.constexpr,
                        BLOCK: tl.constexpr):
    # max and sum of exp over [start, stop) of the target row and (fused) the draft row;
    # the next chunk is loaded before this one is used, so a load is always in flight
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    md = tl.full([BLOCK], float("-inf"), tl.float32)
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
def merge_stats(m_a, s_a, m_b, s_b):
    # combine two (max, sum-of-exp) partials
    m = tl.maximum(m_a, m_b)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return m, s_a * tl.exp(m_a - m_safe) + s_b * tl.exp(m_b - m_safe)


@triton.jit
def prob_of(z, m, s):
    # p = exp(z - m) / s from a cleaned logit and its row's softmax statistics
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return tl.exp(z - m_safe) / tl.where(s == 0.0, 1.0, s)  # s is 0 only for a row with no mass (p = 0)


@triton.jit
def _better(z, g, best_z, best_g):
    # (z + g) > (best_z + best_g), computed through differences; -inf never wins, and anything
    # finite beats a -inf best (z - best_z = +inf; NaN only where z is -inf, which the mask drops)
    return (z != float("-inf")) & ((z - best_z) + (g - best_g) > 0)


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
    # The race over p itself (w = p, read from the cleaned logits, no normaliser needed) on
    # [start, stop), token `exclude` left out (-1: none). Returns the winner's (z, g, index),
    # index -1 when every logit is -inf.
    lane_z = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_g = tl.zeros([BLOCK], tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    z_next = load_scaled(t_row, start + tl.arange(0, BLOCK), stop, inv_temperature)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        z = z_next
        z_next = load_scaled(t_row, offs + BLOCK, stop, inv_temperature)
        g = -tl.log(-tl.log(uniform_at(key, offs)))  # -log E_y
        z = tl.where(offs == exclude, float("-inf"), z)
        better = _better(z, g, lane_z, lane_g)
        lane_idx = tl.where(better, offs, lane_idx)
        lane_z = tl.where(better, z, lane_z)
        lane_g = tl.where(better, g, lane_g)
    return best_pair(lane_z, lane_g, lane_idx)


@triton.jit
def race_residual_slice(t_row, d_row, start, stop, inv_temperature, key, m, s, md, sd,
                        KIND: tl.constexpr, WITH_FALLBACK: tl.constexpr, BLOCK: tl.constexpr):
    # The race over the residual w = max(p - q, 0) on [start, stop): argmax w / E_y, compared as
    # w * E' > w' * E (no logarithm per token). q is the softmax of the draft logits
    # (KIND RACE_RESIDUAL_LOGITS) or given (RACE_RESIDUAL_PROBS). Returns the winner as a pair
    # (log(w / E), 0, index), index -1 when w is zero everywhere, then, WITH_FALLBACK, the winner
    # of the race over p with the same E_y (for that case), else (-inf, 0, -1).
    lane_w = tl.zeros([BLOCK], tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    lane_fz = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_fg = tl.zeros([BLOCK], tl.float32)
    lane_fidx = tl.full([BLOCK], -1, tl.int32)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    md_safe = tl.where(md == float("-inf"), 0.0, md)
    inv_s = 1.0 / tl.where(s == 0.0, 1.0, s)  # a zero sum only where its row has no mass to race
    inv_sd = 1.0 / tl.where(sd == 0.0, 1.0, sd)
    offs = start + tl.arange(0, BLOCK)
    z_next = load_scaled(t_row, offs, stop, inv_temperature)
    d_next = tl.load(d_row + offs, mask=offs < stop, other=0.0).to(tl.float32)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        z = z_next
        d = d_next
        z_next = load_scaled(t_row, offs + BLOCK, stop, inv_temperature)
        d_next = tl.load(d_row + offs + BLOCK, mask=offs + BLOCK < stop, other=0.0).to(tl.float32)
        e = -tl.log(uniform_at(key, offs))  # E_y
        p = tl.exp(z - m_safe) * inv_s
        if KIND == RACE_RESIDUAL_LOGITS:
            q = tl.exp(clean(d * inv_temperature) - md_safe) * inv_sd
        else:
            q = tl.where(d != d, 0.0, d)  # noqa: PLR0124 (NaN test)
        w = p - q
        # residual w = max(p - q, 0); only w > 0 races; strict, so each lane keeps its earliest
        better = (w > 0) & (w * lane_e > lane_w * e)
        lane_idx = tl.where(better, offs, lane_idx)
        lane_w = tl.where(better, w, lane_w)
        lane_e = tl.where(better, e, lane_e)
        if WITH_FALLBACK:
            g = -tl.log(e)
            better_fb = _better(z, g, lane_fz, lane_fg)
            lane_fidx = tl.where(better_fb, offs, lane_fidx)
            lane_fz = tl.where(better_fb, z, lane_fz)
            lane_fg = tl.where(better_fb, g, lane_fg)
    ratio = tl.where(lane_idx >= 0, tl.log(tl.where(lane_idx >= 0, lane_w, 1.0)) - tl.log(lane_e), float("-inf"))
    z_best, g_best, idx = best_pair(ratio, tl.zeros([BLOCK], tl.float32), lane_idx)
    fz, fg, fidx = best_pair(lane_fz, lane_fg, lane_fidx)
    return z_best, g_best, idx, fz, fg, fidx
