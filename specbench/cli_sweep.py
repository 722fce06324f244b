"""`specbench sweep`: simulate synthetic-acceptance profiles and check them against the closed forms.

Parses the options into profiles (or tree cases, or natural cases: ``specbench/natural_sweep.py``), then calls
``specbench.sweep.run_sweep``; records go to disk as
they finish (a Ctrl-C or a closed pipe keeps them, marked interrupted), then the charts and a
summary. Every option arrives as text and is parsed here, so a bad value gets one sentence naming
it instead of a usage panel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn
from rich.table import Table

from specbench import acceptance, machine, scenarios
from specbench.console import (
    STOPPED,
    console,
    error_console,
    fail,
    fail_after_saving,
    lazy_module,
    plural,
    print_notes,
    print_table,
    stopped,
)
from specbench.errors import SpecbenchError

# loaded on first use: torch, numpy, pandas and scipy stay out of `specbench --help`
results = lazy_module("specbench.results")
rng = lazy_module("specbench.rng")
sweep = lazy_module("specbench.sweep")
shards = lazy_module("specbench.shards")
tree_shapes = lazy_module("specbench.tree_shapes")
tree_sweep = lazy_module("specbench.tree_sweep")
natural_sweep = lazy_module("specbench.natural_sweep")
natural_inputs = lazy_module("specbench.natural_inputs")
methods = lazy_module("specbench.methods")
sweep_charts = lazy_module("specbench.sweep_charts")

DEFAULT_NUM_SPEC_TOKENS = 3
_MAX_VALUES = 1000
_LABELS = {"p": "p_{}", "c": "c_{}", "P(A=j)": "P(A={})", "L": "L (mean length)"}
_VERDICT_STYLE = {"ok": "green", "outside 95%": "yellow", "BUG": "bold red", "n/a": "dim"}

# steps per case: 2**40 (1.1e12) already takes minutes on a GPU and days on a CPU; more is a typo
MAX_REQUESTS = 2**40


def _numbers(option: str, text: str, cast=float, ranges: bool = True) -> list:
    """``1.5,2,3`` or ``1.5:4.0:0.5`` (start:stop:step, stop included) into numbers."""
    values: list = []
    kind = "whole numbers" if cast is int else "numbers"
    for item in text.split(","):
        item = item.strip()
        try:
            if ":" in item:
                if not ranges:
                    raise SpecbenchError(
                        f"{option} takes one profile as comma-separated {kind}, not a start:stop:step range "
                        f"(repeat {option} for several profiles), got {text!r}")
                parts = [cast(p) for p in item.split(":")]
                if len(parts) != 3:
                    raise SpecbenchError(f"{option} range must read start:stop:step (three numbers, the step too), "
                                         f"got {item!r}")
                start, stop, step = parts
                if not (math.isfinite(start) and math.isfinite(stop) and math.isfinite(step)) or step <= 0 \
                        or stop < start:
                    raise SpecbenchError(
                        f"{option} range must read start:stop:step with start <= stop and step > 0, got {item!r}"
                    )
                count = math.floor((stop - start) / step + 1e-9) + 1
                if count > _MAX_VALUES:
                    raise SpecbenchError(f"{option} range {item!r} has {count} values, more than {_MAX_VALUES}")
                values += [cast(round(start + n * step, 10)) for n in range(count)]
            else:
                values.append(cast(item))
        except SpecbenchError:
            raise
        except ValueError:
            shape = " or a start:stop:step range" if ranges else ""
            raise SpecbenchError(f"{option} takes comma-separated {kind}{shape}, got {text!r}") from None
    return values


def _once(option: str, values: list, notes: list[str], shown=None) -> list:
    """``values`` each once, in the order given: a value given twice (``3,3``, ``1.0,1``, a range over a value also
    given) would run the same case twice with the same seed. As plan's --batch-sizes, the list keeps each value once,
    and a note for ``notes`` (printed once the options are all accepted) names what was repeated. ``shown`` writes a
    value for the note (default ``:g`` for a number)."""
    kept = list(dict.fromkeys(values))
    if len(kept) < len(values):
        shown = shown or (lambda value: f"{value:g}" if isinstance(value, float) else str(value))
        repeated = [shown(value) for value in kept if values.count(value) > 1]
        notes.append(f"{option} gives {', '.join(repeated)} more than once; "
                     f"{'it is' if len(repeated) == 1 else 'each is'} taken once")
    return kept


def _profiles(
    lengths: list[str], rates: list[str], alphas: list[str], scenario: str | None, ks: list[str],
    schedule: str | None, notes: list[str],
) -> tuple[list[scenarios.Profile], str | None]:
    given = [f"{name} {' '.join(values)}" for name, values in
             (("--acceptance-length", lengths), ("--rates", rates), ("--alpha", alphas),
              ("--scenario", [] if scenario is None else [scenario]))
             if values]
    if len(given) > 1:
        raise SpecbenchError(f"give only one of --acceptance-length, --rates, --alpha or --scenario, "
                             f"got {' and '.join(given)}")
    # the values given first, then what is missing: `-k -3` alone hears that -3 is no K
    if schedule is not None:
        acceptance.check_schedule(schedule)
    num_spec_tokens = _once("--num-spec-tokens", [k for text in ks for k in _numbers("--num-spec-tokens", text, int)],
                            notes)
    too_small = [k for k in num_spec_tokens if k < 1]
    if too_small:
        raise SpecbenchError(f"--num-spec-tokens must be at least 1 (a step drafts one token or more), got "
                             f"{too_small[0]}")
    too_large = [k for k in num_spec_tokens if k > acceptance.MAX_NUM_SPEC_TOKENS]
    if too_large:
        raise SpecbenchError(f"--num-spec-tokens must be at most {acceptance.MAX_NUM_SPEC_TOKENS}, got {too_large[0]}")
    if schedule is not None and not lengths:
        raise SpecbenchError(f"--schedule {schedule} turns --acceptance-length into rates; give it with "
                             f"--acceptance-length (--alpha is the geometric schedule itself)")
    if num_spec_tokens and not (lengths or rates or alphas):
        raise SpecbenchError(
            f"--num-spec-tokens {' '.join(ks)} needs --acceptance-length, --rates or --alpha (a scenario sets its own K)"
        )
    if lengths or alphas:
        option, field = ("--acceptance-length", "acceptance_length") if lengths else ("--alpha", "alpha")
        values = _once(option, [v for text in (lengths or alphas) for v in _numbers(option, text)], notes)
        if alphas:
            for value in values:
                if math.isnan(value) or not 0.0 <= value <= 1.0:
                    raise SpecbenchError(f"--alpha (the per-draft acceptance rate) must lie in [0, 1], got {value:g}")
        ks = num_spec_tokens or [DEFAULT_NUM_SPEC_TOKENS]
        if len(values) * len(ks) > _MAX_VALUES:
            raise SpecbenchError(f"{len(values)} values of {option} times {len(ks)} values of K make more than "
                                 f"{_MAX_VALUES} cases")
        return [scenarios.make_profile(k, **{field: value}, schedule=schedule or "min-variance")
                for k in ks for value in values], None
    if rates:
        profiles = []
        rate_sets = _once("--rates", [tuple(_numbers("--rates", text, ranges=False)) for text in rates], notes,
                          lambda values: ",".join(f"{v:g}" for v in values))
        for values in rate_sets:
            for k in num_spec_tokens or [len(values)]:
                profiles.append(scenarios.make_profile(k, rates=values))
        return profiles, None
    loaded = scenarios.load_scenario(scenarios.DEFAULT_SCENARIO if scenario is None else scenario)
    return list(loaded.profiles), loaded.name


def _tree_cases(trees: list[str], rates: list[str], others: dict[str, object], notes: list[str]) -> list:
    """``--tree SHAPE`` cases: every shape under every ``--rates`` set (conditional rates by sibling rank; rows
    separated by ``/`` are depths)."""
    # the shapes given first, then what is missing: `--tree 2x` alone hears that 2x is no shape
    shapes = once_shapes([tree_shapes.parse_tree_shape(text) for item in trees
                          for text in tree_shapes.split_tree_shapes(item)], notes)
    given = [option for option, value in others.items() if value]
    if given:
        raise SpecbenchError(f"--tree takes its conditional rates from --rates (e.g. --rates 0.8,0.3); {given[0]} "
                             f"belongs to chain sweeps")
    if not rates:
        raise SpecbenchError("--tree needs --rates: the conditional acceptance rate of each sibling rank, e.g. "
                             "--rates 0.8,0.3,0.1 (the same at every depth) or 0.8,0.3/0.7,0.2 (a row per depth)")
    tables = []  # each --rates as its rows, one row the same at every depth
    for text in rates:
        tables.append(tuple(() if not row.strip() else tuple(_numbers("--rates", row, ranges=False))
                            for row in text.split("/")))
    tables = _once("--rates", tables, notes, lambda rows: "/".join(",".join(f"{v:g}" for v in row) for row in rows))
    rate_sets = [list(rows[0]) if len(rows) == 1 else [list(row) for row in rows] for rows in tables]
    return tree_sweep.tree_cases(shapes, rate_sets)


def once_shapes(shapes: list, notes: list[str]) -> list:
    """``--tree`` shapes each once (``_once``): the same tree under two spellings (``2x2`` and its ``parents:``)
    is one tree, named in the note as it was first given."""
    def key(shape):
        return shape if isinstance(shape, tree_shapes.SequoiaRequest) else shape.parents

    first = {}
    for shape in shapes:
        first.setdefault(key(shape), shape)
    return [first[k] for k in _once("--tree", [key(shape) for shape in shapes], notes, lambda k: first[k].label)]


def _natural_cases(ks: list[str], method: str | None, draft_noise: str | None, vocab_size: str | None,
                   others: dict[str, object], notes: list[str]) -> list:
    """``--inputs natural`` cases: every K under every method and draft noise."""
    given = [option for option, value in others.items() if value]
    if given:
        raise SpecbenchError(f"--inputs natural draws its acceptance from the inputs; {given[0]} sets a synthetic "
                             f"profile (leave it out, or use --inputs planned)")
    num_spec_tokens = _once("--num-spec-tokens", [k for text in ks for k in _numbers("--num-spec-tokens", text, int)],
                            notes) or [DEFAULT_NUM_SPEC_TOKENS]
    noises = (_once("--draft-noise", _numbers("--draft-noise", draft_noise), notes) if draft_noise is not None
              else [natural_inputs.DEFAULT_DRAFT_NOISE])
    vocab = (natural_sweep.DEFAULT_VOCAB_SIZE if vocab_size is None
             else _single("--vocab-size", vocab_size.replace("_", ""), int))
    names = methods.parse_methods(method) if method is not None else [methods.DEFAULT_METHOD]
    cases = natural_sweep.natural_cases(num_spec_tokens, names, noises, vocab)
    if len(cases) > _MAX_VALUES:
        raise SpecbenchError(f"{len(cases)} natural cases (K x methods x draft noises) are more than {_MAX_VALUES}")
    return cases


def _single(option: str, text: str, cast):
    try:
        return cast(text.strip())
    except ValueError:
        kind = "a whole number" if cast is int else "a number"
        if cast is int and _integral(text):  # 1e3: every whole number of the command line is written in digits
            kind = "a whole number in digits (2_000_000, not 2e6)"
        raise SpecbenchError(f"{option} takes {kind}, got {text!r}") from None


def _integral(text: str) -> bool:
    try:
        return float(text).is_integer()
    except (ValueError, OverflowError):
        return False


def _fmt(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _interval(low, high, digits: int = 4) -> str:
    return "-" if low is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _verdict(text: str) -> str:
    return f"[{_VERDICT_STYLE.get(text, '')}]{escape(text)}[/]"


def per_second(rate: float) -> str:
    """A rate with an SI prefix, to three figures or more: ``23.0M``, ``48.2k``, ``120G``, ``512`` (the Triton
    interpreter simulates about 50,000 positions a second, a GPU 1e11: one fixed unit prints 0.0M or 120,000.0M)."""
    prefixes = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
    scale, prefix = next(((s, p) for s, p in prefixes if rate >= 0.9995 * s), (1.0, ""))  # 999.6 is 1.0k
    value = rate / scale
    return f"{value:.1f}{prefix}" if value < 99.95 else f"{value:,.0f}{prefix}"


def case_table(record: dict) -> Table:
    """The per-case table: configured vs measured, 95% interval, verdict."""
    rate = record.get("positions_per_second")
    # two lines, each narrower than the table: one would wrap wherever the table's width ends
    size = (f"N={plural(record['num_tree_nodes'], 'node')}, depth {record['tree_depth']}" if "tree_shape" in record
            else f"K={record['num_spec_tokens']}")
    title = (f"{escape(record['profile'])}  {size}\n{record['num_requests']:,} steps  ·  "
             f"{record['backend']} on {record['device']}" + (f"  ·  {per_second(rate)} positions/s" if rate else ""))
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for column, justify in (("quantity", "left"), ("configured", "right"), ("measured", "right"),
                            ("95% interval", "right"), ("verdict", "left")):
        table.add_column(column, justify=justify)
    for row in sweep.check_rows(record):
        if row["quantity"] == "P(node j)":
            continue  # a tree's node checks: one line below, every node in results_long.csv
        table.add_row(_LABELS[row["quantity"]].format(row["index"]), _fmt(row["expected"]), _fmt(row["measured"]),
                      _interval(row["ci_low"], row["ci_high"]), _verdict(row["verdict"]),
                      style="bold" if row["quantity"] == "L" else None)
    if "tree_shape" in record:
        verdicts = record["node_probabilities_verdicts"]
        worst = "BUG" if "BUG" in verdicts else ("outside 95%" if "outside 95%" in verdicts else "ok")
        table.add_row(f"P(node j), {plural(len(verdicts), 'node')}", "", "",
                      f"{verdicts.count('ok')} of {len(verdicts)} ok",
                      _verdict(worst))
    table.add_row("Var(A)", _fmt(record["expected_accepted_variance"]), _fmt(record["measured_accepted_variance"]),
                  "", "")
    table.add_row(f"speed-up (c={record['cost_ratio']:g})", _fmt(record["expected_speedup"], 3),
                  _fmt(record["measured_speedup"], 3), "", "")
    if record.get("iid_same_length_distribution") is not None:
        # a model profile beside the i.i.d. one of the same K and L: same mean, another law of A
        p_value = record.get("iid_same_length_p_value")
        table.add_row(f"[dim]i.i.d. alpha={record['iid_same_length_alpha']:.4f}, same L: Var(A)[/]",
                      _fmt(record["iid_same_length_variance"]), "", "",
                      "" if p_value is None else f"G test p {p_value:.2g}")
        table.add_row("[dim]i.i.d., same L: P(A=j)[/]",
                      " ".join(f"{v:.3f}" for v in record["iid_same_length_distribution"]), "", "", "")
    rates = record.get("min_variance_rates")
    if rates is not None and any(abs(a - b) > 1e-9 for a, b in zip(rates, record["configured_rates"])):
        # a measured or geometric profile beside the minimum-variance one of the same mean length
        table.add_row("[dim]min-variance, same L: Var(A)[/]", _fmt(record["min_variance_accepted_variance"]), "", "",
                      "")
        table.add_row(f"[dim]min-variance, same L: speed-up (c={record['cost_ratio']:g})[/]",
                      _fmt(record["min_variance_speedup"], 3), "", "", "")
    return table


def summary_table(records: list[dict]) -> Table:
    """One row per case: the mean length against its closed form, the speed-up and the verdict.

    The verdict shows the smallest p-value of the case's checks: anything above the BUG threshold
    (``bug_p_threshold``) is what chance gives.
    """
    table = Table(title="Sweep summary", title_justify="left", show_edge=False, pad_edge=False)
    spread = any(r.get("iid_same_length_distribution") is not None for r in records)
    columns = ["profile", "K or N" if any("tree_shape" in r for r in records) else "K", "L", "measured L", "95% interval", "Var(A)", "speed-up", "verdict"]
    if spread:  # model profiles: the law of A against the i.i.d. one with the same L
        columns[6:6] = ["Var(A) i.i.d. same L", "vs i.i.d. p"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("profile", "verdict") else "right")
    for r in records:
        chance = f" (min p {r['min_p_value']:.2g})" if r["verdict"] != "BUG" else f" ({plural(r['num_bugs'], 'check')})"
        table.add_row(escape(r["profile"]), str(r["num_spec_tokens"]), _fmt(r["expected_acceptance_length"]),
                      _fmt(r["mean_acceptance_length"]),
                      _interval(r["mean_acceptance_length_ci_low"], r["mean_acceptance_length_ci_high"]),
                      _fmt(r["measured_accepted_variance"]),
                      *([] if not spread else [
                          _fmt(r.get("iid_same_length_variance")) if r.get("iid_same_length_variance") is not None
                          else "", "" if r.get("iid_same_length_p_value") is None
                          else f"{r['iid_same_length_p_value']:.2g}"]),
                      _fmt(r["measured_speedup"], 3),
                      _verdict(r["verdict"]) + escape(chance))
    return table


def _used(values: list):
    # one value when every case used it, else the list per case
    return values[0] if len(set(values)) == 1 else values


def _resumable(records: list[dict], profiles: list[scenarios.Profile], out_dir: Path) -> set[int]:
    # the finished cases of the folder; each must be the case this run would run at its index
    done = set()
    for record in records:
        index = record.get("case")
        if not isinstance(index, int) or not 0 <= index < len(profiles):
            raise SpecbenchError(f"{out_dir} holds a case {index!r} that this run does not have; resume it with the "
                                 f"same profile options")
        profile = profiles[index]
        # a natural case's rates come from its inputs (rates None): its name and K say which case it is
        same_rates = profile.rates is None or record.get("configured_rates") == list(profile.rates)
        if (record.get("profile"), record.get("num_spec_tokens")) != (profile.name, profile.num_spec_tokens) \
                or not same_rates:
            # the name alone can be the same (`-l 2 -k 3` and `-l 2 -k 4`): then the K, or the rates, that differ
            theirs, ours = f"{record.get('profile')!r}", f"{profile.name!r}"
            if theirs == ours and record.get("num_spec_tokens") != profile.num_spec_tokens:
                theirs = f"{theirs} at K={record.get('num_spec_tokens')}"
                ours = f"{ours} at K={profile.num_spec_tokens}"
            elif theirs == ours:
                theirs = f"{theirs} with rates {record.get('configured_rates')}"
                ours = f"{ours} with rates {list(profile.rates)}"
            raise SpecbenchError(f"case {index} in {out_dir} is {theirs}, this run's is {ours}; resume it with the "
                                 f"same profile options")
        done.add(index)
    return done


def _warn_if_busy(load: float | None, threads: int, *, at_end: bool) -> None:
    text = machine.busy_warning(load, threads, at_end=at_end)
    if text:
        error_console.print(f"[yellow]warning:[/] {escape(text)}", highlight=False)


def sweep_command(
    acceptance_length: Annotated[list[str] | None, typer.Option(
        "--acceptance-length", "-l", metavar="LENGTHS", show_default=False,
        help="Mean acceptance length L: one value, several (2,2.5 or repeated) or a range 1.5:4.0:0.5 "
             "(start:stop:step).")] = None,
    schedule: Annotated[str | None, typer.Option(
        "--schedule", metavar="NAME", show_default=False,
        help="How --acceptance-length becomes rates: min-variance (default; floor(L-1) ones, the fraction, zeros) "
             "or geometric (p_i = alpha^i, alpha solved for L).")] = None,
    alpha: Annotated[list[str] | None, typer.Option(
        "--alpha", "-a", metavar="ALPHAS", show_default=False,
        help="Per-draft acceptance rate alpha in [0, 1] of the geometric schedule (p_i = alpha^i): one value, "
             "several or a range.")] = None,
    rates: Annotated[list[str] | None, typer.Option(
        "--rates", "-r", metavar="RATES", show_default=False,
        help="One profile's unconditional per-position rates, e.g. 0.9,0.7,0.5 (repeat for several profiles). With "
             "--tree: conditional rates by sibling rank (see --tree).")] = None,
    scenario: Annotated[str | None, typer.Option(
        "--scenario", "-s", metavar="FILE|NAME", show_default=False,
        help="A scenario TOML file, or the name of a shipped one. No profile option at all runs the embedded 'default'.")] = None,
    num_spec_tokens: Annotated[list[str] | None, typer.Option(
        "--num-spec-tokens", "-k", metavar="K", show_default=False,
        help=f"Draft tokens per step, at most {acceptance.MAX_NUM_SPEC_TOKENS}: one value, several or a range (default "
             f"{DEFAULT_NUM_SPEC_TOKENS} with --acceptance-length or --alpha, the number of rates with --rates).")] = None,
    num_requests: Annotated[str | None, typer.Option(
        "--num-requests", "-n", metavar="N", show_default=False,
        help="Simulated steps per case (default: 2,000,000, more for K > 14: enough for +-0.01 on the mean "
             "length).")] = None,
    seed: Annotated[str, typer.Option(
        "--seed", metavar="SEED", help="Seed of the run; each case draws from its own seed, mixed from SEED and its "
        "K and rates (recorded as case_seed).")] = "0",
    backend: Annotated[str, typer.Option("--backend", metavar="NAME", help="auto, triton or torch.")] = "auto",
    device: Annotated[str, typer.Option("--device", metavar="NAME", help="auto, cpu or cuda.")] = "auto",
    threads: Annotated[str, typer.Option(
        "--threads", metavar="N", help="CPU threads for torch (1 holds up beside other work on a shared machine; "
        "more is faster only on a quiet one).")] = str(machine.DEFAULT_THREADS),
    cost_ratio: Annotated[str | None, typer.Option(
        "--cost-ratio", "-c", metavar="C", show_default=False,
        help=f"Draft/target step cost ratio c in S = L / (1 + K c) (default: the scenario's, else "
             f"{acceptance.DEFAULT_COST_RATIO:g}).")] = None,
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar="DIR", show_default=False,
        help="Results folder (default results/sweep-<timestamp>/).")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the run in --output: finished cases are kept, the missing ones run (same "
        "options required).")] = False,
    no_charts: Annotated[bool, typer.Option("--no-charts", help="Skip the PNG charts.")] = False,
    tree: Annotated[list[str] | None, typer.Option(
        "--tree", metavar="SHAPE", show_default=False,
        help="Simulate draft trees instead of chains: chain:K, WxD (full tree), sequoia:N[:DEPTH] (the best tree of N "
             "nodes for the rates) or parents:-1,0,0,1 (repeat, or a comma list). With --tree, --rates is a "
             "CONDITIONAL rate per sibling rank (rank k accepted given its elder siblings were rejected), the same at "
             "every depth (0.8,0.3) or one row per depth (0.8,0.3/0.7,0.2); K is the tree's N nodes.")] = None,
    shard: Annotated[str | None, typer.Option(
        "--shard", metavar="I/N", help="Run slice I of N of the cases (every run of N positions dealt one to a "
        "shard, the deal turned one place each run; the same on every machine); join the slices with specbench merge.", show_default=False)] = None,
    inputs: Annotated[str, typer.Option(
        "--inputs", metavar="KIND", help="planned (synthetic profiles, the default) or natural: drafts drawn from a "
        "draft model (target logits N(0, 1), draft logits the target's plus --draft-noise), each step verified "
        "with --method and checked against the exact rates of the inputs drawn.")] = "planned",
    method: Annotated[str | None, typer.Option(
        "--method", metavar="NAMES", show_default=False,
        help="--inputs natural: verification methods, comma-separated (token, block, typical, relaxed; default "
             "token), one case per method.")] = None,
    draft_noise: Annotated[str | None, typer.Option(
        "--draft-noise", metavar="STDS", show_default=False,
        help="--inputs natural: the std of the noise on the draft logits (default 1): one value, several or a "
             "range.")] = None,
    vocab_size: Annotated[str | None, typer.Option(
        "--vocab-size", metavar="V", show_default=False,
        help="--inputs natural: the vocabulary of the rows (default 32768).")] = None,
) -> None:
    """Simulate acceptance profiles, or verify natural inputs by method, and check them against the closed forms."""
    try:
        run = _open_sweep(
            acceptance_length=acceptance_length, schedule=schedule, alpha=alpha, rates=rates,
            scenario=scenario, num_spec_tokens=num_spec_tokens, num_requests=num_requests,
            seed=seed, backend=backend, device=device, threads=threads, cost_ratio=cost_ratio,
            output=output, resume=resume, tree=tree, shard=shard, inputs=inputs, method=method,
            draft_noise=draft_noise, vocab_size=vocab_size)
    except SpecbenchError as exc:
        fail(str(exc))
    _time_sweep(run, no_charts)


@dataclass
class _SweepRun:
    """A sweep as its options plan it, with its results folder open: the profiles, how each is simulated,
    which cases this process skips (finished before, or another shard's), the writer, and whether
    ``--resume`` was asked for."""

    profiles: list
    scenario_name: str | None
    requests: int | None
    seed: int
    cost: float | None
    threads: int
    device_name: str
    backend_name: str
    shard: Any
    others: set
    steps: list
    out_dir: Path
    done: set
    writer: Any
    metadata: dict
    resume: bool
    notes: list[str]


def _open_sweep(
    *,
    acceptance_length, schedule, alpha, rates, scenario, num_spec_tokens, num_requests, seed, backend,
    device, threads, cost_ratio, output, resume, tree, shard, inputs="planned", method=None, draft_noise=None,
    vocab_size=None,
) -> _SweepRun:
    """``sweep``'s options into a run with its folder open; every refusal a ``SpecbenchError``."""
    if inputs not in natural_inputs.INPUTS:
        raise SpecbenchError(f"--inputs must be planned or natural, got {inputs!r}")
    natural = inputs == "natural"
    if not natural:
        given = [name for name, value in (("--method", method), ("--draft-noise", draft_noise),
                                          ("--vocab-size", vocab_size)) if value is not None]
        if given:
            raise SpecbenchError(f"{given[0]} is for --inputs natural (drafts drawn from a draft model); a planned "
                                 f"sweep takes its acceptance from its profiles")
    notes: list[str] = []  # values given twice, said once the run starts
    if natural:
        profiles, scenario_name = _natural_cases(num_spec_tokens or [], method, draft_noise, vocab_size, {
            "--acceptance-length": acceptance_length, "--alpha": alpha, "--rates": rates, "--scenario": scenario,
            "--schedule": schedule, "--tree": tree}, notes), None
    elif tree:
        profiles, scenario_name = _tree_cases(tree, rates or [], {
            "--acceptance-length": acceptance_length, "--alpha": alpha, "--scenario": scenario,
            "--num-spec-tokens": num_spec_tokens, "--schedule": schedule}, notes), None
        if backend not in ("auto", "torch"):
            raise SpecbenchError(f"--tree runs the torch simulation of the tree rule; --backend {backend} has no "
                                 f"tree simulation (leave --backend out)")
    else:
        profiles, scenario_name = _profiles(acceptance_length or [], rates or [], alpha or [], scenario,
                                            num_spec_tokens or [], schedule, notes)
    sweep.check_num_spec_tokens(profiles)
    # a whole number as every count of the command line is (--seed, kernels' --batch-size): 2_000_000, not 2e6
    requests = None if num_requests is None else _single("--num-requests", num_requests.replace("_", ""), int)
    if requests is not None and not 2 <= requests <= MAX_REQUESTS:
        raise SpecbenchError(f"--num-requests must be a whole number in [2, 2**40], got {num_requests!r}")
    seed_value = rng.check_seed(_single("--seed", seed, int))
    cost = None if cost_ratio is None else acceptance.check_cost_ratio(_single("--cost-ratio", cost_ratio, float))
    thread_count = machine.parse_threads(threads)
    out_folder = results.output_folder("--output", output)
    device_name = sweep.resolve_device(device)
    # trees run the torch simulation; natural cases the torch reference unless --backend triton says otherwise
    backend_name = "torch" if tree or (natural and backend == "auto") else sweep.resolve_sweep_backend(backend,
                                                                                                     device_name)
    if natural:
        natural_sweep.check_backend(profiles, backend_name)
    shard_choice = shards.parse_shard(shard)
    # a shard skips the other shards' cases; the BUG threshold still counts every case of the grid
    others = set(range(len(profiles))) - set(shard_choice.positions(len(profiles))) if shard_choice else set()
    steps = [requests or sweep.case_num_requests(p) for p in profiles]
    costs = [sweep.pick_cost_ratio(cost, p) for p in profiles]
    metadata = results.collect_metadata(
        device_name, kind="sweep", seed=seed_value, backend=backend_name, num_requests=_used(steps),
        cost_ratio=_used(costs), scenario=scenario_name, num_cases=len(profiles),
        profiles=[p.name for p in profiles], confidence=sweep.CONFIDENCE,
        family_bug_alpha=sweep.FAMILY_BUG_ALPHA, threads=thread_count, cpu_count=machine.cpu_count(),
        load_average_start=machine.load_average(), load_average_end=None,
        finished_cases=0, interrupted=None,  # null until the run ends (a killed run keeps null)
        **({"shard": shard_choice.metadata(len(profiles))} if shard_choice else {}),
    )
    # a resumed folder's cases must be this run's: same seed, backend, device, steps, cost ratios, profiles, and
    # threads (its cases' simulation seconds and positions a second are the threads'; merge joins equal ones only)
    same = {key: (label, metadata[key]) for key, label in (
        ("seed", "--seed"), ("backend", "--backend"), ("device", "device"), ("num_requests", "--num-requests"),
        ("cost_ratio", "--cost-ratio"), ("profiles", "profile list"), ("threads", "--threads"))}
    same["shard"] = ("--shard", metadata.get("shard"))
    out_dir, previous, earlier = results.open_output(out_folder, "sweep", resume,
                                                     same)
    done = _resumable(previous, profiles, out_dir)
    metadata["finished_cases"] = len(done)
    writer = results.ResultsWriter(out_dir, results.resumed_metadata(metadata, earlier), previous)
    return _SweepRun(profiles, scenario_name, requests, seed_value, cost, thread_count, device_name, backend_name,
                     shard_choice, others, steps, out_dir, done, writer, metadata, resume, notes)


def _time_sweep(run: _SweepRun, no_charts: bool) -> None:
    """Simulate every case of ``run`` with a progress bar, a table per case; then the charts, the summary
    and the exit status (a stopped sweep keeps what finished and says how to resume it)."""
    profiles, scenario_name, requests, seed_value = run.profiles, run.scenario_name, run.requests, run.seed
    cost, thread_count, device_name, backend_name = run.cost, run.threads, run.device_name, run.backend_name
    shard_choice, others, steps, out_dir, done = run.shard, run.others, run.steps, run.out_dir, run.done
    writer, metadata = run.writer, run.metadata
    machine.use_threads(thread_count)
    print_notes(run.notes, error_console)
    _warn_if_busy(metadata["load_average_start"], thread_count, at_end=False)
    if shard_choice:
        console.print(f"shard {shard_choice}: {len(profiles) - len(others)} of the {plural(len(profiles), 'case')}",
                      highlight=False)
    if done:
        console.print(f"resuming {escape(str(out_dir))}/: {len(done)} of {plural(len(profiles) - len(others), 'case')} "
                      f"already finished", highlight=False)
    elif run.resume:
        error_console.print(f"[yellow]note:[/] --resume: {escape(str(out_dir))}/ holds no finished case, so there is "
                            f"nothing to resume; starting a fresh run there", highlight=False)

    def on_record(record: dict) -> None:
        writer.metadata["finished_cases"] = len(writer.records) + 1
        writer.add(record)
        sweep.write_long_csv(writer.records, out_dir)
        print_table(case_table(record))
        console.print()

    def finish(interrupted: bool) -> list[dict]:
        # metadata of the end of a run (finished or interrupted), charts of the cases that finished
        records = sorted(writer.records, key=lambda r: r["case"])
        seconds = sum(r["simulation_seconds"] for r in records)
        positions = sum(r["simulated_positions"] for r in records)
        writer.metadata.update(simulated_positions=positions, simulation_seconds=seconds,
                               positions_per_second=positions / seconds if seconds > 0 else None,
                               load_average_end=machine.load_average(), interrupted=interrupted,
                               finished_cases=len(records))
        writer.records = records
        writer.flush()
        _warn_if_busy(writer.metadata["load_average_end"], thread_count, at_end=True)
        return records

    skipped = done | others
    total = sum(n * p.num_spec_tokens for i, (n, p) in enumerate(zip(steps, profiles)) if i not in skipped)
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn())
    try:
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task("sweep", total=total)
            sweep.run_sweep(
                profiles, num_requests=requests, seed=seed_value, backend=backend_name, device=device_name,
                cost_ratio=cost, scenario=scenario_name, on_record=on_record, skip_cases=skipped,
                on_progress=lambda positions: progress.advance(task, positions),
                on_case=lambda i, p: progress.update(
                    task, description=f"case {i + 1}/{len(profiles)}: {escape(p.name)}"),
            )
    except STOPPED as stop:  # Ctrl-C, or the reader of stdout went away (`specbench sweep | head -1`)
        status = stopped(stop)  # after a closed pipe, what follows prints nowhere
        records = finish(interrupted=True)
        charts = [] if no_charts or not records else sweep_charts.render_sweep_charts(records, out_dir)
        console.print(f"[yellow]interrupted:[/] {len(records)} of {plural(len(profiles) - len(others), 'case')} "
                      f"finished; their results {'and charts ' if charts else ''}are in {escape(str(out_dir))}/; "
                      f"continue with --output {escape(str(out_dir))} --resume", highlight=False)
        raise typer.Exit(status) from None
    except Exception as exc:  # noqa: BLE001 -- fail_after_saving raises it on unless it is a SpecbenchError
        fail_after_saving(exc, writer.flush)  # results.csv catches up with results.json

    records = finish(interrupted=False)
    if not records:  # a shard of a grid with fewer cases than shards
        console.print(f"shard {shard_choice} holds none of the {plural(len(profiles), 'case')}; its empty results are "
                      f"in {escape(str(out_dir))}/ for specbench merge", highlight=False)
        return
    # the charts before the summary: output cut short from here on (a closed pipe) loses nothing
    charts = [] if no_charts else sweep_charts.render_sweep_charts(records, out_dir)
    seconds, positions = writer.metadata["simulation_seconds"], writer.metadata["simulated_positions"]
    print_table(summary_table(records))
    console.print(f"[dim]ok: every closed form lies in its 95% interval or misses it by no more than chance; BUG: "
                  f"p < {records[0]['bug_p_threshold']:.1e} (0.1% over the sweep's checks, Bonferroni)[/]",
                  highlight=False)
    if seconds > 0:
        console.print(f"simulated {positions:,} draft positions in {seconds:.2f} s: "
                      f"{per_second(positions / seconds)} positions/s ({backend_name} on {device_name}, "
                      f"{thread_count} CPU thread{'s' if thread_count > 1 else ''})", highlight=False)
    files = ", ".join(str(out_dir / name) for name in (results.RESULTS_JSON, results.RESULTS_CSV, sweep.LONG_CSV))
    console.print(f"results: {escape(files)}", highlight=False)
    for path in charts:
        console.print(f"chart: {escape(str(path))}", highlight=False)
    bugs = sum(r["num_bugs"] for r in records)
    if bugs:
        threshold = records[0]["bug_p_threshold"]
        error_console.print(f"[bold red]BUG:[/] {bugs} measured value(s) disagree with the closed forms far beyond "
                            f"chance (p < {threshold:.1e}): the simulation is wrong, see the BUG rows above",
                            highlight=False)
        raise typer.Exit(1)
