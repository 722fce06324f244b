"""`specbench kernels`, `specbench plot`, `specbench env`.

``kernels`` parses its options into cases, then calls ``specbench.bench.run_benchmark``; each
record goes to disk as soon as its case is done (a Ctrl-C keeps them, ``--resume`` continues),
then a table and the charts. Options arrive as text and are parsed here, so a bad value gets one
sentence naming it. An option left out takes the default of the machine: a GPU gets the full
grid, a CPU a small torch-only one.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from specbench import acceptance, machine, methods, models, sampling_cases, scenarios
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

# loaded on first use: torch, numpy, pandas and matplotlib stay out of `specbench --help`
bench = lazy_module("specbench.bench")
implementations_registry = lazy_module("specbench.implementations.registry")
bench_charts = lazy_module("specbench.bench_charts")
kernel_records = lazy_module("specbench.records")
results = lazy_module("specbench.results")
rng = lazy_module("specbench.rng")
shards = lazy_module("specbench.shards")
sweep_charts = lazy_module("specbench.sweep_charts")
plan_charts = lazy_module("specbench.plan_charts")
tree_inputs = lazy_module("specbench.tree_inputs")
tree_shapes = lazy_module("specbench.tree_shapes")
timing = lazy_module("specbench.timing")
verification = lazy_module("specbench.verification")


class Grid:
    """The default grid of a machine (every option left out takes its value from here).

    ``quick`` is the fixed grid of ``--quick`` (the CI gate's): every mode and draft kind, a small
    and a large batch, L = 3 and all accepted, with and without a CUDA graph on a GPU; about a
    minute on an H100 or H200, 15 s for torch on a CPU.

    On a CPU ``--quick`` also times differently: no L2 flush and up to 1000 samples in 500 ms a
    case. Pairs of runs of one commit on a shared 2-core machine: with the 64 MiB flush before each
    sample, 18-73 samples a case and medians up to 1.98x apart (the flush's memory traffic meets the
    other processes'); without it, hundreds of samples and medians at most 1.21x apart
    (results/baselines/README.md). The quick grid's inputs (under 1 MiB) fit in the caches anyway.
    """

    def __init__(self, gpu: bool, interpret: bool, quick: bool = False):
        self.drafts = list(bench.DRAFTS) if gpu or quick else ["logits"]
        self.batch_sizes = ([1, 256] if gpu else [1, 8]) if quick else ([1, 8, 64, 256, 512] if gpu else [1, 8])
        self.num_spec_tokens = ([4] if gpu else [3]) if quick else ([3, 7] if gpu else [3])
        if gpu:
            self.vocabularies = [(m, models.resolve_model(m).vocab_size) for m in (("llama3",) if quick
                                                                                   else ("llama3", "qwen3"))]
        else:
            self.vocabularies = [(None, 4096 if interpret or quick else 32000)]
        self.acceptance = ["3", "full"] if gpu or quick else ["3"]
        self.dtypes = ["float32"]
        self.cuda_graph = [False, True] if gpu else [False]
        cpu_gate = quick and not gpu
        self.l2_flush = not cpu_gate
        self.max_samples = 1000 if cpu_gate else 100
        self.max_ms = 500.0 if cpu_gate else 250.0


QUICK_GRID = ("--quick: every mode and draft kind at L=3 and full; on a GPU Triton at K=4, V=128256 (llama3), B=1 "
              "in a CUDA graph and B=256 with and without one; on a CPU torch at K=3, V=4096, B=1 and 8, no L2 flush, up "
              "to 1000 samples in 500 ms a case")


def _quick_cases(cases: list, on_gpu: bool) -> list:
    # B = 1 outside a graph measures the host's launch overhead, which moved by up to 1.9x between two
    # processes on one H100 (results/baselines/README.md): a gate would cry wolf on it
    return [case for case in cases if not (on_gpu and case.batch_size == 1 and not case.cuda_graph)]


GPU_TIMERS = ("host-free", "cold-graph", "events", "graph")


def _timers(text: str | None, cuda_graph: bool | None, on_gpu: bool, grid: Grid) -> tuple[str, list[bool]]:
    """The timer of the rows outside a graph and the graph choice of ``bench.plan_cases`` from ``--timer``
    (or the older ``--cuda-graph/--no-cuda-graph``: the default eager timer, ``cold-graph``, and graph, or it
    alone)."""
    if text is not None and cuda_graph is not None:
        raise SpecbenchError("give --timer or --cuda-graph/--no-cuda-graph, not both (--cuda-graph is --timer "
                             f"{timing.DEFAULT_GPU_TIMER},graph)")
    names = _items("--timer", text)
    if not on_gpu:
        unknown = [name for name in names if name not in timing.TIMERS]
        if unknown:
            raise SpecbenchError(f"--timer takes perf_counter on the CPU ({', '.join(GPU_TIMERS)} on a CUDA GPU), "
                                 f"got {unknown[0]!r}")
        other = [name for name in names if name != "perf_counter"]
        if other:
            raise SpecbenchError(f"--timer {other[0]} needs a CUDA GPU; a CPU run times every row with perf_counter")
        if cuda_graph:
            raise SpecbenchError("--cuda-graph needs a CUDA GPU, and this run is on the CPU")
        return timing.DEFAULT_GPU_TIMER, [False]
    if not names:
        graphs = grid.cuda_graph if cuda_graph is None else ([False, True] if cuda_graph else [False])
        return timing.DEFAULT_GPU_TIMER, graphs
    for name in names:
        if name not in GPU_TIMERS:
            raise SpecbenchError(f"--timer takes {', '.join(GPU_TIMERS)} on a GPU, got {name!r}")
    eager = [name for name in dict.fromkeys(names) if name != "graph"]
    if len(eager) > 1:
        raise SpecbenchError("--timer takes one of host-free, cold-graph and events, not more: they time the same "
                             "rows (one call a sample) different ways; run each into its own --output")
    return (eager or [timing.DEFAULT_GPU_TIMER])[0], ([False] if eager else []) + ([True] if "graph" in names else [])


def _items(option: str, text: str | None) -> list[str]:
    if text is None:
        return []
    values = [item.strip() for item in text.split(",")]
    if not all(values):
        raise SpecbenchError(f"{option} takes comma-separated values, got {text!r}")
    return values


def _whole(option: str, text: str | None, minimum: int) -> list[int]:
    values = []
    for item in _items(option, text):
        try:
            value = int(item.replace("_", ""))
        except ValueError:
            raise SpecbenchError(f"{option} takes comma-separated whole numbers, got {item!r}") from None
        if value < minimum:
            raise SpecbenchError(f"{option} values must be at least {minimum}, got {value}")
        values.append(value)
    return values


def _one_whole(option: str, text: str, minimum: int) -> int:
    # one value: "takes one whole number" whatever is wrong with it (a list, a word), never "values"
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        raise SpecbenchError(f"{option} takes one whole number, got {text!r}") from None
    if value < minimum:
        raise SpecbenchError(f"{option} must be at least {minimum}, got {value}")
    return value


def _number(option: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SpecbenchError(f"{option} takes a number, got {text!r}") from None


def _profiles(lengths: list[str], ks: list[int], scenario: str | None, grid: Grid,
              schedule: str | None = None, k_from: str = "--num-spec-tokens {k}") -> list[scenarios.Profile]:
    if schedule is not None:
        acceptance.check_schedule(schedule)
    if scenario is not None:
        if lengths or ks or schedule:
            raise SpecbenchError("give --scenario or --acceptance-length/--num-spec-tokens/--schedule, not both "
                                 "(a scenario sets K and the rates)")
        return list(scenarios.load_scenario(scenario).profiles)
    schedule = schedule or "min-variance"
    suffix = "" if schedule == "min-variance" else f" {schedule}"  # min-variance keeps the labels of earlier runs
    profiles: list[scenarios.Profile] = []
    for k in ks or grid.num_spec_tokens:
        for label in lengths or grid.acceptance:
            if label == "full":
                profiles.append(scenarios.make_profile(k, acceptance_length=k + 1, name="full"))
            else:
                length = _number("--acceptance-length", label)
                if not lengths and length > k + 1:
                    # the grid's default length does not fit this K: say where the number came from
                    raise SpecbenchError(f"the default --acceptance-length {length:g} needs K >= {length - 1:g}, "
                                         f"got {k_from.format(k=k)}; pass --acceptance-length (at most {k + 1}) "
                                         f"or full")
                profiles.append(scenarios.make_profile(k, acceptance_length=length, schedule=schedule,
                                                       name=f"{length:g}{suffix}"))
    # 'full' and K + 1 are one profile: keep the first of the same (K, rates)
    unique: dict[tuple, scenarios.Profile] = {}
    for profile in profiles:
        unique.setdefault((profile.num_spec_tokens, tuple(profile.rates)), profile)
    return list(unique.values())


def _sampling(top_k: str | None, top_p: str | None, min_p: str | None, sampling: str, logprobs: str | None,
              modes: list[str], notes: list[str]) -> dict:
    """The sampling keywords of ``bench.plan_cases`` from the options (one value each), checked: one
    sentence for a bad value, a mixed batch given a knob, or truncation asked of greedy cases alone; a note
    for greedy cases beside truncated ones goes on ``notes``."""
    if sampling not in sampling_cases.SAMPLING_KINDS:
        raise SpecbenchError(f"--sampling must be fixed or mixed, got {sampling!r}")
    if logprobs is not None and logprobs not in sampling_cases.LOGPROBS:
        raise SpecbenchError(f"--logprobs must be processed or raw, got {logprobs!r}")
    values: dict = {"top_k": None}
    if top_k is not None:
        try:
            values["top_k"] = int(top_k.strip().replace("_", ""))
        except ValueError:
            raise SpecbenchError(f"--top-k takes one whole number (0 is off), got {top_k!r}") from None
        if values["top_k"] < 0:
            raise SpecbenchError(f"--top-k must be a whole number >= 0 (0 is off), got {values['top_k']}")
    for name, option, text, allowed in (("top_p", "--top-p", top_p, "(0, 1] (1 is off)"),
                                        ("min_p", "--min-p", min_p, "[0, 1] (0 is off)")):
        value = None if text is None else _number(option, text)
        if value is not None and not (0 <= value <= 1 and (value > 0 or name == "min_p")):
            raise SpecbenchError(f"{option} must lie in {allowed}, got {text}")
        values[name] = value
    given = [option for option, text in (("--top-k", top_k), ("--top-p", top_p), ("--min-p", min_p))
             if text is not None]
    if sampling == "mixed" and given:
        raise SpecbenchError(f"--sampling mixed sets every request's own top_k, top_p and min_p, so it cannot be "
                             f"combined with {given[0]}; drop one of them")
    knobs = sampling_cases.checked_knobs(**values, sampling=sampling)
    truncating = sampling == "mixed" or any(knobs[name] is not None for name in sampling_cases.KNOBS)
    if truncating and all(m == "greedy" for m in modes):
        what = "--sampling mixed" if sampling == "mixed" else given[0]
        raise SpecbenchError(f"{what} changes nothing in the greedy mode (truncation keeps the argmax), and this run "
                             f"has only greedy cases; add --mode probabilistic or synthetic, or drop {what}")
    if truncating and "greedy" in modes:
        notes.append("the greedy cases run untruncated: truncation cannot change an argmax")
    return {**knobs, "logprobs": logprobs}


# what a case of another mode does whatever the method (its rows run the token method)
_METHOD_FREE = {"greedy": "the greedy cases keep the argmax",
                "synthetic": "the synthetic cases accept by their profile"}


def _check_probabilistic_options(draft: str | None, method: str, modes: list[str], notes: list[str]) -> None:
    """Refuse ``--draft`` and a ``--method`` other than token when no case of the run is probabilistic (they
    would change no row); beside probabilistic cases, a note on ``notes`` that the other cases ignore the method."""
    if not set(modes) <= {"probabilistic", *_METHOD_FREE}:
        return  # an unknown mode: bench.plan_cases names it
    others = [mode for mode in dict.fromkeys(modes) if mode != "probabilistic"]
    chosen = ",".join(name for name in methods.parse_methods(method) if name != methods.DEFAULT_METHOD)
    if "probabilistic" not in modes:
        if draft is not None:
            what, why = f"--draft {draft}", "only the probabilistic mode takes a draft distribution"
        elif chosen:
            what = f"--method {method}"
            why = " and ".join(_METHOD_FREE[mode] for mode in others) + " whatever the method"
        else:
            return
        raise SpecbenchError(f"{what} changes nothing outside the probabilistic mode ({why}), and this run has only "
                             f"{' and '.join(others)} cases; add --mode probabilistic, or drop {what}")
    if chosen and others:
        notes.append(f"{' and '.join(_METHOD_FREE[mode] for mode in others)} whatever the method: --method {chosen} "
                     f"applies to the probabilistic cases")


def _vocabularies(vocab_sizes: list[int], model_names: list[str], grid: Grid) -> list[tuple[str | None, int]]:
    if vocab_sizes and model_names:
        raise SpecbenchError("give --vocab-size or --model, not both")
    if model_names:
        return [(preset.name, preset.vocab_size) for preset in map(models.resolve_model, model_names)]
    return [(None, v) for v in vocab_sizes] or grid.vocabularies


def _implementations(names: list[str], device: str, interpret: bool) -> list:
    import torch

    registry = implementations_registry
    chosen = registry.resolve_all(names or list(registry.DEFAULT_IMPLEMENTATIONS))
    usable, skipped = [], []
    for impl in chosen:
        reason = impl.cannot_run(torch.device(device), interpret)
        if reason:
            skipped.append(f"{impl.name}: {reason}")
        else:
            usable.append(impl)
    if not usable:
        raise SpecbenchError(f"no implementation can run here ({'; '.join(skipped)})")
    for line in skipped:
        console.print(f"[yellow]skipped[/] {escape(line)}", highlight=False)
    return usable


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _si(value: float | None) -> str:
    if value is None:
        return "-"
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.2f}{unit}"
    return f"{value:.0f}"


_STATUS_STYLE = {"ok": "green", "FAIL": "bold red", "skipped": "yellow"}


def results_table(records: list[dict]) -> Table:
    """One row per implementation x case: times, timer and cache, bandwidth, speed-up, tokens/s, acceptance,
    status. A cold median below the bytes-to-DRAM floor is marked ``!``."""
    table = Table(title="specbench kernels", title_justify="left", show_edge=False, pad_edge=False)
    for column in ("impl", "case", "median µs", "p20-p80 µs", "timer", "GB/s", "% peak", "vs torch", "tokens/s",
                   "expected L", "measured L", "status"):
        table.add_column(column, justify="left" if column in ("impl", "case", "timer", "status") else "right",
                         no_wrap=column != "status")
    for r in records:
        spread = "-" if r["p20_us"] is None else f"{r['p20_us']:.1f}-{r['p80_us']:.1f}"
        if _noisy(r):
            spread = f"[yellow]{spread} ~[/]"
        status = f"[{_STATUS_STYLE.get(r['status'], '')}]{escape(r['status'])}[/]"
        if r.get("reason"):
            status += escape(f" ({r['reason']})")
        median = _fmt(r["median_us"], ".1f")
        if r.get("below_dram_floor"):
            median = f"[bold red]{median} ![/]"
        table.add_row(escape(r["impl"]), escape(kernel_records.describe_record(r)), median, spread, escape(_timer_cell(r)),
                      _fmt(r["gbps"], ".1f"), _fmt(r["pct_peak"], ".1f"), _fmt(r["speedup_vs_torch"], ".2f", "x"),
                      _si(r["tokens_per_s"]), _fmt(r.get("expected_acceptance_length"), ".2f"),
                      _fmt(r["measured_acceptance_length"], ".2f"), status)
    return table


# p80 / p20 above this marks a row whose samples disagree too much for its median to be trusted
NOISY_SPREAD = 2.0


def _timer_cell(record: dict) -> str:
    """``host-free cold``, ``graph warm``, ``host-free cold, 3 ran out``: how the row's samples were taken."""
    if not record.get("timer"):
        return "-"
    cell = " ".join(part for part in (record["timer"], record.get("cache")) if part)
    if record.get("backlog_ran_out"):
        cell += f", {record['backlog_ran_out']} ran out"
    return cell


def _noisy(record: dict) -> bool:
    return record["p20_us"] is not None and record["p80_us"] > NOISY_SPREAD * record["p20_us"]


def _print_table(records: list[dict]) -> None:
    print_table(results_table(records), console)
    noisy = sum(map(_noisy, records))
    if noisy:
        console.print(f"[yellow]~[/] {noisy} rows have p80 above {NOISY_SPREAD:g}x p20: other work on the machine or a "
                  f"changing clock moved their samples; rerun them on a quiet machine before quoting the medians",
                  highlight=False)
    below = sum(bool(r.get("below_dram_floor")) for r in records)
    if below:
        console.print(f"[bold red]![/] {below} cold rows have a median more than {kernel_records.DRAM_FLOOR_MARGIN:g}x below "
                      f"the bytes the case must move over the measured copy bandwidth: their samples look warm (or the "
                      f"implementation reads fewer bytes than the case needs); do not quote them as cold",
                      highlight=False)
    ran_out = [r for r in records if r.get("backlog_ran_out")]
    if ran_out:
        console.print(f"[yellow]note:[/] in {len(ran_out)} rows the GPU's backlog ran out in some samples (the "
                      f"GPU may have waited for the host there): {sum(r['backlog_ran_out'] for r in ran_out)} samples "
                      f"of {sum(r['samples'] for r in ran_out)}", highlight=False)


def kernels_command(
    mode: Annotated[str | None, typer.Option(
        "--mode", metavar="MODES", help="greedy, probabilistic, synthetic or all; several with commas (default all).",
        show_default=False)] = None,
    batch_size: Annotated[str | None, typer.Option(
        "--batch-size", "-b", metavar="B", help="Requests per step, e.g. 1,8,64,256 (GPU default 1,8,64,256,512; "
        "CPU 1,8).", show_default=False)] = None,
    num_spec_tokens: Annotated[str | None, typer.Option(
        "--num-spec-tokens", "-k", metavar="K", help=f"Draft tokens per request, at most "
        f"{acceptance.MAX_NUM_SPEC_TOKENS} (GPU default 3,7; CPU 3).",
        show_default=False)] = None,
    vocab_size: Annotated[str | None, typer.Option(
        "--vocab-size", metavar="V", help="Vocabulary sizes (CPU default 32000, 4096 with --interpret).",
        show_default=False)] = None,
    model: Annotated[str | None, typer.Option(
        "--model", metavar="NAMES", help="Model presets instead of --vocab-size: "
        + ", ".join(f"{p.name} ({p.vocab_size})" for p in models.PRESETS) + " (GPU default llama3,qwen3).",
        show_default=False)] = None,
    dtype: Annotated[str | None, typer.Option(
        "--dtype", metavar="DTYPES", help="float32, bfloat16 or float16 for logits and draft tensors (default "
        "float32).", show_default=False)] = None,
    draft: Annotated[str | None, typer.Option(
        "--draft", metavar="KINDS", help="Draft distribution of the probabilistic mode: logits, probs or none "
        "(GPU default all three; CPU logits).", show_default=False)] = None,
    target: Annotated[str | None, typer.Option(
        "--target", metavar="KINDS", help="Target input: logits or probs (probabilities built outside the timed "
        "region), comma-separated for both (default logits).", show_default=False)] = None,
    acceptance_length: Annotated[str | None, typer.Option(
        "--acceptance-length", "-l", metavar="L", help="Mean acceptance length the inputs are built for; numbers "
        "or 'full' (K+1), e.g. 3,full (GPU default 3,full; CPU 3).", show_default=False)] = None,
    schedule: Annotated[str | None, typer.Option(
        "--schedule", metavar="NAME", help="How --acceptance-length becomes rates: min-variance (default) or "
        "geometric (p_i = alpha^i).", show_default=False)] = None,
    scenario: Annotated[str | None, typer.Option(
        "--scenario", "-s", metavar="FILE|NAME", help="Acceptance profiles (K and rates) from a scenario file "
        "instead of --acceptance-length and --num-spec-tokens.", show_default=False)] = None,
    impl: Annotated[list[str] | None, typer.Option(
        "--impl", metavar="NAMES", help="Implementations to time, comma-separated or repeated: torch, triton, "
        "triton-split, triton-sequential, flashinfer, flashinfer-truncated, vllm, vllm-mrv2, sglang, sglang-tree, "
        "sglang-tree-cuda, sglang-tree-target-only, a plugin's name, module:function or file.py:function "
        "(default torch, triton where they run); Triton launch variants: "
        "triton-split-BLOCKxWARPS[-chunkN], triton-sequential-BLOCKxWARPS, triton-radix-SLICExBLOCKxWARPS"
        "[-prefetch], triton-histogram-SLICExBLOCKxWARPS[-binsN], triton-tree-finishN[-cand|-nocand], "
        "triton-tree-cand, triton-tree-nocand.",
        show_default=False)] = None,
    top_k: Annotated[str | None, typer.Option(
        "--top-k", metavar="K", help="Keep each request's K most likely tokens (exactly K: ties to the lowest ids); "
        "0 is off. Truncation applies to every non-greedy case; greedy cases run untruncated (truncation cannot "
        "change an argmax).", show_default=False)] = None,
    top_p: Annotated[str | None, typer.Option(
        "--top-p", metavar="P", help="Keep the shortest prefix of the order whose mass reaches P, in (0, 1]; 1 is "
        "off.", show_default=False)] = None,
    min_p: Annotated[str | None, typer.Option(
        "--min-p", metavar="P", help="Keep tokens of at least P times the largest probability, in [0, 1]; 0 is off. "
        "Applied first, then --top-k, then --top-p.", show_default=False)] = None,
    sampling: Annotated[str, typer.Option(
        "--sampling", metavar="KIND", help="fixed: every request takes --top-k/--top-p/--min-p as given; mixed: "
        + sampling_cases.MIXED_TEXT + "; it takes none of the three flags.")] = "fixed",
    logprobs: Annotated[str | None, typer.Option(
        "--logprobs", metavar="KIND", help="Time the step with each emitted token's log-probability returned: "
        "processed (after temperature and truncation) or raw (the target as given). Implementations that do not "
        "declare logprobs are skipped.", show_default=False)] = None,
    method: Annotated[str, typer.Option(
        "--method", metavar="NAMES", help="Verification methods, comma-separated (token, block, typical, relaxed): "
        "each probabilistic case runs once per method, side by side.")] = "token",
    inputs: Annotated[str, typer.Option(
        "--inputs", metavar="KIND", help="planned (acceptance built in, the same for every method) or natural "
        "(drafts drawn from target logits + Gaussian noise, so methods differ; probabilistic mode).")] = "planned",
    draft_noise: Annotated[str | None, typer.Option(
        "--draft-noise", metavar="STD", help="Natural inputs: the std of the noise on the draft logits (default 1).",
        show_default=False)] = None,
    convert: Annotated[str, typer.Option(
        "--convert", metavar="WHERE", help="For an implementation that takes its inputs in another form "
        "(probabilities, when the case gives logits): convert them outside the timed call (what a caller that "
        "has them pays) or inside it (what a caller that has the other form pays).")] = "outside",
    timer: Annotated[str | None, typer.Option(
        "--timer", metavar="TIMERS", help="How a GPU row is timed, one row per case and timer, comma-separated: "
        "host-free (a GPU sleep covers the host's enqueue, so a sample is GPU work alone, cold cache), events "
        "(CUDA events around the call: host launch gaps the flush does not hide count), cold-graph (host-free, each "
        "call replayed from a CUDA graph of its own: launches read from GPU memory), graph (replays of a "
        "CUDA graph, time per call; warm where the case fits in L2). GPU default cold-graph,graph; a CPU times "
        "with perf_counter.", show_default=False)] = None,
    cuda_graph: Annotated[bool | None, typer.Option(
        "--cuda-graph/--no-cuda-graph", help="Also time every case captured in a CUDA graph (extra rows; GPU "
        "default on): --timer cold-graph,graph, or cold-graph alone.", show_default=False)] = None,
    l2_flush: Annotated[bool | None, typer.Option(
        "--l2-flush/--no-l2-flush", help="Overwrite a large buffer (256 MiB on a GPU) before every sample so the "
        "cache starts cold (default on; off for --quick on a CPU).", show_default=False)] = None,
    interpret: Annotated[bool, typer.Option(
        "--interpret", help="On a CPU, run the Triton implementations under the Triton interpreter (small shapes "
        "only).")] = False,
    device: Annotated[str, typer.Option("--device", metavar="NAME", help="auto, cpu or cuda.")] = "auto",
    threads: Annotated[str, typer.Option(
        "--threads", metavar="N", help="CPU threads for torch (1 holds up beside other work on a shared machine; "
        "more is faster only on a quiet one).")] = str(machine.DEFAULT_THREADS),
    warmup: Annotated[str, typer.Option("--warmup", metavar="N", help="Untimed calls per implementation.")] = "3",
    min_samples: Annotated[str, typer.Option("--min-samples", metavar="N", help="Samples per implementation, at "
                                             "least.")] = "10",
    max_samples: Annotated[str | None, typer.Option("--max-samples", metavar="N", help="Samples per implementation, "
                                                    "at most (default 100; 1000 for --quick on a CPU).",
                                                    show_default=False)] = None,
    max_ms: Annotated[str | None, typer.Option("--max-ms", metavar="MS", help="Wall-time budget per case for "
                                               "sampling, all implementations together (default 250; 500 for --quick "
                                               "on a CPU).", show_default=False)] = None,
    placements: Annotated[str | None, typer.Option(
        "--placements", metavar="N", help="Copies of a small GPU case's inputs (at most 64 MiB) at other "
        "addresses, each sample averaging one call on each (default 40, at most 100; a graph takes the largest "
        "divisor of its 10 calls up to N). More make small rows agree better between processes (on an H200, "
        "host-free rows at B <= 8 moved by up to 5.6% between three processes with 10, 2.2% with 40), at that "
        "many calls a sample.",
        show_default=False)] = None,
    seed: Annotated[str, typer.Option("--seed", metavar="SEED", help="Seed of the generated inputs.")] = "0",
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar="DIR", help="Results folder (default results/kernels-<timestamp>/).",
        show_default=False)] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the run in --output: cases already there are not run again.")] = False,
    no_charts: Annotated[bool, typer.Option("--no-charts", help="Skip the PNG charts.")] = False,
    quick: Annotated[bool, typer.Option("--quick", help=QUICK_GRID + " (fixed seed 0 unless --seed).")] = False,
    shard: Annotated[str | None, typer.Option(
        "--shard", metavar="I/N", help="Run slice I of N of the grid (every run of N positions dealt one to a "
        "shard, the deal turned one place each run; the same on every machine); join the slices with specbench merge.", show_default=False)] = None,
    tree: Annotated[list[str] | None, typer.Option(
        "--tree", metavar="SHAPES", help="Verify draft trees: chain:K, WxD or parents:-1,0,0,... (comma-separated or "
        "repeated). "
        "Each tree is timed beside the chain of its depth on the same kind of rows; K is that depth (its path of "
        "first children), the acceptance profile is over it.", show_default=False)] = None,
    shapes: Annotated[str | None, typer.Option(
        "--shapes", metavar="BxK@MODEL", help="Only these shapes instead of the grid of --batch-size, "
        "--num-spec-tokens and --model/--vocab-size, comma-separated: B requests of K drafts over a model preset "
        "or a vocabulary size, e.g. 1x3@llama3,64x4@qwen3,256x7@32000.", show_default=False)] = None,
    devices: Annotated[str | None, typer.Option(
        "--devices", metavar="GPUS", help="all, or GPU indices such as 0,1: one worker process per GPU, each "
        "running its shard, merged into --output at the end.", show_default=False)] = None,
    ctx: typer.Context = None,
) -> None:
    """Time the verification implementations on a grid of cases, checked against the torch reference first."""
    if devices is not None:
        _run_on_devices(ctx, devices, output=output, no_charts=no_charts, shard=shard, resume=resume, device=device)
        return
    try:
        folder = results.output_folder("--output", output)
        run = _plan_run(**ctx.params)
        opened = _open_run(run, folder, resume)
    except SpecbenchError as exc:
        fail(str(exc))
    _time_run(run, opened, no_charts)


