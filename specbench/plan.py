"""`specbench plan`: which K to run at each batch size, and what it gains, from a profile and step costs.

Notation as in ``specbench.acceptance``: ``p_i = P(A >= i)``, ``L(K) = 1 + p_1 + ... + p_K`` the
expected tokens a step emits (``L(0) = 1``: no speculation). For every batch size ``B`` and every
``K`` in ``0..Kmax`` the plan takes one step's time ``t(B, K)`` (milliseconds) from a cost model
(``step_costs``: measured, a roofline, or the linear model ``LinearCosts``) and computes

- tokens/s per request ``L(K) / t(B, K)`` (times 1000), per GPU ``B`` times that;
- the speed-up over ``K = 0`` at the same ``B``: ``L(K) t(B, 0) / t(B, K)``;
- the best ``K`` at ``B`` (the highest throughput; ties go to the smaller ``K``);
- the loss of running ``K`` instead of the best: ``1 - tps(B, K) / tps(B, K*_B)``; a static ``K`` is
  judged by its mean and worst loss over the batch sizes asked (each counted once), and the best
  static ``K`` is the one with the smallest mean loss.

Uncertainty comes from the profile only (a cost model is taken as exact): ``D`` draws of ``L(0..Kmax)``
(``PlanProfile.draws``): the parametric bootstrap of a fitted model (``profile_models.fit_model``,
refitted from the counts a `profile fit` scenario keeps under ``[fit]``), or for a measured rates
profile a multinomial bootstrap of its histogram of ``A``. Every quantity above is evaluated on each
draw: the best ``K`` of each draw gives the *range* of best ``K`` (2.5% and 97.5% percentiles) and the
share of draws that agree with the point estimate; throughput and speed-up get percentile intervals.
A profile with nothing to resample (rates typed in, a model without counts) has no intervals, and
the records say so (``uncertainty``).

Speculation *pays* at ``B`` when the best ``K`` is above 0 and the lower end of its speed-up interval
(the point speed-up without draws) is above 1. ``stop_batch_size`` is the smallest ``B`` asked from
which on it pays at no larger ``B`` asked (None: it pays at the largest).

A model profile extends to any ``Kmax``; a rates profile shorter than ``Kmax`` is refused (one
sentence): nothing says what its rates past the last measured position are. A beta-geometric
profile's point values are its ``M``-point quantile mixture (what the sweep simulates, and what
``verification.simulate_acceptance`` checks the plan against); its bootstrap draws use the
continuous law (the two differ by the discretisation gap, below 1e-3 at ``M = 1024``).

Cost models follow the protocol of ``specbench.step_costs`` (``step(B, K) -> StepCost``, ``name``,
``describe()``); every step time is checked before anything is computed: a batch size the model
cannot price, a negative or non-finite part, a step that gets cheaper as ``K`` or ``B`` grows are
one sentence each (``SpecbenchError``).

Records (``kind = "plan"``) are one per ``(B, K)``; run-level results (the stop batch size, static
``K`` losses, the best static ``K``, configuration snippets) go to the run's metadata under ``plan``.

Chain or tree (``PlanSettings.trees``): each draft tree of ``N`` nodes (``tree_shapes``) is weighed
against the chains at every batch size. Its expected tokens per step come from the positional model
(``tree_theory.expected_tokens``) under ``PlanSettings.tree_rates``, a conditional-rate vector
``a_0, a_1, ...`` for the sibling ranks, the same at every depth; its first entry may be
``"profile"``: rank 0 at depth ``d`` then takes the profile's own conditional rate ``c_{d+1}`` (so
``chain:K`` as a tree has exactly the profile's ``L(K)``, and trees and chains are judged on one
profile), the later ranks the numbers given, and a tree may be at most ``Kmax`` deep (the profile says
nothing deeper; ``sequoia:N`` is limited to it). Its step is priced as **the chain step that verifies
``N`` tokens**, ``t(B, N)`` from the same cost model: the target's forward over ``B (N + 1)`` tokens is
exactly a tree's; the draft part (``N`` draft forwards at batch ``B``) is the chain's, where a tree
drafter runs ``depth`` forwards over wider batches, so wide trees are charged more draft time than
they may take. Tree records (``candidate = "tree"``, chains ``"chain"``) carry ``tree_shape``,
``tree_parents``, ``num_tree_nodes``, ``tree_depth`` and ``num_spec_tokens = N``; on a profile with
draws each tree's ``L`` is evaluated on every draw (rank 0 from the draw's own ``c_d``; typed-in rates
are the same on every draw), giving its intervals. The per-batch summary says whether the best tree
beats the best chain (``best_candidate``) and by how much (``tree_gain_over_chain``, tokens/s over the
best chain's, minus 1), with that gain's interval over the draws (best tree of the draw over best
chain of the draw) and ``tree_share``, the share of draws whose best tree beats their best chain
(None without draws).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from specbench import acceptance, scenarios, tree_theory
from specbench.errors import SpecbenchError
from specbench.tree_shapes import SequoiaRequest, ShapeRequest, TreeShape

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIDENCE = 0.95
DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_MAX_K = 7
MAX_BATCH_SIZE = 1 << 20
COST_PARTS = ("target_ms", "draft_ms", "sampler_ms", "overhead_ms")
# a step may be this much cheaper at a larger K or B before it counts as non-monotone (float noise)
_MONOTONE_SLACK = 1e-9


class StepCostLike(Protocol):
    target_ms: float
    draft_ms: float
    sampler_ms: float
    overhead_ms: float
    sources: dict[str, str]

    @property
    def total_ms(self) -> float: ...


class CostModel(Protocol):
    """What ``specbench.step_costs`` cost models provide (the plan reads nothing else)."""

    name: str

    def step(self, batch_size: int, num_spec_tokens: int) -> StepCostLike: ...

    def describe(self) -> list[str]: ...


@dataclass(frozen=True)
class LinearStep:
    """A step of ``LinearCosts``: the same fields as ``step_costs.StepCost``."""

    target_ms: float
    draft_ms: float
    sampler_ms: float = 0.0
    overhead_ms: float = 0.0
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def total_ms(self) -> float:
        return self.target_ms + self.draft_ms + self.sampler_ms + self.overhead_ms


@dataclass(frozen=True)
class LinearCosts:
    """specbench's old speed-up model as a cost model: ``t(B, K) = t_target (1 + K c)`` at every ``B``.

    What ``L / (1 + K c)`` assumes, made explicit: the target step costs ``target_ms`` whatever the
    batch size and however many tokens it verifies, and each draft token ``c`` of it. Both parts are
    ``modelled``. It cannot show speculation stop paying at large batches; a measured or roofline cost
    model can.
    """

    target_ms: float
    cost_ratio: float
    name: str = "linear"

    def __post_init__(self) -> None:
        if not (isinstance(self.target_ms, (int, float)) and math.isfinite(self.target_ms) and self.target_ms > 0):
            raise SpecbenchError(f"the target step time (--target-ms) must be a positive number of milliseconds, got "
                                 f"{self.target_ms!r}")
        acceptance.check_cost_ratio(self.cost_ratio)

    def step(self, batch_size: int, num_spec_tokens: int) -> LinearStep:
        return LinearStep(self.target_ms, self.target_ms * self.cost_ratio * num_spec_tokens,
                          sources={"target_ms": "modelled", "draft_ms": "modelled", "sampler_ms": "none",
                                   "overhead_ms": "none"})

    def describe(self) -> list[str]:
        line = (f"linear: t(B, K) = {self.target_ms:g} ms x (1 + {self.cost_ratio:g} K) at every batch size "
                f"(the L / (1 + K c) model; no batch dependence)")
        return [line]


# ---- profiles ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanProfile:
    """``L(0..Kmax)`` of one profile, point and (optionally) bootstrap draws.

    ``lengths[K]`` is ``L(K)`` (``lengths[0] = 1``); ``draws`` is ``[D, Kmax + 1]`` or None;
    ``uncertainty`` says where the draws come from (or why there are none); ``measured_k`` is the
    deepest position the data measured (None: unknown), ``extended`` whether ``Kmax`` lies past it.
    """

    name: str
    source: str
    lengths: tuple[float, ...]
    draws: np.ndarray | None
    uncertainty: str
    model: str | None = None
    model_parameters: dict[str, float] | None = None
    measured_k: int | None = None
    extended: bool = False
    rates: tuple[float, ...] = ()

    @property
    def max_k(self) -> int:
        return len(self.lengths) - 1


def _check_max_k(max_k: int) -> int:
    if isinstance(max_k, bool) or not isinstance(max_k, int) or max_k < 1:
        raise SpecbenchError(f"--max-k must be a whole number >= 1, got {max_k!r}")
    if max_k > acceptance.MAX_NUM_SPEC_TOKENS:
        raise SpecbenchError(f"--max-k must be at most {acceptance.MAX_NUM_SPEC_TOKENS}, got {max_k}")
    return max_k


def _lengths(rates: Sequence[float]) -> tuple[float, ...]:
    return (1.0, *[float(x) for x in 1.0 + np.cumsum(np.asarray(rates, dtype=np.float64))])


def _short(name: str, available: int, max_k: int) -> SpecbenchError:
    return SpecbenchError(
        f"profile {name!r} has rates for K up to {available} and no model to extend it to --max-k {max_k}; lower "
        f"--max-k to {available} or fit a model (specbench profile fit --use-model best --extend-k {max_k})")


def profile_from_rates(rates: Sequence[float], max_k: int, *, name: str | None = None) -> PlanProfile:
    """A typed-in rates profile (no uncertainty); fewer than ``max_k`` rates is refused."""
    max_k = _check_max_k(max_k)
    values = acceptance.validate_rates(list(rates), None)
    label = name or acceptance.format_rates(values)
    if len(values) < max_k:
        raise _short(label, len(values), max_k)
    return PlanProfile(label, "", _lengths(values[:max_k]), None,
                       "none: rates typed in, with no counts to resample", measured_k=len(values),
                       rates=tuple(values[:max_k]))


def _fit_counts(path: Path) -> tuple[int, list[int]] | None:
    # the counts `specbench profile fit` keeps under [fit]; the scenario loader itself ignores them
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    fit = data.get("fit")
    if not isinstance(fit, dict):
        return None
    drafts, per_position = fit.get("num_drafts"), fit.get("accepted_per_position")
    if not (isinstance(drafts, int) and drafts > 0 and isinstance(per_position, list) and per_position
            and all(isinstance(n, int) and not isinstance(n, bool) for n in per_position)):
        return None
    return drafts, per_position


def _histogram_draws(num_drafts: int, accepted: Sequence[int], max_k: int, num_bootstrap: int,
                     seed: int) -> np.ndarray | None:
    """``[D, max_k + 1]`` lengths from a multinomial bootstrap of the measured histogram of ``A``."""
    counts = [num_drafts, *accepted[:max_k]]
    if any(counts[i] > counts[i - 1] for i in range(1, len(counts))):
        return None  # not nested: no histogram of A to resample
    histogram = np.array([counts[j] - (counts[j + 1] if j + 1 < len(counts) else 0) for j in range(len(counts))],
                         dtype=np.float64)
    generator = np.random.default_rng(seed)
    samples = generator.multinomial(num_drafts, histogram / histogram.sum(), size=num_bootstrap)
    at_least = np.cumsum(samples[:, ::-1], axis=1)[:, ::-1]  # at_least[:, i] = #(A >= i)
    return 1.0 + np.concatenate([np.zeros((num_bootstrap, 1)), np.cumsum(at_least[:, 1:] / num_drafts, axis=1)],
                                axis=1)


def profile_from_scenario(name_or_path: str | Path, max_k: int, *, profile_name: str | None = None,
                          num_bootstrap: int = 200, seed: int | None = None) -> PlanProfile:
    """One profile of a scenario file, extended to ``max_k`` when it is a model (see the module docstring).

    ``profile_name`` picks one of several profiles (a scenario with one needs none). A model profile whose
    file keeps the counts under ``[fit]`` (as `specbench profile fit --use-model` writes it) is refitted
    for its bootstrap; a rates profile with counts is resampled; anything else has no draws.
    """
    from specbench import profile_models

    max_k = _check_max_k(max_k)
    scenario = scenarios.load_scenario(name_or_path)
    chosen = _pick(scenario, profile_name)
    counts = _fit_counts(scenario.path)
    seed = profile_models.BOOTSTRAP_SEED if seed is None else seed
    if chosen.model is not None:
        params = tuple(chosen.model_parameters)
        spread = len(chosen.request_rates) if chosen.request_rates is not None else \
            scenarios.DEFAULT_SPREAD_COMPONENTS
        extended = scenarios.make_model_profile(max_k, chosen.model, params, spread_components=spread,
                                                name=chosen.name)
        lengths = _lengths(extended.rates)
        names = profile_models.MODELS[chosen.model].parameters
        draws, measured_k = None, None
        uncertainty = "none: the scenario keeps no counts ([fit]) to bootstrap the model from"
        if counts is not None:
            measured_k = len(counts[1])
            fit = profile_models.fit_model(chosen.model, counts[0], counts[1], num_bootstrap=num_bootstrap, seed=seed)
            if all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) for a, b in zip(fit.values, params)):
                model = profile_models.MODELS[chosen.model]
                conditional = np.array([model.conditional(sample, max_k) for sample in fit.bootstrap])
                draws = np.concatenate([np.ones((len(conditional), 1)),
                                        1.0 + np.cumsum(np.cumprod(conditional, axis=1), axis=1)], axis=1)
                uncertainty = (f"parametric bootstrap of the {chosen.model} fit to {counts[0]:,} drafts measured "
                               f"to K={measured_k} ({num_bootstrap} refits)")
            else:
                uncertainty = ("none: the model's parameters are not the fit of the counts under [fit] (edited by "
                               "hand?), so the counts say nothing about them")
        return PlanProfile(chosen.name, chosen.source, lengths, draws, uncertainty, chosen.model,
                           dict(zip(names, params)), measured_k, measured_k is not None and max_k > measured_k,
                           tuple(extended.rates))
    if chosen.num_spec_tokens < max_k:
        raise _short(chosen.name, chosen.num_spec_tokens, max_k)
    rates = chosen.rates[:max_k]
    draws, uncertainty = None, "none: the scenario keeps no counts ([fit]) to resample"
    if counts is not None and len(counts[1]) >= max_k:
        draws = _histogram_draws(counts[0], counts[1], max_k, num_bootstrap, seed)
        if draws is not None:
            uncertainty = f"multinomial bootstrap of the measured histogram of A ({counts[0]:,} drafts)"
    return PlanProfile(chosen.name, chosen.source, _lengths(rates), draws, uncertainty,
                       measured_k=chosen.num_spec_tokens, rates=tuple(rates))


def _pick(scenario: scenarios.Scenario, profile_name: str | None) -> scenarios.Profile:
    profiles = scenario.profiles
    if profile_name is not None:
        found = [p for p in profiles if p.name == profile_name]
        if not found:
            raise SpecbenchError(f"scenario {scenario.name} has no profile named {profile_name!r} (its profiles: "
                                 f"{', '.join(p.name for p in profiles)})")
        return found[0]
    if len(profiles) > 1:
        raise SpecbenchError(f"scenario {scenario.name} holds {len(profiles)} profiles; pick one with --profile "
                             f"(one of: {', '.join(repr(p.name) for p in profiles)})")
    return profiles[0]


# ---- costs -------------------------------------------------------------------------------------------


def check_batch_sizes(batch_sizes: Sequence[int]) -> tuple[int, ...]:
    """Whole numbers in ``1..MAX_BATCH_SIZE``, sorted, each once."""
    if not batch_sizes:
        raise SpecbenchError("--batch-sizes needs at least one batch size")
    for b in batch_sizes:
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_BATCH_SIZE:
            raise SpecbenchError(f"batch sizes must be whole numbers from 1 to {MAX_BATCH_SIZE}, got {b!r}")
    return tuple(sorted(set(batch_sizes)))


def priced_step(costs: CostModel, b: int, k: int) -> StepCostLike:
    """The cost model's step at batch ``b`` with ``k`` verified drafts, its parts checked finite and >= 0."""
    try:
        step = costs.step(b, k)
    except SpecbenchError as exc:
        raise SpecbenchError(f"cost model {costs.name} cannot price batch size {b} at K={k}: {exc}") from None
    except (KeyError, IndexError, ValueError, LookupError) as exc:
        raise SpecbenchError(f"cost model {costs.name} has no step time for batch size {b} at K={k} "
                             f"({type(exc).__name__}: {exc}); give costs for every batch size asked") from None
    for part in COST_PARTS:
        value = getattr(step, part, None)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise SpecbenchError(f"cost model {costs.name} gives {part} = {value!r} at batch size {b}, K={k}; "
                                 f"step times must be finite and >= 0 ms")
    if not step.total_ms > 0:
        raise SpecbenchError(f"cost model {costs.name} gives a step of 0 ms at batch size {b}, K={k}; a step "
                             f"takes time")
    return step


