"""`specbench compare`: the perf-regression gate's verdicts, exit codes and reports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from specbench import compare, results
from specbench.cli import app

runner = CliRunner()
SWEEP_REFERENCE = Path(__file__).resolve().parent / "data" / "sweep-reference"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> Path:
    """A real `specbench kernels --quick` run on the CPU (torch only, few samples), also on a GPU machine."""
    out = tmp_path_factory.mktemp("quick") / "run"
    result = runner.invoke(app, ["kernels", "--quick", "--device", "cpu", "--max-ms", "5", "--min-samples", "5", "--warmup", "0",
                                 "--no-charts", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _with_samples(source: Path, target: Path, seed: int, scale: dict[int, float] | None = None,
                  noise: float = 0.02, count: int = 40) -> Path:
    """A copy of a run whose samples are drawn around each record's median (relative noise ``noise``),
    record ``i`` scaled by ``scale[i]``: runs whose truth is known, free of this machine's load."""
    payload = json.loads((source / results.RESULTS_JSON).read_text())
    generator = np.random.default_rng(seed)
    for index, record in enumerate(payload["records"]):
        factor = (scale or {}).get(index, 1.0)
        samples = record["median_us"] * factor * (1 + noise * generator.standard_normal(count))
        p20, median, p80 = np.percentile(samples, [20, 50, 80])
        record.update(samples_us=samples.tolist(), median_us=float(median), p20_us=float(p20), p80_us=float(p80),
                      samples=count)
    target.mkdir(parents=True)
    (target / results.RESULTS_JSON).write_text(json.dumps(payload))
    return target


def _compare(*args: str):
    return runner.invoke(app, ["compare", *map(str, args)])


def test_a_run_against_itself_passes(quick_run):
    result = _compare(quick_run, quick_run)
    assert result.exit_code == 0, result.output
    assert "slower" not in result.output.split("specbench compare:")[1].split("\n")[0]


def test_a_planted_20_percent_slowdown_fails_and_is_named(quick_run, tmp_path):
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={3: 1.2})
    result = _compare(baseline, current, "--json", tmp_path / "c.json")
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "c.json").read_text())
    slower = [case for case in report["cases"] if case["verdict"] == "slower"]
    planted = json.loads((current / "results.json").read_text())["records"][3]
    assert len(slower) == 1 and f"B={planted['batch_size']}" in slower[0]["case"]
    assert slower[0]["case"].startswith("torch: " + planted["mode"])
    assert 1.15 < slower[0]["ratio"] < 1.25 and slower[0]["ci_low"] > 1.05
    assert report["summary"].startswith("1 slower") and "slower" in result.output


def test_a_one_percent_change_passes(quick_run, tmp_path):
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    everything = {i: 1.01 for i in range(100)}
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale=everything)
    result = _compare(baseline, current)
    assert result.exit_code == 0, result.output


def test_noise_alone_never_says_slower():
    # 300 pairs drawn from one distribution (5% noise, 30 samples a side): no false alarm
    generator = np.random.default_rng(7)
    verdicts = []
    for _ in range(300):
        base, cur = 100 * (1 + 0.05 * generator.standard_normal((2, 30)))
        _, low, high = compare.bootstrap_ratio(base, cur, resamples=1000)
        verdicts.append(compare.verdict_for(low, high, 0.05))
    assert "slower" not in verdicts and "faster" not in verdicts
    # and most pairs are decided (232 of 300 with this seed): an interval of +-3% fits inside +-5%
    assert verdicts.count("unchanged") > 200


def test_too_noisy_to_decide_is_inconclusive_not_a_pass_or_an_alarm():
    generator = np.random.default_rng(3)
    base = 100 * (1 + 0.5 * np.abs(generator.standard_normal(8)))
    cur = 106 * (1 + 0.5 * np.abs(generator.standard_normal(8)))
    _, low, high = compare.bootstrap_ratio(base, cur)
    assert compare.verdict_for(low, high, 0.05) == "inconclusive"