@dataclass
class _PlannedRun:
    """A kernels run as its options plan it: the cases (this shard's), the implementations, the timer's
    settings, the metadata its results folder starts with, and notes to print once it starts."""

    cases: list
    positions: list[int]
    num_cases: int
    shard: Any
    implementations: list
    device_name: str
    config: Any
    seed: int
    threads: int
    conversion: str
    metadata: dict
    notes: list[str]


class _OpenedRun(NamedTuple):
    out_dir: Path
    previous: list
    writer: Any
    peak: float | None
    resume: bool


def _plan_run(
    *,
    mode, batch_size, num_spec_tokens, vocab_size, model, dtype, draft, target, acceptance_length, schedule,
    scenario, impl, top_k, top_p, min_p, sampling, logprobs, method, inputs, draft_noise, convert, timer,
    cuda_graph, l2_flush, interpret, device, threads, warmup, min_samples, max_samples, max_ms, placements,
    seed, quick, shard, tree, shapes,
    **_: object,
) -> _PlannedRun:
    """``kernels``' options (``ctx.params``) into a run; every refusal a ``SpecbenchError``."""
    tree = tree or None  # --tree not given: no list (Typer may pass an empty one)
    if interpret:
        device = machine.use_triton_interpreter(device)
    device_name = machine.resolve_device(device)
    on_gpu = device_name == "cuda"
    if quick:
        given = [name for name, value in (("--mode", mode), ("--batch-size", batch_size),
                                          ("--num-spec-tokens", num_spec_tokens), ("--vocab-size", vocab_size),
                                          ("--model", model), ("--dtype", dtype), ("--draft", draft),
                                          ("--acceptance-length", acceptance_length), ("--scenario", scenario),
                                          ("--cuda-graph/--no-cuda-graph", cuda_graph), ("--tree", tree),
                                          ("--shapes", shapes))
                 if value is not None]
        if given:
            raise SpecbenchError(f"--quick runs a fixed grid, so it cannot be combined with {given[0]}; "
                                 f"drop one of them")
    grid = Grid(on_gpu, interpret, quick)
    eager_timer, graph_choice = _timers(timer, cuda_graph, on_gpu, grid)
    modes = [m for item in _items("--mode", mode) or ["all"] for m in (verification.MODES if item == "all" else [item])]
    notes: list[str] = []  # printed when the run starts, after every refusal
    knobs = _sampling(top_k, top_p, min_p, sampling, logprobs, modes, notes)
    _check_probabilistic_options(draft, method, modes, notes)
    budget = grid.max_ms if max_ms is None else _number("--max-ms", max_ms)
    if not budget >= 0:
        raise SpecbenchError(f"--max-ms must be 0 or more (milliseconds a case may sample for), got {max_ms}")
    copies = timing.DEFAULT_PLACEMENTS if placements is None else _one_whole("--placements", placements, 1)
    if copies > timing.MAX_PLACEMENTS:
        raise SpecbenchError(f"--placements must be between 1 and {timing.MAX_PLACEMENTS}, got {copies}")
    config = timing.TimingConfig(
        warmup=_one_whole("--warmup", warmup, 0), min_samples=_one_whole("--min-samples", min_samples, 1),
        max_samples=grid.max_samples if max_samples is None else _one_whole("--max-samples", max_samples, 1),
        max_ms=budget, l2_flush=grid.l2_flush if l2_flush is None else l2_flush, timer=eager_timer, placements=copies,
    )
    plan = {
        "modes": modes,
        "batch_sizes": _whole("--batch-size", batch_size, 1) or grid.batch_sizes,
        "vocabularies": _vocabularies(_whole("--vocab-size", vocab_size, 2), _items("--model", model), grid),
        "dtypes": _items("--dtype", dtype) or grid.dtypes,
        "drafts": _items("--draft", draft) or grid.drafts,
        "targets": _items("--target", target) or ["logits"],
        "cuda_graph": graph_choice,
        "methods": methods.parse_methods(method),
        "inputs": inputs,
        "draft_noise": None if draft_noise is None else _number("--draft-noise", draft_noise),
        **knobs,
    }
    lengths = _items("--acceptance-length", acceptance_length)
    if inputs == "natural":
        given = [name for name, value in (("--acceptance-length", acceptance_length), ("--schedule", schedule))
                 if value is not None]
        if given:
            raise SpecbenchError(f"--inputs natural sets its own acceptance (drafts drawn from the target's logits "
                                 f"plus noise, see --draft-noise), so it cannot be combined with {given[0]}; drop "
                                 f"one of them")
    if shapes is not None:
        given = [name for name, value in (("--batch-size", batch_size), ("--num-spec-tokens", num_spec_tokens),
                                          ("--model", model), ("--vocab-size", vocab_size), ("--tree", tree),
                                          ("--scenario", scenario)) if value is not None]
        if given:
            raise SpecbenchError(f"--shapes sets each case's B, K and vocabulary, so it cannot be combined with "
                                 f"{given[0]}; drop one of them")
        cases = _shape_cases(shapes, plan, lengths, grid, schedule)
    elif tree is None:
        profiles = _profiles(lengths, _whole("--num-spec-tokens", num_spec_tokens, 1), scenario, grid, schedule)
        cases = bench.plan_cases(**plan, profiles=profiles)
    else:
        cases = _tree_cases(tree, plan, lengths, num_spec_tokens, scenario, grid, schedule)
    if quick:
        cases = _quick_cases(cases, on_gpu)
    shard_choice = shards.parse_shard(shard)
    num_cases, case_grid = len(cases), shards.grid_digest(cases)
    positions = shard_choice.positions(num_cases) if shard_choice else list(range(num_cases))
    cases = [cases[position] for position in positions]
    sharding = {"shard": shard_choice.metadata(num_cases)} if shard_choice else {}
    seed_value = rng.check_seed(_one_whole("--seed", seed, 0))
    thread_count = machine.parse_threads(threads)
    # the gate times the project's kernels on a GPU, the torch backend on a CPU (--impl overrides)
    quick_impls = (["triton"] if on_gpu else ["torch"]) if quick else []
    names = [name for text in impl or [] for name in _items("--impl", text)]
    implementations = _implementations(names or quick_impls, device_name, interpret)
    if interpret and not any(impl.needs_gpu for impl in implementations):
        notes.append(f"--interpret has no Triton implementation to run here "
                     f"({', '.join(impl.name for impl in implementations)}): the rows run on the CPU as without it"
                     + ("" if vocab_size or model or shapes else f", at its default V = {grid.vocabularies[0][1]}"))
    if placements is not None and not on_gpu:
        notes.append(f"--placements {config.placements} has no effect here: placements copy a small GPU case's inputs, "
                     f"and a CPU run times every row on one (its rows say placements 1)")
    bench.check_sizes(cases, implementations, device_name, machine.memory_bytes(device_name))
    if convert not in ("outside", "inside"):
        raise SpecbenchError(f"--convert must be outside or inside, got {convert!r}")
    timing_settings = {
        "warmup": config.warmup, "min_samples": config.min_samples, "max_samples": config.max_samples,
        "max_ms": config.max_ms, "l2_flush": config.l2_flush, "graph_calls": config.graph_calls,
        "clock": "CUDA events" if on_gpu else "time.perf_counter_ns", "statistic": "median, p20, p80",
        "timers": ([eager_timer] if False in graph_choice else []) + (["graph"] if True in graph_choice else [])
        if on_gpu else ["perf_counter"],
        "placements": config.placements,
    }
    metadata = results.collect_metadata(
        device_name, kind="kernels", seed=seed_value, implementations=[i.name for i in implementations],
        implementation_facts=[i.facts() for i in implementations], conversion=convert,
        interpreted=interpret, timing=timing_settings, threads=thread_count, cpu_count=machine.cpu_count(),
        load_average_start=machine.load_average(), load_average_end=None,
        interrupted=None,  # null until the run ends (a killed run keeps null)
        num_cases=num_cases, case_grid=case_grid, **sharding,
    )
    return _PlannedRun(cases, positions, num_cases, shard_choice, implementations, device_name, config, seed_value,
                       thread_count, convert, metadata, notes)


