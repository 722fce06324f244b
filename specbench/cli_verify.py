"""`specbench verify`: the exactness suite (``specbench/exactness.py``) for any implementation.

Prints one row per check (verdict, test, statistic, p-value, sample size, what was measured),
then a summary with the Bonferroni level. The modes and methods of one implementation share one Bonferroni
budget, so its tables print once every method ran. Exit 1 when a check fails; 2 for input it cannot use,
and for a run that checked nothing (every check skipped); 130 on Ctrl-C and 141 on a closed pipe,
after printing the checks that finished and writing them to ``--json`` with ``interrupted`` set.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Annotated, NamedTuple

import typer
from rich.markup import escape
from rich.table import Table

from specbench import machine, methods
from specbench.cli_bench import _items  # comma lists read as kernels reads them
from specbench.console import (
    STOPPED,
    console,
    error_console,
    fail,
    lazy_module,
    print_error,
    print_notes,
    print_table,
    stopped,
)
from specbench.errors import SpecbenchError

exactness = lazy_module("specbench.exactness")
exactness_tree = lazy_module("specbench.exactness_tree")
registry = lazy_module("specbench.implementations.registry")
results = lazy_module("specbench.results")
sweep = lazy_module("specbench.sweep")
trees = lazy_module("specbench.trees")
tree_shapes = lazy_module("specbench.tree_shapes")

_VERDICT_STYLE = {"pass": "green", "FAIL": "bold red", "skipped": "yellow", "lossy": "magenta"}
_MODES = ("greedy", "probabilistic", "synthetic")
DEFAULT_SAMPLES = 20000
# exactness_tree.MAX_PROBABILISTIC_CHILDREN, written out so that --help imports no torch (a test keeps them equal)
HELP_MAX_CHILDREN = 6
INTERPRETED_SAMPLES = 200


def _number(text: str, option: str, kind: type, low: float, high: float | None = None, high_text: str | None = None):
    """``text`` as a ``kind`` in ``[low, high)``; ``high_text`` spells ``high`` in the refusal (``2**62``)."""
    try:
        value = kind(text)
        if isinstance(value, float) and math.isnan(value):
            raise ValueError
    except ValueError:
        raise SpecbenchError(f"{option} takes a {'whole ' if kind is int else ''}number, got {text!r}") from None
    if value < low or (high is not None and value >= high):
        bound = f"in [{low:g}, {high_text or format(high, 'g')})" if high is not None else f"at least {low:g}"
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


class _Run:
    """One implementation's suite in this command: what the report says of it, finished or stopped."""

    def __init__(self, name: str, facts: dict, modes: list[str], suite, tree: str | None = None) -> None:
        self.name, self.facts, self.modes, self.suite = name, facts, modes, suite
        if suite.method != "token":
            self.name = f"{name} (method {suite.method})"
        if tree is not None:
            self.name = f"{self.name} (tree {tree})"
        self._started, self.seconds = time.perf_counter(), None

    def stop_clock(self) -> None:
        self.seconds = time.perf_counter() - self._started

    def entry(self) -> dict:
        return {"facts": self.facts, "modes": self.modes, "method": self.suite.method,
                "seconds": round(self.seconds or 0.0, 3),
                "level": self.suite.level, "checks": [c.as_dict() for c in self.suite.finished()]}


def _summary(run: _Run, significance: float) -> str:
    checks = run.suite.finished()
    failed = sum(c.verdict == "FAIL" for c in checks)
    passed = sum(c.verdict == "pass" for c in checks)
    skipped = sum(c.verdict == "skipped" for c in checks)
    tests, shared = run.suite.tests, sum(suite.tests for suite in run.suite.budget)
    if not tests:
        budget = "no statistical tests"
    elif shared == tests:
        budget = (f"{tests} statistical tests, each held to significance / {tests} = {run.suite.level:.2g} "
                  f"(significance {significance:g})")
    else:  # the methods of one implementation share the budget: P is the chance of a false FAIL in any of them
        budget = (f"{tests} of the {shared} statistical tests of its {len(run.suite.budget)} methods, each held to "
                  f"significance / {shared} = {run.suite.level:.2g} (significance {significance:g} for them all)")
    colour = "bold red" if failed else "green"
    lossy = sum(c.verdict == "lossy" for c in checks)
    reports = f", {lossy} lossy reports" if lossy else ""
    line = (f"[{colour}]{escape(run.name)}: {failed} failed[/], {passed} passed, {skipped} skipped{reports} in "
            f"{run.seconds:.1f} s; {budget}")
    if not methods.is_exact(run.suite.method):
        line += (f"\n[magenta]{run.suite.method} is a LOSSY method: its output does not follow the target's law "
                 f"(checked against its own rule; distances in the lossy rows)[/]")
    return line


