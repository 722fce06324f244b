"""`specbench compare BASELINE CURRENT`: the perf-regression gate (exit 1 when a case got slower).

Parses the options and calls ``specbench.compare_report.run_gate`` (which checks the report
targets, compares, then writes the markdown, JSON and chart asked for), then prints the warnings
and the table worst first. Unusable input or an unwritable report is one sentence and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from specbench.console import console, error_console, fail, lazy_module, plural, print_notes, print_table
from specbench.errors import SpecbenchError

compare = lazy_module("specbench.compare")
compare_report = lazy_module("specbench.compare_report")
calibration = lazy_module("specbench.calibration")
results = lazy_module("specbench.results")

_STYLE = {"slower": "bold red", "changed": "bold red", "differs": "bold red", "faster": "green",
          "unchanged": "dim", "same": "dim", "inconclusive": "yellow"}


def _table(comparison: compare.Comparison) -> Table:
    table = Table(title=f"specbench compare: {comparison.summary()}", title_justify="left", show_edge=False,
                  pad_edge=False)
    for column in compare_report.columns(comparison.kind):
        table.add_column(column, justify="left" if column in ("case", "verdict", "note") else "right")
    for case in comparison.cases:
        cells = [escape(cell) for cell in compare_report.case_cells(case)]
        cells[6] = f"[{_STYLE.get(case.verdict, '')}]{cells[6]}[/]"
        table.add_row(*cells)
    return table


def compare_command(
    baseline: Annotated[Path, typer.Argument(metavar="BASELINE", help="Results folder (or its results.json[.gz]) "
                                             "of the baseline run.", show_default=False)],
    current: Annotated[Path, typer.Argument(metavar="CURRENT", help="Results folder (or its results.json[.gz]) of "
                                            "the run to judge.", show_default=False)],
    threshold: Annotated[list[str] | None, typer.Option(
        "--threshold", "-t", metavar="T", help="Slowdown that fails the gate: 5% (default), or per mode such as "
        "greedy=3% (repeat or comma-separate, one value a mode). For kernels and plan runs; per mode for kernels "
        "runs only.", show_default=False)] = None,
    host_threshold: Annotated[str | None, typer.Option(
        "--host-threshold", metavar="T", help="Slowdown that fails a row timed on the host: every CPU row, and a GPU "
        "row outside a CUDA graph (host time moves between processes). 30% (default); one value for every mode. "
        "For kernels runs only.", show_default=False)] = None,
    markdown: Annotated[Path | None, typer.Option(
        "--markdown", metavar="FILE", help="Append a markdown report (for a pull request or $GITHUB_STEP_SUMMARY).",
        show_default=False)] = None,
    json_file: Annotated[Path | None, typer.Option(
        "--json", metavar="FILE", help="Write every case's ratio, interval and verdict as JSON.",
        show_default=False)] = None,
    chart: Annotated[Path | None, typer.Option(
        "--chart", metavar="FILE", help="Draw each case's ratio and interval: a .png, .svg or .pdf file, or an "
        "existing folder (compare.png inside it).", show_default=False)] = None,
    calibration: Annotated[Path | None, typer.Option(
        "--calibration", metavar="FILE", help="Judge each kernels case at its own threshold, measured from A/A runs "
        "(specbench calibrate); cases it does not hold keep --threshold/--host-threshold.", show_default=False)] = None,
    confirm: Annotated[bool, typer.Option(
        "--confirm", help="Before failing, re-time each slower kernels case in a fresh process on this machine (the "
        "current run's device, with the code checked out here); it stays slower only if confirmed.")] = False,
) -> None:
    """Compare two kernels runs (or two sweeps, or two plans): exit 1 when a case is significantly slower, or a sweep
    changed."""
    try:
        thresholds = compare.parse_thresholds(threshold or [])
        host = None if host_threshold is None else compare.parse_threshold(host_threshold, "--host-threshold")
        files = compare_report.ReportFiles(markdown, json_file, chart)
        comparison, written = compare_report.run_gate(baseline, current, thresholds, host, files, calibration, confirm)
    except SpecbenchError as exc:
        fail(str(exc))
    for warning in comparison.warnings():
        error_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    print_table(_table(comparison))
    print_notes(comparison.notes)
    for title, names in (("only in the baseline", comparison.only_in_baseline),
                         ("only in the current run", comparison.only_in_current),
                         ("not timed in both (FAIL or skipped)", comparison.not_compared)):
        if names:
            console.print(f"{plural(len(names), 'case')} {title}: " + escape("; ".join(names[:5]))
                          + (f"; ... ({len(names) - 5} more)" if len(names) > 5 else ""), highlight=False)
    for what, path in (("markdown", written.markdown), ("JSON", written.json), ("chart", written.chart)):
        if path is not None:
            console.print(f"{what}: {escape(str(path))}", highlight=False)
    if comparison.failed:
        error_console.print(f"[bold red]FAIL:[/] {escape(comparison.summary())}", highlight=False)
        raise typer.Exit(1)


def calibrate_command(
    runs: Annotated[list[Path], typer.Argument(metavar="RUN...", help="Two or more kernels runs of one commit on one "
                                               "device (results folders or results.json[.gz]), each made in its own "
                                               "process.", show_default=False)],
    output: Annotated[Path, typer.Option(
        "--output", "-o", metavar="FILE", help="Where to write the calibration (JSON) for compare --calibration "
        "(default calibration.json).",
        show_default=False)] = Path("calibration.json"),
) -> None:
    """Measure each kernels case's threshold from A/A runs: its run-to-run spread, for compare --calibration."""
    try:
        results.check_output_file("--output", output, "calibration.json", runs)
        made = calibration.calibrate(runs)
        calibration.write_calibration(made, output)
    except SpecbenchError as exc:
        fail(str(exc))
    thresholds = sorted(case["threshold"] for case in made["cases"])
    console.print(f"{len(made['cases'])} cases calibrated from {len(runs)} runs of {escape(str(made['commit']))} on "
                  f"{escape(str(made['device']))}: thresholds {thresholds[0]:.1%} to {thresholds[-1]:.1%} (median "
                  f"{thresholds[len(thresholds) // 2]:.1%}); {len(made['not_calibrated'])} cases not timed in every "
                  f"run; written to {escape(str(output))}", highlight=False)
