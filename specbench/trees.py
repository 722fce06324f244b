"""Draft trees: the layout ``verify(..., tree=...)`` reads, its checks, shape strings and converters.

A draft tree of one request has ``N`` nodes numbered ``0..N-1`` in topological order; ``parents[j]``
is node ``j``'s parent, or ``-1`` when its parent is the root (the last accepted token, target row 0).
A valid parent list has ``-1 <= parents[j] < j``. A node's depth is 0 under the root and one more
than its parent's otherwise; the children of a node are taken in increasing index order (child rank
``0, 1, ...``). A chain of ``K`` drafts is ``[-1, 0, 1, ..., K - 2]``. The rules that walk a tree are
in ``specbench/verification.py`` ("Trees").

Converters from the layouts serving engines use:

- SGLang (``from_sglang``): ``candidates`` ``[B, M]`` with node 0 the root, a first-child list
  ``retrive_next_token`` and a next-sibling list ``retrive_next_sibling`` (``-1`` ends a list), and
  ``retrive_index`` (each node's row in the flat batch of verified tokens); ``to_sglang`` goes the other way
  (what the SGLang tree adapters hand its kernels).
- EAGLE-1 / Medusa (``from_tree_choices``): ``tree_choices``, one path of sibling ranks per node
  (``[0, 1]`` is the second child of the first child of the root).
- EAGLE-2 (``from_retrieve_indices``): ``retrieve_indices`` ``[L, D + 1]``, one root-to-leaf path per
  row as indices into the step's tokens (0 the root), ``-1`` padded.
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Sequence
from typing import Literal, NamedTuple

import torch

from specbench.errors import SpecbenchError

Candidates = Literal["independent", "without_replacement"]
CANDIDATES: tuple[str, ...] = ("independent", "without_replacement")
# A tree shape string names at most this many nodes (a step verifies a few to a few hundred drafts).
MAX_TREE_NODES = 1024


class DraftTree(NamedTuple):
    """The tree of each request (module docstring).

    - ``parents`` ``[B, N]`` int32 or int64: node ``j``'s parent, ``-1`` for the root; nodes at or past a
      request's ``num_draft_tokens`` are padding and never read.
    - ``candidates``: how siblings were drawn, ``"independent"`` (each from its own row: the default,
      and one-hot drafts) or ``"without_replacement"`` (one after another from one row without
      replacement, in rank order).
    """

    parents: torch.Tensor
    candidates: Candidates = "independent"


def check_tree(tree: DraftTree, batch: int, num_nodes: int, device: torch.device,
               num_draft_tokens: torch.Tensor | None = None, check_values: bool = False) -> None:
    """Raise ``SpecbenchError`` unless ``tree`` fits a batch of ``batch`` trees of ``num_nodes`` slots.

    Shape ``[batch, num_nodes]``, an integer dtype, ``device``, a known ``candidates`` name; with
    ``check_values`` (a host read), every parent of a node below its request's count (``num_draft_tokens``
    ``[B]``, default all ``num_nodes``) lies in ``[-1, j)``.
    """
    if not isinstance(tree, DraftTree):
        raise SpecbenchError(f"tree must be a specbench.trees.DraftTree, got {type(tree).__name__}")
    if tree.candidates not in CANDIDATES:
        raise SpecbenchError(f"tree candidates must be one of {', '.join(CANDIDATES)}, got {tree.candidates!r}")
    parents = tree.parents
    if not isinstance(parents, torch.Tensor):
        raise SpecbenchError(f"tree parents must be a torch.Tensor, got {type(parents).__name__}")
    if tuple(parents.shape) != (batch, num_nodes):
        raise SpecbenchError(f"tree parents must have shape [{batch}, {num_nodes}] (one per draft node), "
                             f"got {list(parents.shape)}")
    if parents.dtype not in (torch.int32, torch.int64):
        raise SpecbenchError(f"tree parents must have dtype int32 or int64, got "
                             f"{str(parents.dtype).removeprefix('torch.')}")
    if parents.device != device:
        raise SpecbenchError(f"tree parents is on {parents.device} but target_logits is on {device}")
    if not check_values or batch == 0 or num_nodes == 0:
        return
    nodes = torch.arange(num_nodes, device=device)[None, :]
    counts = torch.full((batch,), num_nodes, device=device) if num_draft_tokens is None else num_draft_tokens
    bad = (nodes < counts[:, None]) & ((parents < -1) | (parents >= nodes))
    if bool(bad.any()):
        b, j = (int(i) for i in bad.nonzero()[0])
        raise SpecbenchError(f"tree parents must lie in [-1, j) for node j, got parent {int(parents[b, j])} "
                             f"for node {j} of request {b}")


def check_parents(parents: Sequence[int]) -> list[int]:
    """One request's parent list as plain ints, each in ``[-1, j)``; ``SpecbenchError`` otherwise."""
    result = []
    for j, parent in enumerate(parents):
        if isinstance(parent, bool) or not isinstance(parent, int) or not -1 <= parent < j:
            raise SpecbenchError(f"tree parents must be whole numbers in [-1, j) for node j, got {parent!r} "
                                 f"for node {j}")
        result.append(parent)
    return result


