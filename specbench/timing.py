"""The timing harness: many samples per implementation, interleaved, summarised by their median.

Timers (``TIMERS``; every record names the one that produced it):

- ``host-free`` (GPU): before each call the stream is given a backlog, a GPU sleep
  (``torch.cuda._sleep``) long enough to cover the host's enqueue of everything that follows; then
  the L2 flush, the start event, the call, the end event (a sample of several placements repeats
  this for each, below). The host has queued the call before the GPU reaches it, so the GPU never
  waits for the host: the sample is the GPU's work alone, the call's kernels back to back, starting
  from a cold L2. The backlog is sized per implementation: the host's time to enqueue flush, events
  and call is measured (the largest of ``ENQUEUE_TRIES``, each behind a sleep of
  ``ENQUEUE_PROBE_US``, so a call that waits for the GPU shows it), and the backlog is
  ``BACKLOG_FACTOR`` times it plus ``BACKLOG_PAD_US``, at most ``MAX_BACKLOG_US``, turned into cycles
  with the SM clock measured by timing a sleep (``sleep_cycles_per_us``: the fastest of a few, so the
  real sleep is never shorter).
  Whether the backlog held is checked for every call: an event recorded right after the sleep is
  queried once the host has enqueued the end event. Not done yet means the GPU was still asleep
  when the whole call was in the queue, so it cannot have waited for the host; done means it may
  have waited, and the sample counts as one whose backlog ran out (``Timing.backlog_ran_out``). The
  check errs one way: it can count a sample that did not wait, never miss one that did (it takes
  work the launch calls have returned from as submitted, as CUDA on Linux does). A placement whose
  backlog ran out gets a backlog ``BACKLOG_GROWTH`` times longer from the next sample on, at most
  ``BACKLOG_GROWTHS`` times and ``MAX_BACKLOG_US`` (``Timing.backlog_us`` is the longest at the end).
  The first placement of a round follows the host's wait for the previous round, and the host can be
  slower then than any of its measured enqueues: on an H200, with forty placements, one row's samples
  ran out 21 times in 28 behind a backlog sized once (``results/h200-placement-count``); with the
  growth, 21 of 1,544 samples ran out (32 rows in four processes), at most two in any one row
  (``results/h200-forty-placements``). A call that waits for the GPU, which no backlog covers, has
  each of its sleeps grown to ``BACKLOG_GROWTH ** BACKLOG_GROWTHS`` times at most.
- ``cold-graph`` (GPU, the default since 2026-11-29; ``host-free`` before): ``host-free`` with each
  placement's call captured alone in a CUDA graph first (as the ``graph`` timer captures, below), so a
  sample replays each placement's graph behind its own backlog and
  flush, between the events: every call cold, and its launches read from the GPU's memory instead of the
  host's command buffers. On an H200 a host-free sample carried a cost of about 150 ns per launch that
  depends on the process, not on the kernels; replayed from a graph of one call, the B = 1 step spread
  about half as much across processes (max/min 1.014-1.015 against 1.024-1.026), and read
  less (B = 1: 16.0 against 17.7 µs; ``results/h200-process-offset``). In ``specbench kernels``, the issue-9
  B <= 8 group in five processes per timer agreed within 2.5% on every row with it, 3.7% with ``host-free``
  (``results/h200-cold-graph``), and two runs of the issue-9 list and of ``--quick`` within 1.9% and
  0.4%. An implementation that cannot be captured is reported (with ``--timer host-free`` named), not
  timed.
- ``events``: the flush, then the call between two CUDA events (``elapsed_time``). Host-side launch
  overhead counts where the GPU waits for it: the flush keeps the GPU busy while the host enqueues
  the call, so a launch-bound call shows the part of its overhead the flush does not hide (as with
  ``triton.testing.do_bench``), and a busy host moves the sample.
- ``graph``: each implementation is first captured as ``graph_calls`` back-to-back calls in one
  CUDA graph; a sample is one replay, divided by ``graph_calls``, bracketed as ``host-free`` does
  (backlog, flush, events), so the graph launch never counts either. The flush runs once per
  replay, so only the first captured call starts cold: a case whose bytes fit in L2 is warm here.
  An implementation that cannot be captured is reported, not timed.
- ``perf_counter`` (the CPU's only timer): ``time.perf_counter_ns`` around each call (torch CPU
  operations are synchronous); the flush overwrites a 64 MiB buffer.

Everywhere:

- L2 flush: before each timed call a 256 MiB buffer is overwritten, which evicts the inputs from L2
  (``l2_flush``, on by default), so every call starts cold as a real decoding step would.
- Warm-up: ``warmup`` calls of every implementation before the first sample.
- Interleaving: samples are taken round-robin, one per implementation per round, with the order
  rotated every round, so clock and thermal drift hit every implementation alike.
- Budget: rounds continue until ``max_samples`` rounds or ``max_ms`` of wall time for the whole
  group (whichever comes first), but never fewer than ``min_samples`` rounds.
- Placements: an implementation may be given as several callables, the same call on copies of its
  inputs at other addresses (``specbench kernels`` gives ``TimingConfig.placements`` copies, its
  ``--placements``, to GPU cases whose inputs are small, ``bench.PLACEMENT_BYTES``, each with its own set
  of the Triton kernels' scratch).
  With copies, a sample is the mean of one call on each copy, each after its own backlog and flush:
  the flush of copy ``j`` overwrites window ``j`` of the flush buffer (``TimingConfig.placements``
  windows ``FLUSH_STEP`` apart); a graph captures its calls cycling through the copies (its sample,
  one replay after one flush, always flushes window 0). Forty copies steady the rows of small cases:
  on an H200, host-free rows at B <= 8 moved by up to 5.6% between three processes with ten, and by
  at most 2.2% with forty (``results/h200-placement-count``); two runs of the issue-9 case list agreed
  within 2.1% on every row (``results/h200-forty-placements``), hence ``DEFAULT_PLACEMENTS``. Whether
  that is the copies' addresses or only more calls a sample is open: the levels 2-7% apart that
  earlier studies found by placement of the inputs, the scratch, the flush buffer and the code
  followed the order of their measurements, not the placements (``results/h200-two-states``). A cold
  small call has two levels (6-7% apart at B = 1, measured with ``host-free``; ``cold-graph``'s capture
  adds one call per placement before them), a state of the GPU that an odd number of calls
  made without a flush flips and that holds for a whole measurement: the three warm-up calls of a
  one-placement measurement flip it, so successive such measurements of one row alternate (forty
  placements make 120 warm-up calls, and which level a row finds depends on the calls before it). Behind one
  backlog for all forty copies, the samples of some rows took two levels about 5% apart (p80/p20 1.05
  against 1.01), hence a backlog before each. Some processes read every such row 1.5-2.7% higher or
  lower than others (B = 1; about half that at B = 8): about 150 ns per launch, which a tiny kernel
  and a sleep of known length show too, so it is the timer's launch path, not the kernels. It is not
  the stream, the flush buffer's pages or the code's load, and a graph timer's sample (ten
  calls a launch) does not show it (``results/h200-process-offset``).
- Summary: the median with the 20th and 80th percentiles (linear interpolation) and the count.

``peak_bandwidth_gbps`` measures the copy bandwidth the ``% of peak`` columns refer to, and
``cache_bytes`` the last-level cache a case's working set is held against.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from specbench.errors import SpecbenchError

GPU_FLUSH_BYTES = 256 << 20
CPU_FLUSH_BYTES = 64 << 20
# placements a small GPU case's samples average (TimingConfig.placements); a GPU's flush buffer holds one
# window of GPU_FLUSH_BYTES per placement, each FLUSH_STEP past the last, and the sample of placement j
# overwrites window j (module docstring, "Placements")
DEFAULT_PLACEMENTS = 40
MAX_PLACEMENTS = 100  # each takes a copy of the inputs (up to bench.PLACEMENT_BYTES) and a flush window
FLUSH_STEP = (4 << 20) + (192 << 10)
GPU_COPY_BYTES = 1 << 30
CPU_COPY_BYTES = 64 << 20
CPU_CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"

# the timers (module docstring); a GPU run picks one of the first three for samples of one call
TIMERS = ("host-free", "cold-graph", "events", "graph", "perf_counter")
EAGER_GPU_TIMERS = ("host-free", "cold-graph", "events")  # a sample of one call per placement
DEFAULT_GPU_TIMER = "cold-graph"
# the backlog before a call: this many times the host's measured enqueue time, plus this pad
# (an event query and the Python between samples), at most MAX_BACKLOG_US (a call that waits for
# the GPU, such as one reading a value back, can never be covered: its samples all run out)
BACKLOG_FACTOR = 2.0
BACKLOG_PAD_US = 20.0
MAX_BACKLOG_US = 20_000.0
# a placement whose backlog ran out gets a backlog BACKLOG_GROWTH times longer from the next sample on, at
# most BACKLOG_GROWTHS times (a call that waits for the GPU would otherwise grow it to the cap)
BACKLOG_GROWTH = 2.0
BACKLOG_GROWTHS = 2
ENQUEUE_TRIES = 5
# the sleep the enqueue time is measured behind, and the one the SM clock is measured with
ENQUEUE_PROBE_US = 2_000.0
CLOCK_PROBE_CYCLES = 2_000_000
CLOCK_PROBE_TRIES = 5


@dataclass(frozen=True)
class TimingConfig:
    """How many samples to take and how (see the module docstring).

    - ``warmup``: untimed calls of each implementation first (default 3).
    - ``min_samples`` / ``max_samples``: rounds of samples, at least / at most (10 / 100).
    - ``max_ms``: wall-time budget in milliseconds for all implementations of one group (250).
    - ``l2_flush``: overwrite a large buffer before every sample (True).
    - ``cuda_graph``: time replays of a captured CUDA graph (False; GPU only).
    - ``graph_calls``: calls captured in one graph (10).
    - ``timer``: how a GPU sample of one call is taken, ``host-free``, ``cold-graph`` or ``events``
      (``cold-graph``);
      a CPU sample is always ``perf_counter``, a graph replay always ``graph``.
    - ``placements``: copies of a small GPU case's inputs a sample averages (``DEFAULT_PLACEMENTS``, at
      most ``MAX_PLACEMENTS``; the caller makes the copies, ``bench.py``), and windows of the flush buffer;
      a graph takes ``placement_count``.
    """

    warmup: int = 3
    min_samples: int = 10
    max_samples: int = 100
    max_ms: float = 250.0
    l2_flush: bool = True
    cuda_graph: bool = False
    graph_calls: int = 10
    timer: str = DEFAULT_GPU_TIMER
    placements: int = DEFAULT_PLACEMENTS

    def __post_init__(self) -> None:
        if self.timer not in EAGER_GPU_TIMERS:
            raise SpecbenchError(f"the timer of one call must be {', '.join(EAGER_GPU_TIMERS[:-1])} or "
                                 f"{EAGER_GPU_TIMERS[-1]} (the graph timer is cuda_graph=True), got "
                                 f"{self.timer!r}")
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
        if not 1 <= self.placements <= MAX_PLACEMENTS:
            raise SpecbenchError(f"placements must be between 1 and {MAX_PLACEMENTS}, got {self.placements}")

    def placement_count(self) -> int:
        """How many placements a sample takes: ``placements``, or under a graph the largest divisor of
        ``graph_calls`` that is at most ``placements`` (a replay must call every copy equally often)."""
        if not self.cuda_graph:
            return self.placements
        return max(d for d in range(1, min(self.placements, self.graph_calls) + 1) if self.graph_calls % d == 0)


class Timing(NamedTuple):
    """Summary of one implementation's samples, in microseconds per call, and the samples themselves
    (in the order taken; ``specbench compare`` builds its confidence intervals from them)."""

    median_us: float
    p20_us: float
    p80_us: float
    samples: int
    samples_us: tuple[float, ...] = ()
    # host-free, cold-graph and graph timers: the longest backlog slept before a call (a placement's grows after its
    # backlog ran out), and in how many samples the backlog of any placement ran out
    backlog_us: float | None = None
    backlog_ran_out: int | None = None
    # how many copies of the inputs each sample averages (module docstring, "Placements")
    placements: int = 1


class Measurement(NamedTuple):
    """``timings`` of the implementations that ran; ``errors``: why others could not be timed (a
    CUDA graph would not capture them); ``failures``: those that raised while being timed (name ->
    reason); ``timer``: which timer took the samples (``TIMERS``)."""

    timings: dict[str, Timing]
    errors: dict[str, str]
    failures: dict[str, str]
    timer: str = "perf_counter"


def timer_name(device: str | torch.device, config: TimingConfig) -> str:
    """The timer ``time_implementations`` uses on ``device`` with ``config`` (``TIMERS``)."""
    if torch.device(device).type != "cuda":
        return "perf_counter"
    return "graph" if config.cuda_graph else config.timer


def backlog_us(enqueue_us: float) -> float:
    """How long the GPU sleeps before a call whose enqueue took the host ``enqueue_us``:
    ``BACKLOG_FACTOR * enqueue_us + BACKLOG_PAD_US``, at most ``MAX_BACKLOG_US``."""
    if not (math.isfinite(enqueue_us) and enqueue_us >= 0):
        raise SpecbenchError(f"an enqueue time must be a number of microseconds >= 0, got {enqueue_us}")
    return min(BACKLOG_FACTOR * enqueue_us + BACKLOG_PAD_US, MAX_BACKLOG_US)


def sleep_cycles(duration_us: float, cycles_per_us: float) -> int:
    """Clock cycles ``torch.cuda._sleep`` spins for to last ``duration_us`` at ``cycles_per_us``
    (rounded up: a sleep is never shorter than asked at that clock)."""
    if not (math.isfinite(cycles_per_us) and cycles_per_us > 0):
        raise SpecbenchError(f"the GPU clock must be a positive number of cycles per microsecond, got {cycles_per_us}")
    if not (math.isfinite(duration_us) and duration_us >= 0):
        raise SpecbenchError(f"a sleep must last 0 microseconds or more, got {duration_us}")
    return math.ceil(duration_us * cycles_per_us)


@functools.cache
def sleep_cycles_per_us(device: torch.device) -> float:
    """The SM clock as ``torch.cuda._sleep`` sees it, in cycles per microsecond, cached per process:
    the fastest of ``CLOCK_PROBE_TRIES`` sleeps of ``CLOCK_PROBE_CYCLES`` timed with CUDA events (the
    fastest, so that a sleep sized with it lasts at least as long as intended at any slower clock)."""
    stream = torch.cuda.current_stream(device)
    rates = []
    with torch.cuda.device(device):
        torch.cuda._sleep(CLOCK_PROBE_CYCLES // 10)  # the clock ramps up while the first sleep spins
        for _ in range(CLOCK_PROBE_TRIES):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            torch.cuda._sleep(CLOCK_PROBE_CYCLES)
            end.record(stream)
            end.synchronize()
            rates.append(CLOCK_PROBE_CYCLES / (start.elapsed_time(end) * 1000.0))
    return max(rates)


def cache_bytes(device: str | torch.device = "cpu") -> int | None:
    """The cache a sample's working set competes for: a GPU's L2, a CPU's last-level cache (as Linux
    lists it under ``CPU_CACHE_DIR``); None when unknown."""
    dev = torch.device(device)
    if dev.type == "cuda":
        size = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0)
        return int(size) or None
    levels = {}
    for index in Path(CPU_CACHE_DIR).glob("index*"):
        try:
            level, size = int((index / "level").read_text()), (index / "size").read_text().strip()
            levels[level] = int(size[:-1]) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[size[-1]]
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return levels[max(levels)] if levels else None


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
def _flush_buffer(device: torch.device, windows: int = DEFAULT_PLACEMENTS) -> torch.Tensor:
    size = GPU_FLUSH_BYTES + (windows - 1) * FLUSH_STEP if device.type == "cuda" else CPU_FLUSH_BYTES
    return torch.zeros(size // 4, dtype=torch.int32, device=device)  # written: gpu_timer_check's read flush reads it


def _evict(window: torch.Tensor) -> None:
    """The L2 flush: overwrite ``window``. The L2 is left full of dirty lines, which the timed call writes
    back as its reads evict them (as after a model's forward pass); ``triton.testing.do_bench`` and
    nvbench flush the same way. Reading the window instead leaves clean lines; on an H200 that did not
    bring processes together (``results/h200-flush-kind``)."""
    window.zero_()


def _flush_windows(buffer: torch.Tensor, device: torch.device, windows: int = DEFAULT_PLACEMENTS) -> list[torch.Tensor]:
    # the views a sample overwrites, one per placement (the CPU's buffer is one window)
    if device.type != "cuda":
        return [buffer]
    return [buffer[j * FLUSH_STEP // 4:(j * FLUSH_STEP + GPU_FLUSH_BYTES) // 4] for j in range(windows)]


@functools.cache
def _capture_stream(device: torch.device) -> torch.cuda.Stream:
    # one stream per device for every capture: what a launcher keeps per stream is made once, not once for
    # each of the streams torch.cuda.Stream() hands out in turn
    return torch.cuda.Stream(device)


def _capture(fns: Sequence[Callable[[], object]], num_calls: int, device: torch.device) -> Callable[[], None]:
    # Warm up on a side stream, then capture on that same stream: lazy initialisation and compilation
    # must not be captured, and what a launcher keeps per stream (the Triton launcher's scratch and
    # arrival counters) must already exist for the capturing stream. Captured on torch's own capture
    # stream instead, the first graph of a process to need them recorded their allocation's memset in
    # every replay: about 1 µs a call, so a B=1 row read 6.9 µs or 5.9 µs by what ran before it.
    side = _capture_stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for fn in fns:
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        for call in range(num_calls):
            fns[call % len(fns)]()  # the placements in turn
    return graph.replay


class _GpuSample(NamedTuple):
    events: list[tuple[torch.cuda.Event, torch.cuda.Event]]  # each placement's start and end
    ran_out: list[bool] | None  # each placement's backlog check; None: no backlog was asked for
    enqueue_ns: int  # the host's time from after the first sleep to after the first end event


class _Sampler:
    """Takes one sample of a call on each of its placements; ``elapsed_us`` turns a sample into
    microseconds, the mean over its placements."""

    def __init__(self, device: torch.device, flush: bool, windows: int = DEFAULT_PLACEMENTS):
        self.device = device
        self.flush = _flush_windows(_flush_buffer(device, windows), device, windows) if flush else None

    def sample(self, fns: Sequence[Callable[[], object]], backlog_cycles: Sequence[int] | None = None):
        # placement j: its own backlog (backlog_cycles[j]), then it overwrites flush window j (module
        # docstring, "Placements")
        if self.device.type != "cuda":
            times = []
            for fn in fns:
                if self.flush is not None:
                    self.flush[0].zero_()
                start_ns = time.perf_counter_ns()
                fn()
                times.append(time.perf_counter_ns() - start_ns)
            return times
        # record on this device's stream: the default would be the current device's, which
        # times nothing when another GPU (``env``'s cuda:1) does the work
        stream = torch.cuda.current_stream(self.device)
        events, ran_out, enqueue_ns = [], None if backlog_cycles is None else [], 0
        for placement, fn in enumerate(fns):
            woke = None
            if backlog_cycles is not None:
                with torch.cuda.device(self.device):
                    torch.cuda._sleep(backlog_cycles[placement])
                woke = torch.cuda.Event()
                woke.record(stream)
            enqueue_start = time.perf_counter_ns()
            if self.flush is not None:
                _evict(self.flush[placement % len(self.flush)])
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            fn()
            end.record(stream)
            if placement == 0:
                enqueue_ns = time.perf_counter_ns() - enqueue_start
            events.append((start, end))
            if woke is not None:
                # still asleep now: the placement was queued before the GPU reached it (module docstring)
                ran_out.append(woke.query())
        return _GpuSample(events, ran_out, enqueue_ns)

    def enqueue_us(self, fn: Callable[[], object], cycles_per_us: float, tries: int = ENQUEUE_TRIES) -> float:
        """The host's time to enqueue one call of ``fn`` with its flush and events, the largest of
        ``tries``, each behind a sleep of ``ENQUEUE_PROBE_US`` (so a call that waits for the GPU shows it)."""
        probe = sleep_cycles(ENQUEUE_PROBE_US, cycles_per_us)
        slowest = 0
        for _ in range(tries):
            self.wait()
            slowest = max(slowest, self.sample([fn], [probe]).enqueue_ns)
        self.wait()
        return slowest / 1000.0

    def wait(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def elapsed_us(self, sample) -> float:
        if self.device.type == "cuda":
            return sum(start.elapsed_time(end) for start, end in sample.events) * 1000.0 / len(sample.events)
        return sum(sample) / len(sample) / 1000.0


def time_implementations(
    calls: dict[str, Callable[[], object] | Sequence[Callable[[], object]]],
    device: str | torch.device = "cpu",
    config: TimingConfig | None = None,
) -> Measurement:
    """Time zero-argument callables side by side on ``device`` (see the module docstring).

    Every callable must do the same work each time it is called (inputs prepared beforehand). A name
    may map to a sequence of callables: the same call on copies of its inputs (``Placements``); each
    sample then averages one call of each (a graph cycles through them: give a number of copies that
    divides ``graph_calls`` so each is replayed equally often).
    Returns a ``Measurement``: ``Timing`` per name, a reason per name a CUDA graph could not
    capture, a reason per name that raised while being timed (the others go on; running out
    of memory propagates), and the timer (``timer_name``).
    """
    config = config or TimingConfig()
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if config.cuda_graph and device.type != "cuda":
        raise SpecbenchError(f"CUDA graphs need a CUDA device, got {device}")

    copies = {name: list(fn) if isinstance(fn, Sequence) else [fn] for name, fn in calls.items()}
    if any(not fns for fns in copies.values()):
        raise SpecbenchError("an implementation given as a sequence of callables needs at least one")
    runs: dict[str, list[Callable[[], object]]] = {}
    errors: dict[str, str] = {}
    timer = timer_name(device, config)
    for name, fns in copies.items():
        if timer not in ("graph", "cold-graph"):
            runs[name] = fns
            continue
        try:  # the graph timer: one graph of graph_calls calls; cold-graph: each placement's call alone
            runs[name] = ([_capture(fns, config.graph_calls, device)] if config.cuda_graph
                          else [_capture([fn], 1, device) for fn in fns])
        except Exception as exc:  # any capture failure but running out of memory is reported, not raised
            if is_out_of_memory(exc):
                raise  # the caller's to handle, as when a call runs out of memory while being timed
            torch.cuda.synchronize(device)
            hint = " (--timer host-free times it outside a graph)" if timer == "cold-graph" else ""
            errors[name] = f"cannot be captured in a CUDA graph{hint}: {type(exc).__name__}: {exc}".strip()
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

    def each(fns: list[Callable[[], object]]) -> None:
        for fn in fns:
            fn()

    sampler = _Sampler(device, config.l2_flush, config.placements)
    for _ in range(config.warmup):
        for name in [n for n in runs if n not in failures]:
            attempt(name, functools.partial(each, runs[name]))
    sampler.wait()
    backlogs: dict[str, list[float]] = {}  # per placement, µs
    growths: dict[str, list[int]] = {}
    if timer in ("host-free", "cold-graph", "graph"):
        rate = sleep_cycles_per_us(device)
        for name in [n for n in runs if n not in failures]:
            enqueue = attempt(name, functools.partial(sampler.enqueue_us, runs[name][0], rate))
            if enqueue is not None:
                backlogs[name] = [backlog_us(enqueue)] * len(runs[name])
                growths[name] = [0] * len(runs[name])

    def grow(name: str, ran_out: list[bool]) -> None:
        # a placement whose backlog ran out gets a longer one from the next sample on (module docstring)
        for placement in [j for j, out in enumerate(ran_out) if out]:
            if growths[name][placement] < BACKLOG_GROWTHS and backlogs[name][placement] < MAX_BACKLOG_US:
                growths[name][placement] += 1
                backlogs[name][placement] = min(BACKLOG_GROWTH * backlogs[name][placement], MAX_BACKLOG_US)

    def cycles(name: str) -> list[int] | None:
        # each placement's backlog in the SM clock's cycles (None: no backlog, the events timer)
        return [sleep_cycles(us, rate) for us in backlogs[name]] if name in backlogs else None

    names = [name for name in runs if name not in failures]
    raw: dict[str, list] = {name: [] for name in names}
    rounds = 0
    started = time.perf_counter()
    while names:
        shift = rounds % len(names)
        for name in names[shift:] + names[:shift]:
            sample = attempt(name, lambda name=name: sampler.sample(runs[name], cycles(name)))
            if name in failures:
                names.remove(name)
                del raw[name]
                continue
            raw[name].append(sample)
            if name in backlogs:
                grow(name, sample.ran_out)
        sampler.wait()
        rounds += 1
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        if rounds >= config.min_samples and (rounds >= config.max_samples or elapsed_ms >= config.max_ms):
            break

    timings = {}
    for name, samples in raw.items():  # a sample: one call on each placement, averaged
        timings[name] = summarize([sampler.elapsed_us(sample) / calls_per_sample for sample in samples])._replace(
            placements=len(copies[name]))
        if name in backlogs:
            ran_out = sum(any(sample.ran_out) for sample in samples)
            timings[name] = timings[name]._replace(backlog_us=max(backlogs[name]), backlog_ran_out=ran_out)
    return Measurement(timings, errors, failures, timer)


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
        samples.append(sampler.sample([lambda: dst.copy_(src)]))
        sampler.wait()
    seconds = summarize([sampler.elapsed_us(s) for s in samples]).median_us * 1e-6
    return 2 * size / seconds / 1e9
