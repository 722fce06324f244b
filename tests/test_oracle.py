"""The float64 oracle itself: hand-worked cases, Leviathan's theorem, edge rules, the draft sampler."""

from __future__ import annotations

import math

import pytest
import torch

from specbench import oracle

INF, NAN = math.inf, math.nan


def _logits(probabilities: list[float]) -> torch.Tensor:
    return torch.tensor([math.log(p) if p > 0 else -INF for p in probabilities], dtype=torch.float64)


def _close(a: torch.Tensor, b: list[float] | torch.Tensor) -> bool:
    return torch.allclose(a, torch.as_tensor(b, dtype=torch.float64), atol=1e-12, rtol=0)


def test_hand_worked_acceptance_and_residual():
    p = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
    q = torch.tensor([0.2, 0.6, 0.2, 0.0], dtype=torch.float64)
    # x = 1: a = min(1, 0.3 / 0.6) = 0.5; residual max(p - q, 0) = [0.3, 0, 0, 0] -> token 0
    assert oracle.acceptance_probability(p, q, 1) == pytest.approx(0.5)
    assert _close(oracle.residual_distribution(p, q, 1), [1.0, 0.0, 0.0, 0.0])
    assert _close(oracle.emitted_distribution(p, q, 1), [0.5, 0.5, 0.0, 0.0])
    # x = 0: p(0) >= q(0), always accepted
    assert _close(oracle.emitted_distribution(p, q, 0), [1.0, 0.0, 0.0, 0.0])
    # x = 3: p(3) = q(3) = 0 -> never accepted; an id outside [0, V) samples p itself
    assert oracle.acceptance_probability(p, q, 3) == 0.0
    assert oracle.acceptance_probability(p, q, -1) == 0.0
    assert _close(oracle.emitted_distribution(p, q, 4), p)
    # q(x) = 0 < p(x): always accepted
    assert oracle.acceptance_probability(p, torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64), 0) == 1.0


def test_one_hot_verification_emits_p_for_any_fixed_draft():
    # accept x with p(x), else sample p without x: the emitted token is p whatever x is
    p = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
    for x in range(4):
        q = oracle.draft_distribution(None, None, x, 1.0, 4)
        assert _close(q, torch.eye(4, dtype=torch.float64)[x])
        assert _close(oracle.emitted_distribution(p, q, x), p)


@pytest.mark.parametrize("seed", range(6))
def test_leviathan_theorem_holds_in_the_oracle(seed):
    # with x ~ q the emitted law is p exactly, for q with zeros, q = p and one-hot q too
    generator = torch.Generator().manual_seed(seed)
    vocab = 9
    p = torch.softmax(2 * torch.randn(vocab, generator=generator, dtype=torch.float64), dim=-1)
    p[seed % vocab] = 0.0
    p /= p.sum()
    q = torch.softmax(2 * torch.randn(vocab, generator=generator, dtype=torch.float64), dim=-1)
    q[(seed + 1) % vocab] = 0.0
    q /= q.sum()
    for draft_law in (q, p, torch.eye(vocab, dtype=torch.float64)[seed % vocab]):
        assert _close(oracle.sampled_draft_emitted_distribution(p, draft_law), p)


def test_step_distribution_chains_the_positions():
    # slot 0: x = 1 with p = q -> a = 1; slot 1: NaN draft probabilities count as 0, and x = 2 has
    # p(x) = 0 -> never accepted, residual w = p - 0 = p; the bonus row is never reached
    target = torch.stack([_logits([0.5, 0.5, 0.0]), _logits([0.25, 0.75, 0.0]), _logits([0.0, 0.0, 1.0])])
    draft_probs = torch.tensor([[0.5, 0.5, 0.0], [NAN, NAN, NAN]], dtype=torch.float64)
    law = oracle.step_distribution(
        mode="probabilistic",
        target_logits=target,
        draft_token_ids=torch.tensor([1, 2]),
        num_draft_tokens=2,
        draft_probs=draft_probs,
    )
    assert _close(law.accept_probs, [1.0, 0.0])
    assert _close(law.reach_probs, [1.0, 1.0, 0.0])
    assert _close(law.num_accepted_probs, [0.0, 1.0, 0.0])
    assert _close(law.emit_probs, [[0.0, 1.0, 0.0], [0.25, 0.75, 0.0], [0.0, 0.0, 1.0]])


