"""The log-probability epilogue: each emitted token's log-probability (``verify(logprobs=...)``).

Run after the step, whichever kernels ran it: one program per (request, slot), grid ``B x (K + 1)``.
A slot before the request's ``num_emitted`` reads its token ``y`` and makes one pass over that
row for its normaliser; every other slot (and every slot of an invalid request, which emits
nothing) is ``NaN``.

- ``RAW``: ``log_softmax`` of the cleaned logits without temperature or truncation, ``z_y - m -
  log s`` with ``(m, s)`` the row's softmax statistics at temperature 1; target probabilities:
  ``log(p(y) / sum p)``.
- processed: a greedy row as raw; an untruncated request at its temperature (probabilities: as
  raw); a truncated one (``TRUNCATE``) from the prepass's summary ``(m, S, tau, iota)`` of the row
  (``specbench/kernels/truncation.py``), with no pass over the row: ``z_y - m - log S`` for a kept
  ``y`` (``log(p(y) / S)`` for probabilities), ``-inf`` outside the cutoff.
"""

import triton
import triton.language as tl

from specbench.kernels.cutoffs import kept_by
from specbench.kernels.decide import request_setup
from specbench.kernels.rows import clean, clean_prob, load_probs, softmax_stats_slice
from specbench.kernels.truncation import read_summary, request_knobs, truncated_prob_of


@triton.jit
def _row_sum(row, V, BLOCK: tl.constexpr):
    # the sum of a row's cleaned probabilities
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        total += load_probs(row, start + tl.arange(0, BLOCK), V)
    return tl.sum(total, axis=0)


@triton.jit
def _logprobs_kernel(
    logprobs_ptr, logprobs_stride,  # [B, K + 1] float32 (written: every slot)
    out_ptr, out_stride,  # [B, K + 1] int64, the step's tokens
    num_emitted_ptr,  # [B] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,  # [B]
    top_k_ptr, top_p_ptr, min_p_ptr,  # [B] (read only where HAS_*)
    summary_f_ptr, summary_i_ptr,  # the truncation prepass's summaries (read only with TRUNCATE)
    V, NUM_SLOTS,
    MODE: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    RAW: tl.constexpr,
    TRUNCATE: tl.constexpr,
    HAS_TOP_K: tl.constexpr,
    HAS_TOP_P: tl.constexpr,
    HAS_MIN_P: tl.constexpr,
    BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    result = tl.full([], float("nan"), tl.float32)
    if j < tl.load(num_emitted_ptr + b):
        y = tl.load(out_ptr + b * out_stride + j)
        y_safe = tl.minimum(tl.maximum(y, 0), V - 1)  # emitted tokens lie in [0, V)
        row = target_ptr + b * target_stride_b + j * target_stride_k
        _n, greedy, inv_temperature, _position, _key = request_setup(
            b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)
        truncated = greedy & (~greedy)
        if TRUNCATE and not RAW:
            truncated, _k, _p, _mp = request_knobs(b, top_k_ptr, top_p_ptr, min_p_ptr, V, HAS_TOP_K, HAS_TOP_P,
                                                   HAS_MIN_P)
            truncated = truncated & (~greedy)
        raw = tl.load(row + y_safe).to(tl.float32)
        if truncated:
            m, mass, tau, iota = read_summary(summary_f_ptr, summary_i_ptr, b, j, 0, NUM_SLOTS)
            if TARGET_PROBS:
                result = tl.log(truncated_prob_of(raw, y_safe, inv_temperature, m, mass, tau, iota, True))
            else:
                z = clean(raw * inv_temperature)
                value = tl.where(z == 0.0, 0.0, z)
                kept = kept_by(value, y_safe, tau, iota) & (value > float("-inf"))
                result = tl.where(kept, (z - m) - tl.log(mass), float("-inf"))
        elif TARGET_PROBS:
            result = tl.log(clean_prob(raw) / _row_sum(row, V, BLOCK))
        else:
            scale = inv_temperature
            if RAW:
                scale = 1.0
            scale = tl.where(greedy, 1.0, scale)
            m, s, _md, _sd = softmax_stats_slice(row, row, 0, V, scale, False, BLOCK)
            result = (clean(raw * scale) - m) - tl.log(s)
    tl.store(logprobs_ptr + b * logprobs_stride + j, result)
