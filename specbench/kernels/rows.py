"""Triton helpers that walk one vocabulary row: clean, argmax, softmax statistics, races.

Every helper reads a row (or a slice ``[start, stop)`` of it) in chunks of ``BLOCK`` tokens and
returns scalars, so the same code serves the one-program-per-request kernels (whole rows) and
the split kernels (one slice per program, partials merged afterwards).

Races sample without normalising: ``argmax_y (log w(y) - log E_y)`` with ``E_y = -log U_y``
is a draw from ``w / sum(w)`` (the exponential race, equivalently Gumbel-max with
``G = -log(-log U)``). Ties go to the lowest token id, as everywhere in specbench.

Two habits keep the loops fast. Running state is kept per lane (a ``[BLOCK]`` vector) and
reduced once after the loop, so no iteration waits on a block-wide reduction. Logits are
carried in base 2 (``z * log2(e)``), so every exponential and logarithm is one ``exp2``/``log2``;
softmax maxima ``m`` and race scores are in those units too.
"""

import triton
import triton.language as tl

from specbench.kernels.rng import uniform_at

FLOAT32_MAX = tl.constexpr(3.4028234663852886e38)

# race kinds
RACE_LOGITS = tl.constexpr(0)  # w = p (from cleaned logits, no normaliser needed), one token optionally left out
RACE_RESIDUAL_LOGITS = tl.constexpr(1)  # w = max(p - q, 0), q = softmax of the draft logits
RACE_RESIDUAL_PROBS = tl.constexpr(2)  # w = max(p - q, 0), q given as probabilities


LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def clean(z):
    # NaN -> -inf (probability 0); +inf -> largest float32 (several +inf share the mass equally)
    z = tl.where(z != z, float("-inf"), z)
    return tl.minimum(z, FLOAT32_MAX)


@triton.jit
def load_scaled(row_ptr, offs, stop, inv_temperature):
    # cleaned logits / temperature in float32; lanes past `stop` are -inf
    z = tl.load(row_ptr + offs, mask=offs < stop, other=float("-inf")).to(tl.float32)
    return clean(z * inv_temperature)


@triton.jit
def to_base2(z):
    # z * log2(e), keeping -inf and the float32 maximum in place
    return tl.where(z == FLOAT32_MAX, FLOAT32_MAX, z * LOG2E)


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
def _fold(m, s, z2):
    # per-lane online softmax in base 2: fold z2 into running (max m, sum s of exp2(z2 - m))
    m_new = tl.maximum(m, z2)
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    return m_new, s * tl.exp2(m - m_safe) + tl.exp2(z2 - m_safe)


@triton.jit
def _reduce_stats(m, s):
    m_row = tl.max(m, axis=0)
    m_safe = tl.where(m_row == float("-inf"), 0.0, m_row)
    return m_row, tl.sum(s * tl.exp2(m - m_safe), axis=0)


@triton.jit
def softmax_stats_slice(t_row, d_row, start, stop, inv_temperature, HAS_DRAFT_LOGITS: tl.constexpr,
                        BLOCK: tl.constexpr):
    # base-2 max and sum of exp2 over [start, stop) of the target row and (fused) the draft row;
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
        z2 = to_base2(z_next)
        z_next = load_scaled(t_row, offs, stop, inv_temperature)
        if HAS_DRAFT_LOGITS:
            zd2 = to_base2(zd_next)
            zd_next = load_scaled(d_row, offs, stop, inv_temperature)
            md, sd = _fold(md, sd, zd2)
        m, s = _fold(m, s, z2)
    m_row, s_row = _reduce_stats(m, s)
    md_row, sd_row = _reduce_stats(md, sd)
    return m_row, s_row, md_row, sd_row


@triton.jit
def merge_stats(m_a, s_a, m_b, s_b):
    # combine two base-2 (max, sum-of-exp2) partials
    m = tl.maximum(m_a, m_b)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return m, s_a * tl.exp2(m_a - m_safe) + s_b * tl.exp2(m_b - m_safe)


@triton.jit
def prob_of(z, m, s):
    # p = exp(z - M) / S from a cleaned natural-unit logit and base-2 (m, s)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return tl.exp2(to_base2(z) - m_safe) / s


@triton.jit
def race_slice(t_row, d_row, start, stop, inv_temperature, key, exclude, m, s, md, sd,
               KIND: tl.constexpr, BLOCK: tl.constexpr):
    # One pass of the exponential race over [start, stop), scores in base 2.
    # Returns (best score, its index, fallback score, its index); index -1 when nothing had w > 0.
    # KIND RACE_LOGITS: w = p, token `exclude` left out (-1 leaves none out); no fallback.
    # KIND RACE_RESIDUAL_*: w = max(p - q, 0) with p = exp2(z2 - m) / s; the fallback race is
    # over p itself with the same E_y, used when w is zero everywhere.
    lane_best = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    lane_fb = tl.full([BLOCK], float("-inf"), tl.float32)
    lane_fb_idx = tl.full([BLOCK], -1, tl.int32)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    md_safe = tl.where(md == float("-inf"), 0.0, md)
    inv_s = 1.0 / s
    inv_sd = 1.0 / sd
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        z2 = to_base2(load_scaled(t_row, offs, stop, inv_temperature))
        u = uniform_at(key, offs)
        neg_log2_e = -tl.log2(-tl.log2(u) * LN2)  # -log2 E_y
        race_p = z2 + neg_log2_e
        if KIND == RACE_LOGITS:
            score = tl.where(offs == exclude, float("-inf"), race_p)
        else:
            p = tl.exp2(z2 - m_safe) * inv_s
            if KIND == RACE_RESIDUAL_LOGITS:
                zd2 = to_base2(load_scaled(d_row, offs, stop, inv_temperature))
                q = tl.exp2(zd2 - md_safe) * inv_sd
            else:
                q = tl.load(d_row + offs, mask=offs < stop, other=0.0).to(tl.float32)
                q = tl.where(q != q, 0.0, q)
            w = p - q
            # residual w = max(p - q, 0); race only over w > 0
            score = tl.where(w > 0, tl.log2(tl.where(w > 0, w, 1.0)) + neg_log2_e, float("-inf"))
            better_fb = race_p > lane_fb
            lane_fb_idx = tl.where(better_fb, offs, lane_fb_idx)
            lane_fb = tl.where(better_fb, race_p, lane_fb)
        better = score > lane_best
        lane_idx = tl.where(better, offs, lane_idx)
        lane_best = tl.where(better, score, lane_best)
    best, best_idx = _lowest_best(lane_best, lane_idx)
    fallback, fallback_idx = _lowest_best(lane_fb, lane_fb_idx)
    return best, best_idx, fallback, fallback_idx
