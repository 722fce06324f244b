"""Parametric acceptance-profile models, fitted to per-position counts by maximum likelihood.

Notation as in ``specbench.acceptance``: ``p_i = P(A >= i)``, ``c_i = p_i / p_{i-1}``. The models
(``MODELS``, the one registry every command reads):

- ``iid`` (parameter ``alpha``): every draft accepted independently with ``alpha``: ``c_i = alpha``,
  ``p_i = alpha^i`` (the geometric schedule).
- ``beta-geometric`` (``a``, ``b``): each request draws its own ``alpha ~ Beta(a, b)`` and accepts
  every position independently with it: ``p_i = E[alpha^i] = B(a + i, b) / B(a, b)``, so
  ``c_i = (a + i - 1) / (a + b + i - 1)``, which *rises* with depth (requests that got this far are
  the easy ones). Mean ``a / (a + b)``; ``a + b`` large is close to ``iid``.
- ``depth-decay`` (``c1``, ``d``): ``c_i = c1 d^(i - 1)`` with ``c1, d`` in ``[0, 1]``; conditional
  rates that fall with depth (a drafter that drifts away from the target).

The data: ``profile_fit.Counts``, ``N`` drafts (verification steps) and ``n_i`` the drafts whose
position ``i`` was accepted. vLLM counts position ``i`` only when every earlier one was accepted
(``n_i = #(A >= i)``), so the counts are nested (``N = n_0 >= n_1 >= ... >= n_K``) and hold the whole
histogram of ``A``: ``h_j = n_j - n_{j+1}``. The likelihood used is therefore the exact one of that
histogram, the multinomial ``sum_j h_j log P(A = j)``, which equals the chain of conditional
binomials "``n_i`` accepted of the ``n_{i-1}`` that reached position ``i``":
``sum_i n_i log c_i + (n_{i-1} - n_i) log(1 - c_i)``. Treating each ``n_i`` as an independent
``Binomial(N, p_i)`` would count every accepted draft up to ``K`` times (the positions are nested,
hence dependent) and give intervals too narrow; it is not used. Counts that are not nested (a log
rebuilt from rounded rates can be off by a draft or two; tree drafting is not chained at all) are
refused with a sentence naming the position. Two assumptions remain: steps are independent (a
request's steps share its acceptance, so with few long requests the intervals are optimistic), and
``K`` is the same at every step.

Goodness of fit: the likelihood-ratio statistic ``G = 2 (l_saturated - l_model)`` against the
saturated model (a free ``c_i`` per position, ``K`` parameters), chi-square with ``K - k``
degrees of freedom (``k`` the model's parameters; no test when ``K <= k``), and
``AIC = 2 k - 2 l_model``. The best model is the lowest AIC; it *fits* at level ``0.05`` when its
p-value is at least that.

Intervals: a parametric bootstrap. ``B`` histograms are drawn from the fitted model's law of ``A``
(a fixed numpy seed, so a fit is reproducible), each is refitted, and the 2.5% and 97.5% percentiles
of the refits give the intervals of the parameters and of every derived quantity: ``p_i``, ``c_i`` and
``L`` at any ``K``, including ``K`` past the measured one (``extend``). Parameter uncertainty grows
with depth there (``log p_i`` is a sum of ``i`` uncertain terms), and the interval of ``L`` at ``K``
widens with ``K``. It says nothing about whether the model still holds past the measured depth: the
spread between the models' extensions is the other half of the uncertainty, and the figure shows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from specbench import acceptance
from specbench.errors import SpecbenchError

CONFIDENCE = 0.95
SIGNIFICANCE = 0.05
DEFAULT_BOOTSTRAP = 200
BOOTSTRAP_SEED = 20251125
# beta-geometric's a and b are fitted on the log scale within these bounds: a + b near e^20 is iid
# to within anything a count can show, and a, b near e^-12 put the whole mass of alpha at 0 or 1
_LOG_BOUNDS = (-12.0, 20.0)
# a + b past this: the Beta law's sd is below 0.0016 (at most sqrt(1/4 / 1e5)), which is iid for any count
IID_LIMIT = 1e5
# depth-decay's c1 and d on the logit scale: e^-30 from 0 or 1 is as good as there
_LOGIT_BOUNDS = (-30.0, 30.0)


@dataclass(frozen=True)
class Model:
    """One profile model: its name, parameter names and conditional rates ``c_1..c_K`` of parameters."""

    name: str
    parameters: tuple[str, ...]
    conditional: Callable[[Sequence[float], int], np.ndarray]
    description: str


def _iid(params: Sequence[float], k: int) -> np.ndarray:
    return np.full(k, float(params[0]))


def _beta_geometric(params: Sequence[float], k: int) -> np.ndarray:
    a, b = float(params[0]), float(params[1])
    depth = np.arange(k, dtype=np.float64)
    return (a + depth) / (a + b + depth)


def _depth_decay(params: Sequence[float], k: int) -> np.ndarray:
    c1, d = float(params[0]), float(params[1])
    return np.clip(c1 * d ** np.arange(k, dtype=np.float64), 0.0, 1.0)


MODELS: dict[str, Model] = {
    "iid": Model("iid", ("alpha",), _iid, "c_i = alpha"),
    "beta-geometric": Model("beta-geometric", ("a", "b"), _beta_geometric,
                            "alpha ~ Beta(a, b) per request; c_i = (a + i - 1) / (a + b + i - 1)"),
    "depth-decay": Model("depth-decay", ("c1", "d"), _depth_decay, "c_i = c1 d^(i - 1)"),
}
MODEL_NAMES: tuple[str, ...] = tuple(MODELS)


def get_model(name: str) -> Model:
    """The model called ``name``; anything else is an error naming the known ones."""
    if name not in MODELS:
        raise SpecbenchError(f"profile model must be one of {', '.join(MODEL_NAMES)}, got {name!r}")
    return MODELS[name]


def check_parameters(name: str, params: Sequence[float]) -> tuple[float, ...]:
    """Validate a model's parameters (one sentence per problem); return them as floats."""
    model = get_model(name)
    if isinstance(params, (str, bytes)) or not isinstance(params, Sequence) or len(params) != len(model.parameters):
        raise SpecbenchError(f"model {name} takes {len(model.parameters)} parameters "
                             f"({', '.join(model.parameters)}), got {params!r}")
    values = []
    for label, value in zip(model.parameters, params):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SpecbenchError(f"model {name}: {label} must be a finite number, got {value!r}")
        values.append(float(value))
    if name == "beta-geometric":
        for label, value in zip(model.parameters, values):
            if value <= 0:
                raise SpecbenchError(f"model beta-geometric: {label} must be > 0 (a Beta law's shape), got {value:g}")
    else:
        for label, value in zip(model.parameters, values):
            if not 0.0 <= value <= 1.0:
                raise SpecbenchError(f"model {name}: {label} must lie in [0, 1], got {value:g}")
    return tuple(values)