def _open_run(run: _PlannedRun, output: Path | None, resume: bool) -> _OpenedRun:
    """The run's results folder, with the rows it already holds when resumed, and its writer."""
    metadata = run.metadata
    # rows of one folder must be comparable: a resumed run keeps the seed, the timing, the threads, the device,
    # the shard
    same = {"seed": ("--seed", run.seed), "timing": ("timing", metadata["timing"]),
            "threads": ("--threads", run.threads), "device": ("device", metadata["device"]),
            "shard": ("--shard", metadata.get("shard"))}
    out_dir, previous, earlier = results.open_output(output, "kernels", resume, same)
    peak = metadata["peak_bandwidth_gbps"] = timing.peak_bandwidth_gbps(run.device_name)
    writer = results.ResultsWriter(out_dir, results.resumed_metadata(metadata, earlier), previous)
    return _OpenedRun(out_dir, previous, writer, peak, resume)


def _time_run(run: _PlannedRun, opened: _OpenedRun, no_charts: bool) -> None:
    """Time every case of ``run`` into ``opened``'s folder with a progress bar; then its charts, its table
    and its exit status (a stopped run keeps what finished and says how to resume it)."""
    cases, implementations, device_name, config = run.cases, run.implementations, run.device_name, run.config
    thread_count, shard_choice, num_cases, metadata = run.threads, run.shard, run.num_cases, run.metadata
    out_dir, previous, writer, peak, resume = opened
    machine.use_threads(thread_count)
    print_notes(run.notes)
    busy = machine.busy_warning(metadata["load_average_start"], thread_count, at_end=False)
    if busy:
        error_console.print(f"[yellow]warning:[/] {escape(busy)}", highlight=False)
    if resume and not previous:
        error_console.print(f"[yellow]note:[/] --resume: {escape(str(out_dir))}/ holds no finished row, so there is "
                            f"nothing to resume; starting a fresh run there", highlight=False)
    where = metadata["device"]
    kept = (f" ({len(previous)} row{' already there is' if len(previous) == 1 else 's already there are'} kept, not "
            f"run again)" if previous else "")
    kept += f" (shard {shard_choice} of a {num_cases}-case grid)" if shard_choice else ""
    grid = (f"{len(cases)} case{'s' * (len(cases) != 1)} x {len(implementations)} "
            f"implementation{'s' * (len(implementations) != 1)}")
    console.print(f"{grid} on {escape(where)}; copy bandwidth "
                  f"{_fmt(peak, ',.0f', ' GB/s')}; writing to {escape(str(out_dir))}/{kept}", highlight=False)
    new_records: list[dict] = []

    def on_record(record: dict) -> None:
        new_records.append(record)
        writer.add(record)

    def finish(interrupted: bool) -> list:
        # the end of a run, finished or stopped: metadata, the charts of every row there, then the table
        writer.metadata.update(load_average_end=machine.load_average(), interrupted=interrupted)
        writer.flush()
        charts = [] if no_charts else bench_charts.render_kernel_charts(writer.records, out_dir)
        if new_records:  # a table without a row says nothing
            _print_table(new_records)
        return charts

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task("kernels", total=len(cases))
            bench.run_benchmark(
                cases, implementations, device=device_name, config=config, peak_gbps=peak, previous=previous,
                on_record=on_record, seed=run.seed, conversion=run.conversion, positions=run.positions,
                on_case=lambda index, case: progress.update(task, completed=index, description=escape(case.describe())),
            )
    except STOPPED as stop:
        status = stopped(stop)  # after a closed pipe, what follows prints nowhere
        charts = finish(interrupted=True)
        console.print(f"[yellow]interrupted:[/] {len(writer.records)} finished rows ({len(new_records)} new) and "
                      f"{len(charts)} charts are in {escape(str(out_dir))}/; continue with --output "
                      f"{escape(str(out_dir))} --resume", highlight=False)
        raise typer.Exit(status) from None
    except Exception as exc:  # noqa: BLE001 -- fail_after_saving raises it on unless it is a SpecbenchError
        fail_after_saving(exc, writer.flush)  # results.csv catches up with results.json

    charts = finish(interrupted=False)
    if previous and not new_records:
        console.print(f"nothing was left to run: every row of {'this shard' if shard_choice else 'this grid'} was "
                      f"already in {escape(str(out_dir))}/", highlight=False)
    busy = machine.busy_warning(writer.metadata["load_average_end"], thread_count, at_end=True)
    if busy:
        error_console.print(f"[yellow]warning:[/] {escape(busy)}", highlight=False)
    _conclude(new_records, out_dir, charts)


