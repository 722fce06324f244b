"""Launch shapes of the truncation kernels side by side (CUDA graph, µs), to choose the committed ones.

Run from the repository root on the GPU machine: ``python3 results/h200-issue20-s2/variants.py``.
For each (tokens per chunk, warps, bits a step of the top-k path's radix searches) and each of the
issue's shapes (top_k 50 + top_p 0.9, L = 3, target logits, draft logits and draft probabilities),
the step's tokens are first checked equal to the torch reference's, then 10 steps are captured in a
CUDA graph and replayed 30 times after an L2 flush; the median per step is printed. The untruncated
step on the same inputs is the reference line. The committed timings come from ``specbench kernels``.
"""

import statistics

import torch

from specbench import verify
from specbench.acceptance import length_to_rates
from specbench.bench import Case, make_inputs
from specbench.kernels import launch

CASES = [(1, 3, 128256), (8, 3, 128256), (64, 4, 151936), (256, 7, 151936), (512, 7, 128256)]
SHAPES = [(1024, 4, 1), (1024, 4, 2), (4096, 8, 2)]


def graph_us(fn) -> float:
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(3):
        fn()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(10):
            fn()
    samples = []
    for _ in range(30):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / 10)
    return statistics.median(samples)


def main() -> None:
    for batch, num_spec, vocab in CASES:
        for draft in ("logits",):
            case = Case(mode="probabilistic", batch_size=batch, num_spec_tokens=num_spec, vocab_size=vocab,
                        rates=tuple(length_to_rates(3.0, num_spec)), draft=draft, top_k=50, top_p=0.9)
            kwargs = make_inputs(case, device="cuda").verify_kwargs()
            want = verify(**kwargs, backend="torch")
            plain = {**kwargs, "sampling": kwargs["sampling"]._replace(top_k=None, top_p=None)}
            line = [f"B={batch} K={num_spec} V={vocab} draft={draft}: untruncated {graph_us(lambda plain=plain: verify(**plain, backend='triton')):.1f}"]
            for block, warps, bits in SHAPES:
                launch.TRUNCATION_SHAPES = {"prepass": (block, warps), "fused": (block, warps)}
                launch.SEARCH_BITS = {"prepass": bits, "fused": bits}
                got = verify(**kwargs, backend="triton")
                same = torch.equal(got.output_token_ids, want.output_token_ids)
                us = graph_us(lambda kwargs=kwargs: verify(**kwargs, backend="triton"))
                line.append(f"{block}x{warps}w/{bits}b {us:.1f}{'' if same else ' MISMATCH'}")
            print(", ".join(line), flush=True)


if __name__ == "__main__":
    main()