def conditional_rates(name: str, params: Sequence[float], num_spec_tokens: int) -> list[float]:
    """``c_1..c_K`` of the model ``name`` with ``params``."""
    values = check_parameters(name, params)
    return [float(c) for c in MODELS[name].conditional(values, acceptance.check_num_spec_tokens(num_spec_tokens))]


def rates(name: str, params: Sequence[float], num_spec_tokens: int) -> list[float]:
    """Unconditional ``p_1..p_K`` (any ``K``): the running products of the conditional rates."""
    return [float(p) for p in np.cumprod(conditional_rates(name, params, num_spec_tokens))]


def accepted_distribution(name: str, params: Sequence[float], num_spec_tokens: int) -> list[float]:
    """The exact law of ``A`` at ``K``: ``P(A = j) = p_j - p_{j+1}``, ``j = 0..K``."""
    return acceptance.accepted_distribution(rates(name, params, num_spec_tokens))


def beta_quantile_rates(a: float, b: float, num_components: int) -> list[float]:
    """The ``M`` equally likely per-request rates of the discretised Beta law: ``F^-1((m + 1/2) / M)``.

    What the synthetic simulation draws from (``specbench.verification.simulate_acceptance``); the
    exact law of ``A`` it simulates is ``p_i = (1/M) sum_m alpha_m^i`` (``mixture_rates``).
    """
    from scipy import stats

    check_parameters("beta-geometric", (a, b))
    levels = (np.arange(num_components, dtype=np.float64) + 0.5) / num_components
    return [float(x) for x in stats.beta.ppf(levels, a, b)]


