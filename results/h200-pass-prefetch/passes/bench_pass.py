"""One program per row streams its row's group maxima: pass variants timed side by side (CUDA graph)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # passes.py beside it
import torch
import triton
import triton.language as tl
from passes import k_contig_inthread, k_current, k_inthread, k_inthread_prefetch, k_prefetch


@triton.jit
def w_current(x, out, V, G, GROUP_ROWS: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    k_current(x + b * V, V, 1.0, out + b * G, 0, tl.cdiv(V, 32), GROUP_ROWS)


@triton.jit
def w_prefetch(x, out, V, G, GROUP_ROWS: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    k_prefetch(x + b * V, V, 1.0, out + b * G, 0, tl.cdiv(V, 32), GROUP_ROWS)


@triton.jit
def w_contig(x, out, V, G, GROUP_ROWS: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    k_contig_inthread(x + b * V, V, 1.0, out + b * G, 0, tl.cdiv(V, 32), GROUP_ROWS)


@triton.jit
def w_inthread(x, out, V, G, GROUP_ROWS: tl.constexpr, THREADS: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    k_inthread(x + b * V, V, 1.0, out + b * G, 0, G, GROUP_ROWS, THREADS)


@triton.jit
def w_inthread_prefetch(x, out, V, G, GROUP_ROWS: tl.constexpr, THREADS: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    k_inthread_prefetch(x + b * V, V, 1.0, out + b * G, 0, G, GROUP_ROWS, THREADS)


def timed(fn, reps=20, replays=30):
    # median µs per launch over `replays` replays of a CUDA graph of `reps` launches
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(torch.cuda.Stream()), torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) * 1000 / reps)
    return sorted(times)[len(times) // 2]


# (name, wrapper kernel, warps, extra constexprs): strided variants group a thread's tokens, not 32 in a row
VARIANTS = [
    ("current-4w", w_current, 4, {}),
    ("prefetch-4w", w_prefetch, 4, {}),
    ("contig-inthread-4w", w_contig, 4, {}),
    ("inthread-4w", w_inthread, 4, {"THREADS": 128}),
    ("inthread-prefetch-4w", w_inthread_prefetch, 4, {"THREADS": 128}),
    ("current-8w", w_current, 8, {}),
    ("contig-inthread-8w", w_contig, 8, {}),
    ("inthread-8w", w_inthread, 8, {"THREADS": 256}),
]


def main():
    for V in (151936, 128256):
        for rows in (1, 264, 528):
            x = torch.randn(rows, V, device="cuda")
            G = -(-V // 8192) * 256  # chunk-padded groups (8192-token chunks)
            ngroups = -(-V // 32)
            want = x.new_full((rows, ngroups * 32), float("-inf"))
            want[:, :V] = x
            want = want.view(rows, -1, 32).amax(-1)
            for name, kernel, warps, extra in VARIANTS:
                out = torch.full((rows, G), float("nan"), device="cuda")

                def launch(kernel=kernel, warps=warps, extra=extra, out=out, x=x, V=V, G=G, rows=rows):
                    kernel[(rows,)](x, out, V, G, GROUP_ROWS=256, num_warps=warps, **extra)

                launch()
                torch.cuda.synchronize()
                if "inthread" in name and "contig" not in name:
                    same = torch.equal(out.amax(1), x.amax(1))
                    check = "(strided groups: max of maxima " + ("ok" if same else "BAD") + ")"
                else:
                    check = "ok" if torch.equal(out[:, :ngroups], want) else "BAD"
                us = timed(launch)
                print(f"V={V} rows={rows} {name}: {us:.1f} us  {rows * V * 4 / us / 1e6:.2f} TB/s  {check}", flush=True)


main()
