"""Where one row's top-k cutoff search spends its time: each stage of ``top_k_from_groups`` timed alone.

Run from the repository root on the GPU machine: ``python3 results/h200-issue20-s2/stages.py``. One
program (the truncation kernels' warps) on one row of V = 128256 random logits, top_k 50, top_p 0.9;
each stage is a kernel that stops after it; 200 launches captured in a CUDA graph, replayed 20
times, median per launch in µs. Differences between stages place the time (a launch alone is the
first line).
"""

import statistics

import torch
import triton
import triton.language as tl

from specbench.kernels import launch
from specbench.kernels.cutoffs import GROUP, group_maxima, top_k_from_groups


@triton.jit
def _stage_kernel(row, out_ptr, group_max_ptr, group_ids_ptr, list_ids_ptr, list_v_ptr, list_w_ptr, V, k, top_p,
                  STAGE: tl.constexpr, GROUP_ROWS: tl.constexpr, GROUP_BLOCK: tl.constexpr,
                  CAP_GROUPS: tl.constexpr, SEARCH_BITS: tl.constexpr):
    if STAGE >= 1:  # the group maxima pass over the whole row, by this program
        group_maxima(row, V, 1.0, group_max_ptr, 0, tl.cdiv(V, GROUP), False, GROUP_ROWS)
        tl.debug_barrier()
    if STAGE == 2:  # + loading the maxima and their max
        groups = tl.arange(0, GROUP_BLOCK)
        g = tl.load(group_max_ptr + groups, mask=groups < tl.cdiv(V, GROUP), other=float("-inf"))
        tl.store(out_ptr, tl.max(g, axis=0))
    if STAGE == 3:  # + the whole search (its stages after the maxima)
        _done, m, mass, tau, iota, length = top_k_from_groups(row, V, 1.0, k, top_p, 0.0, group_max_ptr, group_ids_ptr,
                                                             list_ids_ptr, list_v_ptr, list_w_ptr, False, GROUP_BLOCK,
                                                             CAP_GROUPS, SEARCH_BITS)
        tl.store(out_ptr, mass + tau + iota + length + m)
    if STAGE == 4:  # the search alone, on maxima an earlier launch wrote
        _done, m, mass, tau, iota, length = top_k_from_groups(row, V, 1.0, k, top_p, 0.0, group_max_ptr, group_ids_ptr,
                                                             list_ids_ptr, list_v_ptr, list_w_ptr, False, GROUP_BLOCK,
                                                             CAP_GROUPS, SEARCH_BITS)
        tl.store(out_ptr, mass + tau + iota + length + m)


def timed(fn) -> float:
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(200):
            fn()
    samples = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / 200)
    return statistics.median(samples)


def main() -> None:
    vocab = 128256
    row = torch.randn(vocab, device="cuda") * 2
    out = torch.empty(8, device="cuda")
    group_max = torch.empty(-(-vocab // 32), device="cuda")
    ints = torch.empty(256, dtype=torch.int32, device="cuda")
    floats = torch.empty(256, device="cuda")
    for block, warps, bits in [(4096, 8, 2), (8192, 16, 2), (4096, 8, 1), (1024, 4, 1)]:
        shape = launch._group_shape(vocab, block)
        cells = []
        for stage in range(5):
            def fn(stage=stage, shape=shape, bits=bits, warps=warps):
                _stage_kernel[(1,)](row, out, group_max, ints, ints[64:], floats, floats[64:], vocab, 50, 0.9,
                                    STAGE=stage, GROUP_ROWS=shape["GROUP_ROWS"], GROUP_BLOCK=shape["GROUP_BLOCK"],
                                    CAP_GROUPS=shape["CAP_GROUPS"], SEARCH_BITS=bits, num_warps=warps)
            cells.append(f"stage {stage} {timed(fn):.2f}")
        print(f"{block}x{warps}w/{bits}b: " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
