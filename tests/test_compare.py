"""`specbench compare`: the perf-regression gate's verdicts, exit codes and reports."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from specbench import compare, results
from specbench.cli import app

runner = CliRunner()
SWEEP_REFERENCE = Path(__file__).resolve().parent / "data" / "sweep-reference"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> Path:
    """A real `specbench kernels --quick` run on the CPU (torch only, few samples), also on a GPU machine."""
    out = tmp_path_factory.mktemp("quick") / "run"
    result = runner.invoke(app, ["kernels", "--quick", "--device", "cpu", "--max-ms", "5", "--min-samples", "10",
                                 "--warmup", "0", "--no-charts", "-o", str(out)])
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


def _edit(run: Path, change) -> Path:
    """Apply ``change(payload)`` to a run's results.json in place."""
    payload = json.loads((run / results.RESULTS_JSON).read_text())
    change(payload)
    (run / results.RESULTS_JSON).write_text(json.dumps(payload))
    return run


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_a_run_against_itself_passes(quick_run):
    result = _compare(quick_run, quick_run)
    assert result.exit_code == 0, result.output
    assert "slower" not in result.output.split("specbench compare:")[1].split("\n")[0]


def _gzipped(run: Path, target: Path) -> Path:
    """A copy of a run whose results.json is kept compressed (results.json.gz in its place)."""
    import gzip

    shutil.copytree(run, target)
    plain = target / results.RESULTS_JSON
    (target / results.RESULTS_JSON_GZ).write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    return target


def test_a_run_kept_compressed_reads_as_the_plain_one(quick_run, tmp_path):
    kept = _gzipped(quick_run, tmp_path / "kept")
    assert results.read_results(kept) == results.read_results(quick_run)
    assert results.read_results(kept / results.RESULTS_JSON_GZ) == results.read_results(quick_run)
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    slower = _with_samples(quick_run, tmp_path / "slower", seed=2, scale={3: 1.5})
    result = _compare(_gzipped(baseline, tmp_path / "base-kept"), _gzipped(slower, tmp_path / "slower-kept"))
    assert result.exit_code == 1 and "FAIL: 1 slower" in _one_line(result.output), result.output
    assert results.read_results(kept / results.RESULTS_JSON) == results.read_results(quick_run)  # named plainly
    out = runner.invoke(app, ["kernels", "--quick", "--device", "cpu", "-o", str(kept)])
    assert out.exit_code == 2 and "kept compressed" in _one_line(out.output), out.output
    # beside a plain results.json, the compressed one is not read
    shutil.copy(baseline / results.RESULTS_JSON, kept / results.RESULTS_JSON)
    assert results.read_results(kept) == results.read_results(baseline)
    (kept / results.RESULTS_JSON).unlink()
    # damaged: a header that is not gzip's; compressed data that is not deflate's; a file cut short
    whole = (kept / results.RESULTS_JSON_GZ).read_bytes()
    for damaged in (b"\x1f\x8b not gzip", whole[:10] + b"\xff" * 20 + whole[30:], whole[: len(whole) // 2]):
        (kept / results.RESULTS_JSON_GZ).write_bytes(damaged)
        broken = _compare(kept, quick_run)
        assert broken.exit_code == 2, broken.output
        assert "is not a readable specbench results file" in _one_line(broken.stderr), broken.output


def test_a_planted_1_5x_slowdown_fails_and_is_named(quick_run, tmp_path):
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={3: 1.5})
    result = _compare(baseline, current, "--json", tmp_path / "c.json")
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "c.json").read_text())
    slower = [case for case in report["cases"] if case["verdict"] == "slower"]
    planted = json.loads((current / "results.json").read_text())["records"][3]
    assert len(slower) == 1 and f"B={planted['batch_size']}" in slower[0]["case"]
    assert slower[0]["case"].startswith("torch: " + planted["mode"])
    assert 1.45 < slower[0]["ratio"] < 1.55 and slower[0]["ci_low"] > 1.3 and slower[0]["threshold"] == 0.3
    assert report["summary"].startswith("1 slower") and "slower" in result.output and report["status"] == "FAIL"


def test_cpu_rows_are_judged_at_the_host_threshold(quick_run, tmp_path):
    # two CPU runs of one commit move by up to ~20% on a shared machine: 20% is inside the 30% default
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={3: 1.2})
    assert _compare(baseline, current).exit_code == 0
    result = _compare(baseline, current, "--host-threshold", "10%")
    assert result.exit_code == 1 and "±10%" in result.output


@pytest.mark.parametrize(("option", "value"), [("--threshold", "-1"), ("--host-threshold", "-1"),
                                                ("--host-threshold", "150%")])
def test_a_threshold_out_of_range_is_refused_naming_its_option(quick_run, tmp_path, option, value):
    result = _compare(quick_run, quick_run, option, value)
    assert result.exit_code == 2
    assert f"{option} must lie between 0% and 100%, got '{value}'" in _one_line(result.stderr)


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
    host = ("--host-threshold", "1%")  # CPU rows: the larger of the two thresholds decides
    assert _compare(baseline, current, *host).exit_code == 0  # 4% is inside the default 5%
    assert _compare(baseline, current, *host, "--threshold", "greedy=2%").exit_code == 1
    assert _compare(baseline, current, *host, "-t", "10%,greedy=3%").exit_code == 1
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
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={0: 0.5})
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
    assert f"chart: {tmp_path / 'c.png'}" in _one_line(result.output)


