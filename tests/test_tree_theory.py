"""Tree acceptance theory: the closed forms against exact enumeration of the rules, the best tree (Sequoia's
dynamic programme) against brute force over every tree of up to 6 nodes."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from specbench import acceptance
from specbench.errors import SpecbenchError
from specbench.tree_shapes import SequoiaRequest, TreeShape, parse_tree_shape
from specbench.tree_theory import (
    acceptance_probabilities,
    accepted_depth_distribution,
    best_tree,
    depth_rates,
    deterministic_expected_tokens,
    expected_tokens,
    expected_tokens_many,
    path_probabilities,
    positional_rates,
    resolve_shape,
)


def every_tree(num_nodes: int):
    """Every parent list of ``num_nodes`` nodes (labelled, so each shape appears several times)."""
    for parents in itertools.product(*[range(-1, j) for j in range(num_nodes)]):
        yield TreeShape(parents)


def walk_law(shape: TreeShape, accept) -> dict[int, Fraction]:
    """Exact law of the accepted path's last node (-1: the root) by walking the rule itself:
    ``accept(node, elders)`` is the chance a reached node's child is accepted given its elder siblings
    were rejected. Independent of the closed forms under test."""
    law: dict[int, Fraction] = {}

    def visit(row: int, reached: Fraction) -> None:
        left = reached
        for rank, child in enumerate(shape.children[row]):
            chance = accept(child, shape.children[row][:rank])
            visit(child + 1, left * chance)
            left *= 1 - chance
        law[row - 1] = law.get(row - 1, Fraction(0)) + left

    visit(0, Fraction(1))
    return law


def test_a_chain_is_the_chain_closed_form():
    rates = [0.9, 0.7, 0.4, 0.1]  # unconditional p_i
    conditional = acceptance.conditional_rates(rates)
    chain = TreeShape.chain(4)
    table = [[c] for c in conditional]
    assert depth_rates(chain, table) == pytest.approx(rates, abs=1e-15)
    assert expected_tokens(chain, table) == pytest.approx(acceptance.mean_acceptance_length(rates), abs=1e-15)
    assert accepted_depth_distribution(chain, table) == pytest.approx(acceptance.accepted_distribution(rates))


def test_positional_closed_form_matches_walking_the_rule():
    shape = TreeShape((-1, 0, 0, -1, 1, 1, 3, 2, -1))
    table = [[Fraction(7, 10), Fraction(1, 2), Fraction(1, 3)], [Fraction(3, 5), Fraction(1, 4)], [Fraction(9, 10)]]

    def accept(child, elders):
        row = table[shape.depths[child]] if shape.depths[child] < len(table) else []
        rank = len(elders)
        return row[rank] if rank < len(row) else Fraction(0)

    law = walk_law(shape, accept)
    assert sum(law.values()) == 1
    floats = [[float(x) for x in row] for row in table]
    reach = acceptance_probabilities(shape, floats)
    for node in range(shape.num_nodes):  # P(j): the chance the walk ends in j's subtree
        below = [n for n in range(shape.num_nodes) if _in_subtree(shape, n, node)]
        assert reach[node] == pytest.approx(float(sum(law.get(n, 0) for n in below)), abs=1e-15)
    depth_law = [0.0] * (shape.depth + 1)
    for node, chance in law.items():
        depth_law[0 if node < 0 else shape.depths[node] + 1] += float(chance)
    assert accepted_depth_distribution(shape, floats) == pytest.approx(depth_law, abs=1e-15)
    mean = sum(j * p for j, p in enumerate(depth_law))
    assert expected_tokens(shape, floats) == pytest.approx(1 + mean, abs=1e-15)


def _in_subtree(shape: TreeShape, node: int, root: int) -> bool:
    while node >= 0:
        if node == root:
            return True
        node = shape.parents[node]
    return False


def test_deterministic_candidates_follow_the_residual_rule():
    # one-hot drafts with distinct sibling tokens: SpecInfer's rule accepts child k with r(x_k) / R, r the
    # residual left after the elder siblings' tokens were removed; the closed form says P(j) = path product
    shape = TreeShape((-1, -1, 0, 0, 0, 1, 2, -1))
    vocab = 5
    generator = random.Random(3)
    rows = []
    for _ in range(shape.num_nodes + 1):
        weights = [Fraction(generator.randint(1, 9)) for _ in range(vocab)]
        rows.append([w / sum(weights) for w in weights])
    token_of = {}
    for row in shape.children:  # distinct tokens among siblings
        token_of.update(zip(row, generator.sample(range(vocab), len(row))))

    def accept(child, elders):
        parent_row = rows[shape.parents[child] + 1]
        residual = 1 - sum(parent_row[token_of[e]] for e in elders)
        return parent_row[token_of[child]] / residual

    law = walk_law(shape, accept)
    mean = sum((0 if node < 0 else shape.depths[node] + 1) * chance for node, chance in law.items())
    probabilities = [float(rows[shape.parents[j] + 1][token_of[j]]) for j in range(shape.num_nodes)]
    assert deterministic_expected_tokens(shape, probabilities) == pytest.approx(1 + float(mean), abs=1e-14)
    # negative control: a rank > 0 is accepted with its conditioned chance, not its bare target probability
    chances = [float(accept(j, shape.children[shape.parents[j] + 1][:shape.ranks[j]])) for j in range(shape.num_nodes)]
    assert 1 + sum(path_probabilities(shape, chances)) > 1 + float(mean) + 1e-3


def test_deterministic_inputs_are_checked():
    shape = TreeShape((-1, -1))
    with pytest.raises(SpecbenchError, match="summing to 1.2 > 1"):
        deterministic_expected_tokens(shape, [0.6, 0.6])
    with pytest.raises(SpecbenchError, match="one target probability per node"):
        deterministic_expected_tokens(shape, [0.6])
    with pytest.raises(SpecbenchError, match="must lie in"):
        deterministic_expected_tokens(shape, [0.6, -0.1])


@pytest.mark.parametrize("rates", [
    [0.8], [0.7, 0.2], [0.6, 0.3, 0.2], [0.5, 0.5, 0.5, 0.5], [0.9, 0.05, 0.4], [0.3, 0.0, 0.6], [1.0, 0.5],
])
def test_best_tree_beats_or_ties_every_tree_of_up_to_6_nodes(rates):
    for n in range(1, 7):
        trees = list(every_tree(n))
        brute = max(expected_tokens(t, rates) for t in trees)
        found = best_tree(n, rates)
        assert found.shape.num_nodes == n
        assert found.expected_tokens == pytest.approx(brute, abs=1e-12), (n, found.shape)
        for limit in (1, 2, 3):
            within = max(expected_tokens(t, rates) for t in trees if t.depth <= limit)
            limited = best_tree(n, rates, max_depth=limit)
            assert limited.shape.depth <= limit
            assert limited.expected_tokens == pytest.approx(within, abs=1e-12), (n, limit, limited.shape)


def test_best_tree_for_a_depth_table_against_brute_force():
    table = [[0.9, 0.4], [0.5, 0.5, 0.3], [0.95]]
    for n in range(1, 7):
        brute = max(expected_tokens(t, table) for t in every_tree(n))
        assert best_tree(n, table).expected_tokens == pytest.approx(brute, abs=1e-12)


def test_a_single_rate_makes_the_chain_best():
    for n in (1, 5, 12):
        for rates in ([0.7], [0.7, 0.0, 0.0]):
            found = best_tree(n, rates)
            assert found.shape.is_chain
            assert found.expected_tokens == pytest.approx(1 + sum(0.7**i for i in range(1, n + 1)))
    # negative control: with a second rank worth something, the chain is no longer the best
    assert not best_tree(12, [0.7, 0.3]).shape.is_chain
    assert best_tree(12, [0.7, 0.3]).expected_tokens > expected_tokens(TreeShape.chain(12), [0.7, 0.3])


def test_sequoia_strings_resolve_with_the_rates():
    rates = [0.7, 0.2, 0.1]
    shape = resolve_shape(parse_tree_shape("sequoia:20:4"), rates)
    assert shape.num_nodes == 20 and shape.depth <= 4 and shape.label == "sequoia:20:4"
    assert expected_tokens(shape, rates) == pytest.approx(best_tree(20, rates, max_depth=4).expected_tokens)
    full = parse_tree_shape("2x2")
    assert resolve_shape(full, rates) is full
    # the best 64-node tree beats a full tree and a chain of 64 nodes
    best = best_tree(64, rates).expected_tokens
    assert best > expected_tokens(TreeShape.chain(64), rates)
    assert best > expected_tokens(TreeShape.full(2, 5), rates)
    assert resolve_shape(SequoiaRequest(3), [0.0]).num_nodes == 3


@pytest.mark.parametrize(("rates", "needle"), [
    ([], "a list of rates or a list of rows"),
    ([1.2], "numbers in [0, 1], got 1.2"),
    ([float("nan")], "numbers in [0, 1]"),
    ([[0.5], [True]], "got True"),
    ([[], []], "at least one rate"),
    ("0.5", "a list of rates"),
])
def test_bad_rates_are_one_sentence(rates, needle):
    with pytest.raises(SpecbenchError) as info:
        positional_rates(rates)
    assert needle in str(info.value)


def test_best_tree_refuses_bad_sizes():
    with pytest.raises(SpecbenchError, match="nodes >= 1, got 0"):
        best_tree(0, [0.5])
    with pytest.raises(SpecbenchError, match="depth limit"):
        best_tree(3, [0.5], max_depth=0)


def test_a_large_best_tree_is_quick_and_sound():
    found = best_tree(768, [0.8, 0.35, 0.2, 0.1])
    assert found.shape.num_nodes == 768
    assert math.isfinite(found.expected_tokens)
    assert found.expected_tokens >= best_tree(767, [0.8, 0.35, 0.2, 0.1]).expected_tokens - 1e-12


def test_many_tables_at_once_give_the_same_numbers():
    shape = best_tree(20, [0.7, 0.3, 0.1], max_depth=4).shape
    generator = np.random.default_rng(0)
    tables = generator.uniform(size=(5, 3, 4))  # shallower and narrower than the tree: the rest is rate 0
    many = expected_tokens_many(shape, tables)
    for m in range(5):
        assert many[m] == pytest.approx(expected_tokens(shape, tables[m].tolist()), abs=1e-12)
    with pytest.raises(SpecbenchError, match=r"must be \[M, D, W\]"):
        expected_tokens_many(shape, np.zeros((3, 4)))
