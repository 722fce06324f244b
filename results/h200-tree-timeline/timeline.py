"""On a GPU: the timeline of one probabilistic tree step on the split path, from %globaltimer probes.

    python results/h200-tree-timeline/timeline.py --batches 1,8 --drafts logits,probs --calls 200

`instrument.py` (or the script `--instrument` names, for later code) writes a copy of the tree kernels with probes; this script loads it, swaps it in for the
launcher's two split-path kernels (the launcher and its arguments unchanged, three probe buffers appended),
and runs each case of `specbench kernels --tree 2x2` (the benchmark's own inputs: `bench.plan_cases`,
`make_inputs`; L = 2, node 0's two children rejected, and `full`, the path accepted) `--calls` times, each
call alone (synchronised). Each interval below is a median over the calls, in µs, from the rows kernel's
first program start. The chain K = 6 of the same L is timed beside it with CUDA events (no probes).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import gpu_kernel_breakdown

from specbench import bench
from specbench.implementations.registry import resolve_all
from specbench.kernels import launch

PROBES = {}  # the current step's probe buffers


def _load_timed(folder: Path, instrument: str):
    path = folder / "tree_timed.py"
    subprocess.run([sys.executable, instrument, str(path)], check=True)
    spec = importlib.util.spec_from_file_location("tree_timed", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["tree_timed"] = module
    spec.loader.exec_module(module)
    return module


class _Probed:
    """A launcher of an instrumented kernel: the real launcher's call with the probe buffers appended."""

    def __init__(self, kernel, rows: bool) -> None:
        self.inner = launch._Launcher(kernel)
        self.rows = rows

    def __call__(self, grid, args, num_warps, key, **constexprs):
        device = args[0].device
        if self.rows:
            programs = grid[0] * grid[1] * grid[2]
            PROBES["rows"] = torch.zeros(programs * 2, dtype=torch.int64, device=device)
            PROBES["last"] = torch.zeros(grid[0] * 8, dtype=torch.int64, device=device)
            PROBES["last"].view(grid[0], 8)[:, 6] = torch.iinfo(torch.int64).max
            PROBES["fin"] = torch.zeros(1, dtype=torch.int64, device=device)
        else:
            PROBES["fin"] = torch.zeros(grid[0] * 3, dtype=torch.int64, device=device)
        self.inner(grid, (*args, PROBES["rows"], PROBES["fin"], PROBES["last"]), num_warps, key, **constexprs)


def _case(batch: int, draft: str, acceptance: str, tree: str | None, k: int):
    args = argparse.Namespace(mode="probabilistic", batch=batch, k=k, vocab=128256, model="llama3",
                              dtype="float32", draft=draft, target="logits", acceptance=acceptance, top_k=None,
                              top_p=None, min_p=None, method="token", tree=tree)
    return gpu_kernel_breakdown._case(args)


def _event_median(call, calls: int) -> float:
    times = []
    for _ in range(calls):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) * 1000)
    return statistics.median(times)


def _stamps(batch: int) -> dict[str, float]:
    rows = PROBES["rows"].view(-1, 2).cpu()
    fin = PROBES["fin"].view(-1, 3).cpu()
    last = PROBES["last"].view(batch, 8).cpu()
    t0 = int(rows[:, 0].min())

    def at(value) -> float:
        return (int(value) - t0) / 1000

    out = {"rows: last program start": at(rows[:, 0].max()), "rows: last arrival": at(rows[:, 1].max()),
           "rows: merged (last request)": at(last[:, 0].max()), "rows: walked (last request)": at(last[:, 1].max()),
           "finish: first start": at(fin[:, 0].min()), "finish: last start": at(fin[:, 0].max()),
           "finish: roles known (last)": at(fin[:, 1].max())}
    if int(last[:, 2].max()) > 0:
        out |= {"masses: last arrival (last request)": at(last[:, 2].max()),
                "masses: walk resumed (last request)": at(last[:, 3].max()),
                "masses: candidates raced (last request)": at(last[:, 4].max()),
                "masses: published (last request)": at(last[:, 5].max())}
        woke = last[:, 6]
        if int(woke.min()) < torch.iinfo(torch.int64).max:
            out["racers: first woke (last request)"] = at(woke[woke < torch.iinfo(torch.int64).max].max())
    out["finish: last end"] = at(fin[:, 2].max())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--drafts", default="logits,probs")
    parser.add_argument("--acceptances", default="2,full")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--folder", default="/tmp/tree-timeline")
    parser.add_argument("--instrument", default=str(Path(__file__).with_name("instrument.py")))
    args = parser.parse_args()
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    timed = _load_timed(folder, args.instrument)
    device = torch.device("cuda", torch.cuda.current_device())
    (triton,) = resolve_all(["triton"])
    plain = (launch._TREE_ROWS, launch._TREE_FINISH)
    probed = (_Probed(timed._tree_rows_kernel, True), _Probed(timed._tree_finish_kernel, False))
    for batch in [int(b) for b in args.batches.split(",")]:
        for draft in args.drafts.split(","):
            for acceptance in args.acceptances.split(","):
                chain_acceptance = "full" if acceptance == "full" else acceptance
                tree_call = triton.bind(bench.make_inputs(_case(batch, draft, acceptance, "2x2", 0), device)
                                        .verify_kwargs())
                chain_call = triton.bind(bench.make_inputs(_case(batch, draft, chain_acceptance, None, 6), device)
                                         .verify_kwargs())
                launch._TREE_ROWS, launch._TREE_FINISH = plain
                for _ in range(20):
                    tree_call()
                    chain_call()
                tree_plain = _event_median(tree_call, args.calls)
                chain = _event_median(chain_call, args.calls)
                launch._TREE_ROWS, launch._TREE_FINISH = probed
                for _ in range(10):
                    tree_call()
                torch.cuda.synchronize()
                tree_probed = _event_median(tree_call, 3)
                samples: dict[str, list[float]] = {}
                for _ in range(args.calls):
                    tree_call()
                    torch.cuda.synchronize()
                    for name, value in _stamps(batch).items():
                        samples.setdefault(name, []).append(value)
                launch._TREE_ROWS, launch._TREE_FINISH = plain
                print(f"\n## B = {batch}, draft {draft}, L = {acceptance}: tree (events, no probes) {tree_plain:.1f} "
                      f"µs, with probes {tree_probed:.1f}; chain K = 6 {chain:.1f}")
                print("| stamp | median µs | p20 | p80 |\n|---|---|---|---|")
                for name, values in samples.items():
                    q = statistics.quantiles(values, n=5)
                    print(f"| {name} | {statistics.median(values):.2f} | {q[0]:.2f} | {q[3]:.2f} |")
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
