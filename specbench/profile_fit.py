"""Acceptance profiles from a real server: vLLM's spec-decode counters or log line, and (``profile_sources``)
per-request histograms of vLLM and SGLang and SGLang's mean acceptance length.

The vLLM sources read here, both from its V1 engine (``vllm/v1/spec_decode/metrics.py``, as of vLLM 0.9-0.11):

- A Prometheus text scrape of ``/metrics``. The counters (with the ``_total`` suffix the Python
  client adds, ``_created`` companions and any other labels, such as ``model_name`` and
  ``engine``) are ``vllm:spec_decode_num_drafts`` (verification steps that had drafts),
  ``vllm:spec_decode_num_draft_tokens``, ``vllm:spec_decode_num_accepted_tokens`` and
  ``vllm:spec_decode_num_accepted_tokens_per_pos`` with a ``position`` label ``0..K-1`` (drafts
  whose position ``i`` was accepted, so ``p_{i+1} = per_pos[i] / num_drafts``). Series of several
  engines (data parallel) are summed; one scrape gives the counts since the server started, two
  (before and after) the counts of the interval between them.
- The log line vLLM prints every few seconds::

      SpecDecoding metrics: Mean acceptance length: 2.61, Accepted throughput: 40.1 tokens/s,
      Drafted throughput: 75.0 tokens/s, Accepted: 401 tokens, Drafted: 750 tokens,
      Per-position acceptance rate: 0.731, 0.519, 0.360, Avg Draft acceptance rate: 53.5%

  (one line). Each line covers the drafts since the previous one: ``Drafted / K`` of them, ``K``
  the number of per-position rates; lines are combined by adding their counts (each line weighted
  by its drafts), the per-position counts rebuilt from rates printed to three decimals.

``fit_profile`` turns the counts into unconditional rates with 95% Wilson intervals, the mean
acceptance length, and where the measured rates rise with position (noise can do that) the nearest
non-increasing profile (least squares, every position weighted by the same draft count).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from specbench import acceptance, profile_sources
from specbench.errors import SpecbenchError

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POSITION)
MODEL_LABELS = ("model_name", "model")
LOG_MARKER = "SpecDecoding metrics:"
CONFIDENCE = 0.95

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(rf'\s*({_NAME})\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_LOG_FIELDS = {
    "length": re.compile(r"Mean acceptance length:\s*([0-9.]+)"),
    "accepted": re.compile(r"Accepted:\s*(\d+)\s*tokens"),
    "drafted": re.compile(r"Drafted:\s*(\d+)\s*tokens"),
    "rates": re.compile(r"Per-position acceptance rate:\s*((?:[0-9.]+(?:,\s*)?)+)"),
}
_LOG_TIME = re.compile(r"(\d{2}-\d{2} \d{2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})")


@dataclass
class Counts:
    """Spec-decode counts over some span: drafts, draft tokens, accepted tokens, accepted per position."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_position: list[int]
    sources: list[str] = field(default_factory=list)
    model: str | None = None
    span: str | None = None
    notes: list[str] = field(default_factory=list)
    kind: str = "vllm-prometheus"  # the source, a key of profile_sources.DEFINITIONS
    per_request_mean_length: float | None = None  # per-request sources: the unweighted mean over requests

    @property
    def definition(self) -> profile_sources.Definition:
        """How the source defines its acceptance length, and what specbench does with it."""
        return profile_sources.DEFINITIONS[self.kind]


@dataclass(frozen=True)
class FittedProfile:
    """What ``fit_profile`` returns; ``rates`` are the valid (non-increasing) ones a sweep can run."""

    num_spec_tokens: int
    num_drafts: int
    measured_rates: list[float]
    rates: list[float]
    ci_low: list[float]
    ci_high: list[float]
    mean_acceptance_length: float
    non_increasing: bool
    counts: Counts


# ---- Prometheus text scrapes -------------------------------------------------------------------