def test_version_differences_are_warnings_and_verdicts_stand(quick_run, tmp_path):
    current = _edit(shutil.copytree(quick_run, tmp_path / "cur"),
                    lambda p: p["metadata"].update(torch="9.9.9", python="3.99.0",
                                                   timing={**p["metadata"]["timing"], "max_ms": 1000.0}))
    result = _compare(quick_run, current, "--json", tmp_path / "c.json")
    assert result.exit_code == 0, result.output
    warnings = _one_line(result.stderr)
    before = json.loads((quick_run / "results.json").read_text())["metadata"]
    assert f"torch {before['torch']} (baseline) vs 9.9.9 (current): results may differ" in warnings
    assert f"python {before['python']} (baseline) vs 3.99.0 (current)" in warnings and "timing max_ms 5.0 (baseline) vs 1000.0 (current)" in warnings
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["counts"].get("unchanged", 0) > 0 and not any(d["invalidates"] for d in report["setting_differences"])


def test_placements_are_named_and_a_run_from_before_they_were_recorded_held_ten(quick_run, tmp_path):
    unrecorded = _edit(shutil.copytree(quick_run, tmp_path / "old"), lambda p: p["metadata"]["timing"].pop("placements", None))
    ten = _edit(shutil.copytree(quick_run, tmp_path / "ten"), lambda p: p["metadata"]["timing"].update(placements=10))
    forty = _edit(shutil.copytree(quick_run, tmp_path / "forty"), lambda p: p["metadata"]["timing"].update(placements=40))
    assert "placements" not in _one_line(_compare(unrecorded, ten).stderr)
    named = _compare(unrecorded, forty)
    assert named.exit_code in (0, 1) and "timing placements 10 (baseline) vs 40 (current)" in _one_line(named.stderr)


@pytest.mark.parametrize(("field", "value", "said"), [
    ("threads", 2, "threads 1 (baseline) vs 2 (current)"),
    ("device", "cpu (another machine)", "device cpu ("),
    ("timing", "l2_flush", "L2 flush False (baseline) vs True (current)"),
])
def test_a_setting_that_changes_every_sample_leaves_nothing_comparable(quick_run, tmp_path, field, value, said):
    # `kernels --quick` vs `kernels --quick --threads 2` once read "1 slower (29x)" with no word about threads
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={3: 1.5})
    if field == "timing":
        _edit(current, lambda p: p["metadata"]["timing"].update(l2_flush=True))
    else:
        _edit(current, lambda p: p["metadata"].update({field: value}))
    result = _compare(baseline, current, "--markdown", tmp_path / "r.md")
    message = _one_line(result.stderr)
    assert result.exit_code == 2 and said in message and "cannot be compared" in message, result.output
    assert "slower" not in result.stdout and not (tmp_path / "r.md").exists()


def test_a_setting_that_changes_some_rows_makes_them_inconclusive_with_a_note(quick_run, tmp_path):
    # calls per CUDA graph change what a graph row's sample measures, not the other rows'
    def gpu_run(payload):
        payload["metadata"]["device"] = "NVIDIA H100 80GB HBM3"
        for record in payload["records"][:4]:
            record["cuda_graph"] = True

    baseline = _edit(_with_samples(quick_run, tmp_path / "base", seed=1), gpu_run)
    current = _edit(_with_samples(quick_run, tmp_path / "cur", seed=2, scale={0: 1.5, 9: 1.5}), gpu_run)
    _edit(current, lambda p: p["metadata"]["timing"].update(graph_calls=20))
    result = _compare(baseline, current, "--json", tmp_path / "c.json")
    assert result.exit_code == 1, result.output  # record 9 is outside a graph: still judged, and slower
    cases = json.loads((tmp_path / "c.json").read_text())["cases"]
    graph_rows = [case for case in cases if case["case"].endswith(" graph")]
    assert len(graph_rows) == 4 and {case["verdict"] for case in graph_rows} == {"inconclusive"}
    planted = next(case for case in graph_rows if case["ratio"] > 1.3)
    assert planted["note"] == ("not comparable: calls per CUDA graph 10 (baseline) vs 20 (current) "
                               "(the samples alone would say slower)")
    assert [case["verdict"] for case in cases if case["ratio"] > 1.3 and case not in graph_rows] == ["slower"]
    assert "calls per CUDA graph 10 (baseline) vs 20 (current)" in _one_line(result.stderr)


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
    histogram[1] -= 1  # one count moved (a count below 0 is broken data, refused before any verdict)
    histogram[2] += 1
    (changed / "results.json").write_text(json.dumps(payload))
    result = _compare(SWEEP_REFERENCE, changed)
    assert result.exit_code == 1 and "changed" in result.output


def test_a_sweep_made_on_a_busy_machine_is_not_warned_about(tmp_path):
    # a sweep's verdicts come from its counts, which a busy machine does not change (its times are not judged)
    busy = tmp_path / "busy"
    shutil.copytree(SWEEP_REFERENCE, busy)
    _edit(busy, lambda p: p["metadata"].update(cpu_count=2, threads=1, load_average_start=9.0, load_average_end=9.0))
    result = _compare(SWEEP_REFERENCE, busy)
    assert result.exit_code == 0 and "2 same" in result.output
    assert "busy" not in result.output + result.stderr


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
    assert all(len(r["samples_us"]) == r["samples"] >= 10 for r in records)
    # on a CPU the gate times without the L2 flush and takes up to 1000 samples (--max-ms 5 here)
    timing = json.loads((quick_run / "results.json").read_text())["metadata"]["timing"]
    assert (timing["l2_flush"], timing["max_samples"], timing["max_ms"]) == (False, 1000, 5.0)
    result = runner.invoke(app, ["kernels", "--quick", "--batch-size", "4"])
    assert result.exit_code == 2 and "--quick runs a fixed grid" in result.stderr


