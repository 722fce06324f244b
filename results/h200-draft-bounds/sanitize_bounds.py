"""The calls that decide drafts from one pass's bounds before the search (draft_bounds.py: a batch given top_p
without top_k, no log-probabilities), forced at every batch size, on tests/sanitize_kernels.py's hostile inputs:
one draft form (the argument: none, logits cut like the target, or probs), target logits and probabilities,
float32, two chain shapes, top_p alone and with min_p (requests with min_p decide nothing, beside requests that
do); the bounds pass at once with the split and one-program steps, and in rounds (one per slot) with the split
step; each call twice (the JIT launch, then the direct one). Run under compute-sanitizer from the repository
root:

    compute-sanitizer --tool initcheck --error-exitcode 99 python3 results/h200-draft-bounds/sanitize_bounds.py logits
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from sanitize_kernels import hostile_inputs, truncation_knobs

from specbench.kernels import launch
from specbench.verification import SamplingParams, verify

draft = sys.argv[1]
launch.TUNING["split_search"] = 1
launch.TUNING["histogram_decide"] = 2
calls = 0
for target in ("logits", "probs"):
    for dtype in (torch.float32,):
        for batch, num_spec, vocab in ((5, 3, 4099), (70, 4, 2053)):
            kwargs = hostile_inputs(batch, num_spec, vocab, draft, target, dtype, seed=batch + vocab)
            kwargs = {k: v.cuda() for k, v in kwargs.items()}
            knobs = {k: v.cuda() for k, v in truncation_knobs(batch, vocab).items()}
            temperatures = kwargs.pop("temperatures")
            for sampling in (SamplingParams(temperatures=temperatures, top_p=knobs["top_p"]),
                             SamplingParams(temperatures=temperatures, top_p=knobs["top_p"], min_p=knobs["min_p"])):
                for strategy, rounds in (("split", 0), ("sequential", 0), ("split", 1)):
                    launch.TUNING["bounds_rounds"] = rounds
                    with launch.strategy(strategy):
                        for _ in range(2):
                            verify(backend="triton", check_values=False, sampling=sampling,
                                   truncate_draft_logits=True, **kwargs)
                            calls += 1
        torch.cuda.synchronize()
        print(f"draft={draft} target={target} {str(dtype).removeprefix('torch.')}: ok", flush=True)
print(f"workload done: {calls} calls", flush=True)
