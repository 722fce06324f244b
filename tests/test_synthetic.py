"""Synthetic verification: forced per-position rates, the target's own token on rejection, rows never read.

Statistical checks use a batch of identical requests with seeds ``0..N-1``: each unconditional
rate ``P(A >= i)`` by an exact two-sided binomial test, the law of ``A`` and of the emitted
tokens by Pearson's chi-square against ``specbench.oracle``, each at ``ALPHA = 1e-3``.
"""

from __future__ import annotations

import math

import pytest
import scipy.stats
import torch
from conftest import device_for, same_result

from specbench import acceptance, oracle, rng
from specbench.verification import simulate_acceptance

ALPHA = 1e-3
NAN = math.nan
K, V = 3, 8
RATES = [0.9, 0.6, 0.3]


def _samples(backend: str) -> int:
    # the Triton interpreter costs ~10 ms a request; torch and GPUs take the full size
    return 20_000 if backend == "torch" or device_for(backend).type == "cuda" else 300


def _repeat(tensor: torch.Tensor, batch: int) -> torch.Tensor:
    return tensor.expand(batch, *tensor.shape).contiguous()


def _case(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return 1.5 * torch.randn(K + 1, V, generator=generator), torch.randint(0, V, (K,), generator=generator)


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_rates_and_emitted_tokens_follow_the_profile(run_verify, backend, chi_square, temperature):
    if backend == "triton-split" and device_for(backend).type != "cuda":
        pytest.skip("sampled on torch and the default triton kernels; the split kernels agree token for token below")
    if backend == "triton" and device_for(backend).type != "cuda" and temperature != 1.0:
        pytest.skip("sampled at T = 1 under the interpreter; at every T its tokens equal torch's (below)")
    n = _samples(backend)
    target, drafts = _case(seed=41)
    result = run_verify(
        _repeat(target, n),
        _repeat(drafts, n),
        mode="synthetic",
        acceptance_rates=RATES,
        seeds=torch.arange(n),
        temperatures=torch.full((n,), temperature),
    )
    for i, rate in enumerate(RATES, start=1):  # P(A >= i) = p_i, whatever the logits say
        reached = int((result.num_accepted >= i).sum())
        assert scipy.stats.binomtest(reached, n, rate).pvalue > ALPHA, f"P(A >= {i}): {reached}/{n} vs {rate}"
    law = oracle.step_distribution(
        mode="synthetic",
        target_logits=target,
        draft_token_ids=drafts,
        num_draft_tokens=K,
        temperature=temperature,
        conditional_rates=acceptance.conditional_rates(RATES),
    )
    counts = torch.bincount(result.num_accepted.long(), minlength=K + 1)
    assert chi_square(counts, law.num_accepted_probs) > ALPHA
    for slot in range(K + 1):  # the draft when accepted, otherwise a sample of the target's own p
        tokens = result.output_token_ids[result.num_accepted >= slot, slot]
        observed = torch.bincount(tokens, minlength=V)
        assert chi_square(observed, law.emit_probs[slot]) > ALPHA, f"slot {slot}: {observed.tolist()}"


def test_acceptance_equals_the_simulation_for_the_same_seeds(run_verify, backend):
    # simulate_acceptance seeds request r with request_seed(seed, r) at position 0: verify must agree exactly
    n = 400 if backend == "torch" else 40
    target, drafts = _case(seed=42)
    result = run_verify(
        _repeat(target, n),
        _repeat(drafts, n),
        mode="synthetic",
        acceptance_rates=RATES,
        seeds=rng.request_seed(1000, torch.arange(n)),
    )
    simulated = simulate_acceptance(RATES, n, seed=1000, backend="torch")
    assert torch.equal(result.num_accepted, simulated)
    # a later chunk of the same run (first_request) is the same requests' counts
    assert torch.equal(simulate_acceptance(RATES, n - 7, seed=1000, first_request=7, backend="torch"), simulated[7:])


def test_two_seeds_give_histograms_as_different_as_independent_samples():
    # Each histogram is a multinomial sample of N steps; for independent runs the chi-square
    # homogeneity test's p-value is uniform, and each bin's difference has standard deviation
    # sqrt(2 N P(A=j) (1 - P(A=j))). Seeds s and s + 1 used to share all requests but one, which
    # gave histograms a count or two apart (p-value 1.0). Fixed seeds make this deterministic.
    n = 200_000
    law = acceptance.accepted_distribution(RATES)
    histograms = [torch.bincount(simulate_acceptance(RATES, n, seed=s, backend="torch").long(), minlength=K + 1)
                  for s in (0, 1)]
    table = torch.stack(histograms).numpy()
    p_value = scipy.stats.chi2_contingency(table).pvalue
    assert 1e-4 < p_value < 0.9999, table.tolist()
    scale = [math.sqrt(2 * n * pj * (1 - pj)) for pj in law]
    differences = [abs(int(a) - int(b)) for a, b in zip(*table)]
    # the largest standardized difference of K + 1 independent-sample bins is rarely below 0.05 or above 5
    largest = max(d / s for d, s in zip(differences, scale))
    assert 0.05 < largest < 5, (differences, scale)


def test_the_triton_simulation_equals_the_torch_one(backend):
    if backend == "torch":
        pytest.skip("compares the triton backend with torch")
    device = device_for(backend)
    for rates in (RATES, [1.0, 1.0, 0.5, 0.0], [0.37]):
        simulated = simulate_acceptance(rates, 5000, seed=3, backend="triton", device=device)
        assert torch.equal(simulated.cpu(), simulate_acceptance(rates, 5000, seed=3, backend="torch"))


def test_certain_and_impossible_profiles(run_verify):
    batch = 12
    target, drafts = _case(seed=43)
    counts = torch.tensor([3, 2, 0, 1] * 3, dtype=torch.int32)
    keywords = {"mode": "synthetic", "seeds": torch.arange(batch), "num_draft_tokens": counts}
    always = run_verify(_repeat(target, batch), _repeat(drafts, batch), acceptance_rates=[1.0, 1.0, 1.0], **keywords)
    assert always.num_accepted.tolist() == counts.tolist()
    never = run_verify(_repeat(target, batch), _repeat(drafts, batch), acceptance_rates=[0.0, 0.0, 0.0], **keywords)
    assert never.num_accepted.tolist() == [0] * batch
    assert never.num_emitted.tolist() == [1] * batch


def test_the_minimum_variance_schedule_of_a_length(run_verify):
    # L = 2.5 with K = 3 is [1, 0.5, 0]: every step accepts 1 or 2 drafts, never 0 or 3
    batch = 64
    target, drafts = _case(seed=44)
    rates = acceptance.length_to_rates(2.5, K)
    result = run_verify(
        _repeat(target, batch),
        _repeat(drafts, batch),
        mode="synthetic",
        acceptance_rates=rates,
        seeds=torch.arange(batch),
    )
    assert set(result.num_accepted.tolist()) == {1, 2}


def test_an_invalid_draft_id_is_never_accepted(run_verify):
    batch = 16
    target, drafts = _case(seed=45)
    bad = _repeat(drafts, batch)
    bad[:4, 0] = -1
    bad[4:8, 0] = V
    bad[8:12, 1] = 2**40
    result = run_verify(
        _repeat(target, batch), bad, mode="synthetic", acceptance_rates=[1.0, 1.0, 1.0], seeds=torch.arange(batch)
    )
    assert result.num_accepted.tolist() == [0] * 8 + [1] * 4 + [K] * 4


def test_accepted_rows_are_never_read(run_verify):
    # with rate 1 the draft rows are not looked at: NaN there changes nothing, the bonus row decides
    batch = 6
    target = torch.full((K + 1, V), NAN)
    target[K] = -math.inf
    target[K, 5] = 0.0
    drafts = torch.tensor([1, 2, 3])
    result = run_verify(
        _repeat(target, batch),
        _repeat(drafts, batch),
        mode="synthetic",
        acceptance_rates=[1.0, 1.0, 1.0],
        seeds=torch.arange(batch),
    )
    assert result.output_token_ids.tolist() == [[1, 2, 3, 5]] * batch
    # rejected at slot 0 of an all-NaN row: the row is needed, invalid, so nothing is emitted
    stopped = run_verify(
        _repeat(target, batch),
        _repeat(drafts, batch),
        mode="synthetic",
        acceptance_rates=[0.0, 0.0, 0.0],
        seeds=torch.arange(batch),
    )
    assert stopped.num_emitted.tolist() == [0] * batch


def test_synthetic_tokens_depend_only_on_seed_and_position(run_verify, backend):
    batch = 20 if backend == "torch" else 8
    generator = torch.Generator().manual_seed(46)
    target = torch.randn(batch, K + 1, 40, generator=generator)
    drafts = torch.randint(-1, 40, (batch, K), generator=generator)
    keywords = {
        "mode": "synthetic",
        "acceptance_rates": RATES,
        "seeds": torch.randint(0, 2**40, (batch,), generator=generator),
        "positions": torch.randint(0, 10**6, (batch,), generator=generator),
        "temperatures": torch.tensor([0.0, 1.0, 0.5, 2.0])[torch.randint(0, 4, (batch,), generator=generator)],
        "num_draft_tokens": torch.randint(0, K + 1, (batch,), generator=generator, dtype=torch.int32),
    }
    whole = run_verify(target, drafts, **keywords)
    order = torch.flip(torch.arange(batch), dims=[0])
    flipped = run_verify(
        target[order], drafts[order], **{k: (v[order] if torch.is_tensor(v) else v) for k, v in keywords.items()}
    )
    assert torch.equal(flipped.output_token_ids, whole.output_token_ids[order])
    if backend != "torch":
        expected = run_verify(target, drafts, backend="torch", **keywords)
        assert same_result(whole, expected)