def _show(run: _Run, significance: float, summary: bool = True) -> None:
    """One run's heading (the implementation, its facts and the method), its table and, unless stopped, summary."""
    facts, impl = run.facts, run.suite.impl
    console.print(f"[bold]{escape(impl.name)}[/]: {escape(impl.description)} ({escape(facts['source'])}; takes "
                  f"target {facts['target']}, draft {facts['draft']}; random streams: {facts['rng']}; method "
                  f"{run.suite.method})", highlight=False)
    print_table(_table(run.suite.finished()), console)
    if summary:
        console.print(_summary(run, significance), highlight=False)


def _checked_nothing(checks: list) -> str | None:
    """Why one implementation's run tested nothing (every check skipped), or None when it tested something."""
    if any(c.verdict != "skipped" for c in checks):
        return None
    reasons = list(dict.fromkeys(c.detail for c in checks if c.detail))
    return "; ".join(reasons[:2]) or "no check applies"


def _write_report(metadata: dict, runs: list[_Run], json_path: Path) -> None:
    report = {"metadata": metadata, "implementations": [run.entry() for run in runs]}
    try:
        json_path.write_text(json.dumps(report, indent=2) + "\n")
    except OSError as exc:
        raise SpecbenchError(f"cannot write --json {json_path}: {exc.strerror or exc}") from None


def verify_command(
    impl: Annotated[list[str], typer.Option(
        "--impl", metavar="NAMES", help="Implementations to check, comma-separated or repeated: torch, triton, "
        "flashinfer, vllm, vllm-mrv2, sglang, sglang-tree, sglang-tree-cuda, sglang-tree-target-only, textbook, "
        "control-*, a plugin's name, module:function or file.py:function.",
        show_default=False)],
    mode: Annotated[str, typer.Option(
        "--mode", "-m", metavar="MODES", help="greedy, probabilistic, synthetic, comma-separated, or all (the "
        "modes each implementation declares).")] = "all",
    device: Annotated[str, typer.Option("--device", metavar="NAME", help="auto, cpu or cuda.")] = "auto",
    samples: Annotated[str | None, typer.Option(
        "--samples", "-n", metavar="N", help="Requests per statistical check, at least 50 (default 20000; 200 "
        "when --interpret runs a Triton implementation, each request of which takes tens of milliseconds).",
        show_default=False)] = None,
    significance: Annotated[str, typer.Option(
        "--significance", metavar="P", help="Chance that a correct implementation fails any check of a run, "
        "every mode and method (Bonferroni: each test is held to P / number of tests), in [1e-12, 1).")] = "0.001",
    seed: Annotated[str, typer.Option("--seed", metavar="SEED", help="Seed of the inputs and request seeds.")] = "0",
    json_path: Annotated[str | None, typer.Option(
        "--json", metavar="FILE", help="Also write every check, the facts and the machine to this JSON file (its "
        "folder must exist).",
        show_default=False)] = None,
    interpret: Annotated[bool, typer.Option(
        "--interpret", help="On a CPU, run Triton implementations under the Triton interpreter.")] = False,
    method: Annotated[str, typer.Option(
        "--method", metavar="NAMES", help="Verification methods to check, comma-separated: token, block, and the "
        "lossy typical, relaxed (checked against their own rule, their distance from the target reported).")]
        = "token",
    tree: Annotated[str | None, typer.Option(
        "--tree", metavar="SHAPE", help="Certify tree verification on one tree instead of chains: chain:K, WxD "
        "(every node down to depth D-1 has W children) or parents:-1,0,0,... (token method only; the "
        f"probabilistic mode takes at most {HELP_MAX_CHILDREN} children a node).",
        show_default=False)] = None,
) -> None:
    """Check that an implementation's outputs follow the contract: token laws, acceptance, greedy identity, edges.
    Implementations that declare truncation are also checked under top_k, top_p and min_p (ties at the
    boundaries, drafts cut like the target): each slot's token law against the truncated target, the
    accepted-count law, no emitted token outside the kept set, top_k = 1 equal to greedy, every knob
    off equal to no knobs, per-request knobs in a batch of more than 64 rows; and, where declared,
    processed and raw log-probabilities against the float64 oracle. --method block holds an implementation
    that declares block verification to block's exact laws (oracle); a lossy method is held to its own rule,
    and its distance from the target's law and its accepted-length gain are reported, never passed off as exact.
    --tree SHAPE checks implementations that declare trees on that tree instead: each depth's token law and the
    accepted-depth law against the float64 oracle (independent, without-replacement and one-hot candidates), the
    accepted paths, greedy identity, and, for specbench's random streams, a chain given as a tree against the chain.
    """
    try:
        plan = _plan_verify(impl=impl, mode=mode, device=device, samples=samples, significance=significance,
                            seed=seed, interpret=interpret, method=method, tree=tree, json_path=json_path)
    except SpecbenchError as exc:
        fail(str(exc))
    print_notes(plan.notes)
    _check_all(plan, _runnable(plan), plan.json_path)


