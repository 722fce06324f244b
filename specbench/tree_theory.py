"""Tree acceptance theory: expected tokens per step for a draft tree, the accepted-depth law, the best tree.

Notation: a tree of ``N`` nodes (``tree_shapes.TreeShape``); ``P(j)`` is the probability that a step
accepts node ``j`` (reaches it and accepts it: the accepted path runs through ``j``); ``A`` the accepted
path's length, ``0..D`` for a tree of depth ``D``. A step emits ``A + 1`` tokens, so the expected
tokens per step are ``L = 1 + E[A] = 1 + sum_j P(j)`` (the accepted path holds each node on it once).

Deterministic candidates (one-hot drafts, distinct sibling tokens, SpecInfer's rule): node ``j``'s
token ``x_j`` is accepted with probability ``p(x_j)`` under its parent's target row, whatever its
rank, because each rejected sibling's mass leaves the residual and the rest is renormalised
(``P(c_k | reached) = prod_{i<k} (1 - p_i / R_i) * p_k / R_k = p_k`` with ``R_i = 1 - p_0 - ... - p_{i-1}``).
So ``P(j)`` is the product of the target probabilities of the tokens on the path to ``j``.

Positional model (Sequoia, Chen et al. 2024, arXiv 2402.12374): the child of rank ``k`` at depth
``d`` is accepted with the *conditional* rate ``a[d][k]``, given its parent was reached and its
elder siblings were rejected; a single vector ``a[k]`` is the same at every depth, and ranks or
depths past the table have rate 0. Then
``P(j) = P(parent(j)) * prod_{i<k} (1 - a[d][i]) * a[d][k]`` (``P(root) = 1``), and since the nodes of
one depth are accepted in disjoint events, ``P(A >= i) = sum of P(j) over the nodes of depth i - 1``:
the accepted-depth law is exact, in the chain's notation (``acceptance.accepted_distribution``).
A chain with the table ``[[c_1], [c_2], ...]`` has ``P(A >= i) = c_1 ... c_i = p_i``.

Best tree (Sequoia's dynamic programme): with ``w_k = prod_{i<k} (1 - a_i) a_k`` the weight of
rank ``k`` under a reached node, the best sum ``T(n)`` of ``P`` over ``n`` nodes hung below a reached
node is ``max over n_0 + n_1 + ... = n, n_k >= 1`` of ``sum_k w_k (1 + T'(n_k - 1))``, ``T'`` the
same one level deeper. The split over ranks is a knapsack: ``G(k, m)``, the best of ``m`` nodes
under ranks ``k, k+1, ...``, is ``max_s w_k (1 + T'(s - 1)) + G(k + 1, m - s)``, ``G(k, 0) = 0``, and
past the table's last rank the nodes are leaves of rate 0 (``G = 0``). A depth limit ``H`` leaves no
room below depth ``H - 1`` (``T(0) = 0``, ``T(n > 0)`` impossible). ``O(levels x N^2 x W)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench import acceptance
from specbench.errors import SpecbenchError
from specbench.tree_shapes import SequoiaRequest, ShapeRequest, TreeShape


@dataclass(frozen=True)
class PositionalRates:
    """Conditional acceptance rates by (depth, rank): ``rows[d][k]``; ``every_depth``: one row for all depths."""

    rows: tuple[tuple[float, ...], ...]
    every_depth: bool

    def rate(self, depth: int, rank: int) -> float:
        """``a[depth][rank]``: 0 past the table."""
        row = self.row(depth)
        return row[rank] if rank < len(row) else 0.0

    def row(self, depth: int) -> tuple[float, ...]:
        if self.every_depth:
            return self.rows[0]
        return self.rows[depth] if depth < len(self.rows) else ()

    @property
    def label(self) -> str:
        return " / ".join(acceptance.format_rates(row) for row in self.rows)

    def as_lists(self) -> list[float] | list[list[float]]:
        """The rates as given: one list (every depth) or a list of rows."""
        return list(self.rows[0]) if self.every_depth else [list(row) for row in self.rows]


def positional_rates(values: Sequence[float] | Sequence[Sequence[float]] | PositionalRates) -> PositionalRates:
    """A vector ``a[k]`` (the same at every depth) or a table ``a[d][k]`` of conditional rates in ``[0, 1]``."""
    if isinstance(values, PositionalRates):
        return values
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise SpecbenchError(f"tree acceptance rates must be a list of rates or a list of rows, got {values!r}")
    every_depth = not isinstance(values[0], Sequence) or isinstance(values[0], (str, bytes))
    raw_rows = [values] if every_depth else list(values)
    rows = []
    for row in raw_rows:
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
            raise SpecbenchError(f"tree acceptance rates must be a list of rates or a list of rows, got {values!r}")
        checked = []
        for value in row:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
                    or not 0.0 <= value <= 1.0:
                raise SpecbenchError(f"tree acceptance rates must be numbers in [0, 1], got {value!r} in "
                                     f"{list(row)!r}")
            checked.append(float(value))
        rows.append(tuple(checked))
    if not any(rows):
        raise SpecbenchError("tree acceptance rates need at least one rate, got only empty rows")
    return PositionalRates(tuple(rows), every_depth)


# ---- closed forms --------------------------------------------------------------------------------


def path_probabilities(shape: TreeShape, node_probabilities: Sequence[float]) -> list[float]:
    """``P(j)``: the product of ``node_probabilities`` along the path to each node (deterministic candidates).

    ``node_probabilities[j]``: the target probability of node ``j``'s token under its parent's row.
    """
    if len(node_probabilities) != shape.num_nodes:
        raise SpecbenchError(f"need one target probability per node ({shape.num_nodes}), got "
                             f"{len(node_probabilities)}")
    result: list[float] = []
    for j, parent in enumerate(shape.parents):
        value = float(node_probabilities[j])
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise SpecbenchError(f"target probability of node {j} must lie in [0, 1], got {value!r}")
        result.append(value * (1.0 if parent < 0 else result[parent]))
    return result


def deterministic_expected_tokens(shape: TreeShape, node_probabilities: Sequence[float]) -> float:
    """Expected tokens per step with deterministic candidates: ``1 + sum_j P(j)`` (module docstring).

    Sibling tokens must be distinct, so their probabilities under one row sum to at most 1.
    """
    paths = path_probabilities(shape, node_probabilities)
    for row in shape.children:
        total = sum(float(node_probabilities[j]) for j in row)
        if total > 1.0 + 1e-9:
            raise SpecbenchError(f"sibling nodes {list(row)} have target probabilities summing to {total:g} > 1: "
                                 f"sibling tokens must be distinct")
    return 1.0 + math.fsum(paths)


def acceptance_probabilities(shape: TreeShape, rates) -> list[float]:
    """``P(j)`` under the positional model (module docstring), for each node."""
    table = positional_rates(rates)
    result = [0.0] * shape.num_nodes
    for parent_row, siblings in enumerate(shape.children):
        reached = 1.0 if parent_row == 0 else result[parent_row - 1]
        if not siblings:
            continue
        depth = shape.depths[siblings[0]]
        rejected = 1.0  # prod_{i<k} (1 - a_i)
        for rank, node in enumerate(siblings):
            rate = table.rate(depth, rank)
            result[node] = reached * rejected * rate
            rejected *= 1.0 - rate
    return result


def expected_tokens(shape: TreeShape, rates) -> float:
    """Expected tokens per step ``L = 1 + sum_j P(j)`` under the positional model."""
    return 1.0 + math.fsum(acceptance_probabilities(shape, rates))


def depth_rates(shape: TreeShape, rates) -> list[float]:
    """``P(A >= i)`` for ``i = 1..D``: the sum of ``P(j)`` over the nodes of depth ``i - 1`` (non-increasing)."""
    sums = [0.0] * shape.depth
    for node, value in enumerate(acceptance_probabilities(shape, rates)):
        sums[shape.depths[node]] += value
    result: list[float] = []
    for value in sums:  # exact sums never rise; rounding could by an ulp
        result.append(min(value, result[-1] if result else 1.0))
    return result


def accepted_depth_distribution(shape: TreeShape, rates) -> list[float]:
    """``P(A = j)`` for ``j = 0..D``: the accepted path's length law under the positional model."""
    return acceptance.accepted_distribution(depth_rates(shape, rates))


