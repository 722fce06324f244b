"""The torch backend: the readable reference of every mode, and the baseline the kernels beat.

Same signatures as ``specbench/kernels/launch.py`` (a test checks it).
"""

from __future__ import annotations

import torch

from specbench import rng

_SIMULATE_CHUNK = 1 << 16


def simulate(*, conditional_rates: torch.Tensor, num_requests: int, first_seed: int) -> torch.Tensor:
    """Drafts accepted per synthetic step, request ``r`` seeded ``first_seed + r`` at position 0.

    ``conditional_rates`` ``[K]`` float32; returns ``[num_requests]`` int32.
    """
    device = conditional_rates.device
    slots = torch.arange(conditional_rates.numel(), dtype=torch.int64, device=device)
    counts = torch.empty(num_requests, dtype=torch.int32, device=device)
    # Chunks that stay in cache: one pass over all requests at once is ~10x slower on a CPU.
    chunk = _SIMULATE_CHUNK if device.type == "cpu" else max(num_requests, 1)
    for start in range(0, num_requests, chunk):
        stop = min(start + chunk, num_requests)
        seeds = torch.arange(first_seed + start, first_seed + stop, dtype=torch.int64, device=device)
        keys = rng.stream_key(rng.seed_key(seeds)[:, None], slots[None, :], rng.ACCEPT)  # [n, K]
        u = rng.to_uniform(rng.fmix32(keys))  # word 0 of each stream
        # accept position i iff u_i < c_i; A is the length of the accepted prefix
        accepted = (u < conditional_rates[None, :]).to(torch.int32)
        counts[start:stop] = accepted.cumprod(dim=1).sum(dim=1, dtype=torch.int32)
    return counts
