"""Acceptance profiles, and scenario files that name and cite them.

A *profile* is what the synthetic mode simulates: ``K`` and the unconditional per-position rates
``p_i = P(A >= i)``, given as the rates themselves, as a mean acceptance length ``L`` turned into
rates by a schedule (``min-variance`` or ``geometric``, see ``specbench.acceptance``), or as the
geometric schedule's per-draft rate ``alpha`` (``p_i = alpha^i``).

A *scenario* is a TOML file holding one or more profiles, each citing where its numbers come
from. The schema (every field optional unless marked)::

    name = "eagle3-llama3.1-8b"        # default: the file's stem
    description = "one line on what this is"
    source = "where the numbers come from (paper, table, test file, issue)"
    cost_ratio = 0.05                  # draft step / target step, for the speed-up model
    num_spec_tokens = 3                # K: a whole number (at most 64) or a list; default len(rates)
    rates = [0.73, 0.52, 0.35]         # exactly one of rates, acceptance_length or alpha
    acceptance_length = 2.5            # a number or a list of numbers (needs num_spec_tokens)
    schedule = "geometric"             # how a length becomes rates: min-variance (default) or geometric
    alpha = 0.8                        # p_i = alpha^i: a number in [0, 1] or a list (needs num_spec_tokens)

    model = "beta-geometric"           # instead of the three above: a profile model (specbench.profile_models)
    a = 6.0                            # with its parameters: iid takes alpha; beta-geometric a, b (> 0);
    b = 2.5                            # depth-decay c1, d (in [0, 1]); each a number
    spread_components = 1024           # beta-geometric only: M, the Beta law's equally likely quantiles
                                       # a request draws from (a power of two, default 1024)

    [[profiles]]                       # several profiles in one file: each table takes
    name = "..."                       # name, description, source, cost_ratio,
    rates = [0.85]                     # num_spec_tokens and rates | acceptance_length (+ schedule)
                                       # | alpha; name, source and cost_ratio default to the top level's

    [fit]                              # written by `specbench profile fit`: the counts, intervals and
    num_drafts = 120000                # raw rates behind `rates`; for people, the sweep ignores it

A model profile's ``rates`` are the exact law the sweep simulates: ``iid`` and ``depth-decay`` give
their ``p_i`` (plain conditional rates, no spread); ``beta-geometric`` gives the law of its ``M``-point
quantile mixture (``Profile.request_rates``), which each simulated request draws its own rate from
(``simulate_acceptance``'s per-request spread).

A file has either a top-level ``rates``/``acceptance_length``/``alpha`` (one profile) or
``[[profiles]]``, not both. A list of ``num_spec_tokens``, ``acceptance_length`` or ``alpha``
expands into one profile per combination. Profile names must differ within a file. Anything
wrong is a ``SpecbenchError`` naming the file, the field and the value.

Every profile, from a file or from options, has ``K`` at most ``acceptance.MAX_NUM_SPEC_TOKENS``
(64): the one limit ``sweep``, ``kernels`` and ``profile fit`` share, checked before any list of
``K`` rates is built.

``load_scenario(path)`` is the public entry point (``specbench sweep --scenario`` and any other
command that takes a scenario use it). ``path`` may also be a bare name: ``NAME`` is looked up as
``scenarios/NAME.toml`` under the current folder, then among the scenarios shipped inside the
package (``specbench/scenarios/NAME.toml``, where the default scenario lives).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench import acceptance
from specbench.errors import SpecbenchError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

EMBEDDED_DIR = Path(__file__).resolve().parent / "scenarios"
DEFAULT_SCENARIO = EMBEDDED_DIR / "default.toml"  # what `specbench sweep` runs with no profile option

_MODEL_FIELDS = ("model", "a", "b", "c1", "d", "spread_components")
_PROFILE_FIELDS = ("name", "description", "source", "cost_ratio", "num_spec_tokens", "rates", "acceptance_length",
                   "schedule", "alpha", *_MODEL_FIELDS)
_VALUE_FIELDS = ("rates", "acceptance_length", "alpha")
DEFAULT_SPREAD_COMPONENTS = 1024
# `fit`: what `specbench profile fit` measured (counts, intervals, raw rates); kept for people, not read
_TOP_FIELDS = (*_PROFILE_FIELDS, "profiles", "fit")


@dataclass(frozen=True)
class Profile:
    """One acceptance profile: ``K`` and its ``K`` unconditional rates (validated).

    - ``name``: a label for tables and charts.
    - ``rates``: ``p_1..p_K``, each in [0, 1], non-increasing.
    - ``acceptance_length``: the configured ``L`` when the profile was given as a length, else None.
    - ``source``: where the numbers come from (empty when typed on the command line).
    - ``cost_ratio``: draft/target step cost from the scenario, or None (the caller's default).
    - ``schedule``: ``min-variance`` or ``geometric`` when the rates come from a length or an
      ``alpha`` (``geometric``), None when the rates were given.
    - ``alpha``: the geometric schedule's per-draft rate (given, or solved from ``L``), else None.
    - ``model``, ``model_parameters``: the profile model and its parameters when the profile is one
      (``specbench.profile_models``), else None.
    - ``request_rates``: the ``M`` equally likely per-request rates a beta-geometric profile is
      simulated with (per-request spread); None for every profile without spread.
    """

    name: str
    num_spec_tokens: int
    rates: tuple[float, ...]
    acceptance_length: float | None = None
    source: str = ""
    cost_ratio: float | None = None
    schedule: str | None = None
    alpha: float | None = None
    model: str | None = None
    model_parameters: tuple[float, ...] | None = None
    request_rates: tuple[float, ...] | None = None


def make_model_profile(
    num_spec_tokens: int,
    model: str,
    parameters: tuple[float, ...] | list[float],
    *,
    spread_components: int = DEFAULT_SPREAD_COMPONENTS,
    name: str | None = None,
    source: str = "",
    cost_ratio: float | None = None,
) -> Profile:
    """A validated ``Profile`` of a profile model (see the module docstring for what it simulates)."""
    from specbench import profile_models

    check_num_spec_tokens(num_spec_tokens)
    params = profile_models.check_parameters(model, parameters)
    if cost_ratio is not None:
        cost_ratio = acceptance.check_cost_ratio(cost_ratio)
    label = ", ".join(f"{key}={value:g}" for key, value in zip(profile_models.MODELS[model].parameters, params))
    name = name if name is not None else f"{model} {label}"
    request_rates = None
    if model == "beta-geometric":
        m = spread_components
        if isinstance(m, bool) or not isinstance(m, int) or m < 1 or m > 1 << 16 or m & (m - 1):
            raise SpecbenchError(f"spread_components must be a power of two from 1 to 65536, got {m!r}")
        request_rates = tuple(profile_models.beta_quantile_rates(*params, m))
        rates = profile_models.mixture_rates(request_rates, num_spec_tokens)
    else:
        rates = profile_models.rates(model, params, num_spec_tokens)
    resolved = acceptance.validate_rates(rates, num_spec_tokens)
    alpha = params[0] if model == "iid" else None
    return Profile(name, num_spec_tokens, tuple(resolved), None, source, cost_ratio,
                   "geometric" if model == "iid" else None, alpha, model, params, request_rates)


def make_profile(
    num_spec_tokens: int,
    *,
    rates: list[float] | tuple[float, ...] | None = None,
    acceptance_length: float | None = None,
    alpha: float | None = None,
    schedule: str = "min-variance",
    name: str | None = None,
    source: str = "",
    cost_ratio: float | None = None,
) -> Profile:
    """A validated ``Profile`` from exactly one of ``rates``, ``acceptance_length`` or ``alpha``.

    ``schedule`` (``min-variance`` or ``geometric``) turns a length into rates. The default name
    shows what was given: ``L=2.5 min-variance``, ``L=2.5 geometric``, ``alpha=0.8`` or the rates.
    """
    acceptance.check_schedule(schedule)
    check_num_spec_tokens(num_spec_tokens)
    resolved = acceptance.resolve_rates(num_spec_tokens, rates, acceptance_length, schedule=schedule, alpha=alpha)
    if cost_ratio is not None:
        cost_ratio = acceptance.check_cost_ratio(cost_ratio)
    length = None if acceptance_length is None else float(acceptance_length)
    if alpha is not None:
        schedule_used, alpha_value = "geometric", float(alpha)
    elif length is not None:
        schedule_used = schedule
        alpha_value = acceptance.length_to_alpha(length, num_spec_tokens) if schedule == "geometric" else None
    else:
        schedule_used, alpha_value = None, None
    if name is None:
        name = (f"alpha={alpha_value:g}" if alpha is not None else f"L={length:g} {schedule}" if length is not None
                else acceptance.format_rates(resolved))
    return Profile(name, num_spec_tokens, tuple(resolved), length, source, cost_ratio, schedule_used, alpha_value)


def check_num_spec_tokens(num_spec_tokens: int) -> int:
    """Refuse a profile of more than ``MAX_NUM_SPEC_TOKENS`` drafts (and a ``K`` that is no whole number >= 1)."""
    acceptance.check_num_spec_tokens(num_spec_tokens)
    if num_spec_tokens > acceptance.MAX_NUM_SPEC_TOKENS:
        raise SpecbenchError(f"K (draft tokens per step) must be at most {acceptance.MAX_NUM_SPEC_TOKENS}, got "
                             f"{num_spec_tokens}")
    return num_spec_tokens


@dataclass(frozen=True)
class Scenario:
    """A loaded scenario file: its name, description, citation and expanded profiles."""

    name: str
    description: str
    source: str
    path: Path
    profiles: tuple[Profile, ...]


# where a bare name is looked up: the current folder's scenarios/, the embedded default, and the
# scenarios/ of the checkout specbench runs from (an editable install), so names work from any folder
_SCENARIO_FOLDERS = (Path("scenarios"), EMBEDDED_DIR, Path(__file__).resolve().parent.parent / "scenarios")


def find_scenario(name_or_path: str | Path) -> Path:
    """The file a ``--scenario`` value points to: a path, or a bare name (see the module docstring)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    if path.suffix != ".toml" and path.parent == Path("."):
        for folder in _SCENARIO_FOLDERS:
            candidate = folder / f"{path.name}.toml"
            if candidate.is_file():
                return candidate
    if str(name_or_path) and path.is_dir():
        raise SpecbenchError(f"scenario {str(name_or_path)!r} is a folder; give a .toml file or a scenario name")
    known = sorted({p.stem for folder in _SCENARIO_FOLDERS for p in folder.glob("*.toml")})
    raise SpecbenchError(f"scenario file {str(name_or_path)!r} does not exist (known scenarios: {', '.join(known)})")


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Read, validate and expand a scenario file into profiles.

    Args:
        name_or_path: a path to a ``.toml`` file, or a bare scenario name (see the module docstring).

    Returns:
        ``Scenario(name, description, source, path, profiles)``; ``profiles`` holds one validated
        ``Profile`` per (entry, K, length) combination, in file order.

    Raises:
        SpecbenchError: one sentence naming the file, the field and the bad value.
    """
    path = find_scenario(name_or_path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecbenchError(f"scenario {path} is not valid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecbenchError(f"cannot read scenario {path}: {exc}") from exc
    return _parse(data, path)


def _parse(data: dict[str, Any], path: Path) -> Scenario:
    _check_fields(data, _TOP_FIELDS, "", path)
    if "fit" in data and not isinstance(data["fit"], dict):
        raise _error(path, "fit", data["fit"], "must be a table ([fit]), as `specbench profile fit` writes it")
    name = _text(data, "name", path.stem, "", path)
    description = _text(data, "description", "", "", path)
    source = _text(data, "source", "", "", path)
    cost_ratio = _cost_ratio(data, None, "", path)
    if "profiles" in data:
        entries = data["profiles"]
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise _error(path, "profiles", entries, "must be a non-empty array of tables ([[profiles]])")
        clash = [key for key in (*_VALUE_FIELDS, *_MODEL_FIELDS, "num_spec_tokens", "schedule") if key in data]
        if clash:
            raise _error(path, clash[0], data[clash[0]], "belongs inside each [[profiles]] table in a file with them")
        profiles: list[Profile] = []
        for index, entry in enumerate(entries):
            prefix = f"profiles[{index}]."
            _check_fields(entry, _PROFILE_FIELDS, prefix, path)
            entry_name = _text(entry, "name", f"{name}-{index + 1}", prefix, path)
            entry_source = _text(entry, "source", source, prefix, path)
            _text(entry, "description", "", prefix, path)
            entry_cost = _cost_ratio(entry, cost_ratio, prefix, path)
            profiles += _expand(entry, entry_name, entry_source, entry_cost, prefix, path)
    else:
        profiles = _expand(data, name, source, cost_ratio, "", path)
    seen: set[str] = set()
    for profile in profiles:
        if profile.name in seen:
            raise SpecbenchError(f"scenario {path}: two profiles are named {profile.name!r}; give each its own name")
        seen.add(profile.name)
    return Scenario(name, description, source, path, tuple(profiles))


_MODEL_PARAMETERS = {"iid": ("alpha",), "beta-geometric": ("a", "b"), "depth-decay": ("c1", "d")}


def _expand_model(entry: dict, name: str, source: str, cost_ratio: float | None, prefix: str,
                  path: Path) -> list[Profile]:
    model = _text(entry, "model", "", prefix, path)
    if model not in _MODEL_PARAMETERS:
        raise _error(path, prefix + "model", model, f"must be one of {', '.join(_MODEL_PARAMETERS)}")
    wanted = _MODEL_PARAMETERS[model]
    stray = [key for key in ("rates", "acceptance_length", "schedule", "alpha", "a", "b", "c1", "d",
                             "spread_components")
             if key in entry and key not in wanted and not (key == "spread_components" and model == "beta-geometric")]
    if stray:
        raise _error(path, prefix + stray[0], entry[stray[0]], f"cannot go with {prefix}model = {model!r} "
                     f"(it takes {', '.join(prefix + w for w in wanted)})")
    missing = [key for key in wanted if key not in entry]
    if missing:
        raise SpecbenchError(f"scenario {path}: {prefix}model = {model!r} needs the field {prefix}{missing[0]}")
    if "num_spec_tokens" not in entry:
        raise SpecbenchError(f"scenario {path}: field {prefix}num_spec_tokens is required with {prefix}model")
    ks = _whole_numbers(entry, prefix, path, default=None)
    profiles = []
    for k in ks:
        label = name if len(ks) == 1 else f"{name} (K={k})"
        try:
            profiles.append(make_model_profile(
                k, model, [entry[key] for key in wanted],
                spread_components=entry.get("spread_components", DEFAULT_SPREAD_COMPONENTS),
                name=label, source=source, cost_ratio=cost_ratio))
        except SpecbenchError as exc:
            raise SpecbenchError(f"scenario {path}, {prefix}model {model}: {exc}") from exc
    return profiles


def _expand(entry: dict, name: str, source: str, cost_ratio: float | None, prefix: str, path: Path) -> list[Profile]:
    if "model" in entry:
        return _expand_model(entry, name, source, cost_ratio, prefix, path)
    stray = [key for key in _MODEL_FIELDS if key in entry]
    if stray:
        raise _error(path, prefix + stray[0], entry[stray[0]], f"belongs to a profile model; add {prefix}model")
    given = [key for key in _VALUE_FIELDS if key in entry]
    if len(given) != 1:
        got = " and ".join(prefix + key for key in given) if given else "none"
        raise SpecbenchError(f"scenario {path}: give exactly one of the fields {prefix}rates, "
                             f"{prefix}acceptance_length or {prefix}alpha, got {got}")
    field = given[0]
    schedule = _text(entry, "schedule", "min-variance", prefix, path)
    if "schedule" in entry:
        if field != "acceptance_length":
            raise _error(path, prefix + "schedule", schedule,
                         f"turns acceptance_length into rates and cannot go with {prefix}{field}")
        if schedule not in acceptance.SCHEDULES:
            raise _error(path, prefix + "schedule", schedule, f"must be one of {', '.join(acceptance.SCHEDULES)}")
    if field == "rates":
        rates = entry["rates"]
        if not isinstance(rates, list) or not rates:
            raise _error(path, prefix + "rates", rates, "must be a non-empty list of numbers")
        ks = _whole_numbers(entry, prefix, path, default=len(rates))
        values: list = [None]
    else:
        if "num_spec_tokens" not in entry:
            raise SpecbenchError(f"scenario {path}: field {prefix}num_spec_tokens is required with {field}")
        ks = _whole_numbers(entry, prefix, path, default=None)
        raw = entry[field]
        values = raw if isinstance(raw, list) else [raw]
        if not values:
            raise _error(path, prefix + field, raw, "must be a number or a non-empty list of numbers")
    symbol = {"acceptance_length": "L", "alpha": "alpha"}.get(field)
    profiles = []
    for k in ks:
        for value in values:
            label = name if len(ks) * len(values) == 1 else f"{name} (K={k}" + (
                f", {symbol}={value:g})" if isinstance(value, (int, float)) and not isinstance(value, bool) else ")"
            )
            keywords = {"rates": entry["rates"]} if field == "rates" else {field: value}
            try:
                profiles.append(make_profile(k, **keywords, schedule=schedule, name=label, source=source,
                                             cost_ratio=cost_ratio))
            except SpecbenchError as exc:
                raise SpecbenchError(f"scenario {path}, field {prefix}{field}: {exc}") from exc
    return profiles


def _whole_numbers(entry: dict, prefix: str, path: Path, default: int | None) -> list[int]:
    raw = entry.get("num_spec_tokens", default)
    values = raw if isinstance(raw, list) else [raw]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
        raise _error(path, prefix + "num_spec_tokens", raw, "must be a whole number >= 1 or a list of them")
    return values


def _check_fields(table: dict, allowed: tuple[str, ...], prefix: str, path: Path) -> None:
    for key in table:
        if key not in allowed:
            raise SpecbenchError(
                f"scenario {path}: unknown field {prefix}{key} (allowed: {', '.join(allowed)})"
            )


def _text(table: dict, key: str, default: str, prefix: str, path: Path) -> str:
    value = table.get(key, default)
    if not isinstance(value, str):
        raise _error(path, prefix + key, value, "must be a string")
    return value


def _cost_ratio(table: dict, default: float | None, prefix: str, path: Path) -> float | None:
    if "cost_ratio" not in table:
        return default
    try:
        return acceptance.check_cost_ratio(table["cost_ratio"])
    except SpecbenchError as exc:
        raise SpecbenchError(f"scenario {path}, field {prefix}cost_ratio: {exc}") from exc


def _error(path: Path, field: str, value: Any, rule: str) -> SpecbenchError:
    return SpecbenchError(f"scenario {path}: field {field} {rule}, got {value!r}")