def mixture_rates(component_rates: Sequence[float], num_spec_tokens: int) -> list[float]:
    """``p_i = (1/M) sum_m alpha_m^i``: unconditional rates when each request draws one of ``M`` rates."""
    values = np.asarray(component_rates, dtype=np.float64)
    powers = values[None, :] ** np.arange(1, num_spec_tokens + 1, dtype=np.float64)[:, None]
    return [float(min(1.0, max(0.0, p))) for p in powers.mean(axis=1)]


# ---- fitting -----------------------------------------------------------------------------------------


def nested_counts(num_drafts: int, accepted_per_position: Sequence[int]) -> np.ndarray:
    """``[N, n_1, ..., n_K]`` checked: whole numbers, ``N > 0``, nested (see the module docstring)."""
    values = [num_drafts, *accepted_per_position]
    if not accepted_per_position:
        raise SpecbenchError("the counts hold no draft position; a model needs at least one")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise SpecbenchError(f"counts must be whole numbers >= 0, got {value!r}")
    if num_drafts <= 0:
        raise SpecbenchError("zero drafts were verified, so there is no acceptance to fit a model to")
    for i in range(1, len(values)):
        if values[i] > values[i - 1]:
            before = "drafts" if i == 1 else f"position {i - 1}"
            raise SpecbenchError(
                f"position {i} accepted {values[i]} drafts, more than the {values[i - 1]} that {before} "
                f"{'counts' if i == 1 else 'accepted'}: the counts are not nested (chained acceptance), so no model "
                f"of A can be fitted to them")
    return np.asarray(values, dtype=np.float64)


def log_likelihood(conditional: np.ndarray, counts: np.ndarray) -> float:
    """``sum_i n_i log c_i + (n_{i-1} - n_i) log(1 - c_i)`` (the multinomial of ``A``, see above)."""
    from scipy.special import xlogy

    reached, accepted = counts[:-1], counts[1:]
    c = np.clip(conditional, 0.0, 1.0)
    return float(np.sum(xlogy(accepted, c) + xlogy(reached - accepted, 1.0 - c)))


def saturated_log_likelihood(counts: np.ndarray) -> float:
    """The log-likelihood of a free ``c_i`` per position: ``c_i = n_i / n_{i-1}``."""
    reached, accepted = counts[:-1], counts[1:]
    free = np.divide(accepted, reached, out=np.zeros_like(accepted), where=reached > 0)
    return log_likelihood(free, counts)


def _score(conditional: np.ndarray, counts: np.ndarray) -> np.ndarray:
    # d log-likelihood / d c_i; c kept off 0 and 1 so the derivative stays finite
    reached, accepted = counts[:-1], counts[1:]
    c = np.clip(conditional, 1e-15, 1.0 - 1e-15)
    return accepted / c - (reached - accepted) / (1.0 - c)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1.0 - 1e-9)
    return math.log(p / (1.0 - p))


# Each two-parameter model is optimised on an unbounded-ish scale with its exact gradient:
# beta-geometric on (log a, log b), depth-decay on (logit c1, logit d); the maps below go back.
def _natural(name: str, x: Sequence[float]) -> tuple[float, ...]:
    if name == "beta-geometric":
        return math.exp(x[0]), math.exp(x[1])
    return _sigmoid(x[0]), _sigmoid(x[1])


def _internal(name: str, params: Sequence[float]) -> np.ndarray:
    if name == "beta-geometric":
        return np.clip(np.log(params), *_LOG_BOUNDS)
    return np.clip([_logit(params[0]), _logit(params[1])], *_LOGIT_BOUNDS)


def _objective(name: str, counts: np.ndarray) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    k = len(counts) - 1
    depth = np.arange(k, dtype=np.float64)
    conditional_of = MODELS[name].conditional

    def value_and_gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
        params = _natural(name, x)
        c = conditional_of(params, k)
        score = _score(c, counts)
        if name == "beta-geometric":
            a, b = params
            total = (a + b + depth) ** 2
            jacobian = np.stack([a * b / total, -b * (a + depth) / total])
        else:
            jacobian = np.stack([c * (1.0 - params[0]), c * depth * (1.0 - params[1])])
        return -log_likelihood(c, counts), -(jacobian @ score)

    return value_and_gradient


