"""`specbench plan`: closed forms against simulated steps, best K on a synthetic cost model, every bad
input (one sentence, exit 2), the results file, compare and plot on plan results, charts.

Step costs come from a stand-in with the interface of ``specbench.step_costs`` (``StepCost``,
``CostModel``); the CLI's ``--costs`` is pointed at it through ``cli_plan._step_costs``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from specbench import cli_plan, plan, plan_charts, profile_models, results, scenarios
from specbench.cli import app
from specbench.errors import SpecbenchError
from specbench.verification import simulate_acceptance

runner = CliRunner()


@dataclass(frozen=True)
class StepCost:  # the stand-in of step_costs.StepCost
    target_ms: float
    draft_ms: float
    sampler_ms: float = 0.0
    overhead_ms: float = 0.0
    sources: dict[str, str] = field(default_factory=lambda: {"target_ms": "measured", "draft_ms": "modelled",
                                                             "sampler_ms": "none", "overhead_ms": "none"})

    @property
    def total_ms(self) -> float:
        return self.target_ms + self.draft_ms + self.sampler_ms + self.overhead_ms


class BatchCosts:
    """A synthetic cost model: memory-bound at small B, compute-bound past ``knee`` verified tokens."""

    name = "synthetic"

    def __init__(self, base_ms=8.0, per_token_ms=0.02, knee=64, draft_ms=0.3, batches=None, tweak=None):
        self.base_ms, self.per_token_ms, self.knee, self.draft = base_ms, per_token_ms, knee, draft_ms
        self.batches, self.tweak = batches, tweak

    def step(self, batch_size: int, num_spec_tokens: int) -> StepCost:
        if self.batches is not None and batch_size not in self.batches:
            raise KeyError(f"no measurement at batch size {batch_size}")
        tokens = batch_size * (num_spec_tokens + 1)
        target = self.base_ms + self.per_token_ms * max(0, tokens - self.knee)
        cost = StepCost(target, self.draft * num_spec_tokens * (1 + batch_size / 256), 0.1, 0.2)
        return cost if self.tweak is None else self.tweak(batch_size, num_spec_tokens, cost)

    def describe(self) -> list[str]:
        return ["synthetic: memory-bound below 64 verified tokens, compute-bound above"]


def _fit_scenario(tmp_path: Path, counts=(20000, [14000, 9800, 6860])) -> Path:
    """A `profile fit --use-model iid`-style scenario: the iid fit of the counts, the counts under [fit]."""
    fit = profile_models.fit_model("iid", counts[0], counts[1], num_bootstrap=20)
    path = tmp_path / "fitted.toml"
    path.write_text(f'name = "fitted"\nnum_spec_tokens = 3\nmodel = "iid"\nalpha = {fit.values[0]!r}\n\n[fit]\n'
                    f"num_drafts = {counts[0]}\naccepted_per_position = {list(counts[1])}\n")
    return path


# ---- closed forms against simulated steps --------------------------------------------------------


@pytest.mark.parametrize("k", [3, 8])
def test_the_plans_lengths_and_throughput_lie_in_the_simulated_intervals(k):
    # a beta-geometric profile (per-request spread): each simulated request draws its own rate
    profile = plan.profile_from_scenario("spread-vs-iid", 8, profile_name="beta-geometric a=8.89 b=3.63 (K=8)")
    spread = scenarios.make_model_profile(k, "beta-geometric", (8.89, 3.63))
    n = 200_000
    counts = simulate_acceptance(list(spread.rates), n, seed=11 + k, backend="torch", device="cpu",
                                 request_rates=list(spread.request_rates)).double().numpy()
    emitted = 1.0 + counts
    half = 1.96 * emitted.std(ddof=1) / math.sqrt(n)
    assert abs(emitted.mean() - profile.lengths[k]) < half
    # throughput: simulated tokens per step over the step time, against the plan's closed form
    records, _ = plan.run_plan(plan.PlanSettings(profile, BatchCosts(), (4,)))
    row = next(r for r in records if r["num_spec_tokens"] == k)
    simulated = 1000.0 * emitted.mean() / row["step_ms"]
    assert abs(simulated - row["tokens_per_second_per_request"]) < 1000.0 * half / row["step_ms"]


def test_the_histogram_bootstrap_of_a_rates_profile_covers_its_point(tmp_path):
    path = tmp_path / "measured.toml"
    path.write_text('rates = [0.7, 0.49, 0.343]\n\n[fit]\nnum_drafts = 5000\naccepted_per_position = [3500, 2450, 1715]\n')
    profile = plan.profile_from_scenario(path, 3, num_bootstrap=100)
    assert profile.draws.shape == (100, 4) and "multinomial bootstrap" in profile.uncertainty
    low, high = np.percentile(profile.draws[:, 3], [2.5, 97.5])
    assert low < profile.lengths[3] < high


# ---- best K on a synthetic cost model ------------------------------------------------------------


def test_best_k_falls_with_the_batch_size_and_speculation_stops_paying():
    profile = plan.profile_from_rates([0.8 ** i for i in range(1, 9)], 8)
    records, summary = plan.run_plan(plan.PlanSettings(profile, BatchCosts(), (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096)))
    best = [s["best_num_spec_tokens"] for s in summary["per_batch"]]
    assert best == sorted(best, reverse=True) and best[0] >= 4 and best[-1] == 0
    assert summary["stop_batch_size"] == next(s["batch_size"] for s in summary["per_batch"] if not s["pays"])
    # K = 0 is the reference: speed-up 1, L = 1; the best row has no loss, every row has one >= 0
    for r in records:
        assert (r["speedup"], r["acceptance_length"]) == (1.0, 1.0) if r["num_spec_tokens"] == 0 else r["speedup"] > 0
        assert r["loss_vs_best"] >= -1e-12 and (r["loss_vs_best"] == 0.0) == r["is_best"]
        assert r["tokens_per_second_per_gpu"] == pytest.approx(r["batch_size"] * r["tokens_per_second_per_request"])
        assert r["cost_sources"]["target_ms"] == "measured"
    # the best static K loses least on average, and no static K beats the per-batch best anywhere
    losses = {s["num_spec_tokens"]: s["mean_loss"] for s in summary["static_k"]}
    assert losses[summary["best_static_k"]] == min(losses.values()) > 0


def test_a_fitted_model_gives_best_k_ranges_and_intervals(tmp_path):
    profile = plan.profile_from_scenario(_fit_scenario(tmp_path), 6, num_bootstrap=50)
    assert profile.draws.shape == (50, 7) and profile.extended and profile.measured_k == 3
    records, summary = plan.run_plan(plan.PlanSettings(profile, BatchCosts(), (1, 64)))
    for s in summary["per_batch"]:
        assert s["best_k_low"] <= s["best_num_spec_tokens"] <= s["best_k_high"]
        assert 0 < s["best_k_share"] <= 1 and sum(s["best_k_counts"].values()) == 50
        assert s["best_speedup_ci_low"] <= s["best_speedup"] <= s["best_speedup_ci_high"]
    assert [r["extended"] for r in records if r["batch_size"] == 1] == [False] * 4 + [True] * 3


def test_a_hand_edited_model_has_no_interval(tmp_path):
    path = _fit_scenario(tmp_path)
    path.write_text(path.read_text().replace("alpha = 0.", "alpha = 0.1"))
    profile = plan.profile_from_scenario(path, 4)
    assert profile.draws is None and "edited by hand" in profile.uncertainty


def test_vllm_and_sglang_snippets():
    per_batch = [{"batch_size": b, "best_num_spec_tokens": k} for b, k in ((1, 4), (8, 4), (64, 2), (256, 0))]
    assert plan.batch_ranges(per_batch) == [[1, 63, 4], [64, 255, 2], [256, 256, 0]]
    summary = {"best_static_k": 3, "per_batch": per_batch}
    for support, words in (((None, None), "not installed"), (("0.9.0", False), "has no"),
                           (("0.30.0", True), "has num_speculative_tokens_per_batch_size")):
        snippets = plan.config_snippets(summary, support)
        assert words in snippets["vllm_table"]
        table = json.loads(snippets["vllm_table"].split("--speculative-config '")[1].rstrip("'"))
        assert table == {"num_speculative_tokens": 4, "num_speculative_tokens_per_batch_size": [[1, 63, 4],
                                                                                               [64, 255, 2],
                                                                                               [256, 256, 0]]}
    assert '{"num_speculative_tokens": 3}' in snippets["vllm"]
    assert "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4" in snippets["sglang"]
    none = plan.config_snippets({"best_static_k": 0, "per_batch": per_batch[-1:]}, (None, None))
    assert "leave --speculative-config out" in none["vllm"] and "leave --speculative-algorithm out" in none["sglang"]


# ---- bad input: one sentence, exit 2 -------------------------------------------------------------


def _negative(b, k, cost):
    return StepCost(cost.target_ms, -0.5, cost.sampler_ms, cost.overhead_ms) if k == 2 else cost


def _cheaper_with_k(b, k, cost):
    return StepCost(cost.target_ms / (1 + k), cost.draft_ms) if b == 4 else cost


def _cheaper_with_b(b, k, cost):
    return StepCost(cost.target_ms / b, cost.draft_ms)


@pytest.mark.parametrize("costs, words", [
    (BatchCosts(batches={1, 2}), "has no step time for batch size 4 at K=0"),
    (BatchCosts(tweak=_negative), "gives draft_ms = -0.5 at batch size 1, K=2; step times must be finite and >= 0"),
    (BatchCosts(tweak=_cheaper_with_k), "a step cannot get cheaper with more draft tokens"),
    (BatchCosts(tweak=_cheaper_with_b), "a step cannot get cheaper with more requests"),
])
def test_a_bad_cost_model_is_one_sentence_and_exit_2(monkeypatch, tmp_path, costs, words):
    cost_file = tmp_path / "costs.json"
    cost_file.write_text("{}")
    monkeypatch.setattr(cli_plan, "_step_costs", lambda: SimpleNamespace(load_cost_file=lambda path: costs))
    result = runner.invoke(app, ["plan", "--rates", "0.8,0.6,0.4", "--max-k", "3", "--costs", str(cost_file),
                                 "-b", "1,2,4", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split()) and result.output.count("error:") == 1
    with pytest.raises(SpecbenchError, match="cost model synthetic"):
        plan.step_table(costs, (1, 2, 4), 3)


@pytest.mark.parametrize("args, words", [
    (["--rates", "0.8,0.6", "--max-k", "4", "-c", "0.05", "--target-ms", "10"],
     "has rates for K up to 2 and no model to extend it to --max-k 4"),
    (["-s", "eagle3-llama3.1-8b", "--max-k", "5", "-c", "0.05", "--target-ms", "10"],
     "has rates for K up to 3 and no model to extend it to --max-k 5"),
    (["--rates", "0.8,0.6", "--max-k", "2"], "give exactly one source of step costs"),
    (["--rates", "0.8,0.6", "--max-k", "2", "-c", "0.05"], "--cost-ratio needs --target-ms"),
    (["--rates", "0.8,0.6", "--max-k", "2", "-c", "0.05", "--target-ms", "10", "--gpu", "h100"],
     "--gpu belongs to --roofline"),
    (["--max-k", "2", "-c", "0.05", "--target-ms", "10"], "give one profile"),
    (["--rates", "0.8,0.6", "--max-k", "2", "-c", "0.05", "--target-ms", "10", "-b", "0"],
     "batch sizes must be whole numbers from 1"),
    (["--rates", "0.8,0.6", "--max-k", "2", "-c", "0.05", "--target-ms", "-1"], "target step time (--target-ms) must be a positive number"),
    (["-s", "spread-vs-iid", "--max-k", "2", "-c", "0.05", "--target-ms", "10"], "pick one with --profile"),
])
def test_bad_options_are_one_sentence_and_exit_2(tmp_path, args, words):
    result = runner.invoke(app, ["plan", *args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split()) and result.output.count("error:") == 1


def test_costs_that_name_a_folder_say_it_is_a_folder(tmp_path):
    # a folder was "no such file", which sends the user looking for a typo
    result = runner.invoke(app, ["plan", "--rates", "0.8,0.6", "--max-k", "2", "--costs", str(tmp_path),
                                 "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert f"--costs {tmp_path} is a folder; give the step-cost file itself" in " ".join(result.output.split())


def test_an_empty_output_is_refused_before_the_plan_is_computed(monkeypatch):
    # nothing is worked out for a run that cannot be written
    monkeypatch.setattr(plan, "run_plan", lambda settings: pytest.fail("the plan was computed"))
    result = runner.invoke(app, ["plan", "--rates", "0.8,0.6", "--max-k", "2", "-c", "0.05", "--target-ms", "10",
                                 "-o", ""])
    assert result.exit_code == 2 and "--output needs a folder name, got ''" in " ".join(result.output.split())


# ---- files, compare, plot ------------------------------------------------------------------------


def _run(tmp_path: Path, name: str, *extra: str):
    out = tmp_path / name
    result = runner.invoke(app, ["plan", "--rates", "0.8,0.64,0.51,0.41", "--max-k", "4", "-b", "1,16,256",
                                 "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    return out, result


def test_results_round_trip_and_charts(tmp_path):
    out, result = _run(tmp_path, "a", "-c", "0.05", "--target-ms", "10")
    metadata, records = results.read_results(out)
    assert metadata["kind"] == "plan" and len(records) == 3 * 5 and {r["kind"] for r in records} == {"plan"}
    assert metadata["plan"]["best_static_k"] == 4 and metadata["plan"]["stop_batch_size"] is None
    assert "--speculative-num-steps 4" in metadata["plan"]["snippets"]["sglang"]
    assert "num_speculative_tokens" in result.output and "speculation pays at every batch size asked" in result.output
    assert (out / results.RESULTS_CSV).read_text().count("\n") == 16
    for chart in (plan_charts.THROUGHPUT_CHART, plan_charts.BEST_K_CHART):
        assert (out / chart).stat().st_size > 10_000
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(results.SCHEMA_FILE.read_text())
    payload = json.loads((out / results.RESULTS_JSON).read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(payload)) == []


def test_the_best_k_charts_legend_covers_no_point(tmp_path, monkeypatch):
    # the legend sat in the upper right, over B = 256's best K and speed-up
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    drawn = {}
    save = Figure.savefig

    def keep(figure, path, **kwargs):
        drawn[Path(path).name] = figure
        return save(figure, path, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    _run(tmp_path, "a", "-c", "0.05", "--target-ms", "10")
    figure = drawn[plan_charts.BEST_K_CHART]
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)  # the layout as saved
    (legend,) = figure.legends
    for axis in figure.axes:
        assert axis.get_legend() is None
        assert not legend.get_window_extent(renderer).overlaps(axis.get_window_extent(renderer))


def test_compare_and_plot_read_plan_results(tmp_path):
    base, _ = _run(tmp_path, "base", "-c", "0.05", "--target-ms", "10", "--no-charts")
    same, _ = _run(tmp_path, "same", "-c", "0.05", "--target-ms", "10", "--no-charts")
    slower, _ = _run(tmp_path, "slower", "-c", "0.05", "--target-ms", "11", "--no-charts")
    result = runner.invoke(app, ["compare", str(base), str(same)])
    assert result.exit_code == 0 and "15 unchanged" in result.output, result.output
    result = runner.invoke(app, ["compare", str(base), str(slower)])
    assert result.exit_code == 1 and "15 slower" in result.output, result.output
    result = runner.invoke(app, ["plot", str(base), "-o", str(tmp_path / "charts")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "charts").iterdir()) == sorted([plan_charts.BEST_K_CHART,
                                                                               plan_charts.THROUGHPUT_CHART])
