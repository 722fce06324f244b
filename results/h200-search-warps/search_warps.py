"""The top-k path's cutoff search (``specbench.kernels.cutoffs.top_k_from_groups``, as committed) run by one program
per row at 1, 2, 4 and 8 warps, to see whether a search launched apart from the pass, at fewer warps, would shorten
a small batch's step (issue 20: B = 1 and 8 with top_k 50 + top_p 0.9 miss their goals, and one program's search
per row is most of their time).

Run from the repository root on the GPU machine: ``python3 results/h200-search-warps/search_warps.py`` (``--check``
on the CPU under ``TRITON_INTERPRET=1``, small rows). Rows of random logits (and probabilities), top_k 50 + top_p
0.9, the group maxima computed by torch beforehand. Each warp count's summaries and kept lists are compared with
8 warps' (the launcher's prepass shape) bit for bit; then each is timed on 1 row and on 56 rows (B = 8, K = 3:
seven rows a request), V = 128256: 100 launches captured in a CUDA graph, 20 replays, the median per launch in µs.
"""

import argparse

import torch
import triton
import triton.language as tl

from specbench.kernels.cutoffs import GROUP, top_k_from_groups

WARPS = (8, 4, 2, 1)


@triton.jit
def _search_kernel(rows_ptr, group_max_ptr, out_f, out_i, group_ids_ptr, list_ids_ptr, list_v_ptr, list_w_ptr,
                   V, k, top_p, min_p, TARGET_PROBS: tl.constexpr, GROUP_BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    done, m, mass, tau, iota, length = top_k_from_groups(
        rows_ptr + r * V, V, 1.0, k, top_p, min_p, group_max_ptr + r * tl.cdiv(V, GROUP), group_ids_ptr + r * 64,
        list_ids_ptr + r * 64, list_v_ptr + r * 64, list_w_ptr + r * 64, TARGET_PROBS, GROUP_BLOCK, 64, True)
    tl.store(out_f + r * 3 + 0, m)
    tl.store(out_f + r * 3 + 1, mass)
    tl.store(out_f + r * 3 + 2, tau)
    tl.store(out_i + r * 3 + 0, iota)
    tl.store(out_i + r * 3 + 1, length)
    tl.store(out_i + r * 3 + 2, done.to(tl.int32))


class _Case:
    def __init__(self, kind: str, n: int, vocab: int, device: str) -> None:
        gen = torch.Generator(device=device).manual_seed(0)
        rows = torch.randn(n, vocab, device=device, generator=gen)
        if kind == "probs":
            rows = torch.softmax(rows * 2.0, dim=-1)
        self.kind, self.n, self.vocab, self.rows = kind, n, vocab, rows.contiguous()
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

    def launch(self, warps: int, grid: int | None = None) -> None:
        _search_kernel[(grid or self.n,)](self.rows, self.maxima, self.out_f, self.out_i, self.ids, *self.lists,
                                          self.vocab, 50, 0.9, 0.0, TARGET_PROBS=self.kind == "probs",
                                          GROUP_BLOCK=self.block, num_warps=warps)

    def result(self) -> list[torch.Tensor]:
        length = self.out_i.view(-1, 3)[:, 1]
        listed = torch.arange(64, device=length.device)[None, :] < length[:, None]
        lists = [torch.where(listed, t.view(-1, 64), torch.zeros_like(t.view(-1, 64))) for t in self.lists]
        return [self.out_f.clone(), self.out_i.clone(), *lists]


def check(vocab: int, n: int, device: str) -> None:
    for kind in ("randn", "probs"):
        case = _Case(kind, n, vocab, device)
        results = {}
        for warps in WARPS:
            for t in case.lists:
                t.zero_()
            case.launch(warps)
            results[warps] = case.result()
        for warps, got in results.items():
            same = [torch.equal(a, b) for a, b in zip(got, results[WARPS[0]], strict=True)]
            print(f"{kind} {warps} warps: {'same' if all(same) else 'DIFFERENT ' + str(same)}", flush=True)


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
    check(vocab=128256, n=56, device="cuda")
    for kind in ("randn", "probs"):
        case = _Case(kind, 56, 128256, "cuda")
        line = []
        for warps in WARPS:
            for grid in (1, 56):
                us = _timed(lambda case=case, warps=warps, grid=grid: case.launch(warps, grid))
                line.append(f"{warps}w@{grid} {us:.1f}")
        print(f"V=128256 {kind}: " + ", ".join(line), flush=True)


if __name__ == "__main__":
    main()
