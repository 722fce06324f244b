"""`specbench verify`'s truncation checks: correct samplers pass them, and each truncation control fails
the check that targets its bug (and passes where its bug cannot show)."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from specbench.cli import app
from specbench.exactness import Suite
from specbench.exactness_truncation import TRUNCATION_CONFIGS
from specbench.implementations import resolve, sampler
from specbench.implementations.contract import logits_to_probs
from specbench.implementations.controls import chain_sample, truncate, untruncated_draft_probs

CPU = torch.device("cpu")
SAMPLES = 3000
MIXED = "truncation: mixed per-request knobs, batch of more than 64 rows"


def _truncation_checks(impl, samples=SAMPLES, seed=1):
    """Only the truncation and log-probability checks of the probabilistic mode (the rest are
    tests/test_exactness.py's), with their Bonferroni verdicts."""
    suite = Suite(impl, CPU, ["probabilistic"], samples=samples, seed=seed)
    suite._truncation_checks("probabilistic")
    return {c.name: c for c in suite.finished()}


def _label(**knobs):
    return next(c.label for c in TRUNCATION_CONFIGS if all(getattr(c, k) == v for k, v in knobs.items()))


def _failed(checks):
    return sorted(name for name, c in checks.items() if c.verdict == "FAIL")


@pytest.mark.parametrize("name", ["torch", "textbook"])
def test_correct_samplers_pass_every_truncation_check(name):
    checks = _truncation_checks(resolve(name))
    assert not [(n, c.detail) for n, c in checks.items() if c.verdict == "FAIL"]
    laws = [c for c in checks.values() if c.p_value is not None]
    assert len(laws) == 5 * len(TRUNCATION_CONFIGS) and all(c.samples > 0 for c in laws)
    for label in (c.label for c in TRUNCATION_CONFIGS):
        assert checks[f"outside the kept set ({label})"].verdict == "pass"
    for exact in ("truncation: top_k = 1 is greedy", "truncation: every knob off is the untruncated call", MIXED):
        assert checks[exact].verdict == "pass", checks[exact].detail
    logprobs = [c for n, c in checks.items() if n.startswith("log-probabilities")]
    assert [c.verdict for c in logprobs] == (["pass", "pass"] if name == "torch" else ["skipped"])


def test_an_implementation_without_truncation_gets_a_not_declared_note():
    checks = _truncation_checks(resolve("control-residual-from-p"))
    assert checks["truncation (top_k, top_p, min_p)"].verdict == "skipped"
    assert "does not declare it" in checks["truncation (top_k, top_p, min_p)"].detail


def test_untruncated_draft_fails_where_the_drafts_come_from_cut_draft_logits():
    # told the untruncated softmax q while the drafter sampled from q': acceptance and the token law are off
    checks = _truncation_checks(resolve("control-untruncated-draft"))
    for config in TRUNCATION_CONFIGS:
        count = checks[f"accepted-count law ({config.label})"]
        if config.draft_kind == "logits" and config.truncate_draft:
            assert count.verdict == "FAIL", config.label
            token_laws = [c for n, c in checks.items() if n.startswith("token law") and n.endswith(f"({config.label})")]
            assert any(c.verdict == "FAIL" for c in token_laws), config.label
        else:  # given q' itself, one-hot drafts, or truncate_draft_logits=False: nothing to get wrong
            assert count.verdict == "pass", config.label
    assert checks[MIXED].verdict == "pass"  # it never emits outside the target's kept set


def test_boundary_ties_fail_only_where_a_tie_straddles_the_boundary():
    checks = _truncation_checks(resolve("control-boundary-ties"))
    for config in TRUNCATION_CONFIGS:
        outside = checks[f"outside the kept set ({config.label})"]
        assert outside.verdict == ("FAIL" if config.tie else "pass"), (config.label, outside.detail)
    assert checks["outside the kept set (" + _label(top_k=4, tie=True) + ")"].detail.startswith(
        tuple(f"{n} of" for n in range(1, SAMPLES * 4)))
    assert checks["truncation: top_k = 1 is greedy"].verdict == "FAIL"  # ties at the top: both kept


def test_untruncated_acceptance_fails_every_accepted_count_law():
    checks = _truncation_checks(resolve("control-untruncated-acceptance"))
    for config in TRUNCATION_CONFIGS:
        count = checks[f"accepted-count law ({config.label})"]
        assert count.verdict == "FAIL", config.label
    # accepting by p where p' is due: drafts outside the target's kept set are emitted
    assert checks[MIXED].verdict == "FAIL"


def test_large_batch_tail_fails_every_top_p_check_and_the_mixed_batch():
    checks = _truncation_checks(resolve("control-large-batch-tail"))
    for config in TRUNCATION_CONFIGS:
        outside = checks[f"outside the kept set ({config.label})"]
        assert outside.verdict == ("FAIL" if config.top_p < 1 else "pass"), config.label
    assert checks[MIXED].verdict == "FAIL"
    assert checks["truncation: top_k = 1 is greedy"].verdict == "pass"  # top_k still cuts


@sampler(name="always-cut-draft", target="probs", draft="logits", seeded=True, truncation=True)
def always_cut_draft(*, target_probs, draft_logits, draft_token_ids, num_draft_tokens, seeds, temperatures,
                     top_k=None, top_p=None, min_p=None, **_):
    # ignores truncate_draft_logits=False: cuts the draft logits even when the drafter sampled them whole
    q = truncate(untruncated_draft_probs(draft_logits, temperatures), temperatures, top_k, top_p, min_p)
    return chain_sample(truncate(target_probs, temperatures, top_k, top_p, min_p), q, draft_token_ids,
                        num_draft_tokens, seeds)


def test_a_sampler_that_ignores_truncate_draft_logits_false_fails_that_config():
    checks = _truncation_checks(always_cut_draft)
    label = next(c.label for c in TRUNCATION_CONFIGS if not c.truncate_draft)
    assert checks[f"accepted-count law ({label})"].verdict == "FAIL"
    cut_label = _label(draft_kind="logits", truncate_draft=True, tie=False, min_p=0.1)
    assert checks[f"accepted-count law ({cut_label})"].verdict == "pass"  # where the drafter did cut: right


def _with_logprobs(processed_untruncated: bool):
    @sampler(name="logprobs-plugin", target="logits", draft="probs", seeded=True, truncation=True, logprobs=True)
    def plugin(*, target_logits, draft_probs, draft_token_ids, num_draft_tokens, seeds, temperatures, top_k=None,
               top_p=None, min_p=None, logprobs=None, **_):
        probs = logits_to_probs(target_logits, temperatures)
        cut = truncate(probs, temperatures, top_k, top_p, min_p)
        result = chain_sample(cut, draft_probs, draft_token_ids, num_draft_tokens, seeds)
        if logprobs is None:
            return result
        raw = torch.log_softmax(torch.nan_to_num(target_logits.float(), nan=float("-inf")), dim=-1)
        processed = torch.log(probs if processed_untruncated else cut)  # the bug: log p where log p' is due
        table = raw if logprobs == "raw" else torch.where((temperatures == 0)[:, None, None], raw, processed)
        tokens = result.output_token_ids
        values = table.gather(2, tokens.clamp(min=0)[..., None])[..., 0]
        return result._replace(logprobs=torch.where(tokens >= 0, values, float("nan")))

    return plugin


def test_logprobs_equal_the_oracles_and_untruncated_processed_logprobs_fail():
    good = _truncation_checks(_with_logprobs(False), samples=500)
    assert good["log-probabilities (processed)"].verdict == "pass", good["log-probabilities (processed)"].detail
    assert good["log-probabilities (raw)"].verdict == "pass", good["log-probabilities (raw)"].detail
    bad = _truncation_checks(_with_logprobs(True), samples=500)
    assert bad["log-probabilities (processed)"].verdict == "FAIL"
    assert bad["log-probabilities (raw)"].verdict == "pass"


def test_verify_exits_1_on_a_truncation_control():
    result = CliRunner().invoke(app, ["verify", "--impl", "control-boundary-ties", "--samples", "2000"])
    assert result.exit_code == 1, result.stdout
    assert "outside the kept set" in " ".join(result.stdout.split())