class _VerifyPlan(NamedTuple):
    """``verify``'s options, checked: what to check, how hard, where."""

    chosen: list
    modes: list[str]
    mode: str
    method_names: list[str]
    sample_count: int
    significance: float
    seed: int
    device_name: str
    interpret: bool
    tree: str | None
    parents: list[int] | None
    json_path: Path | None
    notes: list[str]


def _tree_parents(tree: str | None) -> list[int] | None:
    """``--tree``'s one shape into its parents (None: no tree). A repeated ``--tree`` is refused with every
    repeated option (``cli._refuse_repeated_options``); a comma list of shapes, which ``kernels`` takes, here."""
    if tree is None:
        return None
    shapes = [shape for shape in tree_shapes.split_tree_shapes(tree) if shape]
    if len(shapes) > 1:
        raise SpecbenchError(f"verify --tree takes one tree shape, got {len(shapes)} in {tree!r}; run verify once "
                             f"for each of {', '.join(shapes)}")
    return trees.parse_tree_shape(tree)


def _plan_verify(*, impl: list[str], mode: str, device: str, samples: str | None, significance: str, seed: str,
                 interpret: bool, method: str | None, tree: str | None,
                 json_path: str | None = None) -> _VerifyPlan:
    """The options into a plan; every refusal a ``SpecbenchError``."""
    if interpret:
        device = machine.use_triton_interpreter(device)
    method_names = methods.parse_methods(method)
    if not any(text.strip() for text in impl):
        raise SpecbenchError("--impl needs at least one implementation name")
    names = [name for text in impl for name in _items("--impl", text)]
    if not mode.strip():
        raise SpecbenchError(f"--mode needs at least one of {', '.join(_MODES)} or all, got {mode!r}")
    modes = list(_MODES) if mode.strip() == "all" else _items("--mode", mode)
    if "all" in modes:
        raise SpecbenchError(f"--mode all means every mode, so it stands alone, got {mode!r}")
    for name in modes:
        if name not in _MODES:
            raise SpecbenchError(f"unknown mode {name!r}; choose from {', '.join(_MODES)} or all")
    sample_count = None if samples is None else _number(samples, "--samples", int, 50)
    significance_value = _number(significance, "--significance", float, 1e-12, 1.0)
    seed_value = _number(seed, "--seed", int, 0, 2**62, "2**62")  # written as rng.check_seed writes it
    device_name = sweep.resolve_device(device)
    if sample_count is not None:
        exactness.check_samples(sample_count, device_name)
    parents = _tree_parents(tree)
    if parents is not None and method_names != ["token"]:
        raise SpecbenchError(f"--tree checks the token method only, got --method {method}")
    json_file = None
    if json_path is not None:
        if not json_path.strip():
            raise SpecbenchError(f"--json needs a file name, got {json_path!r}")
        json_file = Path(json_path)
        results.check_output_file("--json", json_file, "verify.json")
    chosen = registry.resolve_all(names)
    notes = []  # printed when the run starts, after every refusal
    triton = any(i.needs_gpu for i in chosen)  # what --interpret runs under the interpreter
    if sample_count is None:  # Triton under the interpreter takes tens of milliseconds a request: fewer
        sample_count = INTERPRETED_SAMPLES if interpret and triton else DEFAULT_SAMPLES
    if interpret and not triton:
        notes.append(f"--interpret has no Triton implementation to run here ({', '.join(i.name for i in chosen)}): "
                     f"the checks run on the CPU, {sample_count:,} requests each")
    if parents is not None:  # the modes of every tree sampler, checked before the first runs
        tree_modes = [m for i in chosen if i.trees for m in _modes_of(i, modes, mode)]
        exactness_tree.check_tree_modes(parents, tree_modes, tree.strip())
        exactness_tree.check_tree_samples(sample_count, parents, device_name)
    return _VerifyPlan(chosen, modes, mode, method_names, sample_count, significance_value, seed_value, device_name,
                       interpret, tree, parents, json_file, notes)