def _mle(name: str, counts: np.ndarray, start: Sequence[float] | None = None) -> tuple[tuple[float, ...], float]:
    """Maximum-likelihood parameters and log-likelihood; ``start``: natural parameters to start from
    (the bootstrap starts each refit at the fit), else a few spread-out starts."""
    from scipy import optimize

    k = len(counts) - 1
    reached, accepted = counts[:-1], counts[1:]
    if name == "iid":  # closed form: accepted positions over reached positions
        alpha = float(accepted.sum() / reached.sum())
        return (alpha,), log_likelihood(MODELS[name].conditional((alpha,), k), counts)
    first = min(max(float(accepted[0] / reached[0]), 1e-6), 1 - 1e-6)
    if start is not None:  # a bootstrap refit: the fit, and for beta-geometric a moderate spread too
        starts = [_internal(name, start)]
        if name == "beta-geometric":
            starts.append(_internal(name, (first * 10.0, (1 - first) * 10.0)))
    elif name == "beta-geometric":
        starts = [_internal(name, (first * s, (1 - first) * s)) for s in (0.5, 3.0, 30.0, 1e4)]
        # and iid's own fit, at the largest a + b the bounds allow: beta-geometric nests iid, so its fit must be
        # no worse than iid's (the spread-out starts alone stopped short of it on counts where iid is the truth)
        alpha = min(max(float(accepted.sum() / reached.sum()), 1e-9), 1 - 1e-9)
        starts.append(_internal(name, (alpha * math.exp(_LOG_BOUNDS[1]), (1 - alpha) * math.exp(_LOG_BOUNDS[1]))))
    else:
        starts = [_internal(name, (first, d)) for d in (0.999, 0.9, 0.6)]
    bounds = [_LOG_BOUNDS] * 2 if name == "beta-geometric" else [_LOGIT_BOUNDS] * 2
    objective = _objective(name, counts)
    best = None
    for x0 in starts:
        result = optimize.minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds)
        if best is None or result.fun < best.fun:
            best = result
    return _natural(name, best.x), -float(best.fun)


@dataclass(frozen=True)
class ModelFit:
    """One model fitted to one set of counts (see ``fit_model``)."""

    model: str
    parameters: dict[str, float]
    parameters_ci: dict[str, tuple[float, float]]
    log_likelihood: float
    aic: float
    g_statistic: float
    degrees_of_freedom: int
    p_value: float | None  # None: as many parameters as positions, nothing left to test
    num_spec_tokens: int
    num_drafts: int
    bootstrap: np.ndarray = field(repr=False)  # [B, k] refitted parameters

    @property
    def values(self) -> tuple[float, ...]:
        return tuple(self.parameters.values())

    @property
    def fits(self) -> bool | None:
        """Whether the GOF test keeps the model at ``SIGNIFICANCE`` (None: not testable)."""
        return None if self.p_value is None else self.p_value >= SIGNIFICANCE

    def rates(self, num_spec_tokens: int) -> list[float]:
        return rates(self.model, self.values, num_spec_tokens)

    def extend(self, num_spec_tokens: int) -> Extension:
        """Rates, conditional rates and ``L`` up to ``num_spec_tokens`` with bootstrap intervals."""
        return extend(self, num_spec_tokens)


@dataclass(frozen=True)
class Extension:
    """A fit's predictions at ``K`` positions: point values and ``CONFIDENCE`` percentile intervals."""

    num_spec_tokens: int
    rates: list[float]
    rates_ci: list[tuple[float, float]]
    conditional_rates: list[float]
    conditional_rates_ci: list[tuple[float, float]]
    mean_acceptance_length: float
    mean_acceptance_length_ci: tuple[float, float]
    lengths_ci: list[tuple[float, float]]  # the interval of L at K' = 1..K


def _percentiles(samples: np.ndarray) -> list[tuple[float, float]]:
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(samples, [tail, 100 - tail], axis=0)
    return [(float(lo), float(hi)) for lo, hi in zip(np.atleast_1d(low), np.atleast_1d(high))]


def _check_bootstrap(num_bootstrap: int) -> int:
    if isinstance(num_bootstrap, bool) or not isinstance(num_bootstrap, int) or num_bootstrap < 20:
        raise SpecbenchError(f"the bootstrap needs a whole number of at least 20 resamples, got {num_bootstrap!r}")
    return num_bootstrap


