"""The timing harness: many samples per implementation, interleaved, summarised by their median.

How a number is taken:

- GPU: each sample is one call between two CUDA events (``elapsed_time``). Host-side launch
  overhead counts where the GPU waits for it: the flush below keeps the GPU busy while the host
  enqueues the call, so a launch-bound call shows the part of its overhead the flush does not
  hide (as with ``triton.testing.do_bench``); CUDA graphs remove it. Before each sample a 256 MiB
  buffer is overwritten, which evicts the inputs from L2 (``l2_flush``, on by default), so every
  sample starts cold as a real decoding step would. With ``cuda_graph`` each implementation is
  first captured as ``graph_calls`` back-to-back calls in one CUDA graph; a sample is one replay,
  divided by ``graph_calls`` (L2 is flushed before each replay, so only the first captured call
  starts cold). An implementation that cannot be captured is reported, not timed.
- CPU: ``time.perf_counter_ns`` around each call (torch CPU operations are synchronous); the
  flush overwrites a 64 MiB buffer.
- Warm-up: ``warmup`` calls of every implementation before the first sample.
- Interleaving: samples are taken round-robin, one per implementation per round, with the order
  rotated every round, so clock and thermal drift hit every implementation alike.
- Budget: rounds continue until ``max_samples`` rounds or ``max_ms`` of wall time for the whole
  group (whichever comes first), but never fewer than ``min_samples`` rounds.
- Summary: the median with the 20th and 80th percentiles (linear interpolation) and the count.

``peak_bandwidth_gbps`` measures the copy bandwidth the ``% of peak`` columns refer to.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from specbench.errors import SpecbenchError

GPU_FLUSH_BYTES = 256 << 20
CPU_FLUSH_BYTES = 64 << 20
GPU_COPY_BYTES = 1 << 30
CPU_COPY_BYTES = 64 << 20


@dataclass(frozen=True)
class TimingConfig:
    """How many samples to take and how (see the module docstring).

    - ``warmup``: untimed calls of each implementation first (default 3).
    - ``min_samples`` / ``max_samples``: rounds of samples, at least / at most (10 / 100).
    - ``max_ms``: wall-time budget in milliseconds for all implementations of one group (250).
    - ``l2_flush``: overwrite a large buffer before every sample (True).
    - ``cuda_graph``: time replays of a captured CUDA graph (False; GPU only).
    - ``graph_calls``: calls captured in one graph (10).
    """

    warmup: int = 3
    min_samples: int = 10
    max_samples: int = 100
    max_ms: float = 250.0
    l2_flush: bool = True
    cuda_graph: bool = False
    graph_calls: int = 10

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise SpecbenchError(f"warm-up calls must be 0 or more, got {self.warmup}")
        if self.min_samples < 1:
            raise SpecbenchError(f"minimum samples must be at least 1, got {self.min_samples}")
        if self.max_samples < self.min_samples:
            raise SpecbenchError(
                f"maximum samples must be at least the minimum ({self.min_samples}), got {self.max_samples}"
            )
        if not self.max_ms >= 0:
            raise SpecbenchError(f"time budget must be 0 ms or more, got {self.max_ms}")
        if self.graph_calls < 1:
            raise SpecbenchError(f"calls per CUDA graph must be at least 1, got {self.graph_calls}")


class Timing(NamedTuple):
    """Summary of one implementation's samples, in microseconds per call, and the samples themselves
    (in the order taken; ``specbench compare`` builds its confidence intervals from them)."""

    median_us: float
    p20_us: float
    p80_us: float
    samples: int
    samples_us: tuple[float, ...] = ()


class Measurement(NamedTuple):
    """``timings`` of the implementations that ran; ``errors``: why others could not be timed (a
    CUDA graph would not capture them); ``failures``: those that raised while being timed (name ->
    reason)."""

    timings: dict[str, Timing]
    errors: dict[str, str]
    failures: dict[str, str]


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the device (or the host) ran out of memory."""
    text = str(exc).lower()
    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
    )


def summarize(samples_us: Sequence[float]) -> Timing:
    """Median, 20th and 80th percentiles (linear interpolation) and count of ``samples_us``."""
    if len(samples_us) == 0:
        raise SpecbenchError("cannot summarise zero timing samples")
    p20, median, p80 = np.percentile(np.asarray(samples_us, dtype=np.float64), [20, 50, 80])
    return Timing(float(median), float(p20), float(p80), len(samples_us), tuple(float(x) for x in samples_us))


