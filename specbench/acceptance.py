"""Acceptance math: profiles, the two length schedules, closed forms, the throughput model.

Notation (the README's "Notation" table): ``K`` drafts per step; ``A`` drafts accepted, ``0..K``; the step emits
``A + 1`` tokens; ``p_i = P(A >= i)`` are the unconditional per-position rates (non-increasing);
``c_i = p_i / p_{i-1}`` the conditional ones (``p_0 = 1``); ``L = 1 + E[A]`` the mean acceptance
length. Plain Python floats in, plain lists out: nothing here needs a tensor.

A mean length ``L`` becomes rates through a *schedule*:

- ``min-variance``: ``floor(L-1)`` ones, the fraction, then zeros; the least variance of ``A`` any
  rates with that mean can have (none at all at a whole-number ``L``).
- ``geometric``: every draft accepted independently with the same probability ``alpha``, so
  ``p_i = alpha^i`` (the model of Leviathan et al. 2022 and most papers); ``alpha`` is the one
  value in ``[0, 1]`` that gives ``L``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal

from specbench.errors import SpecbenchError

Schedule = Literal["min-variance", "geometric"]
SCHEDULES: tuple[str, ...] = ("min-variance", "geometric")

# c = draft step / target step. 0.05 is the memory-bound cost of an EAGLE-3 head on Llama-3.1-8B:
# one decoder layer (~0.22B weights) plus a 32k-token draft LM head (~0.13B) against 32 layers and
# a 128k-token head (~7.5B): 0.35 / 7.5 ~ 0.05. Scenarios may set their own.
DEFAULT_COST_RATIO = 0.05
# K at most 64: drafters in use propose a few to a few tens of tokens (EAGLE/MTP chains of 1-8,
# n-gram lookups of 10-20); past that every table (3K + 3 rows a case) and the default step count
# (9604 K^2: 39M steps, 2.5G positions at K = 64) grow with K for profiles nobody runs.
MAX_NUM_SPEC_TOKENS = 64


def format_rates(values: Sequence[float]) -> str:
    """``[0.9, 0.7, 0.5]``: rates as a short label (also what error messages show)."""
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


def _number(value: object) -> float:
    # bool is an int to Python but never a rate or a length someone meant to type
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


def check_num_spec_tokens(num_spec_tokens: int) -> int:
    """Reject K < 1 (and anything that is not a whole number); return K."""
    if isinstance(num_spec_tokens, bool) or not isinstance(num_spec_tokens, int):
        raise SpecbenchError(f"number of speculative tokens must be a whole number, got {num_spec_tokens!r}")
    if num_spec_tokens < 1:
        raise SpecbenchError(f"number of speculative tokens must be at least 1, got {num_spec_tokens}")
    return num_spec_tokens


def validate_rates(rates: Sequence[float], num_spec_tokens: int | None) -> list[float]:
    """Check ``K`` unconditional rates: each in [0, 1], non-increasing, no NaN; return them as floats.

    ``num_spec_tokens=None`` takes ``K`` from the rates themselves.
    """
    if isinstance(rates, (str, bytes)) or not isinstance(rates, Sequence):
        raise SpecbenchError(f"acceptance rates must be a list of numbers, got {rates!r}")
    num_spec_tokens = len(rates) if num_spec_tokens is None else num_spec_tokens
    check_num_spec_tokens(num_spec_tokens)
    try:
        values = [_number(r) for r in rates]
    except (TypeError, ValueError) as exc:
        raise SpecbenchError(f"acceptance rates must be numbers, got {list(rates)!r}") from exc
    if len(values) != num_spec_tokens:
        raise SpecbenchError(
            f"acceptance rates must have one entry per draft position ({num_spec_tokens}), "
            f"got {len(values)}: {format_rates(values)}"
        )
    for value in values:
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise SpecbenchError(f"acceptance rates must lie in [0, 1], got {value:g} in {format_rates(values)}")
    for before, after in itertools.pairwise(values):
        if after > before:
            raise SpecbenchError(f"acceptance rates must be non-increasing, got {format_rates(values)}")
    return values


def check_schedule(schedule: str) -> str:
    """``min-variance`` or ``geometric``; anything else is an error naming it."""
    if schedule not in SCHEDULES:
        raise SpecbenchError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    return schedule


def _checked_length(mean_acceptance_length: float, num_spec_tokens: int) -> float:
    check_num_spec_tokens(num_spec_tokens)
    try:
        length = _number(mean_acceptance_length)
    except (TypeError, ValueError) as exc:
        raise SpecbenchError(f"mean acceptance length must be a number, got {mean_acceptance_length!r}") from exc
    if math.isnan(length) or not 1.0 <= length <= num_spec_tokens + 1:
        raise SpecbenchError(
            f"mean acceptance length must lie in [1, {num_spec_tokens + 1}] for K={num_spec_tokens}, "
            f"got {length:g}"
        )
    return length


def length_to_rates(
    mean_acceptance_length: float, num_spec_tokens: int, schedule: Schedule = "min-variance"
) -> list[float]:
    """``K`` unconditional rates with mean length ``L`` under ``schedule`` (see the module docstring).

    ``min-variance``: ``floor(L-1)`` ones, the fraction, then zeros, cut to ``K``; ``L = 2.5, K = 3``
    gives ``[1.0, 0.5, 0.0]``. ``geometric``: ``alpha^i`` with ``alpha = length_to_alpha(L, K)``.
    ``L`` must lie in ``[1, K + 1]``.
    """
    length = _checked_length(mean_acceptance_length, num_spec_tokens)
    if check_schedule(schedule) == "geometric":
        return iid_rates(length_to_alpha(length, num_spec_tokens), num_spec_tokens)
    expected_accepted = length - 1.0
    num_full = math.floor(expected_accepted)
    rates = [1.0] * num_full + [expected_accepted - num_full] + [0.0] * num_spec_tokens
    return rates[:num_spec_tokens]


def length_to_alpha(mean_acceptance_length: float, num_spec_tokens: int) -> float:
    """The per-draft rate ``alpha`` in ``[0, 1]`` with ``1 + alpha + ... + alpha^K = L`` (geometric schedule).

    ``L`` rises strictly with ``alpha`` from 1 (``alpha = 0``) to ``K + 1`` (``alpha = 1``), so the
    root is unique; it is found by Brent's method to within ``1e-15``.
    """
    length = _checked_length(mean_acceptance_length, num_spec_tokens)
    if length == 1.0 or length == num_spec_tokens + 1:
        return float(length > 1.0)

    def excess(alpha: float) -> float:
        return 1.0 + sum(alpha**i for i in range(1, num_spec_tokens + 1)) - length

    from scipy import optimize  # here, not at the top: the command line's --help stays free of scipy

    return float(optimize.brentq(excess, 0.0, 1.0, xtol=1e-15))


def resolve_rates(
    num_spec_tokens: int,
    rates: Sequence[float] | None = None,
    mean_acceptance_length: float | None = None,
    *,
    schedule: Schedule = "min-variance",
    alpha: float | None = None,
) -> list[float]:
    """Unconditional rates from exactly one of ``rates``, ``mean_acceptance_length`` (through
    ``schedule``) or the geometric schedule's per-draft rate ``alpha``."""
    given = [name for name, value in (("acceptance rates", rates), ("mean acceptance length", mean_acceptance_length),
                                      ("alpha", alpha)) if value is not None]
    if len(given) != 1:
        raise SpecbenchError(
            "give exactly one of acceptance rates, mean acceptance length or alpha, got "
            + (" and ".join(given) if given else "none")
        )
    if rates is not None:
        return validate_rates(rates, num_spec_tokens)
    if alpha is not None:
        return iid_rates(alpha, num_spec_tokens)
    return length_to_rates(mean_acceptance_length, num_spec_tokens, schedule)