def _conclude(new_records: list[dict], out_dir: Path, charts: list) -> None:
    # the last lines of a run: where its files are, then exit 1 for a FAIL row, 2 when nothing was timed
    console.print(f"results: {escape(str(out_dir / results.RESULTS_JSON))}, "
                  f"{escape(str(out_dir / results.RESULTS_CSV))}; {len(charts)} charts", highlight=False)
    failed = [r for r in new_records if r["status"] == "FAIL"]
    if failed:
        names = list(dict.fromkeys(r["impl"] for r in failed))  # one implementation may fail in several rows
        error_console.print(f"[bold red]FAIL:[/] {plural(len(names), 'implementation')} ({escape(', '.join(names))}) "
                            f"{'disagree' if len(names) != 1 else 'disagrees'} with the torch reference in "
                            f"{plural(len(failed), 'row')} (see the FAIL rows above); those rows were not timed",
                            highlight=False)
        raise typer.Exit(1)
    if new_records and all(r["status"] == "skipped" for r in new_records):
        reasons = list(dict.fromkeys(r["reason"] for r in new_records))
        fail(f"every row was skipped, nothing was timed ({'; '.join(reasons[:2])}); the rows are in {out_dir}/")


def parse_shapes(text: str) -> list[tuple[int, int, tuple[str | None, int]]]:
    """``--shapes``: ``"1x3@llama3,64x4@32000"`` into ``[(B, K, (model or None, V)), ...]``, each checked."""
    shapes = []
    for item in _items("--shapes", text):
        counts, at, vocabulary = item.partition("@")
        batch, x, k = counts.lower().partition("x")
        try:
            batch_size, num_spec_tokens = int(batch), int(k)
        except ValueError:
            batch_size = num_spec_tokens = 0
        if not at or not x or batch_size < 1 or not 1 <= num_spec_tokens <= acceptance.MAX_NUM_SPEC_TOKENS:
            raise SpecbenchError(f"--shapes takes BxK@MODEL or BxK@V (B >= 1 requests, 1 <= K <= "
                                 f"{acceptance.MAX_NUM_SPEC_TOKENS} drafts, a model preset or a vocabulary size), "
                                 f"e.g. 64x4@qwen3, got {item!r}")
        vocabulary = vocabulary.strip().replace("_", "") if vocabulary.strip()[:1].isdigit() else vocabulary.strip()
        if vocabulary.isascii() and vocabulary.isdigit():
            shapes.append((batch_size, num_spec_tokens, (None, int(vocabulary))))  # plan_cases checks V >= 2
        else:
            preset = models.resolve_model(vocabulary)
            shapes.append((batch_size, num_spec_tokens, (preset.name, preset.vocab_size)))
    return shapes


