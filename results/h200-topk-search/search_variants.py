"""The top-k path's cutoff search (``top_k_from_groups``), in variants timed side by side: the bisections
replaced by histograms of positions below the row's largest value, and the compaction of the qualifying
groups as one scan or a scan per 32 groups.

Run from the repository root on the GPU machine: ``python3 results/h200-topk-search/search_variants.py``
(``--check`` on the CPU under ``TRITON_INTERPRET=1``: the variants' outputs only, on small rows).

Each variant is a copy of ``specbench.kernels.cutoffs.top_k_from_groups`` with three switches:
- ``BOUND``: the groups to gather from the bisection on their maxima's order keys (0), or from at most two
  256-bin histograms of their maxima's positions (1; the bisection after them where they leave more than 64);
- ``SECOND``: the k-th largest gathered value from the bisection (0), or from the same histograms (1; the
  bisection after them where the k-th's bin holds more than one distinct value and more than k reach it);
- ``SCAN2D``: the qualifying groups' slots from one cumulative sum over the block (0), or from sums per 32
  groups, a cumulative sum of those, and a cumulative sum within each 32 (1).
One program per row; rows of random logits or probabilities (top_k 50, top_p 0.9), the group maxima computed
by torch beforehand. Every variant's summaries and kept lists must equal variant (0, 0, 0)'s bit for bit;
then each is timed on 1 row (a small batch's latency) and on 264 rows (two programs per multiprocessor), at 4
and 8 warps: 100 launches captured in a CUDA graph, 20 replays, the median per launch in µs.
"""

import argparse

import torch
import triton
import triton.language as tl

from specbench.kernels.cutoffs import (
    GROUP,
    INT32_MAX,
    MAX_FAST_K,
    _kth_largest_bound,
    _kth_smallest_id,
    _order_key32,
    row_values,
)

VARIANTS = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (1, 1, 1), (0, 0, 1)]


@triton.jit
def _fine_position(value, m, valid, TARGET_PROBS: tl.constexpr):
    # a value's place below m on a grid of 65536 steps, never decreasing as the value decreases: logits
    # 1/2048 nat (the distance m - value rounded once, then scaled exactly), probabilities 2**12 bit
    # patterns; clamped at 65535 (the last of 256 coarse bins open-ended); 0 where not valid
    if TARGET_PROBS:
        dist = m.to(tl.int32, bitcast=True) - tl.where(valid, value, m).to(tl.int32, bitcast=True)
        fine = tl.minimum(dist >> 12, 65535)
    else:
        units = tl.minimum((m - tl.where(valid, value, m)) * 8.0, 256.0)
        fine = tl.minimum((units * 256.0).to(tl.int32), 65535)
    return fine


@triton.jit
def _kth_bin(fine, valid, k, enough):
    # (threshold, edge, count): the valid entries at positions <= threshold number count >= k (all of them
    # when fewer than k), and [edge, threshold] is the bin that holds the k-th smallest position: a 256-bin
    # histogram of the coarse bins (position >> 8), then, where more than `enough` reach the k-th's bin and
    # that bin is not the open-ended last one, a histogram of its 256 fine positions
    bins = tl.arange(0, 256)
    coarse = fine >> 8
    hist = tl.histogram(coarse, 256, mask=valid)
    through = tl.cumsum(hist, axis=0)
    d1 = tl.min(tl.where(through >= k, bins, 255), axis=0)
    count = tl.sum(tl.where(bins == d1, through, 0), axis=0)
    threshold = d1 * 256 + 255
    edge = d1 * 256
    if (count > enough) & (d1 < 255):
        before = count - tl.sum(tl.where(bins == d1, hist, 0), axis=0)
        through = before + tl.cumsum(tl.histogram(fine & 255, 256, mask=valid & (coarse == d1)), axis=0)
        d2 = tl.min(tl.where(through >= k, bins, 255), axis=0)
        count = tl.sum(tl.where(bins == d2, through, 0), axis=0)
        threshold = d1 * 256 + d2
        edge = threshold
    return threshold, edge, count


