"""A result in the formats CI dashboards read: Bencher's metric format, github-action-benchmark's JSON, a CSV.

``specbench export`` reads a kernels, sweep or plan results folder (or its ``results.json``), or
the JSON report of ``specbench compare --json``, and writes one of:

- ``bencher``: Bencher Metric Format (BMF, bencher.dev/docs/reference/bencher-metric-format): one
  JSON object, benchmark name -> measure slug -> ``{"value", "lower_value", "upper_value"}`` (the
  bounds optional, numbers only). Upload it with ``bencher run --adapter json --file FILE``.
- ``github-action-benchmark``: the list github-action-benchmark reads with ``tool:
  customSmallerIsBetter``: ``{"name", "unit", "value"}`` per benchmark, with an optional ``range``
  and ``extra`` (both text). Every value exported there is one where smaller is better.
- ``csv``: one row per record (per case for a comparison), columns in a fixed order: ``kind``,
  ``name`` (the benchmark name of the other two formats), the case's key fields, then every
  other field in alphabetical order, then the run's ``commit`` and ``device``. List fields are
  ``;``-joined; a kernels record's raw ``samples_us`` stay in ``results.json``.

What each kind exports (the JSON formats carry only rows with a number to chart; the CSV carries
every row):

============  ==================================================  ===================================
kind          bencher measures                                    github-action-benchmark value
============  ==================================================  ===================================
kernels       ``latency``: median ns, p20 and p80 as the bounds   median µs (range: p20-p80)
sweep         ``acceptance-length``: mean L and its 95% interval;  ns per simulated draft position
              ``ns-per-position``: simulation time
plan          ``ms-per-token`` (step ms / L, bounds from L's       ms per emitted token per request
              interval); ``tokens-per-second-per-gpu``
compare       ``ratio``: current / baseline and its 95% interval  the ratio (kernels and plan
                                                                  comparisons; a sweep's ratio of
                                                                  acceptance lengths is not
                                                                  smaller-is-better, so it is refused)
============  ==================================================  ===================================

``latency`` is Bencher's built-in measure (nanoseconds), so kernels rows land on its default chart.

A result whose rows export cannot read (a hand-edited file) is refused in one sentence naming the file,
the record and the field (``check_rows``): a field it reads missing or of another type, or a kernels row
marked ok whose median is not a number of microseconds >= 0, which would be charted as a latency or
left out as though the row had failed.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from specbench import results
from specbench.errors import SpecbenchError
from specbench.records import KEY_FIELDS, NUMBER, POSITIVE, TEXT, WHOLE, FieldType, describe_record, refuse_unreadable

FORMATS = ("bencher", "github-action-benchmark", "csv")
# Bencher's own limits: a benchmark name of at most 1024 characters, a measure slug of at most 64
BENCHER_NAME_LIMIT = 1024
BENCHER_SLUG_LIMIT = 64
# the fields that name a case, first in the CSV (after kind and name), per kind of result
KEY_COLUMNS = {
    "kernels": ("case", "impl", "mode", "draft", "batch_size", "num_spec_tokens", "vocab_size", "model", "dtype",
                "acceptance", "acceptance_length", "cuda_graph", "target", "status", "median_us", "p20_us", "p80_us"),
    "sweep": ("case", "profile", "num_spec_tokens", "configured_rates", "expected_acceptance_length",
              "mean_acceptance_length", "mean_acceptance_length_ci_low", "mean_acceptance_length_ci_high", "verdict"),
    "plan": ("profile", "batch_size", "num_spec_tokens", "acceptance_length", "step_ms",
             "tokens_per_second_per_gpu", "is_best"),
    "compare": ("case", "verdict", "baseline", "current", "ratio", "ci_low", "ci_high", "threshold"),
}
RUN_COLUMNS = ("commit", "device")
_JSON_ONLY = ("samples_us",)
STATUS: FieldType = ("ok, FAIL or skipped", lambda value: value in ("ok", "FAIL", "skipped"))
# what export reads from a row of each kind, besides a kernels row's case (records.KEY_FIELDS): field -> (type,
# whether a row must hold it); a kernels row marked ok must also hold a median (check_rows)
READ_FIELDS: dict[str, dict[str, tuple[FieldType, bool]]] = {
    "kernels": {"status": (STATUS, True), "p20_us": (NUMBER, False), "p80_us": (NUMBER, False)},
    "sweep": {"profile": (TEXT, True), "num_spec_tokens": (WHOLE, True), "mean_acceptance_length": (NUMBER, True),
              "mean_acceptance_length_ci_low": (NUMBER, False), "mean_acceptance_length_ci_high": (NUMBER, False),
              "simulated_positions": (NUMBER, False), "simulation_seconds": (NUMBER, False)},
    "plan": {"profile": (TEXT, True), "batch_size": (WHOLE, True), "num_spec_tokens": (WHOLE, True),
             "tree_shape": (TEXT, False), "acceptance_length": (POSITIVE, True),
             "acceptance_length_ci_low": (NUMBER, False), "acceptance_length_ci_high": (NUMBER, False),
             "step_ms": (NUMBER, True),
             "tokens_per_second_per_gpu": (NUMBER, True), "tokens_per_second_per_gpu_ci_low": (NUMBER, False),
             "tokens_per_second_per_gpu_ci_high": (NUMBER, False)},
    "compare": {"case": (TEXT, True), "ratio": (NUMBER, False), "ci_low": (NUMBER, False), "ci_high": (NUMBER, False)},
}


def load(path: str | Path) -> tuple[str, dict[str, Any], list[dict]]:
    """``(kind, run metadata, rows)`` of a results folder or file, or of a ``compare --json`` report
    (kind ``compare``; its rows are the compared cases, its metadata the current run's); rows export
    cannot read are refused (``check_rows``)."""
    file = results.results_file(path)
    if file.is_file():
        try:
            payload = json.loads(results.read_text(file))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SpecbenchError(f"{file} is not a readable JSON file ({exc})") from exc
        if isinstance(payload, dict) and isinstance(payload.get("cases"), list) and "status" in payload:
            check_rows(file, "compare", payload["cases"])
            return "compare", {**(payload.get("current_run") or {}), "compared": payload.get("kind")}, \
                payload["cases"]
    metadata, records = results.read_results(path)
    kind = metadata.get("kind")
    if kind not in ("kernels", "sweep", "plan"):
        raise SpecbenchError(f"{path} holds a {kind!r} run; export reads kernels, sweep and plan runs and compare "
                             f"reports")
    check_rows(file, kind, records)
    return kind, metadata, records


def check_rows(file: Path, kind: str, rows: list) -> None:
    """Refuse a result (a hand-edited one) whose rows lack a field export reads or hold one of the wrong type
    (``READ_FIELDS``, and ``records.KEY_FIELDS`` for a kernels row's case), or a kernels row marked ok whose
    median is not a number of microseconds >= 0 (it would be charted as a latency, or left out as a FAIL row
    though it is ok); the sentence names the file, the record and the field."""
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SpecbenchError(f"{file}: record {index} is {json.dumps(row, default=repr)}, not an object, so "
                                 f"export cannot read it as a {kind} row")
    fields = {**READ_FIELDS[kind], **(KEY_FIELDS if kind == "kernels" else {})}
    refuse_unreadable(file, rows, fields, f"so export cannot read it as a {kind} row")
    for index, row in enumerate(rows):
        if kind != "kernels" or row["status"] != "ok":
            continue
        for key in ("median_us", "p20_us", "p80_us"):
            value = row.get(key)
            if (key == "median_us" or value is not None) and not (_number(value) and value >= 0):
                raise SpecbenchError(f"{file}: record {index} ({row['impl']}: {describe_record(row)}) is marked ok "
                                     f"but its {key} is {json.dumps(value, default=repr)}, not a number of "
                                     f"microseconds >= 0: broken timing data, so nothing is exported; rerun that "
                                     f"case")


def benchmark_names(kind: str, rows: list[dict]) -> list[str]:
    """One name per row, unique within the result: a kernels row is ``impl: case`` (``records.describe_record``),
    a sweep case ``profile K=k``, a plan row ``profile B=b K=k``, a compared case its label. Two rows that
    would share a name (two profiles of one mean length) get their acceptance label, then their model preset,
    added; rows still alike are a broken result, refused."""
    names = []
    for row in rows:
        if kind == "kernels":
            names.append(f"{row['impl']}: {describe_record(row)}")
        elif kind == "sweep":
            names.append(f"{row['profile']} K={row['num_spec_tokens']}")
        elif kind == "plan":
            names.append(f"{row['profile']} B={row['batch_size']} K={row['num_spec_tokens']}" if not row.get("tree_shape")
                         else f"{row['profile']} B={row['batch_size']} tree {row['tree_shape']}")
        else:
            names.append(str(row["case"]))
    if kind == "kernels":  # what describe_record leaves out: the acceptance label, then the model preset
        for field_name in ("acceptance", "model"):
            repeated = {name for name in names if names.count(name) > 1}
            names = [f"{name} [{row.get(field_name)}]" if name in repeated else name for name, row in zip(names, rows)]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise SpecbenchError(f"two rows of this {kind} result share the case {repeated[0]!r}, and a result to export "
                             f"holds each case once: if one run repeated the case (a value given twice to an "
                             f"option), run it again without the repeat; if rows of several runs were put in one "
                             f"file, join the runs with specbench merge instead")
    return names


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _metric(value: Any, low: Any = None, high: Any = None, scale: float = 1.0) -> dict[str, float] | None:
    if not _number(value):
        return None
    metric = {"value": value * scale}
    if _number(low) and _number(high):
        metric.update(lower_value=low * scale, upper_value=high * scale)
    return metric


def _ms_per_token(row: dict, length_key: str) -> float | None:
    length = row.get(length_key)
    return row["step_ms"] / length if _number(length) and length > 0 and _number(row.get("step_ms")) else None


def _measures(kind: str, row: dict) -> dict[str, dict[str, float]]:
    """The BMF measures of one row (module docstring); empty when it has no number (a FAIL row)."""
    if kind == "kernels":  # a FAIL or skipped row has no latency, whatever it holds
        found = {"latency": _metric(row.get("median_us"), row.get("p20_us"), row.get("p80_us"), 1000.0)
                 if row["status"] == "ok" else None}
    elif kind == "sweep":
        positions, seconds = row.get("simulated_positions"), row.get("simulation_seconds")
        found = {"acceptance-length": _metric(row.get("mean_acceptance_length"),
                                              row.get("mean_acceptance_length_ci_low"),
                                              row.get("mean_acceptance_length_ci_high")),
                 "ns-per-position": _metric(seconds / positions * 1e9) if _number(seconds) and _number(positions)
                 and positions > 0 else None}
    elif kind == "plan":
        found = {"ms-per-token": _metric(_ms_per_token(row, "acceptance_length"),
                                         _ms_per_token(row, "acceptance_length_ci_high"),
                                         _ms_per_token(row, "acceptance_length_ci_low")),
                 "tokens-per-second-per-gpu": _metric(row.get("tokens_per_second_per_gpu"),
                                                      row.get("tokens_per_second_per_gpu_ci_low"),
                                                      row.get("tokens_per_second_per_gpu_ci_high"))}
    else:
        found = {"ratio": _metric(row.get("ratio"), row.get("ci_low"), row.get("ci_high"))}
    return {slug: metric for slug, metric in found.items() if metric is not None}


def to_bencher(kind: str, rows: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    """Bencher Metric Format: benchmark name -> measure slug -> value and bounds (rows without a number left out)."""
    bmf = {}
    for name, row in zip(benchmark_names(kind, rows), rows):
        measures = _measures(kind, row)
        if measures:
            bmf[name] = measures
    return bmf


def _smaller_is_better(kind: str, row: dict) -> tuple[float, str, str | None] | None:
    """``(value, unit, range)`` of a row for github-action-benchmark, or None without a number."""
    if kind == "kernels":
        low, high = row.get("p20_us"), row.get("p80_us")
        spread = f"p20-p80 {low:.4g}-{high:.4g}" if _number(low) and _number(high) else None
        return (row["median_us"], "us", spread) if row["status"] == "ok" else None
    if kind == "sweep":
        metric = _measures(kind, row).get("ns-per-position")
        return None if metric is None else (metric["value"], "ns/position", None)
    if kind == "plan":
        metric = _measures(kind, row).get("ms-per-token")
        if metric is None:
            return None
        bounds = f"95% {metric['lower_value']:.4g}-{metric['upper_value']:.4g}" if "lower_value" in metric else None
        return metric["value"], "ms/token", bounds
    metric = _measures(kind, row).get("ratio")
    if metric is None:
        return None
    bounds = f"95% {metric['lower_value']:.4g}-{metric['upper_value']:.4g}" if "lower_value" in metric else None
    return metric["value"], "x baseline", bounds


def _shown(value: Any, spec: str) -> str:
    return f"{value:{spec}}" if _number(value) else "-"


def _extra(kind: str, row: dict) -> str:
    if kind == "kernels":
        return f"status {row.get('status')}; {row.get('samples')} samples"
    if kind == "sweep":
        return (f"L {_shown(row.get('mean_acceptance_length'), '.4f')} (closed form "
                f"{_shown(row.get('expected_acceptance_length'), '.4f')}); verdict {row.get('verdict')}")
    if kind == "plan":
        return f"L {_shown(row.get('acceptance_length'), '.4f')}; step {_shown(row.get('step_ms'), '.4g')} ms"
    return f"verdict {row.get('verdict')}" + (f"; {row['note']}" if row.get("note") else "")


def to_github_action_benchmark(kind: str, rows: list[dict], compared: str | None = None) -> list[dict[str, Any]]:
    """github-action-benchmark's ``customSmallerIsBetter`` list (rows without a number left out)."""
    if kind == "compare" and compared == "sweep":
        raise SpecbenchError("a sweep comparison holds ratios of acceptance lengths, where larger is not worse; "
                             "github-action-benchmark's customSmallerIsBetter cannot chart them, so export it as "
                             "bencher or csv")
    entries = []
    for name, row in zip(benchmark_names(kind, rows), rows):
        found = _smaller_is_better(kind, row)
        if found is None:
            continue
        value, unit, spread = found
        entry: dict[str, Any] = {"name": name, "unit": unit, "value": value}
        if spread is not None:
            entry["range"] = spread
        entry["extra"] = _extra(kind, row)
        entries.append(entry)
    return entries


def _cell(value: Any) -> Any:
    if isinstance(value, list):
        return ";".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else value


def to_csv(kind: str, rows: list[dict], metadata: dict[str, Any]) -> str:
    """One line per row; the column order is fixed (module docstring), so two exports line up."""
    names = benchmark_names(kind, rows)
    leading = ["kind", "name", *KEY_COLUMNS[kind]]
    others = sorted({key for row in rows for key in row} - set(leading) - set(_JSON_ONLY) - set(RUN_COLUMNS))
    columns = [*leading, *others, *RUN_COLUMNS]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for name, row in zip(names, rows):
        full = {**row, "kind": kind, "name": name, **{key: metadata.get(key) for key in RUN_COLUMNS}}
        writer.writerow([_cell(full.get(column)) for column in columns])
    return buffer.getvalue()


def render(path: str | Path, output_format: str) -> tuple[str, int, int]:
    """The export of the result at ``path`` as text, with the number of rows exported and of rows in the
    result (the JSON formats leave out rows without a number: FAIL and skipped kernels rows)."""
    if output_format not in FORMATS:
        raise SpecbenchError(f"--format must be one of {', '.join(FORMATS)}, got {output_format!r}")
    kind, metadata, rows = load(path)
    if not rows:
        raise SpecbenchError(f"{path} holds no records to export")
    try:  # a result the converters refuse (a case held twice, say) is named in the sentence
        if output_format == "csv":
            return to_csv(kind, rows, metadata), len(rows), len(rows)
        if output_format == "bencher":
            exported: Any = to_bencher(kind, rows)
        else:
            exported = to_github_action_benchmark(kind, rows, metadata.get("compared"))
    except SpecbenchError as exc:
        raise SpecbenchError(f"{path}: {exc}") from exc
    if not exported:
        raise SpecbenchError(f"{path} has no row with a number to export ({len(rows)} rows, none timed or measured)")
    return json.dumps(exported, indent=2) + "\n", len(exported), len(rows)


def write(text: str, output: Path) -> None:
    """Write an export to ``output``, a file whose folder exists (``results.check_output_file`` says so
    before the export is rendered)."""
    try:
        output.write_text(text)
    except OSError as exc:
        raise SpecbenchError(f"cannot write {output}: {exc.strerror or exc}") from exc
