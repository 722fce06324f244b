"""Draft-tree shapes: the parent list of one request's tree, and the CLI's shape strings.

A tree of ``N`` nodes numbered ``0..N-1`` in topological order: ``parents[j]`` is node ``j``'s
parent, ``-1`` for a child of the root (the last accepted token); a valid list has
``-1 <= parents[j] < j``. Node ``j``'s depth is 0 under the root, its parent's plus one otherwise;
the tree's depth is one more than the deepest node's (a chain of ``K`` drafts has depth ``K``).
The children of a node are ranked ``0, 1, ...`` in increasing index order.

Shape strings (``--tree SHAPE``):

- ``chain:K``: a chain of ``K`` drafts, ``parents = [-1, 0, ..., K-2]``;
- ``WxD``: the full tree where every node above depth ``D-1`` has ``W`` children
  (``N = W + W^2 + ... + W^D``), numbered level by level;
- ``sequoia:N`` or ``sequoia:N:DEPTH``: the best tree of ``N`` nodes (at most ``DEPTH`` deep) for the
  positional rates in use. It is not a shape until rates are known: the parser returns a
  :class:`SequoiaRequest`, which ``tree_theory.resolve_shape(request, rates)`` turns into one;
- ``parents:-1,0,0,1``: an explicit parent list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from specbench.errors import SpecbenchError

# 1024 nodes: Sequoia's largest trees hold 768; past that every table and simulation grows for trees
# no verifier runs. Depth as the chain's K cap (acceptance.MAX_NUM_SPEC_TOKENS).
MAX_TREE_NODES = 1024
MAX_TREE_DEPTH = 64


@dataclass(frozen=True)
class TreeShape:
    """One request's draft tree: ``parents`` (``-1`` for the root's children); ``name`` how it was asked for."""

    parents: tuple[int, ...]
    name: str | None = None

    def __post_init__(self) -> None:
        parents = tuple(self.parents)
        if not parents:
            raise SpecbenchError("a draft tree needs at least one node, got an empty parent list")
        if len(parents) > MAX_TREE_NODES:
            raise SpecbenchError(f"a draft tree holds at most {MAX_TREE_NODES} nodes, got {len(parents)}")
        for j, parent in enumerate(parents):
            if isinstance(parent, bool) or not isinstance(parent, int) or not -1 <= parent < j:
                earlier = "" if j == 0 else f" or an earlier node ({'0' if j == 1 else f'0..{j - 1}'})"
                raise SpecbenchError(f"parent of node {j} must be -1 (the root){earlier}, got {parent!r}")
        object.__setattr__(self, "parents", parents)
        if self.depth > MAX_TREE_DEPTH:
            raise SpecbenchError(f"a draft tree is at most {MAX_TREE_DEPTH} deep, got depth {self.depth}")

    @property
    def num_nodes(self) -> int:
        return len(self.parents)

    @cached_property
    def depths(self) -> tuple[int, ...]:
        """``depths[j]``: node ``j``'s depth (0 for the root's children)."""
        result: list[int] = []
        for parent in self.parents:
            result.append(0 if parent < 0 else result[parent] + 1)
        return tuple(result)

    @property
    def depth(self) -> int:
        """1 + the deepest node's depth: the most drafts a step can accept."""
        return 1 + max(self.depths)

    @cached_property
    def children(self) -> tuple[tuple[int, ...], ...]:
        """``children[v + 1]``: node ``v``'s children by rank (``children[0]``: the root's)."""
        table: list[list[int]] = [[] for _ in range(self.num_nodes + 1)]
        for j, parent in enumerate(self.parents):
            table[parent + 1].append(j)
        return tuple(tuple(row) for row in table)

    @cached_property
    def ranks(self) -> tuple[int, ...]:
        """``ranks[j]``: node ``j``'s rank among its siblings (0 for the first child)."""
        result = [0] * self.num_nodes
        for row in self.children:
            for rank, node in enumerate(row):
                result[node] = rank
        return tuple(result)

    @property
    def width(self) -> int:
        """The most children any node (or the root) has."""
        return max(len(row) for row in self.children)

    @property
    def is_chain(self) -> bool:
        return self.parents == tuple(range(-1, self.num_nodes - 1))

    @property
    def label(self) -> str:
        """The shape as it was asked for, else ``parents:...``."""
        return self.name if self.name is not None else "parents:" + ",".join(map(str, self.parents))

    @classmethod
    def chain(cls, num_spec_tokens: int) -> TreeShape:
        """The chain of ``K`` drafts."""
        return cls(tuple(range(-1, num_spec_tokens - 1)), f"chain:{num_spec_tokens}")

    @classmethod
    def full(cls, width: int, depth: int) -> TreeShape:
        """Every node above depth ``depth - 1`` has ``width`` children, numbered level by level."""
        nodes = sum(width**d for d in range(1, depth + 1))
        if nodes > MAX_TREE_NODES:
            raise SpecbenchError(f"tree {width}x{depth} has {nodes} nodes, more than {MAX_TREE_NODES}")
        parents: list[int] = []
        level = [-1]
        for _ in range(depth):
            below = []
            for parent in level:
                for _ in range(width):
                    below.append(len(parents))
                    parents.append(parent)
            level = below
        return cls(tuple(parents), f"{width}x{depth}")