def test_a_side_with_widely_spread_samples_cannot_decide(quick_run, tmp_path):
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={3: 1.5})
    payload = json.loads((current / "results.json").read_text())
    record = payload["records"][3]
    record.update(p20_us=record["median_us"] / 2, p80_us=record["median_us"] * 1.5)  # p80/p20 = 3: a busy host
    (current / "results.json").write_text(json.dumps(payload))
    result = _compare(baseline, current, "--json", tmp_path / "c.json")
    assert result.exit_code == 0, result.output
    case = next(c for c in json.loads((tmp_path / "c.json").read_text())["cases"] if c["ratio"] > 1.3)
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


BROKEN = {
    "all-zero samples": (lambda r: r.update(samples_us=[0.0] * len(r["samples_us"])), "of its samples_us are 0"),
    "null median": (lambda r: r.update(median_us=None), "its median_us is null"),
    "text sample": (lambda r: r["samples_us"].__setitem__(2, "fast"), 'its samples_us holds "fast"'),
    "NaN sample": (lambda r: r["samples_us"].__setitem__(0, float("nan")), "its samples_us holds NaN"),
    "NaN median": (lambda r: r.update(median_us=float("nan")), "its median_us is NaN"),
}


@pytest.mark.parametrize("side", ["baseline", "current"])
@pytest.mark.parametrize("problem", list(BROKEN))
def test_broken_timing_data_exits_2_naming_the_file_and_the_case(quick_run, tmp_path, problem, side):
    # such rows were once dropped as "not timed in both (FAIL or skipped) ... (ok -> ok)" and the run passed
    runs = {"baseline": shutil.copytree(quick_run, tmp_path / "base"), "current": shutil.copytree(quick_run, tmp_path / "cur")}
    change, said = BROKEN[problem]
    _edit(runs[side], lambda p: change(p["records"][5]))  # json writes NaN as NaN, which Python reads back
    record = json.loads((quick_run / "results.json").read_text())["records"][5]
    result = _compare(runs["baseline"], runs["current"], "--json", tmp_path / "c.json")
    message = _one_line(result.stderr)
    assert result.exit_code == 2, result.output
    assert str(runs[side] / "results.json") in message and said in message
    assert f"the case torch: {record['mode']}/{record['draft']} B={record['batch_size']} " in message
    assert "Traceback" not in result.output and not (tmp_path / "c.json").exists()


def test_nothing_timed_in_both_is_not_a_pass(quick_run, tmp_path):
    def all_failed(payload):
        for record in payload["records"]:
            record.update(status="FAIL", reason="disagrees with the torch reference", median_us=None, p20_us=None,
                          p80_us=None, samples=0, samples_us=[])

    current = _edit(shutil.copytree(quick_run, tmp_path / "cur"), all_failed)
    result = _compare(quick_run, current, "--markdown", tmp_path / "r.md")
    message = _one_line(result.stderr)
    assert result.exit_code == 2 and "20 cases in common but none timed in both" in message, result.output
    assert "(ok -> FAIL)" in message and not (tmp_path / "r.md").exists()


@pytest.mark.parametrize("chart", ["out.txt", "out", "out.PNG.bak"])
def test_a_chart_format_it_cannot_write_is_refused_before_anything_is_written(quick_run, tmp_path, chart):
    # `--markdown r.md --chart out.txt` once wrote a report saying "pass", then died with a traceback
    result = _compare(quick_run, quick_run, "--markdown", tmp_path / "r.md", "--json", tmp_path / "c.json",
                      "--chart", tmp_path / chart)
    assert result.exit_code == 2 and "--chart writes png, svg, pdf" in _one_line(result.stderr), result.output
    assert "Traceback" not in result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == []


def test_a_chart_given_a_folder_goes_inside_it_and_says_where(quick_run, tmp_path):
    folder = tmp_path / "charts"
    folder.mkdir()
    result = _compare(quick_run, quick_run, "--chart", folder, "--json", tmp_path / "c.json")
    assert result.exit_code == 0, result.output
    assert (folder / "compare.png").stat().st_size > 10_000 and not (tmp_path / "charts.png").exists()
    assert f"chart: {folder / 'compare.png'}" in _one_line(result.output)
    svg = _compare(quick_run, quick_run, "--chart", tmp_path / "c.svg")
    assert svg.exit_code == 0 and (tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")


def test_a_report_target_that_is_a_folder_is_refused_first(quick_run, tmp_path):
    result = _compare(quick_run, quick_run, "--json", tmp_path / "c.json", "--markdown", tmp_path)
    assert result.exit_code == 2 and f"--markdown {tmp_path} is a folder" in _one_line(result.stderr)
    assert not (tmp_path / "c.json").exists()


def test_every_inconclusive_row_says_why_with_numbers(quick_run, tmp_path):
    # two rows 1.3x slower, right on the 30% a CPU row is judged at: their intervals straddle it
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1, noise=0.15)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, noise=0.15, scale={0: 1.3, 1: 1.3})
    few = _with_samples(quick_run, tmp_path / "few", seed=3, count=6)
    result = _compare(baseline, current, "--json", tmp_path / "c.json")
    assert result.exit_code == 0, result.output
    cases = json.loads((tmp_path / "c.json").read_text())["cases"]
    undecided = [case for case in cases if case["verdict"] == "inconclusive"]
    assert len(undecided) >= 2 and all(case["note"] for case in undecided)
    for case in undecided:
        low, high = case["ci_low"], case["ci_high"]
        assert case["note"].startswith(f"interval [{low:.3f}, {high:.3f}] straddles ")
        assert f"±{(high - low) / 2:.1%} wide" in case["note"]
    result = _compare(baseline, few, "--json", tmp_path / "few.json")
    report = json.loads((tmp_path / "few.json").read_text())
    assert result.exit_code == 0 and report["counts"] == {"inconclusive": 20} and report["status"] == "inconclusive"
    assert {case["note"] for case in report["cases"]} == {
        "too few samples to decide: 40 (baseline) and 6 (current), fewer than 10"}


def test_the_straddled_edge_is_named():
    assert compare.judge(0.9, 1.1, 0.05, (40, 40)) == (
        "inconclusive", "interval [0.900, 1.100] straddles 0.95 and 1.05 (±5%): ±10.0% wide, too noisy to decide")
    verdict, note = compare.judge(1.2, 1.4, 0.3, (40, 40), spread=2.5)
    assert verdict == "inconclusive" and "straddles 1.30 (±30%)" in note and note.endswith("; p80/p20 = 2.5")
    assert compare.judge(1.4, 1.5, 0.3, (40, 40)) == ("slower", "")


def test_the_planted_slowdown_example_matches_a_plain_runs_rows(quick_run, tmp_path):
    # examples/slower_torch.py is torch plus a busy wait, named torch so that compare pairs its rows
    # with a plain run's (how much slower it reads is for `kernels`, not a test, to measure)
    plugin = Path(__file__).resolve().parent.parent / "examples" / "slower_torch.py"
    planted = runner.invoke(app, ["kernels", "--quick", "--device", "cpu", "--max-ms", "5", "--min-samples", "10",
                                  "--warmup", "0", "--no-charts", "--impl", f"{plugin}:slower_torch",
                                  "-o", str(tmp_path / "planted")])
    assert planted.exit_code == 0, planted.output
    result = _compare(quick_run, tmp_path / "planted", "--json", tmp_path / "c.json")
    report = json.loads((tmp_path / "c.json").read_text())
    assert result.exit_code in (0, 1) and sum(report["counts"].values()) == 20, result.output
    assert report["only_in_baseline"] == report["only_in_current"] == report["not_compared"] == []
    assert "implementation torch built-in (baseline) vs examples/slower_torch.py:slower_torch" in _one_line(
        result.stderr)


def _gpu_run(timer: str | None, ran_out: dict[int, int] | None = None):
    """An edit making a run a GPU run whose rows name ``timer`` (None: written before rows named one)."""
    def change(payload):
        payload["metadata"]["device"] = "NVIDIA H100 80GB HBM3"
        for index, record in enumerate(payload["records"]):
            record["timer"] = timer
            record["backlog_ran_out"] = (ran_out or {}).get(index, 0 if timer == "host-free" else None)
    return change


def test_rows_of_different_timers_are_never_compared(quick_run, tmp_path):
    # a file written before rows named their timer holds events rows outside a graph on a GPU
    baseline = _edit(_with_samples(quick_run, tmp_path / "base", seed=1), _gpu_run(None))
    current = _edit(_with_samples(quick_run, tmp_path / "cur", seed=2), _gpu_run("host-free"))
    result = _compare(baseline, current, "--markdown", tmp_path / "r.md")
    message = _one_line(result.stderr)
    assert result.exit_code == 2, result.output
    assert "with the events timer and the current run with host-free (20 cases differ so)" in message
    assert "rerun one of them with the other's --timer" in message and not (tmp_path / "r.md").exists()
    _edit(baseline, _gpu_run("host-free"))  # the negative control: one timer on both sides
    assert _compare(baseline, current).exit_code == 0


def test_host_free_rows_are_device_time_unless_their_backlog_ran_out(quick_run, tmp_path):
    # 20% slower: beyond the 5% of a device-time row, inside the 30% of a row that carries host time
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1, noise=0.005)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, noise=0.005, scale={3: 1.2})
    for timer, ran_out, exit_code in (("host-free", {}, 1), ("events", {}, 0), ("host-free", {3: 20}, 0)):
        _edit(baseline, _gpu_run(timer))
        _edit(current, _gpu_run(timer, ran_out))
        result = _compare(baseline, current, "--json", tmp_path / "c.json")
        assert result.exit_code == exit_code, (timer, ran_out, result.output)
    case = next(c for c in json.loads((tmp_path / "c.json").read_text())["cases"] if c["ratio"] > 1.1)
    assert case["threshold"] == 0.3 and case["note"].startswith("backlog ran out in 50% of a side's samples")