def _modes_of(chosen_impl, modes: list[str], mode: str) -> list[str]:
    """The modes ``chosen_impl`` is checked in: those asked for, or under ``all`` those it declares."""
    return [m for m in modes if mode.strip() != "all" or m in chosen_impl.modes]


def _runnable(plan: _VerifyPlan) -> list:
    """The implementations of ``plan`` that can run here; the others are named as skipped (none: exit 2)."""
    import torch

    torch_device = torch.device(plan.device_name)
    runnable, skipped = [], []
    for chosen_impl in plan.chosen:
        reason = chosen_impl.cannot_run(torch_device, plan.interpret)
        if reason:
            skipped.append(f"{chosen_impl.name}: {reason}")
        else:
            runnable.append(chosen_impl)
    if not runnable:
        fail(f"no implementation given can run here ({'; '.join(skipped)})")
    for line in skipped:
        error_console.print(f"[yellow]skipped[/] {escape(line)}", highlight=False)
    return runnable


def _check_all(plan: _VerifyPlan, runnable: list, json_path: Path | None) -> None:
    """Run the exactness suite of every runnable implementation and method, a table and a summary each;
    then the report and the exit status (1 for a FAIL, 2 for a run that checked nothing)."""
    import torch

    modes, mode, method_names, sample_count = plan.modes, plan.mode, plan.method_names, plan.sample_count
    significance_value, seed_value, device_name = plan.significance, plan.seed, plan.device_name
    interpret, tree, parents = plan.interpret, plan.tree, plan.parents
    torch_device = torch.device(device_name)
    metadata = results.collect_metadata(device_name, kind="verify", samples=sample_count,
                                         significance=significance_value, seed=seed_value, interpreted=interpret,
                                         interrupted=False, **({"tree": tree} if tree is not None else {}))
    runs: list[_Run] = []
    shown = 0  # runs[:shown] are printed: an implementation's methods share one budget, so print once all ran
    try:
        for chosen_impl in runnable:
            shared = None
            for method_name in method_names:
                modes_here = _modes_of(chosen_impl, modes, mode)
                facts = chosen_impl.facts()
                settings = {"samples": sample_count, "significance": significance_value, "seed": seed_value,
                            "method": method_name, "shared_with": shared}
                if parents is None:
                    suite = exactness.Suite(chosen_impl, torch_device, modes_here, **settings)
                else:
                    suite = exactness_tree.TreeSuite(chosen_impl, torch_device, modes_here, parents, **settings)
                shared = suite
                runs.append(_Run(chosen_impl.name, facts, modes_here, suite, tree))
                with console.status("checking", spinner="dots") as status:
                    suite.on_check = lambda name, run=runs[-1]: status.update(escape(f"{run.name}: {name}"))
                    suite.run()
                runs[-1].stop_clock()
            for run in runs[shown:]:
                _show(run, significance_value)
            shown = len(runs)
    except STOPPED as stop:
        exit_status = stopped(stop)  # after a closed pipe, what follows prints nowhere
        metadata["interrupted"] = True
        inside = bool(runs) and runs[-1].seconds is None  # stopped inside a suite: show the checks it finished
        if inside:
            runs[-1].stop_clock()
        for run in runs[shown:]:
            _show(run, significance_value, summary=not (inside and run is runs[-1]))
        finished = sum(len(run.suite.finished()) for run in runs)
        where = ""
        if json_path is not None:
            try:
                _write_report(metadata, runs, json_path)
                where = f"; they are in {escape(str(json_path))}"
            except SpecbenchError as exc:
                print_error(str(exc))
        console.print(f"[yellow]interrupted:[/] {finished} checks finished{where}", highlight=False)
        raise typer.Exit(exit_status) from None

    if json_path is not None:
        try:
            _write_report(metadata, runs, json_path)
        except SpecbenchError as exc:
            fail(str(exc))
        console.print(f"report: {escape(str(json_path))}", highlight=False)
    if any(c.verdict == "FAIL" for run in runs for c in run.suite.finished()):
        raise typer.Exit(1)
    for run in runs:
        why = _checked_nothing(run.suite.finished())
        if why:
            fail(f"verify checked nothing of {run.name} in the modes asked for ({', '.join(modes)}): {why}")
