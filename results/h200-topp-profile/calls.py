"""On a GPU: warm-up calls of one truncated case, then one more call inside the NVTX range "profiled", for a profiler
that takes only the kernels in that range (``ncu --nvtx --nvtx-include profiled/``).

    python3 results/h200-topp-profile/calls.py --batch 256 --k 7 --model qwen3 --top-p 0.95

The case is the one ``specbench kernels`` times (``bench.plan_cases``, ``bench.make_inputs``: L = 3, draft logits,
target logits, float32) on the Triton implementation.
"""

from __future__ import annotations

import argparse

import torch

from specbench import bench, models
from specbench.implementations.registry import resolve_all
from specbench.scenarios import make_profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--k", type=int, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--draft", default="logits")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--min-p", type=float, default=None)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    preset = models.resolve_model(args.model)
    profile = make_profile(args.k, acceptance_length=3.0, name="3")
    (case,) = bench.plan_cases(modes=["probabilistic"], batch_sizes=[args.batch],
                               vocabularies=[(preset.name, preset.vocab_size)], profiles=[profile],
                               dtypes=["float32"], drafts=[args.draft], targets=["logits"], top_k=args.top_k,
                               top_p=args.top_p, min_p=args.min_p, methods=["token"], tree=None)
    device = torch.device("cuda", torch.cuda.current_device())
    (triton,) = resolve_all(["triton"])
    call = triton.bind(bench.make_inputs(case, device).verify_kwargs())
    for _ in range(args.warmup):
        call()
    torch.cuda.synchronize(device)
    torch.cuda.nvtx.range_push("profiled")
    call()
    torch.cuda.synchronize(device)
    torch.cuda.nvtx.range_pop()
    print(f"profiled one call of {case}")


if __name__ == "__main__":
    main()
