"""A/A calibration: each kernels case's threshold from how far runs of one commit move apart.

``calibrate`` reads two or more kernels runs of one commit on one device (an A/A set: each run in
its own process, the way two CI runs are) and, for every case timed in all of them, takes the
medians ``m_1 .. m_n``. The case's run-to-run spread is the largest ratio between two of them,
``max m / min m`` (the largest ``|log ratio|`` of medians over all pairs of runs, as a ratio).
Its minimum detectable change, the threshold ``compare --calibration`` judges it at, is

    threshold = max(FLOOR, spread ** SAFETY_FACTOR - 1)

that is ``SAFETY_FACTOR`` times the largest ``|log ratio|``, turned back into a fraction, and never
below ``FLOOR``. The factor is there because a few runs see only part of the spread: with two runs
the spread is a single draw, and were log medians normal, a later pair of runs would exceed three
times that draw with probability ``(2/pi) atan(1/3)``, about 0.20, for a case (the ratio of two
half-normal draws); more runs make the range a steadier estimate. A slower verdict still needs
the whole bootstrap interval above ``1 + threshold``, which a case at its spread rarely has.

A calibration holds only what it was measured on: its device and each case's timer; ``compare``
refuses a calibration of another device and a case whose timer differs.

Runs that are not an A/A set are refused, since their spread is not run-to-run noise: runs of
different commits, of a setting that changes what a sample measures, of different implementations
or of one implementation taken from different code (built in, a plugin file: what ``compare`` warns
about), and one run given twice, whether as two spellings of its path or as a copy of its files
(the same creation time and the same timings).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench import results
from specbench.compare_inputs import by_key, check_schema, check_timings, kernels_label, setting_differences
from specbench.errors import SpecbenchError
from specbench.records import KEY_FIELDS, refuse_unreadable

SAFETY_FACTOR = 3.0
FLOOR = 0.02
KIND = "calibration"
FORMAT_VERSION = 1
STATISTIC = "max(FLOOR, (max median / min median over the runs) ** SAFETY_FACTOR - 1)"


@dataclass(frozen=True)
class Calibration:
    """Per-case thresholds measured from A/A runs (``thresholds``: ``records.record_key`` -> (timer,
    threshold)), on ``device``."""

    device: str
    thresholds: dict[tuple, tuple[str, float]]
    path: str = ""

    def threshold(self, key: tuple, timer: str) -> float | None:
        """The case's threshold, or None when the calibration does not hold it; a case calibrated with
        another timer is a ``SpecbenchError``."""
        found = self.thresholds.get(key)
        if found is None:
            return None
        if found[0] != timer:
            raise SpecbenchError(f"the calibration {self.path} timed a case with the {found[0]} timer and the run "
                                 f"with {timer}: its threshold does not describe that run; calibrate with --timer "
                                 f"{timer}")
        return found[1]

    def check_device(self, metadata: dict, run: str) -> None:
        """Refuse a run made on another device than the calibration's."""
        if metadata.get("device") != self.device:
            raise SpecbenchError(f"the calibration {self.path} was measured on {self.device} and {run} on "
                                 f"{metadata.get('device')}: run-to-run spread is the machine's own, so calibrate on "
                                 f"the device you compare on")


def minimum_detectable_change(medians: Sequence[float], safety_factor: float = SAFETY_FACTOR,
                              floor: float = FLOOR) -> float:
    """``max(floor, (max / min) ** safety_factor - 1)`` of one case's medians over the A/A runs."""
    if len(medians) < 2 or not all(isinstance(m, (int, float)) and math.isfinite(m) and m > 0 for m in medians):
        raise SpecbenchError(f"a calibration needs two or more positive medians of a case, got {list(medians)}")
    return max(floor, (max(medians) / min(medians)) ** safety_factor - 1)


