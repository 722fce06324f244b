"""The torch reference of tree verification (``specbench/verification.py``, "Trees"), vectorized over the batch.

``specbench.reference.verify`` hands a call here when it is given ``tree_parents``. Notation as there:
``B`` requests, ``N`` nodes per tree (``K`` for a chain), ``V`` tokens; ``p`` a target row, ``q`` a draft row,
``r`` the residual and ``R`` its mass. Nodes are ``0..N-1``; a *place* ``u`` is ``0`` for the root and
``j + 1`` for node ``j`` (the index of its target row).

The walk is a loop of at most ``N + 1`` rounds: in each, every request still walking tests one child (it
is accepted and the request moves down, or it is rejected and the next sibling is up), or finds no
child left and stops. Each node is tested at most once, so ``N`` rounds test everything a walk can reach.
"""

from __future__ import annotations

import torch

from specbench import rng
from specbench.reference import _clean, _clean_probs, _draft_prob_at_draft, _race, _ranked, _softmax
from specbench.trees import tensor_depths
from specbench.verification import VerifyResult

_NEG_INF = float("-inf")


class _Shape:
    """The tree structure of a batch, as tensors: who is whose child, in which rank, at which depth."""

    def __init__(self, parents: torch.Tensor, num_draft_tokens: torch.Tensor):
        batch, num_nodes = parents.shape
        device = parents.device
        nodes = torch.arange(num_nodes, device=device)
        in_tree = nodes[None, :] < num_draft_tokens[:, None].to(torch.int64)
        # a node whose parent is outside [-1, j) (possible only unchecked) belongs to no place
        attached = in_tree & (parents >= -1) & (parents < nodes[None, :])
        self.owner = torch.where(attached, parents + 1, -1)  # [B, N]: the place whose child node j is
        same = (self.owner[:, :, None] == self.owner[:, None, :]) & attached[:, :, None]  # [B, N, N]
        later = nodes[None, None, :] > nodes[None, :, None]
        # next_sibling [B, N]: the sibling of next rank (N: none); rank [B, N]: elder siblings
        self.next_sibling = torch.where(same & later, nodes, num_nodes).amin(dim=-1) if num_nodes else \
            torch.zeros(batch, 0, dtype=torch.int64, device=device)
        self.rank = (same & ~later & (nodes[None, None, :] != nodes[None, :, None])).sum(dim=-1)
        places = torch.arange(num_nodes + 1, device=device)
        is_child = self.owner[:, None, :] == places[None, :, None]  # [B, N + 1, N]
        self.first_child = torch.where(is_child, nodes, num_nodes).amin(dim=-1) if num_nodes else \
            torch.zeros(batch, 1, dtype=torch.int64, device=device)  # [B, N + 1]: N for none
        self.depth = tensor_depths(parents)  # [B, N]
        # [B, N + 1]: the depth of each place, -1 for the root
        self.place_depth = torch.cat([torch.full((batch, 1), -1, dtype=torch.int64, device=device), self.depth], 1)


