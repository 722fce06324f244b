"""`specbench plan`: the K to run at each batch size, and what it gains, from a profile and step costs.

Parses the options into a ``plan.PlanProfile`` and a cost model, calls ``plan.run_plan``, writes the
records (results.json/CSV) and charts, prints the K table and the configuration snippets. Every bad
input is one sentence and exit 2. Also the ``plot`` command's entry point: plan results get their
charts here, anything else goes to the kernels/sweep ``plot`` unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from specbench import acceptance
from specbench.cli_sweep import _numbers, _once, _single, once_shapes
from specbench.console import console, error_console, fail, lazy_module, print_notes, print_table
from specbench.errors import SpecbenchError

plan = lazy_module("specbench.plan")
tree_shapes = lazy_module("specbench.tree_shapes")
plan_charts = lazy_module("specbench.plan_charts")
results = lazy_module("specbench.results")

_ROOFLINE_OPTIONS = ("--gpu", "--target-model", "--draft-model", "--context", "--sampler-results", "--overhead-ms")


def _step_costs():
    try:
        from specbench import step_costs
    except ImportError:
        raise SpecbenchError("--costs and --roofline need specbench.step_costs, which this installation does not "
                             "have yet; use --cost-ratio C --target-ms MS (the linear cost model)") from None
    return step_costs


def _lookup(table: dict, option: str, name: str):
    if name not in table:
        raise SpecbenchError(f"{option} {name!r} is not known (known: {', '.join(sorted(table))})")
    return table[name]


def cost_model(costs: str | None, roofline: bool, roofline_options: dict[str, str | None], cost_ratio: str | None,
               target_ms: str | None):
    """The cost model of the options: ``--costs FILE``, ``--roofline ...`` or ``--cost-ratio C --target-ms MS``."""
    given = [name for name, on in (("--costs", costs is not None), ("--roofline", roofline),
                                   ("--cost-ratio", cost_ratio is not None)) if on]
    if len(given) != 1:
        raise SpecbenchError("give exactly one source of step costs: --costs FILE, --roofline (with --gpu, "
                             "--target-model, --context) or --cost-ratio C with --target-ms MS" +
                             (f"; got {' and '.join(given)}" if given else ""))
    stray = [option for option, value in roofline_options.items() if value is not None]
    if stray and not roofline:
        raise SpecbenchError(f"{stray[0]} belongs to --roofline; add --roofline or leave it out")
    if target_ms is not None and cost_ratio is None:
        raise SpecbenchError("--target-ms belongs to --cost-ratio (the linear cost model); add --cost-ratio C")
    if costs is not None:
        path = Path(costs)
        if path.is_dir():
            raise SpecbenchError(f"--costs {costs} is a folder; give the step-cost file itself")
        if not path.is_file():
            raise SpecbenchError(f"--costs {costs}: no such file")
        try:
            return _step_costs().load_cost_file(path)
        except (OSError, ValueError, KeyError) as exc:
            raise SpecbenchError(f"--costs {costs} cannot be read: {exc}") from None
    if roofline:
        missing = [o for o in ("--gpu", "--target-model", "--context") if roofline_options[o] is None]
        if missing:
            raise SpecbenchError(f"--roofline needs {missing[0]}")
        module = _step_costs()
        gpu = _lookup(module.GPUS, "--gpu", roofline_options["--gpu"])
        target = _lookup(module.MODELS, "--target-model", roofline_options["--target-model"])
        draft = None if roofline_options["--draft-model"] is None else \
            _lookup(module.MODELS, "--draft-model", roofline_options["--draft-model"])
        context = _single("--context", roofline_options["--context"], int)
        if context < 1:
            raise SpecbenchError(f"--context must be a whole number of tokens >= 1, got {context}")
        overhead = 0.0 if roofline_options["--overhead-ms"] is None else \
            _single("--overhead-ms", roofline_options["--overhead-ms"], float)
        if not overhead >= 0:
            raise SpecbenchError(f"--overhead-ms must be >= 0, got {roofline_options['--overhead-ms']}")
        sampler = roofline_options["--sampler-results"]
        if sampler is not None and not Path(sampler).exists():
            raise SpecbenchError(f"--sampler-results {sampler}: no such file or folder")
        return module.roofline(target, gpu, draft=draft, context_length=context,
                               sampler_results=None if sampler is None else Path(sampler), overhead_ms=overhead)
    if target_ms is None:
        raise SpecbenchError("--cost-ratio needs --target-ms MS, the target model's step time without speculation")
    ratio = acceptance.check_cost_ratio(_single("--cost-ratio", cost_ratio, float))
    return plan.LinearCosts(_single("--target-ms", target_ms, float), ratio)


def plan_profile(scenario: str | None, rates: str | None, profile_name: str | None, max_k: int, bootstrap: int):
    if (scenario is None) == (rates is None):
        raise SpecbenchError("give one profile: --scenario FILE|NAME (a `profile fit` scenario, a shipped one) or "
                             "--rates P1,P2,...")
    if profile_name is not None and scenario is None:
        raise SpecbenchError("--profile picks a profile inside --scenario; give --scenario")
    if rates is not None:
        return plan.profile_from_rates(_numbers("--rates", rates, ranges=False), max_k)
    return plan.profile_from_scenario(scenario, max_k, profile_name=profile_name, num_bootstrap=bootstrap)


def plan_trees(trees: list[str], tree_rates: str | None, notes: list[str]) -> tuple[tuple, tuple]:
    """``--tree`` shapes (repeated or comma lists; each once, a repeat noted in ``notes``) and ``--tree-rates``
    (numbers; the first may be ``profile``)."""
    shapes = tuple(once_shapes([tree_shapes.parse_tree_shape(text) for item in trees
                                for text in tree_shapes.split_tree_shapes(item)], notes))
    if tree_rates is None:
        return shapes, ()
    head, comma, rest = tree_rates.partition(",")
    if head.strip().lower() == plan.PROFILE_RANK:
        if comma and not rest.strip():
            raise SpecbenchError(f"--tree-rates {tree_rates!r} ends in an empty rate; give profile alone or "
                                 f"profile,0.3,0.1")
        return shapes, (plan.PROFILE_RANK, *(_numbers("--tree-rates", rest, ranges=False) if rest.strip() else []))
    return shapes, tuple(_numbers("--tree-rates", tree_rates, ranges=False))


def _fmt(value, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def k_table(metadata_plan: dict) -> Table:
    """One row per batch size: the best K with its range, throughput and speed-up with intervals."""
    table = Table(title=f"specbench plan: {escape(metadata_plan['profile'])}  ·  costs: "
                        f"{escape(metadata_plan['cost_model'])}", title_justify="left", show_edge=False,
                  pad_edge=False)
    for column in ("B", "best K", "K range (95%)", "draws agreeing", "tok/s per GPU", "95% interval",
                   "speed-up", "95% interval ", "pays"):
        table.add_column(column, justify="left" if column == "pays" else "right")
    for s in metadata_plan["per_batch"]:
        k_range = f"{s['best_k_low']}..{s['best_k_high']}" if s["best_k_share"] is not None else "-"
        table.add_row(str(s["batch_size"]), f"[bold]{s['best_num_spec_tokens']}[/]", k_range,
                      _fmt(s["best_k_share"], ".0%"), _fmt(s["best_tokens_per_second_per_gpu"], ",.0f"),
                      "-" if s["best_tokens_per_second_per_gpu_ci_low"] is None else
                      f"[{s['best_tokens_per_second_per_gpu_ci_low']:,.0f}, "
                      f"{s['best_tokens_per_second_per_gpu_ci_high']:,.0f}]",
                      _fmt(s["best_speedup"]),
                      "-" if s["best_speedup_ci_low"] is None else
                      f"[{s['best_speedup_ci_low']:.3f}, {s['best_speedup_ci_high']:.3f}]",
                      "[green]yes[/]" if s["pays"] else "[yellow]no[/]")
    return table


def speedup_table(records: list[dict]) -> Table:
    """Speed-up over K = 0 for every (B, K): rows B, columns K; the best of each row in bold."""
    ks = sorted({r["num_spec_tokens"] for r in records})
    table = Table(title="speed-up over K = 0 (tokens/s per request at K over at K = 0, same batch size)",
                  title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("B", justify="right")
    for k in ks:
        table.add_column(f"K={k}" + ("*" if any(r["extended"] and r["num_spec_tokens"] == k for r in records) else ""),
                         justify="right")
    rows: dict[int, dict[int, dict]] = {}
    for r in records:
        rows.setdefault(r["batch_size"], {})[r["num_spec_tokens"]] = r
    for b, by_k in sorted(rows.items()):
        table.add_row(str(b), *[(f"[bold]{by_k[k]['speedup']:.3f}[/]" if by_k[k]["is_best"]
                                 else f"{by_k[k]['speedup']:.3f}") for k in ks])
    return table


def tree_table(metadata_plan: dict) -> Table:
    """Chain or tree, per batch size: the best chain, the best tree, the tree's gain over the chain, the choice."""
    table = Table(title="chain or tree: the best of each at every batch size (tokens/s per GPU)", title_justify="left",
                  show_edge=False, pad_edge=False)
    for column in ("B", "best chain", "tok/s per GPU", "best tree", "N", "L", "tok/s per GPU ", "tree vs chain",
                   "95% interval", "decided", "draws agreeing"):
        table.add_column(column, justify="left" if column in ("best tree", "decided") else "right")
    for s in metadata_plan["per_batch"]:
        gain = s["tree_gain_over_chain"]
        share = s["tree_share"]
        agreeing = None if share is None else (share if s["best_candidate"] == "tree" else 1.0 - share)
        table.add_row(str(s["batch_size"]), f"K={s['best_num_spec_tokens']}", f"{s['best_tokens_per_second_per_gpu']:,.0f}",
                      escape(s["best_tree_shape"]), str(s["best_tree_num_nodes"]),
                      f"{s['best_tree_acceptance_length']:.3f}", f"{s['best_tree_tokens_per_second_per_gpu']:,.0f}",
                      f"{gain:+.1%}", "-" if s["tree_gain_over_chain_ci_low"] is None else
                      f"[{s['tree_gain_over_chain_ci_low']:+.1%}, {s['tree_gain_over_chain_ci_high']:+.1%}]",
                      "[bold green]tree[/]" if s["best_candidate"] == "tree" else "[bold]chain[/]", _fmt(agreeing, ".0%"))
    return table


