"""`specbench compare BASELINE CURRENT`: the perf-regression gate (exit 1 when a case got slower).

Parses the options, calls ``specbench.compare.compare_runs``, prints the table worst first, and
writes the markdown, JSON and chart asked for. Unusable input is one sentence and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from specbench.console import console, error_console, fail, lazy_module, print_table
from specbench.errors import SpecbenchError

compare = lazy_module("specbench.compare")
compare_charts = lazy_module("specbench.compare_charts")

_STYLE = {"slower": "bold red", "changed": "bold red", "differs": "bold red", "faster": "green",
          "unchanged": "dim", "same": "dim", "inconclusive": "yellow"}


def _table(comparison: compare.Comparison) -> Table:
    table = Table(title=f"specbench compare: {comparison.summary()}", title_justify="left", show_edge=False,
                  pad_edge=False)
    for column in compare.columns(comparison.kind):
        table.add_column(column, justify="left" if column in ("case", "verdict", "note") else "right")
    for case in comparison.cases:
        cells = [escape(cell) for cell in compare.case_cells(case)]
        cells[6] = f"[{_STYLE.get(case.verdict, '')}]{cells[6]}[/]"
        table.add_row(*cells)
    return table


def _write(path: Path, text: str, what: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if what == "markdown" else "w") as handle:  # markdown appends: a CI step summary grows
            handle.write(text)
    except OSError as exc:
        raise SpecbenchError(f"cannot write the {what} to {path}: {exc.strerror or exc}") from exc


def compare_command(
    baseline: Annotated[Path, typer.Argument(metavar="BASELINE", help="Results folder (or results.json) of the "
                                             "baseline run.", show_default=False)],
    current: Annotated[Path, typer.Argument(metavar="CURRENT", help="Results folder (or results.json) of the run to "
                                            "judge.", show_default=False)],
    threshold: Annotated[list[str] | None, typer.Option(
        "--threshold", "-t", metavar="T", help="Slowdown that fails the gate: 5% (default), or per mode such as "
        "greedy=3% (repeat or comma-separate).", show_default=False)] = None,
    host_threshold: Annotated[str, typer.Option(
        "--host-threshold", metavar="T", help="Slowdown that fails a GPU row timed outside a CUDA graph (host launch "
        "overhead moves between processes).")] = "30%",
    markdown: Annotated[Path | None, typer.Option(
        "--markdown", metavar="FILE", help="Append a markdown report (for a pull request or $GITHUB_STEP_SUMMARY).",
        show_default=False)] = None,
    json_file: Annotated[Path | None, typer.Option(
        "--json", metavar="FILE", help="Write every case's ratio, interval and verdict as JSON.",
        show_default=False)] = None,
    chart: Annotated[Path | None, typer.Option(
        "--chart", metavar="FILE", help="Draw each case's ratio and interval (PNG).", show_default=False)] = None,
) -> None:
    """Compare two kernels runs (or two sweeps): exit 1 when a case is significantly slower, or a sweep changed."""
    try:
        thresholds = compare.parse_thresholds(threshold or [])
        host = compare.parse_thresholds([host_threshold])[None]
        comparison = compare.compare_runs(baseline, current, thresholds, host)
    except SpecbenchError as exc:
        fail(str(exc))
    for warning in comparison.environment_differences():
        error_console.print(f"[yellow]warning:[/] {escape(warning)}: timings may differ for that reason alone",
                            highlight=False)
    for warning in comparison.busy_runs():
        error_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    print_table(_table(comparison))
    for note in comparison.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    for title, names in (("only in the baseline", comparison.only_in_baseline),
                         ("only in the current run", comparison.only_in_current),
                         ("not timed in both (FAIL or skipped)", comparison.not_compared)):
        if names:
            console.print(f"{len(names)} cases {title}: " + escape("; ".join(names[:5]))
                          + (f"; ... ({len(names) - 5} more)" if len(names) > 5 else ""), highlight=False)
    try:
        if markdown is not None:
            _write(markdown, compare.to_markdown(comparison, str(baseline), str(current)), "markdown")
        if json_file is not None:
            _write(json_file, json.dumps(compare.to_json(comparison, str(baseline), str(current)), indent=2) + "\n",
                   "JSON")
        if chart is not None:
            compare_charts.render_comparison_chart(comparison, chart)
    except SpecbenchError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the chart to {chart}: {exc.strerror or exc}")
    if comparison.failed:
        error_console.print(f"[bold red]FAIL:[/] {escape(comparison.summary())}", highlight=False)
        raise typer.Exit(1)