def step_table(costs: CostModel, batch_sizes: Sequence[int], max_k: int) -> list[list[Any]]:
    """``steps[b][k]``: the cost model's ``StepCost`` of every (B, K), checked (see the module docstring)."""
    steps: list[list[Any]] = []
    for b in batch_sizes:
        row = []
        for k in range(max_k + 1):
            step = priced_step(costs, b, k)
            if k and step.total_ms < row[-1].total_ms * (1 - _MONOTONE_SLACK):
                raise SpecbenchError(f"cost model {costs.name} gives {step.total_ms:.6g} ms at batch size {b}, K={k} "
                                     f"but {row[-1].total_ms:.6g} ms at K={k - 1}: a step cannot get cheaper with "
                                     f"more draft tokens")
            row.append(step)
        if steps:
            for k, (before, now) in enumerate(zip(steps[-1], row)):
                if now.total_ms < before.total_ms * (1 - _MONOTONE_SLACK):
                    raise SpecbenchError(
                        f"cost model {costs.name} gives {now.total_ms:.6g} ms at batch size {b} but "
                        f"{before.total_ms:.6g} ms at the smaller batch size {batch_sizes[len(steps) - 1]} (K={k}): "
                        f"a step cannot get cheaper with more requests")
        steps.append(row)
    return steps


