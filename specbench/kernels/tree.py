"""Tree verification (``specbench/verification.py``, "Trees"): one program per request walks its draft tree.

Lanes of ``NODE_BLOCK``-wide vectors hold the request's nodes (parent, token); the children of the current
place are the nodes whose parent it is, tried in index order. At each place the program reads the place's
target row as the chain kernels do and tests the children one by one:

- greedy rows: one argmax pass, then the lowest-rank child whose token is the argmax;
- probabilistic rows: one pass for the softmax statistics of the target row (fused with the first child's
  draft logits, as the chain kernel fuses a slot's two rows), then each child's test
  ``(u_k q_k(x)) R < r(x)``. Rank 0 reads ``r(x) = p(x)`` as the chain does. A rejected sibling's facts
  (its node, its draft statistics, the mass ``R`` it was tested against, its divisor when drawn without
  replacement) are kept in lane ``k`` of small vectors, and the residual ``r`` is never stored: wherever
  it is needed (``r(x)`` of a later sibling, the mass ``R`` for the next one, the final race) it is
  replayed from the target row and the rejected siblings' draft rows, ``r <- max(r - R_j q_j, 0)`` in
  rank order, the reference's arithmetic. A chain (one child per place) thus reads each target row once
  and the terminal row twice, as the chain kernel does;
- synthetic rows: children accepted by the positional table, rows read only to emit.

The bonus (a leaf) is the ``SAMPLE`` race over ``p``; after rejected children, the ``RESIDUAL`` race over the
replayed residual (over ``p`` with the same stream when nothing is left).
"""

import triton
import triton.language as tl

from specbench.kernels.decide import (
    ACCEPT,
    DRAFT_LOGITS,
    DRAFT_NONE,
    DRAFT_PROBS,
    MODE_SYNTHETIC,
    RESIDUAL,
    SAMPLE,
    draft_chunk,
    draft_prob_of,
    request_setup,
    request_valid,
    sample_row,
    target_chunk,
    target_prob_of,
)
from specbench.kernels.rng import hash_word, neg_log_of_uniform, stream_key, uniform_at, uniform_of
from specbench.kernels.rows import argmax_slice, ratio_best, softmax_stats_slice


@triton.jit
def _lane(values, lanes, j):
    # lane j of a vector, as a scalar of the vector's type
    return tl.sum(tl.where(lanes == j, values, 0), axis=0)


@triton.jit
def _sibling_q(d_base, d_stride, offs, V, inv_temperature, lanes, j, sib_node, sib_token, sib_valid, sib_md,
               sib_sd, sib_div, DRAFT: tl.constexpr, WITHOUT_REPLACEMENT: tl.constexpr):
    # q_j over a chunk for the rejected sibling of rank j: its row (its draft law), and drawn without
    # replacement, its elder siblings' tokens set to 0 and the rest divided by its divisor (0 when none is left)
    node = _lane(sib_node, lanes, j)
    x = _lane(sib_token, lanes, j)
    q = draft_chunk(d_base + node.to(tl.int64) * d_stride, offs, V, inv_temperature, _lane(sib_md, lanes, j),
                    _lane(sib_sd, lanes, j), x, DRAFT)
    if WITHOUT_REPLACEMENT:
        for i in range(j):
            elder = _lane(sib_token, lanes, i)
            q = tl.where((_lane(sib_valid, lanes, i) != 0) & (offs == elder), 0.0, q)
        div = _lane(sib_div, lanes, j)
        q = tl.where(div > 0.0, q / tl.where(div > 0.0, div, 1.0), 0.0)
    return q


@triton.jit
def _residual_chunk(t_row, d_base, d_stride, offs, V, inv_temperature, m, s, rejected, lanes, sib_node, sib_token,
                    sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                    WITHOUT_REPLACEMENT: tl.constexpr):
    # the residual over a chunk after `rejected` siblings: r = p, then r <- max(r - R_j q_j, 0) for each valid
    # rejected sibling j in rank order (an absent one leaves r as it is)
    r = target_chunk(t_row, offs, V, inv_temperature, m, s, TARGET_PROBS)
    for j in range(rejected):
        if _lane(sib_valid, lanes, j) != 0:
            q = _sibling_q(d_base, d_stride, offs, V, inv_temperature, lanes, j, sib_node, sib_token, sib_valid,
                           sib_md, sib_sd, sib_div, DRAFT, WITHOUT_REPLACEMENT)
            r = tl.maximum(r - _lane(sib_mass, lanes, j) * q, 0.0)
    return r


