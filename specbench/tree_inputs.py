"""``kernels --tree SHAPE``: benchmark inputs for a draft tree whose accepted path is planned.

A tree case verifies one tree shape (``tree_shapes``: ``chain:K``, ``WxD``, ``parents:...``) for every
request. Its *spine* is the path of first children from the root (node ``spine[0]`` the root's first
child, ``spine[d + 1]`` the first child of ``spine[d]``); the acceptance profile is over the spine's
length ``D`` (the case's rates have ``D`` entries; for ``WxD`` and chains ``D`` is the tree's depth).
Request ``b`` gets a planned accepted depth ``A_b`` (``bench.assign_accepted_counts``, as a chain's
count), and the inputs make the walk accept ``spine[0..A_b - 1]`` and then reject every child of the
place it stopped at (the root when ``A_b = 0``), for sure, in every mode but the synthetic one:

- a spine node ``d < A_b``: its token is the argmax of its test row (its parent's row), and its draft row
  (draft logits, or their softmax) is that row with the token's logit lowered by 1, so
  ``u q(x) < p(x)`` for every ``u < 1``; without draft rows the token's target logit is raised by 40;
  being rank 0, it is accepted before any sibling is tested;
- every child of the stop place: a token other than the row's argmax whose target logit is set to
  ``-1e4`` (``p(x) = 0``, so the residual has no mass there either): each is tested and rejected, the
  residual's passes included, before the final token is drawn;
- every other node (never reached): random tokens and draft rows.

A leaf stop place (``A_b = D`` on a full tree) emits the bonus. The synthetic mode takes the profile's
conditional rates at rank 0 of each depth (``[[c_1], [c_2], ...]``: other ranks have rate 0), so its
path follows the chain's law. Bytes (``bytes_needed``) as for chains, per request: the target rows of
the path's places and the stop place, the draft rows of the tested nodes (draft logits), or their
values at the accepted drafts and the rejected rows (draft probabilities).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specbench.trees import DraftTree, children


def spine(parents: Sequence[int]) -> list[int]:
    """The path of first children from the root: ``spine[d]`` is the first child of ``spine[d - 1]``."""
    kids = children(parents)  # kids[u + 1]: node u's children, kids[0] the root's
    path: list[int] = []
    while kids[path[-1] + 1 if path else 0]:
        path.append(kids[path[-1] + 1 if path else 0][0])
    return path


def stop_children(parents: Sequence[int], accepted: int) -> list[int]:
    """The nodes tested and rejected when the walk stops after ``accepted`` spine nodes."""
    place = spine(parents)[accepted - 1] if accepted else -1
    return [j for j, parent in enumerate(parents) if parent == place]


def tree_tensors(parents: Sequence[int], planned: torch.Tensor, vocab: int, dtype: torch.dtype, mode: str, draft: str,
                 gen: torch.Generator, device: torch.device) -> dict:
    """The planned inputs (module docstring): ``target_logits [B, N + 1, V]``, ``draft_token_ids [B, N]``,
    ``draft_logits`` / ``draft_probs [B, N, V]`` or None, and ``tree`` (a ``DraftTree``)."""
    from specbench.bench import PEAK_LOGIT, REJECTED_LOGIT  # here: bench imports this module

    batch, num_nodes = planned.numel(), len(parents)
    path = spine(parents)
    target = torch.randn(batch, num_nodes + 1, vocab, generator=gen, dtype=dtype, device=device)
    test_row = torch.tensor([parent + 1 for parent in parents], dtype=torch.int64, device=device)  # [N]
    depth_on_spine = torch.full((num_nodes,), -1, dtype=torch.int64, device=device)
    depth_on_spine[torch.tensor(path, dtype=torch.int64, device=device)] = torch.arange(len(path), device=device)
    accepted = (depth_on_spine[None, :] >= 0) & (depth_on_spine[None, :] < planned[:, None])  # [B, N]
    stop_place = torch.tensor([-1, *path], dtype=torch.int64, device=device)[planned]  # [B]: -1 the root
    rejected = torch.tensor(parents, dtype=torch.int64, device=device)[None, :] == stop_place[:, None]  # [B, N]
    rows = target[:, test_row]  # [B, N, V]: each node's test row
    top = rows.argmax(dim=-1)  # [B, N]
    other = (top + torch.randint(1, vocab, (batch, num_nodes), generator=gen, device=device)) % vocab
    anything = torch.randint(0, vocab, (batch, num_nodes), generator=gen, device=device)
    drafts = torch.where(accepted, top, torch.where(rejected, other, anything))
    rej_b, rej_j = rejected.nonzero(as_tuple=True)
    target[rej_b, test_row[rej_j], drafts[rej_b, rej_j]] = REJECTED_LOGIT
    acc_b, acc_j = accepted.nonzero(as_tuple=True)
    out = {"target_logits": target, "draft_token_ids": drafts, "draft_logits": None, "draft_probs": None}
    if mode == "probabilistic" and draft == "none":
        target[acc_b, test_row[acc_j], drafts[acc_b, acc_j]] += PEAK_LOGIT
    elif mode == "probabilistic":
        draft_logits = torch.randn(batch, num_nodes, vocab, generator=gen, dtype=dtype, device=device)
        draft_logits[acc_b, acc_j] = target[acc_b, test_row[acc_j]]
        draft_logits[acc_b, acc_j, drafts[acc_b, acc_j]] -= 1.0
        if draft == "logits":
            out["draft_logits"] = draft_logits
        else:
            out["draft_probs"] = torch.softmax(draft_logits.float(), dim=-1).to(dtype)
    parents_tensor = torch.tensor(parents, dtype=torch.int64, device=device)[None, :].expand(batch, num_nodes)
    out["tree"] = DraftTree(parents_tensor.contiguous())
    return out


def tree_bytes(parents: Sequence[int], num_accepted: torch.Tensor, row_bytes: int, elem: int, mode: str,
               draft: str) -> int:
    """The rows a tree step must read (module docstring), in bytes, for the reference's accepted depths."""
    total = 0
    for accepted in num_accepted.to(torch.int64).cpu().tolist():
        tested = len(stop_children(parents, accepted))
        total += (1 if mode == "synthetic" else accepted + 1) * row_bytes
        if mode == "probabilistic" and draft == "logits":
            total += (accepted + tested) * row_bytes
        elif mode == "probabilistic" and draft == "probs":
            total += accepted * elem + tested * row_bytes
    return total
