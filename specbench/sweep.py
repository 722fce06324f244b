"""Synthetic-acceptance sweeps: simulate each (profile, K) case, measure it, set it beside the theory.

For every case the synthetic kernel (``verify.simulate_acceptance``) runs ``N`` steps; their
drafts-accepted counts ``A`` are binned into a histogram ``h[0..K]``, which holds everything
measured (notation of the README's "Notation" table):

- unconditional rate ``p_i``: ``#(A >= i)`` successes in ``N`` Bernoulli trials;
- conditional rate ``c_i``: ``#(A >= i)`` successes in ``#(A >= i-1)`` trials (decisions at
  different positions are independent, so given the trials this is binomial too);
- ``P(A = j)``: ``h[j]`` successes in ``N`` trials;
- mean acceptance length ``L = 1 + mean(A)``, with a CLT interval ``+- z s / sqrt(N)``, ``s`` the
  larger of the sample and the closed-form standard deviation of ``A`` (a sample with every step
  in one bin has none).

Each binomial quantity gets a 95% Wilson interval and an exact binomial test of its closed form.
The mean is tested through the sum of the ``A``: exactly (the law of a sum of ``N`` i.i.d. counts)
where accepted drafts or rejected slots are few and the sum is lopsided, and by a z test with the
closed-form ``Var(A)`` elsewhere. Verdicts:

- ``ok``: the closed form lies inside the measured 95% interval (for the mean: its p-value is at
  least 0.05);
- ``outside 95%``: it does not, but no more than chance explains (about 1 check in 20 lands here
  when everything is right, so this is reported, not alarmed);
- ``BUG``: its p-value is below ``0.001 / m``, ``m`` the number of distinct checks in the whole
  sweep (``3K`` per case, see ``num_checks``; Bonferroni): if the simulation is right, the chance
  that *any* check of a sweep says ``BUG`` is at most 0.1%, so a ``BUG`` means the simulation is
  wrong, not unlucky. Degenerate closed forms (0 or 1, and a ``Var(A)`` of 0) must match exactly.

Randomness: each case has its own seed, ``case_seed(seed, profile)``: the run's seed mixed with a
key of the profile's ``K`` and rates (``rng.request_seed(seed, profile_key(profile))``), stored in
the record as ``case_seed``. Request ``r`` of the case uses ``rng.request_seed(case_seed, r)``, so
``simulate_acceptance(record["configured_rates"], N, seed=record["case_seed"])`` gives back the
case's histogram, a case gives the same result whatever else runs with it, and two cases (or two
run seeds) share no stream. Cases with the same ``K`` and rates are the same experiment and get
the same seed. A profile with per-request spread (a beta-geometric model profile) passes its
``request_rates`` to the simulation and mixes them into its key too (keys of every other profile are
unchanged); its record holds ``model``, ``model_parameters`` and ``spread_components``, from which
``profile_models.beta_quantile_rates`` gives the ``request_rates`` back.

Besides profiles a sweep runs tree cases (``specbench/tree_sweep.py``: the synthetic tree rule) and natural
cases (``specbench/natural_sweep.py``: drafts drawn from a draft model, through ``verify`` with a verification
method, checked against the exact rates of the inputs drawn), with the same families and verdicts.

Records are plain dicts (``kind = "sweep"``) ready for ``results.ResultsWriter``; charts and the
long-form table read only them.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats

from specbench import acceptance, results, rng, scenarios
from specbench.acceptance import DEFAULT_COST_RATIO
from specbench.errors import SpecbenchError
from specbench.machine import resolve_device
from specbench.scenarios import Profile
from specbench.verification import backend_module, resolve_backend, simulate_acceptance

CONFIDENCE = 0.95
_Z = float(stats.norm.ppf(0.5 + CONFIDENCE / 2))  # two-sided: 1.96
FAMILY_BUG_ALPHA = 1e-3
# N: the 95% half-width of the mean length is z sigma / sqrt(N), and Var(A) <= K^2 / 4 for any A
# in [0, K] (Popoviciu), so N >= (z K / (2 * 0.01))^2 = 9604 K^2 guarantees +-0.01 for every
# profile. 2,000,000 covers K <= 14 (larger K get the formula), gives per-position rate intervals
# of +-0.0007 at worst, and means 6M simulated draft positions per K=3 case.
TARGET_HALF_WIDTH = 0.01
MIN_DEFAULT_REQUESTS = 2_000_000
_CHUNK_POSITIONS = 1 << 24

Progress = Callable[[int], None]


def default_num_requests(num_spec_tokens: int) -> int:
    """Steps that give a 95% half-width of at most 0.01 on the mean length for any profile with ``K``."""
    worst = math.ceil((_Z * num_spec_tokens / (2 * TARGET_HALF_WIDTH)) ** 2)
    return max(MIN_DEFAULT_REQUESTS, worst)


def resolve_sweep_backend(backend: str, device: str) -> str:
    """The concrete backend (``triton`` or ``torch``) for ``backend`` on ``device``, checked importable."""
    name = resolve_backend(backend, torch.device(device))
    try:
        backend_module(name)
    except ImportError as exc:
        raise SpecbenchError(f"the {name} backend cannot be loaded ({exc}); try --backend torch") from exc
    return name


def text_key(text: str) -> int:
    """A 62-bit key of a case's description (BLAKE2b): what makes its case seed its own."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 2


