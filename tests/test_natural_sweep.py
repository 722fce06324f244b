"""Natural-input sweeps: each method's accepted counts on drafts drawn from a draft model, checked against the exact
rates of the inputs drawn; a sampler running another rule caught; the same streams on both backends; and
`specbench sweep --inputs natural` end to end, with its refusals."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from specbench import natural_inputs, natural_sweep, sweep
from specbench.cli import app
from specbench.natural_sweep import NaturalCase
from specbench.results import read_results

runner = CliRunner()


def _run(cases, num_requests, backend="torch"):
    return sweep.run_sweep(cases, num_requests=num_requests, seed=3, backend=backend, device="cpu")


def test_accepted_rates_sum_to_the_expected_length_and_block_accepts_more():
    target, draft_logits, drafts = natural_inputs.natural_tensors(64, 4, 300, 1.0, torch.float32,
                                                                  torch.device("cpu"), 5)
    for method in ("token", "block", "typical", "relaxed"):
        rates = natural_inputs.accepted_rates(target, drafts, draft_logits, None, method)
        assert rates.shape == (64, 4) and bool(((rates >= 0) & (rates <= 1)).all())
        assert bool((rates[:, 1:] <= rates[:, :-1] + 1e-12).all())  # P(A >= i) falls with i
        length = natural_inputs.expected_acceptance_length(target, drafts, draft_logits, None, method)
        assert length == pytest.approx(1.0 + float(rates.sum(dim=1).mean()), abs=1e-12)
    token = natural_inputs.accepted_rates(target, drafts, draft_logits, None, "token")
    block = natural_inputs.accepted_rates(target, drafts, draft_logits, None, "block")
    assert float(block.sum(dim=1).mean()) > float(token.sum(dim=1).mean())
    one = (target[:, :2], drafts[:, :1], draft_logits[:, :1], None)  # one draft: the same test under both rules
    assert torch.allclose(natural_inputs.accepted_rates(*one, "token"), natural_inputs.accepted_rates(*one, "block"))


def test_natural_cases_agree_with_the_exact_rates_of_their_inputs():
    cases = natural_sweep.natural_cases([3], ["token", "block"], [1.0], 400)
    records = _run(cases, 1200)
    assert [r["method"] for r in records] == ["token", "block"]
    for record in records:
        assert record["verdict"] == "ok", record["min_p_value"]
        assert record["inputs"] == "natural" and record["vocab_size"] == 400 and record["draft_noise"] == 1.0
        assert record["expected_acceptance_length"] == pytest.approx(1.0 + sum(record["configured_rates"]))
        assert sum(record["accepted_histogram"]) == 1200 and not record["lossy"]
    assert records[1]["expected_acceptance_length"] > records[0]["expected_acceptance_length"]
    alone = _run([cases[1]], 1200)[0]  # a case's result does not depend on the other cases of the run
    assert alone["accepted_histogram"] == records[1]["accepted_histogram"]


def test_a_sampler_running_another_rule_is_a_bug(monkeypatch):
    # block's rates checked against counts of the token rule on the same inputs (the rule swapped inside verify)
    real = natural_sweep.verify

    def token_rule(*args, **kwargs):
        return real(*args, **{**kwargs, "method": "token"})

    monkeypatch.setattr(natural_sweep, "verify", token_rule)
    record = _run(natural_sweep.natural_cases([4], ["block"], [1.0], 300), 6000)[0]
    assert record["verdict"] == "BUG" and record["num_bugs"] > 0


def test_both_backends_give_the_same_counts():
    # one stream contract: the Triton kernels (interpreted) accept what the torch reference accepts, request by request
    cases = natural_sweep.natural_cases([2], ["token", "block"], [1.0], 64)
    torch_records = _run(cases, 20)
    triton_records = _run(cases, 20, backend="triton")
    for a, b in zip(torch_records, triton_records):
        assert a["accepted_histogram"] == b["accepted_histogram"] and b["backend"] == "triton"
        assert sum(count > 0 for count in a["accepted_histogram"]) >= 2  # not every request in one bin


def test_sweep_natural_end_to_end(tmp_path):
    out = tmp_path / "natural"
    args = ["sweep", "--inputs", "natural", "--method", "token,block,typical", "-k", "2,3", "--draft-noise", "0.5,2",
            "--vocab-size", "300", "-n", "600", "-o", str(out), "--no-charts"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    _, records = read_results(out)
    assert len(records) == 12 and all(r["verdict"] == "ok" for r in records)
    assert [r["lossy"] for r in records[:3]] == [False, False, False] and records[4]["lossy"]
    assert records[0]["profile"] == "natural token noise=0.5 V=300" and records[0]["num_spec_tokens"] == 2
    long = pd.read_csv(out / sweep.LONG_CSV)
    assert (long["quantity"] == "L").sum() == 12
    assert "natural block noise=2 V=300" in result.output
    resumed = runner.invoke(app, [*args, "--resume"])
    assert resumed.exit_code == 0 and "12 of 12 cases already finished" in resumed.output


@pytest.mark.parametrize(("args", "needle"), [
    (["--method", "block"], "--method is for --inputs natural"),
    (["--draft-noise", "1"], "--draft-noise is for --inputs natural"),
    (["--inputs", "natural", "--alpha", "0.5"], "--alpha sets a synthetic profile"),
    (["--inputs", "natural", "--tree", "2x2"], "--tree sets a synthetic profile"),
    (["--inputs", "natural", "--method", "typical", "--backend", "triton"], "typical runs on --backend torch"),
    (["--inputs", "natural", "--method", "fast"], "unknown method 'fast'"),
    (["--inputs", "natural", "--vocab-size", "1"], "--vocab-size must lie in [2,"),
    (["--inputs", "natural", "--draft-noise", "-1"], "--draft-noise must be a finite number >= 0"),
    (["--inputs", "sampled"], "--inputs must be planned or natural"),
])
def test_bad_natural_sweeps_are_one_sentence(tmp_path, args, needle):
    result = runner.invoke(app, ["sweep", *args, "-n", "100", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2, result.output
    assert needle in " ".join(result.output.split())


def test_natural_case_names_and_seeds_are_their_own():
    a, b = NaturalCase(3, "token", 1.0, 300), NaturalCase(3, "block", 1.0, 300)
    assert a.name != b.name and natural_sweep.case_seed(0, a) != natural_sweep.case_seed(0, b)
    assert natural_sweep.case_seed(0, a) == natural_sweep.case_seed(0, NaturalCase(3, "token", 1.0, 300))
    assert sweep.num_checks(a) == 9 and sweep.case_num_requests(a) == natural_sweep.DEFAULT_NUM_REQUESTS
