"""The summaries of the split histogram path, with the working tree's kernels and with the last level counted by
atomics (``variant.py``), compared bit for bit: rows of several kinds (N(0, 1), N(0, 16), bfloat16-rounded ties,
probabilities), top_p alone and with min_p. ``python3 results/h200-level-atomics/check_atomic.py`` on the GPU
(V = 151936) or under ``TRITON_INTERPRET=1`` with ``--small`` (V = 3000, the interpreter's block shapes)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from variant import patched_kernel

from specbench.kernels import launch


def rows(kind: str, batch: int, slots: int, vocab: int, device: str) -> tuple[torch.Tensor, bool]:
    gen = torch.Generator(device=device).manual_seed(7)
    z = torch.randn(batch, slots, vocab, generator=gen, device=device)
    if kind == "wide":
        z = z * 4
    if kind == "ties":
        z = z.to(torch.bfloat16).float()
    if kind == "probs":
        return torch.softmax(z * 2, dim=-1), True
    return z, False


def summaries(target, is_probs, top_p, min_p):
    batch, slots, _ = target.shape
    device = target.device
    return launch.truncation_summaries(
        target=target, target_is_probs=is_probs, temperatures=torch.ones(batch, device=device),
        num_draft_tokens=torch.full((batch,), slots - 1, dtype=torch.int32, device=device), top_k=None,
        top_p=torch.full((batch,), top_p, device=device), min_p=None if min_p is None else torch.full(
            (batch,), min_p, device=device))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    device = "cpu" if args.small else "cuda"
    batch, slots, vocab = (2, 2, 3000) if args.small else (8, 4, 151936)
    today = launch._SPLIT_HISTOGRAM
    atomic = launch._Launcher(patched_kernel())
    failures = 0
    for kind in ("normal", "wide", "ties", "probs"):
        target, is_probs = rows(kind, batch, slots, vocab, device)
        for top_p, min_p in ((0.95, None), (0.9, None), (0.99, 0.001)):
            launch._SPLIT_HISTOGRAM = today
            want = summaries(target, is_probs, top_p, min_p)
            launch._SPLIT_HISTOGRAM = atomic
            got = summaries(target, is_probs, top_p, min_p)
            launch._SPLIT_HISTOGRAM = today
            same = all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
            failures += not same
            print(f"{kind} top_p={top_p} min_p={min_p}: {'same' if same else 'DIFFERENT'}", flush=True)
    print(f"{failures} different")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