def conditional_rates(rates: Sequence[float]) -> list[float]:
    """``c_i = p_i / p_{i-1}`` with ``p_0 = 1``; once some ``p_j = 0`` every later ``c_i`` is 0."""
    result: list[float] = []
    previous = 1.0
    for rate in rates:
        result.append(0.0 if previous == 0.0 else min(1.0, rate / previous))
        previous = rate
    return result


def accepted_distribution(rates: Sequence[float]) -> list[float]:
    """``P(A = j)`` for ``j = 0..K``: ``p_j - p_{j+1}`` with ``p_0 = 1`` and ``p_{K+1} = 0``."""
    padded = [1.0, *[float(r) for r in rates], 0.0]
    return [padded[j] - padded[j + 1] for j in range(len(padded) - 1)]


def mean_acceptance_length(rates: Sequence[float]) -> float:
    """``L = 1 + E[A] = 1 + sum_i p_i``."""
    return 1.0 + float(sum(rates))


def accepted_variance(rates: Sequence[float]) -> float:
    """``Var(A) = sum_i (2i - 1) p_i - (sum_i p_i)^2`` (from ``E[A^2] = sum_i (2i - 1) P(A >= i)``)."""
    mean = sum(rates)
    second_moment = sum((2 * i - 1) * rate for i, rate in enumerate(rates, start=1))
    return float(second_moment - mean * mean)