@functools.cache
def _flush_buffer(device: torch.device) -> torch.Tensor:
    size = GPU_FLUSH_BYTES if device.type == "cuda" else CPU_FLUSH_BYTES
    return torch.empty(size // 4, dtype=torch.int32, device=device)


def _capture(fn: Callable[[], object], num_calls: int, device: torch.device) -> Callable[[], None]:
    # Warm up on a side stream first (lazy initialisation and compilation must not be captured).
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(num_calls):
            fn()
    return graph.replay


class _Sampler:
    """Takes one sample of a call; ``elapsed_us`` turns the samples into microseconds."""

    def __init__(self, device: torch.device, flush: bool):
        self.device = device
        self.flush = _flush_buffer(device) if flush else None

    def sample(self, fn: Callable[[], object]):
        if self.flush is not None:
            self.flush.zero_()
        if self.device.type == "cuda":
            # record on this device's stream: the default would be the current device's, which
            # times nothing when another GPU (``env``'s cuda:1) does the work
            stream = torch.cuda.current_stream(self.device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            fn()
            end.record(stream)
            return start, end
        start_ns = time.perf_counter_ns()
        fn()
        return time.perf_counter_ns() - start_ns

    def wait(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def elapsed_us(self, sample) -> float:
        if self.device.type == "cuda":
            start, end = sample
            return start.elapsed_time(end) * 1000.0
        return sample / 1000.0


def time_implementations(
    calls: dict[str, Callable[[], object]],
    device: str | torch.device = "cpu",
    config: TimingConfig | None = None,
) -> Measurement:
    """Time zero-argument callables side by side on ``device`` (see the module docstring).

    Every callable must do the same work each time it is called (inputs prepared beforehand).
    Returns a ``Measurement``: ``Timing`` per name, a reason per name a CUDA graph could not
    capture, and a reason per name that raised while being timed (the others go on; running out
    of memory propagates).
    """
    config = config or TimingConfig()
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if config.cuda_graph and device.type != "cuda":
        raise SpecbenchError(f"CUDA graphs need a CUDA device, got {device}")

    runs: dict[str, Callable[[], object]] = {}
    errors: dict[str, str] = {}
    for name, fn in calls.items():
        if not config.cuda_graph:
            runs[name] = fn
            continue
        try:
            runs[name] = _capture(fn, config.graph_calls, device)
        except Exception as exc:  # noqa: BLE001  (any capture failure is reported, not raised)
            torch.cuda.synchronize(device)
            errors[name] = f"cannot be captured in a CUDA graph: {type(exc).__name__}: {exc}".strip()
    calls_per_sample = config.graph_calls if config.cuda_graph else 1
    failures: dict[str, str] = {}

    def attempt(name: str, action: Callable[[], object]) -> object:
        # one implementation that raises fails alone; out of memory is the caller's to handle
        try:
            return action()
        except Exception as exc:
            if is_out_of_memory(exc):
                raise
            failures[name] = f"raised {type(exc).__name__} while being timed: {exc}".strip()
            return None

    sampler = _Sampler(device, config.l2_flush)
    for _ in range(config.warmup):
        for name in [n for n in runs if n not in failures]:
            attempt(name, runs[name])
    sampler.wait()

    names = [name for name in runs if name not in failures]
    raw: dict[str, list] = {name: [] for name in names}
    rounds = 0
    started = time.perf_counter()
    while names:
        shift = rounds % len(names)
        for name in names[shift:] + names[:shift]:
            sample = attempt(name, functools.partial(sampler.sample, runs[name]))
            if name in failures:
                names.remove(name)
                del raw[name]
            else:
                raw[name].append(sample)
        sampler.wait()
        rounds += 1
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        if rounds >= config.min_samples and (rounds >= config.max_samples or elapsed_ms >= config.max_ms):
            break

    timings = {
        name: summarize([sampler.elapsed_us(s) / calls_per_sample for s in samples]) for name, samples in raw.items()
    }
    return Measurement(timings, errors, failures)


@functools.cache
def peak_bandwidth_gbps(device: str = "cpu", nbytes: int | None = None, repeats: int = 10) -> float | None:
    """Measured copy bandwidth of ``device`` in GB/s (bytes read + bytes written), cached per process.

    A GPU copies 1 GiB device-to-device (timed with CUDA events), a CPU 64 MiB in memory
    (``perf_counter_ns``); ``nbytes`` overrides the size. The median of ``repeats`` copies
    after one warm-up copy. ``None`` when the buffers do not fit in memory.
    """
    dev = torch.device(device)
    size = nbytes or (GPU_COPY_BYTES if dev.type == "cuda" else CPU_COPY_BYTES)
    try:
        src = torch.ones(size, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
    except RuntimeError:  # torch.cuda.OutOfMemoryError too; a CPU says "can't allocate memory"
        return None
    sampler = _Sampler(dev, flush=False)
    dst.copy_(src)
    sampler.wait()
    samples = []
    for _ in range(repeats):
        samples.append(sampler.sample(lambda: dst.copy_(src)))
        sampler.wait()
    seconds = summarize([sampler.elapsed_us(s) for s in samples]).median_us * 1e-6
    return 2 * size / seconds / 1e9
