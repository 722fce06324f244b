"""One program per request: walk the rows in order and stop at the first rejection.

The large-batch path of every mode. A request reads only the rows it needs: for each draft slot
one pass (target, and draft logits in the same loop) for the softmax statistics, and after the
first rejection (or at the bonus row) one race pass over that row. Rows after the first
rejection are never touched. The synthetic mode reads no row until it must emit the target's
own token; the greedy mode makes one argmax pass per row.
"""

import triton
import triton.language as tl

from specbench import rng
from specbench.kernels.rng import seed_key, stream_key, uniform_at
from specbench.kernels.rows import (
    argmax_slice,
    clean,
    prob_of,
    race_logits_slice,
    race_residual_slice,
    softmax_stats_slice,
)

MODE_GREEDY = tl.constexpr(0)
MODE_PROBABILISTIC = tl.constexpr(1)
MODE_SYNTHETIC = tl.constexpr(2)

DRAFT_NONE = tl.constexpr(0)
DRAFT_LOGITS = tl.constexpr(1)
DRAFT_PROBS = tl.constexpr(2)

ACCEPT = tl.constexpr(rng.ACCEPT)
RESIDUAL = tl.constexpr(rng.RESIDUAL)
SAMPLE = tl.constexpr(rng.SAMPLE)


@triton.jit
def accept_test(u, x, x_valid, t_row, d_row, inv_temperature, m, s, md, sd, DRAFT: tl.constexpr):
    # accept iff u * q(x) < p(x)  (Leviathan et al. 2022, alg. 1); q(x) = 1 for one-hot drafts.
    # m, s (and md, sd) are the softmax statistics of the target (and draft) row.
    x_safe = tl.where(x_valid, x, 0)
    p_x = prob_of(clean(tl.load(t_row + x_safe).to(tl.float32) * inv_temperature), m, s)
    q_x = 1.0
    if DRAFT == DRAFT_LOGITS:
        q_draft = prob_of(clean(tl.load(d_row + x_safe).to(tl.float32) * inv_temperature), md, sd)
        q_x = tl.where(md == float("-inf"), 1.0, q_draft)
    if DRAFT == DRAFT_PROBS:
        q_x = tl.load(d_row + x_safe).to(tl.float32)
        q_x = tl.where(q_x != q_x, 0.0, q_x)  # noqa: PLR0124 (NaN test)
    return x_valid & (u * q_x < p_x)


@triton.jit
def request_setup(b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE: tl.constexpr):
    # What every kernel reads first about request b: its draft count (clamped so no row past the
    # bonus row is ever indexed), whether its rows are greedy, 1/T, its position and its seed key.
    # A negative temperature (possible only unchecked) gives 1/T = NaN: every row is invalid, and
    # masked lanes (-inf) never turn into +inf.
    n = tl.minimum(tl.maximum(tl.load(num_draft_ptr + b), 0), NUM_SLOTS - 1)
    temperature = tl.load(temperature_ptr + b)
    greedy = (temperature == 0.0) | (MODE == MODE_GREEDY)
    inv_temperature = tl.where(temperature < 0.0, float("nan"), 1.0 / tl.where(greedy, 1.0, temperature))
    return n, greedy, inv_temperature, tl.load(position_ptr + b), seed_key(tl.load(seed_ptr + b))


@triton.jit
def sample_row(t_row, V, inv_temperature, greedy, key, BLOCK: tl.constexpr):
    # the target's own token at a row: argmax for a greedy row, else argmax_y p(y) / E_y;
    # -1 when the row is invalid
    token = -1
    if greedy:
        _v, token = argmax_slice(t_row, 0, V, BLOCK)
    else:
        _z, _g, token = race_logits_slice(t_row, 0, V, inv_temperature, key, -1, BLOCK)
    return token.to(tl.int64)


