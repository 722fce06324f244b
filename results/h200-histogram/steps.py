"""Each launch of the split radix and histogram paths timed alone (CUDA events around each launch), per call:
the mean over ten calls of ``truncation_summaries`` after two warm-up calls, launches of one form (the radix
path's middle digits, the histogram path's middle levels) summed together. N(0, 1) target rows, ``top_p``
0.95; with how each histogram-path row finished (``list``: among its candidates; ``closed``: every token in
play kept at the first level; ``fallback``: the one-program search). Usage: python3
results/h200-histogram/steps.py (from the repository root)."""

import collections

import torch

from specbench.kernels import histogram, launch

DEVICE = torch.device("cuda")
times = collections.defaultdict(list)
scratches = []


def timed(launcher, label):
    call = launcher.__call__

    def wrapper(grid, args, num_warps, stream, **constexprs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call(grid, args, num_warps, stream, **constexprs)
        stop.record()
        times[(label, constexprs.get("STEP"), constexprs.get("FIRST"), constexprs.get("LAST"))].append((start, stop))

    return wrapper


launch._SPLIT_HISTOGRAM = type("L", (), {"__call__": staticmethod(timed(launch._SPLIT_HISTOGRAM, "histogram"))})()
launch._SPLIT_RADIX = type("L", (), {"__call__": staticmethod(timed(launch._SPLIT_RADIX, "radix"))})()
_summarize = launch._summarize
launch._summarize = lambda *a, **k: scratches.append(_summarize(*a, **k)) or scratches[-1]

for batch, rows, vocab in ((1, 4, 128256), (64, 5, 151936), (256, 8, 151936)):
    for is_probs in (False, True):
        values = torch.randn(batch, rows, vocab, device=DEVICE)
        if is_probs:
            values = torch.softmax(values, -1)
        for label, tuning in (("radix", {"split_search": 0}), ("histogram-32", {"split_search": 1, "histogram_bins": 32}),
                              ("histogram-64", {"split_search": 1, "histogram_bins": 64})):
            launch.TUNING.update(tuning)
            search = tuning["split_search"]
            for calls in (2, 10):
                times.clear()
                scratches.clear()
                for _ in range(calls):
                    launch.truncation_summaries(target=values, target_is_probs=is_probs,
                                                temperatures=torch.ones(batch, device=DEVICE),
                                                num_draft_tokens=torch.full((batch,), rows - 1, dtype=torch.int32,
                                                                            device=DEVICE),
                                                top_k=None, top_p=torch.full((batch,), 0.95, device=DEVICE), min_p=None)
                torch.cuda.synchronize()
            steps = {key: sum(a.elapsed_time(b) for a, b in pairs) / calls * 1000 for key, pairs in times.items()}
            line = ", ".join(f"{key[1]}{'' if key[2] is None else (key[2], key[3])}: {us:.1f}" for key, us in steps.items())
            stages = ""
            if search == 1:
                state = scratches[-1].radix_state_i[:batch * rows * 2 * 8].view(batch, rows, 2, 8)[:, :, 0, 0]
                stages = {name: int((state == code).sum()) for name, code in (("list", histogram.SEARCH.value),
                          ("closed", histogram.CLOSED.value), ("fallback", histogram.FALLBACK.value))}
            print(f"B={batch} rows={rows} V={vocab} {'probs' if is_probs else 'logits'} "
                  f"{label}: total {sum(steps.values()):.1f} us; {line}; {stages}", flush=True)