def calibrate(runs: Sequence[str | Path], safety_factor: float = SAFETY_FACTOR, floor: float = FLOOR) -> dict[str, Any]:
    """The calibration of A/A kernels ``runs`` (module docstring) as plain data, ready for JSON.

    A ``SpecbenchError`` for fewer than two runs, a run given twice (a folder and its ``results.json``,
    two spellings of one path, or a copy of a run's files, are one run), a run that is not a kernels run
    or holds a row it cannot read, runs of different commits, of a setting that changes what a sample
    measures (device, threads, flush, clock) or of different implementations (or one from different
    code), a case whose runs name different timers, or no case timed in every run.
    """
    from specbench.compare import record_timer

    if len(runs) < 2:
        raise SpecbenchError(f"a calibration needs two or more runs of one commit, got {len(runs)}")
    given: dict[Path, str | Path] = {}
    for path in runs:
        file = results.results_file(path).resolve()
        if file in given:
            raise SpecbenchError(f"{path} is the run {given[file]} again: an A/A calibration needs each run once, "
                                 f"since a run compared with itself shows no spread")
        given[file] = path
    loaded = [(str(path), *_load(path)) for path in runs]
    first_path, first_meta, _ = loaded[0]
    made: dict[tuple, str] = {}
    for path, metadata, records in loaded:
        if metadata.get("commit") != first_meta.get("commit"):
            raise SpecbenchError(f"{first_path} is commit {first_meta.get('commit')} and {path} commit "
                                 f"{metadata.get('commit')}: an A/A calibration needs runs of one commit")
        blocking = [d for d in setting_differences(first_meta, metadata) if d.invalidates]
        if blocking:
            setting = blocking[0]
            raise SpecbenchError(f"{first_path} and {path} differ in {setting.name} ({setting.baseline} vs "
                                 f"{setting.current}), which changes what a timing sample measures: an A/A "
                                 f"calibration needs runs made alike")
        _check_same_code((first_path, first_meta), (path, metadata))
        # a copy of a run's files holds its creation time and every sample it took: one run, whatever its path
        identity = (metadata.get("created"), json.dumps([(r.get("median_us"), r.get("samples_us")) for r in records]))
        if identity in made:
            raise SpecbenchError(f"{path} is the run {made[identity]} again (created {metadata.get('created')}, "
                                 f"with the same timings): an A/A calibration needs each run once, since a run "
                                 f"compared with itself shows no spread")
        made[identity] = path
    keyed = [(path, metadata, by_key(records, path)) for path, metadata, records in loaded]
    cases, left_out = [], []
    for key, record in keyed[0][2].items():
        rows = [(metadata, found.get(key)) for _, metadata, found in keyed]
        label = kernels_label(record)
        if any(row is None or row.get("status") != "ok" for _, row in rows):
            left_out.append(label)
            continue
        timers = {record_timer(row, metadata) for metadata, row in rows}
        if len(timers) > 1:
            raise SpecbenchError(f"the runs time {label} with different timers ({', '.join(sorted(timers))}): an "
                                 f"A/A calibration needs runs made alike")
        medians = [float(row["median_us"]) for _, row in rows]
        cases.append({"case": label, "key": list(key), "timer": timers.pop(), "medians_us": medians,
                      "spread": max(medians) / min(medians),
                      "threshold": minimum_detectable_change(medians, safety_factor, floor)})
    if not cases:
        raise SpecbenchError(f"no case was timed in all {len(runs)} runs, so nothing can be calibrated")
    return {
        "kind": KIND, "format_version": FORMAT_VERSION, "statistic": STATISTIC, "safety_factor": safety_factor,
        "floor": floor, "device": first_meta.get("device"), "commit": first_meta.get("commit"),
        "runs": [{"path": path, **{k: metadata.get(k) for k in ("commit", "created", "command", "host",
                                                                "load_average_start", "load_average_end")}}
                 for path, metadata, _ in loaded],
        "cases": cases, "not_calibrated": left_out,
    }


def _load(path: str | Path) -> tuple[dict[str, Any], list[dict]]:
    """A kernels run whose schema this code knows, every row of it readable and every timed row (status
    ``ok``) holding usable numbers (``compare_inputs``' rules, worded for a calibration)."""
    metadata, records = results.read_results(path)
    check_schema(path, metadata, "calibrate from")
    if metadata.get("kind") != "kernels":
        raise SpecbenchError(f"{path} holds a {metadata.get('kind')} run; a calibration reads kernels runs")
    file = results.results_file(path)
    refuse_unreadable(file, records, KEY_FIELDS, "so calibrate cannot tell which case it is")
    check_timings(file, records, "nothing is calibrated")
    return metadata, records


def _check_same_code(first: tuple[str, dict], other: tuple[str, dict]) -> None:
    """Refuse runs that time different implementations, or one implementation from different code (built in,
    a plugin file): their medians differ by what the code does, which no A/A spread is."""
    (first_path, first_meta), (path, metadata) = first, other
    names = [sorted(map(str, meta.get("implementations") or [])) for meta in (first_meta, metadata)]
    if names[0] != names[1]:
        raise SpecbenchError(f"{first_path} times the implementations {', '.join(names[0]) or 'none recorded'} and "
                             f"{path} {', '.join(names[1]) or 'none recorded'}: an A/A calibration needs runs of one "
                             f"command, timing the same code")
    sources = [{fact.get("name"): str(fact.get("source") or "a source it did not record")
                for fact in meta.get("implementation_facts") or [] if isinstance(fact, dict)}
               for meta in (first_meta, metadata)]
    for name in names[0]:
        if sources[0].get(name) != sources[1].get(name):
            raise SpecbenchError(f"{first_path} takes the implementation {name} from {sources[0].get(name)} and "
                                 f"{path} from {sources[1].get(name)}: an A/A calibration needs runs of the same "
                                 f"code, and a change of code is what compare judges")


def write_calibration(calibration: dict[str, Any], path: Path) -> None:
    """Write a calibration as JSON into an existing folder; an unwritable target is a ``SpecbenchError``."""
    try:
        path.write_text(json.dumps(calibration, indent=2) + "\n")
    except OSError as exc:
        raise SpecbenchError(f"cannot write the calibration to {path}: {exc.strerror or exc}") from exc


def load_calibration(path: str | Path) -> Calibration:
    """Read a calibration file written by ``specbench calibrate``; anything else is a ``SpecbenchError``."""
    try:
        payload = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecbenchError(f"--calibration {path} is not a readable calibration file ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("kind") != KIND:
        raise SpecbenchError(f"--calibration {path} is not a calibration file (write one with specbench calibrate)")
    if payload.get("format_version") != FORMAT_VERSION:
        raise SpecbenchError(f"--calibration {path} has format {payload.get('format_version')!r}; this specbench reads "
                             f"{FORMAT_VERSION}")
    thresholds = {}
    for index, case in enumerate(payload.get("cases") or []):
        try:
            key, timer, threshold = tuple(case["key"]), str(case["timer"]), float(case["threshold"])
        except (KeyError, TypeError, ValueError):
            raise SpecbenchError(f"--calibration {path}: case {index} needs a key, a timer and a threshold") from None
        if not (math.isfinite(threshold) and threshold > 0):
            raise SpecbenchError(f"--calibration {path}: case {index} has threshold {threshold}, not a positive number")
        thresholds[key] = (timer, threshold)
    if not thresholds:
        raise SpecbenchError(f"--calibration {path} holds no case")
    return Calibration(str(payload.get("device")), thresholds, str(path))