def test_thresholds_per_mode(quick_run, tmp_path):
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1, noise=0.005)
    records = json.loads((baseline / "results.json").read_text())["records"]
    greedy = next(i for i, r in enumerate(records) if r["mode"] == "greedy")
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, noise=0.005, scale={greedy: 1.04})
    assert _compare(baseline, current).exit_code == 0  # 4% is inside the default 5%
    assert _compare(baseline, current, "--threshold", "greedy=2%").exit_code == 1
    assert _compare(baseline, current, "-t", "10%,greedy=3%").exit_code == 1
    for bad in ("fast", "150%", "turbo=3%", "0"):
        result = _compare(baseline, current, "--threshold", bad)
        assert result.exit_code == 2 and "--threshold" in result.stderr


def test_files_without_samples_are_compared_by_medians_with_a_note(tmp_path):
    repo = Path(__file__).resolve().parent.parent / "results"
    result = _compare(repo / "h200-kernels-4f73479", repo / "h200-kernels", "--markdown", tmp_path / "r.md")
    assert result.exit_code in (0, 1), result.output
    assert "compared by their medians alone" in " ".join(result.output.split())
    text = (tmp_path / "r.md").read_text()
    assert "commit `4f73479" in text and "commit `c62f51b" in text and "medians only" in text


def test_markdown_json_and_chart(quick_run, tmp_path):
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={0: 0.7})
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    result = _compare(baseline, current, "--markdown", summary, "--json", tmp_path / "c.json",
                      "--chart", tmp_path / "c.png")
    assert result.exit_code == 0, result.output
    text = summary.read_text()
    assert text.startswith("earlier step\n## specbench compare: pass")  # appended, as a step summary is
    counts = json.loads((tmp_path / "c.json").read_text())["counts"]
    assert counts["faster"] == 1 and f"**1 faster, {counts.get('unchanged', 0)} unchanged" in text
    assert "| case | baseline median µs |" in text and "torch:" in text
    assert (tmp_path / "c.png").stat().st_size > 10_000


def test_environment_differences_are_named(quick_run, tmp_path):
    current = tmp_path / "cur"
    shutil.copytree(quick_run, current)
    payload = json.loads((current / "results.json").read_text())
    payload["metadata"].update(torch="9.9.9", device="another machine")
    (current / "results.json").write_text(json.dumps(payload))
    result = _compare(quick_run, current)
    warnings = " ".join(result.stderr.split())
    assert "torch differs" in warnings and "device differs" in warnings


def test_a_fixed_seed_sweep_repeats_its_committed_reference(tmp_path):
    metadata = json.loads((SWEEP_REFERENCE / "results.json").read_text())["metadata"]
    assert metadata["command"] == "specbench sweep -l 2.5 -k 2,3 -n 20000 --no-charts -o tests/data/sweep-reference"
    rerun = runner.invoke(app, ["sweep", "-l", "2.5", "-k", "2,3", "-n", "20000", "--no-charts",
                                "-o", str(tmp_path / "now")])
    assert rerun.exit_code == 0, rerun.output
    result = _compare(SWEEP_REFERENCE, tmp_path / "now")
    assert result.exit_code == 0, result.output
    assert "2 same" in result.output


def test_a_changed_count_in_a_fixed_seed_sweep_fails(tmp_path):
    changed = tmp_path / "changed"
    shutil.copytree(SWEEP_REFERENCE, changed)
    payload = json.loads((changed / "results.json").read_text())
    histogram = payload["records"][1]["accepted_histogram"]
    histogram[0] -= 1
    histogram[1] += 1
    (changed / "results.json").write_text(json.dumps(payload))
    result = _compare(SWEEP_REFERENCE, changed)
    assert result.exit_code == 1 and "changed" in result.output


def test_sweeps_under_other_seeds_are_compared_through_chance(tmp_path):
    other = runner.invoke(app, ["sweep", "-l", "2.5", "-k", "2,3", "-n", "20000", "--seed", "5", "--no-charts",
                                "-o", str(tmp_path / "seed5")])
    assert other.exit_code == 0
    result = _compare(SWEEP_REFERENCE, tmp_path / "seed5")
    assert result.exit_code == 0 and "2 same" in result.output and "chi-square" in result.output


