"""`specbench verify`: the exactness suite (``specbench/exactness.py``) for any implementation.

Prints one row per check (verdict, test, statistic, p-value, sample size, what was measured),
then a summary with the Bonferroni level; exit 1 when a check fails, 2 for input it cannot use.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from specbench import machine
from specbench.console import console, error_console, fail, lazy_module, print_table
from specbench.errors import SpecbenchError

exactness = lazy_module("specbench.exactness")
registry = lazy_module("specbench.implementations.registry")
results = lazy_module("specbench.results")
sweep = lazy_module("specbench.sweep")

_VERDICT_STYLE = {"pass": "green", "FAIL": "bold red", "skipped": "yellow"}
_MODES = ("greedy", "probabilistic", "synthetic")
DEFAULT_SAMPLES = 20000
INTERPRETED_SAMPLES = 200


def _number(text: str, option: str, kind: type, low: float, high: float | None = None):
    try:
        value = kind(text)
    except ValueError:
        raise SpecbenchError(f"{option} takes a {'whole ' if kind is int else ''}number, got {text!r}") from None
    if value < low or (high is not None and value >= high):
        bound = f"in [{low:g}, {high:g})" if high is not None else f"at least {low:g}"
        raise SpecbenchError(f"{option} must be {bound}, got {text}")
    return value


def _table(checks: list) -> Table:
    table = Table(show_edge=False, pad_edge=False)
    for column in ("mode", "check", "verdict", "test", "statistic", "p-value", "n", "measured"):
        table.add_column(column, justify="right" if column in ("statistic", "p-value", "n") else "left",
                         no_wrap=column not in ("check", "measured"))
    for c in checks:
        statistic = "-" if c.statistic is None else ("inf" if c.statistic == float("inf") else f"{c.statistic:.2f}")
        p_value = "-" if c.p_value is None else f"{c.p_value:.3g}"
        table.add_row(c.mode, escape(c.name), f"[{_VERDICT_STYLE[c.verdict]}]{c.verdict}[/]", c.test, statistic,
                      p_value, "-" if c.samples is None else f"{c.samples:,}", escape(c.detail))
    return table


def verify_command(
    impl: Annotated[str, typer.Option(
        "--impl", metavar="NAMES", help="Implementations to check, comma-separated: torch, triton, flashinfer, vllm, "
        "textbook, control-*, a plugin's name, module:function or file.py:function.", show_default=False)],
    mode: Annotated[str, typer.Option(
        "--mode", "-m", metavar="MODES", help="greedy, probabilistic, synthetic, comma-separated, or all (the "
        "modes each implementation declares).")] = "all",
    device: Annotated[str, typer.Option("--device", metavar="NAME", help="auto, cpu or cuda.")] = "auto",
    samples: Annotated[str | None, typer.Option(
        "--samples", "-n", metavar="N", help="Requests per statistical check (default 20000; 200 under "
        "--interpret, where each request of a Triton kernel takes tens of milliseconds).",
        show_default=False)] = None,
    alpha: Annotated[str, typer.Option(
        "--alpha", metavar="A", help="Chance that a correct implementation fails any check of a run (Bonferroni: "
        "each test is held to A / number of tests).")] = "0.001",
    seed: Annotated[str, typer.Option("--seed", metavar="SEED", help="Seed of the inputs and request seeds.")] = "0",
    json_path: Annotated[Path | None, typer.Option(
        "--json", metavar="FILE", help="Also write every check, the facts and the machine to this JSON file.",
        show_default=False)] = None,
    interpret: Annotated[bool, typer.Option(
        "--interpret", help="On a CPU, run Triton implementations under the Triton interpreter.")] = False,
) -> None:
    """Check that an implementation's outputs follow the contract: token laws, acceptance, greedy identity, edges."""
    try:
        if interpret:
            device = machine.use_triton_interpreter(device)
        names = [name.strip() for name in impl.split(",") if name.strip()]
        if not names:
            raise SpecbenchError("--impl needs at least one implementation name")
        modes = list(_MODES) if mode == "all" else [m.strip() for m in mode.split(",") if m.strip()]
        for name in modes:
            if name not in _MODES:
                raise SpecbenchError(f"unknown mode {name!r}; choose from {', '.join(_MODES)} or all")
        default_samples = INTERPRETED_SAMPLES if interpret else DEFAULT_SAMPLES
        sample_count = default_samples if samples is None else _number(samples, "--samples", int, 50)
        alpha_value = _number(alpha, "--alpha", float, 1e-12, 1.0)
        seed_value = _number(seed, "--seed", int, 0, 2**62)
        device_name = sweep.resolve_device(device)
        chosen = registry.resolve_all(names)
    except SpecbenchError as exc:
        fail(str(exc))

    import torch

    torch_device = torch.device(device_name)
    runnable = []
    for chosen_impl in chosen:
        reason = chosen_impl.cannot_run(torch_device, interpret)
        if reason:
            error_console.print(f"[yellow]skipped[/] {escape(chosen_impl.name)}: {escape(reason)}", highlight=False)
        else:
            runnable.append(chosen_impl)
    if not runnable:
        fail("no implementation given can run here")

    report = {"metadata": results.collect_metadata(device_name, kind="verify", samples=sample_count,
                                                   alpha=alpha_value, seed=seed_value, interpreted=interpret),
              "implementations": []}
    any_failed = False
    for chosen_impl in runnable:
        modes_here = [m for m in modes if mode != "all" or m in chosen_impl.modes]
        facts = chosen_impl.facts()
        console.print(f"[bold]{escape(chosen_impl.name)}[/]: {escape(chosen_impl.description)} "
                      f"({escape(facts['source'])}; takes target {facts['target']}, draft {facts['draft']}; "
                      f"random streams: {facts['rng']})", highlight=False)
        suite = exactness.Suite(chosen_impl, torch_device, modes_here, samples=sample_count, alpha=alpha_value,
                                seed=seed_value)
        started = time.perf_counter()
        with console.status("checking", spinner="dots") as status:
            suite.on_check = lambda name: status.update(escape(name))
            try:
                checks = suite.run()
            except KeyboardInterrupt:
                console.print("[yellow]interrupted[/]")
                raise typer.Exit(130) from None
        seconds = time.perf_counter() - started
        print_table(_table(checks), console)
        failed = [c for c in checks if c.verdict == "FAIL"]
        passed = sum(c.verdict == "pass" for c in checks)
        skipped = sum(c.verdict == "skipped" for c in checks)
        tests = sum(c.p_value is not None for c in checks)
        colour = "bold red" if failed else "green"
        budget = (f"{tests} statistical tests, each held to alpha / {tests} = {suite.level:.2g} (alpha "
                  f"{alpha_value:g})" if tests else "no statistical tests")
        console.print(f"[{colour}]{chosen_impl.name}: {len(failed)} failed[/], {passed} passed, {skipped} skipped "
                      f"in {seconds:.1f} s; {budget}", highlight=False)
        any_failed = any_failed or bool(failed)
        report["implementations"].append({"facts": facts, "modes": modes_here, "seconds": round(seconds, 3),
                                          "level": suite.level, "checks": [c.as_dict() for c in checks]})
    if json_path is not None:
        try:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(report, indent=2) + "\n")
        except OSError as exc:
            fail(f"cannot write --json {json_path}: {exc.strerror or exc}")
        console.print(f"report: {escape(str(json_path))}", highlight=False)
    if any_failed:
        raise typer.Exit(1)
