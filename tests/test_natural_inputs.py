"""Natural inputs (``specbench/natural_inputs.py``) and ``specbench kernels --method``: drafts drawn from a
noisy copy of the target, each method's expected accepted length exact against the oracle, records that
carry the method, and one sentence for what natural inputs do not cover."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from specbench import bench, natural_inputs, oracle, timing
from specbench.cli import app
from specbench.errors import SpecbenchError
from specbench.implementations import resolve_all
from specbench.scenarios import make_profile

FAST = timing.TimingConfig(warmup=0, min_samples=2, max_samples=2, l2_flush=False)


def _cases(**options):
    defaults = {"modes": ["probabilistic"], "batch_sizes": [3000], "vocabularies": [(None, 40)],
                "profiles": [make_profile(3, acceptance_length=2.5)], "drafts": ["logits"], "inputs": "natural",
                "methods": ["token", "block", "typical", "relaxed"]}
    return bench.plan_cases(**{**defaults, **options})


@pytest.mark.parametrize("draft", ["logits", "probs", "none"])
def test_expected_length_given_the_drafts_is_the_oracles(draft):
    target, draft_logits, drafts = natural_inputs.natural_tensors(6, 3, 7, 1.0, torch.float32, torch.device("cpu"), 3)
    given = {"logits": {"draft_logits": draft_logits}, "probs": {"draft_probs": torch.softmax(draft_logits, -1)},
             "none": {}}[draft]
    for method in ("token", "block", "typical", "relaxed"):
        got = natural_inputs.expected_acceptance_length(target, drafts, given.get("draft_logits"),
                                                        given.get("draft_probs"), method)
        want = 1.0
        for b in range(6):
            law = oracle.step_distribution(mode="probabilistic", target_logits=target[b], draft_token_ids=drafts[b],
                                           num_draft_tokens=3, method=method,
                                           **{k: v[b] for k, v in given.items()})
            want += float((torch.arange(4) * law.num_accepted_probs).sum()) / 6
        assert got == pytest.approx(want, abs=1e-9), method


def test_drafts_are_drawn_from_q():
    _, draft_logits, drafts = natural_inputs.natural_tensors(4000, 1, 5, 1.0, torch.float32,
                                                                  torch.device("cpu"), 4)
    import scipy.stats

    # every request has its own q: the sum over requests of q(x) is the expected count of each x
    q = torch.softmax(draft_logits[:, 0].double(), -1)
    observed = torch.bincount(drafts[:, 0], minlength=5).double()
    assert scipy.stats.chisquare(observed, q.sum(0) * observed.sum() / q.sum()).pvalue > 1e-3


def test_each_method_measures_near_its_expected_length_on_the_same_inputs():
    torch_impl = resolve_all(["torch"])
    rows = {}
    for case in _cases():
        (record,) = bench.run_case(case, torch_impl, config=FAST, seed=5)
        assert record["status"] == "ok" and record["method"] == case.method
        assert record["inputs"] == "natural" and record["draft_noise"] == 1.0
        rows[case.method] = record
    # the same inputs for every method: block's exact expectation is above token's; both measured within
    # five standard errors (A lies in 0..3, so its standard deviation is at most 1.5)
    assert rows["block"]["expected_acceptance_length"] > rows["token"]["expected_acceptance_length"]
    for record in rows.values():
        tolerance = 5 * 1.5 / 3000**0.5
        assert abs(record["measured_acceptance_length"] - record["expected_acceptance_length"]) < tolerance


@pytest.mark.parametrize("options, said", [
    ({"modes": ["greedy"]}, "for the probabilistic mode, not greedy"),
    ({"top_k": 5}, "cannot be combined with --top-k"),
    ({"draft_noise": -1.0}, "--draft-noise must be a finite number >= 0"),
    ({"inputs": "noisy"}, "--inputs must be one of planned, natural"),
    ({"methods": ["blok"]}, "method must be one of"),
    ({"inputs": "planned", "draft_noise": 0.5}, "--draft-noise is the noise of natural inputs"),
])
def test_what_natural_inputs_do_not_cover_is_one_sentence(options, said):
    with pytest.raises(SpecbenchError, match=said):
        _cases(**options)


def test_kernels_command_runs_methods_side_by_side(tmp_path):
    result = CliRunner().invoke(app, [
        "kernels", "--device", "cpu", "--mode", "probabilistic", "--method", "token,block", "--inputs", "natural",
        "--draft-noise", "0.5", "--batch-size", "8", "--num-spec-tokens", "3", "--vocab-size", "64", "--impl", "torch",
        "--max-ms", "0", "--min-samples", "2", "--warmup", "0", "--no-l2-flush", "--no-charts", "-o", str(tmp_path)],
        env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    records = json.loads((tmp_path / "results.json").read_text())["records"]
    assert sorted(r["method"] for r in records) == ["block", "token"]
    assert all(r["inputs"] == "natural" and r["expected_acceptance_length"] > 1 for r in records)
    assert "natural noise=0.5 method=block" in result.output
    bad = CliRunner().invoke(app, ["kernels", "--device", "cpu", "--method", "token,blok", "--impl", "torch"])
    assert bad.exit_code == 2 and "unknown method 'blok'" in bad.output