def _shape_cases(text: str, plan: dict, lengths: list[str], grid: Grid, schedule: str | None) -> list:
    """``kernels --shapes``: the grid's other axes at each listed (B, K, vocabulary), shape by shape."""
    cases = []
    for batch_size, num_spec_tokens, vocabulary in parse_shapes(text):
        profiles = _profiles(lengths, [num_spec_tokens], None, grid, schedule,
                             k_from=f"K = {{k}} in --shapes {batch_size}x{{k}}@{vocabulary[0] or vocabulary[1]}")
        cases += bench.plan_cases(**{**plan, "batch_sizes": [batch_size], "vocabularies": [vocabulary]},
                                  profiles=profiles)
    return list(dict.fromkeys(cases))


def _tree_cases(texts: list[str], plan: dict, lengths: list[str], num_spec_tokens: str | None, scenario: str | None,
                grid: Grid, schedule: str | None) -> list:
    """``kernels --tree``: per shape, the chain of its depth and the tree, on profiles over that depth."""
    if num_spec_tokens is not None:
        raise SpecbenchError("--tree sets K to each tree's depth (its path of first children); drop "
                             "--num-spec-tokens")
    if scenario is not None:
        raise SpecbenchError("--tree sets K to each tree's depth, so its acceptance comes from --acceptance-length "
                             "over that depth, not from --scenario (whose profiles set their own K); drop --scenario")
    cases = []
    for item in (item for text in texts for item in tree_shapes.split_tree_shapes(text)):
        shape = tree_shapes.parse_tree_shape(item)
        if not isinstance(shape, tree_shapes.TreeShape):
            raise SpecbenchError(f"kernels --tree takes {tree_shapes.TREE_FORMS}, got {item!r} (sequoia:N "
                                 f"needs positional rates: build it with specbench.tree_theory.best_tree and pass "
                                 f"its parents)")
        depth = len(tree_inputs.spine(shape.parents))
        too_long = [label for label in lengths if label != "full" and _number("--acceptance-length", label) > depth + 1]
        if too_long:
            raise SpecbenchError(f"--acceptance-length {too_long[0]} is more than the tree {item} can accept: its "
                                 f"depth (path of first children) is {depth}, so at most {depth + 1}, or full")
        profiles = _profiles(lengths, [depth], scenario, grid, schedule, k_from=f"the tree {item}'s depth {{k}}")
        cases += bench.plan_cases(**plan, profiles=profiles)  # the chain of the tree's depth
        cases += bench.plan_cases(**plan, profiles=profiles, tree=shape)
    return list(dict.fromkeys(cases))


