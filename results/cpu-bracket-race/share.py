"""How many clean stops' races the bracket race decides on the benchmark's inputs (issue 20).

    TRITON_INTERPRET=1 python results/cpu-bracket-race/share.py --batch 8 --k 3 --model llama3 --draft logits

One case of ``specbench kernels`` (``bench.plan_cases`` and ``bench.make_inputs``: the inputs it times; ``top_p``
0.95, L = 3, target logits, float32) through the Triton launcher with the drafts decided from one pass's bounds,
the race tried after level 1, then after level 2 (``launch.TUNING["histogram_race"]``). Prints, for each, the
requests that stopped clean and how many of their races the launch decided (``decided[:, 2] >= 0``), and checks
the tokens against the race left to the whole search. Runs on a GPU as well (without the interpreter).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from specbench import bench, models
from specbench.kernels import launch
from specbench.scenarios import make_profile
from specbench.verification import verify


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--model", default="llama3")
    parser.add_argument("--vocab", type=int, default=None, help="rows of this many tokens instead of the model's")
    parser.add_argument("--draft", default="logits", choices=("logits", "probs", "none"))
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    preset = models.resolve_model(args.model)
    vocab = (preset.name, preset.vocab_size) if args.vocab is None else (None, args.vocab)
    profile = make_profile(args.k, acceptance_length=3.0, name="3")
    (case,) = bench.plan_cases(modes=["probabilistic"], batch_sizes=[args.batch],
                               vocabularies=[vocab], profiles=[profile],
                               drafts=[args.draft], top_p=args.top_p)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    inputs = bench.make_inputs(case, device, seed=args.seed)
    kwargs = inputs.verify_kwargs()
    captured = []
    original = launch._split_histogram

    def capturing(*a, **k):
        captured.append(original(*a, **k))
        return captured[-1]

    launch._split_histogram = capturing
    launch.TUNING["histogram_decide"] = 2  # (from one pass's bounds, at any batch)
    results = {}
    for race in (0, 1, 2):
        launch.TUNING["histogram_race"] = race
        captured.clear()
        results[race] = verify(**kwargs, backend="triton")
        decided = captured[0].decided.view(args.batch, 3).cpu()
        clean = int((decided[:, 1] == 1).sum())
        won = int((decided[:, 2] >= 0).sum()) if race else 0
        if race:
            same = all(torch.equal(getattr(results[race], f).cpu(), getattr(results[0], f).cpu())
                       for f in ("output_token_ids", "num_emitted", "num_accepted"))
            print(f"B={args.batch} K={args.k} V={vocab[1]} draft={args.draft} top_p={args.top_p} "
                  f"seed={args.seed}: race after level {race}: {won} of {clean} clean stops decided "
                  f"(of {args.batch} requests); tokens as the whole search's: {same}", flush=True)


if __name__ == "__main__":
    main()
