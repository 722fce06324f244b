"""`specbench profile fit`: vLLM metrics scrapes and log lines into a scenario a sweep can run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench import profile_fit, scenarios
from specbench.cli import app
from specbench.errors import SpecbenchError

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parent.parent / "scenarios" / "examples"
MODEL = 'model_name="org/target-8b"'


def _scrape(engines: dict[str, dict], *, model: str = MODEL, shuffle: int | None = None, extra: str = "") -> str:
    """A /metrics scrape as vLLM's Python client writes it: `_total` counters, `_created` gauges,
    HELP/TYPE comments, other metrics around them; ``engines`` maps an engine label to its counts."""
    lines = ['vllm:num_requests_running{engine="0",' + model + "} 3.0",
             'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.01",' + model + "} 7.0",
             'vllm:time_to_first_token_seconds_sum{engine="0",' + model + "} 1.25"]
    for engine, counts in engines.items():
        labels = f'engine="{engine}",{model}'
        lines += [f"vllm:spec_decode_num_drafts_total{{{labels}}} {counts['drafts']}",
                  f"vllm:spec_decode_num_drafts_created{{{labels}}} 1.7639e+09",
                  f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {counts['drafts'] * len(counts['pos'])}",
                  f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {sum(counts['pos'])}",
                  f"vllm:spec_decode_num_accepted_tokens_created{{{labels}}} 1.7639e+09"]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {v}'
                  for i, v in enumerate(counts["pos"])]
    if shuffle is not None:
        random.Random(shuffle).shuffle(lines)
    header = ["# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
              "# TYPE vllm:spec_decode_num_drafts_total counter"]
    return "\n".join(header + lines) + "\n" + extra


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _fit(*args: str):
    return runner.invoke(app, ["profile", "fit", *args])


def test_one_scrape_of_two_engines_sums_them_whatever_the_order(tmp_path):
    engines = {"0": {"drafts": 1000, "pos": [800, 600, 300]}, "1": {"drafts": 3000, "pos": [2000, 1400, 900]}}
    for seed in (None, 1, 2):
        path = _write(tmp_path, f"m{seed}.prom", _scrape(engines, shuffle=seed))
        counts = profile_fit.read_counts([path])
        assert counts.num_drafts == 4000 and counts.accepted_per_position == [2800, 2000, 1200]
        assert counts.num_draft_tokens == 12000 and counts.num_accepted_tokens == 6000
        assert counts.model == "org/target-8b"
    fit = profile_fit.fit_profile(counts)
    assert fit.measured_rates == [0.7, 0.5, 0.3] and fit.rates == fit.measured_rates and fit.non_increasing
    assert fit.mean_acceptance_length == pytest.approx(2.5)
    for low, rate, high in zip(fit.ci_low, fit.rates, fit.ci_high):
        assert low < rate < high and high - low < 0.04  # 4000 drafts: about +-0.014 at p = 0.5


def test_two_scrapes_give_the_interval_between_them(tmp_path):
    before = _write(tmp_path, "before.prom", _scrape({"0": {"drafts": 500, "pos": [400, 100]}}))
    after = _write(tmp_path, "after.prom", _scrape({"0": {"drafts": 1500, "pos": [1000, 600]}}, shuffle=3))
    counts = profile_fit.read_counts([before, after])
    assert counts.num_drafts == 1000 and counts.accepted_per_position == [600, 500]
    assert "between the scrapes before.prom and after.prom" in counts.span


def test_a_counter_that_went_down_is_a_restart(tmp_path):
    before = _write(tmp_path, "before.prom", _scrape({"0": {"drafts": 5000, "pos": [4000, 3000]}}))
    after = _write(tmp_path, "after.prom", _scrape({"0": {"drafts": 300, "pos": [200, 100]}}))
    out = tmp_path / "p.toml"
    result = _fit(str(before), str(after), "-o", str(out))
    message = " ".join(result.stderr.split())
    assert result.exit_code == 2 and "went down from 5000" in message and "restarted" in message
    assert "the two files are in the wrong order (give the earlier scrape first)" in message, message
    assert not out.exists()


def test_several_models_need_model_and_model_picks_one(tmp_path):
    text = (_scrape({"0": {"drafts": 100, "pos": [90, 80]}})
            + _scrape({"0": {"drafts": 100, "pos": [10, 5]}}, model='model_name="org/other"'))
    path = _write(tmp_path, "two.prom", text)
    result = _fit(str(path), "-o", str(tmp_path / "a.toml"))
    assert result.exit_code == 2 and "several models (org/other, org/target-8b)" in " ".join(result.stderr.split())
    assert profile_fit.read_counts([path], "org/other").accepted_per_position == [10, 5]
    with pytest.raises(SpecbenchError, match="no spec-decode series of model 'org/none'"):
        profile_fit.read_counts([path], "org/none")


@pytest.mark.parametrize("text, said", [
    (_scrape({"0": {"drafts": 10, "pos": [5, 4, 3]}}).replace('position="1"', 'position="7"'), "but not 1"),
    (_scrape({"0": {"drafts": 0, "pos": [0, 0]}}), "zero drafts were verified"),
    (_scrape({"0": {"drafts": 10, "pos": [5, 4]}}, extra="vllm:spec_decode_num_drafts_total{engine=1 3\n"),
     "not a Prometheus sample line"),
    (_scrape({"0": {"drafts": 10, "pos": [5, 4]}}, extra='vllm:spec_decode_num_drafts_total{engine="9"} lots\n'),
     "is not a number"),
    ("hello\nworld\n", "is none of the sources profile fit reads"),
    ('vllm:spec_decode_num_drafts_total{engine="0"} 10\n', "has no vllm:spec_decode_num_accepted_tokens counter"),
    # the one K limit of every profile: a sweep would refuse the scenario, so it is never written
    (_scrape({"0": {"drafts": 100, "pos": [50] * 70}}), "drafted K = 70 tokens a step; specbench profiles hold at most"),
    (_scrape({"0": {"drafts": 10, "pos": [5]}}).replace('position="0"', 'position="999999999999"'), "K = 1000000000000"),
])
def test_bad_input_is_one_sentence_naming_the_file_and_nothing_is_written(tmp_path, text, said):
    path = _write(tmp_path, "bad.prom", text)
    out = tmp_path / "p.toml"
    result = _fit(str(path), "-o", str(out))
    message = " ".join(result.stderr.split())
    assert result.exit_code == 2 and said in message and "bad.prom" in message, message
    assert "Traceback" not in result.output and not out.exists()


LOG = """\
INFO 11-20 10:00:01 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, Running: 8 reqs
INFO 11-20 10:00:01 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 30.00 \
tokens/s, Drafted throughput: 60.00 tokens/s, Accepted: 300 tokens, Drafted: 600 tokens, Per-position acceptance \
rate: 0.700, 0.500, 0.300, Avg Draft acceptance rate: 50.0%
DEBUG 11-20 10:00:05 some other line mentioning acceptance
INFO 11-20 10:00:11 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.00, Accepted throughput: 90.00 \
tokens/s, Drafted throughput: 270.00 tokens/s, Accepted: 900 tokens, Drafted: 2700 tokens, Per-position acceptance \
rate: 0.500, 0.333, 0.167, Avg Draft acceptance rate: 33.3%
INFO 11-20 10:00:21 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 \
tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, Per-position acceptance rate: \
0.000, 0.000, 0.000, Avg Draft acceptance rate: nan%
"""


def test_log_lines_of_more_drafts_than_a_profile_holds_are_refused(tmp_path):
    rates = ", ".join(["0.500"] * 65)
    line = LOG.splitlines()[1].split("rate: ")[0] + f"rate: {rates}, Avg Draft acceptance rate: 50.0%\n"
    path = _write(tmp_path, "server.log", line)
    result = _fit(str(path), "-o", str(tmp_path / "p.toml"))
    assert result.exit_code == 2 and "server.log:1: the server drafted K = 65 tokens" in " ".join(result.stderr.split())


def test_log_lines_are_combined_weighted_by_their_drafts(tmp_path):
    path = _write(tmp_path, "server.log", LOG)
    counts = profile_fit.read_counts([path])
    # 200 and 900 drafts: p_1 = (0.7 * 200 + 0.5 * 900) / 1100, not the plain mean 0.6
    assert counts.num_drafts == 1100 and counts.accepted_per_position == [590, 400, 210]
    fit = profile_fit.fit_profile(counts)
    assert fit.measured_rates[0] == pytest.approx(590 / 1100)
    assert "2 log lines, 11-20 10:00:01 to 11-20 10:00:11" == counts.span


def test_a_marked_log_line_missing_a_field_names_its_line(tmp_path):
    broken = LOG.replace("Drafted: 2700 tokens, ", "")
    path = _write(tmp_path, "server.log", broken)
    result = _fit(str(path), "-o", str(tmp_path / "p.toml"))
    assert result.exit_code == 2 and "server.log:4" in result.stderr and "drafted field" in result.stderr


def test_rising_rates_are_kept_as_measured_flagged_and_a_valid_profile_written(tmp_path):
    path = _write(tmp_path, "m.prom", _scrape({"0": {"drafts": 1000, "pos": [600, 640, 200]}}))
    out = tmp_path / "noisy.toml"
    result = _fit(str(path), "-o", str(out))
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "rise with position" in said and "the measured ones are kept in its [fit] table" in said, said
    loaded = scenarios.load_scenario(out)
    rates = list(loaded.profiles[0].rates)
    assert rates == pytest.approx([0.62, 0.62, 0.2])  # the pooled pair: the least-squares non-increasing fit
    text = out.read_text()
    assert "measured_rates = [0.6, 0.64, 0.2]" in text and "non_increasing = false" in text


@pytest.mark.parametrize(("args", "said"), [
    (["--extend-k", "5"], "--extend-k 5: no model could be fitted (position 2 accepted 640 drafts"),
    (["--figure", "fit.png"], "--figure fit.png: no model could be fitted"),
    (["--bootstrap", "50"], "--bootstrap 50: no model could be fitted"),
    (["--use-model", "iid"], "--use-model iid: no model could be fitted"),
])
def test_options_of_the_models_are_refused_on_counts_no_model_fits(tmp_path, monkeypatch, args, said):
    # counts that are not nested fit no model: --extend-k (and --figure, --bootstrap) did nothing and exited 0
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, "m.prom", _scrape({"0": {"drafts": 1000, "pos": [600, 640, 200]}}))
    out = tmp_path / "noisy.toml"
    result = _fit(str(path), "-o", str(out), *args)
    message = " ".join(result.stderr.split())
    assert result.exit_code == 2 and message.startswith("error: ") and said in message, result.output
    assert "not nested" in message and not out.exists()


def test_an_empty_name_is_refused(tmp_path):
    path = _write(tmp_path, "m.prom", _scrape({"0": {"drafts": 1000, "pos": [600, 400, 200]}}))
    out = tmp_path / "p.toml"
    result = _fit(str(path), "-o", str(out), "--name", " ", "--bootstrap", "20")
    assert result.exit_code == 2 and "--name needs a scenario name, got ''" in " ".join(result.stderr.split())
    assert not out.exists()


def test_the_written_scenario_runs_in_a_sweep_beside_its_min_variance_twin(tmp_path):
    out = tmp_path / "eagle.toml"
    fitted = _fit(str(EXAMPLES / "vllm-metrics-before.prom"), str(EXAMPLES / "vllm-metrics-after.prom"),
                  "-o", str(out), "--cost-ratio", "0.1")
    assert fitted.exit_code == 0, fitted.output
    assert _fit(str(EXAMPLES / "vllm-metrics-after.prom"), "-o", str(out)).exit_code == 2  # no silent overwrite
    swept = runner.invoke(app, ["sweep", "--scenario", str(out), "--num-requests", "20000", "--no-charts",
                                "-o", str(tmp_path / "sweep")])
    assert swept.exit_code == 0, swept.output
    record = json.loads((tmp_path / "sweep" / "results.json").read_text())["records"][0]
    assert record["cost_ratio"] == 0.1 and record["num_spec_tokens"] == 3
    assert record["configured_rates"] == pytest.approx([0.740985, 0.532018, 0.371009])
    # the same mean length under the minimum-variance schedule: far less variance, the same modelled speed-up
    assert record["min_variance_rates"] == pytest.approx([1.0, 0.644012, 0.0], abs=1e-6)
    assert record["min_variance_accepted_variance"] < record["expected_accepted_variance"]
    assert record["min_variance_speedup"] == pytest.approx(record["expected_speedup"])
    assert "min-variance, same L: Var(A)" in swept.output


@pytest.mark.parametrize(("args", "message"), [
    (["--figure", "fit.txt"], "--figure writes png, svg, pdf (named by the file's suffix), got"),
    (["--figure", "no-such-folder/fit.png"], "--figure no-such-folder/fit.png: no folder no-such-folder"),
    (["--figure", "/proc/fit.png"], "--figure /proc/fit.png: cannot write in /proc"),
    (["--force", "-o", str(EXAMPLES / "vllm-metrics-after.prom")], "is one of this command's inputs"),
    (["--cost-ratio", "-1"], "--cost-ratio must be a finite number >= 0, got -1"),
    (["--cost-ratio", "nan"], "--cost-ratio must be a finite number >= 0, got nan"),
    (["--cost-ratio", "cheap"], "--cost-ratio takes a number, got 'cheap'"),
])
def test_a_figure_or_cost_that_cannot_be_taken_is_refused_before_anything_is_written(tmp_path, monkeypatch, args,
                                                                                      message):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "eagle.toml"
    result = _fit(str(EXAMPLES / "vllm-metrics-before.prom"), str(EXAMPLES / "vllm-metrics-after.prom"),
                  "-o", str(out), *args)
    assert result.exit_code == 2 and message in " ".join(result.stderr.split())
    assert "Traceback" not in result.output and not out.exists()


def test_scrapes_and_logs_are_not_mixed_and_model_is_for_scrapes(tmp_path):
    log = _write(tmp_path, "server.log", LOG)
    scrape = _write(tmp_path, "m.prom", _scrape({"0": {"drafts": 10, "pos": [5, 4, 3]}}))
    assert "give files of one kind, not several" in " ".join(_fit(str(log), str(scrape), "-o", str(tmp_path / "p.toml")).stderr.split())
    with pytest.raises(SpecbenchError, match="--model picks a model in a Prometheus scrape"):
        profile_fit.read_counts([log], "org/target-8b")
    twice = _fit(str(log), str(tmp_path / "." / "server.log"), "-o", str(tmp_path / "p.toml"))
    assert twice.exit_code == 2 and "is given twice" in " ".join(twice.stderr.split())
    three = [str(_write(tmp_path, f"m{i}.prom", _scrape({"0": {"drafts": 10 * i, "pos": [5, 4, 3]}}))) for i in (1, 2, 3)]
    assert "give one Prometheus scrape, or two" in " ".join(_fit(*three, "-o", str(tmp_path / "p.toml")).stderr.split())