# ---- the best tree (Sequoia) ---------------------------------------------------------------------


@dataclass(frozen=True)
class BestTree:
    """The best tree of ``shape.num_nodes`` nodes for ``rates`` and its expected tokens per step."""

    shape: TreeShape
    expected_tokens: float


_NO_ROOM = "no room"  # a level past the depth limit: only an empty subtree fits


def _weights(row: Sequence[float], num_nodes: int) -> list[float]:
    # w_k = prod_{i<k} (1 - a_i) a_k for the ranks a tree of num_nodes can use; trailing zeros dropped
    weights, rejected = [], 1.0
    for rate in row[:num_nodes]:
        weights.append(rejected * rate)
        rejected *= 1.0 - rate
    while weights and weights[-1] == 0.0:
        weights.pop()
    return weights


def best_tree(num_nodes: int, rates, *, max_depth: int | None = None) -> BestTree:
    """The tree of exactly ``num_nodes`` nodes (at most ``max_depth`` deep) with the most expected tokens.

    ``rates``: a vector ``a[k]`` (the same at every depth, Sequoia's model) or a table ``a[d][k]``
    (depths past it: rate 0). Ties go to the smaller subtree under the lower rank. The returned
    shape is numbered depth first (each node before its subtree, ranks in order).
    """
    table = positional_rates(rates)
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise SpecbenchError(f"the best tree needs a whole number of nodes >= 1, got {num_nodes!r}")
    if max_depth is not None and (isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1):
        raise SpecbenchError(f"the best tree's depth limit must be a whole number >= 1, got {max_depth!r}")
    n = num_nodes
    # levels: the depth of the children placed; a vector without a limit is one level feeding itself
    if table.every_depth and max_depth is None:
        levels = [0]
        following = {0: 0}
    else:
        deepest = min(max_depth if max_depth is not None else n, n if table.every_depth else len(table.rows) + 1)
        levels = list(range(deepest))
        following = {d: d + 1 for d in levels}
    best: dict = {_NO_ROOM: np.where(np.arange(n + 1) == 0, 0.0, -np.inf)}
    choices: dict = {}
    for level in reversed(levels):
        nxt = following[level]
        if nxt != level and nxt not in best:
            if max_depth is not None and nxt >= max_depth:
                nxt = following[level] = _NO_ROOM
            else:  # never holds a node: a tree of n nodes is at most n deep, a table's last level is all rate 0
                best[nxt] = np.zeros(n + 1)
        weights = _weights(table.row(level), n)
        ranks = len(weights)
        value = np.full(n + 1, -np.inf)
        knapsack = np.full((ranks + 1, n + 1), -np.inf)
        knapsack[ranks, :] = 0.0  # leftover nodes: leaves of rate 0 past the last rank
        knapsack[:, 0] = 0.0
        choice = np.zeros((ranks, n + 1), dtype=np.int64)
        value[0] = 0.0
        best[level] = value  # a level that feeds itself reads its own smaller sizes
        for m in range(1, n + 1):
            below = best[nxt][:m]  # T'(s - 1) for s = 1..m
            feasible = np.isfinite(below)
            for k in range(ranks - 1, -1, -1):
                gain = np.where(feasible, weights[k] * (1.0 + np.where(feasible, below, 0.0)), -np.inf)
                total = gain + knapsack[k + 1, :m][::-1]  # G(k + 1, m - s)
                s = int(np.argmax(total))
                knapsack[k, m] = total[s]
                choice[k, m] = s + 1
            value[m] = knapsack[0, m]
        choices[level] = (ranks, choice)
    if not np.isfinite(best[levels[0]][n]):
        raise SpecbenchError(f"no tree of {n} nodes fits depth {max_depth}")  # not reached: leaves always fit

    parents: list[int] = []

    def place(level, parent: int, count: int) -> None:
        ranks, choice = choices[level]
        for k in range(ranks):
            if count == 0:
                return
            size = int(choice[k, count])
            node = len(parents)
            parents.append(parent)
            if size > 1:
                place(following[level], node, size - 1)
            count -= size
        for _ in range(count):  # leftover nodes: leaves of rate 0
            parents.append(parent)

    place(levels[0], -1, n)
    label = f"sequoia:{n}" + ("" if max_depth is None else f":{max_depth}")
    shape = TreeShape(tuple(parents), label)
    return BestTree(shape, expected_tokens(shape, table))