# ---- the plan ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanSettings:
    """What a plan needs: a profile extended to ``Kmax``, a cost model and the batch sizes."""

    profile: PlanProfile
    costs: CostModel
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    scenario: str | None = None
    trees: tuple[ShapeRequest, ...] = ()
    tree_rates: tuple[float | str, ...] = ()  # a_0, a_1, ...; a_0 may be "profile" (module docstring)


PROFILE_RANK = "profile"


def tree_rate_table(profile: PlanProfile, tree_rates: Sequence[float | str]) -> tree_theory.PositionalRates:
    """The conditional-rate table trees are weighed with: ``tree_rates`` at every depth, or, when its first
    entry is ``"profile"``, the profile's ``c_{d+1}`` at rank 0 of depth ``d < Kmax`` and the rest after it."""
    values = list(tree_rates)
    if not values:
        raise SpecbenchError("trees need --tree-rates: the conditional acceptance rate of each sibling rank, e.g. "
                             "0.8,0.3,0.1, or profile,0.3,0.1 (rank 0 from the profile by depth)")
    if any(v == PROFILE_RANK for v in values[1:]):
        raise SpecbenchError(f"--tree-rates takes {PROFILE_RANK!r} only as its first entry (rank 0), got {values!r}")
    if values[0] != PROFILE_RANK:
        return tree_theory.positional_rates(values)
    lengths = np.asarray(profile.lengths, dtype=np.float64)
    conditional = acceptance.conditional_rates([float(x) for x in np.diff(lengths)])
    return tree_theory.positional_rates([[c, *values[1:]] for c in conditional])