@pytest.mark.parametrize("problem", ["broken", "missing", "newer", "kinds", "nothing in common"])
def test_unusable_input_exits_2_with_one_sentence(quick_run, tmp_path, problem):
    other = tmp_path / "other"
    shutil.copytree(quick_run, other)
    payload = json.loads((other / "results.json").read_text())
    if problem == "broken":
        (other / "results.json").write_text("{not json")
    elif problem == "missing":
        shutil.rmtree(other)
    elif problem == "newer":
        payload["metadata"]["schema_version"] = results.SCHEMA_VERSION + 1
        (other / "results.json").write_text(json.dumps(payload))
    elif problem == "kinds":
        other = SWEEP_REFERENCE
    else:
        for record in payload["records"]:
            record["batch_size"] += 1000
        (other / "results.json").write_text(json.dumps(payload))
    result = _compare(quick_run, other)
    said = {"broken": "not a readable specbench results file", "missing": "not a specbench results folder",
            "newer": "newer than this specbench reads", "kinds": "compare two runs of one kind",
            "nothing in common": "no case in common"}[problem]
    assert result.exit_code == 2 and said in " ".join(result.stderr.split()), result.output
    assert "Traceback" not in result.output


def test_quick_refuses_grid_options_and_runs_on_the_cpu(quick_run):
    records = json.loads((quick_run / "results.json").read_text())["records"]
    assert {r["mode"] for r in records} == {"greedy", "probabilistic", "synthetic"}
    assert {r["draft"] for r in records if r["mode"] == "probabilistic"} == {"logits", "probs", "none"}
    assert {r["batch_size"] for r in records} == {1, 8} and {r["acceptance"] for r in records} == {"3", "full"}
    assert all(len(r["samples_us"]) == r["samples"] >= 5 for r in records)
    result = runner.invoke(app, ["kernels", "--quick", "--batch-size", "4"])
    assert result.exit_code == 2 and "--quick runs a fixed grid" in result.stderr


def test_a_side_with_widely_spread_samples_cannot_decide(quick_run, tmp_path):
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={3: 1.2})
    payload = json.loads((current / "results.json").read_text())
    record = payload["records"][3]
    record.update(p20_us=record["median_us"] / 2, p80_us=record["median_us"] * 1.5)  # p80/p20 = 3: a busy host
    (current / "results.json").write_text(json.dumps(payload))
    result = _compare(baseline, current, "--json", tmp_path / "c.json")
    assert result.exit_code == 0, result.output
    case = next(c for c in json.loads((tmp_path / "c.json").read_text())["cases"] if c["ratio"] > 1.1)
    assert case["verdict"] == "inconclusive" and "too spread to decide: p80/p20 = 3.0" in case["note"]


def test_gpu_rows_outside_a_graph_are_gated_at_the_host_threshold(quick_run, tmp_path):
    runs = []
    for name, seed, scale in (("base", 1, {}), ("cur", 2, {3: 1.2})):
        run = _with_samples(quick_run, tmp_path / name, seed=seed, scale=scale)
        payload = json.loads((run / "results.json").read_text())
        payload["metadata"]["device"] = "NVIDIA H100 80GB HBM3"  # a GPU run: these rows carry launch overhead
        (run / "results.json").write_text(json.dumps(payload))
        runs.append(run)
    assert _compare(*runs).exit_code == 0  # 20% is inside the 30% a host-bound row may move between processes
    result = _compare(*runs, "--host-threshold", "10%")
    assert result.exit_code == 1 and "±10%" in result.output


def test_a_run_made_on_a_busy_machine_is_named(quick_run, tmp_path):
    current = tmp_path / "cur"
    shutil.copytree(quick_run, current)
    payload = json.loads((current / "results.json").read_text())
    payload["metadata"].update(cpu_count=2, threads=1, load_average_start=4.6, load_average_end=4.7)
    (current / "results.json").write_text(json.dumps(payload))
    result = _compare(quick_run, current, "--markdown", tmp_path / "r.md")
    said = "the current run's machine was busy (1-minute load average 4.70 on 2 cores)"
    assert said in " ".join(result.stderr.split()) and said in (tmp_path / "r.md").read_text()