def resolve_shape(request: ShapeRequest, rates) -> TreeShape:
    """A parsed shape string as a shape: ``sequoia:N[:DEPTH]`` becomes the best tree for ``rates``."""
    if isinstance(request, SequoiaRequest):
        return best_tree(request.num_nodes, rates, max_depth=request.max_depth).shape
    return request


def expected_tokens_many(shape: TreeShape, tables: np.ndarray) -> np.ndarray:
    """``L`` of one shape under ``M`` rate tables at once: ``tables`` ``[M, D, W]`` float64 (``a[m][d][k]``;
    depths and ranks past it: 0). Returns ``[M]``; the same numbers as ``expected_tokens`` table by table."""
    tables = np.asarray(tables, dtype=np.float64)
    if tables.ndim != 3:
        raise SpecbenchError(f"rate tables must be [M, D, W], got shape {tables.shape}")
    count, depths, width = tables.shape
    reached = np.ones((shape.num_nodes + 1, count))  # row 0: the root
    for row, siblings in enumerate(shape.children):
        if not siblings:
            continue
        depth = shape.depths[siblings[0]]
        rejected = np.ones(count)
        for rank, node in enumerate(siblings):
            rate = tables[:, depth, rank] if depth < depths and rank < width else np.zeros(count)
            reached[node + 1] = reached[row] * rejected * rate
            rejected = rejected * (1.0 - rate)
    return 1.0 + reached[1:].sum(axis=0)