def test_greedy_and_synthetic_laws():
    target = torch.tensor([[1.0, 3.0, 3.0], [NAN, 0.0, INF], [-INF, -INF, -INF]], dtype=torch.float64)
    greedy = oracle.step_distribution(
        mode="greedy", target_logits=target, draft_token_ids=torch.tensor([1, 2]), num_draft_tokens=2
    )
    assert _close(greedy.accept_probs, [1.0, 1.0])  # ties to the lowest id; +inf is the maximum
    assert _close(greedy.emit_probs, [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])  # invalid bonus row
    synthetic = oracle.step_distribution(
        mode="synthetic",
        target_logits=target,
        draft_token_ids=torch.tensor([0, -1]),
        num_draft_tokens=2,
        temperature=1.0,
        conditional_rates=[0.25, 1.0],
    )
    assert _close(synthetic.accept_probs, [0.25, 0.0])  # an invalid id is never accepted
    own = torch.softmax(torch.tensor([1.0, 3.0, 3.0], dtype=torch.float64), dim=-1)
    assert _close(synthetic.emit_probs[0], 0.25 * torch.eye(3, dtype=torch.float64)[0] + 0.75 * own)
    assert _close(synthetic.emit_probs[1], [0.0, 0.0, 1.0])  # +inf takes all the mass
    assert _close(synthetic.num_accepted_probs, [0.75, 0.25, 0.0])


@pytest.mark.parametrize("temperature", [-1.0, NAN])
@pytest.mark.parametrize("mode", ["probabilistic", "synthetic"])
def test_a_negative_or_nan_temperature_emits_nothing(mode, temperature):
    # an invalid request: A = 0 for sure and no token in any slot, whatever the target's form
    probs = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    for target in ({"target_probs": probs}, {"target_logits": torch.log(probs)}):
        law = oracle.step_distribution(mode=mode, draft_token_ids=torch.tensor([1]), num_draft_tokens=1,
                                       temperature=temperature, conditional_rates=[1.0], **target)
        assert _close(law.num_accepted_probs, [1.0, 0.0]) and _close(law.reach_probs, [1.0, 0.0])
        assert _close(law.emit_probs, torch.zeros(2, 3, dtype=torch.float64))
    greedy = oracle.step_distribution(mode="greedy", target_probs=probs, draft_token_ids=torch.tensor([1]),
                                      num_draft_tokens=1, temperature=temperature)
    assert _close(greedy.num_accepted_probs, [0.0, 1.0])  # the greedy mode reads no temperature


def test_cleaning_rules():
    row = torch.tensor([NAN, INF, 0.0, INF, -INF])
    assert _close(oracle.softmax(row, 1.0), [0.0, 0.5, 0.0, 0.5, 0.0])  # +inf tokens share the mass
    assert oracle.greedy_token(row) == 1
    assert not bool(oracle.softmax(torch.full((4,), NAN), 1.0).any())  # invalid row: no mass
    assert oracle.greedy_token(torch.full((4,), -INF)) == -1
    logits = torch.tensor([0.3, -1.2, 2.0])
    assert _close(oracle.softmax(logits, 0.5), torch.softmax(logits.double() * 2, dim=-1))
    # an invalid draft-logit row is a one-hot draft
    assert _close(oracle.draft_distribution(torch.full((3,), NAN), None, 2, 1.0, 3), [0.0, 0.0, 1.0])


