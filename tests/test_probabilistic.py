"""Probabilistic verification: exact one-hot cases, seeds, backends token for token, NaN/inf, statistics.

Statistical tests compare the tokens emitted at every slot (given that the slot is reached) with
the exact float64 law of ``specbench.oracle``, by Pearson's chi-square at ``ALPHA = 1e-3`` per
check, on a batch of identical requests with seeds ``0..N-1``. The inputs and seeds are fixed, so
a pass is reproducible; the sample sizes are large enough that the wrong samplers below fail.
"""

from __future__ import annotations

import math
import warnings

import pytest
import scipy.stats
import torch
from conftest import device_for, hostile_draft_probs, interpreted

from specbench import oracle

ALPHA = 1e-3
NAN, INF = math.nan, math.inf
K, V = 3, 8


def _samples(backend: str, on_the_interpreter: bool = False, interpreter_requests: int = 300) -> int:
    """Requests per statistical case: 20 000 on torch or a GPU. The Triton interpreter costs tens of ms a
    request, so there only the cases marked for it run, with ``interpreter_requests`` requests; the others skip,
    since ``test_backends_agree_token_for_token`` holds those kernels to torch's tokens."""
    if backend == "torch" or device_for(backend).type == "cuda":
        return 20_000
    if backend == "triton-split" or not on_the_interpreter:
        pytest.skip("sampled on torch; under the interpreter this backend is checked token for token against torch")
    return interpreter_requests


def _one_hot_logits(tokens: list[int], vocab: int = V) -> torch.Tensor:
    # [len(tokens), vocab] rows with all their mass on one token (-inf elsewhere)
    rows = torch.full((len(tokens), vocab), -INF)
    rows[torch.arange(len(tokens)), torch.tensor(tokens)] = 0.0
    return rows


def _repeat(tensor: torch.Tensor, batch: int) -> torch.Tensor:
    return tensor.expand(batch, *tensor.shape).contiguous()


def _draft_keywords(kind: str, draft_logits: torch.Tensor, batch: int) -> dict:
    # draft_logits [K, V] -> the verify keywords of one draft kind, repeated over the batch
    if kind == "logits":
        return {"draft_logits": _repeat(draft_logits, batch)}
    if kind == "probs":
        return {"draft_probs": _repeat(torch.softmax(draft_logits, dim=-1), batch)}
    return {}


# ----------------------------------------------------------------------------- exact one-hot cases


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
def test_a_draft_holding_all_the_target_mass_is_always_accepted(run_verify, backend, kind):
    batch = 4 if interpreted(backend) else 16
    target = _one_hot_logits([3, 0, 7, 5])  # drafts 3, 0, 7 carry p = 1; bonus row puts p = 1 on 5
    drafts = torch.tensor([3, 0, 7])
    draft_logits = torch.randn(K, V, generator=torch.Generator().manual_seed(1))
    result = run_verify(
        _repeat(target, batch),
        _repeat(drafts, batch),
        seeds=torch.arange(batch),
        **_draft_keywords(kind, draft_logits, batch),
    )
    assert result.output_token_ids.tolist() == [[3, 0, 7, 5]] * batch
    assert result.num_accepted.tolist() == [K] * batch


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
@pytest.mark.parametrize("draft", [2, -1, V, 10**9])
def test_a_draft_without_target_mass_is_always_rejected(run_verify, backend, kind, draft):
    # p is one-hot at 6 and gives the draft (or the out-of-range id) nothing: the residual is 6
    batch = 4 if interpreted(backend) else 16
    target = _one_hot_logits([6, 1, 1, 1])
    drafts = torch.tensor([draft, 1, 1])
    draft_logits = torch.randn(K, V, generator=torch.Generator().manual_seed(2))
    result = run_verify(
        _repeat(target, batch),
        _repeat(drafts, batch),
        seeds=torch.arange(batch),
        temperatures=torch.full((batch,), 0.5),
        **_draft_keywords(kind, draft_logits, batch),
    )
    assert result.output_token_ids.tolist() == [[6, -1, -1, -1]] * batch


