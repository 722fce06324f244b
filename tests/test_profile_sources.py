"""`specbench profile fit` on SGLang's metrics and logs and on per-request histograms (vLLM #48915, SGLang):
fixtures in tests/data/profile, written from the servers' documented formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench import profile_fit, profile_sources, scenarios
from specbench.cli import app

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

runner = CliRunner()
DATA = Path(__file__).resolve().parent / "data" / "profile"
VLLM = [DATA / "vllm-per-request.jsonl", DATA / "vllm-per-request-stream.txt"]


def _said(result) -> str:
    return " ".join(result.output.split())


def _fit(*args: str, code: int = 0, models: bool = True):
    # --bootstrap 20 keeps the models' fits fast; a source of the mean length alone fits no model and refuses it
    result = runner.invoke(app, ["profile", "fit", *args, *(["--bootstrap", "20"] if models else [])])
    assert result.exit_code == code, result.output
    return result


def _vllm_histograms() -> list[list[int]]:
    # read straight from the fixtures, independently of the code under test
    found = []
    for path in VLLM:
        for line in path.read_text().splitlines():
            line = line.removeprefix("data:").strip()
            if line.startswith("{") and '"metrics"' in line:
                found.append(json.loads(line)["metrics"]["speculative_decoding"])
    return found


def test_vllm_per_request_histograms_are_added_into_per_position_counts():
    responses = _vllm_histograms()
    assert len(responses) == 3
    counts = profile_fit.read_counts(VLLM)
    steps = [sum(column) for column in zip(*(r["acceptance_histogram"] for r in responses))]
    assert counts.kind == "vllm-per-request" and counts.num_drafts == sum(r["num_spec_steps"] for r in responses)
    # position i is accepted by every step that accepted at least i drafts
    assert counts.accepted_per_position == [sum(steps[i:]) for i in (1, 2, 3)]
    assert counts.num_accepted_tokens == sum(r["num_accepted_draft_tokens"] for r in responses)
    fit = profile_fit.fit_profile(counts)
    assert fit.mean_acceptance_length == pytest.approx(1 + counts.num_accepted_tokens / counts.num_drafts)
    # the pooled length and the mean of the per-request lengths (SpecForge's) differ on these requests
    per_request = sum(r["mean_acceptance_length"] for r in responses) / len(responses)
    assert counts.per_request_mean_length == pytest.approx(per_request)
    assert abs(per_request - fit.mean_acceptance_length) > 0.2


def test_the_fit_and_the_scenario_say_which_definition_each_source_uses(tmp_path):
    out = tmp_path / "vllm.toml"
    result = _fit(*map(str, VLLM), "-o", str(out))
    said = _said(result)
    assert "acceptance length as the source defines it: vLLM per-request metrics (#48915): tokens emitted (A + 1)" in said
    assert "specbench's L = 1 + E[A]: tokens emitted per verification step including the bonus token" in said
    assert "as SpecForge does): L = 2.1609; the scenario keeps the pooled 2.4465" in said
    table = tomllib.loads(out.read_text())["fit"]
    assert table["source_format"] == "vllm-per-request" and "pooled" in table["acceptance_length_definition"]
    assert table["per_request_mean_acceptance_length"] == pytest.approx(2.160853, abs=1e-6)
    assert scenarios.load_scenario(out).profiles[0].num_spec_tokens == 3
    # the old sources say theirs too
    counts = profile_fit.read_counts([Path(__file__).resolve().parent.parent / "scenarios" / "examples" /
                                      "vllm-metrics-after.prom"])
    assert counts.definition == profile_sources.DEFINITIONS["vllm-prometheus"]


def test_sglang_per_request_histograms_fit_like_vllm_ones(tmp_path):
    counts = profile_fit.read_counts([DATA / "sglang-generate.jsonl"])
    # [4, 3, 5, 4] + [2, 2, 2, 10]: 32 steps; position 1 by 26 of them, 2 by 21, 3 by 14
    assert counts.kind == "sglang-per-request" and counts.num_drafts == 32
    assert counts.accepted_per_position == [26, 21, 14]
    assert profile_fit.fit_profile(counts).mean_acceptance_length == pytest.approx(1 + 61 / 32)
    result = _fit(str(DATA / "sglang-generate.jsonl"), str(VLLM[0]), "-o", str(tmp_path / "p.toml"), code=2)
    assert "mix vLLM and SGLang responses" in _said(result)


def test_an_sglang_log_gives_the_mean_length_at_the_servers_k(tmp_path):
    found = profile_fit.read_counts([DATA / "sglang-server.log"])
    # (2.50 x 8 + 2.80 x 16) / 24 running requests; the idle line (0.00) is left out
    assert isinstance(found, profile_sources.MeanLength)
    assert found.mean_acceptance_length == pytest.approx(2.7) and found.num_values == 2 and found.num_spec_tokens == 3
    out = tmp_path / "sglang.toml"
    said = _said(_fit(str(DATA / "sglang-server.log"), "-o", str(out), models=False))
    assert "SGLang 'Decode batch' log line (accept len): tokens emitted (A + 1) per step" in said
    assert "the scenario holds L at K = 3 with the geometric schedule (p_i = alpha^i), an assumption" in said
    profile = scenarios.load_scenario(out).profiles[0]
    assert profile.num_spec_tokens == 3 and profile.schedule == "geometric"
    assert profile.acceptance_length == pytest.approx(2.7)
    assert tomllib.loads(out.read_text())["fit"]["rates_measured"] is False
    result = _fit(str(DATA / "sglang-server.log"), "-k", "4", "-o", str(tmp_path / "k4.toml"), code=2, models=False)
    assert "--num-spec-tokens 4 differs from the log's server_args (speculative_num_steps=3)" in _said(result)
    result = _fit(str(DATA / "sglang-server.log"), "--use-model", "best", "-o", str(tmp_path / "m.toml"), code=2,
                  models=False)
    assert "--use-model needs per-position counts" in _said(result)
    # the models' bootstrap has no model to resample: refused as --use-model is, not ignored
    result = _fit(str(DATA / "sglang-server.log"), "--bootstrap", "50", "-o", str(tmp_path / "b.toml"), code=2,
                  models=False)
    assert "--bootstrap needs per-position counts, and SGLang 'Decode batch' log line (accept len) gives the mean " \
           "length only" in _said(result)


def test_an_sglang_scrape_averages_the_ranks_gauges_and_needs_k(tmp_path):
    scrape = DATA / "sglang-metrics.prom"
    found = profile_fit.read_counts([scrape])
    assert found.kind == "sglang-prometheus" and found.mean_acceptance_length == pytest.approx(2.85)
    result = _fit(str(scrape), "-o", str(tmp_path / "p.toml"), code=2, models=False)
    assert "gives the mean length only, not K; pass --num-spec-tokens K" in _said(result)
    _fit(str(scrape), "-k", "3", "-o", str(tmp_path / "p.toml"), models=False)
    assert scenarios.load_scenario(tmp_path / "p.toml").profiles[0].acceptance_length == pytest.approx(2.85)
    result = _fit(str(scrape), "-k", "1", "-o", str(tmp_path / "k1.toml"), code=2, models=False)
    assert "accept len 2.85 needs K >= 2 drafts a step, got --num-spec-tokens 1" in _said(result)
    later = tmp_path / "later.prom"  # one file given twice is refused before it is read
    later.write_text(scrape.read_text())
    result = _fit(str(scrape), str(later), "-k", "3", "-o", str(tmp_path / "two.toml"), code=2, models=False)
    assert "a gauge (the latest log interval), not a counter: give one scrape" in _said(result)


@pytest.mark.parametrize("change, words", [
    (lambda s: s.replace('"num_spec_steps": 43', '"num_spec_steps": 44'),
     "num_spec_steps is 44 but acceptance_histogram [39, 1, 0, 3] gives 43"),
    (lambda s: s.splitlines()[0] + "\n" + json.dumps({"metrics": {"speculative_decoding": {
        "acceptance_histogram": [10, 20, 70]}}}) + "\n", "a histogram of K = 2 where earlier requests have K = 3"),
    (lambda s: s.replace("[39, 1, 0, 3]", '[39, 1, "0", 3]'), "acceptance_histogram must be a list of at least 2"),
])
def test_inconsistent_responses_are_one_sentence_naming_the_line(tmp_path, change, words):
    path = tmp_path / "responses.jsonl"
    path.write_text(change(VLLM[0].read_text()))
    result = _fit(str(path), "-o", str(tmp_path / "p.toml"), code=2)
    assert words in _said(result) and f"{path}:" in _said(result)
    assert not (tmp_path / "p.toml").exists()
