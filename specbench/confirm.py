"""``compare --confirm``: a slower case is re-timed in a fresh process before it fails the gate.

A run's slower verdict can come from that process alone (its clocks, its placement, a neighbour's
load). For each slower kernels case, ``confirm_slower`` runs ``specbench kernels`` for that one
case in a new process on this machine (``retime_arguments``: the current run's implementation,
shape, acceptance, method, natural inputs or tree, sampling, timer and timing settings, seed and
threads), with the code checked out here, and judges its samples against the baseline's as the
comparison did, at the same threshold. The case stays ``slower`` only if the re-timing says slower too ("confirmed" in its
note); otherwise it becomes ``inconclusive``, its note giving both measurements. A case that
cannot be re-timed (a scenario's profile, a re-timing that fails) stays slower and says why.
This machine must be the current run's device: a re-timing elsewhere would confirm nothing.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from specbench import results
from specbench.compare import Comparison, bootstrap_ratio, judge, load_run, record_timer
from specbench.compare_inputs import by_key, on_gpu
from specbench.errors import SpecbenchError
from specbench.records import record_key

RETIME_TIMEOUT_S = 600

# runs ``argv`` (a ``specbench`` command line, without the program) and returns its exit status and output
Runner = Callable[[Sequence[str]], tuple[int, str]]


def run_specbench(arguments: Sequence[str]) -> tuple[int, str]:
    """Run ``python -m specbench ARGUMENTS`` in a fresh process; ``(exit status, stdout and stderr)``."""
    try:
        done = subprocess.run([sys.executable, "-m", "specbench", *arguments], capture_output=True, text=True,
                              timeout=RETIME_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"the re-timing took longer than {RETIME_TIMEOUT_S} s"
    return done.returncode, done.stdout + done.stderr


def _acceptance_arguments(label: str) -> list[str] | None:
    # "3", "2.5 geometric", "full" (cli_bench's labels); a scenario's profile name cannot be re-made alone
    if label == "full":
        return ["--acceptance-length", "full"]
    length, _, schedule = label.partition(" ")
    try:
        float(length)
    except ValueError:
        return None
    return ["--acceptance-length", length] + (["--schedule", schedule] if schedule else [])


def retime_arguments(record: dict, metadata: dict, output: Path) -> list[str] | None:
    """The ``specbench kernels`` arguments that time ``record``'s case alone as ``metadata``'s run did,
    writing to ``output``; None when the case cannot be re-made from its record (a scenario's profile)."""
    natural = record.get("inputs") == "natural"  # natural inputs set their own acceptance, from their noise
    acceptance = [] if natural else _acceptance_arguments(str(record["acceptance"]))
    if acceptance is None:
        return None
    sources = {f.get("name"): f.get("source") for f in metadata.get("implementation_facts") or []
               if isinstance(f, dict)}
    source = sources.get(record["impl"])
    impl = record["impl"] if source in (None, "built-in") else source
    settings = {**results.UNRECORDED["timing"], **(metadata.get("timing") or {})}  # a folder from before a setting
    gpu = on_gpu(metadata)
    arguments = ["kernels", "--device", "cuda" if gpu else "cpu", "--impl", impl, "--mode", record["mode"],
                 "--batch-size", str(record["batch_size"]),
                 # a tree's K is its depth, set by --tree (its records' num_spec_tokens count its nodes)
                 *(["--num-spec-tokens", str(record["num_spec_tokens"])] if record.get("tree") is None else []),
                 "--vocab-size", str(record["vocab_size"]), "--dtype", record["dtype"],
                 "--target", record.get("target") or "logits", *acceptance]
    if record["mode"] == "probabilistic":
        arguments += ["--draft", record["draft"]]
    # what else names the case (records.record_key): the method, natural inputs and their noise, the tree's shape
    if record.get("method") not in (None, "token"):
        arguments += ["--method", record["method"]]
    if natural:
        arguments += ["--inputs", "natural", "--draft-noise", str(record["draft_noise"])]
    if record.get("tree") is not None:
        arguments += ["--tree", record["tree"]]
    for name in ("top_k", "top_p", "min_p", "logprobs"):
        if record.get(name) is not None:
            arguments += [f"--{name.replace('_', '-')}", str(record[name])]
    if record.get("sampling") not in (None, "fixed"):
        arguments += ["--sampling", record["sampling"]]
    if record.get("conversion"):
        arguments += ["--convert", record["conversion"]]
    if gpu:
        arguments += ["--timer", record_timer(record, metadata)]
    for name, option in (("warmup", "--warmup"), ("min_samples", "--min-samples"), ("max_samples", "--max-samples"),
                         ("max_ms", "--max-ms"), ("placements", "--placements")):
        if settings.get(name) is not None:
            arguments += [option, str(settings[name])]
    if settings.get("l2_flush") is not None:
        arguments.append("--l2-flush" if settings["l2_flush"] else "--no-l2-flush")
    if metadata.get("seed") is not None:
        arguments += ["--seed", str(metadata["seed"])]
    if metadata.get("threads") is not None:
        arguments += ["--threads", str(metadata["threads"])]
    if metadata.get("interpreted"):
        arguments.append("--interpret")
    return [*arguments, "--no-charts", "--output", str(output)]


def check_same_device(metadata: dict, current: str) -> None:
    """Refuse to re-time on a machine other than the current run's device."""
    here = results.device_description("cuda" if on_gpu(metadata) else "cpu")["device"]
    if here != metadata.get("device"):
        raise SpecbenchError(f"--confirm re-times on this machine ({here}), and {current} was run on "
                             f"{metadata.get('device')}: run compare --confirm where the current run was made")


def confirm_slower(comparison: Comparison, baseline: str | Path, current: str | Path,
                   runner: Runner = run_specbench) -> int:
    """Re-time every slower kernels case of ``comparison`` in a fresh process (module docstring) and
    update its verdict and note; returns how many were re-timed."""
    slower = [case for case in comparison.cases if case.verdict == "slower" and case.key is not None]
    if comparison.kind != "kernels" or not slower:
        return 0
    _, base_records = load_run(baseline)
    cur_meta, cur_records = load_run(current)
    check_same_device(cur_meta, str(current))
    base, cur = by_key(base_records, "baseline"), by_key(cur_records, "current")
    for case in slower:
        with tempfile.TemporaryDirectory(prefix="specbench-confirm-") as folder:
            output = Path(folder) / "run"
            arguments = retime_arguments(cur[case.key], cur_meta, output)
            if arguments is None:
                case.note = _join(case.note, "not re-timed: its acceptance profile came from a scenario file")
                continue
            status, said = runner(arguments)
            retimed = _retimed_record(output, case.key) if status == 0 else None
            if retimed is None:
                last = (said.strip().splitlines() or ["no output"])[-1]
                case.note = _join(case.note, f"not confirmed nor cleared: the re-timing failed (exit {status}: "
                                             f"{last.strip()})")
                continue
        before, samples = base[case.key]["samples_us"], retimed.get("samples_us") or []
        if len(before) < 2 or len(samples) < 2:
            case.note = _join(case.note, "not confirmed nor cleared: too few samples to re-judge")
            continue
        ratio, low, high = bootstrap_ratio(before, samples)
        spread = max(_p80_over_p20(base[case.key]), _p80_over_p20(retimed))
        verdict, why = judge(low, high, case.threshold, (len(before), len(samples)), spread)
        measured = f"ratio {ratio:.3f} [{low:.3f}, {high:.3f}] when re-timed in a fresh process"
        if verdict == "slower":
            case.note = _join(case.note, f"confirmed: {measured}")
        else:
            case.verdict = "inconclusive"
            case.note = _join(case.note, f"slower in the run (ratio {case.ratio:.3f}), not confirmed: {measured} "
                                         f"({verdict}{': ' + why if why else ''})")
    return len(slower)


def _retimed_record(output: Path, key: tuple) -> dict | None:
    try:
        _, records = results.read_results(output)
    except SpecbenchError:
        return None
    found = [r for r in records if r.get("status") == "ok" and record_key(r) == key]
    return found[0] if found else None


def _p80_over_p20(record: dict) -> float:
    low, high = record.get("p20_us"), record.get("p80_us")
    return high / low if low and high else 1.0


def _join(note: str, more: str) -> str:
    return f"{note}; {more}" if note else more
