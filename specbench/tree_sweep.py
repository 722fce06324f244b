"""Synthetic tree sweeps: simulate the synthetic-mode tree rule at scale and set it beside the tree theory.

The rule (``specbench/verification.py``, "Trees"; synthetic mode): a request walks down from the root;
at a reached node whose children lie at depth ``d`` it tries them in rank order, accepting rank ``k``
iff ``U(seed, pos + d, ACCEPT, index=k) < a[d][k]`` (``a`` the conditional-rate table, float32, rate 0
past it) and moving to the first accepted child; when every child is rejected (or at a leaf) the walk
ends. The step emits the accepted path and one more token. Here each request starts at position 0
with seed ``rng.request_seed(case_seed, r)``, as the chain sweep does, so a chain given as a tree
with the table ``[[c_1], [c_2], ...]`` reproduces ``verification.simulate_acceptance``'s counts bit for
bit (rank 0 is index 0, the chain's uniform).

What is checked, case by case (``sweep.measure`` on the accepted-depth histogram, the same statistics
and verdicts as a chain's, with ``p_i = P(A >= i)`` the tree's depth rates from
``tree_theory.depth_rates``), plus one family of its own: each node's ``P(j)`` (the share of steps
whose accepted path runs through node ``j``), a binomial check per node against
``tree_theory.acceptance_probabilities``. The BUG threshold counts ``3D + N`` checks per tree case.

A tree case's record is a sweep record (``kind = "sweep"``): ``num_spec_tokens`` holds ``N``, the
tokens a step verifies (what the speed-up ``L / (1 + N c)`` charges for; a chain's ``K``), the depth
families run over ``i = 1..D``, and ``tree_shape``, ``tree_parents``, ``num_tree_nodes``,
``tree_depth``, ``tree_rates`` and the node family say which tree it was. ``expected_acceptance_length``
is the closed-form expected tokens per step, ``mean_acceptance_length`` the simulated one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from specbench import rng, sweep, tree_theory
from specbench.errors import SpecbenchError
from specbench.tree_shapes import ShapeRequest, TreeShape
from specbench.tree_theory import PositionalRates

_CHUNK_REQUESTS = 1 << 16  # per pass on a CPU: [n, W] words stay in cache


@dataclass(frozen=True)
class TreeCase:
    """One tree sweep case: a shape under a conditional-rate table (what ``sweep.run_sweep`` runs beside profiles)."""

    shape: TreeShape
    tree_rates: PositionalRates
    cost_ratio: float | None = None

    @property
    def name(self) -> str:
        return f"tree {self.shape.label} a={self.tree_rates.label}"

    @property
    def num_spec_tokens(self) -> int:
        """Tokens a step verifies: the tree's ``N`` (a chain's ``K``)."""
        return self.shape.num_nodes

    @property
    def rates(self) -> list[float]:
        """The tree's unconditional depth rates ``P(A >= i)``, ``i = 1..D`` (closed form)."""
        return tree_theory.depth_rates(self.shape, self.tree_rates)


def tree_cases(shapes: Sequence[ShapeRequest], rate_sets: Sequence) -> list[TreeCase]:
    """Every shape under every rate set (vector or table), ``sequoia:N`` resolved with each set's rates."""
    if not shapes:
        raise SpecbenchError("a tree sweep needs at least one tree shape, got none")
    if not rate_sets:
        raise SpecbenchError("a tree sweep needs conditional rates (--rates), got none")
    cases = []
    for values in rate_sets:
        table = tree_theory.positional_rates(values)
        for request in shapes:
            cases.append(TreeCase(tree_theory.resolve_shape(request, table), table))
    return cases


def num_checks(case: TreeCase) -> int:
    """Distinct checks of one tree case: the depth families (``3D``) and one per node."""
    return 3 * case.shape.depth + case.shape.num_nodes