def test_a_few_ran_out_samples_leave_a_row_device_time():
    # the timer grows a backlog after it runs out, so up to RAN_OUT_ALLOWED samples may: forty placements
    # leave a small row ten to twenty samples, where two are more than MAX_RAN_OUT of them
    from specbench import timing

    assert compare.RAN_OUT_ALLOWED == timing.BACKLOG_GROWTHS == 2
    share = compare._ran_out_share
    assert share({"samples": 14, "backlog_ran_out": 2}) == 0.0
    assert share({"samples": 14, "backlog_ran_out": 3}) == pytest.approx(3 / 14)
    assert 3 / 14 > compare.MAX_RAN_OUT
    assert share({"samples": 40, "backlog_ran_out": 4}) == pytest.approx(0.1)  # not more than MAX_RAN_OUT
    assert share({"samples": 40, "backlog_ran_out": None}) == 0.0


def _calibration_runs(quick_run, tmp_path, moved: float = 1.10) -> list[Path]:
    # three A/A runs: record 0 moved by `moved` in the third, every other record at its median
    return [_with_samples(quick_run, tmp_path / f"aa{i}", seed=10 + i, noise=0.002, scale={0: moved} if i == 2 else {})
            for i in range(3)]


def test_calibrated_thresholds_come_from_the_run_to_run_spread(quick_run, tmp_path):
    from specbench import calibration

    runs = _calibration_runs(quick_run, tmp_path)
    made = runner.invoke(app, ["calibrate", *map(str, runs), "-o", str(tmp_path / "cal.json")])
    assert made.exit_code == 0, made.output
    assert "20 cases calibrated from 3 runs" in _one_line(made.output)
    cases = json.loads((tmp_path / "cal.json").read_text())["cases"]
    moved = cases[0]
    assert moved["spread"] == pytest.approx(1.10, abs=0.005)
    assert moved["threshold"] == pytest.approx(moved["spread"] ** calibration.SAFETY_FACTOR - 1)
    assert moved["threshold"] > 0.3
    assert all(case["threshold"] == calibration.FLOOR for case in cases[1:])  # 0.2% noise: the 2% floor
    # 20% slower in records 0 and 1: at the 30% host threshold neither fails; calibrated, record 1 (spread
    # nil, threshold 2%) is slower and record 0 (which moved 10% between A/A runs, threshold 33%) is not
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1, noise=0.002)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, noise=0.002, scale={0: 1.2, 1: 1.2})
    assert _compare(baseline, current).exit_code == 0
    result = _compare(baseline, current, "--calibration", tmp_path / "cal.json", "--json", tmp_path / "c.json")
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "c.json").read_text())
    records = json.loads((current / "results.json").read_text())["records"]
    verdicts = {case["case"]: case["verdict"] for case in report["cases"]}
    from specbench.compare_inputs import kernels_label

    assert verdicts[kernels_label(records[1])] == "slower" and verdicts[kernels_label(records[0])] == "unchanged"
    assert report["counts"]["slower"] == 1


def test_a_calibration_refuses_what_it_cannot_describe(quick_run, tmp_path):
    runs = _calibration_runs(quick_run, tmp_path)
    cal = tmp_path / "cal.json"
    assert runner.invoke(app, ["calibrate", *map(str, runs), "-o", str(cal)]).exit_code == 0
    folder = runner.invoke(app, ["calibrate", *map(str, runs), "-o", str(tmp_path)])
    assert folder.exit_code == 2 and f"--output {tmp_path} is a folder" in _one_line(folder.stderr)
    # one run given twice (a folder and its results.json, or a link to it) shows no spread
    link = tmp_path / "link"
    link.symlink_to(runs[0], target_is_directory=True)
    for again in (runs[0] / "results.json", link):
        twice = runner.invoke(app, ["calibrate", str(runs[0]), str(runs[1]), str(again), "-o", str(tmp_path / "t.json")])
        assert twice.exit_code == 2, twice.output
        assert f"{again} is the run {runs[0]} again" in _one_line(twice.stderr)
    assert not (tmp_path / "t.json").exists()
    one = runner.invoke(app, ["calibrate", str(runs[0])])
    assert one.exit_code == 2 and "a calibration needs two or more runs of one commit, got 1" in _one_line(one.stderr)
    _edit(runs[2], lambda p: p["metadata"].update(commit="0000000"))
    other = runner.invoke(app, ["calibrate", *map(str, runs), "-o", str(tmp_path / "x.json")])
    assert other.exit_code == 2 and "an A/A calibration needs runs of one commit" in _one_line(other.stderr)
    gpu = _edit(_with_samples(quick_run, tmp_path / "gpu", seed=3), _gpu_run("host-free"))
    elsewhere = _compare(gpu, gpu, "--calibration", cal)
    assert elsewhere.exit_code == 2 and "calibrate on the device you compare on" in _one_line(elsewhere.stderr)
    payload = json.loads(cal.read_text())
    payload["cases"][0]["timer"] = "events"
    (tmp_path / "timer.json").write_text(json.dumps(payload))
    timed = _compare(runs[0], runs[1], "--calibration", tmp_path / "timer.json")
    assert timed.exit_code == 2 and "with the events timer and the run with perf_counter" in _one_line(timed.stderr)
    (tmp_path / "broken.json").write_text("{}")
    broken = _compare(runs[0], runs[1], "--calibration", tmp_path / "broken.json")
    assert broken.exit_code == 2 and "is not a calibration file" in _one_line(broken.stderr)
    assert "Traceback" not in broken.output + timed.output + elsewhere.output


