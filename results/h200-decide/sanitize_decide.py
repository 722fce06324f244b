"""The calls that decide drafts before the search (a batch given top_p or min_p without top_k, no
log-probabilities) on tests/sanitize_kernels.py's hostile inputs, for the draft forms its first shard of each tool
left unfinished in this folder's sanitize/ run: draft logits (cut like the target) and draft probabilities, target
logits and probabilities, float32, two chain shapes, the split and one-program steps, top_p alone and with min_p,
each call twice (the JIT launch, then the direct one), deciding at every batch size (as the launcher did when this
ran; it now decides from 8 requests unless told). Run under compute-sanitizer from the repository root:

    compute-sanitizer --tool initcheck --error-exitcode 99 python3 results/h200-decide/sanitize_decide.py
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from sanitize_kernels import hostile_inputs, truncation_knobs

from specbench.kernels import launch
from specbench.verification import SamplingParams, verify

launch.TUNING["histogram_decide"] = 1
calls = 0
for draft in ("logits", "probs"):
    for target in ("logits", "probs"):
        for batch, num_spec, vocab in ((5, 3, 4099), (70, 4, 2053)):
            kwargs = hostile_inputs(batch, num_spec, vocab, draft, target, torch.float32, seed=batch + vocab)
            kwargs = {k: v.cuda() for k, v in kwargs.items()}
            knobs = {k: v.cuda() for k, v in truncation_knobs(batch, vocab).items()}
            temperatures = kwargs.pop("temperatures")
            for sampling in (SamplingParams(temperatures=temperatures, top_p=knobs["top_p"], min_p=knobs["min_p"]),
                             SamplingParams(temperatures=temperatures, top_p=knobs["top_p"])):
                for strategy in ("split", "sequential"):
                    with launch.strategy(strategy):
                        for _ in range(2):
                            verify(backend="triton", check_values=False, sampling=sampling,
                                   truncate_draft_logits=True, **kwargs)
                            calls += 1
        torch.cuda.synchronize()
        print(f"draft={draft} target={target}: ok", flush=True)
print(f"workload done: {calls} calls", flush=True)
