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


class _Rules(NamedTuple):
    # what one walk needs besides the rows: how candidates came, the synthetic table, V
    vocab: int
    candidates: str
    tokens: Sequence[int] | None
    rates: Sequence[Sequence[float]] | None


def _candidate_laws(rules: _Rules, node: int, draft: np.ndarray | None,
                    taken: tuple) -> tuple[list[tuple[int, float]], np.ndarray | None]:
    """Node ``node``'s candidate tokens with their probabilities, and its law ``q_k`` given the elder siblings'
    tokens ``taken`` (None for a one-hot candidate: the one-hot at its token)."""
    if draft is None:
        return [(rules.tokens[node], 1.0)], None
    if rules.candidates == "without_replacement":
        elder = [t for t in set(taken) if 0 <= t < rules.vocab]
        left = 1.0 - float(draft[elder].sum())
        law = draft.copy()
        law[elder] = 0.0
        law = law / left if left > 0 else np.zeros(rules.vocab)
    else:
        law = draft
    if rules.tokens is not None:
        return [(rules.tokens[node], 1.0)], law
    return [(int(x), float(law[x] / law.sum())) for x in np.flatnonzero(law > 0)], law


def _step_at(rules: _Rules, p: np.ndarray, here: list[int], depth: int,
             draft_of: Callable[[int], np.ndarray | None]) -> tuple[dict[tuple[int, int], float], np.ndarray]:
    """One place's share of the walk: ``accepted[(node, x)]``, the probability that child ``node`` is accepted
    carrying token ``x``, and ``final`` ``[V]``, the probability that the walk stops here emitting ``y``.
    ``p`` is the place's target law, ``here`` its children in rank order, ``depth`` the position its
    children are tested at (0 under the root), ``draft_of(node)`` a child's draft row (None: one-hot)."""
    vocab = rules.vocab
    accepted: dict[tuple[int, int], float] = defaultdict(float)
    final = np.zeros(vocab)
    if not here:
        return accepted, p.copy()  # a leaf: the bonus

    # The walk down the ranks, depth first on an explicit stack (a node may have hundreds of children:
    # recursion per sibling would exceed Python's limit). A state: rank k, residual r, its mass R, the
    # elder siblings' tokens, and the probability of having rejected every child before rank k.
    pending: list[tuple[int, np.ndarray, float, tuple, float]] = [(0, p.copy(), 1.0, (), 1.0)]
    while pending:
        k, r, mass, taken, weight = pending.pop()
        if weight <= 0.0:
            continue
        if k == len(here):  # every child rejected: the residual (the target's own token: synthetic)
            law = p if rules.rates is not None or not (r > 0).any() else r / r.sum()
            final = final + weight * law
            continue
        node = here[k]
        drawn, q_k = _candidate_laws(rules, node, draft_of(node), taken)
        # rejections lead to few states (one for independent candidates, whatever the token): merge them
        after: dict[tuple, list] = {}
        for x, chance in drawn:
            key = taken + (x,) if rules.candidates == "without_replacement" else ()
            if not 0 <= x < vocab:  # absent: rejected without a test, r as it was
                after.setdefault(("absent",) + key, [r, mass, taken + (x,), 0.0])[3] += weight * chance
                continue
            law = q_k
            if law is None:
                law = np.zeros(vocab)
                law[x] = 1.0
            if rules.rates is not None:
                inside = depth < len(rules.rates) and k < len(rules.rates[depth])
                accept = float(rules.rates[depth][k]) if inside else 0.0
            elif law[x] > 0:
                accept = min(1.0, r[x] / (mass * law[x]))  # P(u q_k(x) R < r(x))
            else:
                accept = 1.0 if r[x] > 0 else 0.0
            accepted[node, x] += weight * chance * accept
            if accept < 1:
                left = r if rules.rates is not None else np.clip(r - mass * law, 0.0, None)  # r - R q_k
                entry = after.setdefault(key, [left, float(left.sum()) if rules.rates is None else mass,
                                               taken + (x,), 0.0])
                entry[3] += weight * chance * (1 - accept)
        # reversed onto the stack: the states are taken in the order they were made
        pending.extend((k + 1, *state) for state in reversed(list(after.values())))
    return accepted, final


