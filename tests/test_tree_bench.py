"""``kernels --tree``: planned tree inputs (the walk accepts the planned depth along the spine and tests every
child where it stops), the cases beside the chain of the tree's depth, the records, and the refusals."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from specbench import bench, results, scenarios, tree_inputs
from specbench.cli import app
from specbench.errors import SpecbenchError
from specbench.tree_shapes import TreeShape, parse_tree_shape
from specbench.trees import full_tree

runner = CliRunner()
SMALL = ["--device", "cpu", "--vocab-size", "48", "--max-ms", "0", "--min-samples", "3", "--warmup", "0",
         "--no-charts"]


def test_the_spine_and_the_children_where_the_walk_stops():
    parents = full_tree(2, 2)  # [-1, -1, 0, 0, 1, 1]
    assert tree_inputs.spine(parents) == [0, 2]
    assert [tree_inputs.stop_children(parents, depth) for depth in (0, 1, 2)] == [[0, 1], [2, 3], []]
    assert tree_inputs.spine([-1, -1, 1, 1, 3]) == [0]  # node 0 has no child: the spine ends there


@pytest.mark.parametrize("mode, draft", [("greedy", "none"), ("probabilistic", "logits"), ("probabilistic", "probs"),
                                         ("probabilistic", "none")])
def test_planned_tree_inputs_accept_the_planned_depth_along_the_spine(mode, draft):
    shape = parse_tree_shape("3x2")
    profile = scenarios.make_profile(2, acceptance_length=2.0, schedule="geometric", name="2")
    [case] = bench.plan_cases(modes=[mode], batch_sizes=[40], vocabularies=[(None, 50)], profiles=[profile],
                              drafts=[draft], tree=shape)
    assert case.num_spec_tokens == 12 and case.tree == "3x2" and case.tree_parents == shape.parents
    inputs = bench.make_inputs(case, seed=3)
    result = bench.torch_reference(inputs)
    assert torch.equal(result.num_accepted.long(), inputs.planned_accepted)
    path = tree_inputs.spine(shape.parents)
    for b, depth in enumerate(inputs.planned_accepted.tolist()):
        assert result.accepted_nodes[b, :depth].tolist() == path[:depth]
        # the stop place's children were all drafts the target rejects: none is the emitted token
        stopped = [int(inputs.draft_token_ids[b, j]) for j in tree_inputs.stop_children(shape.parents, depth)]
        assert int(result.output_token_ids[b, depth]) not in stopped
    assert set(inputs.planned_accepted.tolist()) == {0, 1, 2}


def test_a_tree_case_counts_the_rows_its_walk_reads():
    shape = parse_tree_shape("2x2")
    profile = scenarios.make_profile(2, acceptance_length=3.0, name="full")
    [case] = bench.plan_cases(modes=["probabilistic"], batch_sizes=[1], vocabularies=[(None, 100)],
                              profiles=[profile], drafts=["logits"], tree=shape)
    needed, all_rows = bench.bytes_moved(case, torch.tensor([2]))
    row = 100 * 4
    # all accepted to depth 2: target rows of the root, node 0 and node 2 (the bonus); draft rows of nodes 0 and 2
    assert needed - (all_rows - (7 + 6) * row) == (3 + 2) * row
    needed_none, _ = bench.bytes_moved(case, torch.tensor([0]))
    assert needed_none - (all_rows - 13 * row) == (1 + 2) * row  # the root's row, both children's draft rows


def test_kernels_tree_times_each_tree_beside_the_chain_of_its_depth(tmp_path):
    result = runner.invoke(app, ["kernels", *SMALL, "--tree", "2x2,parents:-1,0,0", "-b", "2", "--impl", "torch",
                                 "--mode", "probabilistic", "--draft", "logits", "-l", "full", "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    _, records = results.read_results(tmp_path / "r")
    # both trees are 2 deep: one chain K=2 serves both
    assert [(r.get("tree"), r["num_spec_tokens"]) for r in records] == [(None, 2), ("2x2", 6), ("parents:-1,0,0", 3)]
    tree_rows = [r for r in records if "tree" in r]
    assert {r["tree"] for r in tree_rows} == {"2x2", "parents:-1,0,0"}
    assert all(r["status"] == "ok" and r["measured_acceptance_length"] == r["expected_acceptance_length"]
               for r in tree_rows)
    assert tree_rows[0]["tree_parents"] == [-1, -1, 0, 0, 1, 1] and "tree 2x2 N=6" in result.output
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(results.SCHEMA_FILE.read_text()))
    assert list(validator.iter_errors(json.loads((tmp_path / "r" / "results.json").read_text()))) == []
    # a chain-only implementation is skipped on a tree case, with the reason
    from specbench.implementations import Implementation

    chain_only = Implementation("chain-only", "", prepare=lambda kwargs: None)
    assert "does not declare trees" in bench._unsupported(chain_only, bench.plan_cases(
        modes=["greedy"], batch_sizes=[1], vocabularies=[(None, 8)], profiles=[scenarios.make_profile(
            2, acceptance_length=2.0, name="2")], tree=parse_tree_shape("2x2"))[0], torch.device("cpu"))


def test_a_repeated_tree_adds_to_the_shapes_as_a_comma_does(tmp_path):
    result = runner.invoke(app, ["kernels", *SMALL, "--tree", "2x2", "--tree", "chain:3", "-b", "1", "--impl", "torch",
                                 "--mode", "greedy", "-l", "full", "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    _, records = results.read_results(tmp_path / "r")
    assert {r.get("tree") for r in records} == {None, "2x2", "chain:3"}


def test_the_triton_tree_kernel_runs_in_a_kernels_tree_run(tmp_path):
    result = runner.invoke(app, ["kernels", *SMALL, "--tree", "2x2", "-b", "2", "--impl", "torch,triton", "--interpret",
                                 "--mode", "greedy,probabilistic", "--draft", "probs", "-l", "2",
                                 "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    _, records = results.read_results(tmp_path / "r")
    triton_trees = [r for r in records if r["impl"] == "triton" and "tree" in r]
    assert len(triton_trees) == 2 and all(r["status"] == "ok" for r in triton_trees)


@pytest.mark.parametrize("args, words", [
    (["--tree", "2x2", "-k", "3"], "drop --num-spec-tokens"),
    (["--tree", "sequoia:8"], "sequoia:N needs positional rates"),
    (["--tree", "2y2"], "tree shape must read"),
    (["--tree", "2x2", "--top-k", "5"], "does not take truncation"),
    (["--tree", "2x2", "--logprobs", "raw"], "does not take --logprobs"),
    (["--tree", "2x2", "--method", "block"], "token method only"),
    (["--tree", "2x2", "--scenario", "default"], "not from --scenario"),
    (["--tree", "2x2", "-l", "4"], "more than the tree 2x2 can accept: its depth (path of first children) is 2"),
    (["--tree", "chain:1", "--mode", "greedy"], "got the tree chain:1's depth 1"),
])
def test_kernels_tree_refuses_what_trees_do_not_take(tmp_path, args, words):
    result = runner.invoke(app, ["kernels", *SMALL, "-b", "1", "--impl", "torch", *args, "-o", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split()) and result.output.count("error:") == 1
    assert "note:" not in result.output  # (a note of a run that never starts, such as the greedy cases', is not said)
    quick = runner.invoke(app, ["kernels", "--device", "cpu", "--quick", "--tree", "2x2", "-o", str(tmp_path / "q")])
    assert quick.exit_code == 2 and "cannot be combined with --tree" in " ".join(quick.output.split())


def test_a_profile_that_does_not_fit_the_spine_is_refused():
    with pytest.raises(SpecbenchError, match="does not fit its spine of 2 first children"):
        bench.plan_cases(modes=["greedy"], batch_sizes=[1], vocabularies=[(None, 8)],
                         profiles=[scenarios.make_profile(3, acceptance_length=2.0, name="2")],
                         tree=TreeShape(tuple(full_tree(2, 2)), "2x2"))


def test_tree_rows_chart_apart_from_the_chain_of_their_node_count():
    import pandas as pd

    from specbench import bench_charts

    row = {"mode": "probabilistic", "draft": "logits", "target": "logits"}
    assert bench_charts._variant(pd.Series({**row, "tree": "2x2"})) == "probabilistic/logits tree 2x2"
    assert bench_charts._variant(pd.Series(row)) == "probabilistic/logits"


def test_tree_charts_pack_their_panels_and_name_n(monkeypatch, tmp_path):
    # a 2x2 tree (N = 6) beside chains of K = 2 and 6: the time chart's tree row holds its one panel at the left,
    # titled N = 6, with no empty panel before it; the speed-up heatmap gives the tree's panel its N alone
    from specbench import bench_charts

    def record(k, batch, tree=None, impl="torch"):
        return {"kind": "kernels", "status": "ok", "mode": "probabilistic", "draft": "logits", "target": "logits",
                "impl": impl, "batch_size": batch, "num_spec_tokens": k, "vocab_size": 48, "dtype": "float32",
                "acceptance": "2", "acceptance_length": 2.0, "cuda_graph": False, "tree": tree,
                "median_us": 10.0 * batch, "p20_us": 9.0 * batch, "p80_us": 11.0 * batch, "tokens_per_s": 1e5,
                "speedup_vs_torch": 1.0 if impl == "torch" else 0.042}

    records = [record(k, b, tree, impl) for k, tree in ((2, None), (6, None), (6, "2x2")) for b in (1, 8)
               for impl in ("torch", "triton")]
    figures = {}
    monkeypatch.setattr(bench_charts, "_save", lambda fig, path: figures.setdefault(path.name, fig) and path)
    bench_charts.render_kernel_charts(records, tmp_path)
    time_axes = [ax for ax in figures["time_vs_batch_L2-float32.png"].axes if ax.axison]
    assert [ax.get_title() for ax in time_axes] == [
        "probabilistic/logits, K=2, V=48", "probabilistic/logits, K=6, V=48",
        "probabilistic/logits tree 2x2, N=6, V=48"]
    tree_panel = time_axes[2].get_subplotspec()
    assert (tree_panel.rowspan.start, tree_panel.colspan.start) == (1, 0)  # the tree's row, from the left
    heat = [ax for ax in figures["speedup_triton_L2-float32.png"].axes if ax.get_title()]
    assert [(ax.get_ylabel(), [t.get_text() for t in ax.get_yticklabels()]) for ax in heat] == [
        ("K", ["2", "6"]), ("N", ["6"])]
    assert {t.get_text() for ax in heat for t in ax.texts} == {"0.042x"}