def expected_speedup(mean_length: float, num_spec_tokens: int, cost_ratio: float) -> float:
    """Expected speed-up over plain decoding: ``S = L / (1 + K c)``.

    ``c`` is the cost of one draft step over one target step; with i.i.d. per-token acceptance
    ``a`` this is Leviathan et al.'s ``(1 - a^(K+1)) / ((1 - a)(1 + K c))``.
    """
    return mean_length / (1.0 + num_spec_tokens * check_cost_ratio(cost_ratio))


def check_cost_ratio(cost_ratio: float) -> float:
    """A draft/target step-cost ratio must be a finite number >= 0; return it as a float."""
    if isinstance(cost_ratio, bool) or not isinstance(cost_ratio, (int, float)):
        raise SpecbenchError(f"cost ratio must be a number, got {cost_ratio!r}")
    if not math.isfinite(cost_ratio) or cost_ratio < 0:
        raise SpecbenchError(f"cost ratio must be a finite number >= 0, got {cost_ratio:g}")
    return float(cost_ratio)


def iid_rates(token_acceptance_rate: float, num_spec_tokens: int) -> list[float]:
    """Unconditional rates when every draft is accepted independently with rate ``a``: ``a^i``."""
    try:
        a = _number(token_acceptance_rate)
    except (TypeError, ValueError) as exc:
        raise SpecbenchError(f"alpha (the per-draft acceptance rate) must be a number, got "
                             f"{token_acceptance_rate!r}") from exc
    if math.isnan(a) or not 0.0 <= a <= 1.0:
        raise SpecbenchError(f"alpha (the per-draft acceptance rate) must lie in [0, 1], got {a:g}")
    return [a**i for i in range(1, check_num_spec_tokens(num_spec_tokens) + 1)]


def best_num_spec_tokens(
    token_acceptance_rate: float, cost_ratio: float, max_num_spec_tokens: int = 16
) -> tuple[int, float]:
    """The ``K`` in ``1..max`` with the highest expected speed-up for i.i.d. rate ``a``, and that speed-up."""
    best = (1, -1.0)
    for k in range(1, check_num_spec_tokens(max_num_spec_tokens) + 1):
        speedup = expected_speedup(mean_acceptance_length(iid_rates(token_acceptance_rate, k)), k, cost_ratio)
        if speedup > best[1] + 1e-12:
            best = (k, speedup)
    return best
