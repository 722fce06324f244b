"""The top-k path's row summary (``cutoffs.summarize_row``: the group maxima pass, then the cutoff search) as
committed at fde41ff and as the working tree has it, side by side: the same summaries and kept lists, bit for bit,
then (on a GPU) each one's time.

Run from the repository root with ``.old/s49/cutoffs_head.py`` (``git show fde41ff:specbench/kernels/cutoffs.py``)
in place: ``python3 results/h200-search-start/search_start.py`` on the GPU machine, or with ``--check`` on the CPU
under ``TRITON_INTERPRET=1`` (small rows, no timing).

The rows (``rows``): random logits at three scales, logits with a peak of a few tokens far above the rest, bfloat16-
rounded logits full of ties, probabilities from peaked logits, rows with NaN, -inf and +inf entries, at
temperatures 1, 0.7 and +inf; per row a top_k from 1 to 64, top_p from 0.5 to 1 and min_p off or 0.05 / 0.2, the
first rows at the timed inputs' knobs (top_k 50, top_p 0.9). One program per row summarises it as the fused step
does (its group maxima written first), at the fused step's shape (GROUP_ROWS 256, 4 warps; the prepass's 8 are
timed too). The summaries (m, S, tau, iota, n), the kept lists' ids, values and masses, and whether each took the
top-k path must be equal. Timing:
each version on 1 row and on 264 rows (two a multiprocessor), 50 launches in a CUDA graph, 20 replays, the
median µs per launch.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / ".old" / "s49"))

import cutoffs_head as before

from specbench.kernels import cutoffs as after


@triton.jit
def _summary_after(rows_ptr, V, inv_temperature, top_k_ptr, top_p_ptr, min_p_ptr, group_max_ptr, group_ids_ptr,
                   list_ids_ptr, list_v_ptr, list_w_ptr, out_f_ptr, out_i_ptr, TARGET_PROBS: tl.constexpr,
                   RADIX_BLOCK: tl.constexpr, GROUP_ROWS: tl.constexpr, GROUP_BLOCK: tl.constexpr,
                   CAP_GROUPS: tl.constexpr):
    r = tl.program_id(0)
    k = tl.load(top_k_ptr + r)
    m, mass, tau, iota, length = after.summarize_row(
        rows_ptr + r.to(tl.int64) * V, V, inv_temperature, k, tl.load(top_p_ptr + r), tl.load(min_p_ptr + r),
        group_max_ptr + r * tl.cdiv(V, 32), group_ids_ptr + r * CAP_GROUPS, list_ids_ptr + r * 64,
        list_v_ptr + r * 64, list_w_ptr + r * 64, TARGET_PROBS, RADIX_BLOCK, GROUP_ROWS, GROUP_BLOCK, CAP_GROUPS,
        True)
    tl.store(out_f_ptr + r * 3 + 0, m)
    tl.store(out_f_ptr + r * 3 + 1, mass)
    tl.store(out_f_ptr + r * 3 + 2, tau)
    tl.store(out_i_ptr + r * 2 + 0, iota)
    tl.store(out_i_ptr + r * 2 + 1, length)


@triton.jit
def _summary_before(rows_ptr, V, inv_temperature, top_k_ptr, top_p_ptr, min_p_ptr, group_max_ptr, group_ids_ptr,
                    list_ids_ptr, list_v_ptr, list_w_ptr, out_f_ptr, out_i_ptr, TARGET_PROBS: tl.constexpr,
                    RADIX_BLOCK: tl.constexpr, GROUP_ROWS: tl.constexpr, GROUP_BLOCK: tl.constexpr,
                    CAP_GROUPS: tl.constexpr):
    r = tl.program_id(0)
    k = tl.load(top_k_ptr + r)
    m, mass, tau, iota, length = before.summarize_row(
        rows_ptr + r.to(tl.int64) * V, V, inv_temperature, k, tl.load(top_p_ptr + r), tl.load(min_p_ptr + r),
        group_max_ptr + r * tl.cdiv(V, 32), group_ids_ptr + r * CAP_GROUPS, list_ids_ptr + r * 64,
        list_v_ptr + r * 64, list_w_ptr + r * 64, TARGET_PROBS, RADIX_BLOCK, GROUP_ROWS, GROUP_BLOCK, CAP_GROUPS,
        True)
    tl.store(out_f_ptr + r * 3 + 0, m)
    tl.store(out_f_ptr + r * 3 + 1, mass)
    tl.store(out_f_ptr + r * 3 + 2, tau)
    tl.store(out_i_ptr + r * 2 + 0, iota)
    tl.store(out_i_ptr + r * 2 + 1, length)


KERNELS = {"before": _summary_before, "after": _summary_after}  # (one kernel each: the run that made the files)


def rows(kind: str, count: int, vocab: int, seed: int) -> torch.Tensor:
    """``count`` rows of one kind (module docstring), float32 on the CPU."""
    generator = torch.Generator().manual_seed(seed)
    z = torch.randn(count, vocab, generator=generator)
    if kind == "logits":
        return z
    if kind == "wide":
        return z * 6.0 + 20.0
    if kind == "peaked":
        z = z * 2.0
        top = torch.randint(0, vocab, (count, 5), generator=generator)
        z.scatter_(1, top, 30.0 + torch.rand(count, 5, generator=generator) * 5.0)
        return z
    if kind == "ties":
        return (z * 4.0).to(torch.bfloat16).float()
    if kind == "probs":
        return torch.softmax(z * 3.0, dim=-1)
    if kind == "hostile":
        z[:, 7::97] = math.nan
        z[:, 5::13] = -math.inf
        z[::3, vocab // 2] = math.inf
        return z
    raise ValueError(kind)


CASES = [("logits", 1.0), ("logits", 0.7), ("wide", 1.0), ("peaked", 1.0), ("ties", 1.0), ("ties", math.inf),
         ("probs", 1.0), ("hostile", 1.0), ("hostile", math.inf)]


def knobs(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row (top_k, top_p, min_p): the first two rows at 50 / 0.9 / off, the others drawn."""
    generator = torch.Generator().manual_seed(seed)
    top_k = torch.randint(1, 65, (count,), generator=generator, dtype=torch.int32)
    top_p = torch.tensor([0.5, 0.8, 0.9, 0.95, 0.99, 1.0])[torch.randint(0, 6, (count,), generator=generator)]
    min_p = torch.tensor([0.0, 0.0, 0.05, 0.2])[torch.randint(0, 4, (count,), generator=generator)]
    top_k[:2], top_p[:2], min_p[:2] = 50, 0.9, 0.0
    return top_k, top_p, min_p