def static_table(metadata_plan: dict) -> Table:
    table = Table(title="one static K everywhere: throughput lost against each batch size's best",
                  title_justify="left", show_edge=False, pad_edge=False)
    for column in ("K", "mean loss", "worst loss"):
        table.add_column(column, justify="right")
    for s in metadata_plan["static_k"]:
        mark = s["num_spec_tokens"] == metadata_plan["best_static_k"]
        cells = [str(s["num_spec_tokens"]), f"{s['mean_loss']:.1%}", f"{s['max_loss']:.1%}"]
        table.add_row(*[f"[bold]{c}[/]" if mark else c for c in cells])
    return table


def plan_command(
    scenario: Annotated[str | None, typer.Option(
        "--scenario", "-s", metavar="FILE|NAME", show_default=False,
        help="The profile: a scenario file (from `specbench profile fit --use-model best --extend-k N`: its model "
             "extends to --max-k with bootstrap intervals) or a shipped scenario's name.")] = None,
    profile_name: Annotated[str | None, typer.Option(
        "--profile", metavar="NAME", show_default=False,
        help="Which profile of a scenario that holds several.")] = None,
    rates: Annotated[str | None, typer.Option(
        "--rates", "-r", metavar="RATES", show_default=False,
        help="The profile as unconditional per-position rates p_1,...,p_K (K at least --max-k; no intervals).")] = None,
    costs: Annotated[str | None, typer.Option(
        "--costs", metavar="FILE", show_default=False, help="A step-cost file (specbench.step_costs).")] = None,
    roofline: Annotated[bool, typer.Option(
        "--roofline", help="Model step costs from the hardware: needs --gpu, --target-model and --context.")] = False,
    gpu: Annotated[str | None, typer.Option("--gpu", metavar="NAME", show_default=False,
                                            help="--roofline: the GPU.")] = None,
    target_model: Annotated[str | None, typer.Option("--target-model", metavar="NAME", show_default=False,
                                                     help="--roofline: the target model.")] = None,
    draft_model: Annotated[str | None, typer.Option("--draft-model", metavar="NAME", show_default=False,
                                                    help="--roofline: the draft model (default: none).")] = None,
    context: Annotated[str | None, typer.Option("--context", metavar="TOKENS", show_default=False,
                                                help="--roofline: context length per request.")] = None,
    sampler_results: Annotated[str | None, typer.Option(
        "--sampler-results", metavar="DIR", show_default=False,
        help="--roofline: a `specbench kernels` results folder for the sampler's time.")] = None,
    overhead_ms: Annotated[str | None, typer.Option("--overhead-ms", metavar="MS", show_default=False,
                                                    help="--roofline: fixed time per step.")] = None,
    cost_ratio: Annotated[str | None, typer.Option(
        "--cost-ratio", "-c", metavar="C", show_default=False,
        help="The linear cost model t = T (1 + K c) at every batch size (with --target-ms).")] = None,
    target_ms: Annotated[str | None, typer.Option("--target-ms", metavar="MS", show_default=False,
                                                  help="--cost-ratio: the target step time T.")] = None,
    batch_sizes: Annotated[str, typer.Option(
        "--batch-sizes", "-b", metavar="SIZES", help="Batch sizes (concurrent requests): a list or a range.")
    ] = ",".join(map(str, (1, 2, 4, 8, 16, 32, 64, 128, 256))),
    max_k: Annotated[str, typer.Option("--max-k", "-k", metavar="K", help="Plan K = 0..K.")] = "7",
    bootstrap: Annotated[str, typer.Option(
        "--bootstrap", metavar="B", help="Bootstrap refits of a fitted model for the intervals.")] = "200",
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar="DIR", show_default=False, help="Results folder (default results/plan-<timestamp>/).")
    ] = None,
    tree: Annotated[list[str] | None, typer.Option(
        "--tree", metavar="SHAPE", show_default=False,
        help="Also weigh draft trees against the chains: chain:K, WxD, sequoia:N[:DEPTH] (the best tree of N nodes) or "
             "parents:-1,0,0,1 (repeat, or a comma list). A tree of N nodes is priced as the chain step that verifies "
             "N tokens, t(B, N). Needs --tree-rates.")] = None,
    tree_rates: Annotated[str | None, typer.Option(
        "--tree-rates", metavar="RATES", show_default=False,
        help="Trees' conditional acceptance rate per sibling rank (rank k accepted given its elder siblings were "
             "rejected), the same at every depth: 0.8,0.3,0.1; or profile,0.3,0.1: rank 0 at depth d is the "
             "profile's c_(d+1) (chain:K then has the profile's L(K)) and trees are at most --max-k deep.")] = None,
    no_charts: Annotated[bool, typer.Option("--no-charts", help="Skip the PNG charts.")] = False,
) -> None:
    """Which K to run at each batch size, with its gain and interval, and the vLLM/SGLang configuration."""
    try:
        out_folder = results.output_folder("--output", output)
        k_max = _single("--max-k", max_k, int)
        draws = _single("--bootstrap", bootstrap, int)
        if draws < 20:
            raise SpecbenchError(f"--bootstrap must be at least 20 resamples, got {draws}")
        notes: list[str] = []  # values given twice, taken once: said with the results
        sizes = plan.check_batch_sizes(_once("--batch-sizes", _numbers("--batch-sizes", batch_sizes, int), notes))
        profile = plan_profile(scenario, rates, profile_name, k_max, draws)
        model = cost_model(costs, roofline, dict(zip(_ROOFLINE_OPTIONS, (gpu, target_model, draft_model, context,
                                                                        sampler_results, overhead_ms))),
                           cost_ratio, target_ms)
        shapes, rates_of_trees = plan_trees(tree or [], tree_rates, notes)
        records, summary = plan.run_plan(plan.PlanSettings(profile, model, sizes, scenario, shapes, rates_of_trees))
        out_dir, _, _ = results.open_output(out_folder, "plan")
        metadata = results.collect_metadata("cpu", kind="plan", plan=summary, scenario=scenario,
                                            profiles=[profile.name], num_cases=len(records))
        writer = results.ResultsWriter(out_dir, metadata)
        for record in records:
            writer.records.append(record)
        writer.flush()
        charts = [] if no_charts else plan_charts.render_plan_charts(records, out_dir)
    except SpecbenchError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the plan's files: {exc.strerror or exc}")
    print_notes(notes, error_console)
    print_table(k_table(summary))
    console.print()
    print_table(speedup_table(plan.chain_records(records)))
    if profile.extended:
        console.print(f"[dim]* K past the measured {profile.measured_k}: the {profile.model} model's extension[/]",
                      highlight=False)
    console.print()
    print_table(static_table(summary))
    if summary.get("trees"):
        console.print()
        print_table(tree_table(summary))
        console.print(f"[dim]trees: expected tokens from the positional model, conditional rates by sibling rank "
                      f"{escape(', '.join(map(str, summary['tree_rates_given'])))}; "
                      f"{escape(summary['tree_cost_assumption'])}[/]", highlight=False)
    stop = summary["stop_batch_size"]
    console.print(("speculation pays at every batch size asked" if stop is None else
                   f"speculation stops paying at batch size {stop} (best K = 0, or a gain whose interval reaches 1)"),
                  highlight=False)
    console.print(f"profile uncertainty: {escape(profile.uncertainty)}", highlight=False)
    for line in summary["cost_description"]:
        console.print(f"costs: {escape(str(line))}", highlight=False)
    console.print()
    for key in ("vllm", "vllm_table", "sglang"):
        console.print(escape(summary["snippets"][key]), highlight=False, soft_wrap=True)
        console.print()
    files = ", ".join(str(out_dir / name) for name in (results.RESULTS_JSON, results.RESULTS_CSV))
    console.print(f"results: {escape(files)}", highlight=False)
    for path in charts:
        console.print(f"chart: {escape(str(path))}", highlight=False)
