"""`specbench profile fit`: a scenario file from a vLLM server's spec-decode metrics or log lines.

Parses the options, calls ``specbench.profile_fit``, prints what it measured and writes the
scenario; nothing is written when any input is unusable (one sentence, exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from specbench import acceptance
from specbench.console import console, fail, lazy_module, print_table
from specbench.errors import SpecbenchError

profile_fit = lazy_module("specbench.profile_fit")
scenarios = lazy_module("specbench.scenarios")


def _fit_table(fit: profile_fit.FittedProfile) -> Table:
    table = Table(title=f"measured over {fit.num_drafts:,} drafts", title_justify="left", show_edge=False,
                  pad_edge=False)
    for column in ("position", "accepted", "p_i measured", "95% interval", "p_i in the scenario"):
        table.add_column(column, justify="left" if column == "position" else "right")
    for i, measured in enumerate(fit.measured_rates):
        flag = "" if abs(fit.rates[i] - measured) < 1e-12 else " [yellow](adjusted)[/]"
        table.add_row(str(i + 1), f"{fit.counts.accepted_per_position[i]:,}", f"{measured:.4f}",
                      f"[{fit.ci_low[i]:.4f}, {fit.ci_high[i]:.4f}]", f"{fit.rates[i]:.4f}{flag}")
    return table


def fit_command(
    files: Annotated[list[Path], typer.Argument(
        metavar="FILE...", help="One /metrics scrape, two (before and after: the interval between them), or vLLM "
        "log files with 'SpecDecoding metrics' lines.", show_default=False)],
    output: Annotated[Path, typer.Option(
        "--output", "-o", metavar="FILE", help="The scenario TOML to write.", show_default=False)],
    model: Annotated[str | None, typer.Option(
        "--model", metavar="NAME", help="The model_name label to read when a scrape holds several models.",
        show_default=False)] = None,
    name: Annotated[str | None, typer.Option(
        "--name", metavar="NAME", help="The scenario's name (default: the output file's stem).",
        show_default=False)] = None,
    cost_ratio: Annotated[str | None, typer.Option(
        "--cost-ratio", "-c", metavar="C", help="Draft/target step cost ratio to record for the speed-up model.",
        show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --output if it exists.")] = False,
) -> None:
    """Fit per-position acceptance rates from a vLLM server's metrics or logs into a scenario file."""
    try:
        if output.exists() and not force:
            raise SpecbenchError(f"{output} exists; pass --force to replace it or choose another --output")
        if output.exists() and output.is_dir():
            raise SpecbenchError(f"--output {output} is a folder; give a file name such as {output / 'profile.toml'}")
        cost = None
        if cost_ratio is not None:
            try:
                cost = acceptance.check_cost_ratio(float(cost_ratio))
            except ValueError:
                raise SpecbenchError(f"--cost-ratio takes a number, got {cost_ratio!r}") from None
        counts = profile_fit.read_counts(list(files), model)
        fit = profile_fit.fit_profile(counts)
        text = profile_fit.scenario_toml(fit, name or output.stem, cost)
        tmp = output.with_name(output.name + ".tmp")
        try:
            tmp.write_text(text)
            scenarios.load_scenario(tmp)  # what a sweep will read: check it before it replaces anything
            tmp.replace(output)
        except OSError as exc:
            raise SpecbenchError(f"cannot write {output}: {exc.strerror or exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)
    except SpecbenchError as exc:
        fail(str(exc))
    print_table(_fit_table(fit))
    where = ", ".join(counts.sources) + (f" (model {counts.model})" if counts.model else "")
    console.print(f"K = {fit.num_spec_tokens}, mean acceptance length L = {fit.mean_acceptance_length:.4f}, from "
                  f"{escape(where)}" + (f", {escape(counts.span)}" if counts.span else ""), highlight=False)
    if not fit.non_increasing:
        console.print("[yellow]note:[/] the measured rates rise with position somewhere (noise, or too few drafts); "
                      "the scenario's rates are the nearest non-increasing profile, the measured ones are kept in "
                      "its [fit] table", highlight=False)
    console.print(f"wrote {escape(str(output))}; run it with: specbench sweep --scenario {escape(str(output))}",
                  highlight=False)
