"""What ``specbench compare`` checks in two results files before it judges a case.

- Every field compare reads from a record must be there and of its type (``FIELDS``: a kernels
  record's key and the numbers its threshold depends on, a sweep's histogram and rates, a plan's
  step time and acceptance length). A hand-edited file that breaks one is one sentence naming the
  file, the record and the field (``check_records``); such files once ended in a traceback.
- Broken timing data is refused: a kernels row marked ``ok`` whose median, percentiles or samples
  are not usable numbers (null, NaN, text, negative, every sample 0). The message names the file
  and the case; such a row was once dropped silently and the comparison passed.
- Settings that differ between the runs are named (``SettingDifference``). Those that change
  what one timing sample measures invalidate the rows they touch: the device, torch's CPU threads
  on a CPU run, the L2 flush, the clock, and the calls per CUDA graph for graph rows. The others
  (versions, the driver, sample budgets, where an implementation of one name comes from) are
  warnings. A setting one run did not record (an older file) is named, never invalidating.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.errors import SpecbenchError
from specbench.records import KEY_FIELDS, NUMBER, POSITIVE, TEXT, WHOLE, FieldType, refuse_unreadable
from specbench.results import SCHEMA_VERSION, UNRECORDED

VERSION_FIELDS = ("specbench", "torch", "triton", "python", "driver", "cuda")
# sample budgets and placements: they change how many samples a row has (the interval's width) or how many
# calls each averages, not what one measures (compared with a note; the warm-up's count can also decide which
# of a cold small call's two GPU states a row finds: timing.py, "Placements")
BUDGET_FIELDS = ("warmup", "min_samples", "max_samples", "max_ms", "placements")


@dataclass(frozen=True)
class SettingDifference:
    """A recorded setting whose value differs between the runs. ``invalidates``: it changes what
    one timing sample measures, so the rows it touches (``rows``: ``all`` or ``graph``) cannot be
    judged across it; otherwise it is a warning."""

    name: str
    baseline: Any
    current: Any
    invalidates: bool = False
    rows: str = "all"

    def __str__(self) -> str:
        return f"{self.name} {_shown(self.baseline)} (baseline) vs {_shown(self.current)} (current)"

    def touches(self, record: dict) -> bool:
        return self.invalidates and (self.rows == "all" or bool(record.get("cuda_graph")))


def _shown(value: Any) -> str:
    return "not recorded" if value is None else str(value)


def on_gpu(metadata: dict) -> bool:
    """Whether a run's metadata names a GPU (a CPU's description starts with ``cpu``)."""
    return not str(metadata.get("device", "cpu")).startswith("cpu")


def setting_differences(base_meta: dict[str, Any], cur_meta: dict[str, Any]) -> list[SettingDifference]:
    """Every recorded setting that differs between two runs' metadata, those that change what a
    timing sample measures first (only a kernels run's timings can be invalidated)."""
    timed = base_meta.get("kind") == "kernels"
    on_cpu = not (on_gpu(base_meta) or on_gpu(cur_meta))
    # a run from before a setting was recorded holds what those runs did
    base_timing, cur_timing = ({**UNRECORDED["timing"], **(meta.get("timing") or {})} for meta in (base_meta, cur_meta))
    checks = [
        ("device", base_meta.get("device"), cur_meta.get("device"), "all"),
        # torch's intra-op threads set a CPU row's speed; a GPU row's time is the device's
        ("threads", base_meta.get("threads"), cur_meta.get("threads"), "all" if on_cpu else None),
        ("L2 flush", base_timing.get("l2_flush"), cur_timing.get("l2_flush"), "all"),
        ("clock", base_timing.get("clock"), cur_timing.get("clock"), "all"),
        ("calls per CUDA graph", base_timing.get("graph_calls"), cur_timing.get("graph_calls"), "graph"),
        *((f"timing {key}", base_timing.get(key), cur_timing.get(key), None) for key in BUDGET_FIELDS),
        *((key, base_meta.get(key), cur_meta.get(key), None) for key in VERSION_FIELDS),
        *((f"implementation {name}", before, after, None)
          for name, before, after in _implementation_sources(base_meta, cur_meta)),
    ]
    if not timed:  # a sweep's counts do not depend on how a run was timed
        checks = [check for check in checks if check[0] in ("device", *VERSION_FIELDS)]
    if base_meta.get("kind") == "plan":  # a plan is arithmetic: the machine it ran on changes nothing
        checks = [check for check in checks if check[0] in VERSION_FIELDS]
    found = []
    for name, before, after, rows in checks:
        if before == after:
            continue
        # a setting one run did not record cannot invalidate anything: it is only named
        invalidates = timed and rows is not None and before is not None and after is not None
        found.append(SettingDifference(name, before, after, invalidates, rows or "all"))
    return sorted(found, key=lambda d: not d.invalidates)


def _implementation_sources(base_meta: dict, cur_meta: dict) -> list[tuple[str, str, str]]:
    # an implementation of one name from two places (built in, a plugin file) is two pieces of code
    def sources(metadata: dict) -> dict[str, str]:
        facts = metadata.get("implementation_facts") or []
        return {f.get("name"): f.get("source") for f in facts if isinstance(f, dict)}

    before, after = sources(base_meta), sources(cur_meta)
    return [(name, before[name], after[name]) for name in before if name in after and before[name] != after[name]]


def kernels_label(record: dict) -> str:
    """``torch: greedy B=1 K=3 V=4096 float32 L=3``: a kernels record's implementation and case."""
    from specbench.records import describe_record

    return f"{record['impl']}: {describe_record(record)}"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _as_json(value: Any) -> str:
    # a value as results.json spells it: null, NaN, "fast"
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _timing_problem(record: dict) -> str | None:
    median = record.get("median_us")
    if not (_number(median) and median > 0):
        return f"its median_us is {_as_json(median)}, not a positive number of microseconds"
    for key in ("p20_us", "p80_us"):
        value = record.get(key)
        if value is not None and not (_number(value) and value >= 0):
            return f"its {key} is {_as_json(value)}, not a number of microseconds"
    samples = record.get("samples_us") or []
    if not isinstance(samples, list):
        return f"its samples_us is {_as_json(samples)}, not a list of microseconds"
    bad = [x for x in samples if not (_number(x) and x >= 0)]
    if bad:
        return f"its samples_us holds {_as_json(bad[0])}, not a number of microseconds"
    if samples and not any(samples):
        return f"all {len(samples)} of its samples_us are 0"
    return None


def check_schema(path: str | Path, metadata: dict[str, Any], to: str) -> None:
    """Refuse a results file whose metadata gives no schema number, or a newer one than this code reads (``to``:
    what the reader would do with it, ``compare``, ``calibrate from``)."""
    version = metadata.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SpecbenchError(f"{path} gives results schema {version!r}, which is not a schema number (a whole "
                             f"number from 1); restore its metadata's schema_version")
    if version > SCHEMA_VERSION:
        raise SpecbenchError(f"{path} was written with results schema {version}, newer than this specbench reads "
                             f"({SCHEMA_VERSION}); update specbench to {to} it")


def check_timings(path: Path, records: list[dict], outcome: str = "nothing is compared") -> None:
    """Refuse a kernels file in which a timed row (status ``ok``) holds a median, percentile or
    sample that is not a usable number (null, NaN, text, negative, all samples 0); the message
    names the file and the case, and says the reader's ``outcome``."""
    for index, record in enumerate(records):
        if record.get("kind") != "kernels" or record.get("status") != "ok":
            continue
        problem = _timing_problem(record)
        if problem:
            try:
                case = kernels_label(record)
            except (KeyError, TypeError, ValueError):
                case = f"record {index}"
            raise SpecbenchError(f"{path}: the case {case} is marked ok but {problem}: broken timing data, so "
                                 f"{outcome}; rerun that case")


# what compare reads from each record of a run of each kind, as ``records.field_problem`` checks it (type, and
# whether a record must hold it): a kernels record's key and label (``records.KEY_FIELDS``), its timer and the counts
# its threshold depends on (``compare._ran_out_share``; its timings are ``check_timings``'); a sweep case's key,
# mean acceptance length and histogram; a plan row's key (a plan run's records of kind "plan" only), step time and
# acceptance length with its interval. Fields compare only tests for equality (a sweep's seeds, a plan's is_best)
# may hold anything.
NUMBERS: FieldType = ("a list of numbers", lambda value: isinstance(value, list) and all(map(NUMBER[1], value)))
COUNTS: FieldType = ("a list of whole-number counts",
                     lambda value: isinstance(value, list) and all(WHOLE[1](x) and x >= 0 for x in value))
FIELDS: dict[str, dict[str, tuple[FieldType, bool]]] = {
    "kernels": {**KEY_FIELDS, "timer": (TEXT, False), "samples": (WHOLE, False), "backlog_ran_out": (WHOLE, False)},
    "sweep": {"profile": (TEXT, True), "num_spec_tokens": (WHOLE, True), "configured_rates": (NUMBERS, True),
              "mean_acceptance_length": (POSITIVE, True), "accepted_histogram": (COUNTS, True)},
    "plan": {"profile": (TEXT, True), "batch_size": (WHOLE, True), "num_spec_tokens": (WHOLE, True),
             "tree_shape": (TEXT, False), "step_ms": (POSITIVE, True), "acceptance_length": (POSITIVE, True),
             "acceptance_length_ci_low": (POSITIVE, False), "acceptance_length_ci_high": (POSITIVE, False)},
}


def check_records(path: Path, kind: str, records: list[dict]) -> None:
    """Refuse a run of ``kind`` (kernels, sweep or plan) in which a record compare reads lacks a field of ``FIELDS``
    or holds one of another type, naming the file, the record (its index in ``records``) and the field; then a
    kernels run's timings (``check_timings``)."""
    refuse_unreadable(path, records, FIELDS[kind], f"so compare cannot read that {kind} record; restore the field "
                      f"or make the run again", only=lambda record: kind != "plan" or record.get("kind") == "plan")
    if kind == "kernels":
        check_timings(path, records)


def by_key(records: list[dict], side: str) -> dict[tuple, dict]:
    """Kernels records by ``records.record_key``; a record without the fields of a key is one sentence."""
    from specbench.records import record_key

    keyed = {}
    for index, record in enumerate(records):
        try:
            keyed[record_key(record)] = record
        except KeyError as exc:
            raise SpecbenchError(f"the {side} run's record {index} has no {exc.args[0]!r}: not a kernels record "
                                 f"this specbench can match") from None
        except (TypeError, ValueError) as exc:
            raise SpecbenchError(f"the {side} run's record {index} has a field of the wrong type ({exc})") from None
    return keyed