def verify_tree(
    *,
    mode: str,
    target_logits: torch.Tensor | None,
    target_probs: torch.Tensor | None,
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_logits: torch.Tensor | None,
    draft_probs: torch.Tensor | None,
    temperatures: torch.Tensor,
    seeds: torch.Tensor,
    positions: torch.Tensor,
    conditional_rates: torch.Tensor,
    tree_parents: torch.Tensor,
    tree_candidates: str,
) -> VerifyResult:
    """One tree step (inputs checked by ``specbench.verify``; shapes as ``reference.verify`` with ``K = N``).

    ``tree_parents`` ``[B, N]`` int64; ``tree_candidates`` ``"independent"`` or ``"without_replacement"``;
    ``conditional_rates`` ``[D, W]`` float32, the synthetic table. Returns ``VerifyResult`` with
    ``output_token_ids [B, N + 1]`` int64 (the path then the final token, ``-1`` padded), ``num_emitted``,
    ``num_accepted`` ``[B]`` int32 and ``accepted_nodes [B, N]`` int32 (``-1`` padded).
    """
    is_probs = target_probs is not None
    given = target_probs if is_probs else target_logits
    batch, num_rows, vocab = given.shape
    num_nodes = num_rows - 1
    device = given.device
    batch_index = torch.arange(batch, device=device)
    invalid_request = ~(temperatures >= 0)  # negative or NaN (unchecked only): the request emits nothing
    counts = torch.where(invalid_request, 0, num_draft_tokens.clamp(0, num_nodes))
    greedy_row = temperatures == 0
    inv_temperature = torch.where(greedy_row, 1.0, 1.0 / torch.where(greedy_row, 1.0, temperatures))
    shape = _Shape(tree_parents, counts)
    drafts = draft_token_ids  # [B, N]
    draft_valid = (drafts >= 0) & (drafts < vocab)
    drafts_in_range = drafts.clamp(0, vocab - 1)
    seed_keys = rng.seed_key(seeds)

    # every target row, as the chain rules read them: cleaned rows, their max (validity) and argmax
    target = _clean_probs(given) if is_probs else _clean(given, inv_temperature[:, None])  # [B, N + 1, V]
    row_max, row_argmax = _ranked(target, is_probs).max(dim=-1)  # [B, N + 1]
    row_valid = row_max > _NEG_INF
    p_rows = target if is_probs else _softmax(target, row_max)  # p of each place, what a race reads

    # node j is tested at position pos + depth(j) with the uniform of index rank(j)
    test_positions = positions[:, None] + shape.depth
    accept_keys = rng.stream_key(seed_keys[:, None], test_positions, rng.ACCEPT)
    u = rng.to_uniform(rng.words(accept_keys, shape.rank))  # [B, N]
    if mode == "synthetic":
        table = conditional_rates  # [D, W]: rate of rank k at depth d, 0 past the table
        inside = (shape.depth < table.shape[0]) & (shape.rank < table.shape[1])
        rate = torch.where(inside, table[shape.depth.clamp(max=table.shape[0] - 1),
                                         shape.rank.clamp(max=table.shape[1] - 1)], 0.0)
        sampled_accept_at = draft_valid & (u < rate)  # [B, N]: decided up front, rows are not read
    elif mode == "probabilistic":
        p_at, q_at, q_rows, one_hot_at = _node_probabilities(target, is_probs, row_max, row_valid, shape,
                                                             drafts_in_range, draft_valid, draft_logits, draft_probs,
                                                             inv_temperature, vocab)
    test_row = shape.owner.clamp(min=0)  # [B, N]: the place whose row tests node j
    greedy_accept_at = drafts == row_argmax.gather(1, test_row)  # [B, N]

    place = torch.zeros(batch, dtype=torch.int64, device=device)  # 0: the root
    child = shape.first_child[:, 0].clone()  # the next child to test (N: none left)
    path = torch.full((batch, num_nodes), -1, dtype=torch.int64, device=device)
    length = torch.zeros(batch, dtype=torch.int64, device=device)
    walking = torch.ones(batch, dtype=torch.bool, device=device)
    sampled = mode == "probabilistic"
    if sampled:
        residual = p_rows[:, 0].clone()  # r [B, V]
        mass = torch.ones(batch, dtype=torch.float32, device=device)  # R
        taken = torch.zeros(batch, vocab, dtype=torch.bool, device=device)  # elder siblings' tokens
    for _ in range(num_nodes + 1 if num_nodes else 0):  # no nodes: only the root's row emits
        # a walk stops when no child is left, or when the row its test needs is invalid (the synthetic
        # mode reads no row to test)
        walking = walking & (child < num_nodes)
        if mode != "synthetic":
            walking = walking & row_valid[batch_index, place]
        if device.type == "cpu" and not bool(walking.any()):  # a host read: never on a GPU (CUDA graphs)
            break
        node = child.clamp(max=max(num_nodes - 1, 0))
        x = drafts_in_range[batch_index, node]
        valid = draft_valid[batch_index, node]
        if mode == "synthetic":
            accept = sampled_accept_at[batch_index, node]
        else:
            accept = greedy_accept_at[batch_index, node]
        if sampled:
            q_row, q_x = _candidate_law(tree_candidates, q_rows[batch_index, node], q_at[batch_index, node], x, taken)
            fresh = shape.rank[batch_index, node] == 0  # nothing rejected here yet: r = p, R = 1
            r_x = torch.where(fresh, p_at[batch_index, node], residual.gather(1, x[:, None])[:, 0])
            # accept iff u_k q_k(x) R < r(x)  (SpecInfer, Miao et al. 2024; R renormalises the residual)
            sampled_accept = valid & (u[batch_index, node] * q_x * mass < r_x)
            accept = torch.where(greedy_row, accept, sampled_accept)
        moved = walking & accept
        rejected = walking & ~accept
        path[batch_index, length.clamp(max=max(num_nodes - 1, 0))] = torch.where(
            moved, node, path[batch_index, length.clamp(max=max(num_nodes - 1, 0))])
        length = length + moved.to(torch.int64)
        place = torch.where(moved, node + 1, place)
        child = torch.where(moved, shape.first_child[batch_index, place],
                            torch.where(rejected, shape.next_sibling[batch_index, node], child))
        if sampled:
            # rejected: r <- max(r - R q_k, 0), R <- sum r, or R - r(x) after a one-hot draft (an absent child
            # leaves r as it is)
            update = (rejected & valid & ~greedy_row)[:, None]
            left = (residual - mass[:, None] * q_row).clamp_min(0.0)
            residual = torch.where(update, left, residual)
            new_mass = torch.where(one_hot_at[batch_index, node], mass - r_x, residual.sum(dim=-1))
            mass = torch.where(update[:, 0], new_mass, mass)
            taken = torch.where(update, taken | torch.nn.functional.one_hot(x, vocab).bool(), taken)
            # moved: start over at the new place with its own row
            residual = torch.where(moved[:, None], p_rows[batch_index, place], residual)
            mass = torch.where(moved, 1.0, mass)
            taken = taken & ~moved[:, None]

    # the terminal place emits: the residual race after rejected children, the bonus at a leaf
    terminal_row = p_rows[batch_index, place]  # [B, V]
    terminal_valid = row_valid[batch_index, place] & ~invalid_request
    token = row_argmax[batch_index, place]
    terminal_positions = positions + shape.place_depth[batch_index, place] + 1
    if mode != "greedy":
        has_children = shape.first_child[batch_index, place] < num_nodes
        weights = terminal_row
        use_residual = has_children if sampled else torch.zeros_like(has_children)
        if sampled:
            left = torch.where((residual > 0).any(dim=-1, keepdim=True), residual, terminal_row)
            weights = torch.where(use_residual[:, None], left, terminal_row)
        keys = torch.where(use_residual, rng.stream_key(seed_keys, terminal_positions, rng.RESIDUAL),
                           rng.stream_key(seed_keys, terminal_positions, rng.SAMPLE))
        token = torch.where(greedy_row, token, _race(weights, keys))

    output = torch.full((batch, num_nodes + 1), -1, dtype=torch.int64, device=device)
    output[:, :num_nodes] = torch.where(path >= 0, drafts.gather(1, path.clamp(min=0)), -1)
    output.scatter_(1, length[:, None], torch.where(terminal_valid, token, -1)[:, None])
    num_accepted = length.to(torch.int32)
    return VerifyResult(output_token_ids=output, num_emitted=num_accepted + terminal_valid.to(torch.int32),
                        num_accepted=num_accepted, accepted_nodes=path.to(torch.int32))