# options a --devices worker does not inherit: it gets its own shard, folder and device, and no charts
_WORKER_SET = ("devices", "shard", "output", "device", "resume", "no_charts", "ctx")


def _worker_arguments(ctx: typer.Context) -> list[str]:
    """The options given on this command line (defaults left out), as a worker's command line."""
    arguments = []
    for param in ctx.command.params:
        if param.name in _WORKER_SET or getattr(param, "opts", None) is None:
            continue
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name.startswith("DEFAULT"):
            continue
        value = ctx.params[param.name]
        if getattr(param, "is_flag", False):
            if value:
                arguments.append(param.opts[0])
            elif param.secondary_opts:
                arguments.append(param.secondary_opts[0])
        elif isinstance(value, list):  # a repeatable option (--impl): once per value, as it was given
            for item in value:
                arguments += [param.opts[0], str(item)]
        elif value is not None:
            arguments += [param.opts[0], str(value)]
    return arguments


def _run_on_devices(ctx: typer.Context, devices: str, *, output: str | None, no_charts: bool, shard: str | None,
                    resume: bool, device: str) -> None:
    """``kernels --devices``: one worker process per GPU, each with its shard (``shards.run_on_devices``), then the
    merged run's table, charts and exit status."""
    out_dir = None
    try:
        if not devices.strip():
            raise SpecbenchError(f"--devices needs all or GPU indices such as 0,1, got {devices!r}")
        out_dir = results.output_folder("--output", output)
        for option, given in (("--shard", shard is not None), ("--resume", resume)):
            if given:
                raise SpecbenchError(f"--devices splits the grid into one shard per GPU itself, so it cannot be "
                                     f"combined with {option}; drop one of them")
        if device not in ("auto", "cuda"):
            raise SpecbenchError(f"--devices runs every worker on its own GPU, so it cannot be combined with --device "
                                 f"{device}; drop one of them")
        chosen = shards.local_devices(devices)
        out_dir, _, _ = results.open_output(out_dir, "kernels")
        console.print(f"{len(chosen)} workers, one per GPU ({', '.join(chosen)}), each running its shard; logs in "
                      f"{escape(str(out_dir / shards.SHARDS_FOLDER))}/", highlight=False)
        # the charts after the merge need matplotlib: load it while the workers run
        meanwhile = () if no_charts else ("specbench.bench_charts",)
        merged = shards.run_on_devices(_worker_arguments(ctx), chosen, out_dir, meanwhile=meanwhile)
    except STOPPED as stop:
        status = stopped(stop)
        if out_dir is not None:
            console.print(f"[yellow]interrupted:[/] each worker's finished rows are in its folder under "
                          f"{escape(str(out_dir / shards.SHARDS_FOLDER))}/; join them with specbench merge "
                          f"--allow-partial", highlight=False)
        raise typer.Exit(status) from None
    except SpecbenchError as exc:
        fail(str(exc))
    charts = [] if no_charts else bench_charts.render_kernel_charts(merged.records, out_dir)
    _print_table(merged.records)
    _conclude(merged.records, out_dir, charts)


