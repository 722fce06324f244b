"""Two results files side by side: the CI perf-regression gate behind ``specbench compare``.

Kernels runs. Cases are matched by ``records.record_key`` (mode, implementation, shape, dtype,
draft kind, acceptance, graph, and the sampling parameters ``top_k``, ``top_p``, ``min_p``,
``sampling``, ``logprobs``: rows that differ in any never match; records without them, written
before they existed, are untruncated and match untruncated rows). For each pair with timings on both sides, the statistic is the
ratio of medians ``current / baseline`` with a 95% percentile-bootstrap interval (both sides'
samples resampled with replacement, ``BOOTSTRAP_RESAMPLES`` times, from a fixed seed, so the
same files always give the same interval). With threshold ``t`` the verdict is:

- ``slower``: the whole interval lies above ``1 + t`` (the change costs more than ``t``, beyond noise);
- ``faster``: the whole interval lies below ``1 - t``;
- ``unchanged``: the whole interval lies inside ``[1 - t, 1 + t]``;
- ``inconclusive``, with the reason in its note: the interval straddles ``1 - t`` or ``1 + t``;
  or a side has fewer than ``MIN_SAMPLES`` samples (a bootstrap of so few says little about
  its median); or a side's samples are spread wider than ``MAX_SPREAD`` (p80 over p20: a busy
  host or a moving clock, which the interval of one run does not describe) where the interval
  alone would say slower or faster. Never a silent pass: counted and listed.

The runs must have timed the same thing (``compare_inputs``): a recorded setting that changes
what a sample measures makes the rows it touches inconclusive, with a note naming it; when it
touches every row nothing can be compared and ``compare_runs`` refuses. Other differences
(versions, sample budgets) are warnings.

Every kernels row names its timer (``record_timer``; files written before rows did: ``graph`` for
a graph row, ``events`` for another GPU row, ``perf_counter`` on a CPU). Rows of different timers
measure different things: when a case's rows in the two runs name different timers, nothing is
compared (``compare_runs`` refuses, naming the case and both timers).

Rows timed on the host move between processes far more than their samples spread within one:
a CPU run's rows (``perf_counter``: the load other processes put on the machine; two runs of one
commit on a shared 2-core machine, 1.2x apart) and GPU rows of the ``events`` timer (the host's
launch overhead). They are judged at ``host_threshold`` (30% by default) or the mode's threshold,
whichever is larger. ``host-free``, ``cold-graph`` and ``graph`` rows are device time, judged at the mode's
threshold, unless a side's backlog ran out in more than ``MAX_RAN_OUT`` of its samples and in more
than ``RAN_OUT_ALLOWED`` (the GPU may have waited for the host there): then at the host threshold,
with a note.

A calibration (``specbench.calibration``: A/A runs of one commit) replaces both thresholds for the
cases it holds with each case's own minimum detectable change; the other cases keep them, with a
note. ``specbench.confirm`` re-times a slower case in a fresh process before it fails the gate.

Files without samples (schema 1) are compared by their medians alone: ``slower`` when the ratio
exceeds ``1 + t``, with a note that no interval could be formed. A timed row whose median or
samples are not usable numbers is broken data: refused, naming the file and the case.

Sweep runs. Cases are matched by profile name, ``K`` and rates. Made with the same seed and step
count, a case is deterministic: any difference in its histogram of accepted counts is ``changed``.
Otherwise the two histograms are tested for homogeneity (chi-square, ``scipy.stats``) with a
Bonferroni budget of ``SWEEP_FAMILY_ALPHA`` over the cases: ``differs`` below it, else ``same``.

Plan runs. Rows are matched by profile, batch size and ``K``; the statistic is the milliseconds per
emitted token per request (``step_ms / L``, lower is better) current over baseline, judged with the
threshold like a kernels row. With one profile on both sides its uncertainty cancels and the ratio is
exact; otherwise through the interval the two ``L`` intervals give where both plans have one, else by
the ratio alone (``_compare_plans``). A row where the best ``K`` moved says so.

Every field ``compare`` reads from a record is checked on load (``compare_inputs.check_records``): a hand-edited
file missing one, or holding one of another type, is refused naming the file, the record and the field. A run
that lacks cases it was meant to hold (a partial merge, an interrupted run) is compared with a warning naming it.
An option the kind of run compared does not read (``OPTION_KINDS``) is refused, never dropped without a word.

``compare_runs`` returns a ``Comparison``; ``compare_report`` renders and writes it. Failing
verdicts (``slower``, ``changed``, ``differs``) make ``Comparison.failed`` true.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from specbench import results
from specbench.compare_inputs import (
    SettingDifference,
    by_key,
    check_records,
    check_schema,
    kernels_label,
    on_gpu,
    setting_differences,
)
from specbench.console import plural
from specbench.errors import SpecbenchError

if TYPE_CHECKING:
    from specbench.calibration import Calibration

MODES = ("greedy", "probabilistic", "synthetic")
DEFAULT_THRESHOLD = 0.05
# rows timed on the host are gated at this coarser threshold: GPU rows outside a CUDA graph carry
# the host's launch overhead, which moved by up to 22% between two processes of one commit on one
# H100 (B = 256) while graph rows stayed within 1%; CPU rows moved by up to 21% between two runs of
# one commit on a shared 2-core machine (results/baselines/README.md)
DEFAULT_HOST_THRESHOLD = 0.30
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20261123
SWEEP_FAMILY_ALPHA = 1e-3
# a side whose p80 is above this multiple of its p20 cannot make a case slower or faster (the
# kernels table marks the same rows with ~)
MAX_SPREAD = 2.0
# a side with fewer samples than this cannot decide anything: the bootstrap of a median of 5
# samples has only a handful of distinct values, so its interval is far narrower than the truth
MIN_SAMPLES = 10
FAILING = ("slower", "changed", "differs")
# timers whose samples carry host time (the rest are device time)
HOST_TIMERS = ("events", "perf_counter")
# a host-free, cold-graph or graph side whose backlog ran out in more than this share of its samples, and in more than
# RAN_OUT_ALLOWED of them, is host time: the timer lengthens a call's backlog after it runs out (at most
# timing.BACKLOG_GROWTHS times), so a row of few samples (forty placements leave ten to twenty) may show that
# many with its median still device time
MAX_RAN_OUT = 0.10
RAN_OUT_ALLOWED = 2
ENVIRONMENT_FIELDS = ("commit", "device", "driver", "cuda", "torch", "triton")
# worst first: what a reviewer must read before anything else
_ORDER = {"slower": 0, "changed": 0, "differs": 0, "inconclusive": 1, "faster": 2, "unchanged": 3, "same": 3}


@dataclass
class CaseComparison:
    """One case in both runs: what was measured and the verdict."""

    case: str
    kind: str
    verdict: str
    baseline: float | None = None  # median µs (kernels) or mean acceptance length (sweep)
    current: float | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    threshold: float | None = None
    p_value: float | None = None
    note: str = ""
    key: tuple | None = None  # kernels: ``records.record_key`` of the rows (``--confirm`` re-times by it)


@dataclass
class Comparison:
    """Everything ``specbench compare`` reports."""

    kind: str
    cases: list[CaseComparison]
    baseline_metadata: dict[str, Any]
    current_metadata: dict[str, Any]
    only_in_baseline: list[str] = field(default_factory=list)
    only_in_current: list[str] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    differences: list[SettingDifference] = field(default_factory=list)
    not_comparable: int = 0  # cases a differing setting left without a verdict

    @property
    def failed(self) -> bool:
        return any(case.verdict in FAILING for case in self.cases)

    @property
    def status(self) -> str:
        """``FAIL`` (a failing verdict), ``inconclusive`` (no case could be decided) or ``pass``."""
        if self.failed:
            return "FAIL"
        return "inconclusive" if all(case.verdict == "inconclusive" for case in self.cases) else "pass"

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for case in self.cases:
            found[case.verdict] = found.get(case.verdict, 0) + 1
        return found

    def summary(self) -> str:
        """``2 slower, 1 faster, 37 unchanged, 1 inconclusive``: every verdict that occurs, worst first."""
        counts = self.counts()
        order = ("slower", "changed", "differs", "faster", "unchanged", "same", "inconclusive")
        return ", ".join(f"{counts[v]} {v}" for v in order if v in counts)

    def busy_runs(self) -> list[str]:
        """One line per run whose metadata says its CPU was busy (load above its cores, as ``machine`` judges)."""
        lines = []
        for label, metadata in (("baseline", self.baseline_metadata), ("current", self.current_metadata)):
            cores, threads = metadata.get("cpu_count"), metadata.get("threads") or 1
            loads = [metadata.get("load_average_start"), metadata.get("load_average_end")]
            if not cores or all(load is None for load in loads):
                continue
            limits = (cores - threads + 0.5, cores + 0.5)
            busy = [load for load, limit in zip(loads, limits) if load is not None and load > limit]
            if busy:
                lines.append(f"the {label} run's machine was busy (1-minute load average {max(busy):.2f} on {cores} "
                             f"cores): its times may be too slow, so a verdict on a CPU-bound row can be wrong")
        return lines

    def partial_runs(self) -> list[str]:
        """One line per run that lacks cases it was meant to hold: a partial merge (``specbench merge
        --allow-partial`` marks it ``partial`` and lists what is ``missing``) or a run that was interrupted. Its
        cases are compared as any others; those it lacks are listed as only in the other run, not judged."""
        lines = []
        for label, metadata in (("baseline", self.baseline_metadata), ("current", self.current_metadata)):
            other = "current run" if label == "baseline" else "baseline"
            if metadata.get("partial") is True:
                missing = metadata.get("missing")
                why = "; ".join(map(str, missing)) if isinstance(missing, list) and missing else "shards are missing"
                lines.append(f"the {label} run is a partial merge (specbench merge --allow-partial: {why}): the cases "
                             f"it lacks are not compared, only listed as only in the {other}")
            elif metadata.get("interrupted") is True:
                lines.append(f"the {label} run was interrupted before it finished: the cases it lacks are not "
                             f"compared, only listed as only in the {other}")
        return lines

    def warnings(self) -> list[str]:
        """Every setting that differs between the runs, every partial run, then every busy run of kernels (a sweep's
        counts and a plan's modelled times do not depend on how busy the machine was): one line each."""
        lines = []
        for difference in self.differences:
            why = ("it changes what a timing sample measures, so the rows it touches get no verdict"
                   if difference.invalidates else "results may differ for that reason alone")
            lines.append(f"{difference}: {why}")
        return lines + self.partial_runs() + (self.busy_runs() if self.kind == "kernels" else [])


def parse_thresholds(texts: Sequence[str], option: str = "--threshold") -> dict[str | None, float]:
    """``["3%", "greedy=2%,probabilistic=0.04"]`` into ``{None: 0.03, "greedy": 0.02, "probabilistic": 0.04}``:
    fractions or percents, only what was given (``compare_runs`` fills in ``DEFAULT_THRESHOLD`` for ``None``). A
    second value for one mode or for the default (``-t 10%,3%``), an empty mode (``=3%``) or an unknown one is
    refused, never one of them kept silently; ``option`` names the flag they came from in a refusal."""
    thresholds: dict[str | None, float] = {}
    for text in texts:
        for item in (part.strip() for part in text.split(",")):
            if not item:
                raise SpecbenchError(f"{option} takes 5% or MODE=5%, got {text!r}")
            mode, equals, value = item.rpartition("=")
            if equals and not mode.strip():
                raise SpecbenchError(f"{option} {item!r} names no mode before '='; write MODE=T such as greedy=3%, "
                                     f"or T alone for every mode")
            mode = mode.strip() or None
            if mode is not None and mode not in MODES:
                raise SpecbenchError(f"{option} names an unknown mode {mode!r}; choose from {', '.join(MODES)}")
            fraction = _fraction(value, item, option)
            if mode in thresholds:
                what, also = ("every mode", ", and MODE=T for a mode that differs") if mode is None else (
                    f"mode {mode}", "")
                raise SpecbenchError(f"{option} gives {what} two thresholds ({_percent(thresholds[mode])} and "
                                     f"{_percent(fraction)}); give one{also}")
            thresholds[mode] = fraction
    return thresholds


def parse_threshold(text: str, option: str) -> float:
    """One threshold for every row, such as ``10%`` or ``0.1``: a list (``10%,20%``) or a mode's (``greedy=10%``)
    is refused, since the option takes one value."""
    item = text.strip()
    if "," in item or "=" in item:
        raise SpecbenchError(f"{option} takes one threshold for every row, such as 10%, got {text!r}")
    return _fraction(item, item, option)


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def _fraction(value: str, item: str, option: str) -> float:
    text = value.strip()
    try:
        number = float(text.removesuffix("%"))
    except ValueError:
        raise SpecbenchError(f"{option} takes a percentage such as 5% (or a fraction such as 0.05), got "
                             f"{item!r}") from None
    fraction = number / 100 if text.endswith("%") else number
    if not (math.isfinite(fraction) and 0 < fraction < 1):
        # 5 without a % is a fraction, 500%: most likely 5% was meant
        hint = f"; write percentages with %, e.g. {text}%" if not text.endswith("%") and 1 <= number < 100 else ""
        raise SpecbenchError(f"{option} must lie between 0% and 100%, got {item!r}{hint}")
    return fraction


def load_run(path: str | Path) -> tuple[dict[str, Any], list[dict]]:
    """A results folder or ``results.json`` whose schema this code knows; every field compare reads
    from its records must be there and of its type, and a kernels run's timed rows must hold usable
    numbers (``compare_inputs.check_records``)."""
    metadata, records = results.read_results(path)
    check_schema(path, metadata, "compare")
    kind = metadata.get("kind")
    if kind is None:
        raise SpecbenchError(f"{path} does not say what kind of run it holds (its metadata has no kind); compare "
                             f"reads kernels, sweep and plan runs")
    if kind not in ("kernels", "sweep", "plan"):
        raise SpecbenchError(f"{path} holds a {kind!r} run; compare reads kernels, sweep and plan runs")
    check_records(results.results_file(path), kind, records)
    return metadata, records


def compare_runs(baseline: str | Path, current: str | Path,
                 thresholds: dict[str | None, float] | None = None,
                 host_threshold: float | None = None,
                 calibration: Calibration | None = None) -> Comparison:
    """Match the cases of two runs of one kind and judge each (see the module docstring);
    ``thresholds`` as ``parse_thresholds`` gives them (``DEFAULT_THRESHOLD`` where ``None`` is not
    among them), ``host_threshold`` None for ``DEFAULT_HOST_THRESHOLD``; ``calibration`` gives the
    kernels cases it holds their own thresholds. Thresholds a kind of run does not read are
    ``refuse_unread_options``' to refuse.

    A ``SpecbenchError`` when either file is unusable, when no case could be compared (none in
    common, none timed in both, or a setting that differs between the runs touches every row), when
    a case's rows name different timers, or when the calibration is of another device or timer.
    """
    thresholds = {None: DEFAULT_THRESHOLD, **(thresholds or {})}
    host_threshold = DEFAULT_HOST_THRESHOLD if host_threshold is None else host_threshold
    base_meta, base_records = load_run(baseline)
    cur_meta, cur_records = load_run(current)
    if base_meta["kind"] != cur_meta["kind"]:
        raise SpecbenchError(f"{baseline} holds a {base_meta['kind']} run and {current} a {cur_meta['kind']} run; "
                             f"compare two runs of one kind")
    differences = setting_differences(base_meta, cur_meta)
    if calibration is not None and base_meta["kind"] != "kernels":
        raise SpecbenchError(f"--calibration holds kernels thresholds, and {baseline} holds a {base_meta['kind']} run")
    if base_meta["kind"] == "kernels":
        if calibration is not None:
            calibration.check_device(cur_meta, str(current))
        comparison = _compare_kernels(base_records, cur_records, thresholds, host_threshold, base_meta, cur_meta,
                                      differences, calibration)
    elif base_meta["kind"] == "plan":
        comparison = _compare_plans(base_records, cur_records, thresholds, base_meta, cur_meta)
    else:
        comparison = _compare_sweeps(base_records, cur_records, base_meta, cur_meta)
    comparison.differences = differences
    _refuse_nothing_compared(comparison, baseline, current)
    comparison.cases.sort(key=lambda c: (_ORDER.get(c.verdict, 9), -(c.ratio or 0.0)))
    return comparison


# the kinds of run each option of compare is read for (--calibration: ``compare_runs``); given for another kind, it
# is refused, not dropped without a word (a sweep's cases are judged by their counts, a plan's rows are modelled
# step times of no mode, and neither is timed on this machine)
OPTION_KINDS = {"--threshold": ("kernels", "plan"), "a per-mode --threshold": ("kernels",),
                "--host-threshold": ("kernels",), "--confirm": ("kernels",)}
_WHY_UNREAD = {"sweep": "a sweep's cases are judged by their counts of accepted tokens, not by a slowdown",
               "plan": "a plan's rows are modelled step times: none is timed, and none has a mode"}


def refuse_unread_options(kind: str, thresholds: dict[str | None, float], host_threshold: float | None,
                          confirm: bool = False) -> None:
    """Refuse the options given (``thresholds`` as ``parse_thresholds`` gives them, ``host_threshold``
    None when not given) that a comparison of two ``kind`` runs does not read (``OPTION_KINDS``), in
    one sentence naming each and the kinds of run it applies to."""
    given = [(f"--threshold {_percent(thresholds[None])}", "--threshold")] if None in thresholds else []
    given += [(f"--threshold {mode}={_percent(value)}", "a per-mode --threshold")
              for mode, value in thresholds.items() if mode is not None]
    if host_threshold is not None:
        given.append((f"--host-threshold {_percent(host_threshold)}", "--host-threshold"))
    if confirm:
        given.append(("--confirm", "--confirm"))
    unread = [(shown, option) for shown, option in given if kind not in OPTION_KINDS[option]]
    if not unread:
        return
    by_kinds: dict[tuple[str, ...], list[str]] = {}
    for option in dict.fromkeys(option for _, option in unread):
        by_kinds.setdefault(OPTION_KINDS[option], []).append(option)
    applies = "; ".join(f"{_listed(options)} {'applies' if len(options) == 1 else 'apply'} to "
                        f"{' and '.join(kinds)} runs" for kinds, options in by_kinds.items())
    shown = [text for text, _ in unread]
    raise SpecbenchError(f"{_listed(shown)} {'does' if len(shown) == 1 else 'do'} not apply to {kind} runs "
                         f"({_WHY_UNREAD[kind]}): {applies}; leave {'it' if len(shown) == 1 else 'them'} out")


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _refuse_nothing_compared(comparison: Comparison, baseline: str | Path, current: str | Path) -> None:
    if not comparison.cases and not comparison.not_compared:
        raise SpecbenchError(f"{baseline} and {current} have no case in common (baseline: "
                             f"{plural(len(comparison.only_in_baseline), 'case')}, current: "
                             f"{plural(len(comparison.only_in_current), 'case')})")
    if not comparison.cases:
        raise SpecbenchError(f"{baseline} and {current} have {plural(len(comparison.not_compared), 'case')} in common "
                             f"but none timed in both (e.g. {comparison.not_compared[0]}): nothing could be compared")
    blocking = [d for d in comparison.differences if d.invalidates]
    if comparison.not_comparable == len(comparison.cases):
        raise SpecbenchError(f"{baseline} and {current} cannot be compared: {'; '.join(map(str, blocking))}, which "
                             f"changes what every timing sample measures; rerun one of them with the other's settings")


# ---- kernels -------------------------------------------------------------------------------------


def bootstrap_ratio(baseline: Sequence[float], current: Sequence[float],
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """``(ratio of medians, low, high)``: current over baseline with a 95% percentile-bootstrap interval."""
    generator = np.random.default_rng(seed)
    base = np.asarray(baseline, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    base_medians = np.median(base[generator.integers(0, base.size, (resamples, base.size))], axis=1)
    cur_medians = np.median(cur[generator.integers(0, cur.size, (resamples, cur.size))], axis=1)
    ratios = cur_medians / base_medians
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(cur) / np.median(base)), float(low), float(high)


def record_timer(record: dict, metadata: dict) -> str:
    """The timer of a kernels record (``timing.TIMERS``); a file written before records named it times
    graph rows with ``graph``, other GPU rows with ``events``, CPU rows with ``perf_counter``."""
    if record.get("timer"):
        return str(record["timer"])
    if record.get("cuda_graph"):
        return "graph"
    return "events" if on_gpu(metadata) else "perf_counter"


def _ran_out_share(record: dict) -> float:
    """The share of ``record``'s samples whose backlog ran out, or 0 when no more than ``RAN_OUT_ALLOWED`` did."""
    samples = record.get("samples") or len(record.get("samples_us") or []) or 1
    ran_out = record.get("backlog_ran_out") or 0
    return ran_out / samples if ran_out > RAN_OUT_ALLOWED else 0.0


def _refuse_other_timers(base: dict, cur: dict, base_meta: dict, cur_meta: dict) -> None:
    # only rows timed on both sides name a timer that matters (a skipped row was not timed)
    differ = [key for key in base if key in cur and base[key].get("status") == cur[key].get("status") == "ok"
              and record_timer(base[key], base_meta) != record_timer(cur[key], cur_meta)]
    if differ:
        before, after = base[differ[0]], cur[differ[0]]
        raise SpecbenchError(f"the baseline timed {kernels_label(after)} with the {record_timer(before, base_meta)} "
                             f"timer and the current run with {record_timer(after, cur_meta)} "
                             f"({plural(len(differ), 'case')} {'differs' if len(differ) == 1 else 'differ'} so), and "
                             f"rows of different timers measure different things, so nothing is compared; rerun one "
                             f"of them with the other's --timer")


def _spread(record: dict) -> float:
    low, high = record.get("p20_us"), record.get("p80_us")
    return high / low if low and high else 1.0


def verdict_for(low: float, high: float, threshold: float) -> str:
    """slower / faster / unchanged / inconclusive for an interval of the ratio (module docstring)."""
    if low > 1 + threshold:
        return "slower"
    if high < 1 - threshold:
        return "faster"
    if low >= 1 - threshold and high <= 1 + threshold:
        return "unchanged"
    return "inconclusive"


def judge(low: float, high: float, threshold: float, samples: tuple[int, int],
          spread: float = 1.0) -> tuple[str, str]:
    """``(verdict, note)`` of an interval of the ratio, given each side's sample count (baseline,
    current) and the wider side's p80/p20: an inconclusive verdict always says why, with numbers."""
    verdict = verdict_for(low, high, threshold)
    if min(samples) < MIN_SAMPLES:
        return "inconclusive", (f"too few samples to decide: {samples[0]} (baseline) and {samples[1]} (current), "
                                f"fewer than {MIN_SAMPLES}")
    if verdict in ("slower", "faster") and spread > MAX_SPREAD:
        # samples this spread come from a busy host or a changing clock: the interval of the
        # median describes that run, not the code, so it cannot decide
        return "inconclusive", f"too spread to decide: p80/p20 = {spread:.1f} (above {MAX_SPREAD:g})"
    if verdict == "inconclusive":
        edges = " and ".join(f"{edge:.2f}" for edge in (1 - threshold, 1 + threshold) if low <= edge <= high)
        note = (f"interval [{low:.3f}, {high:.3f}] straddles {edges} (±{threshold:.0%}): ±{(high - low) / 2:.1%} "
                f"wide, too noisy to decide")
        if spread > MAX_SPREAD:
            note += f"; p80/p20 = {spread:.1f}"
        return verdict, note
    return verdict, ""


def _compare_kernels(base_records, cur_records, thresholds, host_threshold, base_meta, cur_meta,
                     differences: list[SettingDifference], calibration: Calibration | None = None) -> Comparison:
    base, cur = by_key(base_records, "baseline"), by_key(cur_records, "current")
    _refuse_other_timers(base, cur, base_meta, cur_meta)
    comparison = Comparison("kernels", [], base_meta, cur_meta)
    uncalibrated = 0
    comparison.only_in_baseline = [kernels_label(base[k]) for k in base if k not in cur]
    comparison.only_in_current = [kernels_label(cur[k]) for k in cur if k not in base]
    medians_only = 0
    for key in (k for k in base if k in cur):
        before, after = base[key], cur[key]
        label = kernels_label(after)
        if before.get("status") != "ok" or after.get("status") != "ok":  # an ok row's timings are checked on load
            comparison.not_compared.append(f"{label} ({before.get('status')} -> {after.get('status')})")
            continue
        timer = record_timer(after, cur_meta)
        threshold = thresholds.get(after["mode"], thresholds[None])
        ran_out = max(_ran_out_share(before), _ran_out_share(after))
        remark = ""
        calibrated = calibration.threshold(key, timer) if calibration is not None else None
        if calibrated is not None:
            threshold, remark = calibrated, "A/A threshold"
        elif timer in HOST_TIMERS:
            threshold = max(threshold, host_threshold)  # host time (the load, launch overhead) is in these samples
        elif ran_out > MAX_RAN_OUT:
            threshold = max(threshold, host_threshold)
            remark = f"backlog ran out in {ran_out:.0%} of a side's samples: judged as host time"
        uncalibrated += calibration is not None and calibrated is None
        row = CaseComparison(label, "kernels", "", baseline=before["median_us"], current=after["median_us"],
                             threshold=threshold, key=key)
        samples_before, samples_after = before.get("samples_us") or [], after.get("samples_us") or []
        if len(samples_before) >= 2 and len(samples_after) >= 2:
            row.ratio, row.ci_low, row.ci_high = bootstrap_ratio(samples_before, samples_after)
            row.verdict, row.note = judge(row.ci_low, row.ci_high, threshold,
                                          (len(samples_before), len(samples_after)),
                                          max(_spread(before), _spread(after)))
        else:
            medians_only += 1
            row.ratio = after["median_us"] / before["median_us"]
            row.verdict = "slower" if row.ratio > 1 + threshold else ("faster" if row.ratio < 1 - threshold
                                                                       else "unchanged")
            row.note = "medians only: no samples to form an interval"
        blocking = [d for d in differences if d.touches(after)]
        if blocking:
            comparison.not_comparable += 1
            row.note = (f"not comparable: {'; '.join(map(str, blocking))} (the samples alone would say "
                        f"{row.verdict})")
            row.verdict = "inconclusive"
        if remark:
            row.note = f"{remark}; {row.note}" if row.note else remark
        comparison.cases.append(row)
    if calibration is not None:
        comparison.notes.append(f"thresholds of the cases the A/A calibration {calibration.path} holds are its own "
                                f"(its minimum detectable change)")
    if uncalibrated:
        comparison.notes.append(f"{plural(uncalibrated, 'case')} {'is' if uncalibrated == 1 else 'are'} not in the "
                                f"calibration: judged at the --threshold and --host-threshold thresholds")
    if medians_only:
        comparison.notes.append(f"{plural(medians_only, 'case')} {'was' if medians_only == 1 else 'were'} compared by "
                                f"their medians alone: one run has no timing samples (a results file written before "
                                f"schema 2), so no interval could be formed")
    return comparison


# ---- sweeps --------------------------------------------------------------------------------------


def _sweep_key(record: dict) -> tuple:
    return (record["profile"], record["num_spec_tokens"], tuple(round(float(r), 9) for r in record["configured_rates"]))


def _compare_sweeps(base_records, cur_records, base_meta, cur_meta) -> Comparison:
    from scipy import stats

    base = {_sweep_key(r): r for r in base_records}
    cur = {_sweep_key(r): r for r in cur_records}
    comparison = Comparison("sweep", [], base_meta, cur_meta)
    comparison.only_in_baseline = [f"{k[0]} K={k[1]}" for k in base if k not in cur]
    comparison.only_in_current = [f"{k[0]} K={k[1]}" for k in cur if k not in base]
    common = [k for k in base if k in cur]
    alpha = SWEEP_FAMILY_ALPHA / max(len(common), 1)
    for key in common:
        before, after = base[key], cur[key]
        label = f"{key[0]} K={key[1]}"
        row = CaseComparison(label, "sweep", "", baseline=before["mean_acceptance_length"],
                             current=after["mean_acceptance_length"],
                             ratio=after["mean_acceptance_length"] / before["mean_acceptance_length"])
        same_stream = (before.get("seed") == after.get("seed") and before.get("num_requests") == after.get("num_requests")
                       and before.get("case_seed") == after.get("case_seed"))
        hist_before, hist_after = before["accepted_histogram"], after["accepted_histogram"]
        if same_stream:
            changed = [j for j, (a, b) in enumerate(zip(hist_before, hist_after)) if a != b]
            row.verdict = "changed" if changed or len(hist_before) != len(hist_after) else "same"
            row.note = ("same seed and steps: the counts must repeat exactly" if not changed else
                        f"same seed and steps, yet P(A={changed[0]}) counts {hist_before[changed[0]]} -> "
                        f"{hist_after[changed[0]]}")
        else:
            table = np.array([hist_before, hist_after], dtype=np.float64)
            table = table[:, table.sum(axis=0) > 0]
            if table.shape[1] < 2:
                row.verdict, row.p_value = "same", 1.0
            else:
                row.p_value = float(stats.chi2_contingency(table, correction=False).pvalue)
                row.verdict = "differs" if row.p_value < alpha else "same"
            row.note = f"other seeds or steps: chi-square homogeneity of the histograms, Bonferroni alpha {alpha:.1e}"
        comparison.cases.append(row)
    return comparison


# ---- plans ---------------------------------------------------------------------------------------


def _plan_key(record: dict) -> tuple:
    # a tree record (plan --tree) is its own case: its N sits beside the chains' K
    return (record["profile"], int(record["batch_size"]), int(record["num_spec_tokens"]), record.get("tree_shape"))


def _ms_per_token(record: dict, length_key: str = "acceptance_length") -> float | None:
    length = record.get(length_key)
    return None if not length else record["step_ms"] / length


def _compare_plans(base_records, cur_records, thresholds, base_meta, cur_meta) -> Comparison:
    """Plan rows matched by (profile, B, K); the statistic is milliseconds per emitted token per request,
    ``step_ms / L`` (lower is better, like a kernel's median), current over baseline. With one profile on
    both sides (same ``L`` and interval) the ratio is exact (the step times'); otherwise its interval takes
    each side's ``L`` interval where it has one (the extreme ratios of the two intervals' ends), so a plan
    with intervals gets ``slower``/``faster``/``unchanged``/``inconclusive`` as a kernels row does; without
    intervals the ratio alone is judged against the threshold."""
    base = {_plan_key(r): r for r in base_records if r.get("kind") == "plan"}
    cur = {_plan_key(r): r for r in cur_records if r.get("kind") == "plan"}
    comparison = Comparison("plan", [], base_meta, cur_meta)

    def label(key: tuple) -> str:
        return f"{key[0]} B={key[1]} K={key[2]}" if key[3] is None else f"{key[0]} B={key[1]} tree {key[3]}"

    comparison.only_in_baseline = [label(k) for k in base if k not in cur]
    comparison.only_in_current = [label(k) for k in cur if k not in base]
    threshold = thresholds[None]
    for key in (k for k in base if k in cur):
        before, after = base[key], cur[key]
        b_time, c_time = _ms_per_token(before), _ms_per_token(after)
        row = CaseComparison(label(key), "plan", "", baseline=b_time, current=c_time, ratio=c_time / b_time,
                             threshold=threshold)
        b_low, b_high = _ms_per_token(before, "acceptance_length_ci_high"), _ms_per_token(before,
                                                                                         "acceptance_length_ci_low")
        c_low, c_high = _ms_per_token(after, "acceptance_length_ci_high"), _ms_per_token(after,
                                                                                        "acceptance_length_ci_low")
        same_profile = all(before.get(k) == after.get(k) for k in ("acceptance_length", "acceptance_length_ci_low",
                                                                     "acceptance_length_ci_high"))
        if same_profile:  # one profile on both sides: its uncertainty cancels, the step times decide
            row.ci_low = row.ci_high = row.ratio
            row.verdict = verdict_for(row.ratio, row.ratio, threshold)
            row.note = "same profile: the ratio of step times"
        elif None not in (b_low, b_high, c_low, c_high):
            row.ci_low, row.ci_high = c_low / b_high, c_high / b_low
            row.verdict = verdict_for(row.ci_low, row.ci_high, threshold)
            if row.verdict == "inconclusive":
                row.note = f"interval [{row.ci_low:.3f}, {row.ci_high:.3f}] straddles 1 ± {threshold:.0%}"
        else:
            row.verdict = verdict_for(row.ratio, row.ratio, threshold)
            row.note = "no profile interval on one side: the ratio alone"
        if before.get("is_best") != after.get("is_best") and after.get("is_best"):
            row.note = (row.note + "; " if row.note else "") + (
                f"best K at B={key[1]} moved from {before.get('best_num_spec_tokens')} to {key[2]}")
        comparison.cases.append(row)
    return comparison
