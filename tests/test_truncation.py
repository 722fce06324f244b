"""Truncation (``top_k``, ``top_p``, ``min_p``) and log-probabilities on the torch backend.

The knobs' checks and API; every knob off is today's step bit for bit; ``top_k = 1`` is greedy;
greedy rows ignore truncation; emitted tokens stay in the kept set (``oracle.truncation``);
``specbench.truncation.kept_mask`` against the oracle; and the exact law by chi-square at
``ALPHA = 1e-3`` per check against ``oracle.step_distribution``, on rows built with exact value
ties at the ``top_k`` and ``top_p`` boundaries, as ``tests/test_probabilistic.py`` does it.
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import same_result

from specbench import oracle, truncation
from specbench.errors import SpecbenchError
from specbench.verification import SamplingParams, verify

ALPHA = 1e-3
N = 20_000  # requests per statistical case
K, V = 3, 8
NAN, INF = math.nan, math.inf


@pytest.fixture
def backend() -> str:
    # the torch reference only (overrides conftest's parametrization over the backends)
    return "torch"


def _repeat(tensor: torch.Tensor, batch: int) -> torch.Tensor:
    return tensor.expand(batch, *tensor.shape).contiguous()


def _random_case(batch: int, vocab: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    target = 2 * torch.randn(batch, K + 1, vocab, generator=generator)
    draft_logits = target[:, :K] + torch.randn(batch, K, vocab, generator=generator)
    drafts = torch.multinomial(torch.softmax(draft_logits, -1).reshape(-1, vocab), 1,
                               generator=generator).reshape(batch, K)
    temperatures = torch.tensor([0.5, 1.0, 1.7])[torch.randint(0, 3, (batch,), generator=generator)]
    return target, draft_logits, drafts, temperatures


def _draft_form(kind: str, draft_logits: torch.Tensor, temperatures: torch.Tensor) -> dict:
    if kind == "logits":
        return {"draft_logits": draft_logits}
    if kind == "probs":
        scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
        return {"draft_probs": torch.softmax(draft_logits / scale, dim=-1)}
    return {}


# ------------------------------------------------------------------------------- checks and API


@pytest.mark.parametrize(("knobs", "words"), [
    ({"top_k": -1}, "top_k must be a whole number >= 0"),
    ({"top_k": torch.tensor([2, -3])}, "top_k must be a whole number >= 0"),
    ({"top_k": 1.5}, "top_k must be a"),
    ({"top_p": 0.0}, r"top_p must lie in \(0, 1\]"),
    ({"top_p": 1.5}, r"top_p must lie in \(0, 1\]"),
    ({"top_p": NAN}, r"top_p must lie in \(0, 1\]"),
    ({"top_p": torch.tensor([0.5, -0.1])}, r"top_p must lie in \(0, 1\]"),
    ({"min_p": -0.1}, r"min_p must lie in \[0, 1\]"),
    ({"min_p": 1.5}, r"min_p must lie in \[0, 1\]"),
    ({"min_p": torch.tensor([0.0, NAN])}, r"min_p must lie in \[0, 1\]"),
    ({"top_p": torch.ones(3)}, r"top_p must have shape \[2\]"),
    ({"top_k": torch.ones(2)}, "top_k must have dtype"),
])
def test_bad_knobs_raise_one_error_naming_them(knobs, words):
    target, _draft_logits, drafts, _ = _random_case(2, V, seed=1)
    with pytest.raises(SpecbenchError, match=words):
        verify(target, drafts, seeds=torch.arange(2), sampling=SamplingParams(**knobs), backend="torch")


def test_sampling_params_api():
    target, _draft_logits, drafts, temperatures = _random_case(4, V, seed=2)
    seeds = torch.arange(4)
    with pytest.raises(SpecbenchError, match="not both"):
        verify(target, drafts, seeds=seeds, temperatures=temperatures,
               sampling=SamplingParams(temperatures=temperatures), backend="torch")
    with pytest.raises(SpecbenchError, match="sampling must be a specbench.SamplingParams"):
        verify(target, drafts, seeds=seeds, sampling={"top_k": 2}, backend="torch")
    with pytest.raises(SpecbenchError, match="truncate_draft_logits must be True or False"):
        verify(target, drafts, seeds=seeds, truncate_draft_logits=1, backend="torch")
    with pytest.raises(SpecbenchError, match="logprobs must be one of"):
        verify(target, drafts, seeds=seeds, logprobs="sampled", backend="torch")
    # Python numbers are every request's value, the temperature too
    scalar = verify(target, drafts, seeds=seeds, sampling=SamplingParams(0.7, 3, 0.8, 0.05), backend="torch")
    tensors = verify(target, drafts, seeds=seeds, backend="torch", sampling=SamplingParams(
        torch.full((4,), 0.7), torch.full((4,), 3), torch.full((4,), 0.8, dtype=torch.float64), torch.full((4,), 0.05)))
    assert same_result(scalar, tensors)
    # temperatures= is sampling.temperatures
    assert same_result(verify(target, drafts, seeds=seeds, temperatures=temperatures, sampling=SamplingParams(top_k=3),
                              backend="torch"),
                       verify(target, drafts, seeds=seeds, sampling=SamplingParams(temperatures, top_k=3),
                              backend="torch"))


# ------------------------------------------------------------------- exact equalities and sets


@pytest.mark.parametrize("target_form", ["logits", "probs"])
@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
def test_every_knob_off_is_the_untruncated_step_bit_for_bit(run_verify, kind, target_form):
    batch, vocab = 64, 33
    target, draft_logits, drafts, temperatures = _random_case(batch, vocab, seed=3)
    temperatures[::5] = 0.0
    keywords = {"seeds": torch.arange(batch) * 7, "positions": torch.arange(batch), "temperatures": temperatures,
                "num_draft_tokens": torch.arange(batch, dtype=torch.int32) % (K + 1),
                **_draft_form(kind, draft_logits, temperatures)}
    given = {}
    if target_form == "probs":
        scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
        given, target = {"target_probs": torch.softmax(target / scale, dim=-1)}, None
    top_k = torch.tensor([0, vocab, vocab + 9, 2**40])[torch.arange(batch) % 4]  # >= V is off too
    off = SamplingParams(temperatures, top_k=top_k, top_p=torch.ones(batch), min_p=torch.zeros(batch))
    del keywords["temperatures"]
    for logprobs in (None, "processed", "raw"):
        plain = run_verify(target, drafts, logprobs=logprobs, temperatures=temperatures, **given, **keywords)
        knobs_off = run_verify(target, drafts, logprobs=logprobs, sampling=off, **given, **keywords)
        assert same_result(knobs_off, plain), logprobs


def _argmax_tokens(target: torch.Tensor, drafts: torch.Tensor) -> torch.Tensor:
    # what the greedy mode emits: the drafts while they equal the argmax, then the argmax
    return verify(target, drafts, mode="greedy", backend="torch").output_token_ids


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
def test_top_k_one_emits_the_greedy_tokens(run_verify, kind):
    # p' is the one-hot at the argmax (ties to the lowest id): accept iff the draft is it, else emit it
    batch, vocab = 200, 17
    target, draft_logits, drafts, temperatures = _random_case(batch, vocab, seed=4)
    target = torch.round(target)  # integer logits: ties at the top, broken to the lowest id
    drafts[::3] = target[::3, :K].argmax(dim=-1)  # some drafts are the argmax, so requests accept several
    result = run_verify(target, drafts, seeds=torch.arange(batch), temperatures=temperatures,
                        sampling=SamplingParams(top_k=1), **_draft_form(kind, draft_logits, temperatures))
    assert torch.equal(result.output_token_ids, _argmax_tokens(target, drafts))
    assert int(result.num_accepted.sum()) > batch // 3


def test_greedy_rows_in_a_truncated_batch_are_unchanged(run_verify):
    batch, vocab = 60, 29
    target, draft_logits, drafts, temperatures = _random_case(batch, vocab, seed=5)
    temperatures[::2] = 0.0
    keywords = {"seeds": torch.arange(batch), "temperatures": temperatures, "draft_logits": draft_logits}
    plain = run_verify(target, drafts, **keywords)
    cut = run_verify(target, drafts, **keywords, sampling=SamplingParams(top_k=2, top_p=0.3, min_p=0.2))
    assert torch.equal(cut.output_token_ids[::2], plain.output_token_ids[::2])
    assert not torch.equal(cut.output_token_ids[1::2], plain.output_token_ids[1::2])


def _random_knobs(batch: int, vocab: int, seed: int) -> SamplingParams:
    # every request its own mix: off, top_k, top_p, min_p, all three
    generator = torch.Generator().manual_seed(seed)
    which = torch.randint(0, 5, (batch,), generator=generator)
    top_k = torch.where((which == 1) | (which == 4), torch.randint(1, vocab, (batch,), generator=generator), 0)
    top_p = torch.where((which == 2) | (which == 4), 0.05 + 0.9 * torch.rand(batch, generator=generator), 1.0)
    min_p = torch.where((which == 3) | (which == 4), 0.3 * torch.rand(batch, generator=generator), 0.0)
    return SamplingParams(top_k=top_k, top_p=top_p, min_p=min_p)


def _knobs_of(knobs: SamplingParams, b: int) -> dict:
    return {"top_k": int(knobs.top_k[b]), "top_p": float(knobs.top_p[b]), "min_p": float(knobs.min_p[b])}


@pytest.mark.parametrize("target_form", ["logits", "probs"])
def test_kept_mask_is_the_oracles_kept_set(target_form):
    # every row of a random batch (with ties: rounded logits) keeps a set inside the oracle's range
    batch, vocab = 300, 40
    generator = torch.Generator().manual_seed(6)
    rows = torch.round(3 * torch.randn(batch, vocab, generator=generator))
    rows[torch.rand(batch, vocab, generator=generator) < 0.05] = NAN
    is_probs = target_form == "probs"
    values = torch.softmax(torch.nan_to_num(rows, nan=-INF), -1) if is_probs else torch.nan_to_num(rows, nan=-INF)
    knobs = _random_knobs(batch, vocab, seed=7)
    mask = truncation.kept_mask(values, knobs.top_k, knobs.top_p, knobs.min_p, is_probs)
    for b in range(batch):
        cut = oracle.truncation(oracle.truncation_values(values[b], 1.0, is_probs), is_probs=is_probs,
                                **_knobs_of(knobs, b))
        kept = int(mask[b].sum())
        assert cut.kept_min <= kept <= cut.kept_max, (b, kept, cut)
        assert torch.equal(mask[b], cut.mask(kept)), b  # a prefix of the order


def test_kept_mask_follows_the_definition_at_exact_boundaries():
    # dyadic probabilities: every float32 sum is exact, so the boundary cases are the definition's own
    probs = torch.tensor([[0.125, 0.5, 0.25, 0.125, 0.0]] * 6)
    top_p = torch.tensor([0.75, 0.7500001, 1.0, 0.0, 1.0, 1.0])  # prefix 0.75 < 0.75 fails: token 0 is cut
    min_p = torch.tensor([0.0, 0.0, 0.5, 0.0, 0.51, 2.0])  # 0.25 >= 0.5 * 0.5 keeps token 2
    top_k = torch.tensor([0, 0, 0, 0, 0, 0], dtype=torch.int32)
    mask = truncation.kept_mask(probs, top_k, top_p, min_p, is_probs=True)
    assert mask.int().tolist() == [[0, 1, 1, 0, 0], [1, 1, 1, 0, 0], [0, 1, 1, 0, 0], [0, 1, 0, 0, 0],
                                   [0, 1, 0, 0, 0], [0, 1, 0, 0, 0]]
    # top_k splits the tie of tokens 0 and 3 by id; off knobs keep every token with mass, never the empty one
    top_k = torch.tensor([3, 5, 0, -1, 1, 0], dtype=torch.int32)
    mask = truncation.kept_mask(probs, top_k, None, None, is_probs=True)
    assert mask.int().tolist() == [[1, 1, 1, 0, 0]] + [[1, 1, 1, 1, 0]] * 3 + [[0, 1, 0, 0, 0], [1, 1, 1, 1, 0]]
    # logits: masses exp(z - m); a row with no finite value keeps nothing
    logits = torch.tensor([[0.0, 0.0, -INF, -1.0], [-INF, -INF, -INF, -INF]])
    mask = truncation.kept_mask(logits, torch.tensor([1, 1]), None, torch.tensor([1.0, 0.5]), is_probs=False)
    assert mask.int().tolist() == [[1, 0, 0, 0], [0, 0, 0, 0]]
    assert truncation.kept_mask(logits, None, None, torch.tensor([1.0, 1.0]), is_probs=False).int().tolist() == [
        [1, 1, 0, 0], [0, 0, 0, 0]]


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
def test_emitted_tokens_never_leave_the_kept_set(run_verify, kind):
    batch, vocab = 400, 33
    target, draft_logits, drafts, temperatures = _random_case(batch, vocab, seed=8)
    target = torch.round(target)
    knobs = _random_knobs(batch, vocab, seed=9)
    result = run_verify(target, drafts, seeds=torch.arange(batch), **_draft_form(kind, draft_logits, temperatures),
                        sampling=knobs._replace(temperatures=temperatures))
    checked = 0
    for b in range(batch):
        for slot in range(int(result.num_emitted[b])):
            row = oracle.truncation_values(target[b, slot], float(temperatures[b]), False)
            cut = oracle.truncation(row, **_knobs_of(knobs, b))
            assert bool(cut.mask(cut.kept_max)[result.output_token_ids[b, slot]]), (b, slot)
            checked += 1
    assert checked > batch


# ---------------------------------------------------------------------------------- statistics


def _tie_rows(base: list[float], num_rows: int, seed: int) -> torch.Tensor:
    # [num_rows, V] rows holding the values of `base` (with deliberate exact ties), shuffled per row
    generator = torch.Generator().manual_seed(seed)
    values = torch.tensor(base)
    return torch.stack([values[torch.randperm(len(base), generator=generator)] for _ in range(num_rows)])


# each case: target values, draft values, temperature, knobs. The ties straddle each boundary: top_k = 3
# splits the three 1.0s; top_p (at T = 1: masses 1, e^-0.8 x 3, e^-1.5 x 2, ...) cuts between the tied
# e^-0.8s; the last case cuts with all three knobs at T = 0.7
CASES = {
    "top_k ties": ([2.0, 1.0, 1.0, 1.0, 0.5, 0.0, -0.5, -1.0], [1.5, 1.5, 1.0, 0.5, 0.5, 0.0, -1.0, -1.0],
                   1.0, {"top_k": 3}),
    "top_p ties": ([1.5, 0.7, 0.7, 0.7, 0.0, 0.0, -1.0, -2.0], [1.0, 1.0, 0.7, 0.7, 0.2, 0.0, -1.0, -1.0],
                   1.0, {"top_p": 0.57}),
    "all knobs": ([1.2, 1.2, 0.8, 0.3, 0.3, 0.3, -0.4, -2.0], [2.2, 1.0, 1.0, 0.6, 0.2, 0.0, -0.5, -3.0],
                  0.7, {"top_k": 5, "top_p": 0.8, "min_p": 0.05}),
}


def _case(name: str, seed: int):
    target_base, draft_base, temperature, knobs = CASES[name]
    target = _tie_rows(target_base, K + 1, seed)
    draft_logits = _tie_rows(draft_base, K, seed + 1)
    return target, draft_logits, temperature, knobs


def _check_law(result, law: oracle.StepDistribution, chi_square, what: str) -> None:
    # the accepted counts against P(A = k), and the tokens of every reached slot against its law
    counts = torch.bincount(result.num_accepted.long(), minlength=law.num_accepted_probs.numel())
    assert chi_square(counts, law.num_accepted_probs) > ALPHA, f"{what}: counts {counts.tolist()}"
    for slot in range(law.emit_probs.shape[0]):
        reached = result.num_accepted >= slot
        if int(reached.sum()) == 0:
            continue
        observed = torch.bincount(result.output_token_ids[reached, slot], minlength=V)
        p_value = chi_square(observed, law.emit_probs[slot])
        assert p_value > ALPHA, (f"{what}, slot {slot}: p {p_value:.2e}, counts {observed.tolist()}, expected "
                                 f"{(law.emit_probs[slot] * int(reached.sum())).round().tolist()}")


def _fixed_drafts(target, draft_logits, temperature, knobs) -> torch.Tensor:
    # slots 0 and 1: the first and the second token of q''s order that p' keeps too (so both tests run);
    # slot 2: the last token of the target's order, which its truncation cuts
    drafts = []
    for slot in range(K):
        p, target_cut = oracle.truncated_row(target[slot], temperature, False, **knobs)
        _q, draft_cut = oracle.truncated_row(draft_logits[slot], temperature, False, **knobs)
        both = [int(x) for x in draft_cut.order if p[x] > 0]
        drafts.append(both[slot] if slot < 2 else int(target_cut.order[-1]))
    return torch.tensor(drafts)


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
@pytest.mark.parametrize("name", list(CASES))
def test_fixed_drafts_follow_the_exact_truncated_law(run_verify, chi_square, name, kind):
    target, draft_logits, temperature, knobs = _case(name, seed=10)
    assert oracle.truncation_is_exact(target_logits=target, draft_logits=draft_logits, num_draft_tokens=K,
                                      temperature=temperature, **knobs)
    drafts = _fixed_drafts(target, draft_logits, temperature, knobs)
    draft = {}
    if kind == "logits":
        draft = {"draft_logits": _repeat(draft_logits, N)}
    elif kind == "probs":  # a drafter's own cut distribution, given as probabilities
        q = torch.stack([oracle.truncated_row(row, temperature, False, **knobs)[0] for row in draft_logits])
        draft = {"draft_probs": _repeat(q.float(), N)}
    result = run_verify(_repeat(target, N), _repeat(drafts, N), seeds=torch.arange(N), positions=torch.full((N,), 11),
                        sampling=SamplingParams(temperature, **knobs), **draft)
    law = oracle.step_distribution(
        mode="probabilistic", target_logits=target, draft_token_ids=drafts, num_draft_tokens=K,
        draft_logits=draft_logits if kind == "logits" else None,
        draft_probs=draft["draft_probs"][0] if kind == "probs" else None, temperature=temperature, **knobs)
    assert float(law.accept_probs[2]) == 0.0  # the cut draft is never accepted
    _check_law(result, law, chi_square, f"{name}, {kind} drafts")


@pytest.mark.parametrize("kind", ["logits", "probs"])
@pytest.mark.parametrize("name", list(CASES))
def test_drafts_sampled_from_the_cut_draft_law_emit_the_cut_target_law(run_verify, chi_square, name, kind):
    # Leviathan et al. (2022) with p' and q': every reached slot emits p', and slot i accepts with
    # sum_x min(p'(x), q'(x))
    target, draft_logits, temperature, knobs = _case(name, seed=20)
    q = torch.stack([oracle.truncated_row(row, temperature, False, **knobs)[0] for row in draft_logits])
    p = torch.stack([oracle.truncated_row(row, temperature, False, **knobs)[0] for row in target])
    drafts = oracle.sample_drafts(q, N, seed=21)
    draft = {"draft_logits": _repeat(draft_logits, N)} if kind == "logits" else {"draft_probs": _repeat(q.float(), N)}
    result = run_verify(_repeat(target, N), drafts, seeds=torch.arange(N),
                        sampling=SamplingParams(temperature, **knobs), **draft)
    accept = torch.minimum(p[:K], q).sum(dim=-1)
    reach = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(accept, 0)])
    law = oracle.StepDistribution(accept, reach, p, reach - torch.cat([reach[1:], torch.zeros(1, dtype=torch.float64)]))
    _check_law(result, law, chi_square, f"{name}, sampled {kind} drafts")


def test_untruncated_draft_logits_change_the_law_as_the_oracle_says(run_verify, chi_square):
    # truncate_draft_logits=False: q is the whole softmax, so a draft the target keeps but that carries
    # mass in q's cut tail is accepted less often than with q'
    target, draft_logits, temperature, knobs = _case("top_p ties", seed=30)
    # at each slot the draft whose acceptance q and q' set furthest apart
    gaps = []
    for slot in range(K):
        p = oracle.truncated_row(target[slot], temperature, False, **knobs)[0]
        q_whole = oracle.softmax(draft_logits[slot], temperature)
        q_cut = oracle.truncated_row(draft_logits[slot], temperature, False, **knobs)[0]
        gaps.append([abs(oracle.acceptance_probability(p, q_whole, x) - oracle.acceptance_probability(p, q_cut, x))
                     for x in range(V)])
    drafts = torch.tensor(gaps).argmax(dim=1)
    common = {"mode": "probabilistic", "target_logits": target, "draft_token_ids": drafts, "num_draft_tokens": K,
              "draft_logits": draft_logits, "temperature": temperature, **knobs}
    whole, cut = (oracle.step_distribution(**common, truncate_draft_logits=flag) for flag in (False, True))
    assert float((whole.accept_probs - cut.accept_probs).abs().max()) > 0.05  # a difference the test can see
    result = run_verify(_repeat(target, N), _repeat(drafts, N), seeds=torch.arange(N), draft_logits=_repeat(
        draft_logits, N), sampling=SamplingParams(temperature, **knobs), truncate_draft_logits=False)
    _check_law(result, whole, chi_square, "untruncated draft logits")
    counts = torch.bincount(result.num_accepted.long(), minlength=K + 1)
    assert chi_square(counts, cut.num_accepted_probs) < ALPHA  # and not the truncated one


@pytest.mark.parametrize("kind", ["none", "probs"])
def test_target_probabilities_are_cut_and_renormalised(run_verify, chi_square, kind):
    # softmax(z / T) given as probabilities, scaled by 0.9 (read as given untruncated): the cut law is p'
    target, draft_logits, temperature, knobs = _case("top_p ties", seed=40)
    probs = 0.9 * torch.softmax(target / temperature, dim=-1)
    drafts = _fixed_drafts(target, draft_logits, temperature, knobs)
    q = torch.stack([oracle.truncated_row(row, temperature, False, **knobs)[0] for row in draft_logits])
    draft = {"draft_probs": _repeat(q.float(), N)} if kind == "probs" else {}
    assert oracle.truncation_is_exact(target_probs=probs, num_draft_tokens=K, temperature=temperature, **knobs)
    result = run_verify(None, _repeat(drafts, N), target_probs=_repeat(probs, N), seeds=torch.arange(N),
                        sampling=SamplingParams(temperature, **knobs), **draft)
    law = oracle.step_distribution(mode="probabilistic", target_probs=probs, draft_token_ids=drafts,
                                   num_draft_tokens=K, draft_probs=q if kind == "probs" else None,
                                   temperature=temperature, **knobs)
    _check_law(result, law, chi_square, f"target probabilities, {kind} drafts")


def test_synthetic_own_tokens_follow_the_cut_law(run_verify, chi_square):
    target, _draft_logits, temperature, knobs = _case("top_k ties", seed=50)
    drafts = torch.tensor([0, 1, 2])
    rates = [0.6, 0.5, 0.4]
    result = run_verify(_repeat(target, N), _repeat(drafts, N), mode="synthetic", acceptance_rates=rates,
                        seeds=torch.arange(N), sampling=SamplingParams(temperature, **knobs))
    law = oracle.step_distribution(mode="synthetic", target_logits=target, draft_token_ids=drafts,
                                   num_draft_tokens=K, temperature=temperature,
                                   conditional_rates=[0.6, 0.5 / 0.6, 0.4 / 0.5], **knobs)
    _check_law(result, law, chi_square, "synthetic")


# ------------------------------------------------------------------------------ log-probabilities


@pytest.mark.parametrize("mode", ["probabilistic", "synthetic", "greedy"])
@pytest.mark.parametrize("target_form", ["logits", "probs"])
@pytest.mark.parametrize("logprobs", ["processed", "raw"])
def test_logprobs_equal_the_oracles(run_verify, logprobs, target_form, mode):
    batch, vocab = 120, 21
    target, draft_logits, drafts, temperatures = _random_case(batch, vocab, seed=60)
    temperatures[::4] = 0.0  # greedy rows
    temperatures[1] = -1.0  # an invalid request: all NaN
    knobs = _random_knobs(batch, vocab, seed=61)
    keywords = {"seeds": torch.arange(batch), "num_draft_tokens": torch.arange(batch, dtype=torch.int32) % (K + 1),
                "check_values": False, "mode": mode, "sampling": knobs._replace(temperatures=temperatures)}
    if mode == "probabilistic":
        keywords["draft_logits"] = draft_logits
    if mode == "synthetic":
        keywords["acceptance_rates"] = [0.7, 0.5, 0.3]
    given = {}
    if target_form == "probs":
        scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
        rows = 0.95 * torch.softmax(target / scale, dim=-1)  # not summing to 1: the oracle divides by the sum
        given, target = {"target_probs": rows}, None
    result = run_verify(target, drafts, logprobs=logprobs, **given, **keywords)
    rows = given["target_probs"] if given else target
    assert result.logprobs.dtype == torch.float32 and result.logprobs.shape == (batch, K + 1)
    if mode != "greedy":  # the greedy mode reads no temperature
        assert bool(result.logprobs[1].isnan().all()) and int(result.num_emitted[1]) == 0
    temperature_of = temperatures if mode != "greedy" else torch.zeros(batch)
    compared = 0
    for b in range(batch):
        emitted = int(result.num_emitted[b])
        assert bool(result.logprobs[b, emitted:].isnan().all())
        for slot in range(emitted):
            token, temperature = int(result.output_token_ids[b, slot]), float(temperature_of[b])
            knobs_b = _knobs_of(knobs, b) if mode != "greedy" else {}
            if not oracle.truncated_row(rows[b, slot], temperature, bool(given), **knobs_b)[1].exact:
                continue  # a float32 boundary token either side: p' is not defined to float64 precision
            want = oracle.logprob(rows[b, slot], token, temperature, is_probs=bool(given), kind=logprobs, **knobs_b)
            got = float(result.logprobs[b, slot])
            assert got == pytest.approx(want, abs=1e-4) or got == want == -INF, (b, slot, got, want)
            compared += 1
    assert compared > batch
