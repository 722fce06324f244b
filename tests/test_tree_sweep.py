"""Synthetic tree sweeps: the tree rule simulated at scale against the closed forms of tree_theory, bit for bit
against the chain simulation, a wrong simulation caught, and `specbench sweep --tree` end to end."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from specbench import acceptance, sweep, tree_sweep, tree_theory
from specbench.cli import app
from specbench.results import read_results
from specbench.tree_shapes import SequoiaRequest, TreeShape, parse_tree_shape
from specbench.verification import simulate_acceptance

runner = CliRunner()
RATES = [0.7, 0.3, 0.1]


def test_a_chain_as_a_tree_gives_the_chain_counts_bit_for_bit():
    rates = [0.9, 0.7, 0.4, 0.1]
    table = [[c] for c in acceptance.conditional_rates(rates)]
    last = tree_sweep.simulate_tree(TreeShape.chain(4), table, 3000, seed=7, first_request=11)
    counts = simulate_acceptance(rates, 3000, seed=7, first_request=11, backend="torch")
    assert torch.equal(last + 1, counts.to(torch.int64))


def test_certain_and_impossible_ranks_decide_the_walk():
    full = TreeShape.full(2, 3)
    assert set(tree_sweep.simulate_tree(full, [1.0], 500, seed=1).tolist()) == {full.children[full.children[1][0] + 1][0]}
    second = tree_sweep.simulate_tree(full, [0.0, 1.0], 500, seed=1)
    node = -1
    for _ in range(3):
        node = full.children[node + 1][1]
    assert set(second.tolist()) == {node}  # rank 1 at every depth, down to a leaf
    assert set(tree_sweep.simulate_tree(full, [0.0], 500, seed=1).tolist()) == {-1}
    # a table: depth 0 always rank 0, depth 1 never: every walk ends at node 0
    assert set(tree_sweep.simulate_tree(full, [[1.0], []], 500, seed=1).tolist()) == {0}


def test_counts_do_not_depend_on_chunking():
    shape = tree_theory.best_tree(10, RATES).shape
    whole = tree_sweep.simulate_tree(shape, RATES, 900, seed=3)
    parts = torch.cat([tree_sweep.simulate_tree(shape, RATES, 400, seed=3),
                       tree_sweep.simulate_tree(shape, RATES, 500, seed=3, first_request=400)])
    assert torch.equal(whole, parts)
    assert set(whole.tolist()) <= set(range(-1, shape.num_nodes))


def test_a_tree_case_agrees_with_its_closed_forms():
    case = tree_sweep.tree_cases([SequoiaRequest(12), parse_tree_shape("2x2")], [RATES])[0]
    record = tree_sweep.run_tree_case(case, num_requests=100_000, seed=2, device="cpu", cost_ratio=0.05, bug_p=1e-5)
    assert record["verdict"] == "ok" and record["num_bugs"] == 0
    assert record["num_checks"] == tree_sweep.num_checks(case) == 3 * case.shape.depth + 12
    assert record["num_tree_nodes"] == record["num_spec_tokens"] == 12
    assert record["tree_depth"] == case.shape.depth and record["tree_shape"] == "sequoia:12"
    assert record["expected_acceptance_length"] == pytest.approx(tree_theory.expected_tokens(case.shape, RATES))
    low, high = record["mean_acceptance_length_ci_low"], record["mean_acceptance_length_ci_high"]
    assert low <= record["expected_acceptance_length"] <= high
    assert record["expected_accepted_distribution"] == pytest.approx(
        tree_theory.accepted_depth_distribution(case.shape, RATES))
    assert sum(record["accepted_histogram"]) == 100_000
    assert record["expected_speedup"] == pytest.approx(record["expected_acceptance_length"] / (1 + 12 * 0.05))
    nodes = [row for row in sweep.check_rows(record) if row["quantity"] == "P(node j)"]
    assert len(nodes) == 12 and all(row["verdict"] != "BUG" for row in nodes)


def test_a_wrong_simulation_is_caught(monkeypatch):
    # negative control: the simulation swaps ranks 0 and 1 behind the closed form's back
    real = tree_sweep._tables

    def swapped(shape, table, device):
        children, rates = real(shape, table, device)
        return children, rates[:, [1, 0, *range(2, rates.shape[1])]]

    monkeypatch.setattr(tree_sweep, "_tables", swapped)
    case = tree_sweep.tree_cases([parse_tree_shape("3x2")], [RATES])[0]
    record = tree_sweep.run_tree_case(case, num_requests=20_000, seed=2, device="cpu", cost_ratio=0.05, bug_p=1e-5)
    assert record["verdict"] == "BUG" and record["num_bugs"] > 0


def test_sweep_tree_end_to_end(tmp_path):
    out = tmp_path / "trees"
    result = runner.invoke(app, ["sweep", "--tree", "chain:2,2x2", "--tree", "sequoia:8:3", "--rates", "0.7,0.3",
                                 "--rates", "0.8,0.4/0.6", "-n", "20000", "-o", str(out), "--no-charts"])
    assert result.exit_code == 0, result.output
    _, records = read_results(out)
    assert [r["tree_shape"] for r in records] == ["chain:2", "2x2", "sequoia:8:3"] * 2
    assert all(r["verdict"] == "ok" for r in records)
    assert records[3]["tree_rates"] == [[0.8, 0.4], [0.6]]
    assert records[2]["num_tree_nodes"] == 8 and records[2]["tree_depth"] <= 3
    long = pd.read_csv(out / sweep.LONG_CSV)
    assert (long["quantity"] == "P(node j)").sum() == sum(r["num_tree_nodes"] for r in records)
    assert "K or N" in result.output and "P(node j), 6 nodes" in result.output


@pytest.mark.parametrize(("args", "needle"), [
    (["--tree", "2x2"], "--tree needs --rates"),
    (["--tree", "2x2", "--alpha", "0.5"], "--alpha belongs to chain sweeps"),
    (["--tree", "2x", "--rates", "0.5"], "tree shape must read"),
    (["--tree", "2x"], "tree shape must read"),  # the bad shape before the missing --rates
    (["--tree", "2x2", "--rates", "0.5,1.5"], "numbers in [0, 1], got 1.5"),
    (["--tree", "2x2", "--rates", "0.5", "--backend", "triton"], "--backend triton has no tree simulation"),
])
def test_bad_tree_sweeps_are_one_sentence(tmp_path, args, needle):
    result = runner.invoke(app, ["sweep", *args, "-n", "100", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert needle in " ".join(result.output.split())


def test_the_sweep_walks_as_verify_does():
    # verify(mode="synthetic", tree=...) (specbench.trees, helper trees-core) and this simulation read the same
    # streams: the last accepted node must agree request by request (skips until specbench.trees is merged)
    trees = pytest.importorskip("specbench.trees")
    from specbench import rng, verify

    shape = TreeShape((-1, 0, 0, -1, 1, 3, 3, 2, -1, 8))
    table = [[0.8, 0.4, 0.2], [0.5, 0.5, 0.0], [0.9, 0.0, 0.0]]
    batch = 2000
    result = verify(torch.zeros(batch, shape.num_nodes + 1, 5), torch.zeros(batch, shape.num_nodes, dtype=torch.int64),
                    mode="synthetic", acceptance_rates=table, seeds=rng.request_seed(torch.tensor(11),
                                                                                      torch.arange(batch)),
                    positions=torch.zeros(batch, dtype=torch.int64), tree=trees.batched(list(shape.parents), batch),
                    backend="torch")
    nodes = result.accepted_nodes
    last = torch.where((nodes >= 0).any(dim=1), nodes.max(dim=1).values, -1)  # a path's nodes rise with depth
    assert torch.equal(tree_sweep.simulate_tree(shape, table, batch, seed=11), last.to(torch.int64))