def _rules(vocab, draft_given, tokens, candidates, rates) -> _Rules:
    if not draft_given and tokens is None:
        raise ValueError("one-hot candidates need the tree's tokens")
    if candidates not in ("independent", "without_replacement"):
        raise ValueError(f"candidates must be independent or without_replacement, got {candidates!r}")
    return _Rules(vocab, candidates, None if tokens is None else list(tokens), rates)


def _law(row) -> np.ndarray:
    row = np.clip(np.asarray(row, dtype=np.float64), 0.0, None)
    return row / row.sum()


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
    """The exact law of one request's tree step (module docstring), rows that may depend on the prefix.

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
    rules = _rules(vocab, draft_row is not None, tokens, candidates, rates)
    memo: dict[tuple, dict[tuple[int, ...], float]] = {}

    def walk(place: int, prefix: tuple) -> dict[tuple[int, ...], float]:
        if (place, prefix) in memo:
            return memo[place, prefix]
        depth = node_depth[place - 1] + 1 if place else 0
        draft_of = (lambda node: None) if draft_row is None else (lambda node: _law(draft_row(node, prefix)))
        accepted, final = _step_at(rules, _law(target_row(place, prefix)), kids[place], depth, draft_of)
        out: dict[tuple[int, ...], float] = defaultdict(float)
        for y in np.flatnonzero(final > 0):
            out[(int(y),)] += float(final[y])
        for (node, x), chance in accepted.items():
            if chance > 0:
                for sequence, probability in walk(node + 1, prefix + (x,)).items():
                    out[(x,) + sequence] += chance * probability
        memo[place, prefix] = out
        return out

    return TreeLaw(dict(walk(0, ())))


class FixedRowsLaw(NamedTuple):
    """The laws ``specbench verify --tree`` tests, for rows fixed per node (float64 numpy).

    - ``slot_laws`` ``[D + 1, V]``: the law of output slot ``i`` given ``A >= i`` (zeros if never reached).
    - ``reach`` ``[D + 1]``: ``P(A >= i)``.
    - ``accepted_law`` ``[D + 1]``: ``P(A = a)``.
    - ``node_reach`` ``[N]``: the probability that each node is accepted.
    """

    slot_laws: np.ndarray
    reach: np.ndarray
    accepted_law: np.ndarray
    node_reach: np.ndarray


def fixed_rows_law(
    parents: Sequence[int],
    target_rows: np.ndarray,
    *,
    draft_rows: np.ndarray | None = None,
    tokens: Sequence[int] | None = None,
    candidates: str = "independent",
    rates: Sequence[Sequence[float]] | None = None,
) -> FixedRowsLaw:
    """The per-slot and accepted-depth laws of one request whose rows are fixed per node, as a ``verify``
    call holds them: ``target_rows`` ``[N + 1, V]`` (place ``u``'s target law, normalised here),
    ``draft_rows`` ``[N, V]`` or None (one-hot); other arguments as ``tree_law``. No place's step depends
    on the tokens above it, so each is computed once and weighed by the chance the walk gets there."""
    parents = check_parents(list(parents))
    target_rows = np.asarray(target_rows, dtype=np.float64)
    vocab = target_rows.shape[1]
    rules = _rules(vocab, draft_rows is not None, tokens, candidates, rates)
    kids = children(parents)
    node_depth = depths(parents)
    max_depth = max(node_depth) + 1 if parents else 0
    slots = np.zeros((max_depth + 1, vocab))
    accepted_law = np.zeros(max_depth + 1)
    place_reach = np.zeros(len(parents) + 1)
    place_reach[0] = 1.0
    for place in range(len(parents) + 1):  # topological: a place is reached only from an earlier one
        if place_reach[place] <= 0:
            continue
        depth = node_depth[place - 1] + 1 if place else 0
        draft_of = (lambda node: None) if draft_rows is None else (lambda node: _law(draft_rows[node]))
        accepted, final = _step_at(rules, _law(target_rows[place]), kids[place], depth, draft_of)
        slots[depth] += place_reach[place] * final
        accepted_law[depth] += place_reach[place] * final.sum()
        for (node, x), chance in accepted.items():
            place_reach[node + 1] += place_reach[place] * chance
            slots[depth, x] += place_reach[place] * chance
    reach = slots.sum(axis=1)
    laws = np.where(reach[:, None] > 0, slots / np.where(reach > 0, reach, 1.0)[:, None], 0.0)
    return FixedRowsLaw(laws, reach, accepted_law, place_reach[1:])


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