def test_sample_drafts_follows_q_and_is_reproducible(chi_square):
    q = torch.tensor([[0.1, 0.6, 0.3, 0.0], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    drafts = oracle.sample_drafts(q, 20_000, seed=1)
    assert drafts.shape == (20_000, 2)
    assert torch.equal(drafts, oracle.sample_drafts(q, 20_000, seed=1))
    for slot in range(2):
        assert chi_square(torch.bincount(drafts[:, slot], minlength=4), q[slot]) > 1e-3


# ------------------------------------------------------------------------------------- truncation


def _kept(values: list[float], **knobs) -> tuple[list[int], bool]:
    # the kept ids (sorted) of one logit row at T = 1, and whether the kept set is exact
    cut = oracle.truncation(oracle.truncation_values(torch.tensor(values), 1.0, False), **knobs)
    return sorted(torch.nonzero(cut.mask())[:, 0].tolist()), cut.exact


def test_truncation_order_and_top_k_ties_keep_the_lowest_ids():
    values = [1.0, 3.0, 2.0, 3.0, 2.0, 2.0]  # order: 1, 3, 2, 4, 5, 0
    cut = oracle.truncation(oracle.truncation_values(torch.tensor(values), 1.0, False), top_k=3)
    assert cut.order.tolist() == [1, 3, 2, 4, 5, 0]
    assert (cut.kept_min, cut.kept_max) == (3, 3)
    assert _kept(values, top_k=3) == ([1, 2, 3], True)  # 2 of the tied 2.0s is kept, 4 and 5 are not
    assert _kept(values, top_k=1) == ([1], True)  # the tie at the top goes to the lowest id
    assert _kept(values, top_k=6) == (list(range(6)), True)  # top_k >= V is off
    assert _kept(values, top_k=100) == (list(range(6)), True)
    assert _kept(values, top_k=-3) == (list(range(6)), True)  # a negative top_k (unchecked) is off


def test_truncation_top_p_boundary_and_ties():
    # masses 1, e^-1 x 3 (tied), e^-2: M = 1 + 3/e + e^-2 ~ 2.239; prefix masses 0, 1, 1.368, 1.736, 2.104
    values = [0.0, -1.0, -1.0, -1.0, -2.0]
    mass = torch.exp(torch.tensor(values, dtype=torch.float64))
    prefix = torch.cumsum(mass, 0) - mass
    total = float(mass.sum())
    # a cut between the tied tokens: the token whose prefix is just below top_p * M survives, the next does not
    top_p = float((prefix[2] + prefix[3]) / 2 / total)
    assert _kept(values, top_p=top_p) == ([0, 1, 2], True)
    # just above the first token's mass keeps the second (prefix 1 < top_p * M), not the third
    assert _kept(values, top_p=1.0 / total + 0.01) == ([0, 1], True)
    # a prefix mass exactly at top_p * M lies inside the tolerance: ambiguous, kept_min leaves it out
    cut = oracle.truncation(oracle.truncation_values(torch.tensor(values), 1.0, False), top_p=float(prefix[2] / total))
    assert not cut.exact and cut.kept_min == 2
    assert _kept(values, top_p=1.0) == (list(range(5)), True)  # 1 is off, NaN too
    assert _kept(values, top_p=NAN) == (list(range(5)), True)


def test_truncation_min_p_and_knobs_in_order():
    # masses exp(z - 3): 1, e^-1 ~ 0.368, e^-2 ~ 0.135, e^-3 ~ 0.050
    values = [3.0, 2.0, 1.0, 0.0]
    assert _kept(values, min_p=0.2) == ([0, 1], True)
    assert _kept(values, min_p=0.1) == ([0, 1, 2], True)
    assert _kept(values, min_p=0.0) == ([0, 1, 2, 3], True)
    assert _kept(values, min_p=NAN) == ([0, 1, 2, 3], True)
    assert _kept(values, min_p=0.1, top_k=2) == ([0, 1], True)
    # top_p of what min_p and top_k kept: M = 1 + e^-1; 0.7 * M ~ 0.957 < 1: only the first token
    assert _kept(values, top_k=2, top_p=0.7) == ([0], True)
    # probabilities: min_p times the largest probability
    probs = torch.tensor([0.1, 0.5, 0.3, 0.1, 0.0])
    cut = oracle.truncation(oracle.truncation_values(probs, 1.0, True), min_p=0.5, is_probs=True)
    assert sorted(torch.nonzero(cut.mask())[:, 0].tolist()) == [1, 2] and cut.exact


def test_out_of_range_knobs_keep_the_first_token_and_a_nan_row_keeps_nothing():
    values = [0.5, 2.0, 2.0, -1.0]
    assert _kept(values, top_p=0.0) == ([1], True)
    assert _kept(values, top_p=-0.5) == ([1], True)
    assert _kept(values, min_p=1.5) == ([1], True)
    assert _kept(values, min_p=1.0) == ([1, 2], True)  # the tied token has mass exactly 1
    nan_row = oracle.truncation(oracle.truncation_values(torch.full((4,), NAN), 1.0, False), top_k=2)
    assert (nan_row.kept_min, nan_row.kept_max) == (0, 0) and not bool(nan_row.mask().any())
    # NaN never survives, and tokens without mass do not either when a knob is on
    assert _kept([NAN, 1.0, -INF, 0.0], top_k=3) == ([1, 3], True)


def _near(a: torch.Tensor, b: list[float]) -> bool:
    # truncated laws are computed from the float32 values a backend ranks (oracle.truncation_values)
    return torch.allclose(a, torch.as_tensor(b, dtype=torch.float64), atol=1e-6, rtol=0)


def test_truncated_step_distribution_and_logprob():
    # top_k = 2 on p = [0.5, 0.3, 0.2]: p' = [0.625, 0.375, 0]; one-hot draft 2 is never accepted
    target = torch.stack([_logits([0.5, 0.3, 0.2]), _logits([0.2, 0.2, 0.6])])
    law = oracle.step_distribution(mode="probabilistic", target_logits=target, draft_token_ids=torch.tensor([2]),
                                   num_draft_tokens=1, top_k=2)
    assert _close(law.accept_probs, [0.0])
    assert _near(law.emit_probs[0], [0.625, 0.375, 0.0])
    assert oracle.logprob(target[0], 1, 1.0, top_k=2) == pytest.approx(math.log(0.375), abs=1e-6)
    assert oracle.logprob(target[0], 2, 1.0, top_k=2) == -INF
    assert oracle.logprob(target[0], 2, 1.0, top_k=2, kind="raw") == pytest.approx(math.log(0.2))
    assert oracle.logprob(target[0], 2, 0.5) == pytest.approx(math.log(0.04 / 0.38))
    bonus = oracle.step_distribution(mode="probabilistic", target_logits=target, draft_token_ids=torch.tensor([0]),
                                     num_draft_tokens=0, top_k=2)
    assert _near(bonus.emit_probs[0], [0.625, 0.375, 0.0])
    # greedy rows ignore truncation; probabilities are renormalised over what is kept
    greedy = oracle.step_distribution(mode="probabilistic", target_logits=target, draft_token_ids=torch.tensor([0]),
                                      num_draft_tokens=1, temperature=0.0, top_k=2)
    assert _close(greedy.accept_probs, [1.0])
    probs = torch.tensor([[0.4, 0.2, 0.2, 0.1]], dtype=torch.float64)  # sums to 0.9: read as given untruncated
    cut = oracle.step_distribution(mode="probabilistic", target_probs=probs, draft_token_ids=torch.tensor([]),
                                   num_draft_tokens=0, top_k=2)
    assert _near(cut.emit_probs[0], [2 / 3, 1 / 3, 0.0, 0.0])
    assert oracle.logprob(probs[0], 1, 1.0, is_probs=True, top_k=2) == pytest.approx(math.log(1 / 3), abs=1e-6)
    assert oracle.logprob(probs[0], 3, 1.0, is_probs=True) == pytest.approx(math.log(1 / 9))
