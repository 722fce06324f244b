"""Triton helpers that walk one vocabulary row: clean, argmax, softmax statistics, races.

Every helper reads a row (or a slice ``[start, stop)`` of it) in chunks of ``BLOCK`` tokens and
returns scalars, so the same code serves the one-program-per-request kernels (whole rows) and
the split kernels (one slice per program, partials merged afterwards).

Races sample without normalising: ``argmax_y (log w(y) - log E_y)`` with ``E_y = -log U_y``
is a draw from ``w / sum(w)`` (the exponential race, equivalently Gumbel-max with
``G = -log(-log U)``). Ties go to the lowest token id, as everywhere in specbench.
"""

import triton
import triton.language as tl

from specbench.kernels.rng import uniform_at

FLOAT32_MAX = tl.constexpr(3.4028234663852886e38)

# race kinds
RACE_LOGITS = tl.constexpr(0)  # w = p (from cleaned logits, no normaliser needed), one token optionally left out
RACE_RESIDUAL_LOGITS = tl.constexpr(1)  # w = max(p - q, 0), q = softmax of the draft logits
RACE_RESIDUAL_PROBS = tl.constexpr(2)  # w = max(p - q, 0), q given as probabilities


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
def argmax_slice(row_ptr, start, stop, BLOCK: tl.constexpr):
    # (max value, its lowest index) over [start, stop); index -1 when every value is -inf/NaN
    best_val = float("-inf")
    best_idx = -1
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        z = load_scaled(row_ptr, offs, stop, 1.0)
        chunk_max = tl.max(z, axis=0)
        chunk_idx = tl.argmax(z, axis=0, tie_break_left=True) + chunk
        better = chunk_max > best_val
        best_idx = tl.where(better, chunk_idx, best_idx)
        best_val = tl.where(better, chunk_max, best_val)
    return best_val, best_idx


@triton.jit
def _merge_max_sum(m, s, z):
    # online softmax: fold chunk z into running (max m, sum s of exp(z - m))
    m_new = tl.maximum(m, tl.max(z, axis=0))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(z - m_safe), axis=0)
    return m_new, s


@triton.jit
def softmax_stats_slice(t_row, d_row, start, stop, inv_temperature, HAS_DRAFT_LOGITS: tl.constexpr,
                        BLOCK: tl.constexpr):
    # running max and sum of exp over [start, stop) of the target row and (fused) the draft row
    m = float("-inf")
    s = 0.0
    md = float("-inf")
    sd = 0.0
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        z = load_scaled(t_row, offs, stop, inv_temperature)
        if HAS_DRAFT_LOGITS:
            zd = load_scaled(d_row, offs, stop, inv_temperature)
            md, sd = _merge_max_sum(md, sd, zd)
        m, s = _merge_max_sum(m, s, z)
    return m, s, md, sd


@triton.jit
def merge_stats(m_a, s_a, m_b, s_b):
    # combine two (max, sum-of-exp) partials
    m = tl.maximum(m_a, m_b)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return m, s_a * tl.exp(m_a - m_safe) + s_b * tl.exp(m_b - m_safe)


@triton.jit
def race_slice(t_row, d_row, start, stop, inv_temperature, key, exclude, m, s, md, sd,
               KIND: tl.constexpr, BLOCK: tl.constexpr):
    # One pass of the exponential race over [start, stop).
    # Returns (best score, its index, fallback score, its index); index -1 when nothing had w > 0.
    # KIND RACE_LOGITS: w = p, token `exclude` left out (-1 leaves none out); no fallback.
    # KIND RACE_RESIDUAL_*: w = max(p - q, 0) with p = exp(z - m) / s; the fallback race is over p
    # itself with the same E_y, used when w is zero everywhere.
    best = float("-inf")
    best_idx = -1
    fallback = float("-inf")
    fallback_idx = -1
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        z = load_scaled(t_row, offs, stop, inv_temperature)
        u = uniform_at(key, offs)
        gumbel = -tl.log(-tl.log(u))  # -log E_y
        race_p = z + gumbel
        if KIND == RACE_LOGITS:
            score = tl.where(offs == exclude, float("-inf"), race_p)
        else:
            m_safe = tl.where(m == float("-inf"), 0.0, m)
            p = tl.exp(z - m_safe) / s
            if KIND == RACE_RESIDUAL_LOGITS:
                zd = load_scaled(d_row, offs, stop, inv_temperature)
                md_safe = tl.where(md == float("-inf"), 0.0, md)
                q = tl.exp(zd - md_safe) / sd
            else:
                q = tl.load(d_row + offs, mask=offs < stop, other=0.0).to(tl.float32)
                q = tl.where(q != q, 0.0, q)
            w = p - q
            # residual w = max(p - q, 0); race only over w > 0
            score = tl.where(w > 0, tl.log(tl.where(w > 0, w, 1.0)) + gumbel, float("-inf"))
            chunk_fb = tl.max(race_p, axis=0)
            chunk_fb_idx = tl.argmax(race_p, axis=0, tie_break_left=True) + chunk
            better_fb = chunk_fb > fallback
            fallback_idx = tl.where(better_fb, chunk_fb_idx, fallback_idx)
            fallback = tl.where(better_fb, chunk_fb, fallback)
        chunk_best = tl.max(score, axis=0)
        chunk_idx = tl.argmax(score, axis=0, tie_break_left=True) + chunk
        better = chunk_best > best
        best_idx = tl.where(better, chunk_idx, best_idx)
        best = tl.where(better, chunk_best, best)
    return best, best_idx, fallback, fallback_idx
