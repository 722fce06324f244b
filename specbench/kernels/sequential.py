"""One program per request: walk the rows in order and stop at the first rejection.

The large-batch path of the greedy mode and of probabilistic rows whose acceptance test needs a
row's statistics (target logits, or draft logits). A request reads only the rows it needs: for
each draft slot one pass (target, and draft logits in the same loop) for the softmax statistics,
and after the first rejection (or at the bonus row) one race pass over that row. Rows after the
first rejection are never touched. Greedy rows make one argmax pass per row.

With target probabilities (``TARGET_PROBS``) only draft logits bring a request here: ``p(x)`` is
read at the draft, and each draft row's statistics give ``q(x)``.
"""

import triton
import triton.language as tl

from specbench.kernels.decide import (
    ACCEPT,
    DRAFT_LOGITS,
    DRAFT_PROBS,
    RESIDUAL,
    SAMPLE,
    accept_test,
    read_at_draft,
    request_setup,
    request_valid,
    sample_row,
    target_prob_at,
)
from specbench.kernels.rng import stream_key, uniform_at
from specbench.kernels.rows import argmax_slice, race_logits_slice, race_weights_slice, softmax_stats_slice


@triton.jit
def _residual_token(t_row, d_row, V, inv_temperature, key, x, x_valid, m, s, md, sd, DRAFT: tl.constexpr,
                    TARGET_PROBS: tl.constexpr, SCREEN: tl.constexpr, RACE_BLOCK: tl.constexpr):
    # The token emitted after rejecting draft x: the race over w = max(p - q, 0), where w is p
    # without x for a one-hot draft and p itself for an id outside [0, V); p, with the same E_y,
    # when w has no mass (a second pass, since it is rare).
    one_hot = md == float("-inf")  # one-hot drafts and draft-logit rows with no finite value
    exclude = tl.where(x_valid, x, -1)
    token = -1
    if one_hot | (~x_valid):
        if TARGET_PROBS:
            _z, _g, idx = race_weights_slice(t_row, d_row, 0, V, 1.0, key, exclude, 0.0, 1.0, md, sd, True, 0, SCREEN,
                                             RACE_BLOCK)
        else:
            _z, _g, idx = race_logits_slice(t_row, 0, V, inv_temperature, key, exclude, SCREEN, RACE_BLOCK)
        # should nothing else have mass, x itself where it has some (else the row has none; for target
        # logits the row is valid, so x has)
        p_x = target_prob_at(t_row + tl.where(x_valid, x, 0), x_valid, inv_temperature, m, s, TARGET_PROBS)
        token = tl.where(idx >= 0, idx, tl.where(x_valid & (p_x > 0.0), x, -1).to(tl.int32))
    else:
        _z, _g, idx = race_weights_slice(t_row, d_row, 0, V, inv_temperature, key, -1, m, s, md, sd, TARGET_PROBS,
                                         DRAFT, SCREEN, RACE_BLOCK)
        if idx < 0:
            # w is zero everywhere: the race over p with the same E_y
            _z, _g, idx = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, SCREEN, RACE_BLOCK)
        token = idx
    return token.to(tl.int64)


@triton.jit
def _verify_sequential_kernel(
    out_ptr, out_stride,  # [B, K + 1] int64
    num_emitted_ptr,  # [B] int32
    num_accepted_ptr,  # [B] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, K + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, K, V] draft logits or probs (unused if DRAFT == 0)
    draft_ids_ptr, draft_ids_stride,  # [B, K] int64
    num_draft_ptr,  # [B] int32
    temperature_ptr,  # [B] float32
    seed_ptr,  # [B] int64
    position_ptr,  # [B] int64
    V, NUM_SLOTS,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr,
    SCREEN: tl.constexpr,
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
        if greedy:
            _best_val, best_idx = argmax_slice(t_row, 0, V, TARGET_PROBS, BLOCK)
            accepted = x_valid & (x == best_idx)
            token = tl.where(accepted, x, best_idx.to(tl.int64))
        elif i == n:
            _z, _g, bonus = sample_row(t_row, 0, V, inv_temperature, stream_key(key_of_seed, position + i, SAMPLE),
                                       TARGET_PROBS, SCREEN, BLOCK // 2)  # races: half the block
            token = bonus.to(tl.int64)
        else:
            # the values at the draft are read before the rows' statistics, so that read (which
            # depends on the draft id) overlaps the pass instead of following it
            t_at_x, d_at_x = read_at_draft(t_row, d_row, x, x_valid, DRAFT)
            u = uniform_at(stream_key(key_of_seed, position + i, ACCEPT), 0)
            if TARGET_PROBS:
                # p(x) is read at the draft; the draft logits' statistics give q(x)
                md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, 0, V, inv_temperature, False, BLOCK)
                m = 0.0
                s = 1.0
            else:
                m, s, md, sd = softmax_stats_slice(t_row, d_row, 0, V, inv_temperature, DRAFT == DRAFT_LOGITS, BLOCK)
                if DRAFT == DRAFT_PROBS:
                    md = 0.0  # marks "q is a real distribution" for the one-hot test of the residual
            if m != float("-inf"):
                accepted = accept_test(u, x_valid, t_at_x, d_at_x, inv_temperature, m, s, md, sd, DRAFT, TARGET_PROBS)
                if accepted:
                    token = x
                else:
                    token = _residual_token(t_row, d_row, V, inv_temperature,
                                            stream_key(key_of_seed, position + i, RESIDUAL), x, x_valid,
                                            m, s, md, sd, DRAFT, TARGET_PROBS, SCREEN, BLOCK // 2)
        tokens = tl.where(slots == i, token, tokens)
        num_emitted += (token >= 0).to(tl.int32)
        num_accepted += accepted.to(tl.int32)
        i += 1
        done = ((~accepted) | (i > n)).to(tl.int32)

    valid = request_valid(inv_temperature)  # an invalid request emits nothing
    tl.store(out_ptr + b * out_stride + slots, tl.where(valid, tokens, -1), mask=slots < NUM_SLOTS)
    tl.store(num_emitted_ptr + b, tl.where(valid, num_emitted, 0))
    tl.store(num_accepted_ptr + b, tl.where(valid, num_accepted, 0))