@triton.jit
def _residual_mass(t_row, d_base, d_stride, V, inv_temperature, m, s, rejected, lanes, sib_node, sib_token,
                   sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                   WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr):
    # R = sum_y r(y) after `rejected` siblings
    total = tl.zeros([BLOCK], tl.float32)
    for chunk in range(0, V, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        total += _residual_chunk(t_row, d_base, d_stride, offs, V, inv_temperature, m, s, rejected, lanes, sib_node,
                                 sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT, TARGET_PROBS,
                                 WITHOUT_REPLACEMENT)
    return tl.sum(total, axis=0)


@triton.jit
def _residual_race(t_row, d_base, d_stride, V, inv_temperature, m, s, rejected, lanes, sib_node, sib_token,
                   sib_valid, sib_mass, sib_md, sib_sd, sib_div, key, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                   WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr):
    # argmax_y r(y) / E_y over r(y) > 0, compared as r * E' > r' * E (ties to the lowest id); -1 when r is 0
    lane_w = tl.zeros([BLOCK], tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    for chunk in range(0, V, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        w = _residual_chunk(t_row, d_base, d_stride, offs, V, inv_temperature, m, s, rejected, lanes, sib_node,
                            sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT, TARGET_PROBS,
                            WITHOUT_REPLACEMENT)
        e = neg_log_of_uniform(uniform_of(hash_word(key, offs)))
        better = w * lane_e > lane_w * e  # only w > 0 races; strict, so each lane keeps its earliest
        lane_idx = tl.where(better, offs, lane_idx)
        lane_w = tl.where(better, w, lane_w)
        lane_e = tl.where(better, e, lane_e)
    _z, _g, index = ratio_best(lane_w, lane_e, lane_idx)
    return index


@triton.jit
def _elder_mass(d_row, inv_temperature, md, sd, x, lanes, k, sib_token, sib_valid, DRAFT: tl.constexpr):
    # the mass a draft row (its node's token x) puts on the distinct valid tokens of the first k siblings,
    # each counted once; a one-hot row (no draft rows, or draft logits with no finite value) has its mass at x
    total = 0.0
    for i in range(k):
        y = _lane(sib_token, lanes, i)
        fresh = _lane(sib_valid, lanes, i) != 0
        for h in range(i):
            fresh = fresh & ~((_lane(sib_valid, lanes, h) != 0) & (_lane(sib_token, lanes, h) == y))
        if fresh:
            at_y = tl.where(y == x, 1.0, 0.0)
            if DRAFT != DRAFT_NONE:
                at_y = draft_prob_of(tl.load(d_row + y), inv_temperature, md, sd, DRAFT)
                if DRAFT == DRAFT_LOGITS:
                    at_y = tl.where(md == float("-inf"), tl.where(y == x, 1.0, 0.0), at_y)
            total += at_y
    return total


@triton.jit
def _verify_tree_kernel(
    out_ptr, out_stride,  # [B, N + 1] int64
    nodes_ptr, nodes_stride,  # [B, N] int32: the accepted path's nodes
    num_emitted_ptr,  # [B] int32
    num_accepted_ptr,  # [B] int32
    target_ptr, target_stride_b, target_stride_k,  # [B, N + 1, V] logits, or probabilities (TARGET_PROBS)
    draft_ptr, draft_stride_b, draft_stride_k,  # [B, N, V] draft logits or probs (unused if DRAFT == 0)
    draft_ids_ptr, draft_ids_stride,  # [B, N] int64
    parents_ptr, parents_stride,  # [B, N] int64
    num_draft_ptr,  # [B] int32
    temperature_ptr,  # [B] float32
    seed_ptr,  # [B] int64
    position_ptr,  # [B] int64
    rates_ptr, RATE_DEPTHS, RATE_WIDTH,  # [D, W] float32: the synthetic table
    V, N,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    WITHOUT_REPLACEMENT: tl.constexpr,
    BLOCK: tl.constexpr,
    NODE_BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, N + 1, MODE)
    lanes = tl.arange(0, NODE_BLOCK)
    in_tree = lanes < n
    parents = tl.load(parents_ptr + b * parents_stride + lanes, mask=in_tree, other=-2).to(tl.int32)
    # a node whose parent is outside [-1, j) (possible only unchecked) belongs to no place
    attached = in_tree & (parents >= -1) & (parents < lanes)
    tokens = tl.load(draft_ids_ptr + b * draft_ids_stride + lanes, mask=in_tree, other=-1)
    token_valid = (tokens >= 0) & (tokens < V)
    t_base = target_ptr + b * target_stride_b
    d_base = draft_ptr + b * draft_stride_b
    path = tl.full([NODE_BLOCK], -1, tl.int32)
    length = 0  # accepted nodes; the current place's children are tested at position + length
    place = -1  # the current place: -1 the root, else a node
    token = tl.sum(tokens * 0, axis=0) - 1  # int64 -1: what the request emits last
    done = 0
    while done == 0:
        t_row = t_base + (place + 1).to(tl.int64) * target_stride_k
        kids = attached & (parents == place)
        first = tl.min(tl.where(kids, lanes, NODE_BLOCK), axis=0)
        t = position + length
        moved_to = -1
        if MODE == MODE_SYNTHETIC:
            # the positional table decides; no row is read to test
            c = first
            k = 0
            while (c < NODE_BLOCK) & (moved_to < 0):
                u = uniform_at(stream_key(key_of_seed, t, ACCEPT), k)
                inside = (length < RATE_DEPTHS) & (k < RATE_WIDTH)
                rate = tl.load(rates_ptr + length * RATE_WIDTH + k, mask=inside, other=0.0)
                if (_lane(token_valid.to(tl.int32), lanes, c) != 0) & (u < rate):
                    moved_to = c
                else:
                    c = tl.min(tl.where(kids & (lanes > c), lanes, NODE_BLOCK), axis=0)
                    k += 1
            if moved_to < 0:
                if greedy:
                    _v, best = argmax_slice(t_row, 0, V, TARGET_PROBS, BLOCK)
                    token = best.to(tl.int64)
                else:
                    _z, _g, own = sample_row(t_row, 0, V, inv_temperature, stream_key(key_of_seed, t, SAMPLE),
                                             TARGET_PROBS, True, BLOCK // 2)
                    token = own.to(tl.int64)
        elif greedy:
            _v, best = argmax_slice(t_row, 0, V, TARGET_PROBS, BLOCK)
            match = tl.min(tl.where(kids & (tokens == best) & (best >= 0), lanes, NODE_BLOCK), axis=0)
            if match < NODE_BLOCK:
                moved_to = match
            else:
                token = best.to(tl.int64)  # -1 when the row is invalid: nothing emitted
        else:
            # the target row's statistics, fused with the first child's draft logits (no draft row is read
            # when the place has no child)
            d_first = d_base + tl.minimum(first, N - 1).to(tl.int64) * draft_stride_k
            m = 0.0
            s = 1.0
            md0 = float("-inf")
            sd0 = 0.0
            c = first
            if TARGET_PROBS:
                if DRAFT == DRAFT_LOGITS:  # noqa: SIM102 (a constexpr test, then a runtime one)
                    if first < NODE_BLOCK:
                        md0, sd0, _m2, _s2 = softmax_stats_slice(d_first, d_first, 0, V, inv_temperature, False, BLOCK)
            else:
                if DRAFT == DRAFT_LOGITS:
                    if first < NODE_BLOCK:
                        m, s, md0, sd0 = softmax_stats_slice(t_row, d_first, 0, V, inv_temperature, True, BLOCK)
                    else:
                        m, s, _m2, _s2 = softmax_stats_slice(t_row, t_row, 0, V, inv_temperature, False, BLOCK)
                else:
                    m, s, _m2, _s2 = softmax_stats_slice(t_row, t_row, 0, V, inv_temperature, False, BLOCK)
                c = tl.where(m != float("-inf"), first, NODE_BLOCK)  # an invalid row: no test, nothing emitted
            sib_node = tl.zeros([NODE_BLOCK], tl.int32)
            sib_token = tl.zeros([NODE_BLOCK], tl.int64)
            sib_valid = tl.zeros([NODE_BLOCK], tl.int32)
            sib_mass = tl.zeros([NODE_BLOCK], tl.float32)
            sib_md = tl.zeros([NODE_BLOCK], tl.float32)
            sib_sd = tl.zeros([NODE_BLOCK], tl.float32)
            sib_div = tl.zeros([NODE_BLOCK], tl.float32)
            mass = 1.0  # R
            k = 0
            while (c < NODE_BLOCK) & (moved_to < 0):
                x = _lane(tokens, lanes, c)
                valid = (x >= 0) & (x < V)
                x_safe = tl.where(valid, x, 0)
                d_row = d_base + c.to(tl.int64) * draft_stride_k
                md = md0
                sd = sd0
                if DRAFT == DRAFT_LOGITS:  # noqa: SIM102 (a constexpr test, then a runtime one)
                    if k > 0:
                        md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, 0, V, inv_temperature, False, BLOCK)
                if DRAFT == DRAFT_PROBS:
                    md = 0.0
                if DRAFT == DRAFT_NONE:
                    md = float("-inf")
                d_at_x = 0.0
                if DRAFT != DRAFT_NONE:
                    d_at_x = tl.load(d_row + x_safe, mask=valid, other=0.0)
                q_x = draft_prob_of(d_at_x, inv_temperature, md, sd, DRAFT)
                div = 1.0
                if WITHOUT_REPLACEMENT:
                    div = 1.0 - _elder_mass(d_row, inv_temperature, md, sd, x_safe, lanes, k, sib_token, sib_valid,
                                            DRAFT)
                    repeated = tl.sum(tl.where((lanes < k) & (sib_valid != 0) & (sib_token == x), 1, 0), axis=0) > 0
                    q_x = tl.where(repeated | (div <= 0.0), 0.0, q_x / tl.where(div > 0.0, div, 1.0))
                t_at_x = tl.load(t_row + x_safe, mask=valid, other=0.0)
                r_x = target_prob_of(t_at_x, inv_temperature, m, s, TARGET_PROBS)
                if k > 0:
                    offs_x = x_safe + tl.arange(0, 2)
                    r_pair = _residual_chunk(t_row, d_base, draft_stride_k, offs_x, V, inv_temperature, m, s, k,
                                             lanes, sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div,
                                             DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT)
                    r_x = tl.sum(tl.where(offs_x == x_safe, r_pair, 0.0), axis=0)
                u = uniform_at(stream_key(key_of_seed, t, ACCEPT), k)
                # accept iff (u_k q_k(x)) R < r(x)  (SpecInfer's multi-candidate rule)
                if valid & ((u * q_x) * mass < r_x):
                    moved_to = c
                else:
                    here = lanes == k
                    sib_node = tl.where(here, c, sib_node)
                    sib_token = tl.where(here, x, sib_token)
                    sib_valid = tl.where(here, valid.to(tl.int32), sib_valid)
                    sib_mass = tl.where(here, mass, sib_mass)
                    sib_md = tl.where(here, md, sib_md)
                    sib_sd = tl.where(here, sd, sib_sd)
                    sib_div = tl.where(here, div, sib_div)
                    k += 1
                    c = tl.min(tl.where(kids & (lanes > c), lanes, NODE_BLOCK), axis=0)
                    if valid & (c < NODE_BLOCK):  # the next sibling's test needs the new mass
                        mass = _residual_mass(t_row, d_base, draft_stride_k, V, inv_temperature, m, s, k, lanes,
                                              sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div,
                                              DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK)
            if moved_to < 0:
                if m == float("-inf"):
                    token = token * 0 - 1
                elif first == NODE_BLOCK:
                    # a leaf: the bonus, the race over p
                    _z, _g, bonus = sample_row(t_row, 0, V, inv_temperature, stream_key(key_of_seed, t, SAMPLE),
                                               TARGET_PROBS, True, BLOCK // 2)
                    token = bonus.to(tl.int64)
                else:
                    key = stream_key(key_of_seed, t, RESIDUAL)
                    index = _residual_race(t_row, d_base, draft_stride_k, V, inv_temperature, m, s, k, lanes,
                                           sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, key,
                                           DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK)
                    if index < 0:  # nothing left: the race over p with the same stream
                        _z, _g, index = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, False, BLOCK)
                    token = index.to(tl.int64)
        if moved_to >= 0:
            path = tl.where(lanes == length, moved_to, path)
            length += 1
            place = moved_to
        else:
            done = 1
    valid_request = request_valid(inv_temperature)  # an invalid request emits nothing
    path_tokens = tl.load(draft_ids_ptr + b * draft_ids_stride + tl.maximum(path, 0), mask=path >= 0, other=-1)
    emitted = tl.where(lanes == length, token, path_tokens)
    tl.store(out_ptr + b * out_stride + lanes, tl.where(valid_request, emitted, -1), mask=lanes < N + 1)
    if NODE_BLOCK <= N:  # the slot past the last lane (N + 1 slots, N <= NODE_BLOCK lanes)
        last = tl.where(length == NODE_BLOCK, token, -1)
        tl.store(out_ptr + b * out_stride + NODE_BLOCK, tl.where(valid_request, last, -1))
    tl.store(nodes_ptr + b * nodes_stride + lanes, tl.where(valid_request, path, -1), mask=lanes < N)
    num_emitted = length + (token >= 0).to(tl.int32)
    tl.store(num_emitted_ptr + b, tl.where(valid_request, num_emitted, 0))
    tl.store(num_accepted_ptr + b, tl.where(valid_request, length, 0))
