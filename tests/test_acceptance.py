"""Acceptance math: validation, the minimum-variance schedule, closed forms, the throughput model.

Exact tier: hand-worked values. Statistical tier: the closed forms against a numpy Monte Carlo
that draws each position's decision independently from the conditional rates (not through
specbench's kernels), at a 5-sigma tolerance with a fixed seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench import acceptance
from specbench.errors import SpecbenchError

# ---- validation (the profile rules of specbench/acceptance.py) ---------------------------------------------------------------

def test_validate_rates_returns_floats():
    assert acceptance.validate_rates([1, 0.5, 0], 3) == [1.0, 0.5, 0.0]
    assert acceptance.validate_rates((0.7, 0.7), 2) == [0.7, 0.7]  # equal neighbours are allowed


@pytest.mark.parametrize(
    ("rates", "k", "needle"),
    [
        ([0.9, 0.7], 3, "(3), got 2: [0.9, 0.7]"),
        ([1.2, 0.5], 2, "got 1.2"),
        ([0.5, -0.1], 2, "got -0.1"),
        ([float("nan"), 0.5], 2, "got nan"),
        ([float("inf")], 1, "got inf"),
        ([0.5, 0.7], 2, "non-increasing, got [0.5, 0.7]"),
        (["high"], 1, "'high'"),
        ([True], 1, "True"),
        ("0.9", 1, "'0.9'"),
    ],
)
def test_validate_rates_rejects(rates, k, needle):
    with pytest.raises(SpecbenchError, match="acceptance rates") as error:
        acceptance.validate_rates(rates, k)
    assert needle in str(error.value)


@pytest.mark.parametrize(("k", "needle"), [(0, "at least 1, got 0"), (-2, "got -2"), (1.5, "got 1.5"), (True, "True")])
def test_num_spec_tokens_must_be_a_positive_whole_number(k, needle):
    with pytest.raises(SpecbenchError, match="speculative tokens") as error:
        acceptance.check_num_spec_tokens(k)
    assert needle in str(error.value)


def test_resolve_rates_needs_exactly_one_profile():
    with pytest.raises(SpecbenchError, match="exactly one .* got acceptance rates and mean acceptance length"):
        acceptance.resolve_rates(3, [0.9, 0.7, 0.5], 2.5)
    with pytest.raises(SpecbenchError, match="exactly one .* got mean acceptance length and alpha"):
        acceptance.resolve_rates(3, mean_acceptance_length=2.5, alpha=0.5)
    with pytest.raises(SpecbenchError, match="exactly one .* got none"):
        acceptance.resolve_rates(3)
    assert acceptance.resolve_rates(3, alpha=0.5) == [0.5, 0.25, 0.125]
    assert acceptance.resolve_rates(2, mean_acceptance_length=1.75, schedule="geometric") == pytest.approx([0.5, 0.25])
    assert acceptance.resolve_rates(3, mean_acceptance_length=2.5) == [1.0, 0.5, 0.0]
    assert acceptance.resolve_rates(2, rates=[0.8, 0.4]) == [0.8, 0.4]


# ---- the minimum-variance schedule -------------------------------------------------------------

@pytest.mark.parametrize(
    ("length", "k", "rates"),
    [
        (2.5, 3, [1.0, 0.5, 0.0]),  # the README's example
        (1.0, 3, [0.0, 0.0, 0.0]),
        (4.0, 3, [1.0, 1.0, 1.0]),
        (3.0, 3, [1.0, 1.0, 0.0]),
        (1.75, 1, [0.75]),
        (2.0, 1, [1.0]),
        (3.25, 6, [1.0, 1.0, 0.25, 0.0, 0.0, 0.0]),
    ],
)
def test_length_to_rates_hand_values(length, k, rates):
    got = acceptance.length_to_rates(length, k)
    assert got == pytest.approx(rates, abs=1e-12)
    assert acceptance.mean_acceptance_length(got) == pytest.approx(length, abs=1e-12)


@pytest.mark.parametrize(
    ("length", "k", "needle"),
    [(5, 3, "[1, 4] for K=3, got 5"), (0.5, 2, "got 0.5"), (float("nan"), 3, "got nan"), ("long", 3, "'long'")],
)
def test_length_to_rates_rejects(length, k, needle):
    with pytest.raises(SpecbenchError, match="mean acceptance length") as error:
        acceptance.length_to_rates(length, k)
    assert needle in str(error.value)


def test_schedule_has_the_smallest_variance_for_its_mean():
    generator = np.random.default_rng(7)
    for _ in range(300):
        k = int(generator.integers(1, 8))
        rates = sorted(generator.uniform(0, 1, size=k).tolist(), reverse=True)
        schedule = acceptance.length_to_rates(acceptance.mean_acceptance_length(rates), k)
        assert acceptance.accepted_variance(schedule) <= acceptance.accepted_variance(rates) + 1e-12


# ---- the geometric schedule -------------------------------------------------------------------

@pytest.mark.parametrize(
    ("length", "k", "alpha"),
    [
        (1.75, 1, 0.75),  # 1 + a
        (1.75, 2, 0.5),  # 1 + a + a^2 = 1.75
        (1.875, 3, 0.5),
        (1 + 0.9 + 0.81 + 0.729 + 0.6561, 4, 0.9),
        (1.0, 3, 0.0),
        (4.0, 3, 1.0),
    ],
)
def test_length_to_alpha_hand_values(length, k, alpha):
    assert acceptance.length_to_alpha(length, k) == pytest.approx(alpha, abs=1e-12)
    rates = acceptance.length_to_rates(length, k, "geometric")
    assert rates == pytest.approx([alpha**i for i in range(1, k + 1)], abs=1e-12)
    assert acceptance.mean_acceptance_length(rates) == pytest.approx(length, abs=1e-12)


@pytest.mark.parametrize(("length", "k"), [(2.5, 3), (3.0, 3), (2.6, 3), (5.5, 7), (1.01, 1)])
def test_geometric_rates_have_the_length_and_leviathan_s_closed_form(length, k):
    # L = (1 - a^(K+1)) / (1 - a) for i.i.d. acceptance a (Leviathan et al. 2022, eq. 1)
    alpha = acceptance.length_to_alpha(length, k)
    assert (1 - alpha ** (k + 1)) / (1 - alpha) == pytest.approx(length, rel=1e-12)
    rates = acceptance.length_to_rates(length, k, "geometric")
    assert acceptance.conditional_rates(rates) == pytest.approx([alpha] * k, rel=1e-12)  # every c_i is alpha
    # with K >= 2 the schedules differ: geometric spreads A more (min-variance has none at L = 3)
    minimum = acceptance.accepted_variance(acceptance.length_to_rates(length, k))
    if k >= 2:
        assert acceptance.accepted_variance(rates) > minimum + 0.05
    else:
        assert acceptance.accepted_variance(rates) == pytest.approx(minimum)  # K = 1: one rate, one schedule


def test_schedule_and_alpha_errors():
    with pytest.raises(SpecbenchError, match="schedule must be one of min-variance, geometric, got 'uniform'"):
        acceptance.length_to_rates(2.5, 3, "uniform")
    with pytest.raises(SpecbenchError, match=r"alpha .* must lie in \[0, 1\], got 1.5"):
        acceptance.resolve_rates(3, alpha=1.5)
    with pytest.raises(SpecbenchError, match=r"alpha .* must be a number, got 'x'"):
        acceptance.iid_rates("x", 3)
    with pytest.raises(SpecbenchError, match=r"\[1, 4\] for K=3, got 4.5"):
        acceptance.length_to_alpha(4.5, 3)


# ---- conditional rates and closed forms ------------------------------------------------------

@pytest.mark.parametrize(
    ("rates", "conditional"),
    [
        ([0.9, 0.7, 0.5], [0.9, 7 / 9, 5 / 7]),
        ([0.5, 0.0, 0.0], [0.5, 0.0, 0.0]),  # zeros propagate
        ([0.0, 0.0], [0.0, 0.0]),
        ([1.0, 1.0], [1.0, 1.0]),
        ([0.6, 0.6, 0.3], [0.6, 1.0, 0.5]),
    ],
)
def test_conditional_rates(rates, conditional):
    assert acceptance.conditional_rates(rates) == pytest.approx(conditional, abs=1e-15)


def test_closed_forms_hand_worked():
    # p = [0.9, 0.7, 0.5]: P(A=j) = p_j - p_{j+1}; E[A] = 2.1; E[A^2] = 0.2 + 0.8 + 4.5 = 5.5
    rates = [0.9, 0.7, 0.5]
    assert acceptance.accepted_distribution(rates) == pytest.approx([0.1, 0.2, 0.2, 0.5], abs=1e-15)
    assert acceptance.mean_acceptance_length(rates) == pytest.approx(3.1, abs=1e-15)
    assert acceptance.accepted_variance(rates) == pytest.approx(5.5 - 2.1**2, abs=1e-12)
    # the schedule [1, 0.5, 0]: A is 1 or 2 with probability 1/2 each
    assert acceptance.accepted_distribution([1.0, 0.5, 0.0]) == [0.0, 0.5, 0.5, 0.0]
    assert acceptance.accepted_variance([1.0, 0.5, 0.0]) == pytest.approx(0.25, abs=1e-15)
    assert acceptance.accepted_variance([1.0, 1.0, 0.0]) == 0.0


def test_closed_forms_against_monte_carlo():
    rates = [0.7296, 0.5208, 0.3545, 0.1]
    k, n = len(rates), 400_000
    conditional = np.array(acceptance.conditional_rates(rates))
    generator = np.random.default_rng(12345)
    accepted_each = generator.uniform(size=(n, k)) < conditional[None, :]
    counts = np.cumprod(accepted_each, axis=1).sum(axis=1)  # A = the accepted prefix
    distribution = np.bincount(counts, minlength=k + 1) / n
    expected = np.array(acceptance.accepted_distribution(rates))
    assert np.all(np.abs(distribution - expected) <= 5 * np.sqrt(expected * (1 - expected) / n))
    variance = acceptance.accepted_variance(rates)
    assert abs(1 + counts.mean() - acceptance.mean_acceptance_length(rates)) <= 5 * math.sqrt(variance / n)
    # the sample variance of A has standard error ~ sqrt((m4 - var^2) / n) <= K^2 / sqrt(n)
    assert abs(counts.var() - variance) <= 5 * k**2 / math.sqrt(n)
    for i in range(1, k + 1):
        measured = (counts >= i).mean()
        assert abs(measured - rates[i - 1]) <= 5 * math.sqrt(rates[i - 1] * (1 - rates[i - 1]) / n)


# ---- the throughput model ----------------------------------------------------------------------

def test_expected_speedup_hand_worked():
    assert acceptance.expected_speedup(2.6, 3, 0.05) == pytest.approx(2.6 / 1.15, rel=1e-15)
    assert acceptance.expected_speedup(1.0, 4, 0.0) == 1.0
    with pytest.raises(SpecbenchError, match="got -0.1"):
        acceptance.expected_speedup(2.0, 3, -0.1)
    with pytest.raises(SpecbenchError, match="got nan"):
        acceptance.expected_speedup(2.0, 3, float("nan"))
    with pytest.raises(SpecbenchError, match="got inf"):
        acceptance.expected_speedup(2.0, 3, float("inf"))


@pytest.mark.parametrize(("a", "k", "c"), [(0.8, 4, 0.1), (0.6, 1, 0.05), (0.95, 7, 0.02), (0.3, 3, 0.5)])
def test_speedup_matches_leviathan_for_iid_rates(a, k, c):
    # Leviathan et al. 2022, eq. 1 and thm 3.8: S = (1 - a^(K+1)) / ((1 - a)(1 + K c))
    leviathan = (1 - a ** (k + 1)) / ((1 - a) * (1 + k * c))
    length = acceptance.mean_acceptance_length(acceptance.iid_rates(a, k))
    assert acceptance.expected_speedup(length, k, c) == pytest.approx(leviathan, rel=1e-12)


def test_iid_rates_and_errors():
    assert acceptance.iid_rates(0.5, 3) == [0.5, 0.25, 0.125]
    with pytest.raises(SpecbenchError, match="got 1.5"):
        acceptance.iid_rates(1.5, 3)


@pytest.mark.parametrize(
    ("a", "c", "best_k", "speedup"),
    [
        # S(K) = (1 - 0.8^(K+1)) / (0.2 (1 + 0.05 K)): 3.0823 at K=7, 3.0921 at K=8, 3.0780 at K=9
        (0.8, 0.05, 8, (1 - 0.8**9) / (0.2 * 1.4)),
        # S(1) = 1.5 / 1.2 = 1.25 = S(2) = 1.75 / 1.4: a tie goes to the smaller K
        (0.5, 0.2, 1, 1.25),
        (0.0, 0.1, 1, 1 / 1.1),  # nothing is ever accepted: one draft costs least
        (1.0, 0.01, 16, 17 / 1.16),  # everything is accepted: the most drafts allowed
    ],
)
def test_best_num_spec_tokens_hand_worked(a, c, best_k, speedup):
    k, s = acceptance.best_num_spec_tokens(a, c, max_num_spec_tokens=16)
    assert k == best_k
    assert s == pytest.approx(speedup, rel=1e-12)