def fit_model(name: str, num_drafts: int, accepted_per_position: Sequence[int], *,
              num_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = BOOTSTRAP_SEED) -> ModelFit:
    """Fit ``name`` by maximum likelihood to nested counts, with bootstrap intervals and its GOF test."""
    from scipy import stats

    model = get_model(name)
    counts = nested_counts(num_drafts, accepted_per_position)
    _check_bootstrap(num_bootstrap)
    k = len(counts) - 1
    params, loglik = _mle(name, counts)
    g = max(0.0, 2.0 * (saturated_log_likelihood(counts) - loglik))
    df = k - len(model.parameters)
    p_value = float(stats.chi2.sf(g, df)) if df > 0 else None
    # parametric bootstrap: histograms of A from the fitted law, refitted
    generator = np.random.default_rng(seed)
    law = np.clip(acceptance.accepted_distribution(np.cumprod(model.conditional(params, k))), 0.0, None)
    histograms = generator.multinomial(int(num_drafts), law / law.sum(), size=num_bootstrap)
    refits = []
    for histogram in histograms:
        at_least = np.cumsum(histogram[::-1])[::-1]  # at_least[i] = #(A >= i)
        refits.append(_mle(name, at_least.astype(np.float64), start=params)[0])
    samples = np.asarray(refits, dtype=np.float64)
    intervals = _percentiles(samples)
    if name == "beta-geometric":
        # refits with a + b past IID_LIMIT are the iid limit, where the likelihood is flat in a + b and
        # the optimiser stops anywhere: when more than the upper tail of them gets there, no finite upper end
        at_limit = (samples.sum(axis=1) >= IID_LIMIT).mean() > (1 - CONFIDENCE) / 2
        intervals = [(low, math.inf if at_limit else high) for low, high in intervals]
    return ModelFit(
        model=name, parameters=dict(zip(model.parameters, params)),
        parameters_ci=dict(zip(model.parameters, intervals)), log_likelihood=loglik,
        aic=2 * len(model.parameters) - 2 * loglik, g_statistic=g, degrees_of_freedom=df, p_value=p_value,
        num_spec_tokens=k, num_drafts=int(num_drafts), bootstrap=samples,
    )


def extend(fit: ModelFit, num_spec_tokens: int) -> Extension:
    """``fit``'s rates at ``K = num_spec_tokens`` (any ``K``, measured or not) with bootstrap intervals."""
    k = acceptance.check_num_spec_tokens(num_spec_tokens)
    if k > acceptance.MAX_NUM_SPEC_TOKENS:
        raise SpecbenchError(f"K (draft tokens per step) must be at most {acceptance.MAX_NUM_SPEC_TOKENS}, got {k}")
    model = MODELS[fit.model]
    conditional = np.array([model.conditional(sample, k) for sample in fit.bootstrap])  # [B, K]
    unconditional = np.cumprod(conditional, axis=1)
    lengths = 1.0 + np.cumsum(unconditional, axis=1)
    point_c = model.conditional(fit.values, k)
    point_p = np.cumprod(point_c)
    return Extension(
        num_spec_tokens=k, rates=[float(p) for p in point_p], rates_ci=_percentiles(unconditional),
        conditional_rates=[float(c) for c in point_c], conditional_rates_ci=_percentiles(conditional),
        mean_acceptance_length=float(1.0 + point_p.sum()), mean_acceptance_length_ci=_percentiles(lengths)[-1],
        lengths_ci=_percentiles(lengths),
    )


@dataclass(frozen=True)
class Comparison:
    """Every model fitted to the same counts, and the one with the lowest AIC."""

    fits: dict[str, ModelFit]
    best: str

    @property
    def best_fit(self) -> ModelFit:
        return self.fits[self.best]

    @property
    def any_fits(self) -> bool | None:
        """Whether some model passes the GOF test (None: no model is testable at this ``K``)."""
        tested = [f.fits for f in self.fits.values() if f.fits is not None]
        return None if not tested else any(tested)


def fit_all(num_drafts: int, accepted_per_position: Sequence[int], *, models: Sequence[str] = MODEL_NAMES,
            num_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = BOOTSTRAP_SEED) -> Comparison:
    """``fit_model`` for each of ``models``; the best is the lowest AIC (ties: the earlier, simpler one)."""
    if not models:
        raise SpecbenchError("name at least one profile model to fit")
    fits = {name: fit_model(name, num_drafts, accepted_per_position, num_bootstrap=num_bootstrap, seed=seed)
            for name in models}
    best = min(fits, key=lambda name: (round(fits[name].aic, 9), list(fits).index(name)))
    return Comparison(fits, best)