@dataclass(frozen=True)
class SequoiaRequest:
    """``sequoia:N[:DEPTH]``: the best tree of ``num_nodes`` nodes, at most ``max_depth`` deep (None: any),
    for the rates it is resolved with (``tree_theory.resolve_shape``)."""

    num_nodes: int
    max_depth: int | None = None

    @property
    def label(self) -> str:
        return f"sequoia:{self.num_nodes}" + ("" if self.max_depth is None else f":{self.max_depth}")


ShapeRequest = TreeShape | SequoiaRequest

_FORMS = "chain:K, WxD, sequoia:N[:DEPTH] or parents:-1,0,..."
# the forms that name a tree by themselves (sequoia:N needs positional rates to be chosen): what verification takes
TREE_FORMS = "chain:K, WxD or parents:-1,0,..."


def _whole(text: str, what: str, shape: str, low: int, high: int) -> int:
    if not re.fullmatch(r"[0-9]+", text.strip()):
        raise SpecbenchError(f"tree shape {shape!r}: {what} must be a whole number, got {text!r}")
    value = int(text)
    if not low <= value <= high:
        raise SpecbenchError(f"tree shape {shape!r}: {what} must lie in {low}..{high}, got {value}")
    return value


def parse_tree_shape(text: str, forms: str = _FORMS) -> ShapeRequest:
    """One shape string (see the module docstring) into a :class:`TreeShape` or a :class:`SequoiaRequest`;
    ``forms`` is what the refusal of an unreadable string offers (a caller that refuses ``sequoia`` leaves it out)."""
    shape = text.strip()
    head, _, rest = shape.partition(":")
    head = head.strip().lower()
    if head == "chain" and rest:
        return TreeShape.chain(_whole(rest, "K", shape, 1, MAX_TREE_DEPTH))
    if head == "sequoia" and rest:
        parts = rest.split(":")
        if len(parts) > 2:
            raise SpecbenchError(f"tree shape {shape!r} must read sequoia:N or sequoia:N:DEPTH")
        nodes = _whole(parts[0], "N", shape, 1, MAX_TREE_NODES)
        depth = None if len(parts) == 1 else _whole(parts[1], "DEPTH", shape, 1, MAX_TREE_DEPTH)
        return SequoiaRequest(nodes, depth)
    if head == "parents" and rest:
        try:
            parents = tuple(int(item) for item in rest.split(","))
        except ValueError:
            raise SpecbenchError(f"tree shape {shape!r}: parents must be comma-separated whole numbers") from None
        try:
            return TreeShape(parents, shape)
        except SpecbenchError as exc:
            raise SpecbenchError(f"tree shape {shape!r}: {exc}") from None
    match = re.fullmatch(r"\s*([0-9]+)\s*x\s*([0-9]+)\s*", shape.lower())
    if match:
        width = _whole(match[1], "W", shape, 1, MAX_TREE_NODES)
        depth = _whole(match[2], "D", shape, 1, MAX_TREE_DEPTH)
        return TreeShape.full(width, depth)
    raise SpecbenchError(f"tree shape must read {forms}, got {text!r}")


def split_tree_shapes(text: str) -> list[str]:
    """A comma list of shape strings (``chain:3,2x2,parents:-1,0,0``) into its shapes: the numbers after a
    ``parents:`` item belong to it."""
    shapes: list[str] = []
    for piece in text.split(","):
        if shapes and shapes[-1].strip().lower().startswith("parents:") and re.fullmatch(r"\s*-?[0-9]+\s*", piece):
            shapes[-1] += "," + piece
        else:
            shapes.append(piece)
    return [s.strip() for s in shapes]