def _retimed_case(arguments) -> tuple:
    """The (mode, batch size, acceptance, draft) a re-timing's ``specbench kernels`` arguments name."""
    return tuple(arguments[arguments.index(option) + 1] if option in arguments else None
                 for option in ("--mode", "--batch-size", "--acceptance-length", "--draft"))


def test_confirm_retimes_a_slower_case_in_a_fresh_process(quick_run, tmp_path):
    # record 0 (greedy B=1) really is 100x slower than this baseline says: one real re-timing (a `specbench kernels`
    # process on this CPU) measures that. Records 5 and 10 were planted slower in the current file alone; stand-ins
    # re-time them, one writing the current file's numbers (which confirm it) and one the baseline's (which clear it).
    from specbench import confirm

    baseline = _with_samples(quick_run, tmp_path / "base", seed=1, scale={0: 0.01})
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={5: 3.0, 10: 2.5})
    metadata, records = results.read_results(current)
    planned = [_retimed_case(confirm.retime_arguments(records[i], metadata, tmp_path)) for i in (0, 5, 10)]
    stand_ins = {planned[1]: current, planned[2]: baseline}
    assert len(set(planned)) == 3
    calls = []

    def runner_(arguments):
        calls.append(list(arguments))
        copied = stand_ins.get(_retimed_case(arguments))
        if copied is not None:
            shutil.copytree(copied, arguments[arguments.index("--output") + 1])
            return 0, ""
        return confirm.run_specbench(arguments)

    comparison = compare.compare_runs(baseline, current)
    assert sorted(case.verdict for case in comparison.cases if case.ratio > 2) == ["slower"] * 3
    assert confirm.confirm_slower(comparison, baseline, current, runner_) == 3
    by_label = {case.case: case for case in comparison.cases}
    from specbench.compare_inputs import kernels_label

    real, confirmed, cleared = (by_label[kernels_label(records[i])] for i in (0, 5, 10))
    tripled = re.search(r"^confirmed: ratio ([0-9.]+) ", confirmed.note.split("; ")[-1])
    assert confirmed.verdict == "slower" and tripled is not None and abs(float(tripled.group(1)) - 3) < 0.1
    assert cleared.verdict == "inconclusive" and "not confirmed: ratio 1.000" in cleared.note
    # the real re-timing measured the planted 100x; on a busy 2-core machine its samples can spread past
    # compare.MAX_SPREAD, which the gate calls inconclusive and says so (seen in whole-suite CI runs)
    measured = re.search(r"ratio ([0-9.]+) \[[0-9., ]+\] when re-timed in a fresh process", real.note)
    assert measured is not None and float(measured.group(1)) > 10, real.note
    assert (real.verdict == "slower" and "confirmed: ratio" in real.note) or \
        (real.verdict == "inconclusive" and "too spread to decide: p80/p20" in real.note), real.note
    assert len(calls) == 3 and all(call[:3] == ["kernels", "--device", "cpu"] for call in calls)
    assert calls[0][calls[0].index("--max-ms") + 1] == "5.0" and "--no-l2-flush" in calls[0]


@pytest.mark.parametrize("options", [["--method", "block", "-l", "2"], ["--inputs", "natural", "--draft-noise", "1.5"],
                                     ["--tree", "2x2", "-l", "2"]])
def test_retime_arguments_remake_a_case_of_another_method_natural_inputs_or_a_tree(tmp_path, options):
    # the re-timing must time the same case (the same records.record_key), or --confirm can only say it failed
    from specbench import confirm
    from specbench.records import record_key

    small = ["--device", "cpu", "--impl", "torch", "--mode", "probabilistic", "-b", "1", "--vocab-size", "64",
             "--max-ms", "0", "--min-samples", "3", "--max-samples", "3", "--warmup", "0", "--no-charts"]
    first = runner.invoke(app, ["kernels", *small, *(["-k", "2"] if "--tree" not in options else []), *options,
                                "-o", str(tmp_path / "run")])
    assert first.exit_code == 0, first.output
    metadata, records = results.read_results(tmp_path / "run")
    record = records[-1]  # (a tree run times the chain of its depth first)
    assert record.get("method") == "block" or record.get("inputs") == "natural" or record.get("tree") == "2x2"
    arguments = confirm.retime_arguments(record, metadata, tmp_path / "again")
    again = runner.invoke(app, arguments)
    assert again.exit_code == 0, (arguments, again.output)
    _, retimed = results.read_results(tmp_path / "again")
    assert record_key(record) in [record_key(r) for r in retimed if r["status"] == "ok"], arguments


