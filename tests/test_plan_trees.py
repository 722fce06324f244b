"""`specbench plan --tree`: trees of N nodes weighed against chains at every batch size (priced as the chain
step that verifies N tokens), their expected tokens against simulated tree steps, the decision per batch size,
every bad input (one sentence, exit 2), and the results that compare, export and plot read."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from typer.testing import CliRunner

from specbench import plan, results, tree_sweep, tree_theory
from specbench.cli import app
from specbench.errors import SpecbenchError
from specbench.tree_shapes import TreeShape, parse_tree_shape

runner = CliRunner()
RATES = [0.8, 0.6, 0.45, 0.33, 0.24]  # unconditional p_1..p_5


@dataclass(frozen=True)
class Step:
    target_ms: float
    draft_ms: float
    sampler_ms: float = 0.0
    overhead_ms: float = 0.0
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def total_ms(self) -> float:
        return self.target_ms + self.draft_ms + self.sampler_ms + self.overhead_ms


class KneeCosts:
    """Memory-bound (flat) below ``knee`` verified tokens, compute-bound above; no draft cost (an n-gram drafter)."""

    name = "knee"

    def step(self, batch_size: int, num_spec_tokens: int) -> Step:
        tokens = batch_size * (num_spec_tokens + 1)
        return Step(10.0 + 0.05 * max(0, tokens - 128), 0.0)

    def describe(self) -> list[str]:
        return ["knee: flat below 128 verified tokens"]


def _settings(trees, tree_rates, batch_sizes=(1, 4, 64, 256), costs=None):
    profile = plan.profile_from_rates(RATES, 5)
    return plan.PlanSettings(profile, costs or KneeCosts(), batch_sizes, None,
                             tuple(parse_tree_shape(t) for t in trees), tuple(tree_rates))


def test_a_chain_given_as_a_tree_is_the_chain():
    records, summary = plan.run_plan(_settings(["chain:3"], ["profile"]))
    for b in (1, 4, 64, 256):
        chain = next(r for r in records if r["candidate"] == "chain" and r["batch_size"] == b
                     and r["num_spec_tokens"] == 3)
        tree = next(r for r in records if r["candidate"] == "tree" and r["batch_size"] == b)
        assert tree["acceptance_length"] == pytest.approx(chain["acceptance_length"], abs=1e-12)
        assert tree["tokens_per_second_per_gpu"] == pytest.approx(chain["tokens_per_second_per_gpu"])
        assert tree["tree_shape"] == "chain:3" and tree["num_tree_nodes"] == 3 and tree["tree_depth"] == 3
    # a tree that is a chain never beats the best chain: the decision stays with the chain
    assert {s["best_candidate"] for s in summary["per_batch"]} == {"chain"}
    assert all(s["tree_gain_over_chain"] <= 1e-12 for s in summary["per_batch"])


def test_trees_win_where_verification_is_free_and_lose_where_it_is_not():
    records, summary = plan.run_plan(_settings(["sequoia:24", "2x3"], ["profile", 0.35, 0.15]))
    decided = {s["batch_size"]: s["best_candidate"] for s in summary["per_batch"]}
    assert decided == {1: "tree", 4: "tree", 64: "chain", 256: "chain"}
    first = summary["per_batch"][0]
    assert first["best_tree_shape"] == "sequoia:24:5" and first["best_tree_num_nodes"] == 24
    # the numbers behind the verdict: L from the closed form over the step t(B, N) of the same cost model
    table = plan.tree_rate_table(plan.profile_from_rates(RATES, 5), ["profile", 0.35, 0.15])
    shape = tree_theory.best_tree(24, table, max_depth=5).shape
    row = next(r for r in records if r["candidate"] == "tree" and r["batch_size"] == 1 and r["is_best"])
    assert row["acceptance_length"] == pytest.approx(tree_theory.expected_tokens(shape, table))
    assert row["step_ms"] == pytest.approx(KneeCosts().step(1, 24).total_ms)
    assert row["tokens_per_second_per_request"] == pytest.approx(1000 * row["acceptance_length"] / row["step_ms"])
    best_chain = max(r["tokens_per_second_per_gpu"] for r in records if r["candidate"] == "chain"
                     and r["batch_size"] == 1)
    assert first["tree_gain_over_chain"] == pytest.approx(row["tokens_per_second_per_gpu"] / best_chain - 1)
    # chains alone decide the chain summary, as without trees
    alone, chain_summary = plan.run_plan(_settings([], []))
    assert [r for r in records if r["candidate"] == "chain"] == alone
    assert summary["best_static_k"] == chain_summary["best_static_k"]


def test_a_trees_expected_tokens_match_simulated_tree_steps():
    # profile rank 0 by depth, siblings 0.35: the table the plan weighs trees with, simulated by the tree rule
    _, summary = plan.run_plan(_settings(["sequoia:12"], ["profile", 0.35]))
    tree = summary["trees"][0]
    shape = TreeShape(tuple(tree["tree_parents"]))
    last = tree_sweep.simulate_tree(shape, summary["tree_rates"], 200_000, seed=5)
    emitted = 1.0 + np.asarray([0, *[d + 1 for d in shape.depths]])[last.numpy() + 1]
    half = 1.96 * emitted.std(ddof=1) / math.sqrt(len(emitted))
    assert abs(emitted.mean() - tree["acceptance_length"]) < half


@pytest.mark.parametrize(("trees", "rates", "words"), [
    (["2x2"], [], "trees need --tree-rates"),
    ([], [0.5], "--tree-rates describes trees; give them with --tree"),
    (["2x2"], [0.5, "profile"], "takes 'profile' only as its first entry"),
    (["chain:6"], ["profile", 0.3], "tree chain:6 is 6 deep, past the profile's K = 5"),
])
def test_bad_tree_settings_are_one_sentence(trees, rates, words):
    with pytest.raises(SpecbenchError) as info:
        plan.run_plan(_settings(trees, rates))
    assert words in str(info.value)


def test_a_cost_model_that_cannot_price_n_tokens_is_named():
    class Short(KneeCosts):
        def step(self, batch_size, num_spec_tokens):
            if num_spec_tokens > 5:
                raise KeyError("no measurement past 6 tokens")
            return super().step(batch_size, num_spec_tokens)

    with pytest.raises(SpecbenchError, match="cost model knee has no step time for batch size 1 at K=6"):
        plan.run_plan(_settings(["2x2"], [0.6, 0.3], costs=Short()))


def test_plan_tree_command_line_results_compare_export_and_plot(tmp_path):
    def run(name, target_ms):
        out = tmp_path / name
        result = runner.invoke(app, ["plan", "--rates", ",".join(map(str, RATES)), "--max-k", "5", "-b", "1,64",
                                     "--cost-ratio", "0.01", "--target-ms", target_ms, "--tree", "chain:2,2x2",
                                     "--tree", "sequoia:16", "--tree-rates", "profile,0.35,0.15", "-o", str(out)])
        assert result.exit_code == 0, result.output
        return out, result

    out, result = run("a", "10")
    text = " ".join(result.output.split())
    assert "chain or tree" in text and "priced as the chain step that verifies N tokens" in text
    metadata, records = results.read_results(out)
    trees = [r for r in records if r["candidate"] == "tree"]
    assert [r["tree_shape"] for r in trees] == ["chain:2", "2x2", "sequoia:16:5"] * 2
    assert len(records) == 2 * 6 + 6 and metadata["plan"]["tree_rates_given"] == ["profile", 0.35, 0.15]
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(results.SCHEMA_FILE.read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(json.loads((out / results.RESULTS_JSON)
                                                                                .read_text()))) == []
    slower, _ = run("b", "11")
    compared = runner.invoke(app, ["compare", str(out), str(slower)])
    assert compared.exit_code == 1 and "18 slower" in compared.output, compared.output
    exported = runner.invoke(app, ["export", str(out), "--format", "csv", "-o", str(tmp_path / "x.csv")])
    assert exported.exit_code == 0, exported.output
    plotted = runner.invoke(app, ["plot", str(out), "-o", str(tmp_path / "charts")])
    assert plotted.exit_code == 0, plotted.output


@pytest.mark.parametrize(("args", "words"), [
    (["--tree", "2x2"], "trees need --tree-rates"),
    (["--tree", "3y3", "--tree-rates", "0.5"], "tree shape must read"),
    (["--tree", "2x2", "--tree-rates", "0.5,x"], "--tree-rates takes comma-separated numbers"),
    (["--tree", "2x2", "--tree-rates", "profile,"], "ends in an empty rate"),
    (["--tree-rates", "0.5"], "give them with --tree"),
])
def test_bad_tree_options_exit_2(tmp_path, args, words):
    result = runner.invoke(app, ["plan", "--rates", "0.8,0.6", "--max-k", "2", "-c", "0.05", "--target-ms", "10",
                                 "-o", str(tmp_path / "x"), *args])
    assert result.exit_code == 2
    assert words in " ".join(result.output.split())


def test_trees_get_intervals_from_the_profiles_draws(tmp_path):
    from specbench import profile_models

    fit = profile_models.fit_model("iid", 20000, [14000, 9800, 6860], num_bootstrap=20)
    path = tmp_path / "fitted.toml"
    path.write_text(f'name = "fitted"\nnum_spec_tokens = 3\nmodel = "iid"\nalpha = {fit.values[0]!r}\n\n[fit]\n'
                    f"num_drafts = 20000\naccepted_per_position = [14000, 9800, 6860]\n")
    profile = plan.profile_from_scenario(path, 5, num_bootstrap=50)
    assert profile.draws is not None
    settings = plan.PlanSettings(profile, KneeCosts(), (1, 256), None, (parse_tree_shape("sequoia:12"),
                                                                         parse_tree_shape("2x2")), ("profile", 0.3))
    records, summary = plan.run_plan(settings)
    for record in (r for r in records if r["candidate"] == "tree"):
        assert record["acceptance_length_ci_low"] <= record["acceptance_length"] <= record["acceptance_length_ci_high"]
        assert record["acceptance_length_ci_low"] < record["acceptance_length_ci_high"]  # the draws move rank 0
        assert record["speedup_ci_low"] <= record["speedup"] <= record["speedup_ci_high"]
    for s in summary["per_batch"]:
        assert s["tree_gain_over_chain_ci_low"] <= s["tree_gain_over_chain"] <= s["tree_gain_over_chain_ci_high"]
        assert 0.0 <= s["tree_share"] <= 1.0
    assert [s["best_candidate"] for s in summary["per_batch"]] == ["tree", "chain"]
    assert summary["per_batch"][0]["tree_share"] == 1.0 and summary["per_batch"][1]["tree_share"] == 0.0
    # typed-in rates: no draws, no intervals
    _, plain = plan.run_plan(_settings(["2x2"], [0.6, 0.3]))
    assert plain["per_batch"][0]["tree_share"] is None


def test_a_tree_or_batch_size_given_twice_is_taken_once_with_a_note(tmp_path):
    # --tree 2x2 --tree 2x2 wrote two records of one tree, where -b 1,1 took 1 once: both are taken once, and said
    out = tmp_path / "x"
    result = runner.invoke(app, ["plan", "--rates", "0.8,0.6", "--max-k", "2", "-c", "0.05", "--target-ms", "10",
                                 "-b", "1,1", "--tree", "2x2", "--tree", "2x2,parents:-1,-1,0,0,1,1",
                                 "--tree-rates", "0.5", "--no-charts", "-o", str(out)])
    assert result.exit_code == 0, result.output
    notes = " ".join(result.stderr.split())
    assert "note: --batch-sizes gives 1 more than once; it is taken once" in notes, notes
    assert "note: --tree gives 2x2 more than once; it is taken once" in notes, notes
    _, records = results.read_results(out)
    assert [r["tree_shape"] for r in records if r["candidate"] == "tree"] == ["2x2"]