def keyed_seed(seed: int, text: str) -> int:
    """The seed of the case described by ``text`` in a sweep seeded ``seed``: ``rng.request_seed(seed, text_key)``."""
    return int(rng.request_seed(rng.check_seed(seed), text_key(text)))


def profile_key(profile: Profile) -> int:
    """A 62-bit key of a profile's ``K`` and rates (exact float bits): what makes its case seed its own."""
    text = f"K={profile.num_spec_tokens} rates=" + ",".join(float(r).hex() for r in profile.rates)
    if profile.request_rates is not None:  # per-request spread: another experiment (keys without it unchanged)
        text += " spread=" + ",".join(float(r).hex() for r in profile.request_rates)
    return text_key(text)


def case_seed(seed: int, profile: Profile) -> int:
    """The seed of one case of a sweep seeded ``seed``: ``rng.request_seed(seed, profile_key(profile))``."""
    return int(rng.request_seed(rng.check_seed(seed), profile_key(profile)))


def speedup_fields(record: dict[str, Any], num_spec_tokens: int, cost_ratio: float) -> dict[str, Any]:
    """A measured record's cost ratio and its expected and measured speed-ups over plain decoding, a step charged
    for the ``num_spec_tokens`` tokens it verifies (a tree's N)."""
    return {"cost_ratio": cost_ratio,
            "expected_speedup": acceptance.expected_speedup(record["expected_acceptance_length"], num_spec_tokens,
                                                            cost_ratio),
            "measured_speedup": acceptance.expected_speedup(record["mean_acceptance_length"], num_spec_tokens,
                                                            cost_ratio)}


def throughput_fields(positions: int, seconds: float) -> dict[str, Any]:
    """A case's simulated draft positions, the seconds they took and their rate."""
    return {"simulated_positions": positions, "simulation_seconds": seconds,
            "positions_per_second": positions / seconds if seconds > 0 else None}


def check_num_spec_tokens(profiles: Sequence[Profile]) -> None:
    """Refuse a case with ``K`` above ``MAX_NUM_SPEC_TOKENS``, the limit of every profile (one sentence naming it);
    ``make_profile`` refuses one already, this catches a ``Profile`` built by hand. Tree cases
    (``tree_sweep.TreeCase``) have their own limits, checked when their shape is made."""
    for profile in profiles:
        if not isinstance(profile, Profile):
            continue
        try:
            scenarios.check_num_spec_tokens(profile.num_spec_tokens)
        except SpecbenchError as exc:
            raise SpecbenchError(f"{exc} (profile {profile.name!r})") from None


def num_checks(profile: Profile) -> int:
    """Distinct checks of one case: ``p_1..p_K``, ``c_2..c_K``, ``P(A=0..K-1)`` and the mean: ``3K``.

    ``c_1`` is ``p_1`` and ``P(A=K)`` is ``p_K`` (the same counts): shown, but counted once. A tree
    case: ``tree_sweep.num_checks``.
    """
    if isinstance(profile, Profile):
        return 3 * profile.num_spec_tokens
    from specbench import natural_sweep, tree_sweep

    if isinstance(profile, natural_sweep.NaturalCase):
        return natural_sweep.num_checks(profile)
    return tree_sweep.num_checks(profile)