def test_retime_arguments_remake_the_case_and_a_failed_retiming_keeps_the_verdict(quick_run, tmp_path):
    from specbench import confirm

    metadata, records = results.read_results(quick_run)
    record = {**records[2], "top_k": 50, "sampling": "fixed", "logprobs": "raw", "acceptance": "2.5 geometric"}
    arguments = confirm.retime_arguments(record, metadata, tmp_path / "out")
    text = " ".join(arguments)
    assert "--mode probabilistic" in text and "--draft logits" in text and "--top-k 50" in text
    assert "--acceptance-length 2.5 --schedule geometric" in text and "--logprobs raw" in text
    assert "--timer" not in text and f"--seed {metadata['seed']}" in text  # a CPU run has one timer
    forty = {**metadata, "timing": {**metadata["timing"], "placements": 40}}
    assert "--placements 40" in " ".join(confirm.retime_arguments(record, forty, tmp_path / "out"))
    # a run from before placements were recorded ran ten, not today's default
    unrecorded = {**metadata, "timing": {k: v for k, v in metadata["timing"].items() if k != "placements"}}
    assert "--placements 10" in " ".join(confirm.retime_arguments(record, unrecorded, tmp_path / "out"))
    assert confirm.retime_arguments({**record, "acceptance": "chat"}, metadata, tmp_path) is None
    baseline = _with_samples(quick_run, tmp_path / "base", seed=1)
    current = _with_samples(quick_run, tmp_path / "cur", seed=2, scale={0: 2.5})
    comparison = compare.compare_runs(baseline, current)
    confirm.confirm_slower(comparison, baseline, current, lambda arguments: (2, "error: no GPU here\n"))
    case = next(case for case in comparison.cases if case.ratio > 2)
    assert case.verdict == "slower" and "the re-timing failed (exit 2: error: no GPU here)" in case.note
    gpu = _edit(current, _gpu_run(None))
    _edit(baseline, _gpu_run(None))
    result = _compare(baseline, gpu, "--confirm", "--host-threshold", "10%")
    here = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"  # never the H100 the run names
    said = _one_line(result.stderr)
    assert result.exit_code == 2 and f"--confirm re-times on this machine ({here}" in said and "H100" in said


# ---- hand-edited files, options, wording (on the committed CPU runs and hand-made plans: no kernels run) --------

BASELINES = Path(__file__).resolve().parent.parent / "results" / "baselines"
RUN_A, RUN_B = BASELINES / "cpu-quick-a", BASELINES / "cpu-quick-b"


def _plan_run(folder: Path) -> Path:
    """A plan run written by hand: one profile at B = 1, K = 0 and K = 2, with the fields `plan` writes that compare
    reads."""
    records = [{"kind": "plan", "profile": "[0.8, 0.64]", "scenario": None, "batch_size": 1, "num_spec_tokens": k,
                "acceptance_length": length, "acceptance_length_ci_low": None, "acceptance_length_ci_high": None,
                "step_ms": step_ms, "is_best": k == 2, "best_num_spec_tokens": 2}
               for k, length, step_ms in ((0, 1.0, 10.0), (2, 2.44, 12.0))]
    folder.mkdir()
    metadata = {"kind": "plan", "schema_version": results.SCHEMA_VERSION, "commit": "0000000"}
    (folder / results.RESULTS_JSON).write_text(json.dumps({"metadata": metadata, "records": records}))
    return folder


HAND_EDITED = {
    "sweep histogram missing": ("sweep", lambda p: p["records"][1].pop("accepted_histogram"),
                                "record 1 lacks the field accepted_histogram"),
    "sweep rates missing": ("sweep", lambda p: p["records"][0].pop("configured_rates"),
                            "record 0 lacks the field configured_rates"),
    "sweep rates text": ("sweep", lambda p: p["records"][0].update(configured_rates="zz"),
                         'record 0 has configured_rates "zz" where a list of numbers belongs'),
    "sweep mean missing": ("sweep", lambda p: p["records"][1].pop("mean_acceptance_length"),
                           "record 1 lacks the field mean_acceptance_length"),
    "plan step missing": ("plan", lambda p: p["records"][1].pop("step_ms"), "record 1 lacks the field step_ms"),
    "plan batch missing": ("plan", lambda p: p["records"][0].pop("batch_size"), "record 0 lacks the field batch_size"),
    "plan length text": ("plan", lambda p: p["records"][1].update(acceptance_length="2.44"),
                         'record 1 has acceptance_length "2.44" where a positive number belongs'),
    "kernels ran-out text": ("kernels", lambda p: p["records"][4].update(backlog_ran_out="zz"),
                             'record 4 has backlog_ran_out "zz" where a whole number belongs'),
}


@pytest.mark.parametrize("problem", list(HAND_EDITED))
def test_a_hand_edited_field_is_refused_naming_the_file_the_record_and_the_field(tmp_path, problem):
    # each once ended in a KeyError, TypeError or ValueError (exit 70)
    kind, change, said = HAND_EDITED[problem]
    run = {"sweep": SWEEP_REFERENCE, "kernels": RUN_A}.get(kind) or _plan_run(tmp_path / "plan")
    edited = _edit(shutil.copytree(run, tmp_path / "edited"), change)
    for baseline, current in ((run, edited), (edited, run)):
        result = _compare(baseline, current, "--json", tmp_path / "c.json")
        message = _one_line(result.stderr)
        assert result.exit_code == 2, result.output
        assert f"{edited / results.RESULTS_JSON}: {said}, so compare cannot read that {kind} record" in message
        assert "Traceback" not in result.output and not (tmp_path / "c.json").exists()