def prepare(version: str, data: torch.Tensor, temperature: float, knob: tuple, is_probs: bool, shape: tuple,
            cap_groups: int, device: str):
    """(launch, outputs): one program per row through ``version``'s summarize_row, on buffers made here (outputs
    and scratch start as NaN / -1)."""
    count, vocab = data.shape
    group_rows, warps, group_block = shape
    floats = lambda *size: torch.full(size, math.nan, device=device)
    ints = lambda *size: torch.full(size, -1, dtype=torch.int32, device=device)
    out = {"f": floats(count, 3), "i": ints(count, 2), "ids": ints(count, 64), "v": floats(count, 64),
           "w": floats(count, 64)}
    scratch = (floats(count, triton.cdiv(vocab, 32)), ints(count, cap_groups))
    top_k, top_p, min_p = (t.to(device) for t in knob)
    rows_in = data.to(device)
    inv_temperature = 0.0 if temperature == math.inf else 1.0 / temperature

    def launch():
        KERNELS[version][(count,)](rows_in, vocab, inv_temperature, top_k, top_p, min_p, scratch[0], scratch[1],
                                   out["ids"], out["v"], out["w"], out["f"], out["i"], TARGET_PROBS=is_probs,
                                   RADIX_BLOCK=256 if device == "cpu" else 1024, GROUP_ROWS=group_rows,
                                   GROUP_BLOCK=group_block, CAP_GROUPS=cap_groups, num_warps=warps)

    return launch, out


def summarize(*args) -> dict[str, torch.Tensor]:
    launch, out = prepare(*args)
    launch()
    return out


def same(a: dict, b: dict) -> bool:
    """Equal outputs, bit for bit; the kept lists compared up to each row's length (n)."""
    if not torch.equal(a["i"], b["i"]) or not torch.equal(a["f"].view(torch.int32), b["f"].view(torch.int32)):
        return False
    listed = torch.arange(64, device=a["i"].device)[None, :] < a["i"][:, 1:2]
    return all(torch.equal(torch.where(listed, a[key], 0).view(torch.int32), torch.where(listed, b[key], 0).view(
        torch.int32)) for key in ("ids", "v", "w"))


def check(count: int, vocab: int, shape: tuple, cap_groups: int, device: str) -> bool:
    ok = True
    for index, (kind, temperature) in enumerate(CASES):
        data = rows(kind, count, vocab, seed=index)
        knob = knobs(count, seed=100 + index)
        outs = {v: summarize(v, data, temperature, knob, kind == "probs", shape, cap_groups, device) for v in KERNELS}
        equal = same(outs["before"], outs["after"])
        fast = int((outs["after"]["i"][:, 1] > 0).sum())
        print(f"{kind:8s} T={temperature:<4} rows={count} V={vocab}: {'same' if equal else 'DIFFERENT'} "
              f"({fast} rows with a kept list)", flush=True)
        ok &= equal
    return ok


def time_versions(vocab: int, shape: tuple) -> None:
    for kind, is_probs in (("logits", False), ("probs", True)):
        for count in (1, 264):
            data = rows(kind, count, vocab, seed=7).cuda()
            knob = tuple(torch.tensor([v] * count, dtype=t) for v, t in ((50, torch.int32), (0.9, torch.float32),
                                                                         (0.0, torch.float32)))
            line = []
            for version in KERNELS:
                call, _out = prepare(version, data, 1.0, knob, is_probs, shape, 64, "cuda")
                call()
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(50):
                        call()
                times = []
                for _ in range(20):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    graph.replay()
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end) * 1000.0 / 50)
                line.append(f"{version} {sorted(times)[len(times) // 2]:.1f}")
            print(f"{kind:6s} V={vocab} rows={count:3d} GROUP_ROWS x warps={shape[0]}x{shape[1]}: "
                  + ", ".join(line) + " µs (the pass and the search)",
                  flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="outputs only, small rows (the interpreter)")
    args = parser.parse_args()
    if args.check:
        ok = check(count=24, vocab=1031, shape=(16, 4, 64), cap_groups=4, device="cpu")
        ok &= check(count=12, vocab=4099, shape=(16, 4, 256), cap_groups=64, device="cpu")
        return 0 if ok else 1
    ok = True
    for vocab, group_block in ((128256, 4096), (151936, 8192)):
        ok &= check(count=264, vocab=vocab, shape=(256, 4, group_block), cap_groups=64, device="cuda")
    if not ok:
        print("the versions differ: not timed")
        return 1
    for vocab, group_block in ((128256, 4096), (151936, 8192)):
        for warps in (4, 8):  # the fused step's shape and the prepass's
            time_versions(vocab, (256, warps, group_block))
    return 0


if __name__ == "__main__":
    sys.exit(main())