def resolve_trees(settings: PlanSettings) -> tuple[list[TreeShape], tree_theory.PositionalRates | None]:
    """The trees of a plan as shapes (``sequoia:N`` solved for the table) and the table, or ``([], None)``."""
    if not settings.trees:
        if settings.tree_rates:
            raise SpecbenchError("--tree-rates describes trees; give them with --tree SHAPE")
        return [], None
    table = tree_rate_table(settings.profile, settings.tree_rates)
    max_k = settings.profile.max_k
    shapes = []
    for request in settings.trees:
        if isinstance(request, SequoiaRequest) and not table.every_depth:
            limit = max_k if request.max_depth is None else min(request.max_depth, max_k)
            request = SequoiaRequest(request.num_nodes, limit)  # labelled with the limit it was solved under
        shape = tree_theory.resolve_shape(request, table)
        if not table.every_depth and shape.depth > max_k:
            raise SpecbenchError(f"tree {shape.label} is {shape.depth} deep, past the profile's K = {max_k} that rank 0 "
                                 f"reads its rates from; raise --max-k or give --tree-rates as numbers")
        shapes.append(shape)
    return shapes, table


def _interval(samples: np.ndarray) -> tuple[float, float]:
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def run_plan(settings: PlanSettings) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records (one per ``(B, K)``) and the run-level summary of a plan (module docstring)."""
    profile = settings.profile
    batch_sizes = check_batch_sizes(settings.batch_sizes)
    max_k = profile.max_k
    steps = step_table(settings.costs, batch_sizes, max_k)
    lengths = np.asarray(profile.lengths, dtype=np.float64)
    draws = profile.draws
    records: list[dict[str, Any]] = []
    per_batch: list[dict[str, Any]] = []
    length_ci = None if draws is None else [_interval(draws[:, k]) for k in range(max_k + 1)]
    trees, table = resolve_trees(settings)
    tree_lengths = [tree_theory.expected_tokens(shape, table) for shape in trees]
    tree_draws = None if draws is None or not trees else _tree_draws(settings, trees, table, draws)
    tree_records: list[dict[str, Any]] = []
    for b, row in zip(batch_sizes, steps):
        seconds = np.array([s.total_ms for s in row]) / 1000.0
        tps = lengths / seconds
        best = int(np.argmax(tps))  # the first maximum: ties go to the smaller K
        speedup = tps / tps[0]
        summary: dict[str, Any] = {"batch_size": b, "best_num_spec_tokens": best,
                                   "best_tokens_per_second_per_gpu": float(b * tps[best]),
                                   "best_speedup": float(speedup[best])}
        if draws is not None:
            draw_tps = draws / seconds[None, :]
            draw_best = np.argmax(draw_tps, axis=1)
            summary.update(
                best_k_low=int(np.percentile(draw_best, 100 * (1 - CONFIDENCE) / 2, method="lower")),
                best_k_high=int(np.percentile(draw_best, 100 - 100 * (1 - CONFIDENCE) / 2, method="higher")),
                best_k_share=float(np.mean(draw_best == best)),
                best_k_counts={int(k): int(n) for k, n in zip(*np.unique(draw_best, return_counts=True))},
            )
            best_low, best_high = _interval(b * draw_tps[:, best])
            gain_low, gain_high = _interval(draw_tps[:, best] / draw_tps[:, 0])
            summary.update(best_tokens_per_second_per_gpu_ci_low=best_low,
                           best_tokens_per_second_per_gpu_ci_high=best_high,
                           best_speedup_ci_low=gain_low, best_speedup_ci_high=gain_high)
        else:
            summary.update(best_k_low=best, best_k_high=best, best_k_share=None, best_k_counts=None,
                           best_tokens_per_second_per_gpu_ci_low=None, best_tokens_per_second_per_gpu_ci_high=None,
                           best_speedup_ci_low=None, best_speedup_ci_high=None)
        floor = summary["best_speedup_ci_low"] if summary["best_speedup_ci_low"] is not None else summary["best_speedup"]
        summary["pays"] = bool(best > 0 and floor > 1.0)
        per_batch.append(summary)
        if trees:
            tree_records += _tree_records(settings, trees, tree_lengths, b, float(tps[0]), float(tps[best]), summary)
            if tree_draws is not None:
                _tree_intervals(tree_records[-len(trees):], tree_draws, draws / seconds[None, :], b, summary)
        for k, step in enumerate(row):
            record: dict[str, Any] = {
                "kind": "plan", "profile": profile.name, "scenario": settings.scenario,
                "batch_size": b, "num_spec_tokens": k,
                "acceptance_length": float(lengths[k]),
                "acceptance_length_ci_low": None if length_ci is None else length_ci[k][0],
                "acceptance_length_ci_high": None if length_ci is None else length_ci[k][1],
                "step_ms": float(step.total_ms),
                **{part: float(getattr(step, part)) for part in COST_PARTS},
                "cost_sources": {part: str(source) for part, source in dict(getattr(step, "sources", {})).items()},
                "cost_model": settings.costs.name,
                "tokens_per_second_per_request": float(tps[k]),
                "tokens_per_second_per_gpu": float(b * tps[k]),
                "speedup": float(speedup[k]),
                "loss_vs_best": float(1.0 - tps[k] / tps[best]),
                "is_best": k == best,
                "extended": profile.measured_k is not None and k > profile.measured_k,
            }
            if draws is not None:
                record["tokens_per_second_per_gpu_ci_low"], record["tokens_per_second_per_gpu_ci_high"] = \
                    _interval(b * draws[:, k] / seconds[k])
                record["speedup_ci_low"], record["speedup_ci_high"] = _interval(draws[:, k] / seconds[k]
                                                                                / (draws[:, 0] / seconds[0]))
            else:
                for key in ("tokens_per_second_per_gpu", "speedup"):
                    record[f"{key}_ci_low"] = record[f"{key}_ci_high"] = None
            record.update({key: summary[key] for key in ("best_num_spec_tokens", "best_k_low", "best_k_high",
                                                         "best_k_share", "pays")})
            record["candidate"] = "chain"
            records.append(record)
    summary = summarise(records, profile, settings.costs, per_batch)
    if trees:
        summary.update(tree_rates=table.as_lists(), tree_rates_given=list(settings.tree_rates),
                       trees=[{"tree_shape": s.label, "tree_parents": list(s.parents), "num_tree_nodes": s.num_nodes,
                               "tree_depth": s.depth, "acceptance_length": length}
                              for s, length in zip(trees, tree_lengths)],
                       tree_cost_assumption=TREE_COST_ASSUMPTION)
    return records + tree_records, summary


TREE_COST_ASSUMPTION = ("a tree of N nodes is priced as the chain step that verifies N tokens, t(B, N): the target "
                        "forward over B (N + 1) tokens is the tree's, the draft part is N chain draft steps")


def _tree_draws(settings: PlanSettings, trees: Sequence[TreeShape], table: tree_theory.PositionalRates,
                draws: np.ndarray) -> np.ndarray:
    """``[D, trees]``: each tree's ``L`` on each profile draw (rank 0 from the draw's ``c_d`` when
    ``--tree-rates`` starts with ``profile``; otherwise the typed-in rates, the same on every draw)."""
    if table.every_depth:
        return np.tile([tree_theory.expected_tokens(s, table) for s in trees], (len(draws), 1))
    p = np.diff(draws, axis=1)  # [D, Kmax]: p_i of each draw
    previous = np.concatenate([np.ones((len(p), 1)), p[:, :-1]], axis=1)
    conditional = np.where(previous > 0, np.minimum(1.0, p / np.where(previous > 0, previous, 1.0)), 0.0)
    siblings = [float(v) for v in settings.tree_rates[1:]]
    tables = np.concatenate([conditional[:, :, None],
                             np.broadcast_to(np.asarray(siblings, dtype=np.float64),
                                             (*conditional.shape, len(siblings)))], axis=2)
    return np.stack([tree_theory.expected_tokens_many(s, tables) for s in trees], axis=1)


def _tree_intervals(records: list[dict[str, Any]], tree_draws: np.ndarray, chain_tps: np.ndarray, b: int,
                    summary: dict[str, Any]) -> None:
    # each tree's intervals over the profile's draws, and the share of draws whose best tree beats their best chain
    seconds = np.array([r["step_ms"] for r in records]) / 1000.0
    tps = tree_draws / seconds[None, :]
    plain = chain_tps[:, 0]
    for index, record in enumerate(records):
        record["acceptance_length_ci_low"], record["acceptance_length_ci_high"] = _interval(tree_draws[:, index])
        record["tokens_per_second_per_gpu_ci_low"], record["tokens_per_second_per_gpu_ci_high"] = \
            _interval(b * tps[:, index])
        record["speedup_ci_low"], record["speedup_ci_high"] = _interval(tps[:, index] / plain)
    gain = tps.max(axis=1) / chain_tps.max(axis=1) - 1.0
    low, high = _interval(gain)
    summary.update(tree_gain_over_chain_ci_low=low, tree_gain_over_chain_ci_high=high,
                   tree_share=float(np.mean(gain > 1e-12)))


def _tree_records(settings: PlanSettings, trees: Sequence[TreeShape], lengths: Sequence[float], b: int,
                  plain_tps: float, chain_tps: float, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per tree at batch size ``b``; ``summary`` (that batch size's) gets the best tree and the verdict."""
    records = []
    for shape, length in zip(trees, lengths):
        step = priced_step(settings.costs, b, shape.num_nodes)
        tps = length / (step.total_ms / 1000.0)
        records.append({
            "kind": "plan", "candidate": "tree", "profile": settings.profile.name, "scenario": settings.scenario,
            "batch_size": b, "num_spec_tokens": shape.num_nodes, "tree_shape": shape.label,
            "tree_parents": list(shape.parents), "num_tree_nodes": shape.num_nodes, "tree_depth": shape.depth,
            "acceptance_length": float(length), "acceptance_length_ci_low": None, "acceptance_length_ci_high": None,
            "step_ms": float(step.total_ms), **{part: float(getattr(step, part)) for part in COST_PARTS},
            "cost_sources": {part: str(source) for part, source in dict(getattr(step, "sources", {})).items()},
            "cost_model": settings.costs.name,
            "tokens_per_second_per_request": tps, "tokens_per_second_per_gpu": b * tps,
            "speedup": tps / plain_tps, "gain_over_best_chain": tps / chain_tps - 1.0,
            "loss_vs_best": 1.0 - tps / chain_tps, "best_num_spec_tokens": summary["best_num_spec_tokens"],
            "pays": bool(tps > plain_tps),
            "tokens_per_second_per_gpu_ci_low": None, "tokens_per_second_per_gpu_ci_high": None,
            "speedup_ci_low": None, "speedup_ci_high": None,
        })
    best = max(range(len(records)), key=lambda i: (records[i]["tokens_per_second_per_request"], -i))
    for i, record in enumerate(records):
        record["is_best"] = i == best  # the best tree at this batch size
    top = records[best]
    gain = top["gain_over_best_chain"]
    summary.update(best_tree_shape=top["tree_shape"], best_tree_num_nodes=top["num_tree_nodes"],
                   best_tree_acceptance_length=top["acceptance_length"],
                   best_tree_tokens_per_second_per_gpu=top["tokens_per_second_per_gpu"],
                   best_tree_speedup=top["speedup"], tree_gain_over_chain=gain,
                   best_candidate="tree" if gain > 1e-12 else "chain", tree_gain_over_chain_ci_low=None,
                   tree_gain_over_chain_ci_high=None, tree_share=None)
    return records


