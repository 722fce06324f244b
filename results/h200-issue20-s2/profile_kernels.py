"""Per-kernel GPU time of one truncated step (torch.profiler), for the issue's top_k 50 + top_p 0.9 cases.

Run from the repository root on the GPU machine: ``python3 results/h200-issue20-s2/profile_kernels.py``.
Prints, per case, each kernel's mean time over 20 steps (µs), so the prepass and the step can be
weighed apart; the committed timings themselves come from ``specbench kernels`` (run.sh time).
"""

import torch

from specbench import verify
from specbench.acceptance import length_to_rates
from specbench.bench import Case, make_inputs

CASES = [(1, 3, 128256), (8, 3, 128256), (64, 4, 151936), (256, 7, 151936), (512, 7, 128256)]


def main() -> None:
    for batch, num_spec, vocab in CASES:
        for draft in ("logits", "probs"):
            case = Case(mode="probabilistic", batch_size=batch, num_spec_tokens=num_spec, vocab_size=vocab,
                        rates=tuple(length_to_rates(3.0, num_spec)), draft=draft, top_k=50, top_p=0.9)
            inputs = make_inputs(case, device="cuda")
            kwargs = inputs.verify_kwargs()
            for _ in range(3):
                verify(**kwargs, backend="triton")
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(20):
                    verify(**kwargs, backend="triton")
                torch.cuda.synchronize()
            rows = [(e.key, e.device_time_total / 20) for e in prof.key_averages() if e.device_time_total > 0]
            summary = ", ".join(f"{name[:40]} {us:.1f}" for name, us in sorted(rows, key=lambda r: -r[1]))
            print(f"B={batch} K={num_spec} V={vocab} draft={draft}: {summary}", flush=True)


if __name__ == "__main__":
    main()
