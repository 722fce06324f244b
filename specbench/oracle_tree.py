"""Exact float64 law of one tree verification step, the yardstick of ``specbench verify --tree``.

``tree_law`` walks one request's tree by the rules of ``specbench/verification.py`` ("Trees"), with every
random choice replaced by its probability: each acceptance test by ``min(1, r(x) / (R q_k(x)))``, each
race by its law, and, when candidates are sampled, each candidate token by the law it was drawn from.
The result is the law of the whole emitted sequence (the accepted path's tokens, then the final token),
from which come the law of each output slot and of the accepted depth.

Rows are given as functions of where the walk is, so the same code serves inputs fixed per node (what a
``verify`` call holds) and rows that depend on the tokens drawn above them (a real target and drafter,
where the exactness theorem applies): ``target_row(place, prefix)`` is the target law of the token after
``place`` (0 the root, ``j + 1`` node ``j``), ``prefix`` the path's tokens up to it; ``draft_row(node,
prefix)`` the law node ``node``'s token is drawn from (``prefix`` its parent's path). Meant for small
``V`` and trees of a few nodes: the sums run over every candidate token of every node a walk can reach.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from specbench.trees import check_parents, children, depths

Row = Callable[[int, tuple], np.ndarray]


class TreeLaw(NamedTuple):
    """The law of one tree step: ``sequences`` maps each emitted sequence (path tokens then the final
    token) to its probability (they sum to 1)."""

    sequences: dict[tuple[int, ...], float]

    def accepted_law(self, max_depth: int) -> np.ndarray:
        """``[max_depth + 1]``: ``P(A = a)``, ``A`` the accepted path's length."""
        law = np.zeros(max_depth + 1)
        for sequence, probability in self.sequences.items():
            law[len(sequence) - 1] += probability
        return law

    def slot_law(self, slot: int, vocab: int) -> np.ndarray:
        """``[V]``: the law of output slot ``slot`` given ``A >= slot`` (zeros when no walk gets there)."""
        law = np.zeros(vocab)
        for sequence, probability in self.sequences.items():
            if len(sequence) > slot:
                law[sequence[slot]] += probability
        total = law.sum()
        return law / total if total > 0 else law

    def continued(self, length: int, target: Callable[[tuple], np.ndarray]) -> dict[tuple[int, ...], float]:
        """The law of the first ``length`` tokens when the target ``target(prefix)`` continues each emitted
        sequence (and a longer one is cut): exact sampling makes it the target's own law."""
        law: dict[tuple[int, ...], float] = defaultdict(float)
        for sequence, probability in self.sequences.items():
            for extended, weight in _extend(sequence[:length], length, target):
                law[extended] += probability * weight
        return dict(law)


def _extend(prefix: tuple, length: int, target: Callable[[tuple], np.ndarray]):
    if len(prefix) >= length:
        yield prefix, 1.0
        return
    row = target(prefix)
    for y in np.flatnonzero(row > 0):
        for extended, weight in _extend(prefix + (int(y),), length, target):
            yield extended, float(row[y]) * weight


def target_law(length: int, target: Callable[[tuple], np.ndarray]) -> dict[tuple[int, ...], float]:
    """The target's own law of its first ``length`` tokens, ``prod_i target(y_<i)(y_i)``."""
    return dict(_extend((), length, target))


