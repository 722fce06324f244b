"""`specbench merge DIR... --output DIR`: the shards of one sharded run joined into one results folder.

Parses the options and calls ``specbench.merge.merge_runs`` (which refuses slices that are not one
run, see its docstring), then draws the charts and says where everything went.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from specbench.console import console, error_console, fail, lazy_module
from specbench.errors import SpecbenchError

merge = lazy_module("specbench.merge")
results = lazy_module("specbench.results")
bench_charts = lazy_module("specbench.bench_charts")
sweep_charts = lazy_module("specbench.sweep_charts")


def merge_command(
    folders: Annotated[list[Path], typer.Argument(metavar="DIR...", help="The results folders of the shards (made "
                                                  "with --shard I/N), in any order.", show_default=False)],
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar="DIR", help="Folder of the merged run (default results/<kind>-<timestamp>/).",
        show_default=False)] = None,
    allow_partial: Annotated[bool, typer.Option(
        "--allow-partial", help="Merge even when shards are missing or were interrupted (the merged metadata says "
        "which).")] = False,
    no_charts: Annotated[bool, typer.Option("--no-charts", help="Skip the PNG charts.")] = False,
) -> None:
    """Join the shards of a kernels or sweep run (--shard I/N) into one run that compare, plot and export read."""
    try:
        merged = merge.merge_runs(folders, results.output_folder("--output", output), allow_partial)
        if no_charts:
            charts = []
        elif merged.metadata["kind"] == "kernels":
            charts = bench_charts.render_kernel_charts(merged.records, merged.folder)
        else:
            charts = sweep_charts.render_sweep_charts(merged.records, merged.folder)
    except SpecbenchError as exc:
        fail(str(exc))
    metadata = merged.metadata
    console.print(f"merged {len(folders)} of {metadata['shard_count']} shards: {len(merged.records)} "
                  f"{metadata['kind']} records into {escape(str(merged.folder))}/; {len(charts)} charts",
                  highlight=False)
    for reason in metadata.get("missing", []):
        error_console.print(f"[yellow]partial:[/] {escape(reason)}", highlight=False)
    findings = [r for r in merged.records if r.get("status") == "FAIL" or r.get("verdict") == "BUG"]
    if findings:
        error_console.print(f"[yellow]note:[/] {len(findings)} rows are FAIL or BUG (their shards reported them)",
                            highlight=False)