def test_zero_or_nan_draft_probability_accepts_any_draft_the_target_allows(run_verify, backend):
    batch = 4 if interpreted(backend) else 16
    target = torch.zeros(K + 1, V)  # p uniform: p(x) = 1/8 > 0 everywhere
    drafts = torch.tensor([4, 2, 1])
    probs = torch.softmax(torch.randn(K, V, generator=torch.Generator().manual_seed(3)), dim=-1)
    probs[0, 4] = 0.0  # q(x) = 0: u * 0 < p(x) always
    probs[1] = NAN  # NaN probabilities count as 0
    probs[2, 1] = NAN
    result = run_verify(
        _repeat(target, batch), _repeat(drafts, batch), seeds=torch.arange(batch), draft_probs=_repeat(probs, batch)
    )
    assert result.num_accepted.tolist() == [K] * batch
    assert result.output_token_ids[:, :K].tolist() == [[4, 2, 1]] * batch


def test_an_invalid_target_row_stops_the_request_with_nothing_emitted(run_verify):
    nan_row = torch.full((1, V), NAN)
    one_hot = _one_hot_logits([3, 4, 5, 6])
    target = torch.stack(
        [
            torch.cat([one_hot[:1], nan_row, one_hot[2:]]),  # row 1 invalid after draft 0 is accepted
            torch.cat([one_hot[:3], nan_row]),  # the bonus row is invalid
            torch.cat([torch.full((1, V), -INF), one_hot[1:]]),  # the very first row is invalid
        ]
    )
    drafts = torch.tensor([[3, 4, 5]] * 3)
    result = run_verify(target, drafts, seeds=torch.arange(3))
    assert result.output_token_ids.tolist() == [[3, -1, -1, -1], [3, 4, 5, -1], [-1, -1, -1, -1]]
    assert result.num_emitted.tolist() == [1, 3, 0]
    assert result.num_accepted.tolist() == [1, 3, 0]


def test_vocabulary_of_one(run_verify):
    batch, num_spec = 5, 7
    target = torch.randn(batch, num_spec + 1, 1)
    drafts = torch.zeros(batch, num_spec, dtype=torch.int64)
    drafts[1, 2] = -1  # rejected: w = p without nothing left falls back to p, the only token
    drafts[3, 0] = 1
    counts = torch.tensor([7, 7, 0, 7, 3], dtype=torch.int32)
    result = run_verify(target, drafts, seeds=torch.arange(batch), num_draft_tokens=counts)
    assert result.num_accepted.tolist() == [7, 2, 0, 0, 3]
    assert result.num_emitted.tolist() == [8, 3, 1, 1, 4]


def test_one_hot_rows_across_a_large_odd_vocabulary(run_verify):
    vocab = 100_003
    target = _one_hot_logits([vocab - 1, 65_537], vocab)[None]  # [1, 2, V]
    result = run_verify(target, torch.tensor([[vocab - 1]]), seeds=torch.tensor([9]))
    assert result.output_token_ids.tolist() == [[vocab - 1, 65_537]]
    rejected = run_verify(target, torch.tensor([[12]]), seeds=torch.tensor([9]))
    assert rejected.output_token_ids.tolist() == [[vocab - 1, -1]]


# ------------------------------------------------------------- seeds, batches, backends, NaN and inf


