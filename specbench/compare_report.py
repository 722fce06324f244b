"""What ``specbench compare`` hands over: the markdown, the JSON and the chart of a ``Comparison``.

``run_gate`` is the whole command below its options: it checks the report targets first (a
format it cannot write, a folder where a file belongs), then compares, then renders every report
in memory, and only then writes them. A report is never written before the verdict is known, and
a report that cannot be rendered leaves no other report half done.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specbench.compare import (
    ENVIRONMENT_FIELDS,
    FAILING,
    CaseComparison,
    Comparison,
    compare_runs,
    refuse_unread_options,
)
from specbench.console import plural
from specbench.errors import SpecbenchError
from specbench.results import check_output_file

CHART_FORMATS = ("png", "svg", "pdf")
# ``--chart DIR`` for a folder that exists: the chart goes inside it under this name
CHART_NAME = "compare.png"


@dataclass(frozen=True)
class ReportFiles:
    """Where the reports go (None: not asked for). ``markdown`` is appended to, the others replaced."""

    markdown: Path | None = None
    json: Path | None = None
    chart: Path | None = None


def check_targets(files: ReportFiles, inputs: Sequence[Path] = ()) -> ReportFiles:
    """The targets as they will be written: a chart for an existing folder goes inside it (as
    ``CHART_NAME``); a chart named without one of ``CHART_FORMATS``, a markdown or JSON target that
    is a folder, any target whose folder does not exist, or one of the ``inputs`` (the runs compared,
    their results files, a calibration) is a ``SpecbenchError``."""
    for option, path, example in (("--markdown", files.markdown, "compare.md"), ("--json", files.json, "compare.json")):
        if path is not None:
            check_output_file(option, path, example, inputs)
    chart = files.chart
    if chart is not None:
        if chart.is_dir():
            chart = chart / CHART_NAME
        suffix = chart.suffix.lower().lstrip(".")
        if suffix not in CHART_FORMATS:
            got = f"'.{suffix}'" if suffix else "no suffix"
            raise SpecbenchError(f"--chart writes {', '.join(CHART_FORMATS)} (named by the file's suffix), got {chart} "
                                 f"with {got}; give a file such as compare.png or an existing folder")
        check_output_file("--chart", chart, CHART_NAME, inputs)
    return ReportFiles(files.markdown, files.json, chart)


def run_gate(baseline: Path, current: Path, thresholds: dict[str | None, float], host_threshold: float | None,
             files: ReportFiles, calibration: Path | None = None, confirm: bool = False) -> tuple[Comparison, ReportFiles]:
    """Check the targets, compare the runs (``compare.compare_runs``, with the thresholds of a
    ``calibration`` file; ``thresholds`` and ``host_threshold`` as given: {} and None when not),
    refuse the options the kind of run compared does not read (``compare.refuse_unread_options``),
    re-time the slower cases in fresh processes when ``confirm`` (``specbench.confirm``), render
    every report, write them; returns the comparison and the files written (a chart given as a
    folder resolved)."""
    files = check_targets(files, [baseline, current, *([calibration] if calibration is not None else [])])
    calibrated = None
    if calibration is not None:
        from specbench.calibration import load_calibration

        calibrated = load_calibration(calibration)
    comparison = compare_runs(baseline, current, thresholds, host_threshold, calibrated)
    refuse_unread_options(comparison.kind, thresholds, host_threshold, confirm)
    if confirm:
        from specbench.confirm import confirm_slower

        retimed = confirm_slower(comparison, baseline, current)
        if retimed:
            comparison.notes.append(f"{plural(retimed, 'slower case')} {'was' if retimed == 1 else 'were'} re-timed "
                                    f"in a fresh process (--confirm); a case stays slower only if the re-timing says "
                                    f"so too")
    rendered: list[tuple[Path, bytes, str]] = []
    if files.markdown is not None:
        rendered.append((files.markdown, to_markdown(comparison, str(baseline), str(current)).encode(), "markdown"))
    if files.json is not None:
        text = json.dumps(to_json(comparison, str(baseline), str(current)), indent=2) + "\n"
        rendered.append((files.json, text.encode(), "JSON"))
    if files.chart is not None:
        from specbench import compare_charts

        chart = compare_charts.comparison_chart(comparison, files.chart.suffix[1:].lower())
        rendered.append((files.chart, chart, "chart"))
    for path, content, what in rendered:
        _write(path, content, what)
    return comparison, files


def _write(path: Path, content: bytes, what: str) -> None:
    try:
        with path.open("ab" if what == "markdown" else "wb") as handle:  # markdown appends: a CI step summary grows
            handle.write(content)
    except OSError as exc:
        raise SpecbenchError(f"cannot write the {what} to {path}: {exc.strerror or exc}") from exc


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def case_cells(case: CaseComparison) -> list[str]:
    """The table row of a case: case, baseline, current, ratio, 95% interval, threshold, verdict, note."""
    interval = "-" if case.ci_low is None else f"[{case.ci_low:.3f}, {case.ci_high:.3f}]"
    if case.kind == "sweep" and case.p_value is not None:
        interval = f"p = {case.p_value:.3g}"
    spec = ".1f" if case.kind == "kernels" else ".4f"
    threshold = "-" if case.threshold is None else f"±{case.threshold:.0%}"
    return [case.case, _fmt(case.baseline, spec), _fmt(case.current, spec), _fmt(case.ratio, ".3f"), interval,
            threshold, case.verdict, case.note]


def columns(kind: str) -> list[str]:
    what = {"kernels": "median µs", "plan": "ms/token"}.get(kind, "mean L")
    return ["case", f"baseline {what}", f"current {what}", "ratio", "95% interval", "threshold", "verdict", "note"]


def _run_line(label: str, metadata: dict) -> str:
    parts = [f"{key} `{metadata.get(key)}`" for key in ENVIRONMENT_FIELDS if metadata.get(key) is not None]
    return f"- **{label}**: " + ", ".join(parts)


def to_markdown(comparison: Comparison, baseline: str, current: str) -> str:
    """A pull-request comment or CI step summary: runs, summary line, warnings, table, unmatched cases."""
    lines = [f"## specbench compare: {comparison.status}", "", f"**{comparison.summary()}**", "",
             _run_line(f"baseline ({baseline})", comparison.baseline_metadata),
             _run_line(f"current ({current})", comparison.current_metadata), ""]
    remarks = [f"> warning: {warning}" for warning in comparison.warnings()]
    remarks += [f"> note: {note}" for note in comparison.notes]
    lines += [*remarks, ""] if remarks else []
    header = columns(comparison.kind)
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for case in comparison.cases:
        cells = [cell.replace("|", "\\|") for cell in case_cells(case)]
        if case.verdict in FAILING:
            cells[6] = f"**{cells[6]}**"
        lines.append("| " + " | ".join(cells) + " |")
    for title, names in (("Only in the baseline", comparison.only_in_baseline),
                         ("Only in the current run", comparison.only_in_current),
                         ("In both, not timed in both (FAIL or skipped)", comparison.not_compared)):
        if names:
            lines += ["", f"{title} ({len(names)}):", *[f"- {name}" for name in names]]
    return "\n".join(lines) + "\n"


def to_json(comparison: Comparison, baseline: str, current: str) -> dict[str, Any]:
    """Everything in the comparison as plain data (``--json``)."""
    widest = max((c.ci_high - c.ci_low for c in comparison.cases if c.ci_low is not None), default=None)
    return {
        "kind": comparison.kind, "baseline": baseline, "current": current, "status": comparison.status,
        "failed": comparison.failed, "summary": comparison.summary(), "counts": comparison.counts(),
        "widest_interval": widest, "setting_differences": [asdict(d) for d in comparison.differences],
        "warnings": comparison.warnings(), "busy_runs": comparison.busy_runs(),
        "partial_runs": comparison.partial_runs(), "notes": comparison.notes,
        "baseline_run": {k: comparison.baseline_metadata.get(k) for k in ENVIRONMENT_FIELDS},
        "current_run": {k: comparison.current_metadata.get(k) for k in ENVIRONMENT_FIELDS},
        "cases": [{k: v for k, v in asdict(case).items() if k != "key"} for case in comparison.cases],
        "only_in_baseline": comparison.only_in_baseline, "only_in_current": comparison.only_in_current,
        "not_compared": comparison.not_compared,
    }