def static_losses(records: Sequence[dict]) -> list[dict[str, Any]]:
    """Per static ``K``: its mean and worst loss against each batch size's best (the plan's chain records)."""
    by_k: dict[int, list[float]] = {}
    for r in chain_records(records):
        by_k.setdefault(r["num_spec_tokens"], []).append(r["loss_vs_best"])
    return [{"num_spec_tokens": k, "mean_loss": float(np.mean(v)), "max_loss": float(np.max(v))}
            for k, v in sorted(by_k.items())]


def chain_records(records: Sequence[dict]) -> list[dict]:
    """The chain records of a plan (tree records carry ``candidate = "tree"``)."""
    return [r for r in records if r.get("candidate", "chain") == "chain"]


def stop_batch_size(per_batch: Sequence[dict]) -> int | None:
    """The smallest batch size from which on speculation pays at no larger one asked (None: pays at the largest)."""
    stop = None
    for summary in reversed(per_batch):
        if summary["pays"]:
            break
        stop = summary["batch_size"]
    return stop


def summarise(records: Sequence[dict], profile: PlanProfile, costs: CostModel,
              per_batch: Sequence[dict]) -> dict[str, Any]:
    """The run-level results (metadata ``plan``): per batch size, static ``K``, the stop batch size, snippets."""
    losses = static_losses(records)
    best_static = min(losses, key=lambda s: (round(s["mean_loss"], 12), s["num_spec_tokens"]))
    summary = {
        "profile": profile.name, "profile_source": profile.source, "model": profile.model,
        "model_parameters": profile.model_parameters, "uncertainty": profile.uncertainty,
        "num_draws": None if profile.draws is None else len(profile.draws),
        "measured_k": profile.measured_k, "extended": profile.extended, "max_k": profile.max_k,
        "acceptance_lengths": list(profile.lengths), "confidence": CONFIDENCE,
        "cost_model": costs.name, "cost_description": list(costs.describe()),
        "batch_sizes": [s["batch_size"] for s in per_batch], "per_batch": list(per_batch),
        "stop_batch_size": stop_batch_size(per_batch), "static_k": losses,
        "best_static_k": best_static["num_spec_tokens"], "best_static_k_mean_loss": best_static["mean_loss"],
        "best_static_k_max_loss": best_static["max_loss"],
    }
    summary["snippets"] = config_snippets(summary)
    return summary