def _random_batch(
    batch: int, num_spec: int, vocab: int, seed: int, kind: str
) -> tuple[torch.Tensor, torch.Tensor, dict]:
    # a varied batch: temperatures 0 / 0.5 / 1 / 2 (exact reciprocals), ragged counts, bad ids
    generator = torch.Generator().manual_seed(seed)
    target = 2 * torch.randn(batch, num_spec + 1, vocab, generator=generator)
    draft_logits = target[:, :num_spec] + torch.randn(batch, num_spec, vocab, generator=generator)
    flat = torch.softmax(draft_logits, dim=-1).reshape(-1, vocab)
    drafts = torch.multinomial(flat, 1, generator=generator).reshape(batch, num_spec)
    bad = torch.tensor([-1, vocab, 2**40])[torch.randint(0, 3, (batch, num_spec), generator=generator)]
    drafts = torch.where(torch.rand(batch, num_spec, generator=generator) < 0.1, bad, drafts)
    keywords = {
        "num_draft_tokens": torch.randint(0, num_spec + 1, (batch,), generator=generator, dtype=torch.int32),
        "temperatures": torch.tensor([0.0, 0.5, 1.0, 2.0])[torch.randint(0, 4, (batch,), generator=generator)],
        "seeds": torch.randint(-(2**62), 2**62, (batch,), generator=generator),
        "positions": torch.randint(0, 2**33, (batch,), generator=generator),
        **({"draft_logits": draft_logits} if kind == "logits" else {}),
        **({"draft_probs": torch.softmax(draft_logits, dim=-1)} if kind == "probs" else {}),
    }
    return target, drafts, keywords


