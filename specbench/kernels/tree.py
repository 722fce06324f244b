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
  rank order, the reference's arithmetic but for p and q over a chunk, ``exp(z - m)`` times ``1 / s``
  (``decide.target_chunk``, ``draft_chunk``) where the reference divides: float rounding apart. After a one-hot
  draft (one-hot drafts, an invalid draft-logit row) the next mass is ``R - r(x)`` from the test's own values, with
  no pass (the contract). A chain (one child per place) thus reads each target row once and the terminal row
  twice, as the chain kernel does, and so does a tree of one-hot candidates;
- synthetic rows: children accepted by the positional table, rows read only to emit.

The bonus (a leaf) is the ``SAMPLE`` race over ``p``; after rejected children, the ``RESIDUAL`` race over the
replayed residual (over ``p`` with the same stream when nothing is left). Where a place's second child is its last,
the pass that sums the mass left after the first also keeps the race's candidates (the comment above
``CANDIDATE_MARGIN``), so that when the second is rejected too the race needs no pass of its own unless its winner
among them cannot be told apart from the tokens they dropped. On the split path that pass's slices also leave the
values the second child's test and that race read (r1 at the child's token; r1 and the child's draft row at each
candidate), so that the program that sums the mass decides both from them without resuming the walk (drawn with
replacement and the second child's token valid; otherwise it resumes the walk).

The split path (for batches that do not fill the GPU; the comment above ``_tree_rows_kernel``) walks with the
same ``_walk`` from row statistics merged across programs, in two launches: the rows and the walk; then the
masses the walk stopped for and the final race, each split across programs.
"""

import triton
import triton.language as tl

from specbench.kernels.decide import (
    ACCEPT,
    DRAFT_LOGITS,
    DRAFT_NONE,
    DRAFT_PROBS,
    MODE_GREEDY,
    MODE_PROBABILISTIC,
    MODE_SYNTHETIC,
    RESIDUAL,
    SAMPLE,
    draft_chunk,
    draft_prob_of,
    merge_rows,
    request_setup,
    request_valid,
    sample_row,
    target_chunk,
    target_prob_of,
)
from specbench.kernels.rng import hash_word, neg_log_of_uniform, stream_key, uniform_at, uniform_of
from specbench.kernels.rows import (
    argmax_slice,
    lowest_best,
    race_lanes,
    ratio_best,
    reciprocal,
    softmax_stats_slice,
)
from specbench.kernels.split import (
    last_to_arrive,
    merge_race,
    publish,
    store_race,
    store_row_partial,
    take_ticket,
    wait_until,
)

# what is left to emit when a walk stops (_walk)
FINAL_DONE = tl.constexpr(0)  # the token is known (greedy rows, invalid rows)
FINAL_BONUS = tl.constexpr(1)  # the race over p (a leaf's bonus; the synthetic mode's own token)
FINAL_RESIDUAL = tl.constexpr(2)  # the race over the residual after rejected children
FINAL_MASS = tl.constexpr(3)  # (split path) the walk stopped for a mass not yet summed across programs


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
def _slice_mass(t_row, d_base, d_stride, start, stop, inv_temperature, m, s, rejected, lanes, sib_node, sib_token,
                sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr):
    # sum_y r(y) on [start, stop) after `rejected` siblings
    total = tl.zeros([BLOCK], tl.float32)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        total += _residual_chunk(t_row, d_base, d_stride, offs, stop, inv_temperature, m, s, rejected, lanes, sib_node,
                                 sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT, TARGET_PROBS,
                                 WITHOUT_REPLACEMENT)
    return tl.sum(total, axis=0)


@triton.jit
def _residual_mass(t_row, d_base, d_stride, V, inv_temperature, m, s, rejected, lanes, sib_node, sib_token,
                   sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                   WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr):
    # R = sum_y r(y) after `rejected` siblings: a pass over the rows in the walk's program
    return _slice_mass(t_row, d_base, d_stride, 0, V, inv_temperature, m, s, rejected, lanes, sib_node, sib_token,
                       sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK)


@triton.jit
def _residual_race(t_row, d_base, d_stride, start, stop, V, inv_temperature, m, s, rejected, lanes, sib_node,
                   sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, key, DRAFT: tl.constexpr,
                   TARGET_PROBS: tl.constexpr, WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr):
    # argmax_y r(y) / E_y over r(y) > 0 on [start, stop), compared as r * E' > r' * E (ties to the lowest id), as
    # a race pair (log(r / E), 0, index); index -1 when r is 0 there
    lane_w = tl.zeros([BLOCK], tl.float32)
    lane_e = tl.full([BLOCK], 1.0, tl.float32)
    lane_idx = tl.full([BLOCK], -1, tl.int32)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        w = _residual_chunk(t_row, d_base, d_stride, offs, stop, inv_temperature, m, s, rejected, lanes, sib_node,
                            sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT, TARGET_PROBS,
                            WITHOUT_REPLACEMENT)
        e = neg_log_of_uniform(uniform_of(hash_word(key, offs)))
        lane_w, lane_e, lane_idx = race_lanes(lane_w, lane_e, lane_idx, w, e, offs)
    return ratio_best(lane_w, lane_e, lane_idx)


# A residual race from candidates. Where a place's second child is its last, the race after both are rejected is
# over r2 = max(r1 - R q_1, 0) with r1 = max(p - q_0, 0) and R = sum r1, the mass the pass over r1 is summing (r2 = r1
# when the second child is absent). As r2 <= r1, no token y scores more than r1(y) / E_y in that race, so the pass over
# r1 also keeps, per lane, the token of largest r1 / E (the race's E_y; float ratios, r1 times rows.reciprocal(E),
# within an ulp) and the largest ratio among the tokens the lane drops. Once R is known and the second child rejected,
# the race runs over the kept tokens alone, their r2 replayed from the rows with the race's arithmetic (on the split
# path, where the masses' last program races, from the r1 and q_1 its slices kept at the candidates, _second_residual:
# _residual_chunk's last step); its winner is the race's where its log-ratio clears every other token's ratio bound
# by CANDIDATE_MARGIN (the ratios', logs' and products' rounding, with room), and otherwise the race
# takes its pass over the row as before. The split path's slices (a lane a token of each chunk) each publish their two
# best lanes and bound the rest; one program per request gives a lane CAND_LANE consecutive tokens of each chunk and
# carries the best lane of each of its CAND_GROUPS groups of lanes through the walk. Two a slice sufficed on simulated
# rows (random logits, V = 128256, 251 and 63 slices: none of 400 races fell back; one a slice: up to 1.0%;
# results/h200-tree-candidates/simulate_certification.py); one program keeps about one per 512 tokens, that
# simulation's "one a slice". The margin covers rounding only because r1 in the pass and r2 in the race come from
# the same arithmetic in the same kernel, bit for bit (the pass spells _residual_chunk's r1 with the first sibling's
# facts read once; p - q_0 can cancel: an ulp apart would not do).
CANDIDATE_MARGIN = tl.constexpr(1e-4)
CAND_LANE = tl.constexpr(8)  # (one program) tokens of a chunk per candidate lane (1024 lanes at 8192 tokens)


@triton.jit
def _log_of(ratio):
    # the log of a ratio, -inf where it is 0
    return tl.where(ratio > 0.0, tl.log(tl.where(ratio > 0.0, ratio, 1.0)), float("-inf"))


@triton.jit
def _mass_and_candidates(t_row, d_base, d_stride, start, stop, inv_temperature, m, s, lanes, sib_node, sib_token,
                         sib_valid, sib_mass, sib_md, sib_sd, sib_div, key, DRAFT: tl.constexpr,
                         TARGET_PROBS: tl.constexpr, WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr,
                         GROUP: tl.constexpr):
    # the mass of r1 (the residual after the first sibling) on [start, stop), in _residual_mass's order, with each
    # lane's candidate for the race after the second: the token of largest r1 / E (the earliest on ties; -1 for
    # none) and that ratio, and the largest ratio among the tokens the lanes dropped. A lane takes GROUP consecutive
    # tokens of a chunk (BLOCK // GROUP lanes), so that one program per request carries few lanes through its pass
    total = tl.zeros([BLOCK], tl.float32)
    lane_ratio = tl.zeros([BLOCK // GROUP], tl.float32)
    lane_idx = tl.full([BLOCK // GROUP], -1, tl.int32)
    dropped = tl.zeros([BLOCK // GROUP], tl.float32)
    # the first sibling's facts, read out of the sibling lanes once, not in every chunk (each a reduction across
    # the program's threads): r1 below is _residual_chunk's after one sibling, the same arithmetic on the same
    # values, so the race replays it bit for bit
    valid = _lane(sib_valid, lanes, 0) != 0
    d_row = d_base + _lane(sib_node, lanes, 0).to(tl.int64) * d_stride
    x = _lane(sib_token, lanes, 0)
    mass = _lane(sib_mass, lanes, 0)
    md = _lane(sib_md, lanes, 0)
    sd = _lane(sib_sd, lanes, 0)
    div = _lane(sib_div, lanes, 0)
    for chunk in range(start, stop, BLOCK):
        offs = chunk + tl.arange(0, BLOCK)
        a = target_chunk(t_row, offs, stop, inv_temperature, m, s, TARGET_PROBS)
        if valid:
            q = draft_chunk(d_row, offs, stop, inv_temperature, md, sd, x, DRAFT)
            if WITHOUT_REPLACEMENT:
                q = tl.where(div > 0.0, q / tl.where(div > 0.0, div, 1.0), 0.0)
            a = tl.maximum(a - mass * q, 0.0)
        total += a
        ratio = a * reciprocal(neg_log_of_uniform(uniform_of(hash_word(key, offs))))
        ids = offs
        if GROUP > 1:
            ratios = tl.reshape(ratio, [BLOCK // GROUP, GROUP])
            group_ids = tl.reshape(offs, [BLOCK // GROUP, GROUP])
            ratio = tl.max(ratios, axis=1)
            ids = tl.min(tl.where(ratios == ratio[:, None], group_ids, 2147483647), axis=1)
            dropped = tl.maximum(dropped, tl.max(tl.where(group_ids == ids[:, None], 0.0, ratios), axis=1))
        better = ratio > lane_ratio
        dropped = tl.maximum(dropped, tl.where(better, lane_ratio, ratio))
        lane_ratio = tl.where(better, ratio, lane_ratio)
        lane_idx = tl.where(better, ids, lane_idx)
    return tl.sum(total, axis=0), lane_idx, lane_ratio, tl.max(dropped, axis=0)


@triton.jit
def _two_candidates(lane_idx, lane_ratio, dropped):
    # a slice's two lanes of largest ratio (their ids, -1 for none) and the log of every other token's ratio, the
    # largest (the other lanes' and what the lanes dropped)
    _top, first = lowest_best(lane_ratio, lane_idx)
    ratio = tl.where(lane_idx == first, 0.0, lane_ratio)
    _top, second = lowest_best(ratio, tl.where(ratio > 0.0, lane_idx, -1))
    ratio = tl.where(lane_idx == second, 0.0, ratio)
    return first, second, _log_of(tl.maximum(tl.max(ratio, axis=0), dropped))


@triton.jit
def _grouped_candidates(lane_idx, lane_ratio, dropped, BLOCK: tl.constexpr, GROUPS: tl.constexpr):
    # (one program) the lane of largest ratio in each of GROUPS groups of lanes (their ids, -1 for none), and the log
    # of every other token's ratio, the largest: GROUPS candidates carried through the walk instead of BLOCK
    ratios = tl.reshape(lane_ratio, [GROUPS, BLOCK // GROUPS])
    ids = tl.reshape(lane_idx, [GROUPS, BLOCK // GROUPS])
    top = tl.max(ratios, axis=1)
    first = tl.min(tl.where((ratios == top[:, None]) & (ids >= 0), ids, 2147483647), axis=1)
    first = tl.where(first == 2147483647, -1, first)
    rest = tl.max(tl.max(tl.where(ids == first[:, None], 0.0, ratios), axis=1), axis=0)
    return first, _log_of(tl.maximum(rest, dropped))


@triton.jit
def _candidate_race(ids, w, dropped, key):
    # the race over the residual after two rejected siblings among candidate ids (-1: none), w the residual at
    # them; returns the winner's id, or -1 where it does not clear `dropped` (every other token's log-ratio bound)
    # by CANDIDATE_MARGIN or nothing has mass
    safe = tl.where(ids >= 0, ids, 0)
    w = tl.where(ids >= 0, w, 0.0)
    e = neg_log_of_uniform(uniform_of(hash_word(key, safe)))
    z, _g, index = ratio_best(w, e, tl.where(w > 0.0, ids, -1))
    return tl.where((index >= 0) & (z > dropped + CANDIDATE_MARGIN), index, -1)


@triton.jit
def _second_residual(r1, q, ids, lanes, sib_token, sib_valid, sib_mass, sib_div, WITHOUT_REPLACEMENT: tl.constexpr):
    # r2 = max(r1 - R q_1, 0) at candidate ids from r1 and the second sibling's draft row q there (read as
    # draft_chunk reads it), as _residual_chunk's last step takes them after two siblings (_sibling_q's treatment
    # drawn without replacement; r1 alone where the second is not valid)
    if WITHOUT_REPLACEMENT:
        elder = _lane(sib_token, lanes, 0)
        q = tl.where((_lane(sib_valid, lanes, 0) != 0) & (ids == elder), 0.0, q)
        div = _lane(sib_div, lanes, 1)
        q = tl.where(div > 0.0, q / tl.where(div > 0.0, div, 1.0), 0.0)
    r2 = tl.maximum(r1 - _lane(sib_mass, lanes, 1) * q, 0.0)
    return tl.where(_lane(sib_valid, lanes, 1) != 0, r2, r1)


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
def _draft_stats_of(node, merged_md, merged_sd, row_lanes, DRAFT: tl.constexpr):
    # (md, sd) of a node's draft row as the split walk takes them: the merged statistics of draft logits, 0 for
    # draft probabilities, -inf for one-hot drafts
    md = float("-inf")
    sd = 0.0
    if DRAFT == DRAFT_LOGITS:
        md = _lane(merged_md, row_lanes, node + 1)
        sd = _lane(merged_sd, row_lanes, node + 1)
    if DRAFT == DRAFT_PROBS:
        md = 0.0
    return md, sd


@triton.jit
def _first_sibling(first, tokens, lanes, merged_md, merged_sd, row_lanes, DRAFT: tl.constexpr):
    # The sibling lanes (node, token, valid, mass, md, sd, div) after a place's first child `first` is rejected,
    # as the split walk's test leaves them: lane 0 that child (a valid token, tested against mass 1, its draft
    # statistics from merged lane first + 1, divisor 1: no elder sibling), the other lanes 0.
    here = lanes == 0
    md, sd = _draft_stats_of(first, merged_md, merged_sd, row_lanes, DRAFT)
    return (tl.where(here, first, 0), tl.where(here, _lane(tokens, lanes, first), 0), tl.where(here, 1, 0),
            tl.where(here, 1.0, 0.0), tl.where(here, md, 0.0), tl.where(here, sd, 0.0), tl.where(here, 1.0, 0.0))


@triton.jit
def _values_at_nodes(greedy, lanes, parents, attached, tokens, token_valid, t_base, t_stride, d_base, d_stride,
                     MODE: tl.constexpr, DRAFT: tl.constexpr, NODE_BLOCK: tl.constexpr):
    # every node's values at its token (its parent's target row, its own draft row), read at once before a walk and
    # before the walker's other loads, so that a child's test needs no load of its own to read p(x) and q(x) (the
    # probabilistic mode's sampled requests; 0 for a greedy request's nodes, an invalid token's, an unattached
    # node's). Nodes off the path are read too: each is in range (a parent before it, a token below V) in rows the
    # caller gives for the tree's nodes. A later sibling's test still replays the residual at its token from the rows
    # (_residual_chunk; on the split path the second child's r1 may come from the masses' slices, which replayed it
    # so), and drawn without replacement reads its elders' draft values (_elder_mass).
    t_at_nodes = tl.zeros([NODE_BLOCK], tl.float32)
    d_at_nodes = tl.zeros([NODE_BLOCK], tl.float32)
    if MODE == MODE_PROBABILISTIC:
        # the scalar broadcast to the lanes before the and (the interpreter gives a vector & scalar bool an int mask)
        readable = attached & token_valid & (lanes * 0 + greedy.to(tl.int32) == 0)
        at_token = tl.where(readable, tokens, 0)
        t_at_nodes = tl.load(t_base + (parents + 1).to(tl.int64) * t_stride + at_token, mask=readable,
                             other=0.0).to(tl.float32)
        if DRAFT != DRAFT_NONE:
            d_at_nodes = tl.load(d_base + lanes.to(tl.int64) * d_stride + at_token, mask=readable,
                                 other=0.0).to(tl.float32)
    return t_at_nodes, d_at_nodes


@triton.jit
def _walk(n, greedy, inv_temperature, position, key_of_seed, lanes, parents, attached, tokens, token_valid,
          t_at_nodes, d_at_nodes, t_base, t_stride, d_base, d_stride, rates_ptr, RATE_DEPTHS, RATE_WIDTH, V, N,
          merged_best, merged_m, merged_s, merged_md, merged_sd, merged_r1, summed_r1, row_lanes, resume_place,
          start_path, start_length,
          MODE: tl.constexpr, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr, WITHOUT_REPLACEMENT: tl.constexpr,
          SPLIT: tl.constexpr, STOP_FOR_MASS: tl.constexpr, BLOCK: tl.constexpr, NODE_BLOCK: tl.constexpr,
          CAND_BLOCK: tl.constexpr):
    # A request's walk down its tree (module docstring), up to the final token. The row statistics come from
    # passes over the rows here, or (SPLIT) from the merged slices of every row: lane r of merged_* holds
    # target row r's argmax or (m, s), node r - 1's draft (md, sd), and, where lane r of summed_r1 is not 0, the
    # mass R left at place r - 1 after its first child is rejected (summed across programs by the split path's
    # masses part). After a rejected one-hot draft the next mass is R - r(x), never a sum. Where a later
    # sibling's test needs a sum not summed, the walk takes a pass over the rows in this program, or
    # (STOP_FOR_MASS, after the first sibling only) stops there: FINAL_MASS, the place in `place`. Returns the
    # path, its length, the stop place, what is left to emit (FINAL_DONE: `token`; FINAL_BONUS: the race over p;
    # FINAL_RESIDUAL: the race over the residual after the `rejected` children in the sibling lanes), the stop
    # row's (m, s). A walk that stopped for a mass resumes (SPLIT, resume_place >= -1) where it stopped: at that
    # place, its first child rejected, the path and its length given, the next child tested against the mass.
    path = start_path
    length = start_length  # accepted nodes; the current place's children are tested at position + length
    place = tl.maximum(resume_place, -1)  # the current place: -1 the root, else a node
    token = tl.sum(tokens * 0, axis=0) - 1  # int64 -1: what the request emits last, when known here
    final = FINAL_DONE
    m = 0.0
    s = 1.0
    rejected = 0
    sib_node = tl.zeros([NODE_BLOCK], tl.int32)
    sib_token = tl.zeros([NODE_BLOCK], tl.int64)
    sib_valid = tl.zeros([NODE_BLOCK], tl.int32)
    sib_mass = tl.zeros([NODE_BLOCK], tl.float32)
    sib_md = tl.zeros([NODE_BLOCK], tl.float32)
    sib_sd = tl.zeros([NODE_BLOCK], tl.float32)
    sib_div = tl.zeros([NODE_BLOCK], tl.float32)
    # (one program) the candidates of a residual race after two children (CANDIDATE_MARGIN), kept at cand_place
    cand_ids = tl.full([CAND_BLOCK], -1, tl.int32)
    cand_dropped = float("-inf")
    cand_place = -2
    done = 0
    while done == 0:
        t_row = t_base + (place + 1).to(tl.int64) * t_stride
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
                    final = FINAL_BONUS  # the target's own token, the race over p
        elif greedy:
            if SPLIT:
                best = _lane(merged_best, row_lanes, place + 1)
            else:
                _v, best = argmax_slice(t_row, 0, V, TARGET_PROBS, BLOCK)
            match = tl.min(tl.where(kids & (tokens == best) & (best >= 0), lanes, NODE_BLOCK), axis=0)
            if match < NODE_BLOCK:
                moved_to = match
            else:
                token = best.to(tl.int64)  # -1 when the row is invalid: nothing emitted
        else:
            # the target row's statistics, fused with the first child's draft logits (no draft row is read
            # when the place has no child)
            d_first = d_base + tl.minimum(first, N - 1).to(tl.int64) * d_stride
            m = 0.0
            s = 1.0
            md0 = float("-inf")
            sd0 = 0.0
            c = first
            if SPLIT:
                if not TARGET_PROBS:
                    m = _lane(merged_m, row_lanes, place + 1)
                    s = _lane(merged_s, row_lanes, place + 1)
            elif TARGET_PROBS:
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
            if not TARGET_PROBS:
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
            stopped = 0
            if SPLIT:  # noqa: SIM102 (a constexpr test, then a runtime one)
                if place == resume_place:  # a walk visits a place once: only where it resumes
                    # the first child, rejected before the walk stopped, then the next child
                    sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div = _first_sibling(
                        first, tokens, lanes, merged_md, merged_sd, row_lanes, DRAFT)
                    k = 1
                    mass = _lane(merged_r1, row_lanes, place + 1)
                    c = tl.min(tl.where(kids & (lanes > first), lanes, NODE_BLOCK), axis=0)
            while (c < NODE_BLOCK) & (moved_to < 0):
                x = _lane(tokens, lanes, c)
                valid = (x >= 0) & (x < V)
                x_safe = tl.where(valid, x, 0)
                d_row = d_base + c.to(tl.int64) * d_stride
                md = md0
                sd = sd0
                if DRAFT == DRAFT_LOGITS:
                    if SPLIT:
                        md = _lane(merged_md, row_lanes, c + 1)
                        sd = _lane(merged_sd, row_lanes, c + 1)
                    elif k > 0:
                        md, sd, _m2, _s2 = softmax_stats_slice(d_row, d_row, 0, V, inv_temperature, False, BLOCK)
                if DRAFT == DRAFT_PROBS:
                    md = 0.0
                if DRAFT == DRAFT_NONE:
                    md = float("-inf")
                q_x = draft_prob_of(_lane(d_at_nodes, lanes, c), inv_temperature, md, sd, DRAFT)
                div = 1.0
                if WITHOUT_REPLACEMENT:
                    div = 1.0 - _elder_mass(d_row, inv_temperature, md, sd, x_safe, lanes, k, sib_token, sib_valid,
                                            DRAFT)
                    repeated = tl.sum(tl.where((lanes < k) & (sib_valid != 0) & (sib_token == x), 1, 0), axis=0) > 0
                    q_x = tl.where(repeated | (div <= 0.0), 0.0, q_x / tl.where(div > 0.0, div, 1.0))
                r_x = target_prob_of(_lane(t_at_nodes, lanes, c), inv_temperature, m, s, TARGET_PROBS)
                if k > 0:
                    offs_x = x_safe + tl.arange(0, 2)
                    r_pair = _residual_chunk(t_row, d_base, d_stride, offs_x, V, inv_temperature, m, s, k,
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
                    if valid & (c < NODE_BLOCK) & (md == float("-inf")):
                        # the next sibling's test needs the new mass; after a one-hot draft (md = -inf) it is
                        # R - r(x), no pass (the contract; r(x) <- 0 in the replays, which subtract R)
                        mass = mass - r_x
                    elif valid & (c < NODE_BLOCK):  # noqa: SIM102 (a runtime test, then a constexpr one)
                        if DRAFT != DRAFT_NONE:  # after a sampled draft: its sum
                            summed = k < 0  # never, in one program
                            if SPLIT:  # after the first child, where it was summed across programs
                                summed = (k == 1) & (_lane(summed_r1, row_lanes, place + 1) != 0)
                            if summed:
                                mass = _lane(merged_r1, row_lanes, place + 1)
                            elif STOP_FOR_MASS & (k == 1):
                                stopped = 1
                                c = NODE_BLOCK
                            elif SPLIT:
                                mass = _residual_mass(t_row, d_base, d_stride, V, inv_temperature, m, s, k, lanes,
                                                      sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div,
                                                      DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK)
                            elif (k == 1) & (tl.min(tl.where(kids & (lanes > c), lanes, NODE_BLOCK), axis=0)
                                             == NODE_BLOCK):
                                # the second child is the last: the pass keeps the candidates of the race after both
                                mass, lane_idx, lane_ratio, dropped = _mass_and_candidates(
                                    t_row, d_base, d_stride, 0, V, inv_temperature, m, s, lanes, sib_node, sib_token,
                                    sib_valid, sib_mass, sib_md, sib_sd, sib_div, stream_key(key_of_seed, t, RESIDUAL),
                                    DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK, CAND_LANE)
                                cand_ids, cand_dropped = _grouped_candidates(lane_idx, lane_ratio, dropped,
                                                                             BLOCK // CAND_LANE, CAND_BLOCK)
                                cand_place = place
                            else:
                                mass = _residual_mass(t_row, d_base, d_stride, V, inv_temperature, m, s, k, lanes,
                                                      sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div,
                                                      DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK)
            rejected = k
            if moved_to < 0:
                if stopped != 0:
                    final = FINAL_MASS
                elif first == NODE_BLOCK:
                    final = FINAL_BONUS  # a leaf: the bonus, the race over p (-1 where the row is invalid)
                elif m == float("-inf"):
                    token = token * 0 - 1
                else:
                    final = FINAL_RESIDUAL
                    if not SPLIT:  # noqa: SIM102 (a constexpr test, then a runtime one)
                        if (cand_place == place) & (k == 2):  # the race from the candidates kept at this place
                            safe = tl.where(cand_ids >= 0, cand_ids, 0)
                            w = _residual_chunk(t_row, d_base, d_stride, safe, V, inv_temperature, m, s, 2, lanes,
                                                sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div,
                                                DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT)
                            won = _candidate_race(cand_ids, w, cand_dropped, stream_key(key_of_seed, t, RESIDUAL))
                            if won >= 0:
                                token = won.to(tl.int64)
                                final = FINAL_DONE
        if moved_to >= 0:
            path = tl.where(lanes == length, moved_to, path)
            length += 1
            place = moved_to
        else:
            done = 1
    return (path, length, place, final, token, m, s, rejected, sib_node, sib_token, sib_valid, sib_mass, sib_md,
            sib_sd, sib_div)


@triton.jit
def _tree_setup(b, parents_ptr, parents_stride, draft_ids_ptr, draft_ids_stride, n, V, NODE_BLOCK: tl.constexpr):
    # a request's nodes in lanes: parents, whether each is attached (a parent outside [-1, j), possible only
    # unchecked, belongs to no place), tokens and whether each is a valid id
    lanes = tl.arange(0, NODE_BLOCK)
    in_tree = lanes < n
    parents = tl.load(parents_ptr + b * parents_stride + lanes, mask=in_tree, other=-2).to(tl.int32)
    attached = in_tree & (parents >= -1) & (parents < lanes)
    tokens = tl.load(draft_ids_ptr + b * draft_ids_stride + lanes, mask=in_tree, other=-1)
    return lanes, parents, attached, tokens, (tokens >= 0) & (tokens < V)


@triton.jit
def _store_request(b, out_ptr, out_stride, nodes_ptr, nodes_stride, num_emitted_ptr, num_accepted_ptr, tokens,
                   lanes, path, length, token, valid_request, N,
                   NODE_BLOCK: tl.constexpr):
    # the path's tokens then `token` (-1 padded), the path's nodes, the counts; nothing for an invalid request (the
    # path's tokens taken from the nodes' lanes, read before the walk)
    path_tokens = tl.where(path >= 0, tl.gather(tokens, tl.maximum(path, 0), 0), -1)
    emitted = tl.where(lanes == length, token, path_tokens)
    tl.store(out_ptr + b * out_stride + lanes, tl.where(valid_request, emitted, -1), mask=lanes < N + 1)
    if NODE_BLOCK <= N:  # the slot past the last lane (N + 1 slots, N <= NODE_BLOCK lanes)
        last = tl.where(length == NODE_BLOCK, token, -1)
        tl.store(out_ptr + b * out_stride + NODE_BLOCK, tl.where(valid_request, last, -1))
    tl.store(nodes_ptr + b * nodes_stride + lanes, tl.where(valid_request, path, -1), mask=lanes < N)
    tl.store(num_emitted_ptr + b, tl.where(valid_request, length + (token >= 0).to(tl.int32), 0))
    tl.store(num_accepted_ptr + b, tl.where(valid_request, length, 0))


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
    CAND_GROUPS: tl.constexpr,  # candidates carried for the race after two children: min(BLOCK // 8, 256)
):
    b = tl.program_id(0).to(tl.int64)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, N + 1, MODE)
    lanes, parents, attached, tokens, token_valid = _tree_setup(b, parents_ptr, parents_stride, draft_ids_ptr,
                                                                draft_ids_stride, n, V, NODE_BLOCK)
    t_base = target_ptr + b * target_stride_b
    d_base = draft_ptr + b * draft_stride_b
    unused = tl.zeros([2], tl.float32)
    t_at_nodes, d_at_nodes = _values_at_nodes(greedy, lanes, parents, attached, tokens, token_valid, t_base,
                                              target_stride_k, d_base, draft_stride_k, MODE, DRAFT, NODE_BLOCK)
    (path, length, place, final, token, m, s, rejected, sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd,
     sib_div) = _walk(n, greedy, inv_temperature, position, key_of_seed, lanes, parents, attached, tokens,
                      token_valid, t_at_nodes, d_at_nodes, t_base, target_stride_k, d_base, draft_stride_k, rates_ptr,
                      RATE_DEPTHS, RATE_WIDTH, V, N, unused.to(tl.int32), unused, unused, unused, unused, unused,
                      unused.to(tl.int32), tl.arange(0, 2), -2, tl.full([NODE_BLOCK], -1, tl.int32), 0, MODE, DRAFT,
                      TARGET_PROBS, WITHOUT_REPLACEMENT, False, False, BLOCK, NODE_BLOCK, CAND_GROUPS)
    t_row = t_base + (place + 1).to(tl.int64) * target_stride_k
    t = position + length
    if final == FINAL_BONUS:
        _z, _g, bonus = sample_row(t_row, 0, V, inv_temperature, stream_key(key_of_seed, t, SAMPLE), TARGET_PROBS,
                                   True, BLOCK // 2)
        token = bonus.to(tl.int64)
    elif final == FINAL_RESIDUAL:
        key = stream_key(key_of_seed, t, RESIDUAL)
        _z, _g, index = _residual_race(t_row, d_base, draft_stride_k, 0, V, V, inv_temperature, m, s, rejected,
                                       lanes, sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, key,
                                       DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK)
        if index < 0:  # nothing left: the race over p with the same stream
            _z, _g, index = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, False, BLOCK)
        token = index.to(tl.int64)
    _store_request(b, out_ptr, out_stride, nodes_ptr, nodes_stride, num_emitted_ptr, num_accepted_ptr, tokens, lanes,
                   path, length, token, request_valid(inv_temperature), N, NODE_BLOCK)


# The split path: two launches. _tree_rows_kernel (grid B x (N + 1) x S): slot r's slice of target row r and of
# node r - 1's draft row; the request's last program merges the rows and walks, in the probabilistic mode only
# until a sibling's test needs a mass not yet summed (after one rejected sibling; later ones still take a pass
# in the walk's program), and records the request's state: WALKED, or MASSES (the walk stopped for them).
# _tree_finish_kernel (probabilistic mode; 2 B x S2 programs, S2 for each request in each half of the grid): a
# WALKED request's programs in the first half race its slices (the last writes the token), those in the second
# leave at once. A MASSES request's 2 S2 programs take their roles by the ticket each draws when it starts
# (split.take_ticket, the request's own count, not the program id): the first S2 tickets sum the masses' slices,
# keeping the values the stopped place's next steps read (_masses_part); the last sums them and sets RACED where it
# wrote the request's tokens (from those values alone where the second child is rejected and the race's winner
# among the candidates stands, else after resuming the walk where it stopped), else RACING; the other S2 leave once
# RACED and race once RACING. A program waits only for programs of its request with lower tickets, which have all
# started: the launch finishes however the GPU schedules it (and in id order under the interpreter, where nothing
# waits), and a WALKED request draws no ticket. Counters (int32, zero on entry, left at zero on exit): [0, B) each
# request's arrivals (the rows kernel's, then the masses'), [B, 2 B) each request's race arrivals, [2 B, 3 B) each
# MASSES request's tickets. The states live in the scratch record, written by the rows kernel for every request
# before the finish kernel reads them, and a WALKED one is never changed there.
MASSES = tl.constexpr(1)
WALKED = tl.constexpr(2)
RACING = tl.constexpr(3)
RACED = tl.constexpr(4)  # the masses' last program ran the race from candidates: nothing left to race

# The scratch, per request (float32 and int32 buffers; R = N + 1 row slots, S the rows kernel's slices, S2 the
# finish kernel's): row partials [R, S, 4] / [R, S], then the mass partials [ROW_BLOCK, S2], then race partials
# [S2, 2] / [S2, 2] (first a MASSES request's candidates: per slice the log-ratio bound of the other tokens
# in float 0, the two candidates' ids in ints 0 and 1), then the record: (m, s) and the sibling lanes (mass, md,
# sd, div) x NODE_BLOCK, then the merged rows (m, s, md, sd) x ROW_BLOCK / (final, place, rejected, length,
# state), the sibling lanes (node, token, valid) x NODE_BLOCK, then the merged rows' argmax x ROW_BLOCK, the
# places to sum x ROW_BLOCK and the walk's path x NODE_BLOCK; last, in floats only, the candidates' values [S2, 4]
# (per slice r1 at its two candidates, then the second child's draft row there) and r1 at the second child's token.
_ROW_FIELDS = tl.constexpr(4)
_HEAD = tl.constexpr(5)


@triton.jit
def _record_bases(scratch_f_ptr, scratch_i_ptr, b, batch, N, ROW_SPLITS, RACE_SPLITS, NODE_BLOCK: tl.constexpr,
                  ROW_BLOCK: tl.constexpr):
    # where request b's mass partials, race partials, walk record and merged rows start in the scratch
    rows_f = batch * (N + 1) * ROW_SPLITS * _ROW_FIELDS
    rows_i = batch * (N + 1) * ROW_SPLITS
    masses = scratch_f_ptr + rows_f + b * ROW_BLOCK * RACE_SPLITS
    after_f = rows_f + batch * ROW_BLOCK * RACE_SPLITS
    race_f = scratch_f_ptr + after_f + b * RACE_SPLITS * 2
    race_i = scratch_i_ptr + rows_i + b * RACE_SPLITS * 2
    record_f = scratch_f_ptr + after_f + batch * RACE_SPLITS * 2 + b * (2 + 4 * NODE_BLOCK + 4 * ROW_BLOCK)
    record_i = scratch_i_ptr + rows_i + batch * RACE_SPLITS * 2 + b * (_HEAD + 4 * NODE_BLOCK + 2 * ROW_BLOCK)
    return masses, race_f, race_i, record_f, record_i


@triton.jit
def _walk_and_record(b, batch, n, greedy, inv_temperature, position, key_of_seed, lanes, parents, attached, tokens,
                     token_valid, t_at_nodes, d_at_nodes, t_base, t_stride, d_base, d_stride, scratch_f_ptr,
                     scratch_i_ptr, V, N, ROW_SPLITS, RACE_SPLITS, best, merged_m, merged_s, merged_md, merged_sd,
                     merged_r1, summed_r1, resume_place, start_path, start_length,
                     out_ptr, out_stride, nodes_ptr, nodes_stride, num_emitted_ptr, num_accepted_ptr,
                     MODE: tl.constexpr, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                     WITHOUT_REPLACEMENT: tl.constexpr, STOP_FOR_MASS: tl.constexpr, BLOCK: tl.constexpr,
                     NODE_BLOCK: tl.constexpr, ROW_BLOCK: tl.constexpr):
    # the split path's walk from the merged rows (from the root, or resumed where it stopped for a mass): the path
    # and the counts written (unless it stopped for a mass), the race's record left (with the path, to resume);
    # returns what is left (FINAL_*), the stop place, the rejected children there, the path's length, the stop
    # row's (m, s) and the sibling lanes
    (path, length, place, final, token, m, s, rejected, sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd,
     sib_div) = _walk(n, greedy, inv_temperature, position, key_of_seed, lanes, parents, attached, tokens,
                      token_valid, t_at_nodes, d_at_nodes, t_base, t_stride, d_base, d_stride,
                      scratch_f_ptr, 0, 0, V, N,  # no rates table: the synthetic mode never takes this path
                      best, merged_m, merged_s, merged_md, merged_sd, merged_r1, summed_r1, tl.arange(0, ROW_BLOCK),
                      resume_place, start_path, start_length, MODE, DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, True,
                      STOP_FOR_MASS, BLOCK, NODE_BLOCK, 2)
    valid_request = request_valid(inv_temperature)
    if final != FINAL_MASS:
        _store_request(b, out_ptr, out_stride, nodes_ptr, nodes_stride, num_emitted_ptr, num_accepted_ptr, tokens,
                       lanes, path, length, token, valid_request, N, NODE_BLOCK)
    # the record the masses and race parts read (for every request: DONE where nothing is left to race)
    _masses, _race_f, _race_i, record_f, record_i = _record_bases(scratch_f_ptr, scratch_i_ptr, b, batch, N,
                                                                  ROW_SPLITS, RACE_SPLITS, NODE_BLOCK, ROW_BLOCK)
    final = tl.where(valid_request | (final == FINAL_MASS), final, FINAL_DONE)
    tl.store(record_i + 0, final)
    tl.store(record_i + 1, place)
    tl.store(record_i + 2, rejected)
    tl.store(record_i + 3, length)
    tl.store(record_f + 0, m)
    tl.store(record_f + 1, s)
    tl.store(record_f + 2 + lanes, sib_mass)
    tl.store(record_f + 2 + NODE_BLOCK + lanes, sib_md)
    tl.store(record_f + 2 + 2 * NODE_BLOCK + lanes, sib_sd)
    tl.store(record_f + 2 + 3 * NODE_BLOCK + lanes, sib_div)
    tl.store(record_i + _HEAD + lanes, sib_node)
    tl.store(record_i + _HEAD + NODE_BLOCK + lanes, sib_token.to(tl.int32))
    tl.store(record_i + _HEAD + 2 * NODE_BLOCK + lanes, sib_valid)
    tl.store(record_i + _HEAD + 3 * NODE_BLOCK + 2 * ROW_BLOCK + lanes, path)
    return final, place, rejected, length, m, s, sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div


@triton.jit
def _places_to_sum(place, lanes, parents, attached, token_valid, merged_m, row_lanes, TARGET_PROBS: tl.constexpr,
                   NODE_BLOCK: tl.constexpr):
    # (a ROW_BLOCK vector, 1 at row r for place r - 1) the places whose first-rejection mass the masses part
    # sums after the walk stopped at `place`: that place, and each later child of it whose own walk could need
    # one once accepted (a valid token, two or more children, a valid first one, a valid row), so that a walk
    # going on from there rarely needs a pass in one program. (A later child whose first child's draft-logit row
    # is invalid, one-hot, is summed too, and the walk then takes R - r(x) instead: work lost, not a result.)
    wanted = tl.where(row_lanes == place + 1, 1, 0)
    kids = attached & (parents == place)
    first = tl.min(tl.where(kids, lanes, NODE_BLOCK), axis=0)
    c = tl.min(tl.where(kids & (lanes > first), lanes, NODE_BLOCK), axis=0)
    while c < NODE_BLOCK:
        grandkids = attached & (parents == c)
        c_first = tl.min(tl.where(grandkids, lanes, NODE_BLOCK), axis=0)
        ok = (_lane(token_valid.to(tl.int32), lanes, c) != 0) & (tl.sum(grandkids.to(tl.int32), axis=0) >= 2)
        ok = ok & (_lane(token_valid.to(tl.int32), lanes, c_first) != 0)
        if not TARGET_PROBS:
            ok = ok & (_lane(merged_m, row_lanes, c + 1) != float("-inf"))
        wanted = tl.where((row_lanes == c + 1) & ok, 1, wanted)
        c = tl.min(tl.where(kids & (lanes > c), lanes, NODE_BLOCK), axis=0)
    return wanted


@triton.jit
def _tree_rows_kernel(
    scratch_f_ptr, scratch_i_ptr,  # float32 and int32 scratch (layout above)
    counters_ptr,  # [3 B] int32, zero on entry; left at zero on exit (layout above)
    out_ptr, out_stride, nodes_ptr, nodes_stride, num_emitted_ptr, num_accepted_ptr,
    target_ptr, target_stride_b, target_stride_k,
    draft_ptr, draft_stride_b, draft_stride_k,
    draft_ids_ptr, draft_ids_stride,
    parents_ptr, parents_stride,
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,
    V, N, ROW_SPLITS, RACE_SPLITS, CHUNK,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    WITHOUT_REPLACEMENT: tl.constexpr,
    BLOCK: tl.constexpr,
    NODE_BLOCK: tl.constexpr,
    ROW_BLOCK: tl.constexpr,
    S_BLOCK: tl.constexpr,
):
    # slot r's slice of target row r (its argmax for a greedy request; its softmax statistics where place r - 1
    # has children, target logits) and of node r - 1's draft row (draft logits); the request's last program
    # merges the slices and walks (greedy: to the end; probabilistic: until a mass not summed is needed)
    b = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1)
    split = tl.program_id(2)
    batch = tl.num_programs(0)
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, N + 1, MODE)
    lanes, parents, attached, tokens, token_valid = _tree_setup(b, parents_ptr, parents_stride, draft_ids_ptr,
                                                                draft_ids_stride, n, V, NODE_BLOCK)
    t_base = target_ptr + b * target_stride_b
    d_base = draft_ptr + b * draft_stride_b
    start = split * CHUNK
    stop = tl.where(split == ROW_SPLITS - 1, V, start + CHUNK)  # every slice ends on a block edge but the last
    t_row = t_base + r.to(tl.int64) * target_stride_k
    d_row = d_base + tl.maximum(r - 1, 0).to(tl.int64) * draft_stride_k  # node r - 1's row (read for r >= 1 only)
    v0 = float("-inf")
    v1 = 0.0
    v2 = float("-inf")
    v3 = 0.0
    idx = -1
    if r <= n:
        if greedy:
            v0, idx = argmax_slice(t_row, start, stop, TARGET_PROBS, BLOCK)
        elif TARGET_PROBS:
            if DRAFT == DRAFT_LOGITS:  # noqa: SIM102 (a constexpr test, then a runtime one)
                if r >= 1:
                    v2, v3, _m2, _s2 = softmax_stats_slice(d_row, d_row, start, stop, inv_temperature, False, BLOCK)
        else:
            has_children = tl.sum(tl.where(attached & (parents == r - 1), 1, 0), axis=0) > 0
            if DRAFT == DRAFT_LOGITS:
                if has_children & (r >= 1):
                    v0, v1, v2, v3 = softmax_stats_slice(t_row, d_row, start, stop, inv_temperature, True, BLOCK)
                elif has_children:
                    v0, v1, _m2, _s2 = softmax_stats_slice(t_row, t_row, start, stop, inv_temperature, False, BLOCK)
                elif r >= 1:
                    v2, v3, _m2, _s2 = softmax_stats_slice(d_row, d_row, start, stop, inv_temperature, False, BLOCK)
            elif has_children:
                v0, v1, _m2, _s2 = softmax_stats_slice(t_row, t_row, start, stop, inv_temperature, False, BLOCK)
    rows_f = scratch_f_ptr + b * (N + 1) * ROW_SPLITS * _ROW_FIELDS
    rows_i = scratch_i_ptr + b * (N + 1) * ROW_SPLITS
    cell = r * ROW_SPLITS + split
    store_row_partial(rows_f + cell * _ROW_FIELDS, rows_i + cell, v0, v1, v2, v3, idx)
    if last_to_arrive(counters_ptr, b, (N + 1) * ROW_SPLITS):
        t_at_nodes, d_at_nodes = _values_at_nodes(greedy, lanes, parents, attached, tokens, token_valid, t_base,
                                                  target_stride_k, d_base, draft_stride_k, MODE, DRAFT, NODE_BLOCK)
        best, merged_m, merged_s, merged_md, merged_sd = merge_rows(rows_f, rows_i, N + 1, ROW_SPLITS, _ROW_FIELDS,
                                                                    ROW_BLOCK, S_BLOCK)
        row_lanes = tl.arange(0, ROW_BLOCK)
        _masses, _race_f, _race_i, record_f, record_i = _record_bases(
            scratch_f_ptr, scratch_i_ptr, b, batch, N, ROW_SPLITS, RACE_SPLITS, NODE_BLOCK, ROW_BLOCK)
        if MODE != MODE_GREEDY:  # the merged rows, for the finish kernel
            merged = record_f + 2 + 4 * NODE_BLOCK
            tl.store(merged + row_lanes, merged_m)
            tl.store(merged + ROW_BLOCK + row_lanes, merged_s)
            tl.store(merged + 2 * ROW_BLOCK + row_lanes, merged_md)
            tl.store(merged + 3 * ROW_BLOCK + row_lanes, merged_sd)
            tl.store(record_i + _HEAD + 3 * NODE_BLOCK + row_lanes, best)
        # from the root, no mass summed yet: the greedy mode walks to the end, the probabilistic one may stop
        final, place, _rejected, _length, _m, _s, _n0, _t0, _v0, _r0, _md0, _sd0, _d0 = _walk_and_record(
            b, batch, n, greedy, inv_temperature, position, key_of_seed, lanes, parents, attached, tokens,
            token_valid, t_at_nodes, d_at_nodes, t_base, target_stride_k, d_base, draft_stride_k, scratch_f_ptr,
            scratch_i_ptr, V, N, ROW_SPLITS, RACE_SPLITS, best, merged_m, merged_s, merged_md, merged_sd, merged_m,
            row_lanes * 0, -2, lanes * 0 - 1, 0, out_ptr, out_stride, nodes_ptr, nodes_stride, num_emitted_ptr,
            num_accepted_ptr, MODE, DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, MODE != MODE_GREEDY, BLOCK, NODE_BLOCK,
            ROW_BLOCK)
        if MODE != MODE_GREEDY:
            state = WALKED
            if final == FINAL_MASS:
                wanted = _places_to_sum(place, lanes, parents, attached, token_valid, merged_m, row_lanes,
                                        TARGET_PROBS, NODE_BLOCK)
                tl.store(record_i + _HEAD + 3 * NODE_BLOCK + ROW_BLOCK + row_lanes, wanted)
                state = MASSES
            tl.store(record_i + 4, state)


@triton.jit
def _second_child(place, lanes, parents, attached, NODE_BLOCK: tl.constexpr):
    # a place's first and second children (NODE_BLOCK for none)
    kids = attached & (parents == place)
    first = tl.min(tl.where(kids, lanes, NODE_BLOCK), axis=0)
    return first, tl.min(tl.where(kids & (lanes > first), lanes, NODE_BLOCK), axis=0)


@triton.jit
def _candidates_wanted(place, lanes, parents, attached, NODE_BLOCK: tl.constexpr):
    # whether the residual race at a place whose first child is rejected can be run from candidates: its second
    # child is its last
    kids = attached & (parents == place)
    _first, second = _second_child(place, lanes, parents, attached, NODE_BLOCK)
    third = tl.min(tl.where(kids & (lanes > second), lanes, NODE_BLOCK), axis=0)
    return (second < NODE_BLOCK) & (third == NODE_BLOCK)


@triton.jit
def _candidate_values(scratch_f_ptr, b, batch, N, ROW_SPLITS, RACE_SPLITS, NODE_BLOCK: tl.constexpr,
                      ROW_BLOCK: tl.constexpr):
    # where request b's candidate values start in the float scratch (after every request's record): per slice of
    # the masses part, r1 at its two candidates then the second child's draft row there; then r1 at the second
    # child's token
    rows_f = batch * (N + 1) * ROW_SPLITS * _ROW_FIELDS
    records = rows_f + batch * ROW_BLOCK * RACE_SPLITS + batch * RACE_SPLITS * 2
    return (scratch_f_ptr + records + batch * (2 + 4 * NODE_BLOCK + 4 * ROW_BLOCK)
            + b * (RACE_SPLITS * 4 + 1))


@triton.jit
def _kept_candidates(race_f, race_i, values, RACE_SPLITS, S_BLOCK: tl.constexpr):
    # the masses' slices' candidates in the slices' order, with r1 and the second child's draft row at them, and the
    # log-ratio bound of every other token (read where they are raced, not kept live across the resumed walk)
    splits = tl.arange(0, S_BLOCK)
    inside = splits < RACE_SPLITS
    ids = tl.reshape(tl.join(tl.load(race_i + splits * 2, mask=inside, other=-1),
                             tl.load(race_i + splits * 2 + 1, mask=inside, other=-1)), [2 * S_BLOCK])
    r1 = tl.reshape(tl.join(tl.load(values + splits * 4, mask=inside, other=0.0),
                            tl.load(values + splits * 4 + 1, mask=inside, other=0.0)), [2 * S_BLOCK])
    q2 = tl.reshape(tl.join(tl.load(values + splits * 4 + 2, mask=inside, other=0.0),
                            tl.load(values + splits * 4 + 3, mask=inside, other=0.0)), [2 * S_BLOCK])
    rest = tl.max(tl.load(race_f + splits * 2, mask=inside, other=float("-inf")), axis=0)
    return ids, r1, q2, rest


@triton.jit
def _masses_part(job, scratch_f_ptr, scratch_i_ptr, counters_ptr, batch,
                 out_ptr, out_stride, nodes_ptr, nodes_stride, num_emitted_ptr, num_accepted_ptr,
                 target_ptr, target_stride_b, target_stride_k, draft_ptr, draft_stride_b, draft_stride_k,
                 draft_ids_ptr, draft_ids_stride, parents_ptr, parents_stride,
                 num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, V, N, ROW_SPLITS, RACE_SPLITS, CHUNK,
                 MODE: tl.constexpr, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
                 WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr, NODE_BLOCK: tl.constexpr,
                 ROW_BLOCK: tl.constexpr, S_BLOCK: tl.constexpr, CANDIDATES: tl.constexpr):
    # Once the rows kernel's walk stopped for masses (the finish kernel's comment; the first S2 tickets): a slice of
    # each mass R = sum max(p - q_0, 0) left at a place after its first child is rejected (the walk's _residual_mass
    # after one sibling, the same arithmetic per token), and at the stopped place, where its second child is its
    # last, the slice's two candidates of the race after both (CANDIDATE_MARGIN), with r1 and the second child's
    # draft row at them, and (the slice holding it) r1 at the second child's token, which that child's test reads.
    # The request's last program sums the slices and, where the second child is rejected and the race's winner among
    # the candidates stands, writes the request's tokens from these values alone; else it resumes the walk where it
    # stopped, then runs the race from the candidates where it can. RACED where that race ran and its winner stood,
    # else RACING.
    b = (job // RACE_SPLITS).to(tl.int64)
    split = job % RACE_SPLITS
    n, greedy, inv_temperature, position, key_of_seed = request_setup(
        b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, N + 1, MODE)
    lanes, parents, attached, tokens, token_valid = _tree_setup(b, parents_ptr, parents_stride, draft_ids_ptr,
                                                                draft_ids_stride, n, V, NODE_BLOCK)
    t_base = target_ptr + b * target_stride_b
    d_base = draft_ptr + b * draft_stride_b
    masses, race_f, race_i, record_f, record_i = _record_bases(scratch_f_ptr, scratch_i_ptr, b, batch, N,
                                                               ROW_SPLITS, RACE_SPLITS, NODE_BLOCK, ROW_BLOCK)
    values = _candidate_values(scratch_f_ptr, b, batch, N, ROW_SPLITS, RACE_SPLITS, NODE_BLOCK, ROW_BLOCK)
    merged = record_f + 2 + 4 * NODE_BLOCK
    row_lanes = tl.arange(0, ROW_BLOCK)
    wanted = tl.load(record_i + _HEAD + 3 * NODE_BLOCK + ROW_BLOCK + row_lanes)
    merged_m = tl.load(merged + row_lanes)
    merged_s = tl.load(merged + ROW_BLOCK + row_lanes)
    merged_md = tl.load(merged + 2 * ROW_BLOCK + row_lanes)
    merged_sd = tl.load(merged + 3 * ROW_BLOCK + row_lanes)
    stop_place = tl.load(record_i + 1)
    length = tl.load(record_i + 3)
    race_key = stream_key(key_of_seed, position + length, RESIDUAL)
    candidates = _candidates_wanted(stop_place, lanes, parents, attached, NODE_BLOCK)
    start = split * CHUNK
    stop = tl.where(split == RACE_SPLITS - 1, V, start + CHUNK)
    pair = tl.arange(0, 2)
    r = tl.min(tl.where(wanted != 0, row_lanes, ROW_BLOCK), axis=0)
    while r < ROW_BLOCK:  # each place to sum (row r, place r - 1), its first child rejected
        first, second = _second_child(r - 1, lanes, parents, attached, NODE_BLOCK)
        m = 0.0
        s = 1.0
        if not TARGET_PROBS:
            m = _lane(merged_m, row_lanes, r)
            s = _lane(merged_s, row_lanes, r)
        sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div = _first_sibling(
            first, tokens, lanes, merged_md, merged_sd, row_lanes, DRAFT)
        t_row = t_base + r.to(tl.int64) * target_stride_k
        if CANDIDATES:
            if candidates & (r == stop_place + 1):
                mass, lane_idx, lane_ratio, dropped = _mass_and_candidates(
                    t_row, d_base, draft_stride_k, start, stop, inv_temperature, m, s, lanes, sib_node,
                    sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, race_key, DRAFT, TARGET_PROBS,
                    WITHOUT_REPLACEMENT, BLOCK, 1)
                one, two, rest = _two_candidates(lane_idx, lane_ratio, dropped)
                tl.store(race_i + split * 2, one)
                tl.store(race_i + split * 2 + 1, two)
                tl.store(race_f + split * 2, rest)
                # at the candidates: r1 replayed as the race replays it, the second child's row as _sibling_q
                # reads it (its treatment drawn without replacement waits for the walk's divisor)
                ids = tl.where(pair == 0, one, two)
                safe = tl.where(ids >= 0, ids, 0)
                tl.store(values + split * 4 + pair,
                         _residual_chunk(t_row, d_base, draft_stride_k, safe, V, inv_temperature, m, s, 1, lanes,
                                         sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div,
                                         DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT))
                md2, sd2 = _draft_stats_of(second, merged_md, merged_sd, row_lanes, DRAFT)
                x2 = _lane(tokens, lanes, second)
                tl.store(values + split * 4 + 2 + pair,
                         draft_chunk(d_base + second.to(tl.int64) * draft_stride_k, safe, V, inv_temperature,
                                     md2, sd2, x2, DRAFT))
                if (x2 >= start) & (x2 < stop):  # r1 at the second child's token, as its test replays it
                    offs_x = x2 + pair
                    r_pair = _residual_chunk(t_row, d_base, draft_stride_k, offs_x, V, inv_temperature, m, s, 1,
                                             lanes, sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd,
                                             sib_div, DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT)
                    tl.store(values + RACE_SPLITS * 4, tl.sum(tl.where(offs_x == x2, r_pair, 0.0), axis=0))
            else:
                mass = _slice_mass(t_row, d_base, draft_stride_k, start, stop, inv_temperature, m, s, 1, lanes,
                                   sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT,
                                   TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK)
        else:
            mass = _slice_mass(t_row, d_base, draft_stride_k, start, stop, inv_temperature, m, s, 1, lanes,
                               sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd, sib_div, DRAFT,
                               TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK)
        tl.store(masses + r * RACE_SPLITS + split, mass)
        r = tl.min(tl.where((wanted != 0) & (row_lanes > r), row_lanes, ROW_BLOCK), axis=0)
    if last_to_arrive(counters_ptr, b, RACE_SPLITS):
        splits = tl.arange(0, S_BLOCK)
        inside = splits < RACE_SPLITS
        cells = masses + row_lanes[:, None] * RACE_SPLITS + splits[None, :]
        merged_r1 = tl.sum(tl.load(cells, mask=(wanted[:, None] != 0) & inside[None, :], other=0.0), axis=1)
        raced = 0  # 1: the race from the candidates ran and stood; -1: it ran and fell back (the rows' race)
        if CANDIDATES:  # noqa: SIM102 (a constexpr test, then a runtime one)
            if candidates:  # noqa: SIM102 (a runtime test, then a constexpr one)
                if not WITHOUT_REPLACEMENT:
                    # the second child's test, as the resumed walk takes it (its r1 from the slices); rejected,
                    # the race from the candidates, and where it stands, the request's tokens without the walk
                    _first, second = _second_child(stop_place, lanes, parents, attached, NODE_BLOCK)
                    x2 = _lane(tokens, lanes, second)
                    if (x2 >= 0) & (x2 < V):
                        mass = _lane(merged_r1, row_lanes, stop_place + 1)
                        md2, sd2 = _draft_stats_of(second, merged_md, merged_sd, row_lanes, DRAFT)
                        q_x = draft_prob_of(tl.load(d_base + second.to(tl.int64) * draft_stride_k + x2),
                                            inv_temperature, md2, sd2, DRAFT)
                        u = uniform_at(stream_key(key_of_seed, position + length, ACCEPT), 1)
                        if not ((u * q_x) * mass < tl.load(values + RACE_SPLITS * 4)):
                            ids, r1, q2, rest = _kept_candidates(race_f, race_i, values, RACE_SPLITS, S_BLOCK)
                            # (the sibling lanes here hold what drawn with replacement reads: the second's
                            # validity and mass; its token and divisor lanes are not the walk's, which drawn
                            # without replacement would read)
                            w = _second_residual(r1, q2, ids, lanes, tokens, (lanes < 2).to(tl.int32),
                                                 tl.where(lanes == 1, mass, 1.0), tl.where(lanes < 2, 1.0, 0.0),
                                                 False)
                            token = _candidate_race(ids, w, rest, race_key)
                            if token >= 0:
                                path = tl.load(record_i + _HEAD + 3 * NODE_BLOCK + 2 * ROW_BLOCK + lanes)
                                _store_request(b, out_ptr, out_stride, nodes_ptr, nodes_stride, num_emitted_ptr,
                                               num_accepted_ptr, tokens, lanes, path, length, token.to(tl.int64),
                                               request_valid(inv_temperature), N, NODE_BLOCK)
                                raced = 1
                            else:
                                raced = -1
        if raced <= 0:  # the walk resumed, for the record the racers read at least
            t_at_nodes, d_at_nodes = _values_at_nodes(greedy, lanes, parents, attached, tokens, token_valid,
                                                      t_base, target_stride_k, d_base, draft_stride_k, MODE,
                                                      DRAFT, NODE_BLOCK)
            (final, place, rejected, length, m, s, sib_node, sib_token, sib_valid, sib_mass, sib_md, sib_sd,
             sib_div) = _walk_and_record(
                b, batch, n, greedy, inv_temperature, position, key_of_seed, lanes, parents, attached, tokens,
                token_valid, t_at_nodes, d_at_nodes, t_base, target_stride_k, d_base, draft_stride_k,
                scratch_f_ptr, scratch_i_ptr, V, N, ROW_SPLITS, RACE_SPLITS,
                tl.load(record_i + _HEAD + 3 * NODE_BLOCK + row_lanes), merged_m, merged_s, merged_md,
                merged_sd, merged_r1, wanted, stop_place,
                tl.load(record_i + _HEAD + 3 * NODE_BLOCK + 2 * ROW_BLOCK + lanes), length, out_ptr,
                out_stride, nodes_ptr, nodes_stride, num_emitted_ptr, num_accepted_ptr, MODE, DRAFT,
                TARGET_PROBS, WITHOUT_REPLACEMENT, False, BLOCK, NODE_BLOCK, ROW_BLOCK)
            if CANDIDATES:  # noqa: SIM102 (a constexpr test, then a runtime one)
                if (raced == 0) & candidates & (final == FINAL_RESIDUAL) & (place == stop_place) & (rejected == 2):
                    ids, r1, q2, rest = _kept_candidates(race_f, race_i, values, RACE_SPLITS, S_BLOCK)
                    w = _second_residual(r1, q2, ids, lanes, sib_token, sib_valid, sib_mass, sib_div,
                                         WITHOUT_REPLACEMENT)
                    token = _candidate_race(ids, w, rest, race_key)
                    if token >= 0:
                        tl.debug_barrier()  # after _store_request's -1 there, from whichever thread held that lane
                        tl.store(out_ptr + b * out_stride + length, token.to(tl.int64))
                        tl.store(num_emitted_ptr + b, length + 1)
                        raced = 1
        publish(record_i + 4, tl.where(raced > 0, RACED, RACING))


@triton.jit
def _race_part(job, scratch_f_ptr, scratch_i_ptr, counters_ptr, batch, out_ptr, out_stride, num_emitted_ptr,
               target_ptr, target_stride_b, target_stride_k, draft_ptr, draft_stride_b, draft_stride_k,
               num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, V, N, ROW_SPLITS, RACE_SPLITS, CHUNK,
               MODE: tl.constexpr, DRAFT: tl.constexpr, TARGET_PROBS: tl.constexpr,
               WITHOUT_REPLACEMENT: tl.constexpr, BLOCK: tl.constexpr, NODE_BLOCK: tl.constexpr,
               ROW_BLOCK: tl.constexpr, S_BLOCK: tl.constexpr):
    # once the request's walk is done: the final race of a walk that left one (the bonus over p at a leaf, the
    # residual after rejected children), one slice per program; the last program merges the slices (over p,
    # with the same stream, when the residual has no mass anywhere) and writes the token
    b = (job // RACE_SPLITS).to(tl.int64)
    split = job % RACE_SPLITS
    _masses, race_f, race_i, record_f, record_i = _record_bases(scratch_f_ptr, scratch_i_ptr, b, batch, N, ROW_SPLITS,
                                                                 RACE_SPLITS, NODE_BLOCK, ROW_BLOCK)
    final = tl.load(record_i + 0)
    if final != FINAL_DONE:
        place = tl.load(record_i + 1)
        rejected = tl.load(record_i + 2)
        length = tl.load(record_i + 3)
        _n, _greedy, inv_temperature, position, key_of_seed = request_setup(
            b, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, N + 1, MODE)
        t_row = target_ptr + b * target_stride_b + (place + 1).to(tl.int64) * target_stride_k
        t = position + length
        start = split * CHUNK
        stop = tl.where(split == RACE_SPLITS - 1, V, start + CHUNK)
        lanes = tl.arange(0, NODE_BLOCK)
        if final == FINAL_BONUS:
            key = stream_key(key_of_seed, t, SAMPLE)
            z, g, idx = sample_row(t_row, start, stop, inv_temperature, key, TARGET_PROBS, False, BLOCK)
        else:
            key = stream_key(key_of_seed, t, RESIDUAL)
            z, g, idx = _residual_race(t_row, draft_ptr + b * draft_stride_b, draft_stride_k, start, stop, V,
                                       inv_temperature, tl.load(record_f + 0), tl.load(record_f + 1), rejected, lanes,
                                       tl.load(record_i + _HEAD + lanes),
                                       tl.load(record_i + _HEAD + NODE_BLOCK + lanes).to(tl.int64),
                                       tl.load(record_i + _HEAD + 2 * NODE_BLOCK + lanes),
                                       tl.load(record_f + 2 + lanes),
                                       tl.load(record_f + 2 + NODE_BLOCK + lanes),
                                       tl.load(record_f + 2 + 2 * NODE_BLOCK + lanes),
                                       tl.load(record_f + 2 + 3 * NODE_BLOCK + lanes), key, DRAFT, TARGET_PROBS,
                                       WITHOUT_REPLACEMENT, BLOCK)
        store_race(race_f, race_i, split, z, g, idx, -1)
        if last_to_arrive(counters_ptr + batch, b, RACE_SPLITS):
            token = merge_race(race_f, race_i, RACE_SPLITS, S_BLOCK)
            if (token < 0) & (final == FINAL_RESIDUAL):  # nothing left: the race over p with the same stream
                _z, _g, index = sample_row(t_row, 0, V, inv_temperature, key, TARGET_PROBS, False, BLOCK)
                token = index.to(tl.int64)
            tl.store(out_ptr + b * out_stride + length, token)
            tl.store(num_emitted_ptr + b, length + (token >= 0).to(tl.int32))


@triton.jit
def _tree_finish_kernel(
    scratch_f_ptr, scratch_i_ptr,  # float32 and int32 scratch (layout above)
    counters_ptr,  # [3 B] int32, zero on entry; left at zero on exit (layout above)
    out_ptr, out_stride, nodes_ptr, nodes_stride, num_emitted_ptr, num_accepted_ptr,
    target_ptr, target_stride_b, target_stride_k,
    draft_ptr, draft_stride_b, draft_stride_k,
    draft_ids_ptr, draft_ids_stride,
    parents_ptr, parents_stride,
    num_draft_ptr, temperature_ptr, seed_ptr, position_ptr,
    V, N, ROW_SPLITS, RACE_SPLITS, CHUNK,
    MODE: tl.constexpr,
    DRAFT: tl.constexpr,
    TARGET_PROBS: tl.constexpr,
    WITHOUT_REPLACEMENT: tl.constexpr,
    BLOCK: tl.constexpr,
    NODE_BLOCK: tl.constexpr,
    ROW_BLOCK: tl.constexpr,
    S_BLOCK: tl.constexpr,
    CANDIDATES: tl.constexpr,  # the race after a place's two rejected children from candidates (launch.py)
):
    # The split path's second launch in the probabilistic mode (the comment above): 2 B x S2 programs; request b's
    # are b's S2 in each half of the grid, which race (WALKED: the first half) or sum masses (MASSES: the first S2
    # tickets), the others racing once the masses are in (RACING).
    batch = tl.num_programs(0) // (2 * RACE_SPLITS)
    pid = tl.program_id(0)
    first = pid < batch * RACE_SPLITS
    job = tl.where(first, pid, pid - batch * RACE_SPLITS)
    b = job // RACE_SPLITS
    _masses, _race_f, _race_i, _record_f, record_i = _record_bases(
        scratch_f_ptr, scratch_i_ptr, b.to(tl.int64), batch, N, ROW_SPLITS, RACE_SPLITS, NODE_BLOCK, ROW_BLOCK)
    state = tl.load(record_i + 4, volatile=True)  # MASSES or WALKED (the rows kernel's), RACING once summed
    if state != WALKED:
        # a first ticket finds MASSES still (the masses wait for it), a later one any state since
        ticket = take_ticket(counters_ptr + 2 * batch + b, 2 * RACE_SPLITS)
        first = ticket < RACE_SPLITS
        job = b * RACE_SPLITS + tl.where(first, ticket, ticket - RACE_SPLITS)
    race = first & (state == WALKED)
    if (not first) & (state != WALKED):
        race = wait_until(record_i + 4, RACING) == RACING  # RACED: the race ran from candidates
    if first & (state == MASSES):
        _masses_part(job, scratch_f_ptr, scratch_i_ptr, counters_ptr, batch, out_ptr, out_stride, nodes_ptr,
                     nodes_stride, num_emitted_ptr, num_accepted_ptr, target_ptr, target_stride_b, target_stride_k,
                     draft_ptr, draft_stride_b, draft_stride_k, draft_ids_ptr, draft_ids_stride, parents_ptr,
                     parents_stride, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, V, N, ROW_SPLITS,
                     RACE_SPLITS, CHUNK, MODE, DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK, NODE_BLOCK, ROW_BLOCK,
                     S_BLOCK, CANDIDATES)
    if race:
        _race_part(job, scratch_f_ptr, scratch_i_ptr, counters_ptr, batch, out_ptr, out_stride,
                   num_emitted_ptr, target_ptr, target_stride_b, target_stride_k, draft_ptr, draft_stride_b,
                   draft_stride_k, num_draft_ptr, temperature_ptr, seed_ptr, position_ptr, V, N, ROW_SPLITS,
                   RACE_SPLITS, CHUNK, MODE, DRAFT, TARGET_PROBS, WITHOUT_REPLACEMENT, BLOCK, NODE_BLOCK,
                   ROW_BLOCK, S_BLOCK)