def case_num_requests(profile: Profile) -> int:
    """A case's default steps: ``default_num_requests`` of the most drafts a step can accept (a tree's depth); a
    natural case's ``natural_sweep.DEFAULT_NUM_REQUESTS`` (each step verifies whole rows)."""
    if isinstance(profile, Profile):
        return default_num_requests(profile.num_spec_tokens)
    from specbench import natural_sweep

    if isinstance(profile, natural_sweep.NaturalCase):
        return natural_sweep.DEFAULT_NUM_REQUESTS
    return default_num_requests(profile.shape.depth)


def simulate_histogram(
    profile: Profile,
    num_requests: int,
    *,
    seed: int,
    backend: str,
    device: str,
    on_progress: Progress | None = None,
) -> tuple[list[int], float]:
    """Histogram ``h[0..K]`` of drafts accepted over ``num_requests`` steps, and the simulation seconds.

    ``seed`` is the case's own seed (``case_seed``): request ``r`` uses ``rng.request_seed(seed, r)``.
    Simulates in chunks of ~16M draft positions (``first_request`` keeps the counts identical to
    one call); the seconds cover only the synchronized simulation, after one untimed call of a
    single step (Triton compiles there). ``on_progress(positions)`` is called after every chunk.
    """
    k = profile.num_spec_tokens
    rates = list(profile.rates)
    spread = None if profile.request_rates is None else list(profile.request_rates)
    # the kernel does not specialize its integer arguments, so this one compile serves every chunk
    simulate_acceptance(rates, 1, seed=seed, backend=backend, device=device, request_rates=spread)
    chunk = max(1, _CHUNK_POSITIONS // k)
    histogram = torch.zeros(k + 1, dtype=torch.int64, device=device)
    seconds = 0.0
    for start in range(0, num_requests, chunk):
        size = min(chunk, num_requests - start)
        _synchronize(device)  # the previous chunk's histogram work stays out of this chunk's time
        began = time.perf_counter()
        counts = simulate_acceptance(rates, size, seed=seed, first_request=start, backend=backend, device=device,
                                     request_rates=spread)
        _synchronize(device)
        seconds += time.perf_counter() - began
        histogram += torch.bincount(counts.to(torch.int64), minlength=k + 1)
        if on_progress is not None:
            on_progress(size * k)
    return histogram.tolist(), seconds


def _synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _binomial_check(successes: int, trials: int, expected: float, bug_p: float) -> tuple:
    """(measured, ci_low, ci_high, p_value, verdict) of ``successes`` out of ``trials`` against ``expected``."""
    if trials == 0:
        return None, None, None, None, "n/a"
    measured = successes / trials
    test = stats.binomtest(successes, trials, min(max(expected, 0.0), 1.0))
    interval = test.proportion_ci(CONFIDENCE, method="wilson")
    low = 0.0 if successes == 0 else float(interval.low)
    high = 1.0 if successes == trials else float(interval.high)
    p_value = float(test.pvalue)
    if expected in (0.0, 1.0):  # degenerate: the kernel must match exactly
        verdict = "ok" if successes == expected * trials else "BUG"
    else:
        verdict = "BUG" if p_value < bug_p else ("ok" if low <= expected <= high else "outside 95%")
    return measured, low, high, p_value, verdict


# Largest count on the scarce side (accepted drafts, or rejected slots K - A) whose sum is tested
# exactly; above it the sum is close enough to normal (skewness under 1/sqrt(2000)).
EXACT_SUM_LIMIT = 4000


def _sum_p_value(observed: int, total: int, distribution: Sequence[float]) -> float:
    """Two-sided p-value of ``S = A_1 + ... + A_N = observed``, the ``A_n`` i.i.d. with ``P(A = j)``.

    With few accepted drafts (or few rejected slots) ``S`` is lopsided and the normal
    approximation overstates its tails by orders of magnitude, so there ``S``'s law is computed
    exactly: the ``N``-th power of ``sum_j P(A = j) x^j``, truncated at a degree past which the
    tail is negligible. Elsewhere the normal approximation with the closed-form variance.
    """
    k = len(distribution) - 1
    probabilities = [max(p, 0.0) for p in distribution]
    mean = total * sum(j * p for j, p in enumerate(probabilities))
    variance = total * (sum(j * j * p for j, p in enumerate(probabilities)) - (mean / total) ** 2)
    if mean > total * k / 2:  # count the scarce side: K - A
        probabilities, observed, mean = probabilities[::-1], total * k - observed, total * k - mean
    sd = math.sqrt(max(variance, 0.0))
    degree = int(max(mean + 12 * sd + 50, observed + 1))
    if degree > EXACT_SUM_LIMIT:
        return float(2 * stats.norm.sf(abs(observed - mean) / sd)) if sd > 0 else float(observed == round(mean))
    power = np.zeros(degree + 1)
    power[0] = 1.0
    base = np.asarray(probabilities, dtype=np.float64)[: degree + 1]
    exponent = total
    while exponent:  # exponentiation by squaring; coefficients up to `degree` are exact under truncation
        if exponent & 1:
            power = np.convolve(power, base)[: degree + 1]
        exponent >>= 1
        if exponent:
            base = np.convolve(base, base)[: degree + 1]
    at_most = float(power[: observed + 1].sum())
    at_least = float(1.0 - power[:observed].sum())
    return min(1.0, 2 * min(at_most, at_least))


def measure(histogram: Sequence[int], rates: Sequence[float], *, bug_p: float) -> dict[str, Any]:
    """Measured statistics of a histogram ``h[0..K]``, each beside its closed form, with verdicts.

    Returns record fields: for each family ``rates``, ``conditional_rates`` and
    ``accepted_distribution`` the lists ``measured_<family>``, ``measured_<family>_ci_low``,
    ``measured_<family>_ci_high``, ``<family>_p_values`` and ``<family>_verdicts`` (indexed by
    position ``i = 1..K`` for rates, by ``j = 0..K`` for the distribution; ``None`` and ``n/a``
    where no trial reached the position); the mean length with its interval, p-value and verdict;
    both variances of ``A``; the check counts and the case's ``verdict``.
    """
    k = len(rates)
    if len(histogram) != k + 1:
        raise SpecbenchError(f"histogram must have K + 1 = {k + 1} bins, got {len(histogram)}")
    total = int(sum(histogram))
    at_least = [int(sum(histogram[i:])) for i in range(k + 1)]  # at_least[i] = #(A >= i)
    conditional = acceptance.conditional_rates(rates)
    distribution = acceptance.accepted_distribution(rates)
    record: dict[str, Any] = {}

    def family(name: str, checks: list[tuple]) -> None:
        keys = (f"measured_{name}", f"measured_{name}_ci_low", f"measured_{name}_ci_high",
                f"{name}_p_values", f"{name}_verdicts")
        for column, key in enumerate(keys):
            record[key] = [check[column] for check in checks]

    family("rates", [_binomial_check(at_least[i], total, rates[i - 1], bug_p) for i in range(1, k + 1)])
    family("conditional_rates", [
        _binomial_check(at_least[i], at_least[i - 1], conditional[i - 1], bug_p) for i in range(1, k + 1)
    ])
    family("accepted_distribution", [
        _binomial_check(int(histogram[j]), total, distribution[j], bug_p) for j in range(k + 1)
    ])

    accepted = sum(j * int(h) for j, h in enumerate(histogram))
    mean_accepted = accepted / total
    second_moment = sum(j * j * int(h) for j, h in enumerate(histogram)) / total
    variance = max(second_moment - mean_accepted**2, 0.0)
    sample_variance = variance * total / (total - 1) if total > 1 else 0.0
    length = 1.0 + mean_accepted
    expected_length = acceptance.mean_acceptance_length(rates)
    expected_variance = max(acceptance.accepted_variance(rates), 0.0)
    # the closed-form variance is the floor: a sample where every step lands in one bin has none
    half_width = _Z * math.sqrt(max(sample_variance, expected_variance) / total)
    if expected_variance == 0.0:
        p_value = 1.0 if math.isclose(length, expected_length, abs_tol=1e-12) else 0.0
        verdict = "ok" if p_value == 1.0 else "BUG"
    else:
        p_value = _sum_p_value(accepted, total, distribution)
        verdict = "BUG" if p_value < bug_p else ("ok" if p_value >= 1 - CONFIDENCE else "outside 95%")

    # c_1 repeats p_1 and P(A=K) repeats p_K: count each measurement once
    verdicts = [*record["rates_verdicts"], *record["conditional_rates_verdicts"][1:],
                *record["accepted_distribution_verdicts"][:-1], verdict]
    p_values = [*record["rates_p_values"], *record["conditional_rates_p_values"][1:],
                *record["accepted_distribution_p_values"][:-1], p_value]
    record.update(
        configured_conditional_rates=conditional,
        expected_accepted_distribution=distribution,
        accepted_histogram=[int(h) for h in histogram],
        expected_acceptance_length=expected_length,
        mean_acceptance_length=length,
        mean_acceptance_length_ci_low=length - half_width,
        mean_acceptance_length_ci_high=length + half_width,
        mean_acceptance_length_p_value=p_value,
        mean_acceptance_length_verdict=verdict,
        expected_accepted_variance=expected_variance,
        measured_accepted_variance=variance,
        num_checks=len(verdicts),
        num_outside_95=sum(v == "outside 95%" for v in verdicts),
        num_bugs=sum(v == "BUG" for v in verdicts),
        min_p_value=min(p for p in p_values if p is not None),
        bug_p_threshold=bug_p,
        verdict="BUG" if "BUG" in verdicts else "ok",
    )
    return record


def run_case(
    profile: Profile,
    *,
    num_requests: int,
    seed: int,
    backend: str,
    device: str,
    cost_ratio: float,
    bug_p: float,
    scenario: str | None = None,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Simulate one profile of a sweep seeded ``seed`` and return its record (see the module docstring)."""
    own_seed = case_seed(seed, profile)
    histogram, seconds = simulate_histogram(
        profile, num_requests, seed=own_seed, backend=backend, device=device, on_progress=on_progress
    )
    k = profile.num_spec_tokens
    positions = num_requests * k
    record: dict[str, Any] = {
        "kind": "sweep",
        "scenario": scenario,
        "profile": profile.name,
        "source": profile.source,
        "num_spec_tokens": k,
        "configured_acceptance_length": profile.acceptance_length,
        "schedule": profile.schedule,
        "configured_alpha": profile.alpha,
        "configured_rates": list(profile.rates),
        "num_requests": num_requests,
        "seed": seed,
        "case_seed": own_seed,
        "backend": backend,
        "device": device,
    }
    record.update(measure(histogram, profile.rates, bug_p=bug_p))
    record.update(
        **speedup_fields(record, k, cost_ratio),
        **_min_variance_comparison(profile, cost_ratio),
        **_model_fields(profile, histogram),
        **throughput_fields(positions, seconds),
    )
    return record


def _min_variance_comparison(profile: Profile, cost_ratio: float) -> dict[str, Any]:
    # the minimum-variance schedule of the profile's own mean and K: what a real profile is set beside
    # (the speed-up model L / (1 + K c) sees only the mean, so the two differ in Var(A), not in S)
    mean_length = acceptance.mean_acceptance_length(profile.rates)
    rates = acceptance.length_to_rates(mean_length, profile.num_spec_tokens, "min-variance")
    return {
        "min_variance_rates": rates,
        "min_variance_accepted_variance": acceptance.accepted_variance(rates),
        "min_variance_speedup": acceptance.expected_speedup(acceptance.mean_acceptance_length(rates),
                                                            profile.num_spec_tokens, cost_ratio),
    }


def _model_fields(profile: Profile, histogram: Sequence[int]) -> dict[str, Any]:
    """A model profile's parameters and, set beside it, the i.i.d. profile of the same ``K`` and ``L``.

    ``iid_same_length_p_value``: the likelihood-ratio (G) test of the measured histogram against that
    i.i.d. law of ``A`` (``K`` degrees of freedom): small where per-request spread (or depth decay)
    changes the law of ``A`` although ``L`` is the same. ``continuous_rates``: the beta-geometric
    model's own ``B(a + i, b) / B(a, b)``, beside the ``M``-point mixture that is simulated and checked.
    """
    if profile.model is None:
        return {}
    from specbench import profile_models

    k = profile.num_spec_tokens
    fields: dict[str, Any] = {"model": profile.model, "model_parameters": dict(zip(
        profile_models.MODELS[profile.model].parameters, profile.model_parameters))}
    if profile.request_rates is not None:
        continuous = profile_models.rates(profile.model, profile.model_parameters, k)
        fields.update(spread_components=len(profile.request_rates), continuous_rates=continuous,
                      spread_discretisation_gap=max(abs(a - b) for a, b in zip(continuous, profile.rates)))
    if profile.model == "iid":
        return fields
    alpha = acceptance.length_to_alpha(acceptance.mean_acceptance_length(profile.rates), k)
    law = acceptance.accepted_distribution(acceptance.iid_rates(alpha, k))
    total = int(sum(histogram))
    expected = np.asarray(law) * total
    observed = np.asarray(histogram, dtype=np.float64)
    if np.all(expected > 0):
        g = float(2.0 * np.sum(np.where(observed > 0, observed * np.log(np.where(observed > 0, observed, 1.0)
                                                                         / expected), 0.0)))
        p_value = float(stats.chi2.sf(g, k))
    else:
        p_value = None
    fields.update(iid_same_length_alpha=alpha, iid_same_length_distribution=law,
                  iid_same_length_variance=acceptance.accepted_variance(acceptance.iid_rates(alpha, k)),
                  iid_same_length_p_value=p_value)
    return fields


def run_sweep(
    profiles: Sequence[Profile],
    *,
    num_requests: int | None = None,
    seed: int = 0,
    backend: str = "auto",
    device: str = "auto",
    cost_ratio: float | None = None,
    scenario: str | None = None,
    on_record: Callable[[dict], None] | None = None,
    on_progress: Progress | None = None,
    on_case: Callable[[int, Profile], None] | None = None,
    skip_cases: Collection[int] = (),
) -> list[dict[str, Any]]:
    """Run every profile through the synthetic kernel and return one record per case run.

    Args:
        profiles: the cases, in order (``K`` at most ``MAX_NUM_SPEC_TOKENS``); a ``tree_sweep.TreeCase``
            runs a draft tree through the synthetic tree rule (``specbench.tree_sweep``), a
            ``natural_sweep.NaturalCase`` natural inputs through ``verify`` with its method
            (``specbench.natural_sweep``).
        num_requests: steps per case; default ``case_num_requests`` (+-0.01 on the mean length).
        seed: the run's seed; each case simulates under its own ``case_seed(seed, profile)`` (see the
            module docstring), so a case's result does not depend on which other cases run with it.
        backend: ``auto``, ``triton`` or ``torch``; device: ``auto``, ``cpu`` or ``cuda``.
        cost_ratio: draft/target cost for the speed-up; default the profile's, else ``DEFAULT_COST_RATIO``.
        scenario: a name stored in each record.
        on_record: called with each finished record (write it to disk there: a Ctrl-C keeps it).
        on_progress: called with the number of draft positions just simulated.
        on_case: called with (index, profile) before each case starts.
        skip_cases: indices of cases already done (a resumed run); the BUG threshold still counts them.
    """
    if not profiles:
        raise SpecbenchError("a sweep needs at least one profile, got none")
    check_num_spec_tokens(profiles)
    if num_requests is not None and (isinstance(num_requests, bool) or not isinstance(num_requests, int)
                                     or num_requests < 2):
        raise SpecbenchError(f"number of requests must be a whole number >= 2, got {num_requests!r}")
    seed = rng.check_seed(seed)
    if cost_ratio is not None:
        cost_ratio = acceptance.check_cost_ratio(cost_ratio)
    device = resolve_device(device)
    backend = resolve_sweep_backend(backend, device)
    bug_p = FAMILY_BUG_ALPHA / sum(num_checks(p) for p in profiles)
    from specbench import natural_sweep, tree_sweep

    records = []
    for index, profile in enumerate(profiles):
        if index in skip_cases:
            continue
        if on_case is not None:
            on_case(index, profile)
        common: dict[str, Any] = {"num_requests": num_requests or case_num_requests(profile), "seed": seed,
                                  "device": device, "cost_ratio": pick_cost_ratio(cost_ratio, profile),
                                  "bug_p": bug_p, "scenario": scenario, "on_progress": on_progress}
        if isinstance(profile, Profile):
            record = run_case(profile, backend=backend, **common)
        elif isinstance(profile, natural_sweep.NaturalCase):  # natural inputs through verify, method by method
            record = natural_sweep.run_natural_case(profile, backend=backend, **common)
        else:  # a tree case: the vectorised torch simulation of tree_sweep
            record = tree_sweep.run_tree_case(profile, **common)
        record["case"] = index
        records.append(record)
        if on_record is not None:
            on_record(record)
    return records


def pick_cost_ratio(override: float | None, profile: Profile) -> float:
    """The cost ratio a case uses: ``override``, else the profile's, else ``DEFAULT_COST_RATIO``."""
    if override is not None:
        return override
    return profile.cost_ratio if profile.cost_ratio is not None else DEFAULT_COST_RATIO


_FAMILIES = (
    ("p", "rates", "configured_rates", 1),
    ("c", "conditional_rates", "configured_conditional_rates", 1),
    ("P(A=j)", "accepted_distribution", "expected_accepted_distribution", 0),
)


def check_rows(record: dict) -> list[dict[str, Any]]:
    """The checks of one sweep record, one dict each, in table order.

    Keys: ``quantity`` (``p``, ``c``, ``P(A=j)``, ``P(node j)`` for a tree case's nodes, or ``L``), ``index``
    (``i`` or ``j``; None for ``L``), ``expected`` (the closed form), ``measured``, ``ci_low``, ``ci_high``, ``p_value``, ``verdict``.
    """
    rows = []
    for quantity, name, expected_key, first in _FAMILIES:
        for offset, expected in enumerate(record[expected_key]):
            rows.append({"quantity": quantity, "index": first + offset, "expected": expected,
                         "measured": record[f"measured_{name}"][offset],
                         "ci_low": record[f"measured_{name}_ci_low"][offset],
                         "ci_high": record[f"measured_{name}_ci_high"][offset],
                         "p_value": record[f"{name}_p_values"][offset],
                         "verdict": record[f"{name}_verdicts"][offset]})
    for node, expected in enumerate(record.get("expected_node_probabilities") or []):  # a tree case's nodes
        rows.append({"quantity": "P(node j)", "index": node, "expected": expected,
                     **{key: record[name][node] for key, name in (
                         ("measured", "measured_node_probabilities"), ("ci_low", "measured_node_probabilities_ci_low"),
                         ("ci_high", "measured_node_probabilities_ci_high"), ("p_value", "node_probabilities_p_values"),
                         ("verdict", "node_probabilities_verdicts"))}})
    rows.append({"quantity": "L", "index": None, "expected": record["expected_acceptance_length"],
                 "measured": record["mean_acceptance_length"],
                 "ci_low": record["mean_acceptance_length_ci_low"],
                 "ci_high": record["mean_acceptance_length_ci_high"],
                 "p_value": record["mean_acceptance_length_p_value"],
                 "verdict": record["mean_acceptance_length_verdict"]})
    return rows


def long_form(records: Sequence[dict]) -> pd.DataFrame:
    """One row per (case, checked quantity): ``check_rows`` of every sweep record, with its case."""
    frame = pd.DataFrame([
        {"case": record.get("case"), "profile": record["profile"], "num_spec_tokens": record["num_spec_tokens"], **row}
        for record in records if record.get("kind") == "sweep" for row in check_rows(record)
    ])
    if not frame.empty:
        frame["index"] = frame["index"].astype("Int64")  # blank for L, whole numbers otherwise
    return frame


LONG_CSV = results.RESULTS_LONG_CSV


def write_long_csv(records: Sequence[dict], directory: str | Path) -> Path:
    """Write ``long_form(records)`` to ``directory/results_long.csv`` (through a temporary file)."""
    path = Path(directory) / LONG_CSV
    tmp = path.with_name(path.name + ".tmp")
    long_form(records).to_csv(tmp, index=False)
    os.replace(tmp, path)
    return path