def _rows(keywords: dict, index: torch.Tensor) -> dict:
    return {k: v[index] for k, v in keywords.items()}


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
def test_same_seed_same_tokens_whatever_the_batch(run_verify, backend, kind):
    batch = 24 if backend == "torch" else 10
    target, drafts, keywords = _random_batch(batch, K, 33, seed=5, kind=kind)
    whole = run_verify(target, drafts, **keywords)
    order = torch.randperm(batch, generator=torch.Generator().manual_seed(0))
    shuffled = run_verify(target[order], drafts[order], **_rows(keywords, order))
    assert torch.equal(shuffled.output_token_ids, whole.output_token_ids[order])
    for b in (0, batch // 2, batch - 1):  # alone, B = 1 (another launch shape on a GPU)
        alone = run_verify(target[b : b + 1], drafts[b : b + 1], **_rows(keywords, torch.tensor([b])))
        assert torch.equal(alone.output_token_ids[0], whole.output_token_ids[b])


def test_different_seeds_and_positions_give_different_tokens(run_verify):
    batch = 32
    target = torch.zeros(batch, K + 1, V)  # p uniform: every outcome has probability > 0
    drafts = torch.zeros(batch, K, dtype=torch.int64)
    by_seed = run_verify(target, drafts, seeds=torch.arange(batch))
    assert len({tuple(row) for row in by_seed.output_token_ids.tolist()}) > 8
    assert len(set(by_seed.num_accepted.tolist())) > 1
    moved = run_verify(target, drafts, seeds=torch.arange(batch), positions=torch.full((batch,), 1000))
    assert not torch.equal(moved.output_token_ids, by_seed.output_token_ids)


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
@pytest.mark.parametrize(
    ("batch", "num_spec", "vocab"), [(99, 3, 111), (1, 1, 111), (5, 7, 111), (3, 7, 1), (1, 1, 100_003), (2, 3, 32_001)]
)
def test_backends_agree_token_for_token(run_verify, backend, kind, batch, num_spec, vocab):
    # exact reciprocals of T and random logits: a float near-tie that could flip a decision between
    # two correct implementations has probability ~1e-7 per decision, so no tolerance is taken
    if backend == "torch":
        pytest.skip("compares the triton backends with torch")
    if interpreted(backend):  # the batch picks launch shapes on a GPU only; 20 requests still mix every input kind
        batch = min(batch, 20)
    target, drafts, keywords = _random_batch(batch, num_spec, vocab, seed=batch + num_spec + vocab, kind=kind)
    expected = run_verify(target, drafts, backend="torch", **keywords)
    got = run_verify(target, drafts, **keywords)
    for name, a, b in zip(expected._fields, got, expected):
        assert (a is None and b is None) or torch.equal(a, b), f"{name}: {backend} gave {a}, torch {b}"


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
def test_nan_and_inf_inputs_give_the_documented_tokens(run_verify, backend, kind):
    batch = 40 if backend == "torch" else 12
    target, drafts, keywords = _random_batch(batch, K, 17, seed=77, kind=kind)
    generator = torch.Generator().manual_seed(78)
    target[torch.rand(target.shape, generator=generator) < 0.2] = NAN
    target[torch.rand(target.shape, generator=generator) < 0.05] = INF
    target[torch.rand(target.shape, generator=generator) < 0.2] = -INF
    target[0, 1] = NAN  # whole invalid rows
    target[1, 0] = -INF
    for name in ("draft_logits", "draft_probs"):
        if name in keywords:
            keywords[name][torch.rand(keywords[name].shape, generator=generator) < 0.2] = NAN
            keywords[name][2, 0] = NAN  # an invalid draft-logit row: that draft is one-hot
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # nor a numpy warning from the interpreter
        result = run_verify(target, drafts, **keywords)
    # every emitted token has target mass in its row: never a NaN or -inf logit, never garbage
    cleaned = torch.nan_to_num(target, nan=-INF)
    slots = torch.arange(K + 1)[None, :] < result.num_emitted[:, None]
    b_index, slot = torch.nonzero(slots, as_tuple=True)
    assert bool((cleaned[b_index, slot, result.output_token_ids[b_index, slot]] > -INF).all())
    assert result.num_emitted[0] <= 1 and result.num_emitted[1] == 0
    if backend != "torch":
        expected = run_verify(target, drafts, backend="torch", **keywords)
        assert torch.equal(result.output_token_ids, expected.output_token_ids)


@pytest.mark.parametrize(("vocab", "target_form"), [(17, "logits"), (17, "probs"), (5_003, "logits")])
def test_hostile_draft_probabilities_are_read_as_target_probabilities_are(run_verify, backend, vocab, target_form):
    # negative (-inf too) and NaN entries count as 0, entries above 1 (+inf too) as 1: the same tokens, counts
    # and accepted drafts, bit for bit, as the call given those cleaned values (an -inf entry once made the
    # kernels' residual race compare inf with inf and emit another token than torch's)
    batch = 40 if backend == "torch" else 12
    target, drafts, keywords = _random_batch(batch, K, vocab, seed=vocab + 5, kind="probs")
    if target_form == "probs":
        keywords["target_probs"] = torch.softmax(target, dim=-1)
        target = None
    keywords["draft_probs"], cleaned = hostile_draft_probs(keywords["draft_probs"], drafts, seed=vocab)
    result = run_verify(target, drafts, **keywords)
    expected = run_verify(target, drafts, backend="torch", **{**keywords, "draft_probs": cleaned})
    for name, a, b in zip(expected._fields, result, expected):
        assert (a is None and b is None) or torch.equal(a, b), f"{name}: {backend} gave {a}, the cleaned call {b}"


@pytest.mark.parametrize("kind", ["none", "logits", "probs"])
def test_adding_a_constant_to_every_logit_changes_no_token(run_verify, backend, kind):
    # softmax ignores a shift; with integer logits and a shift of 2**23 float32 stays exact at
    # T = 0.5, 1 and 2 (z - max is the same number), so the tokens must be identical, race and all
    batch = 8 if interpreted(backend) else 32
    target, drafts, keywords = _random_batch(batch, K, 24, seed=90, kind=kind)
    target = torch.round(target)
    shifted_keywords = dict(keywords)
    if "draft_logits" in keywords:
        keywords["draft_logits"] = torch.round(keywords["draft_logits"])
        shifted_keywords["draft_logits"] = keywords["draft_logits"] + 2.0**23
    plain = run_verify(target, drafts, **keywords)
    shifted = run_verify(target + 2.0**23, drafts, **shifted_keywords)
    assert torch.equal(shifted.output_token_ids, plain.output_token_ids)


def test_several_inf_logits_share_the_mass_equally(run_verify, backend, chi_square):
    # +inf becomes the largest float32: the bonus sample is uniform over the +inf tokens (a tie broken
    # to one of them, or the NaN counted among them, fails 100 requests as surely as 20,000)
    n = _samples(backend, on_the_interpreter=True, interpreter_requests=100)
    target = torch.randn(n, 1, V, generator=torch.Generator().manual_seed(8))
    target[:, 0, [1, 4, 6]] = INF
    target[:, 0, 2] = NAN
    result = run_verify(target, torch.zeros(n, 0, dtype=torch.int64), seeds=torch.arange(n))
    law = torch.zeros(V, dtype=torch.float64)
    law[[1, 4, 6]] = 1 / 3
    assert chi_square(torch.bincount(result.output_token_ids[:, 0], minlength=V), law) > ALPHA


# ------------------------------------------------------------------------------------ statistics


def _check_against_oracle(result, law: oracle.StepDistribution, chi_square, what: str) -> None:
    # at every reachable slot, the emitted tokens against the exact law; and A against P(A = k)
    num_slots = law.emit_probs.shape[0]
    counts = torch.bincount(result.num_accepted.long(), minlength=num_slots)
    p_value = chi_square(counts, law.num_accepted_probs)
    assert p_value > ALPHA, f"{what}: accepted counts {counts.tolist()} vs {law.num_accepted_probs.tolist()}"
    for slot in range(num_slots):
        reached = result.num_accepted >= slot
        if int(reached.sum()) == 0:
            continue
        tokens = result.output_token_ids[reached, slot]
        observed = torch.bincount(tokens, minlength=law.emit_probs.shape[1])
        p_value = chi_square(observed, law.emit_probs[slot])
        assert p_value > ALPHA, (
            f"{what}, slot {slot}: p-value {p_value:.2e}, counts {observed.tolist()}, "
            f"expected {(law.emit_probs[slot] * int(reached.sum())).round().tolist()}"
        )


def _statistics_case(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # a target, a fair drafter (target + noise), and drafts from likely to unlikely tokens
    generator = torch.Generator().manual_seed(seed)
    target = 1.5 * torch.randn(K + 1, V, generator=generator)
    draft_logits = target[:K] + 0.8 * torch.randn(K, V, generator=generator)
    order = torch.argsort(torch.softmax(draft_logits, dim=-1), dim=-1, descending=True)
    drafts = torch.stack([order[0, 0], order[1, 1], order[2, 3]])
    return target, draft_logits, drafts


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("kind", ["logits", "probs", "none"])
def test_emitted_tokens_follow_the_exact_law(run_verify, backend, chi_square, kind, temperature):
    # 150 under the interpreter: the acceptance law alone fails a one-hot acceptance test (seed 002)
    # with power 1.0, slot 0 alone a residual drawn from p with power 0.99 (multinomial simulation)
    n = _samples(backend, on_the_interpreter=(kind, temperature) == ("logits", 1.0),
                 interpreter_requests=150)
    target, draft_logits, drafts = _statistics_case(seed=21)
    keywords = _draft_keywords(kind, draft_logits, n)
    result = run_verify(
        _repeat(target, n),
        _repeat(drafts, n),
        seeds=torch.arange(n),
        positions=torch.full((n,), 40),
        temperatures=torch.full((n,), temperature),
        **keywords,
    )
    law = oracle.step_distribution(
        mode="probabilistic",
        target_logits=target,
        draft_token_ids=drafts,
        num_draft_tokens=K,
        draft_logits=draft_logits if kind == "logits" else None,
        draft_probs=torch.softmax(draft_logits, dim=-1) if kind == "probs" else None,
        temperature=temperature,
    )
    _check_against_oracle(result, law, chi_square, f"{kind} drafts at T={temperature}")


def test_greedy_rows_mixed_in_keep_both_laws(run_verify, backend, chi_square):
    n = _samples(backend)
    target, draft_logits, drafts = _statistics_case(seed=22)
    temperatures = torch.tensor([0.0, 1.0]).repeat(n // 2)
    result = run_verify(
        _repeat(target, n),
        _repeat(drafts, n),
        seeds=torch.arange(n),
        temperatures=temperatures,
        draft_logits=_repeat(draft_logits, n),
    )
    sampled = result.map(lambda t: t[1::2])
    law = oracle.step_distribution(
        mode="probabilistic",
        target_logits=target,
        draft_token_ids=drafts,
        num_draft_tokens=K,
        draft_logits=draft_logits,
    )
    _check_against_oracle(sampled, law, chi_square, "sampled rows beside greedy rows")
    greedy = oracle.step_distribution(mode="greedy", target_logits=target, draft_token_ids=drafts, num_draft_tokens=K)
    expected_greedy = greedy.emit_probs.argmax(dim=-1)[: int(greedy.num_accepted_probs.argmax()) + 1]
    assert bool((result.output_token_ids[0::2, : expected_greedy.numel()] == expected_greedy).all())


@pytest.mark.parametrize("case", ["invalid id", "invalid draft row", "inf target logits"])
def test_edge_rules_follow_the_exact_law(run_verify, backend, chi_square, case):
    # an id outside [0, V) samples w = p; a draft-logit row with no finite value makes a one-hot
    # draft (accept with p(x), residual p without x); several +inf logits share the mass equally
    n = _samples(backend)
    target, draft_logits, drafts = _statistics_case(seed=23)
    if case == "invalid id":
        drafts = torch.tensor([int(drafts[0]), V + 3, 0])
    elif case == "invalid draft row":
        draft_logits[0] = NAN
        draft_logits[1] = -INF
    else:
        target[0, [1, 4, 6]] = INF
        draft_logits[0, [1, 2]] = INF
        drafts = torch.tensor([4, int(drafts[1]), int(drafts[2])])
    result = run_verify(
        _repeat(target, n), _repeat(drafts, n), seeds=torch.arange(n), draft_logits=_repeat(draft_logits, n)
    )
    law = oracle.step_distribution(
        mode="probabilistic",
        target_logits=target,
        draft_token_ids=drafts,
        num_draft_tokens=K,
        draft_logits=draft_logits,
    )
    _check_against_oracle(result, law, chi_square, case)


def _leviathan_case(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    # a target and a draft distribution q that differs from it markedly (so a wrong sampler shows)
    generator = torch.Generator().manual_seed(seed)
    target = 1.5 * torch.randn(K + 1, V, generator=generator)
    draft_logits = 0.5 * target[:K] + 1.2 * torch.randn(K, V, generator=generator)
    return target, draft_logits


def _sampled_draft_run(run_verify, n: int, kind: str, seed: int):
    target, draft_logits = _leviathan_case(seed)
    q = torch.softmax(draft_logits.double(), dim=-1)
    drafts = oracle.sample_drafts(q, n, seed=seed)
    keywords = _draft_keywords(kind, draft_logits, n) if kind != "probs" else {"draft_probs": _repeat(q.float(), n)}
    result = run_verify(_repeat(target, n), drafts, seeds=torch.arange(n), **keywords)
    return result, target, q


@pytest.mark.parametrize("kind", ["probs", "logits"])
def test_drafts_sampled_from_q_emit_tokens_distributed_as_p(run_verify, backend, chi_square, kind):
    # Leviathan et al. (2022), theorem 1: with x ~ q, every emitted token is distributed as p
    result, target, _q = _sampled_draft_run(
        run_verify, _samples(backend, on_the_interpreter=kind == "probs"), kind, seed=31
    )
    for slot in range(K + 1):
        reached = result.num_accepted >= slot
        observed = torch.bincount(result.output_token_ids[reached, slot], minlength=V)
        p = oracle.softmax(target[slot], 1.0)
        assert chi_square(observed, p) > ALPHA, f"slot {slot}: counts {observed.tolist()} vs p {p.tolist()}"


def test_sampled_drafts_verified_without_q_lose_acceptance(run_verify, backend, chi_square):
    # seed 002: drafts sampled from q but verified as one-hot (no q given). Acceptance at a slot
    # drops from sum_x min(p, q) to sum_x q p. The emitted tokens still follow p: "accept x with
    # p(x), else sample p without x" is exact for any draft chosen independently of u.
    n = _samples(backend)
    correct, target, q = _sampled_draft_run(run_verify, n, "probs", seed=32)
    one_hot, _, _ = _sampled_draft_run(run_verify, n, "none", seed=32)
    p = oracle.softmax(target[0], 1.0)
    right_rate, one_hot_rate = float(torch.minimum(p, q[0]).sum()), float((p * q[0]).sum())
    assert one_hot_rate < 0.75 * right_rate  # this case makes the loss plain
    for result, rate in ((correct, right_rate), (one_hot, one_hot_rate)):
        accepted = int((result.num_accepted >= 1).sum())
        assert scipy.stats.binomtest(accepted, n, rate).pvalue > ALPHA, f"{accepted}/{n} accepted vs {rate:.4f}"
    assert float(one_hot.num_accepted.float().mean()) < float(correct.num_accepted.float().mean())
    assert chi_square(torch.bincount(one_hot.output_token_ids[:, 0], minlength=V), p) > ALPHA


def _wrong_sampler(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor, seed: int, accept_with_q: bool):
    # slot 0 of two broken verifiers [n]: q missing from the acceptance test but used by the
    # residual (accept_with_q=False), or the right test with the one-hot residual (True)
    generator = torch.Generator().manual_seed(seed)
    p, q = p.float(), q.float()
    u = torch.rand(drafts.numel(), generator=generator)
    accept = u * q[drafts] < p[drafts] if accept_with_q else u < p[drafts]
    if accept_with_q:
        residual = p[None, :].repeat(drafts.numel(), 1)
        residual[torch.arange(drafts.numel()), drafts] = 0.0
    else:
        residual = (p - q).clamp_min(0.0)[None, :].repeat(drafts.numel(), 1)
    resampled = torch.multinomial(residual, 1, generator=generator)[:, 0]
    return torch.where(accept, drafts, resampled)


@pytest.mark.parametrize("accept_with_q", [False, True], ids=["q missing from the test", "q missing from the residual"])
def test_the_chi_square_check_catches_samplers_that_use_q_halfway(chi_square, accept_with_q):
    # the check every backend passes above must fail a sampler that is wrong, at the same alpha
    n = _samples("torch")
    target, draft_logits = _leviathan_case(32)
    p, q = oracle.softmax(target[0], 1.0), torch.softmax(draft_logits[0].double(), dim=-1)
    drafts = oracle.sample_drafts(q[None, :], n, seed=33)[:, 0]
    wrong_law = torch.zeros_like(p)  # sum over x ~ q of the broken sampler's law for draft x
    for x in range(V):
        one_hot = oracle.draft_distribution(None, None, x, 1.0, V)
        accept = oracle.acceptance_probability(p, q if accept_with_q else one_hot, x)
        residual = oracle.residual_distribution(p, one_hot if accept_with_q else q, x)
        wrong_law += q[x] * (accept * one_hot + (1 - accept) * residual)
    # the check has power here: P(reject at ALPHA) > 0.99 for the wrong law at this sample size
    noncentrality = n * float(((wrong_law - p) ** 2 / p).sum())
    assert scipy.stats.ncx2.sf(scipy.stats.chi2.isf(ALPHA, V - 1), V - 1, noncentrality) > 0.99
    tokens = _wrong_sampler(p, q, drafts, seed=34, accept_with_q=accept_with_q)
    assert chi_square(torch.bincount(tokens, minlength=V), p) < ALPHA
    assert chi_square(torch.bincount(tokens, minlength=V), wrong_law) > ALPHA  # it does follow its own law
