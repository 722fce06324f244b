"""`specbench export RESULT --format bencher|github-action-benchmark|csv`: a result for a CI dashboard.

Parses the options and calls ``specbench.export.render``; the export goes to ``--output`` or to
stdout (so it pipes into ``bencher run``), the count of rows exported to stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from specbench.console import error_console, fail, lazy_module
from specbench.errors import SpecbenchError

export = lazy_module("specbench.export")
results = lazy_module("specbench.results")


def export_command(
    result: Annotated[Path, typer.Argument(metavar="RESULT", help="A kernels, sweep or plan results folder (or its "
                                           "results.json[.gz]), or the JSON of specbench compare --json.",
                                           show_default=False)],
    output_format: Annotated[str, typer.Option(
        "--format", metavar="FORMAT", help="bencher (Bencher Metric Format), github-action-benchmark "
        "(customSmallerIsBetter JSON) or csv (one row per record).", show_default=False)] = ...,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE", help="Write here instead of to stdout.", show_default=False)] = None,
) -> None:
    """Write a result in a format CI dashboards read (Bencher, github-action-benchmark, a flat CSV)."""
    try:
        if output is not None:
            results.check_output_file("--output", output, "bench.json", [result])
        text, exported, total = export.render(result, output_format)
        if output is not None:
            export.write(text, output)
    except SpecbenchError as exc:
        fail(str(exc))
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    left = f"; {total - exported} without a number to chart (FAIL or skipped) left out" if exported < total else ""
    where = f" to {escape(str(output))}" if output is not None else ""
    error_console.print(f"exported {exported} of {total} rows as {escape(output_format)}{where}{left}",
                        highlight=False)