@triton.jit
def _search(row, V, inv_temperature, k, top_p, min_p, group_max_ptr, group_ids_ptr, list_ids_ptr,
            list_v_ptr, list_w_ptr, TARGET_PROBS: tl.constexpr, GROUP_BLOCK: tl.constexpr,
            CAP_GROUPS: tl.constexpr, BOUND: tl.constexpr, SECOND: tl.constexpr, SCAN2D: tl.constexpr):
    groups = tl.arange(0, GROUP_BLOCK)
    num_groups = tl.cdiv(V, GROUP)
    group_max = tl.load(group_max_ptr + groups, mask=groups < num_groups, other=float("-inf"))
    m = tl.max(group_max, axis=0)
    done = True
    mass = tl.full([], 0.0, tl.float32)
    tau = tl.full([], float("inf"), tl.float32)
    iota = tl.full([], -1, tl.int32)
    length = tl.full([], 0, tl.int32)
    if m > float("-inf"):
        has_mass = (groups < num_groups) & (group_max > float("-inf"))
        if BOUND:
            fine = _fine_position(group_max, m, has_mass, TARGET_PROBS)
            threshold, _edge, count = _kth_bin(fine, has_mass, k, CAP_GROUPS)
            qualify = has_mass & (fine <= threshold)
            if count > CAP_GROUPS:
                key = tl.where(has_mass, _order_key32(group_max), -2147483648)
                c_groups, count = _kth_largest_bound(key, k, CAP_GROUPS)
                qualify = has_mass & (key >= c_groups)
        else:
            key = tl.where(has_mass, _order_key32(group_max), -2147483648)
            c_groups, count = _kth_largest_bound(key, k, CAP_GROUPS)
            qualify = has_mass & (key >= c_groups)
        done = count <= CAP_GROUPS
        if done:
            if SCAN2D:
                q2 = tl.reshape(qualify.to(tl.int32), [GROUP_BLOCK // 32, 32])
                per_row = tl.sum(q2, axis=1)
                slot2 = (tl.cumsum(per_row, axis=0) - per_row)[:, None] + tl.cumsum(q2, axis=1) - 1
                tl.store(group_ids_ptr + slot2, tl.reshape(groups, [GROUP_BLOCK // 32, 32]), mask=q2 > 0)
            else:
                slot_of = tl.cumsum(qualify.to(tl.int32), axis=0) - 1
                tl.store(group_ids_ptr + slot_of, groups, mask=qualify)
            tl.debug_barrier()
            gathered = tl.arange(0, CAP_GROUPS * GROUP)
            slot = gathered // GROUP
            group_id = tl.load(group_ids_ptr + slot, mask=slot < count, other=0)
            offs = tl.where(slot < count, group_id * GROUP + gathered % GROUP, V)
            value, weight = row_values(row, offs, V, inv_temperature, m, TARGET_PROBS)
            minp_threshold = min_p
            if TARGET_PROBS:
                minp_threshold = min_p * m
            play = (value > float("-inf")) & (weight >= minp_threshold) & (offs < V)
            value_key = tl.where(play, _order_key32(value), -2147483648)
            if SECOND:
                vfine = _fine_position(value, m, play, TARGET_PROBS)
                vthreshold, vedge, vcount = _kth_bin(vfine, play, k, k)
                low = tl.min(tl.where(play & (vfine <= vthreshold), value_key, INT32_MAX), axis=0)
                in_bin = play & (vfine >= vedge) & (vfine <= vthreshold)
                high = tl.max(tl.where(in_bin, value_key, -2147483648), axis=0)
                c = tl.where(vcount < k, -2147483648, low)
                if (vcount > k) & (low != high):
                    c, _count = _kth_largest_bound(value_key, k, k)
            else:
                c, _count = _kth_largest_bound(value_key, k, k)
            above = tl.sum((value_key > c).to(tl.int32), axis=0)
            tie = play & (value_key == c)
            cut_id = tl.full([], INT32_MAX, tl.int32)
            if tl.sum(tie.to(tl.int32), axis=0) > k - above:
                cut_id = _kth_smallest_id(tl.where(tie, offs, INT32_MAX), k - above)
            kept = play & ((value_key > c) | (tie & (offs <= cut_id)))
            length = tl.sum(kept.to(tl.int32), axis=0)
            list_slot = tl.cumsum(kept.to(tl.int32), axis=0) - 1
            tl.store(list_ids_ptr + list_slot, offs, mask=kept)
            tl.store(list_v_ptr + list_slot, value, mask=kept)
            tl.debug_barrier()
            j = tl.arange(0, MAX_FAST_K)
            listed = j < length
            ids = tl.load(list_ids_ptr + j, mask=listed, other=INT32_MAX)
            values = tl.load(list_v_ptr + j, mask=listed, other=float("-inf"))
            if TARGET_PROBS:
                w = values
            else:
                w = tl.exp(values - m)
            w = tl.where(listed, w, 0.0)
            survive = listed
            if top_p < 1.0:
                earlier = ((values[None, :] > values[:, None])
                           | ((values[None, :] == values[:, None]) & (ids[None, :] < ids[:, None]))) & listed[None, :]
                before = tl.sum(tl.where(earlier, w[None, :], 0.0), axis=1)
                first = tl.sum(earlier.to(tl.int32), axis=1) == 0
                survive = listed & ((before < top_p * tl.sum(w, axis=0)) | first)
            mass = tl.sum(tl.where(survive, w, 0.0), axis=0)
            tau = tl.min(tl.where(survive, values, float("inf")), axis=0)
            iota = tl.max(tl.where(survive & (values == tau), ids, -1), axis=0)
            tl.store(list_w_ptr + j, tl.where(survive, w, 0.0), mask=listed)
            tl.debug_barrier()
    return done, m, mass, tau, iota, length


@triton.jit
def _search_kernel(rows_ptr, group_max_ptr, out_f, out_i, group_ids_ptr, list_ids_ptr, list_v_ptr, list_w_ptr,
                   V, k, top_p, min_p, TARGET_PROBS: tl.constexpr, GROUP_BLOCK: tl.constexpr,
                   BOUND: tl.constexpr, SECOND: tl.constexpr, SCAN2D: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    done, m, mass, tau, iota, length = _search(
        rows_ptr + r * V, V, 1.0, k, top_p, min_p, group_max_ptr + r * tl.cdiv(V, GROUP), group_ids_ptr + r * 64,
        list_ids_ptr + r * 64, list_v_ptr + r * 64, list_w_ptr + r * 64, TARGET_PROBS, GROUP_BLOCK, 64, BOUND,
        SECOND, SCAN2D)
    tl.store(out_f + r * 3 + 0, m)
    tl.store(out_f + r * 3 + 1, mass)
    tl.store(out_f + r * 3 + 2, tau)
    tl.store(out_i + r * 3 + 0, iota)
    tl.store(out_i + r * 3 + 1, length)
    tl.store(out_i + r * 3 + 2, done.to(tl.int32))


def _rows(kind: str, n: int, vocab: int, device: str) -> torch.Tensor:
    gen = torch.Generator(device=device).manual_seed(0)
    rows = torch.randn(n, vocab, device=device, generator=gen)
    if kind == "peaked":  # a model's shape: a few tokens far above the rest
        rows = rows * 3.0 + 20.0 * (torch.rand(n, vocab, device=device, generator=gen) < 1e-3)
    if kind == "ties":  # bfloat16 logits: many exact ties
        rows = rows.to(torch.bfloat16).float()
    if kind == "probs":
        rows = torch.softmax(rows * 2.0, dim=-1)
    return rows.contiguous()


class _Case:
    def __init__(self, kind: str, n: int, vocab: int, device: str) -> None:
        self.kind, self.n, self.vocab = kind, n, vocab
        self.rows = _rows(kind, n, vocab, device)
        groups = -(-vocab // 32)
        padded = torch.nn.functional.pad(self.rows, (0, groups * 32 - vocab),
                                         value=0.0 if kind == "probs" else float("-inf"))
        maxima = padded.view(n, groups, 32).amax(-1)
        if kind == "probs":
            maxima = torch.where(maxima > 0, maxima, float("-inf"))
        self.maxima = maxima.contiguous()
        self.block = max(triton.next_power_of_2(groups), 16)
        self.out_f = torch.empty(n * 3, device=device)
        self.out_i = torch.empty(n * 3, dtype=torch.int32, device=device)
        self.ids = torch.empty(n * 64, dtype=torch.int32, device=device)
        self.lists = [torch.zeros(n * 64, dtype=d, device=device) for d in (torch.int32, torch.float32, torch.float32)]

    def launch(self, variant, grid=None, warps=8):
        bound, second, scan2d = variant
        _search_kernel[(grid or self.n,)](self.rows, self.maxima, self.out_f, self.out_i, self.ids, *self.lists,
                                          self.vocab, 50, 0.9, 0.0, TARGET_PROBS=self.kind == "probs",
                                          GROUP_BLOCK=self.block, BOUND=bound, SECOND=second, SCAN2D=scan2d,
                                          num_warps=warps)

    def result(self):
        length = self.out_i.view(-1, 3)[:, 1]
        listed = torch.arange(64, device=length.device)[None, :] < length[:, None]
        lists = [torch.where(listed, t.view(-1, 64), torch.zeros_like(t.view(-1, 64))) for t in self.lists]
        return [self.out_f.clone(), self.out_i.clone(), *lists]


def check(vocab: int, n: int, device: str) -> None:
    for kind in ("randn", "peaked", "ties", "probs"):
        case = _Case(kind, n, vocab, device)
        results = {}
        for variant in VARIANTS:
            for t in case.lists:
                t.zero_()
            case.launch(variant)
            results[variant] = case.result()
        base = results[VARIANTS[0]]
        for variant, got in results.items():
            same = all(torch.equal(a, b) for a, b in zip(got, base, strict=True))
            print(f"{kind} {variant}: {'same' if same else 'DIFFERENT'}", flush=True)
            assert same, (kind, variant)


def _timed(fn) -> float:
    from specbench.timing import TimingConfig, time_implementations

    config = TimingConfig(cuda_graph=True, graph_calls=100, min_samples=20, max_samples=20, l2_flush=False)
    return time_implementations({"search": fn}, "cuda", config).timings["search"].median_us


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="outputs only, small rows (CPU, interpreter)")
    args = parser.parse_args()
    if args.check:
        check(vocab=8000, n=6, device="cpu")
        return
    check(vocab=151936, n=264, device="cuda")
    for vocab in (128256, 151936):
        for kind in ("randn", "probs"):
            case = _Case(kind, 264, vocab, "cuda")
            for warps in (4, 8):
                line = []
                for variant in VARIANTS:
                    for grid in (1, 264):
                        us = _timed(lambda case=case, variant=variant, grid=grid, warps=warps:
                                    case.launch(variant, grid, warps))
                        line.append(f"{''.join(map(str, variant))}@{grid} {us:.1f}")
                print(f"V={vocab} {kind} {warps} warps: " + ", ".join(line), flush=True)


if __name__ == "__main__":
    main()