def plot_command(
    directory: Annotated[str, typer.Argument(metavar="DIR", help="A results folder, or its results.json[.gz].")],
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar="DIR", help="Where to write the charts (default: DIR itself).",
        show_default=False)] = None,
) -> None:
    """Re-render every chart of a results folder from its results.json alone."""
    try:
        if not directory.strip():
            raise SpecbenchError(f"DIR needs a results folder or file name, got {directory!r}")
        out_dir = results.output_folder("--output", output)
        _, records = results.read_results(directory)
    except SpecbenchError as exc:
        fail(str(exc))
    given = Path(directory)
    path = results.results_file(given)
    out_dir = out_dir or (given.parent if given.is_file() else given)
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"--output {out_dir} is a file, not a folder")
    try:
        bench_charts.check_values(records)
        charts = (bench_charts.render_kernel_charts(records, out_dir) + sweep_charts.render_sweep_charts(records, out_dir)
                  + plan_charts.render_plan_charts(records, out_dir))
    except OSError as exc:
        fail(f"cannot write charts into {out_dir}: {exc.strerror or exc}")
    except (KeyError, StopIteration) as exc:
        fail(f"{path} has a record without the field {exc.args[0] if exc.args else ''!r} its charts need")
    except (TypeError, ValueError) as exc:
        fail(f"{path} has a record whose values its charts cannot use ({exc})")
    if not charts:
        kinds = sorted({str(r.get("kind")) for r in records})
        if not records:
            fail(f"{path} has no records to chart (its records list is empty)")
        if kinds == ["kernels"] and all(r.get("status") in ("skipped", "FAIL") for r in records):
            fail(f"{path} has no records to chart: every one of its {plural(len(records), 'kernels row')} was "
                 f"skipped or failed, so none was timed")
        fail(f"{path} has no records to chart (kinds: {', '.join(kinds)})")
    for chart in charts:
        console.print(f"chart: {escape(str(chart))}", highlight=False)


