"""Where one row's top-k cutoff search spends its time: its parts timed as kernels of their own.

Run from the repository root on the GPU machine: ``python3 results/h200-truncation-s3/stages.py``.
Rows of V = 151936 random logits (top_k 50, top_p 0.9; 4748 groups of 32, a block of 8192); each kernel
below runs one program per row, at 4, 8 and 16 warps, on 1 row (latency: what a small batch waits for)
and on 264 rows (two programs per multiprocessor of an H200: what a large batch streams). 100 launches
are captured in a CUDA graph and replayed 20 times (``specbench.timing``); the median per launch in µs
is printed.

- ``launch``: load the group maxima and store their max (a launch and one reduction);
- ``bound``: + the first bisection (``_kth_largest_bound``: at most 64 groups at or above its bound);
- ``scan``: + the compaction's cumulative sum over the block of group maxima;
- ``search``: ``top_k_from_groups`` whole (both bisections, the gather, the kept list, top_p);
- ``pass``: ``group_maxima`` over the whole row by the one program (chunks of GROUP_ROWS groups);
- ``scan2d``: ``scan`` again on a 2-D view of the block (rows of 128 groups: a scan along each row, whose
  128 entries lie in one warp, then a scan of the 64 rows' counts), to compare with ``scan``: a candidate
  for the compaction in ``top_k_from_groups`` (added after the explore call; not yet run on a GPU).
"""

import torch
import triton
import triton.language as tl

from specbench.kernels.cutoffs import GROUP, _kth_largest_bound, _order_key32, group_maxima, top_k_from_groups
from specbench.timing import TimingConfig, time_implementations

V = 151936
GROUPS = -(-V // 32)
GROUP_BLOCK = 8192


@triton.jit
def _stage_kernel(rows_ptr, out_ptr, group_max_ptr, group_ids_ptr, list_ids_ptr, list_v_ptr, list_w_ptr, V,
                  STAGE: tl.constexpr, GROUP_ROWS: tl.constexpr, GROUP_BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    row = rows_ptr + r * V
    num_groups = tl.cdiv(V, GROUP)
    maxima = group_max_ptr + r * num_groups
    if STAGE == 4:
        group_maxima(row, V, 1.0, maxima, 0, num_groups, False, GROUP_ROWS)
        tl.store(out_ptr + r, 1.0)
    elif STAGE == 5:  # "scan" on a 2-D view of the block: rows of 128 groups, scans along a row, rows' offsets
        ids = tl.arange(0, GROUP_BLOCK // 128)[:, None] * 128 + tl.arange(0, 128)[None, :]
        group_max = tl.load(maxima + ids, mask=ids < num_groups, other=float("-inf"))
        key = tl.where(ids < num_groups, _order_key32(group_max), -2147483648)
        c, count = _bound_2d(key, 50, 64)
        qualify = (key >= c).to(tl.int32)
        per_row = tl.sum(qualify, axis=1)
        slot_of = (tl.cumsum(per_row, axis=0) - per_row)[:, None] + tl.cumsum(qualify, axis=1) - 1
        tl.store(group_ids_ptr + r * 64 + slot_of, ids, mask=qualify > 0)
        tl.store(out_ptr + r, tl.max(tl.max(group_max, axis=1), axis=0) + c.to(tl.float32) + count)
    elif STAGE == 3:
        _done, m, mass, tau, iota, length = top_k_from_groups(
            row, V, 1.0, 50, 0.9, 0.0, maxima, group_ids_ptr + r * 64, list_ids_ptr + r * 64, list_v_ptr + r * 64,
            list_w_ptr + r * 64, False, GROUP_BLOCK, 64)
        tl.store(out_ptr + r, m + mass + tau + iota + length)
    else:
        groups = tl.arange(0, GROUP_BLOCK)
        group_max = tl.load(maxima + groups, mask=groups < num_groups, other=float("-inf"))
        result = tl.max(group_max, axis=0)
        if STAGE >= 1:
            key = tl.where(groups < num_groups, _order_key32(group_max), -2147483648)
            c, count = _kth_largest_bound(key, 50, 64)
            result += c.to(tl.float32) + count
            if STAGE >= 2:
                qualify = key >= c
                slot_of = tl.cumsum(qualify.to(tl.int32), axis=0) - 1
                tl.store(group_ids_ptr + r * 64 + slot_of, groups, mask=qualify)
        tl.store(out_ptr + r, result)


@triton.jit
def _bound_2d(key, k, enough):
    # _kth_largest_bound on a 2-D block of keys (its counts summed over both axes)
    c = tl.full([], -2147483648, tl.int32)
    count = tl.sum(tl.sum((key > c).to(tl.int32), axis=1), axis=0)
    step = tl.full([], 0, tl.int32)
    while (step < 32) & (count > enough):
        trial = c ^ (tl.full([], 1, tl.int32) << (31 - step))
        at_least = tl.sum(tl.sum((key >= trial).to(tl.int32), axis=1), axis=0)
        c = tl.where(at_least >= k, trial, c)
        count = tl.where(at_least >= k, at_least, count)
        step += 1
    return c, count


def _timed(fn) -> float:
    # specbench's own graph timer: 100 launches a graph, 20 replays, no flush (explore-call/stages.txt was
    # taken with a loop of this script's own that did the same: 100 launches captured, 20 replays, median)
    config = TimingConfig(cuda_graph=True, graph_calls=100, min_samples=20, max_samples=20, l2_flush=False)
    return time_implementations({"stage": fn}, "cuda", config).timings["stage"].median_us


def main() -> None:
    many = 264
    generator = torch.Generator(device="cuda").manual_seed(0)
    rows = torch.randn(many, V, device="cuda", generator=generator)
    maxima = torch.nn.functional.pad(rows, (0, GROUPS * 32 - V), value=float("-inf")).view(many, GROUPS, 32).amax(-1)
    maxima = maxima.contiguous()
    out = torch.empty(many, device="cuda")
    ints = torch.empty(many * 64, dtype=torch.int32, device="cuda")
    lists = [torch.empty(many * 64, dtype=dtype, device="cuda") for dtype in (torch.int32, torch.float32, torch.float32)]
    names = ["launch", "bound", "scan", "search", "pass", "scan2d"]
    for warps in (4, 8, 16):
        line = []
        for stage, name in enumerate(names):
            group_rows = 128 if warps == 4 else 256
            for grid in (1, many):
                scratch = maxima.clone() if stage == 4 else maxima  # (the pass writes its own copy)

                def launch(stage=stage, grid=grid, scratch=scratch, group_rows=group_rows, warps=warps):
                    _stage_kernel[(grid,)](rows, out, scratch, ints, *lists, V, STAGE=stage, GROUP_ROWS=group_rows,
                                           GROUP_BLOCK=GROUP_BLOCK, num_warps=warps)

                line.append(f"{name}@{grid} {_timed(launch):.1f}")
        print(f"{warps} warps: " + ", ".join(line), flush=True)


if __name__ == "__main__":
    main()