# ---- configuration snippets ----------------------------------------------------------------------------

VLLM_TABLE_FIELD = "num_speculative_tokens_per_batch_size"


def vllm_table_support() -> tuple[str | None, bool | None]:
    """``(installed vLLM version or None, whether its speculative config has the batch-size table)``.

    Read from the installed package's files, without importing vLLM (None, None: not installed).
    """
    import importlib.metadata
    import importlib.util

    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None, None
    try:
        version = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    root = Path(next(iter(spec.submodule_search_locations)))
    for candidate in (root / "config" / "speculative.py", root / "config.py"):
        try:
            if VLLM_TABLE_FIELD in candidate.read_text(encoding="utf-8", errors="replace"):
                return version, True
        except OSError:
            continue
    return version, False


def batch_ranges(per_batch: Sequence[dict]) -> list[list[int]]:
    """``[[lo, hi, K], ...]``: each asked batch size's best ``K`` from it up to the next one asked (the first
    from 1), neighbours with the same ``K`` merged; the last range ends at the largest batch size asked."""
    ranges: list[list[int]] = []
    sizes = [s["batch_size"] for s in per_batch]
    for index, summary in enumerate(per_batch):
        low = 1 if index == 0 else sizes[index]
        high = sizes[index + 1] - 1 if index + 1 < len(sizes) else sizes[index]
        k = summary["best_num_spec_tokens"]
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = high
        else:
            ranges.append([low, high, k])
    return ranges


