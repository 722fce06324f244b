"""On a GPU: the Triton tree kernel timed beside the Triton chain on the same target rows (CUDA graph, µs).

    python tests/gpu_tree_timing.py [--out FILE.json] [--batches 1,8]

V = 128256, float32, draft logits, temperature 1, B = 1, 8, 64, 256 (or ``--batches``). Rows (each a 2x2 tree, N = 6 nodes, depth
2, or a chain):

- ``tree 2x2, q = p``: every node's draft row is its parent's target row, so the first child at each place is
  accepted (u q(x) < p(x) holds for every u < 1): the walk reads 2 target rows to test, and the leaf's bonus row;
- ``tree 2x2, drafts off``: drafts drawn from an unrelated row, so most children are rejected: each rejected
  sibling adds the residual's passes (its mass, then the race over the replayed residual);
- ``chain K=2, q = p`` / ``chain K=2, drafts off``: the chain of the tree's depth in the same two regimes;
- ``chain K=6, q = p``: the chain that reads as many rows as the tree has nodes plus one (all accepted).

Each tree row is timed twice: one program per request (what ``auto`` launches) and ``(split)``, the split path
(``launch.strategy("split")``: every row's statistics split across programs, the walk in each request's last
program, the final race split). ``--shapes`` adds the tree rows at the probabilistic one-program shape halved
(4096 tokens, 16 warps), which spills less. Prints a table and writes the medians to ``--out``. This is not a ``specbench kernels`` run:
the kernels command does not take trees yet.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench import timing, verify
from specbench.kernels import launch
from specbench.trees import batched

VOCAB = 128256
TREE = [-1, -1, 0, 0, 1, 1]  # 2x2


def _inputs(batch: int, num_nodes: int, parents: list[int], regime: str, generator: torch.Generator) -> dict:
    target = torch.randn(batch, num_nodes + 1, VOCAB, generator=generator, device="cuda") * 2
    owner = torch.tensor([parent + 1 for parent in parents], device="cuda")
    if regime == "q = p":
        draft_logits = target[:, owner].clone()
    else:
        draft_logits = torch.randn(batch, num_nodes, VOCAB, generator=generator, device="cuda") * 2
    drafts = torch.multinomial(torch.softmax(draft_logits, -1).reshape(-1, VOCAB), 1, generator=generator)
    return {"target_logits": target, "draft_token_ids": drafts.reshape(batch, num_nodes), "draft_logits": draft_logits,
            "seeds": torch.arange(batch, device="cuda"), "temperatures": torch.ones(batch, device="cuda"),
            "backend": "triton", "check_values": False}


def _split(kwargs: dict, tree) -> object:
    # the tree step on the split path (launch.strategy("split"): the rows split across programs)
    with launch.strategy("split"):
        return verify(**kwargs, tree=tree)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--shapes", action="store_true", help="also time the trees at 4096 tokens x 16 warps")
    parser.add_argument("--batches", default="1,8,64,256", help="batch sizes, comma-separated (default 1,8,64,256)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU here", file=sys.stderr)
        return 2
    config = timing.TimingConfig(warmup=3, min_samples=30, max_samples=100, max_ms=300.0, cuda_graph=True)
    rows = []
    for batch in (int(size) for size in args.batches.split(",")):
        generator = torch.Generator(device="cuda").manual_seed(batch)
        calls, accepted = {}, {}
        for regime in ("q = p", "drafts off"):
            tree_inputs = _inputs(batch, len(TREE), TREE, regime, generator)
            tree = batched(TREE, batch, device="cuda")
            calls[f"tree 2x2, {regime}"] = lambda kw=tree_inputs, t=tree: verify(**kw, tree=t)
            calls[f"tree 2x2, {regime} (split)"] = lambda kw=tree_inputs, t=tree: _split(kw, t)
            chain_inputs = _inputs(batch, 2, [-1, 0], regime, generator)
            calls[f"chain K=2, {regime}"] = lambda kw=chain_inputs: verify(**kw)
        long_chain = _inputs(batch, 6, [-1, 0, 1, 2, 3, 4], "q = p", generator)
        calls["chain K=6, q = p"] = lambda kw=long_chain: verify(**kw)
        for name, call in calls.items():
            accepted[name] = float(call().num_accepted.float().mean())
        measured = timing.time_implementations(calls, "cuda", config)
        if args.shapes:
            launch.TUNING.update(block=4096, num_warps=16)
            try:
                halved = {f"{name} (4096 x 16)": call for name, call in calls.items()
                          if name.startswith("tree") and "split" not in name}
                more = timing.time_implementations(halved, "cuda", config)
            finally:
                launch.TUNING.update(block=None, num_warps=None)
            measured.timings.update(more.timings)
            accepted.update({f"{name} (4096 x 16)": accepted[name] for name in calls
                             if name.startswith("tree") and "split" not in name})
        for name, timed in measured.timings.items():
            rows.append({"batch_size": batch, "row": name, "median_us": timed.median_us, "p20_us": timed.p20_us,
                         "p80_us": timed.p80_us, "samples": timed.samples, "mean_accepted": accepted[name]})
            print(f"B={batch:<4} {name:34s} {timed.median_us:9.1f} µs  p20-p80 {timed.p20_us:.1f}-{timed.p80_us:.1f}"
                  f"  accepted {accepted[name]:.2f}", flush=True)
        for name, why in {**measured.errors, **measured.failures}.items():
            print(f"B={batch:<4} {name}: not timed ({why})", flush=True)
    if args.out:
        machine = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "triton": __import__("triton").__version__, "vocab_size": VOCAB, "dtype": "float32",
                   "timer": "graph"}
        args.out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