def depths(parents: Sequence[int]) -> list[int]:
    """Each node's depth (0 under the root) of one request's valid parent list."""
    result: list[int] = []
    for parent in parents:
        result.append(0 if parent < 0 else result[parent] + 1)
    return result


def children(parents: Sequence[int]) -> list[list[int]]:
    """``children(parents)[u + 1]``: the children of node ``u`` in rank order (index 0: the root's)."""
    result: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for j, parent in enumerate(parents):
        result[parent + 1].append(j)
    return result


def tree_depth(parents: Sequence[int]) -> int:
    """``1 + max depth``: a chain of ``K`` drafts has depth ``K``; 0 for no nodes."""
    return 1 + max(depths(parents)) if len(parents) else 0


def tensor_depths(parents: torch.Tensor) -> torch.Tensor:
    """``[B, N]`` int64 depths of ``[B, N]`` parents (torch, no host read); a node whose parent is outside
    ``[-1, j)`` gets depth 0 (such a node is never reached, so its depth is never used)."""
    batch, num_nodes = parents.shape
    parents = parents.to(torch.int64)
    result = torch.zeros(batch, num_nodes, dtype=torch.int64, device=parents.device)
    for j in range(1, num_nodes):
        parent = parents[:, j]
        attached = (parent >= 0) & (parent < j)
        result[:, j] = torch.where(attached, result.gather(1, parent.clamp(0, j - 1)[:, None])[:, 0] + 1, 0)
    return result


def chain(num_drafts: int) -> list[int]:
    """The parents of a chain of ``num_drafts`` drafts: ``[-1, 0, 1, ..., K - 2]``."""
    return list(range(-1, num_drafts - 1))


def full_tree(width: int, depth: int) -> list[int]:
    """The full tree where each node down to depth ``depth - 1`` has ``width`` children, level by level."""
    parents: list[int] = []
    level = [-1]
    for _ in range(depth):
        next_level = []
        for parent in level:
            for _ in range(width):
                next_level.append(len(parents))
                parents.append(parent)
        level = next_level
    return parents