def config_snippets(summary: dict[str, Any], support: tuple[str | None, bool | None] | None = None) -> dict[str, str]:
    """Ready-to-paste configuration for vLLM and SGLang (the flag names are checked in the README)."""
    import json

    version, has_table = vllm_table_support() if support is None else support
    static = summary["best_static_k"]
    per_batch = summary["per_batch"]
    deepest = max(s["best_num_spec_tokens"] for s in per_batch)
    add = "add your own \"method\" and \"model\" keys"
    if static == 0:
        vllm_static = "# vLLM: no static K pays over the batch sizes asked: leave --speculative-config out"
    else:
        vllm_static = (f"# vLLM, one static K for every batch size ({add})\n"
                       f"--speculative-config '{json.dumps({'num_speculative_tokens': static})}'")
    table = {"num_speculative_tokens": max(deepest, 1), VLLM_TABLE_FIELD: batch_ranges(per_batch)}
    if has_table is None:
        where = ("vLLM is not installed here: this needs a vLLM with dynamic speculative decoding (PR #32374); "
                 "an older one takes only the static K above")
    elif has_table:
        where = f"the installed vLLM {version} has {VLLM_TABLE_FIELD}"
    else:
        where = (f"the installed vLLM {version} has no {VLLM_TABLE_FIELD}: it runs only the static K above; "
                 f"a newer one takes this table")
    vllm_table = (f"# vLLM, K per batch size ({where}; {add}; batch sizes between two planned ones take the "
                  f"smaller one's K)\n--speculative-config '{json.dumps(table)}'")
    if static == 0:
        sglang = "# SGLang: no static K pays over the batch sizes asked: leave --speculative-algorithm out"
    else:
        sglang = (f"# SGLang, EAGLE/MTP chain drafting (topk 1), one static K\n"
                  f"--speculative-num-steps {static} --speculative-eagle-topk 1 --speculative-num-draft-tokens "
                  f"{static + 1}")
    candidates = sorted({s["best_num_spec_tokens"] for s in per_batch if s["best_num_spec_tokens"] > 0})
    if len(candidates) > 1:
        sglang += (f"\n# the best K differs by batch size ({', '.join(map(str, candidates))}); SGLang's "
                   f"--speculative-adaptive chooses among candidate steps at run time")
    return {"vllm": vllm_static, "vllm_table": vllm_table, "sglang": sglang}