def case_seed(seed: int, case: TreeCase) -> int:
    """The case's own seed: the run's seed mixed with a key of the parents and rates (exact float bits)."""
    text = "tree parents=" + ",".join(map(str, case.shape.parents)) + " rates=" + "/".join(
        ",".join(float(r).hex() for r in row) for row in case.tree_rates.rows) + \
        (" every-depth" if case.tree_rates.every_depth else "")
    return sweep.keyed_seed(seed, text)


def _tables(shape: TreeShape, table: PositionalRates, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    # children [N + 1, W] (-1 padded; row 0 the root's) and rates [D, W] float32 (0 past the table)
    width = shape.width
    children = torch.full((shape.num_nodes + 1, width), -1, dtype=torch.int64)
    for row, kids in enumerate(shape.children):
        if kids:
            children[row, :len(kids)] = torch.tensor(kids, dtype=torch.int64)
    rates = torch.tensor([[table.rate(d, k) for k in range(width)] for d in range(shape.depth)], dtype=torch.float32)
    return children.to(device), rates.to(device)


def simulate_tree(
    shape: TreeShape,
    rates,
    num_requests: int,
    *,
    seed: int,
    first_request: int = 0,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """The last accepted node of ``num_requests`` synthetic tree steps (``-1``: none), ``[num_requests]`` int64.

    Request ``r`` has seed ``rng.request_seed(seed, first_request + r)`` at position 0 (module docstring);
    ``rates`` is a conditional-rate vector or table (``tree_theory.positional_rates``).
    """
    table = tree_theory.positional_rates(rates)
    if isinstance(num_requests, bool) or not isinstance(num_requests, int) or num_requests < 1:
        raise SpecbenchError(f"num_requests must be a whole number of at least 1, got {num_requests!r}")
    rng.check_seed(seed)
    device = torch.device(device)
    children, rate_table = _tables(shape, table, device)
    ranks = torch.arange(shape.width, dtype=torch.int64, device=device)
    last = torch.empty(num_requests, dtype=torch.int64, device=device)
    chunk = _CHUNK_REQUESTS if device.type == "cpu" else num_requests
    for start in range(0, num_requests, chunk):
        stop = min(start + chunk, num_requests)
        requests = torch.arange(first_request + start, first_request + stop, dtype=torch.int64, device=device)
        seed_keys = rng.seed_key(rng.request_seed(torch.tensor(seed, dtype=torch.int64, device=device), requests))
        row = torch.zeros(stop - start, dtype=torch.int64, device=device)  # the walk's node's row: 0 the root
        alive = torch.ones(stop - start, dtype=torch.bool, device=device)  # its children are still tried
        for depth in range(shape.depth):
            keys = rng.stream_key(seed_keys, torch.tensor(depth, device=device), rng.ACCEPT)
            u = rng.to_uniform(rng.words(keys[:, None], ranks[None, :]))  # [n, W]: rank k's uniform, index k
            kids = children[row]
            # accept rank k iff u_k < a[d][k]; the walk moves to the first accepted child, else ends
            accepted = (kids >= 0) & (u < rate_table[depth][None, :]) & alive[:, None]
            alive = accepted.any(dim=1)
            first = accepted.to(torch.int32).argmax(dim=1, keepdim=True)
            row = torch.where(alive, kids.gather(1, first).squeeze(1) + 1, row)
            if device.type == "cpu" and not bool(alive.any()):
                break
        last[start:stop] = row - 1
    return last


def simulate_counts(
    case: TreeCase, num_requests: int, *, seed: int, device: str, on_progress: sweep.Progress | None = None,
) -> tuple[list[int], float]:
    """``ends[0..N]``: how many of ``num_requests`` steps ended at the root (0) or at node ``j`` (``j + 1``),
    and the synchronized simulation seconds (after one untimed step)."""
    shape = case.shape
    simulate_tree(shape, case.tree_rates, 1, seed=seed, device=device)
    chunk = max(1, sweep._CHUNK_POSITIONS // shape.num_nodes)
    ends = torch.zeros(shape.num_nodes + 1, dtype=torch.int64, device=device)
    seconds = 0.0
    for start in range(0, num_requests, chunk):
        size = min(chunk, num_requests - start)
        sweep._synchronize(device)
        began = time.perf_counter()
        last = simulate_tree(shape, case.tree_rates, size, seed=seed, first_request=start, device=device)
        sweep._synchronize(device)
        seconds += time.perf_counter() - began
        ends += torch.bincount(last + 1, minlength=shape.num_nodes + 1)
        if on_progress is not None:
            on_progress(size * shape.num_nodes)
    return ends.tolist(), seconds


def _node_family(shape: TreeShape, ends: Sequence[int], expected: Sequence[float], bug_p: float) -> dict[str, Any]:
    # steps whose accepted path runs through node j: those that ended in j's subtree (children after parents)
    through = [int(n) for n in ends[1:]]
    for node in range(shape.num_nodes - 1, -1, -1):
        if shape.parents[node] >= 0:
            through[shape.parents[node]] += through[node]
    total = int(sum(ends))
    checks = [sweep._binomial_check(through[j], total, expected[j], bug_p) for j in range(shape.num_nodes)]
    keys = ("measured_node_probabilities", "measured_node_probabilities_ci_low",
            "measured_node_probabilities_ci_high", "node_probabilities_p_values", "node_probabilities_verdicts")
    return {key: [check[column] for check in checks] for column, key in enumerate(keys)}


def run_tree_case(
    case: TreeCase,
    *,
    num_requests: int,
    seed: int,
    device: str,
    cost_ratio: float,
    bug_p: float,
    scenario: str | None = None,
    on_progress: sweep.Progress | None = None,
) -> dict[str, Any]:
    """Simulate one tree case of a sweep seeded ``seed`` and return its record (module docstring)."""
    shape = case.shape
    own_seed = case_seed(seed, case)
    ends, seconds = simulate_counts(case, num_requests, seed=own_seed, device=device, on_progress=on_progress)
    histogram = [0] * (shape.depth + 1)  # accepted path length A: 0 at the root, depth(j) + 1 at node j
    histogram[0] = int(ends[0])
    for node, count in enumerate(ends[1:]):
        histogram[shape.depths[node] + 1] += int(count)
    depth_rates = case.rates
    expected_nodes = tree_theory.acceptance_probabilities(shape, case.tree_rates)
    record: dict[str, Any] = {
        "kind": "sweep", "scenario": scenario, "profile": case.name, "source": "",
        "num_spec_tokens": shape.num_nodes,
        "tree_shape": shape.label, "tree_parents": list(shape.parents), "num_tree_nodes": shape.num_nodes,
        "tree_depth": shape.depth, "tree_rates": case.tree_rates.as_lists(),
        "configured_acceptance_length": tree_theory.expected_tokens(shape, case.tree_rates),
        "schedule": None, "configured_alpha": None, "configured_rates": depth_rates,
        "num_requests": num_requests, "seed": seed, "case_seed": own_seed, "backend": "torch", "device": device,
    }
    record.update(sweep.measure(histogram, depth_rates, bug_p=bug_p))
    nodes = _node_family(shape, ends, expected_nodes, bug_p)
    verdicts = nodes["node_probabilities_verdicts"]
    p_values = [p for p in nodes["node_probabilities_p_values"] if p is not None]
    record.update(
        expected_node_probabilities=expected_nodes, **nodes, node_ends=[int(n) for n in ends],
        num_checks=record["num_checks"] + len(verdicts),
        num_outside_95=record["num_outside_95"] + sum(v == "outside 95%" for v in verdicts),
        num_bugs=record["num_bugs"] + sum(v == "BUG" for v in verdicts),
        min_p_value=min([record["min_p_value"], *p_values]),
    )
    record["verdict"] = "BUG" if record["num_bugs"] else "ok"
    positions = num_requests * shape.num_nodes
    record.update(**sweep.speedup_fields(record, shape.num_nodes, cost_ratio),
                  **sweep.throughput_fields(positions, seconds))
    return record