@pytest.mark.parametrize(("options", "said"), [
    (["--host-threshold", "greedy=10%"], "--host-threshold takes one threshold for every row, such as 10%"),
    (["--host-threshold", "10%,20%"], "--host-threshold takes one threshold for every row, such as 10%, got '10%,20%'"),
    (["-t", "10%,3%"], "--threshold gives every mode two thresholds (10% and 3%); give one"),
    (["-t", "3%", "-t", "10%"], "--threshold gives every mode two thresholds (3% and 10%); give one"),
    (["-t", "greedy=3%,greedy=10%"], "--threshold gives mode greedy two thresholds (3% and 10%); give one"),
    (["-t", "=3%"], "--threshold '=3%' names no mode before '='"),
    (["-t", "5"], "--threshold must lie between 0% and 100%, got '5'; write percentages with %, e.g. 5%"),
])
def test_a_threshold_given_twice_or_for_no_mode_is_refused(options, said):
    # each was taken silently: --host-threshold greedy=10% judged every CPU row at 30%, a second value won
    result = _compare(RUN_A, RUN_B, *options)
    assert result.exit_code == 2 and said in _one_line(result.stderr), result.output
    assert compare.parse_thresholds(["3%", "greedy=2%,probabilistic=0.04"]) == {
        None: 0.03, "greedy": 0.02, "probabilistic": 0.04}


@pytest.mark.parametrize(("kind", "options", "said"), [
    ("sweep", ["--threshold", "7%", "--host-threshold", "50%", "--confirm"],
     ("--threshold 7%, --host-threshold 50% and --confirm do not apply to sweep runs (a sweep's cases are judged by "
      "their counts of accepted tokens, not by a slowdown): --threshold applies to kernels and plan runs; "
      "--host-threshold and --confirm apply to kernels runs; leave them out")),
    ("plan", ["--confirm"], "--confirm does not apply to plan runs"),
    ("plan", ["--host-threshold", "50%"], "--host-threshold 50% does not apply to plan runs"),
    ("plan", ["-t", "greedy=3%"], ("--threshold greedy=3% does not apply to plan runs (a plan's rows are modelled "
                                   "step times: none is timed, and none has a mode): a per-mode --threshold applies "
                                   "to kernels runs; leave it out")),
])
def test_an_option_the_kind_of_run_compared_does_not_read_is_refused(tmp_path, kind, options, said):
    # each once exited 0 without a word about the option
    run = SWEEP_REFERENCE if kind == "sweep" else _plan_run(tmp_path / "plan")
    result = _compare(run, run, *options, "--json", tmp_path / "c.json")
    assert result.exit_code == 2 and said in _one_line(result.stderr), result.output
    assert not (tmp_path / "c.json").exists()
    if kind == "plan":  # one threshold for every row is what a plan reads
        judged = _compare(run, run, "-t", "3%", "--json", tmp_path / "c.json")
        assert judged.exit_code == 0 and json.loads((tmp_path / "c.json").read_text())["cases"][0]["threshold"] == 0.03


def test_metadata_without_a_kind_or_a_schema_number_is_worded_for_a_reader(tmp_path):
    # they said "holds a None run" and "results schema 'two', newer than this specbench reads"
    unnamed = _edit(shutil.copytree(RUN_A, tmp_path / "unnamed"), lambda p: p["metadata"].pop("kind"))
    result = _compare(RUN_A, unnamed)
    assert result.exit_code == 2 and (f"{unnamed} does not say what kind of run it holds (its metadata has no kind)"
                                      in _one_line(result.stderr)), result.output
    for version in ("two", True):
        wrong = _edit(shutil.copytree(RUN_A, tmp_path / f"schema-{version}"),
                      lambda p, version=version: p["metadata"].update(schema_version=version))
        result = _compare(RUN_A, wrong)
        assert result.exit_code == 2 and f"gives results schema {version!r}, which is not a schema number" in \
            _one_line(result.stderr), result.output


def test_counts_of_one_case_are_singular(tmp_path):
    shorter = _edit(shutil.copytree(RUN_A, tmp_path / "shorter"), lambda p: p["records"].pop())
    result = _compare(RUN_A, shorter)
    assert result.exit_code == 0 and "1 case only in the baseline: " in _one_line(result.stdout), result.output
    assert compare.plural(1, "case") == "1 case" and compare.plural(0, "case") == "0 cases"


def test_a_partial_merge_is_named_on_whichever_side_it_is(tmp_path):
    # `merge --allow-partial` of shard 1 of 2 once compared as a whole run, its missing cases only listed
    payload = json.loads((RUN_A / results.RESULTS_JSON).read_text())
    shard = tmp_path / "shard-1"
    shard.mkdir()
    metadata = {**payload["metadata"], "shard": {"index": 1, "count": 2}, "interrupted": False}
    (shard / results.RESULTS_JSON).write_text(json.dumps({"metadata": metadata, "records": payload["records"][:10]}))
    merged = runner.invoke(app, ["merge", str(shard), "--allow-partial", "-o", str(tmp_path / "merged"),
                                 "--no-charts"])
    assert merged.exit_code == 0, merged.output
    said = ("run is a partial merge (specbench merge --allow-partial: shard 2/2 is not among them): the cases it "
            "lacks are not compared, only listed as only in the")
    result = _compare(RUN_A, tmp_path / "merged", "--json", tmp_path / "c.json")
    assert result.exit_code == 0 and f"the current {said} baseline" in _one_line(result.stderr), result.output
    assert "10 cases only in the baseline" in _one_line(result.stdout)
    assert json.loads((tmp_path / "c.json").read_text())["partial_runs"] == [f"the current {said} baseline"]
    result = _compare(tmp_path / "merged", RUN_A)
    assert result.exit_code == 0 and f"the baseline {said} current run" in _one_line(result.stderr), result.output
    assert "partial" not in _compare(RUN_A, RUN_B).stderr  # the control: a whole run is not named
