"""The top-k path's cutoff search as it stands (``cutoffs.top_k_from_groups``, its bisections started from shared
bits) beside ``results/h200-topk-search/``'s histogram variants, under whichever Triton runs it.

Those variants were slower than the bisections under Triton 3.6, whose ``tl.histogram`` pays warp ballots for every
element; from Triton 3.8 it is a shared-memory atomic (``results/h200-triton39/``), so they are timed again here,
now against the search as committed (the variants' copies predate its started bisections), launched by
``results/h200-search-warps/``'s kernel (the committed search on one row a program, outputs laid out as the
variants'). Run from the repository root on the GPU machine, once under each Triton: ``python3
results/h200-topk-search-triton39/search_now.py``; ``--check`` on the CPU under ``TRITON_INTERPRET=1`` (outputs
only, small rows).

Every search's summaries and kept lists must equal the committed search's bit for bit (rows of four kinds, as the
variants' script builds them); then each is timed on 1 row and on 264 rows at 4 and 8 warps, 100 launches in a CUDA
graph, 20 replays, the median µs per launch. Names: ``now`` (the committed search, its bisections started from
shared bits, as the small batches that miss their goals run it) and the variants' ``BOUND SECOND SCAN2D`` digits
(``000`` the committed search before its started bisections).
"""

import argparse
import sys
from pathlib import Path

import torch
import triton

RESULTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(RESULTS / "h200-topk-search"), str(RESULTS / "h200-search-warps")]

import search_variants as old
import search_warps as now

SEARCHES = ["now", (0, 0, 0), (1, 0, 0), (1, 1, 0)]


def launch(case: old._Case, search, grid=None, warps=8) -> None:
    """One launch of a search over the case's rows (the first `grid` of them)."""
    if isinstance(search, tuple):
        case.launch(search, grid, warps)
        return
    now._search_kernel[(grid or case.n,)](case.rows, case.maxima, case.out_f, case.out_i, case.ids, *case.lists,
                                          case.vocab, 50, 0.9, 0.0, TARGET_PROBS=case.kind == "probs",
                                          GROUP_BLOCK=case.block, num_warps=warps)


def check(vocab: int, n: int, device: str) -> None:
    """Every search's outputs against the committed search's, bit for bit; raises on a difference."""
    for kind in ("randn", "peaked", "ties", "probs"):
        case = old._Case(kind, n, vocab, device)
        results = {}
        for search in SEARCHES:
            for tensor in case.lists:
                tensor.zero_()
            launch(case, search)
            results[search] = case.result()
        for search, got in results.items():
            same = all(torch.equal(a, b) for a, b in zip(got, results["now"], strict=True))
            print(f"{kind} {search}: {'same' if same else 'DIFFERENT'}", flush=True)
            assert same, (kind, search)


def _name(search) -> str:
    return search if isinstance(search, str) else "".join(map(str, search))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="outputs only, small rows (CPU, interpreter)")
    args = parser.parse_args()
    print("triton", triton.__version__, "torch", torch.__version__, flush=True)
    if args.check:
        check(vocab=8000, n=6, device="cpu")
        return
    check(vocab=151936, n=264, device="cuda")
    for vocab in (128256, 151936):
        for kind in ("randn", "probs"):
            case = old._Case(kind, 264, vocab, "cuda")
            for warps in (4, 8):
                line = []
                for search in SEARCHES:
                    for grid in (1, 264):
                        us = old._timed(lambda case=case, search=search, grid=grid, warps=warps:
                                        launch(case, search, grid, warps))
                        line.append(f"{_name(search)}@{grid} {us:.1f}")
                print(f"V={vocab} {kind} {warps} warps: " + ", ".join(line), flush=True)


if __name__ == "__main__":
    main()