def _node_probabilities(target, is_probs, row_max, row_valid, shape, drafts_in_range, draft_valid, draft_logits,
                        draft_probs, inv_temperature, vocab):
    """``p_at`` ``[B, N]``: ``p(x_j)`` of node ``j``'s token under its parent's row, computed as the chain
    computes ``p(x)`` (so rank 0 is the chain's test bit for bit); ``q_at`` ``[B, N]``: ``q_j(x_j)`` (1 for a
    one-hot draft); ``q_rows`` ``[B, N, V]``: each node's draft row (one-hot at the token for one-hot drafts
    and invalid draft-logit rows; all zeros for an absent node); ``one_hot_at`` ``[B, N]``: whether node
    ``j``'s draft is one-hot."""
    batch, num_nodes = drafts_in_range.shape
    test_place = shape.owner.clamp(min=0)
    tested = target.gather(1, test_place[..., None].expand(batch, num_nodes, vocab))  # [B, N, V]
    if is_probs:
        p_at = tested.gather(2, drafts_in_range[..., None])[..., 0]
    else:
        tested_max = torch.where(row_valid, row_max, 0.0).gather(1, test_place)[..., None]
        tested_sum = torch.exp(tested - tested_max).sum(dim=-1)
        p_at = torch.exp(tested.gather(2, drafts_in_range[..., None]) - tested_max)[..., 0] / tested_sum
    q_draft, one_hot_draft = _draft_prob_at_draft(draft_logits, draft_probs, inv_temperature, drafts_in_range, None)
    q_at = torch.where(one_hot_draft, 1.0, q_draft)
    one_hot = torch.nn.functional.one_hot(drafts_in_range, vocab).to(torch.float32)
    if draft_probs is not None:
        q_rows = _clean_probs(draft_probs)
    elif draft_logits is not None:
        cleaned = _clean(draft_logits, inv_temperature[:, None])
        cleaned_max = cleaned.amax(dim=-1)
        q_rows = torch.where((cleaned_max > _NEG_INF)[..., None], _softmax(cleaned, cleaned_max), one_hot)
    else:
        q_rows = one_hot
    return p_at, q_at, torch.where(draft_valid[..., None], q_rows, 0.0), one_hot_draft


def _candidate_law(candidates: str, q_row: torch.Tensor, q_x: torch.Tensor, x: torch.Tensor,
                   taken: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # q_k [B, V] and q_k(x) [B]: the node's row (independent), or, drawn without replacement, the row with
    # the elder siblings' tokens set to 0 and divided by 1 - their mass (Jeon et al. 2024); zero when none is left
    if candidates == "independent":
        return q_row, q_x
    left = 1.0 - torch.where(taken, q_row, 0.0).sum(dim=-1)  # [B]
    some = left > 0
    divisor = torch.where(some, left, 1.0)
    row = torch.where(taken | ~some[:, None], 0.0, q_row / divisor[:, None])
    at = torch.where(taken.gather(1, x[:, None])[:, 0] | ~some, 0.0, q_x / divisor)
    return row, at