@triton.jit
def _verify_sequential_kernel(
    out_ptr, out_stride,  # [B, K + 1] int64
    num_emitted_ptr,  # [B] int32
    num_accepted_ptr,  # [B] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V]
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits or probs (unused if DRAFT == 0)
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr,  # [B] int32
    temperature_ptr,  # [B] float32
    seed_ptr,  # [B] int64
    position_ptr,  # [B] int64
    conditional_rates_ptr,  # [K] float32
    V, NUM_SLOTS,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, NUM_SLOTS, MODE)

    slots = tl.arange(0, OUT_BLOCK)
    tokens = tl.full([OUT_BLOCK], -1, tl.int64)
    num_emitted = 0
    num_accepted = 0
    i = 0
    done = 0
    while done == 0:
        t_row = target_ptr + b * target_stride_b + i * target_stride_k
        d_row = draft_ptr + b * draft_stride_b + i * draft_stride_k
        x = tl.load(draft_ids_ptr + b * draft_ids_stride + i, mask=i < n, other=-1)
        x_valid = (x >= 0) & (x < V) & (i < n)
        token = x * 0 - 1
        accepted = x_valid & (i < 0)
        if MODE == MODE_SYNTHETIC:
            u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
            rate = tl.load(conditional_rates_ptr + i, mask=i < n, other=0.0)
            # synthetic: accept iff u < c_i, whatever the distributions say
            accepted = x_valid & (u < rate)
            if accepted:
                token = x
            else:
                token = sample_row(t_row, V, inv_temperature, greedy,
                                   stream_key(key_of_seed, position + i, SAMPLE), BLOCK)
        elif greedy:
            _best_val, best_idx = argmax_slice(t_row, 0, V, BLOCK)
            accepted = x_valid & (x == best_idx)
            token = tl.where(accepted, x, best_idx.to(tl.int64))
        elif i == n:
            token = sample_row(t_row, V, inv_temperature, greedy,
                               stream_key(key_of_seed, position + i, SAMPLE), BLOCK)
        else:
            m, s, md, sd = softmax_stats_slice(t_row, d_row, 0, V, inv_temperature, DRAFT == DRAFT_LOGITS, BLOCK)
            if DRAFT == DRAFT_PROBS:
                md = 0.0  # marks "q is a real distribution" for the one-hot test below
            if m != float("-inf"):
                u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
                accepted = accept_test(u, x, x_valid, t_row, d_row, inv_temperature, m, s, md, sd, DRAFT)
                if accepted:
                    token = x
                else:
                    key = stream_key(key_of_seed, position + i, RESIDUAL)
                    if (md == float("-inf")) | (~x_valid):
                        # w = p without x (one-hot draft), or p itself when x is not a valid id
                        exclude = tl.where(x_valid, x, -1)
                        _z, _g, res_idx = race_logits_slice(t_row, 0, V, inv_temperature, key, exclude, BLOCK)
                        token = tl.where(res_idx >= 0, res_idx.to(tl.int64), x)
                    else:
                        _z, _g, res_idx, _fz, _fg, _fi = race_residual_slice(
                            t_row, d_row, 0, V, inv_temperature, key, m, s, md, sd, DRAFT, False, BLOCK)
                        if res_idx < 0:
                            # w is zero everywhere: race over p with the same E_y (rare, so a second pass)
                            _z, _g, res_idx = race_logits_slice(t_row, 0, V, inv_temperature, key, -1, BLOCK)
                        token = res_idx.to(tl.int64)
        tokens = tl.where(slots == i, token, tokens)
        num_emitted += (token >= 0).to(tl.int32)
        num_accepted += accepted.to(tl.int32)
        i += 1
        done = ((~accepted) | (i > n)).to(tl.int32)

    tl.store(out_ptr + b * out_stride + slots, tokens, mask=slots < NUM_SLOTS)
    tl.store(num_emitted_ptr + b, num_emitted)
    tl.store(num_accepted_ptr + b, num_accepted)
