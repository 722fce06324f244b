"""The races of ``specbench/kernels/rows.py`` on rows of many chunks: the screened race picks the
token the reference race picks, and the screen skips most chunks.

The verify-level tests read rows in a few chunks each (the interpreter's blocks are large next to
their vocabularies), so the screen rarely has anything to skip there. Here one program races a
whole row of a few thousand tokens in 16-token chunks, under the interpreter, where the chunks
that are raced can be counted (each calls ``neg_log_of_uniform`` once).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from specbench import reference, rng

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("counts raced chunks through the interpreter", allow_module_level=True)

import triton  # after the interpreter is chosen
import triton.language as tl

from specbench.kernels import rows

BLOCK = 16
VOCAB = 3001  # 188 chunks, the last one short


@triton.jit
def _race_kernel(out_ptr, t_ptr, d_ptr, V, key, exclude, inv_temperature, m, s, md, sd,
                 LOGITS: tl.constexpr, TARGET_PROBS: tl.constexpr, KIND: tl.constexpr, SCREEN: tl.constexpr,
                 BLOCK: tl.constexpr):
    if LOGITS:
        _z, _g, idx = rows.race_logits_slice(t_ptr, 0, V, inv_temperature, key, exclude, SCREEN, BLOCK)
    else:
        _z, _g, idx = rows.race_weights_slice(t_ptr, d_ptr, 0, V, inv_temperature, key, exclude, m, s, md, sd,
                                              TARGET_PROBS, KIND, SCREEN, BLOCK)
    tl.store(out_ptr, idx)


@pytest.fixture
def raced_chunks(monkeypatch):
    """Counts the chunks a race computes E for (the ones the screen lets through)."""
    calls = []
    original = rows.neg_log_of_uniform

    def counting(u):
        calls.append(1)
        return original(u)

    monkeypatch.setattr(rows, "neg_log_of_uniform", counting)
    return calls


def _race(target, draft=None, *, logits=False, target_probs=True, kind=0, exclude=-1, seed=0, screen=True, s=1.0):
    """(winner, stream key) of one race over the whole row; -1 when nothing has mass."""
    key = int(rng.stream_key(rng.seed_key(torch.tensor([seed])), torch.tensor([5]), rng.SAMPLE)[0])
    out = torch.full((1,), -7, dtype=torch.int32)
    draft = target if draft is None else draft
    with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):  # as the launcher does
        _race_kernel[(1,)](out, target, draft, target.numel(), key, exclude, 1.0, 0.0, s, 0.0, 1.0, LOGITS=logits,
                           TARGET_PROBS=target_probs, KIND=kind, SCREEN=screen, BLOCK=BLOCK)
    return int(out[0]), key


def _reference_winner(weights: torch.Tensor, key: int) -> int:
    winner = int(reference._race(weights[None, :], torch.tensor([key], dtype=torch.int64))[0])
    return winner if bool(weights[winner] > 0) else -1


def _logits(seed: int, scale: float) -> torch.Tensor:
    return torch.randn(VOCAB, generator=torch.Generator().manual_seed(seed)) * scale


@pytest.mark.parametrize("scale", [0.5, 3.0, 8.0])
@pytest.mark.parametrize("seed", range(2))  # 188 chunks a row: each seed costs the interpreter most of a second
def test_the_probability_race_picks_the_reference_token_and_skips_most_chunks(raced_chunks, seed, scale):
    probs = torch.softmax(_logits(seed, scale), dim=0)
    token, key = _race(probs, seed=seed)
    assert token == _reference_winner(probs, key)
    chunks = -(-VOCAB // BLOCK)
    assert 1 <= len(raced_chunks) < chunks // 4, f"{len(raced_chunks)} of {chunks} chunks raced"


@pytest.mark.parametrize("scale", [0.5, 3.0, 8.0])
@pytest.mark.parametrize("seed", range(2))
def test_the_logit_race_picks_the_reference_token_and_skips_most_chunks(raced_chunks, seed, scale):
    z = _logits(seed, scale) + 40.0  # a shift changes nothing but the scores' magnitude
    token, key = _race(z, logits=True, seed=seed)
    assert token == _reference_winner(torch.softmax(z.double(), dim=0).float(), key)
    chunks = -(-VOCAB // BLOCK)
    assert 1 <= len(raced_chunks) < chunks // 4, f"{len(raced_chunks)} of {chunks} chunks raced"


@pytest.mark.parametrize("seed", range(4))
def test_the_residual_race_picks_the_reference_token(raced_chunks, seed):
    p = torch.softmax(_logits(seed, 2.0), dim=0)
    q = torch.softmax(_logits(seed + 100, 2.0), dim=0)
    token, key = _race(p, q, kind=2, seed=seed)
    assert token == _reference_winner((p - q).clamp_min(0.0), key)
    assert len(raced_chunks) < -(-VOCAB // BLOCK) // 2


def test_a_residual_without_mass_has_no_winner(raced_chunks):
    p = torch.softmax(_logits(7, 2.0), dim=0)
    token, _key = _race(p, p.clone(), kind=2)
    assert token == -1


@pytest.mark.parametrize("logits", [False, True])
def test_unscreened_races_pick_the_same_tokens_and_race_every_chunk(raced_chunks, logits):
    row = _logits(9, 3.0) if logits else torch.softmax(_logits(9, 3.0), dim=0)
    screened, _key = _race(row, logits=logits)
    raced = len(raced_chunks)
    unscreened, _key = _race(row, logits=logits, screen=False)
    assert screened == unscreened
    assert len(raced_chunks) - raced == -(-VOCAB // BLOCK) > raced


def test_an_excluded_token_never_wins_even_holding_almost_all_the_mass(raced_chunks):
    probs = torch.full((VOCAB,), 1e-6)
    probs[1234] = 0.99
    token, key = _race(probs, exclude=1234)
    expected = probs.clone()
    expected[1234] = 0.0
    assert token == _reference_winner(expected, key)
    z = torch.full((VOCAB,), -5.0)
    z[1234] = 30.0
    token, key = _race(z, logits=True, exclude=1234)
    assert token == _reference_winner(torch.softmax(torch.where(torch.arange(VOCAB) == 1234, -torch.inf, z), 0), key)


def test_huge_infinite_and_nan_logits_race_as_the_contract_reads_them(raced_chunks):
    # +inf is the largest float32 (several share the mass), NaN has none, -inf has none
    z = _logits(3, 1.0)
    z[[10, 2000, 2900]] = torch.inf
    z[[11, 500]] = torch.nan
    z[12:400] = -torch.inf
    token, key = _race(z, logits=True)
    weights = torch.zeros(VOCAB)
    weights[[10, 2000, 2900]] = 1.0
    assert token == _reference_winner(weights, key)
    # scores near the float32 maximum: the screen's margin scales with them
    big = _logits(4, 1.0) * 1e28 + 1e30
    token, key = _race(big, logits=True)
    assert token == int(torch.argmax(big))  # gaps of ~1e25 between neighbours: the top logit wins
    level = torch.full((VOCAB,), 1e30)  # all equal: a uniform draw
    token, key = _race(level, logits=True)
    assert token == _reference_winner(torch.ones(VOCAB), key)


def test_weights_too_large_to_bound_turn_the_screen_off_not_the_race_wrong(raced_chunks):
    # logits' statistics with a sum far below the row's (no launcher passes such, but the race takes any) make
    # w = exp(z - m) / s near 1e37 and w / E beyond what the screen bounds: it steps aside, every chunk is raced
    z = _logits(5, 1.0)
    token, key = _race(z, target_probs=False, s=1e-35)
    assert token == _reference_winner(torch.exp(z), key)
    assert len(raced_chunks) == -(-VOCAB // BLOCK)


def test_negative_and_nan_draft_probabilities_race_as_zero(raced_chunks):
    # the contract reads them as 0 (and above 1 as 1): a draft probability of -1e37 or -inf no longer makes its
    # token's weight huge
    p = torch.softmax(_logits(5, 1.0), dim=0)
    q = torch.softmax(_logits(6, 1.0), dim=0)
    hostile = q.clone()
    hostile[[100, 2500]] = torch.tensor([-1e37, -torch.inf])
    hostile[[7, 8]] = torch.tensor([torch.nan, 3.0])
    cleaned = torch.where(hostile > 0, hostile.clamp(max=1.0), 0.0)
    token, key = _race(p, hostile, kind=2)
    assert token == _reference_winner((p - cleaned).clamp_min(0.0), key)