def env_command() -> None:
    """Print the machine, its devices, the versions and the measured copy bandwidth."""
    table = Table(title="specbench env", title_justify="left", show_header=False, show_edge=False, pad_edge=False)
    table.add_column("what")
    table.add_column("value")
    metadata = results.collect_metadata("cpu")
    for key in ("specbench", "torch", "triton", "python", "host", "commit"):
        table.add_row(key, escape(str(metadata[key])))
    table.add_row("platform", escape(platform.platform()))
    table.add_row("cpu", escape(metadata["device"]))
    table.add_row("cpu copy bandwidth", _fmt(timing.peak_bandwidth_gbps("cpu"), ",.1f", " GB/s"))
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not count:
        table.add_row("gpu", "none (torch sees no CUDA device)")
    for index in range(count):
        info = results.device_description(f"cuda:{index}")
        table.add_row(f"cuda:{index}", escape(f"{info['device']}, {info['sm_count']} SMs, {info['memory_gib']} GiB, "
                                              f"CUDA {info['cuda']}, driver {info['driver']}"))
        table.add_row(f"cuda:{index} copy bandwidth",
                      _fmt(timing.peak_bandwidth_gbps(f"cuda:{index}"), ",.0f", " GB/s (device-to-device, read + write)"))
    console.print(table)