def _unescape(value: str) -> str:
    return value.replace("\\\\", "\0").replace('\\"', '"').replace("\\n", "\n").replace("\0", "\\")


def _labels(text: str, where: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    position = 0
    text = text.strip()
    while position < len(text):
        match = _LABEL.match(text, position)
        if not match:
            raise SpecbenchError(f"{where}: cannot read the labels {{{text}}}")
        labels[match.group(1)] = _unescape(match.group(2))
        position = match.end()
    return labels


def _counter_name(name: str) -> str | None:
    # the Python client writes a counter `x` as `x_total` (and `x_created`, its start time)
    base = name.removesuffix("_total")
    return base if base in COUNTERS else None


def read_scrape(path: Path, model: str | None = None) -> tuple[dict[tuple, float], dict[str, float]]:
    """The spec-decode series of one scrape: ``{(counter, labels...): value}`` and the ``_created`` times.

    Lines that are not spec-decode counters are read (a malformed one is an error naming its line)
    and left out. ``model`` keeps only series whose model label has that value.
    """
    series: dict[tuple, float] = {}
    created: dict[str, float] = {}
    models: set[str] = set()
    for number, line in enumerate(_lines(path), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        where = f"{path}:{number}"
        if not match:
            raise SpecbenchError(f"{where}: not a Prometheus sample line: {line[:80]!r}")
        name, label_text, value_text = match.group(1), match.group(2) or "", match.group(3)
        try:
            value = float(value_text)
        except ValueError:
            raise SpecbenchError(f"{where}: the value {value_text!r} of {name} is not a number") from None
        is_created = name.endswith("_created") and name.removesuffix("_created") in COUNTERS
        counter = _counter_name(name)
        if counter is None and not is_created:
            continue
        labels = _labels(label_text, where)
        found = next((labels[key] for key in MODEL_LABELS if key in labels), None)
        if found is not None:
            models.add(found)
        if model is not None and found != model:
            continue
        if is_created:
            created[name] = min(created.get(name, math.inf), value)
            continue
        if not math.isfinite(value) or value < 0:
            raise SpecbenchError(f"{where}: counter {name} has the value {value_text}, not a count")
        key = (counter, *sorted(labels.items()))
        if key in series:
            raise SpecbenchError(f"{where}: {name} with these labels appears twice in one scrape")
        series[key] = value
    if model is not None and model not in models:
        raise SpecbenchError(f"{path} has no spec-decode series of model {model!r} "
                             f"(models there: {', '.join(sorted(models)) or 'none'})")
    if model is None and len(models) > 1:
        raise SpecbenchError(f"{path} holds several models ({', '.join(sorted(models))}); pick one with --model")
    return series, created


def _sum_counts(series: dict[tuple, float], path: str) -> Counts:
    totals: dict[str, float] = defaultdict(float)
    positions: dict[int, float] = defaultdict(float)
    for (counter, *labels), value in series.items():
        if counter == PER_POSITION:
            label_map = dict(labels)
            try:
                position = int(label_map["position"])
            except (KeyError, ValueError):
                raise SpecbenchError(f"{path}: a {PER_POSITION} series has no whole-number position label "
                                     f"({label_map})") from None
            positions[position] += value
        else:
            totals[counter] += value
    for counter in (DRAFTS, ACCEPTED):
        if counter not in totals:
            raise SpecbenchError(f"{path} has no {counter} counter: is speculative decoding on, and is this vLLM's "
                                 f"/metrics?")
    if not positions:
        raise SpecbenchError(f"{path} has no {PER_POSITION} series (per-position counts need vLLM 0.9 or newer)")
    num_spec = _checked_num_spec(max(positions) + 1, path)
    missing = [i for i in range(num_spec) if i not in positions]
    if missing:
        raise SpecbenchError(f"{path}: {PER_POSITION} has positions up to {num_spec - 1} but not {missing[0]}")
    return Counts(num_drafts=round(totals[DRAFTS]), num_draft_tokens=round(totals.get(DRAFT_TOKENS, 0.0)),
                  num_accepted_tokens=round(totals[ACCEPTED]),
                  accepted_per_position=[round(positions[i]) for i in range(num_spec)], sources=[path])


def _checked_num_spec(num_spec: int, where: str) -> int:
    # the limit every profile has (a scenario with more drafts would be refused by the sweep that reads it)
    if num_spec > acceptance.MAX_NUM_SPEC_TOKENS:
        raise SpecbenchError(f"{where}: the server drafted K = {num_spec} tokens a step; specbench profiles hold at "
                             f"most K = {acceptance.MAX_NUM_SPEC_TOKENS}")
    return num_spec


def counts_from_scrapes(paths: list[Path], model: str | None = None) -> Counts:
    """Counts of one scrape (since the server started) or of the interval between two."""
    if len(paths) not in (1, 2):
        raise SpecbenchError(f"give one Prometheus scrape, or two (before and after), got {len(paths)}")
    after_series, created = read_scrape(paths[-1], model)
    if len(paths) == 1:
        counts = _sum_counts(after_series, str(paths[0]))
        start = min(created.values(), default=None)
        counts.span = None if start is None else f"since the counters were created ({_utc(start)}) until the scrape"
    else:
        before_series, _ = read_scrape(paths[0], model)
        difference = {}
        for key, value in after_series.items():
            before = before_series.get(key, 0.0)
            if value < before:
                name, *labels = key
                label_text = ",".join(f'{k}="{v}"' for k, v in labels)
                raise SpecbenchError(f"{name}{{{label_text}}} went down from {before:g} in {paths[0]} to {value:g} in "
                                     f"{paths[1]}: either the two files are in the wrong order (give the earlier "
                                     f"scrape first) or the server restarted between the scrapes (take both from one "
                                     f"run)")
            difference[key] = value - before
        gone = [key for key in before_series if key not in after_series]
        if gone:
            raise SpecbenchError(f"{paths[1]} lacks the series {gone[0][0]} {dict(gone[0][1:])} that {paths[0]} has: "
                                 f"the server restarted or the scrapes come from different servers")
        counts = _sum_counts(difference, f"{paths[1]} - {paths[0]}")
        counts.sources = [str(p) for p in paths]
        counts.span = f"between the scrapes {paths[0].name} and {paths[1].name}"
    counts.model = model or _only_model(paths[-1])
    return counts


def _only_model(path: Path) -> str | None:
    for line in _lines(path):
        if line.startswith("vllm:spec_decode"):
            match = re.search(r'model_name="((?:[^"\\]|\\.)*)"', line)
            if match:
                return _unescape(match.group(1))
    return None


def _utc(seconds: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="seconds")


# ---- vLLM log lines ------------------------------------------------------------------------------


def counts_from_logs(paths: list[Path]) -> Counts:
    """Counts of every ``SpecDecoding metrics`` line in ``paths``, added up (weighted by drafts)."""
    num_spec = None
    drafts = draft_tokens = accepted = 0
    per_position: list[float] = []
    times: list[str] = []
    lines_read = 0
    for path in paths:
        for number, line in enumerate(_lines(path), start=1):
            if LOG_MARKER not in line:
                continue
            where = f"{path}:{number}"
            found = {key: pattern.search(line) for key, pattern in _LOG_FIELDS.items()}
            lacking = [key for key in ("accepted", "drafted", "rates") if not found[key]]
            if lacking:
                raise SpecbenchError(f"{where}: a 'SpecDecoding metrics' line without its {lacking[0]} field: "
                                     f"{line.strip()[:100]!r}")
            rates = [float(x) for x in found["rates"].group(1).replace(" ", "").strip(",").split(",")]
            if num_spec is None:
                num_spec, per_position = _checked_num_spec(len(rates), where), [0.0] * len(rates)
            elif len(rates) != num_spec:
                raise SpecbenchError(f"{where}: {len(rates)} per-position rates where earlier lines have {num_spec}: "
                                     f"lines of two configurations cannot be combined")
            line_tokens, line_accepted = int(found["drafted"].group(1)), int(found["accepted"].group(1))
            line_drafts = round(line_tokens / num_spec)  # every V1 draft proposes K tokens
            if line_drafts == 0:
                continue  # an idle interval: nothing drafted, nothing to weigh
            drafts += line_drafts
            draft_tokens += line_tokens
            accepted += line_accepted
            for i, rate in enumerate(rates):
                per_position[i] += rate * line_drafts
            lines_read += 1
            stamp = _LOG_TIME.search(line)
            if stamp:
                times.append(stamp.group(1))
    if num_spec is None:
        raise SpecbenchError(f"{', '.join(map(str, paths))}: no '{LOG_MARKER}' line found")
    counts = Counts(num_drafts=drafts, num_draft_tokens=draft_tokens, num_accepted_tokens=accepted,
                    accepted_per_position=[round(x) for x in per_position], sources=[str(p) for p in paths],
                    kind="vllm-log")
    counts.span = f"{lines_read} log lines" + (f", {times[0]} to {times[-1]}" if times else "")
    counts.notes.append("per-position counts rebuilt from rates the log prints to three decimals; drafts = "
                        "drafted tokens / K")
    return counts


# ---- reading any file ----------------------------------------------------------------------------


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise SpecbenchError(f"cannot read {path}: {exc.strerror or exc}") from exc


def file_format(path: Path) -> str:
    """``"prometheus"``, ``"log"`` (vLLM's), ``"per-request"`` (vLLM or SGLang responses with histograms),
    ``"sglang-log"``, ``"sglang-prometheus"``, or a usage error for a file that is none of them."""
    lines = _lines(path)
    if any(LOG_MARKER in line for line in lines):
        return "log"
    if profile_sources.holds_sglang_log(lines):
        return "sglang-log"
    if profile_sources.holds_histograms(path):
        return "per-request"
    samples = any(line.startswith(("# TYPE ", "# HELP ")) or _SAMPLE.match(line.strip()) for line in lines if line.strip())
    if samples and any(line.lstrip().startswith("vllm:") for line in lines):
        return "prometheus"
    if samples and profile_sources.holds_sglang_scrape(lines):
        return "sglang-prometheus"
    raise SpecbenchError(f"{path} is none of the sources profile fit reads: a Prometheus scrape of vLLM's /metrics "
                         f"(vllm:spec_decode_* counters) or SGLang's (sglang:spec_accept_length), a vLLM log with "
                         f"'{LOG_MARKER}' lines, an SGLang log with 'Decode batch ... accept len' lines, or JSON "
                         f"responses with per-request acceptance histograms (vLLM --per-request-spec-decode-metrics, "
                         f"SGLang spec_accept_histogram)")


def counts_from_histograms(paths: list[Path]) -> Counts:
    """Counts of per-request histograms (``profile_sources.counts_from_histograms``): the law of ``A`` gives
    every position's count exactly, ``#(A >= i)``."""
    histogram = profile_sources.counts_from_histograms(paths)
    num_spec = _checked_num_spec(histogram.num_spec_tokens, ", ".join(map(str, paths)))
    steps = sum(histogram.steps)
    counts = Counts(num_drafts=steps, num_draft_tokens=steps * num_spec,
                    num_accepted_tokens=sum(j * n for j, n in enumerate(histogram.steps)),
                    accepted_per_position=histogram.accepted_per_position(), sources=[str(p) for p in paths],
                    kind=histogram.kind, per_request_mean_length=histogram.per_request_mean_length)
    counts.span = f"{histogram.num_requests} requests"
    counts.notes.append(f"steps by drafts accepted, added over requests: {histogram.steps}")
    return counts


def read_counts(paths: list[Path], model: str | None = None) -> Counts | profile_sources.MeanLength:
    """Counts from scrapes (one, or two for an interval), log files or per-request responses (any number),
    one kind at a time; SGLang's log lines and gauges give the mean length only (a ``MeanLength``)."""
    if not paths:
        raise SpecbenchError("give at least one file: a /metrics scrape, a server log or per-request responses")
    formats = {path: file_format(path) for path in paths}
    kinds = set(formats.values())
    if len(kinds) > 1:
        raise SpecbenchError("give files of one kind, not several: " +
                             ", ".join(f"{p} ({k})" for p, k in formats.items()))
    kind = kinds.pop()
    if model is not None and kind != "prometheus":
        raise SpecbenchError(f"--model picks a model in a Prometheus scrape of vLLM; these files ({kind}) hold one server's "
                             f"requests or lines, with no model to pick")
    if kind == "log":
        return counts_from_logs(paths)
    if kind == "per-request":
        return counts_from_histograms(paths)
    if kind == "sglang-log":
        return profile_sources.mean_from_sglang_logs(paths, _lines)
    if kind == "sglang-prometheus":
        return profile_sources.mean_from_sglang_scrape(paths, _lines)
    return counts_from_scrapes(paths, model)


# ---- the fit -------------------------------------------------------------------------------------


def nearest_non_increasing(values: list[float]) -> list[float]:
    """The non-increasing sequence closest to ``values`` in least squares (equal weights)."""
    from scipy.optimize import isotonic_regression

    return [float(v) for v in isotonic_regression(values, increasing=False).x]


def fit_profile(counts: Counts) -> FittedProfile:
    """Unconditional rates ``p_i`` with 95% Wilson intervals, ``L``, and a valid profile to sweep."""
    from scipy import stats

    drafts = counts.num_drafts
    if drafts <= 0:
        raise SpecbenchError(f"{', '.join(counts.sources)}: zero drafts were verified ({counts.span or 'no span'}), "
                             f"so there is no acceptance to measure")
    for i, accepted in enumerate(counts.accepted_per_position):
        if accepted > drafts:
            raise SpecbenchError(f"{', '.join(counts.sources)}: position {i} accepted {accepted} of {drafts} drafts")
    _checked_num_spec(len(counts.accepted_per_position), ", ".join(counts.sources))
    measured = [accepted / drafts for accepted in counts.accepted_per_position]
    intervals = [stats.binomtest(accepted, drafts).proportion_ci(CONFIDENCE, method="wilson")
                 for accepted in counts.accepted_per_position]
    non_increasing = all(a >= b for a, b in itertools.pairwise(measured))
    rates = measured if non_increasing else nearest_non_increasing(measured)
    rates = [min(max(r, 0.0), 1.0) for r in rates]
    acceptance.validate_rates(rates, len(rates))
    return FittedProfile(
        num_spec_tokens=len(measured), num_drafts=drafts, measured_rates=measured, rates=rates,
        ci_low=[float(ci.low) for ci in intervals], ci_high=[float(ci.high) for ci in intervals],
        mean_acceptance_length=1.0 + sum(measured), non_increasing=non_increasing, counts=counts,
    )


def _toml_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return str(value)


def models_toml(comparison, extend_k: int | None = None) -> str:
    """``[fit.models]`` tables: the best model, and each model's parameters with intervals, GOF and AIC.

    ``comparison`` is a ``profile_models.Comparison``; with ``extend_k`` each model also records its
    rates at ``K = extend_k`` with 95% bootstrap intervals.
    """
    from specbench import profile_models

    best = comparison.best_fit
    head = {"best": comparison.best, "likelihood": "multinomial law of A (chained conditional binomials)",
            "intervals": f"95% parametric bootstrap, {len(best.bootstrap)} resamples",
            "gof": "likelihood ratio (G) against the saturated model, chi-square with K - k degrees of freedom",
            "significance": profile_models.SIGNIFICANCE}
    if comparison.any_fits is not None:
        head["any_fits"] = comparison.any_fits
    if extend_k is not None:
        head["extend_k"] = extend_k
    def value_text(value: object) -> str:  # floats in full (p-values can be tiny); inf is TOML's own
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, list):
            return "[" + ", ".join(value_text(v) for v in value) + "]"
        return _toml_value(value)

    text = "\n[fit.models]  # profile models fitted to the counts (specbench.profile_models)\n"
    text += "".join(f"{key} = {value_text(value)}\n" for key, value in head.items())
    for model, fit in comparison.fits.items():
        table: dict[str, object] = {}
        for key, value in fit.parameters.items():
            table[key] = value
            table[f"{key}_ci"] = list(fit.parameters_ci[key])
        table.update(log_likelihood=fit.log_likelihood, aic=fit.aic, g_statistic=fit.g_statistic,
                     degrees_of_freedom=fit.degrees_of_freedom)
        if fit.p_value is not None:
            table["p_value"] = fit.p_value
        if extend_k is not None:
            extension = fit.extend(extend_k)
            table["extended_rates"] = extension.rates
            table["extended_rates_ci_low"] = [low for low, _ in extension.rates_ci]
            table["extended_rates_ci_high"] = [high for _, high in extension.rates_ci]
            table["extended_acceptance_length"] = extension.mean_acceptance_length
            table["extended_acceptance_length_ci"] = list(extension.mean_acceptance_length_ci)
        text += f'\n[fit.models."{model}"]\n' + "".join(f"{key} = {value_text(value)}\n"
                                                       for key, value in table.items())
    return text


def scenario_toml(fit: FittedProfile, name: str, cost_ratio: float | None = None, models=None,
                  extend_k: int | None = None, profile_model: str | None = None) -> str:
    """A scenario file (``specbench sweep --scenario`` reads it) holding the fitted profile.

    ``models``: a ``profile_models.Comparison`` of the same counts, recorded under ``[fit.models]``.
    ``profile_model``: one of its models, whose fitted parameters then make the scenario's profile
    (``model = ...`` at ``K = extend_k`` or the measured ``K``) instead of the measured rates.
    """
    counts = fit.counts
    source = (f"specbench profile fit of {', '.join(counts.sources)}" + (f", model {counts.model}" if counts.model else "")
              + (f", {counts.span}" if counts.span else "") + f"; {fit.num_drafts} drafts verified")
    top = {
        "name": name,
        "description": f"measured on a {counts.definition.server.split()[0]} server: K={fit.num_spec_tokens}, "
                       f"L={fit.mean_acceptance_length:.3f}",
        "source": source,
        "num_spec_tokens": fit.num_spec_tokens,
        "rates": [round(r, 6) for r in fit.rates],
    }
    if profile_model is not None:
        chosen = models.fits[profile_model]
        del top["rates"]
        top["num_spec_tokens"] = extend_k or fit.num_spec_tokens
        top["description"] += f"; profile: the fitted {profile_model} model at K={top['num_spec_tokens']}"
        top["model"] = profile_model
        top.update({key: float(value) for key, value in chosen.parameters.items()})
    if cost_ratio is not None:
        top["cost_ratio"] = cost_ratio
    fit_table = {
        "num_drafts": fit.num_drafts,
        "num_draft_tokens": counts.num_draft_tokens,
        "num_accepted_tokens": counts.num_accepted_tokens,
        "accepted_per_position": counts.accepted_per_position,
        "measured_rates": [round(r, 6) for r in fit.measured_rates],
        "rates_ci_low": [round(r, 6) for r in fit.ci_low],
        "rates_ci_high": [round(r, 6) for r in fit.ci_high],
        "confidence": CONFIDENCE,
        "mean_acceptance_length": round(fit.mean_acceptance_length, 6),
        "non_increasing": fit.non_increasing,
        "source_format": counts.kind,
        "acceptance_length_definition": counts.definition.text(),
        "specbench_definition": profile_sources.SPECBENCH_DEFINITION,
    }
    if counts.per_request_mean_length is not None:
        fit_table["per_request_mean_acceptance_length"] = round(counts.per_request_mean_length, 6)
    if counts.model:
        fit_table["model"] = counts.model
    if counts.span:
        fit_table["span"] = counts.span
    if counts.notes:
        fit_table["notes"] = counts.notes
    header = (f"# Written by `specbench profile fit`: per-position acceptance measured on a "
              f"{counts.definition.server.split()[0]} server.\n")
    if not fit.non_increasing:
        header += ("# The measured rates rise with position somewhere (noise can do that); `rates` holds the nearest\n"
                   "# non-increasing profile, [fit].measured_rates what was measured.\n")
    exact = set() if profile_model is None else set(models.fits[profile_model].parameters)  # in full, not rounded
    body = "".join(f"{key} = {repr(value) if key in exact else _toml_value(value)}\n" for key, value in top.items())
    table = "".join(f"{key} = {_toml_value(value)}\n" for key, value in fit_table.items())
    text = header + body + "\n[fit]  # what was measured; the sweep reads only the fields above\n" + table
    return text if models is None else text + models_toml(models, extend_k)


def mean_scenario_toml(found: profile_sources.MeanLength, num_spec_tokens: int, name: str,
                       cost_ratio: float | None = None) -> str:
    """A scenario from a source that gives the mean length only (SGLang's log lines or gauges): ``L`` at ``K =
    num_spec_tokens``, its rates by the geometric schedule (an assumption: the source measures no position)."""
    _checked_num_spec(num_spec_tokens, ", ".join(found.sources))
    length = found.mean_acceptance_length
    if length > num_spec_tokens + 1 + 1e-9:
        raise SpecbenchError(f"{', '.join(found.sources)}: accept len {length:.4g} needs K >= {math.ceil(length - 1)} "
                             f"drafts a step, got --num-spec-tokens {num_spec_tokens}; give the server's "
                             f"--speculative-num-steps")
    length = min(length, num_spec_tokens + 1.0)
    top: dict[str, object] = {
        "name": name,
        "description": f"measured on an SGLang server: L={length:.3f} at K={num_spec_tokens}; rates by the geometric "
                       f"schedule (not measured)",
        "source": f"specbench profile fit of {', '.join(found.sources)}" + (f", {found.span}" if found.span else ""),
        "num_spec_tokens": num_spec_tokens,
        "acceptance_length": round(length, 6),
        "schedule": "geometric",
    }
    if cost_ratio is not None:
        top["cost_ratio"] = cost_ratio
    fit_table: dict[str, object] = {
        "mean_acceptance_length": round(found.mean_acceptance_length, 6),
        "values": found.num_values,
        "source_format": found.kind,
        "acceptance_length_definition": found.definition.text(),
        "specbench_definition": profile_sources.SPECBENCH_DEFINITION,
        "rates_measured": False,
    }
    if found.accept_rate is not None:
        fit_table["accept_rate"] = round(found.accept_rate, 6)
    if found.span:
        fit_table["span"] = found.span
    if found.notes:
        fit_table["notes"] = found.notes
    header = ("# Written by `specbench profile fit` from SGLang's mean acceptance length: the per-position rates are\n"
              "# not measured; `schedule` says how the length becomes rates (an assumption).\n")
    body = "".join(f"{key} = {_toml_value(value)}\n" for key, value in top.items())
    table = "".join(f"{key} = {_toml_value(value)}\n" for key, value in fit_table.items())
    return header + body + "\n[fit]  # what was measured; the sweep reads only the fields above\n" + table