def tree_law(
    parents: Sequence[int],
    target_row: Row,
    vocab: int,
    *,
    draft_row: Row | None = None,
    tokens: Sequence[int] | None = None,
    candidates: str = "independent",
    rates: Sequence[Sequence[float]] | None = None,
) -> TreeLaw:
    """The exact law of one request's tree step (module docstring).

    Args:
        parents: the tree (``-1 <= parents[j] < j``).
        target_row: ``(place, prefix) -> [V]`` float64 target law (normalised here).
        vocab: ``V``.
        draft_row: ``(node, prefix) -> [V]`` float64 draft law, or None for one-hot candidates.
        tokens: the node tokens, fixed (``-1``: an absent node), or None to draw each candidate from the
            law it came from (its ``draft_row``): independently for ``"independent"``; for
            ``"without_replacement"`` a node's children one after another without replacement (siblings
            then share one row). One-hot candidates need ``tokens``.
        candidates: ``"independent"`` or ``"without_replacement"``.
        rates: the synthetic mode's ``[D][W]`` conditional table (the probabilistic mode when None).

    Returns:
        ``TreeLaw``.
    """
    parents = check_parents(list(parents))
    kids = children(parents)
    node_depth = depths(parents)
    if draft_row is None and tokens is None:
        raise ValueError("one-hot candidates need the tree's tokens")

    def target(place: int, prefix: tuple) -> np.ndarray:
        row = np.clip(np.asarray(target_row(place, prefix), dtype=np.float64), 0.0, None)
        return row / row.sum()

    def candidate_laws(node: int, rank: int, prefix: tuple, taken: tuple) -> tuple[list[tuple[int, float]], Row]:
        # the candidate tokens of `node` with their probabilities, and q_k as a function of the token
        if draft_row is None:
            def one_hot(x: int) -> np.ndarray:
                row = np.zeros(vocab)
                row[x] = 1.0
                return row
            return [(tokens[node], 1.0)], one_hot
        base = np.clip(np.asarray(draft_row(node, prefix), dtype=np.float64), 0.0, None)
        if candidates == "without_replacement":
            left = 1.0 - sum(base[t] for t in set(taken) if 0 <= t < vocab)
            row = base.copy()
            row[[t for t in taken if 0 <= t < vocab]] = 0.0
            law = row / left if left > 0 else np.zeros(vocab)
        else:
            law = base
        if tokens is not None:
            drawn = [(tokens[node], 1.0)]
        else:
            drawn = [(int(x), float(law[x] / law.sum())) for x in np.flatnonzero(law > 0)]
        return drawn, lambda x: law

    memo: dict[tuple, dict[tuple[int, ...], float]] = {}

    def walk(place: int, prefix: tuple) -> dict[tuple[int, ...], float]:
        if (place, prefix) not in memo:
            memo[place, prefix] = walk_from(place, prefix)
        return memo[place, prefix]

    def walk_from(place: int, prefix: tuple) -> dict[tuple[int, ...], float]:
        p = target(place, prefix)
        out: dict[tuple[int, ...], float] = defaultdict(float)
        here = kids[place]
        depth = node_depth[place - 1] + 1 if place else 0

        def emit(law: np.ndarray, weight: float) -> None:
            for y in np.flatnonzero(law > 0):
                out[(int(y),)] += weight * float(law[y])

        def try_rank(k: int, r: np.ndarray, mass: float, taken: tuple, weight: float) -> None:
            if weight <= 0.0:
                return
            if k == len(here):  # every child rejected: the residual (the target's own token: synthetic)
                emit(p if rates is not None or not (r > 0).any() else r / r.sum(), weight)
                return
            node = here[k]
            drawn, q_of = candidate_laws(node, k, prefix, taken)
            # rejections lead to few states (one for independent candidates, whatever the token): merge them
            after: dict[tuple, list] = {}

            def reject(key: tuple, r_next: np.ndarray, mass_next: float, taken_next: tuple, w: float) -> None:
                if key in after:
                    after[key][3] += w
                else:
                    after[key] = [r_next, mass_next, taken_next, w]

            for x, chance in drawn:
                key = taken + (x,) if candidates == "without_replacement" else ()
                if not 0 <= x < vocab:  # absent: rejected without a test, r as it was
                    reject(("absent",) + key, r, mass, taken + (x,), weight * chance)
                    continue
                if rates is not None:
                    inside = depth < len(rates) and k < len(rates[depth])
                    accept = float(rates[depth][k]) if inside else 0.0
                else:
                    q_k = q_of(x)
                    if q_k[x] > 0:
                        accept = min(1.0, r[x] / (mass * q_k[x]))
                    else:
                        accept = 1.0 if r[x] > 0 else 0.0
                if accept > 0:
                    for sequence, probability in walk(node + 1, prefix + (x,)).items():
                        out[(x,) + sequence] += weight * chance * accept * probability
                if accept < 1:
                    if rates is None:  # r <- max(r - R q_k, 0), R <- sum r
                        left = np.clip(r - mass * q_k, 0.0, None)
                        reject(key, left, float(left.sum()), taken + (x,), weight * chance * (1 - accept))
                    else:
                        reject(key, r, mass, taken + (x,), weight * chance * (1 - accept))
            for r_next, mass_next, taken_next, w in after.values():
                try_rank(k + 1, r_next, mass_next, taken_next, w)

        if not here:
            emit(p, 1.0)  # a leaf: the bonus
        else:
            try_rank(0, p.copy(), 1.0, (), 1.0)
        return out

    return TreeLaw(dict(walk(0, ())))


def fixed_rows(target_rows: np.ndarray, draft_rows: np.ndarray | None = None) -> tuple[Row, Row | None]:
    """``target_row`` and ``draft_row`` of rows fixed per place / node (``[N + 1, V]``, ``[N, V]``), as a
    ``verify`` call holds them: the prefix is ignored."""
    target_rows = np.asarray(target_rows, dtype=np.float64)

    def target_row(place: int, prefix: tuple) -> np.ndarray:
        return target_rows[place]

    if draft_rows is None:
        return target_row, None
    draft_rows = np.asarray(draft_rows, dtype=np.float64)

    def draft_row(node: int, prefix: tuple) -> np.ndarray:
        return draft_rows[node]

    return target_row, draft_row
