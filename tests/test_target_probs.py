"""Target probabilities as the input (``verify(..., target_probs=...)``): the contract's cleaning
rules, greedy as the argmax of the probabilities, the same tokens as the logits path when the
probabilities are the softmax of those logits, and the exact law by chi-square against the oracle."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import device_for, interpreted

from specbench import oracle
from specbench.errors import SpecbenchError
from specbench.verification import verify

ALPHA = 1e-3


def _case(batch: int, num_spec: int, vocab: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    target = 2.0 * torch.randn(batch, num_spec + 1, vocab, generator=generator)
    draft_logits = target[:, :num_spec] + torch.randn(batch, num_spec, vocab, generator=generator)
    # drafts: mostly the target's likely tokens, so some requests accept several
    drafts = torch.argmax(draft_logits, dim=-1)
    drafts[0, 0] = -1 if num_spec else drafts[0, 0]
    return target, draft_logits, drafts


def test_exactly_one_target_input_and_the_drafts_are_required():
    logits = torch.zeros(1, 2, 4)
    ids = torch.zeros(1, 1, dtype=torch.int64)
    with pytest.raises(SpecbenchError, match="exactly one"):
        verify(None, ids, mode="greedy")
    with pytest.raises(SpecbenchError, match="exactly one"):
        verify(logits, ids, target_probs=torch.softmax(logits, -1), mode="greedy")
    with pytest.raises(SpecbenchError, match="draft_token_ids is required"):
        verify(logits, mode="greedy")
    with pytest.raises(SpecbenchError, match="target_probs must have dtype"):
        verify(None, ids, target_probs=torch.zeros(1, 2, 4, dtype=torch.float64), mode="greedy")


def _same_step_keywords(kind: str, batch: int, num_spec: int, draft_logits: torch.Tensor, temperature: float):
    # every request at `temperature`, one in four greedy; draft logits as the drafter gives them (before
    # the temperature), draft probabilities already tempered
    temperatures = torch.tensor([0.0 if b % 4 == 3 else temperature for b in range(batch)])
    keywords = {"seeds": torch.arange(batch) + 7, "positions": torch.arange(batch) * 3,
                "num_draft_tokens": torch.arange(batch, dtype=torch.int32) % (num_spec + 1),
                "temperatures": temperatures}
    if kind == "logits":
        keywords["draft_logits"] = draft_logits
    elif kind == "probs":
        scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
        keywords["draft_probs"] = torch.softmax(draft_logits / scale, dim=-1)
    return keywords


def _tempered_probs(target: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    # what a caller holding the target's logits passes: softmax(z / T) in float32 (T = 0: any distribution
    # with the same argmax; the plain softmax)
    scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
    return torch.softmax(target / scale, dim=-1)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.5])
@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
@pytest.mark.parametrize(("batch", "num_spec", "vocab"), [(1, 1, 1), (9, 3, 111), (9, 1, 257)])
def test_probabilities_give_the_logits_path_tokens(run_verify, backend, kind, batch, num_spec, vocab, temperature):
    # target_probs = softmax(target_logits / T): the same step as the target logits at T, for every draft form
    # (draft logits mean the same thing whatever form the target takes)
    if interpreted(backend):
        batch = min(batch, 5)  # still a greedy request and every draft count (b % 4 == 3, b % (K + 1))
    target, draft_logits, drafts = _case(batch, num_spec, vocab, seed=vocab + num_spec)
    keywords = _same_step_keywords(kind, batch, num_spec, draft_logits, temperature)
    from_logits = run_verify(target, drafts, **keywords)
    from_probs = run_verify(None, drafts, target_probs=_tempered_probs(target, keywords["temperatures"]), **keywords)
    assert torch.equal(from_probs.num_accepted, from_logits.num_accepted)
    assert torch.equal(from_probs.num_emitted, from_logits.num_emitted)
    assert torch.equal(from_probs.output_token_ids, from_logits.output_token_ids)


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
def test_probabilities_and_logits_differ_only_at_float_near_ties(kind):
    # many requests: p(x) from a softmax made outside against p(x) from the kernel's statistics, and
    # races over weights against races over logits, can differ only where two candidates tie within a
    # few ulp; the differing requests are counted and bounded (none were seen at these seeds)
    batch, num_spec, vocab = 3000, 3, 64
    target, draft_logits, drafts = _case(batch, num_spec, vocab, seed=77)
    differing = 0
    for temperature in (0.6, 1.7):
        keywords = _same_step_keywords(kind, batch, num_spec, draft_logits, temperature)
        from_logits = verify(target, drafts, backend="torch", **keywords)
        from_probs = verify(None, drafts, target_probs=_tempered_probs(target, keywords["temperatures"]),
                            backend="torch", **keywords)
        assert int(from_logits.num_accepted.sum()) > batch // 4  # the decisions are really exercised
        differing += int(((from_probs.output_token_ids != from_logits.output_token_ids).any(dim=1)
                          | (from_probs.num_accepted != from_logits.num_accepted)).sum())
    assert differing <= 3, f"{differing} of {2 * batch} requests differ"


@pytest.mark.parametrize("temperature", [-1.0, math.nan])
@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
@pytest.mark.parametrize("mode", ["probabilistic", "synthetic"])
def test_a_negative_or_nan_temperature_makes_the_request_emit_nothing_whatever_the_target_form(
        run_verify, backend, kind, mode, temperature):
    if mode == "synthetic" and kind != "none":
        pytest.skip("the synthetic mode takes no draft distribution")
    batch, num_spec, vocab = 4, 2, 12
    target, draft_logits, _ = _case(batch, num_spec, vocab, seed=3)
    drafts = torch.argmax(target[:, :num_spec], dim=-1)  # the target's argmax: the greedy request accepts all
    keywords = _same_step_keywords(kind, batch, num_spec, draft_logits, 1.0)
    keywords["temperatures"] = torch.tensor([1.0, temperature, 0.0, temperature])
    keywords["num_draft_tokens"] = torch.full((batch,), num_spec, dtype=torch.int32)
    if kind == "probs":
        keywords["draft_probs"] = torch.softmax(draft_logits, dim=-1)
    if mode == "synthetic":
        keywords["acceptance_rates"] = [1.0, 1.0]
    for target_form in ("logits", "probs"):
        given = {"target_probs": torch.softmax(target, dim=-1)} if target_form == "probs" else {}
        result = run_verify(None if given else target, drafts, mode=mode, check_values=False, **given, **keywords)
        assert result.output_token_ids[[1, 3]].tolist() == [[-1] * (num_spec + 1)] * 2, target_form
        assert result.num_emitted[[1, 3]].tolist() == [0, 0] and result.num_accepted[[1, 3]].tolist() == [0, 0]
        assert result.num_emitted[2] == num_spec + 1 and result.num_emitted[0] >= 1  # the valid requests emit
    # the case: probabilities [[0, 1, 0], [0, 1, 0]], draft 1, T = -1 or NaN
    probs = torch.tensor([[[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]])
    result = run_verify(None, torch.tensor([[1]]), target_probs=probs, seeds=torch.tensor([0]),
                        temperatures=torch.tensor([temperature]), check_values=False)
    assert result.output_token_ids.tolist() == [[-1, -1]] and result.num_emitted.tolist() == [0]


def test_cleaning_rules(run_verify):
    # NaN and negative entries are 0, entries above 1 (+inf too) are 1, and nothing is renormalised
    drafts = torch.tensor([[5, 5]])
    raw = torch.tensor([[[math.nan, -2.0, 3.0, 0.25, 0.0, 0.0],
                         [0.0, math.inf, 0.0, math.inf, 0.5, 0.0],
                         [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]])
    clean = torch.tensor([[[0.0, 0.0, 1.0, 0.25, 0.0, 0.0],
                           [0.0, 1.0, 0.0, 1.0, 0.5, 0.0],
                           [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]])
    seen = set()
    for seed in range(12):
        keywords = {"seeds": torch.tensor([seed])}
        got = run_verify(None, drafts, target_probs=raw, **keywords)
        want = run_verify(None, drafts, target_probs=clean, **keywords)
        assert torch.equal(got.output_token_ids, want.output_token_ids)
        assert int(got.num_accepted) == 0 and int(got.num_emitted) == 1  # draft 5 has no target mass
        seen.add(int(got.output_token_ids[0, 0]))
    assert seen <= {2, 3} and 2 in seen


def test_a_row_is_read_as_given_not_renormalised(run_verify, backend):
    # p(x) = 0.3 against q(x) = 1 (a one-hot draft): accepted 30% of the time, whatever the row sums to
    # (the interpreter runs a program at a time: fewer requests there, a wider bound, still far from
    # the 0.75 of a renormalised row)
    vocab, n = 4, (4000 if device_for(backend).type == "cuda" or backend == "torch" else 60)
    probs = torch.tensor([[0.3, 0.1, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]]).expand(n, -1, -1).contiguous()
    result = run_verify(None, torch.zeros(n, 1, dtype=torch.int64), target_probs=probs, seeds=torch.arange(n))
    accepted = float(result.num_accepted.double().mean())
    assert abs(accepted - 0.3) < 4 * math.sqrt(0.3 * 0.7 / n), accepted
    # a rejected draft's token is drawn from the rest of the row, normalised: token 1 every time
    rejected = result.num_accepted == 0
    assert bool((result.output_token_ids[rejected, 0] == 1).all())
    assert vocab == probs.shape[-1]


def test_a_row_without_positive_mass_is_invalid(run_verify):
    # request 0 reaches its all-zero row at slot 0: nothing emitted; request 1 is stopped at its bonus row
    probs = torch.tensor([[[0.0, 0.0, -1.0], [0.2, 0.3, 0.5]],
                          [[0.0, 1.0, 0.0], [math.nan, 0.0, 0.0]]])
    result = run_verify(None, torch.tensor([[1], [1]]), target_probs=probs, seeds=torch.tensor([3, 4]))
    assert result.num_emitted.tolist() == [0, 1]
    assert result.num_accepted.tolist() == [0, 1]
    assert result.output_token_ids.tolist() == [[-1, -1], [1, -1]]


def test_greedy_is_the_argmax_of_the_probabilities_ties_to_the_lowest_id(run_verify):
    probs = torch.tensor([[[0.1, 0.4, 0.1, 0.4], [0.3, 0.3, 0.4, 0.0], [0.5, 0.0, 0.0, 0.5]]])
    result = run_verify(None, torch.tensor([[1, 2]]), target_probs=probs, mode="greedy")
    assert result.output_token_ids.tolist() == [[1, 2, 0]]
    assert result.num_accepted.tolist() == [1 + 1]
    result = run_verify(None, torch.tensor([[3, 2]]), target_probs=probs, mode="greedy")
    assert result.output_token_ids.tolist() == [[1, -1, -1]]


def test_probabilities_are_taken_as_already_tempered_and_draft_logits_are_tempered(run_verify):
    target, draft_logits, drafts = _case(6, 3, 40, seed=5)
    probs = torch.softmax(target, dim=-1)
    keywords = {"seeds": torch.arange(6), "target_probs": probs}
    for given in ({}, {"draft_probs": torch.softmax(draft_logits, dim=-1)}):
        hot = run_verify(None, drafts, temperatures=torch.full((6,), 3.0), **keywords, **given)
        plain = run_verify(None, drafts, **keywords, **given)
        assert torch.equal(hot.output_token_ids, plain.output_token_ids)
    # draft logits are divided by the temperature: at T = 3 they are the draft logits / 3 at T = 1
    hot = run_verify(None, drafts, temperatures=torch.full((6,), 3.0), draft_logits=draft_logits, **keywords)
    cooled = run_verify(None, drafts, draft_logits=draft_logits / 3.0, **keywords)
    plain = run_verify(None, drafts, draft_logits=draft_logits, **keywords)
    assert torch.equal(hot.output_token_ids, cooled.output_token_ids)
    assert not torch.equal(hot.num_accepted, plain.num_accepted)


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
def test_emitted_tokens_follow_the_exact_law_with_target_probabilities(run_verify, backend, chi_square, kind):
    if backend != "torch" and device_for(backend).type != "cuda":
        pytest.skip("sampled on torch; the Triton backends are held to the logits path token for token above")
    n, num_spec, vocab = 20_000, 3, 8
    generator = torch.Generator().manual_seed(31)
    target = torch.softmax(1.5 * torch.randn(num_spec + 1, vocab, generator=generator), dim=-1)
    target[1] *= 0.6  # a row summing to 0.6: its draft is tested against p(x) as given
    draft_logits = torch.log(target[:num_spec]) + 0.8 * torch.randn(num_spec, vocab, generator=generator)
    drafts = torch.tensor([int(torch.argmax(draft_logits[0])), 2, 5])
    keywords = {}
    if kind == "logits":
        keywords["draft_logits"] = draft_logits.expand(n, -1, -1).contiguous()
    elif kind == "probs":
        keywords["draft_probs"] = torch.softmax(draft_logits, dim=-1).expand(n, -1, -1).contiguous()
    result = run_verify(None, drafts.expand(n, -1).contiguous(), target_probs=target.expand(n, -1, -1).contiguous(),
                        seeds=torch.arange(n), positions=torch.full((n,), 11), **keywords)
    law = oracle.step_distribution(
        mode="probabilistic", target_probs=target, draft_token_ids=drafts, num_draft_tokens=num_spec,
        draft_logits=draft_logits if kind == "logits" else None,
        draft_probs=torch.softmax(draft_logits, dim=-1) if kind == "probs" else None,
    )
    counts = torch.bincount(result.num_accepted.long(), minlength=num_spec + 1)
    assert chi_square(counts, law.num_accepted_probs) > ALPHA
    for slot in range(num_spec + 1):
        reached = result.num_accepted >= slot
        observed = torch.bincount(result.output_token_ids[reached, slot], minlength=vocab)
        assert chi_square(observed, law.emit_probs[slot]) > ALPHA, f"slot {slot}: {observed.tolist()}"


def test_kernels_cases_take_target_probabilities_with_the_planned_counts():
    from specbench import bench

    cases = bench.plan_cases(modes=["probabilistic"], batch_sizes=[5], vocabularies=[(None, 64)],
                             profiles=[_profile()], drafts=["none", "probs"], targets=["logits", "probs"])
    assert sorted({c.target for c in cases}) == ["logits", "probs"]
    for case in cases:
        inputs = bench.make_inputs(case, seed=3)
        kwargs = inputs.verify_kwargs()
        assert ("target_probs" in kwargs) == (case.target == "probs")
        result = verify(**kwargs, backend="torch")
        assert torch.equal(result.num_accepted.long(), inputs.planned_accepted)
        assert ("target-probs" in case.describe()) == (case.target == "probs")
    with pytest.raises(SpecbenchError, match="unknown target input 'foo'"):
        bench.plan_cases(modes=["greedy"], batch_sizes=[1], vocabularies=[(None, 64)], profiles=[_profile()],
                         targets=["foo"])


def _profile():
    from specbench import scenarios

    return scenarios.make_profile(3, rates=[0.9, 0.7, 0.4], name="3")


@pytest.mark.parametrize("name", ["triton-sequential", "triton-split", "triton-sequential-4096x16",
                                  "triton-split-1024x4-chunk2048", "triton-radix-4096x512x4"])
def test_launch_variants_match_torch_and_leave_no_launch_state_behind(name):
    from conftest import triton_launch

    from specbench import bench

    launch = triton_launch()
    case = bench.plan_cases(modes=["probabilistic"], batch_sizes=[3], vocabularies=[(None, 50)],
                            profiles=[_profile()], drafts=["logits"], targets=["probs"])[0]
    inputs = bench.make_inputs(case, "cuda" if torch.cuda.is_available() else "cpu", seed=1)
    from specbench.implementations import resolve

    before = dict(launch.TUNING)
    result = resolve(name).bind(inputs.verify_kwargs())()
    expected = bench.torch_reference(inputs)
    assert torch.equal(result.output_token_ids.cpu(), expected.output_token_ids.cpu())
    assert launch.TUNING == before and set(before.values()) == {None}
    assert launch._strategy == "auto"