def batched(parents: Sequence[int], batch: int, *, candidates: Candidates = "independent",
            device: torch.device | str = "cpu") -> DraftTree:
    """One request's parent list as the ``DraftTree`` of a batch of ``batch`` requests sharing it."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0:
        raise SpecbenchError(f"batch must be a whole number >= 0, got {batch!r}")
    rows = torch.tensor(check_parents(parents), dtype=torch.int64, device=device)
    return DraftTree(rows[None, :].expand(batch, len(rows)).contiguous(), candidates)




def parse_tree_shape(text: str) -> list[int]:
    """The parents of a tree shape string (``specbench.tree_shapes``: ``chain:K``, ``WxD``, the full tree of
    width ``W`` and depth ``D``, or ``parents:-1,0,0,...``). ``sequoia:N`` names a tree only together with
    positional rates, so it is refused here with one sentence."""
    from specbench import tree_shapes

    if not isinstance(text, str):
        raise SpecbenchError(f"a tree shape is a string such as '2x2', got {type(text).__name__}")
    shape = tree_shapes.parse_tree_shape(text, forms=tree_shapes.TREE_FORMS)
    if isinstance(shape, tree_shapes.SequoiaRequest):
        raise SpecbenchError(f"tree shape {text.strip()!r} is chosen from positional acceptance rates, which "
                             f"verification has none of: give {tree_shapes.TREE_FORMS}")
    return list(shape.parents)


# --- converters -------------------------------------------------------------------------------------------------


class SGLangTree(NamedTuple):
    """SGLang's tree inputs in this layout (``from_sglang``), all on the CPU.

    - ``tree``: ``DraftTree`` with ``parents`` ``[B, N]`` int64, ``N = M - 1``, ``-1`` past a request's nodes.
    - ``draft_token_ids`` ``[B, N]`` int64: each node's candidate token, ``-1`` padding.
    - ``num_draft_tokens`` ``[B]`` int32: nodes reached from the root (the rest is padding).
    - ``node_index`` ``[B, N]`` int64: each node's index in SGLang's ``candidates`` row (1..M-1), ``-1`` padding.
    - ``row_index`` ``[B, N + 1]`` int64: ``retrive_index`` of the root then of each node, the flat rows of
      SGLang's target logits that are this layout's target rows 0..N (``-1`` padding).
    """

    tree: DraftTree
    draft_token_ids: torch.Tensor
    num_draft_tokens: torch.Tensor
    node_index: torch.Tensor
    row_index: torch.Tensor


def _int_tensor(name: str, value: object, dims: int) -> torch.Tensor:
    # a converter's input: an integer tensor of `dims` dimensions, else one sentence
    if not isinstance(value, torch.Tensor) or value.dim() != dims or value.dtype.is_floating_point \
            or value.dtype.is_complex or value.dtype == torch.bool:
        got = (f"a {value.dim()}-d {str(value.dtype).removeprefix('torch.')} tensor" if isinstance(value, torch.Tensor)
               else type(value).__name__)
        raise SpecbenchError(f"{name} must be a {dims}-d integer tensor, got {got}")
    return value


def from_sglang(candidates: torch.Tensor, retrive_next_token: torch.Tensor, retrive_next_sibling: torch.Tensor,
                retrive_index: torch.Tensor | None = None) -> SGLangTree:
    """This layout from SGLang's (``verify_tree_greedy``'s inputs, ``[B, M]`` each, node 0 the root).

    SGLang walks a node's children from ``retrive_next_token[b, node]`` along ``retrive_next_sibling``
    and tests them in that order, so that order is the children's rank here. Nodes are numbered level
    by level (breadth first), siblings in list order; nodes no list reaches are left out.
    ``retrive_index`` defaults to ``b * M + node`` (SGLang's own numbering of a full batch).
    """
    tensors = {"candidates": candidates, "retrive_next_token": retrive_next_token,
               "retrive_next_sibling": retrive_next_sibling}
    if retrive_index is not None:
        tensors["retrive_index"] = retrive_index
    for name, tensor in tensors.items():
        _int_tensor(name, tensor, 2)
        if tensor.shape != candidates.shape:
            raise SpecbenchError(f"{name} must be a [B, M] tensor like candidates, got "
                                 f"{list(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__}")
    batch, width = candidates.shape
    if width < 1:
        raise SpecbenchError("candidates must hold the root (node 0) in every row")
    first = retrive_next_token.tolist()
    sibling = retrive_next_sibling.tolist()
    tokens = candidates.tolist()
    flat = retrive_index.tolist() if retrive_index is not None else [
        [b * width + m for m in range(width)] for b in range(batch)]
    num_nodes = width - 1
    parents = torch.full((batch, num_nodes), -1, dtype=torch.int64)
    draft_token_ids = torch.full((batch, num_nodes), -1, dtype=torch.int64)
    node_index = torch.full((batch, num_nodes), -1, dtype=torch.int64)
    row_index = torch.full((batch, num_nodes + 1), -1, dtype=torch.int64)
    counts = torch.zeros(batch, dtype=torch.int32)
    for b in range(batch):
        row_index[b, 0] = flat[b][0]
        order: list[int] = []  # SGLang node of each of our nodes
        ours = {0: -1}  # SGLang node -> our index (the root: -1)
        level = [0]
        while level:
            next_level = []
            for node in level:
                child = first[b][node]
                while child != -1:
                    if not 0 < child < width or child in ours:
                        raise SpecbenchError(f"SGLang tree of request {b}: node {child} is out of range or reached "
                                             f"twice (the lists must form a tree below node 0)")
                    ours[child] = len(order)
                    parents[b, len(order)] = ours[node]
                    order.append(child)
                    next_level.append(child)
                    child = sibling[b][child]
            level = next_level
        for j, node in enumerate(order):
            draft_token_ids[b, j] = tokens[b][node]
            node_index[b, j] = node
            row_index[b, j + 1] = flat[b][node]
        counts[b] = len(order)
    return SGLangTree(DraftTree(parents), draft_token_ids, counts, node_index, row_index)


def to_sglang(parents: torch.Tensor, draft_token_ids: torch.Tensor,
              num_draft_tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """SGLang's layout of trees in this one (the inverse of ``from_sglang``), on the CPU: ``candidates``
    (node 0 the root, with token 0: never compared; node ``j + 1`` this layout's node ``j``),
    ``retrive_index`` (``b * (N + 1) + m``), ``retrive_next_token`` and ``retrive_next_sibling`` (children
    linked in rank order, only a request's first ``num_draft_tokens`` nodes and only those below the root),
    ``[B, N + 1]`` int64 each, and ``depth`` (the deepest linked node's depth plus one, 0 for no node: the
    most drafts a path accepts)."""
    batch, num_nodes = _int_tensor("draft_token_ids", draft_token_ids, 2).shape
    if _int_tensor("parents", parents, 2).shape != draft_token_ids.shape:
        raise SpecbenchError(f"parents must be [B, N] like draft_token_ids {list(draft_token_ids.shape)}, got "
                             f"{list(parents.shape)}")
    if _int_tensor("num_draft_tokens", num_draft_tokens, 1).shape != (batch,):
        raise SpecbenchError(f"num_draft_tokens must be [B] = [{batch}], got {list(num_draft_tokens.shape)}")
    width = num_nodes + 1
    first = torch.full((batch, width), -1, dtype=torch.int64)
    sibling = torch.full((batch, width), -1, dtype=torch.int64)
    parent_rows, counts = parents.tolist(), num_draft_tokens.tolist()
    deepest = 0
    for b in range(batch):
        last_child = {}  # SGLang node -> its last child linked so far
        depth = {0: 0}
        for j in range(min(max(int(counts[b]), 0), num_nodes)):
            parent = int(parent_rows[b][j])
            if parent + 1 not in depth:
                continue  # (a parent outside [-1, j) or not linked: a node never walked, as in this layout)
            node, above = j + 1, parent + 1
            if above in last_child:
                sibling[b, last_child[above]] = node
            else:
                first[b, above] = node
            last_child[above] = node
            depth[node] = depth[above] + 1
            deepest = max(deepest, depth[node])
    root = torch.zeros((batch, 1), dtype=torch.int64)  # the last accepted token: never compared
    return {"candidates": torch.cat([root, draft_token_ids.cpu().to(torch.int64)], dim=1),
            "retrive_index": torch.arange(batch * width, dtype=torch.int64).reshape(batch, width),
            "retrive_next_token": first, "retrive_next_sibling": sibling, "depth": torch.tensor(deepest)}


class ConvertedTree(NamedTuple):
    """One tree from an EAGLE layout: ``parents`` (this layout, a plain list) and ``source``, each node's
    entry in the source layout (a path of ranks for ``tree_choices``; a token index for
    ``retrieve_indices``, where 0 is the root)."""

    parents: list[int]
    source: list


def from_tree_choices(tree_choices: Sequence[Sequence[int]]) -> ConvertedTree:
    """This layout from EAGLE-1's / Medusa's ``tree_choices``: one path of sibling ranks per node.

    Nodes are ordered as those projects order them, by (path length, path): parents come first and
    siblings in increasing rank. Every proper prefix of a path must itself be a path.
    """
    paths = []
    for choice in tree_choices:
        if isinstance(choice, (str, bytes)) or not isinstance(choice, Sequence):
            raise SpecbenchError(f"tree_choices holds paths, each a list of sibling ranks, got {choice!r}")
        path = tuple(choice)
        if not path or any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in path):
            raise SpecbenchError(f"tree_choices holds non-empty paths of ranks >= 0, got {list(choice)!r}")
        paths.append(path)
    if len(set(paths)) != len(paths):
        raise SpecbenchError("tree_choices holds a path twice")
    paths.sort(key=lambda path: (len(path), path))
    index = {path: j for j, path in enumerate(paths)}
    parents = []
    for path in paths:
        if len(path) > 1 and path[:-1] not in index:
            raise SpecbenchError(f"tree_choices has {list(path)} but not its parent {list(path[:-1])}")
        parents.append(index[path[:-1]] if len(path) > 1 else -1)
    return ConvertedTree(parents, [list(path) for path in paths])


def from_retrieve_indices(retrieve_indices: torch.Tensor | Sequence[Sequence[int]]) -> ConvertedTree:
    """This layout from EAGLE-2's ``retrieve_indices`` ``[L, D + 1]``: each row a path of token indices from
    the root (index 0) to a leaf, ``-1`` padded.

    Nodes are ordered by (depth, token index), so siblings keep their index order (their rank) and
    ``source[j]`` is node ``j``'s token index (``draft_token_ids[j] = tokens[source[j]]``, target row
    ``j + 1`` = the target's row at that index).
    """
    if isinstance(retrieve_indices, torch.Tensor):
        rows = _int_tensor("retrieve_indices", retrieve_indices, 2).tolist()
    else:
        rows = list(retrieve_indices)
    parent_of: dict[int, int] = {}
    depth_of: dict[int, int] = {}
    for row in rows:
        items = None if isinstance(row, (str, bytes)) or not hasattr(row, "__iter__") else list(row)
        if items is None or any(isinstance(i, bool) or not isinstance(i, (numbers.Integral, torch.Tensor)) or (
                isinstance(i, torch.Tensor) and (i.dim() != 0 or i.dtype.is_floating_point)) for i in items):
            raise SpecbenchError(f"retrieve_indices rows are lists of whole token indices, -1 padded, got {row!r}")
        path = [int(i) for i in items if int(i) != -1]
        if not path or path[0] != 0 or any(i < 0 for i in path):
            raise SpecbenchError(f"retrieve_indices rows are paths from the root (index 0), -1 padded, got {row}")
        for depth, (parent, node) in enumerate(itertools.pairwise(path)):
            if parent_of.setdefault(node, parent) != parent or node == 0:
                raise SpecbenchError(f"retrieve_indices gives token {node} two parents ({parent_of[node]} and "
                                     f"{parent})")
            depth_of[node] = depth
    order = sorted(parent_of, key=lambda node: (depth_of[node], node))
    ours = {0: -1, **{node: j for j, node in enumerate(order)}}
    return ConvertedTree([ours[parent_of[node]] for node in order], order)
