"""`python3 -m specbench` with every flush window its own 256 MiB allocation (other physical pages), instead of
windows FLUSH_STEP apart in one buffer: the `pages` variant of `process-offset.sh`, not kept in specbench."""

import functools
import runpy

import torch

from specbench import timing


@functools.cache
def _own_windows(device: torch.device, windows: int) -> tuple[torch.Tensor, ...]:
    return tuple(torch.zeros(timing.GPU_FLUSH_BYTES // 4, dtype=torch.int32, device=device) for _ in range(windows))


def _windows(buffer: torch.Tensor, device: torch.device, windows: int = timing.DEFAULT_PLACEMENTS):
    return [buffer] if device.type != "cuda" else list(_own_windows(device, windows))


timing._flush_windows = _windows
runpy.run_module("specbench", run_name="__main__")
