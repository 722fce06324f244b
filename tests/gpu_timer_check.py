"""On a GPU: does the host-free timer do what specbench/timing.py says, and why are `events` rows bimodal?

    python tests/gpu_timer_check.py            # about a minute on an H100 or H200; prints three tables
    python tests/gpu_timer_check.py spread RUN_A RUN_B [RUN_C ...]   # the issue's goal, from kernels runs
    python tests/gpu_timer_check.py placement   # one row's host-free median across copies of its inputs
    python tests/gpu_timer_check.py scratch     # ... across placements of its scratch, then of the flush buffer
    python tests/gpu_timer_check.py flush-kind  # ... across placements of the flush buffer and of the inputs,
                                                # the L2 flushed by overwriting a buffer, then by reading it
    python tests/gpu_timer_check.py code        # ... across loads of the Triton kernels' code (inputs fixed)
    python tests/gpu_timer_check.py outputs     # ... across placements of its outputs (inputs fixed)
    python tests/gpu_timer_check.py backlog     # ... across lengths of the backlog slept before each call
    python tests/gpu_timer_check.py toggle      # ... measured again and again, several ways
    python tests/gpu_timer_check.py code --warmup 2   # a study with 2 warm-up calls a measurement (default 3)
    python tests/gpu_timer_check.py process [--stream side]   # one process's medians of known work and the step,
                                                # as a JSON line (run it in several processes)
    python tests/gpu_timer_check.py offsets FILE  # each process's offset from the others, from those lines

1. Known work. Each workload is timed with the three GPU timers (``time_implementations``):
   a sleep of 50 µs (a kernel of known length: ``host-free`` must read 50 µs, and ``events`` too);
   200 launches of a tiny kernel (launch-bound: ``events`` reads the host's launch rate, ``host-free``
   the GPU's back-to-back rate, ``graph`` less again); a call that reads a value back (no backlog
   can cover it: every host-free sample must count as run out). Columns: median, p20-p80, p80/p20,
   the backlog and how many samples ran out.
2. The real step at B = 1 and 8 (Triton, K = 3, V = 128256, draft logits, L = 3), 200 samples each
   with the ``events`` timer, each sample preceded by a probe: a sleep of fixed cycles between two
   events (the SM clock at that moment, cycles per µs) and the gap between the probe's end and the
   sample's start (the flush, plus any wait for the host). The samples are split at the midpoint of
   their p10 and p90: if the slow ones ran at a lower clock, the cause is the clock; if their gap is
   longer or the host's enqueue time is, the cause is the host.
3. The same step with ``host-free``: p80/p20 and the ran-out count (the goal: p80/p20 <= 1.10).

``spread`` reads two or more ``specbench kernels`` runs of one commit and prints, per row, the
largest p80/p20 of its runs and the largest ratio between its medians (the issue's goal: every
row p80/p20 <= 1.10 and runs within 3%).
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from specbench import bench, timing
from specbench.compare_inputs import by_key, kernels_label
from specbench.implementations.registry import resolve_all
from specbench.results import read_results
from specbench.scenarios import make_profile


def _row(name: str, timer: str, t: timing.Timing) -> str:
    ran_out = "-" if t.backlog_ran_out is None else f"{t.backlog_ran_out}/{t.samples}"
    backlog = "-" if t.backlog_us is None else f"{t.backlog_us:.0f}"
    return (f"{name:<28} {timer:<10} {t.median_us:>10.2f} {t.p20_us:>9.2f}-{t.p80_us:<9.2f} "
            f"{t.p80_us / t.p20_us:>6.3f} {backlog:>9} {ran_out:>9}")


def _header() -> str:
    return f"{'workload':<28} {'timer':<10} {'median µs':>10} {'p20-p80 µs':>19} {'p80/p20':>7} {'backlog':>9} {'ran out':>9}"


def known_work(device: torch.device) -> None:
    rate = timing.sleep_cycles_per_us(device)
    print(f"SM clock seen by torch.cuda._sleep: {rate:.0f} cycles/µs (the fastest of {timing.CLOCK_PROBE_TRIES})")
    tiny = torch.zeros(16, device=device)
    big = torch.randn(1 << 20, device=device)

    def launches():
        for _ in range(200):
            tiny.add_(1.0)

    workloads = {"sleep 50 µs": lambda: torch.cuda._sleep(int(50 * rate)), "200 tiny launches": launches,
                 "read back (.item())": lambda: big.sum().item()}
    print(_header())
    for name, fn in workloads.items():
        for timer, graph in (("events", False), ("host-free", False), ("graph", True)):
            if graph and name.startswith("read back"):
                continue  # a read-back cannot be captured
            config = timing.TimingConfig(warmup=3, min_samples=50, max_samples=50, timer=timer if not graph else
                                         "host-free", cuda_graph=graph)
            measured = timing.time_implementations({name: fn}, device, config)
            print(_row(name, measured.timer, measured.timings[name]))


def _step(batch: int, device: torch.device, draft: str = "logits"):
    case = bench.Case("probabilistic", batch, 3, 128256, "float32", draft, make_profile(3, acceptance_length=3.0).rates, "3")
    inputs = bench.make_inputs(case, device)
    (triton,) = resolve_all(["triton"])
    return triton.bind(inputs.verify_kwargs())


def clock_study(device: torch.device, samples: int = 200) -> None:
    rate = timing.sleep_cycles_per_us(device)
    probe_cycles = int(20 * rate)  # 20 µs at the fastest clock
    flush = torch.empty(timing.GPU_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
    stream = torch.cuda.current_stream(device)
    print(f"\n`events` samples with a clock probe before each ({samples} samples, Triton, K=3, V=128256, draft logits)")
    print(f"{'B':>3} {'half':<5} {'n':>4} {'median µs':>10} {'clock cyc/µs':>13} {'gap µs':>8} {'host enqueue µs':>16}")
    for batch in (1, 8):
        call = _step(batch, device)
        for _ in range(5):
            call()
        torch.cuda.synchronize(device)
        rows = []
        for _ in range(samples):
            events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            events[0].record(stream)
            torch.cuda._sleep(probe_cycles)
            events[1].record(stream)
            flush.zero_()
            begun = time.perf_counter_ns()
            events[2].record(stream)
            call()
            events[3].record(stream)
            enqueue = (time.perf_counter_ns() - begun) / 1000
            torch.cuda.synchronize(device)
            rows.append((events[2].elapsed_time(events[3]) * 1000, probe_cycles / (events[0].elapsed_time(events[1]) * 1000),
                         events[1].elapsed_time(events[2]) * 1000, enqueue))
        times = sorted(r[0] for r in rows)
        split = (times[len(times) // 10] + times[9 * len(times) // 10]) / 2
        for half, chosen in (("fast", [r for r in rows if r[0] <= split]), ("slow", [r for r in rows if r[0] > split])):
            if chosen:
                med = [statistics.median(r[i] for r in chosen) for i in range(4)]
                print(f"{batch:>3} {half:<5} {len(chosen):>4} {med[0]:>10.1f} {med[1]:>13.0f} {med[2]:>8.1f} {med[3]:>16.1f}")


def host_free_step(device: torch.device) -> None:
    print("\nThe same step, host-free and events, 200 samples")
    print(_header())
    for batch in (1, 8):
        call = _step(batch, device)
        for timer in ("events", "host-free"):
            config = timing.TimingConfig(warmup=3, min_samples=200, max_samples=200, max_ms=1e9, timer=timer)
            measured = timing.time_implementations({"step": call}, device, config)
            print(_row(f"triton B={batch}", measured.timer, measured.timings["step"]))


# warm-up calls before each measurement of the placement studies (``--warmup N``): an odd number flips the
# GPU's two-level state between measurements, an even number leaves it (``toggle``)
STUDY_WARMUP = [3]


def _study_config(samples: int = 100) -> timing.TimingConfig:
    return timing.TimingConfig(warmup=STUDY_WARMUP[0], min_samples=samples, max_samples=samples, max_ms=1e9,
                               timer="host-free")


def _medians_line(label: str, medians: list[list[float]], width: int = 34) -> str:
    """One placement study row: each placement's medians, round by round, and the largest over the smallest."""
    cells = "  ".join("/".join(f"{row[c]:.2f}" for row in medians) for c in range(len(medians[0])))
    spread_ = max(max(row) for row in medians) / min(min(row) for row in medians)
    return f"{label:<{width}} {cells}   max/min {spread_:.3f}"


def placement(device: torch.device, copies: int = 6, rounds: int = 2) -> None:
    """Does a row's host-free median depend on where its inputs sit in memory? The same inputs are made
    ``copies`` times (the same values at other addresses, all kept alive) and each copy is timed in
    turn, ``rounds`` times over: medians that differ between copies but repeat for one copy point at
    the inputs' placement (a per-process effect a second run would see as a shifted row)."""
    print(f"\nhost-free medians (µs) of {copies} copies of the same inputs, {rounds} rounds, 100 samples each")
    config = _study_config()
    for draft in ("none", "logits"):
        for batch in (1, 8):
            calls = [_step(batch, device, draft) for _ in range(copies)]
            medians = [[timing.time_implementations({"step": call}, device, config).timings["step"].median_us
                        for call in calls] for _ in range(rounds)]
            print(_medians_line(f"B={batch} draft={draft}", medians, 17))


def scratch(device: torch.device, places: int = 6, rounds: int = 2) -> None:
    """Does a row's host-free median depend on where the kernels' scratch and arrival counters sit, or the
    L2 flush buffer, with the inputs fixed? Each placement is a fresh scratch set (``launch.scratch_set``)
    or a fresh flush buffer, allocated behind a pad of a different size, kept alive; medians that differ
    between placements but repeat for one point at that buffer (one placement per process, unless the
    timer moves it as it moves the inputs)."""
    config = _study_config()
    pads = []

    def report(label: str, medians: list[list[float]]) -> None:
        print(_medians_line(label, medians))

    print(f"\nhost-free medians (µs), {places} placements, {rounds} rounds, 100 samples each; inputs fixed")
    for draft in ("none", "logits"):
        for batch in (1, 8):
            call = _step(batch, device, draft)
            call()  # the first call loads the Triton launcher, whose scratch sets the placements take
            calls = []
            for place in range(places):
                pads.append(torch.empty((place + 1) * (3 << 20), dtype=torch.uint8, device=device))
                calls.append(bench._in_scratch_set(call, 1000 + 10 * batch + place + (100 if draft == "logits" else 0)))
                calls[-1]()  # the set's scratch is allocated here, behind the pad
            medians = [[timing.time_implementations({"step": c}, device, config).timings["step"].median_us
                        for c in calls] for _ in range(rounds)]
            report(f"scratch B={batch} draft={draft}", medians)
            flushes = []
            for place in range(places):
                pads.append(torch.empty((place + 1) * (5 << 20), dtype=torch.uint8, device=device))
                timing._flush_buffer.cache_clear()
                flushes.append(timing._flush_buffer(device))
            medians = []
            for _ in range(rounds):
                row = []
                for flush in flushes:
                    with _flush_buffer_is(flush):
                        row.append(timing.time_implementations({"step": call}, device, config).timings["step"].median_us)
                medians.append(row)
            report(f"flush buffer B={batch} draft={draft}", medians)


def outputs(device: torch.device, places: int = 8, rounds: int = 2) -> None:
    """Does a row's host-free median depend on where its outputs land? A call allocates its outputs (the
    tokens and the counts, a few hundred bytes) from the caching allocator's small pool, frees them, and
    the next call gets the same block back: every placement and every row of a process writes its outputs
    to the same few addresses, whose physical pages are drawn once per process. Each placement here first
    takes a different number of blocks of the outputs' size, so the outputs land elsewhere; inputs,
    scratch and flush fixed. Medians that differ between placements but repeat for one point at the outputs."""
    config = _study_config()
    print(f"\nhost-free medians (µs), {places} placements of the outputs, {rounds} rounds, 100 samples each")
    for draft in ("none", "logits"):
        for batch in (1, 8):
            call = _step(batch, device, draft)
            call()
            medians, addresses = [], []
            for _ in range(rounds):
                row = []
                for place in range(places):
                    # blocks of the outputs' size taken first, the freed ones included: the outputs move on
                    pad = [torch.empty(512, dtype=torch.uint8, device=device) for _ in range(3 * place)]
                    addresses.append(call().output_token_ids.data_ptr() % (1 << 21))
                    row.append(timing.time_implementations({"step": call}, device, config).timings["step"].median_us)
                    del pad
                medians.append(row)
            print(_medians_line(f"outputs B={batch} draft={draft}", medians)
                  + f"   (offsets in their 2 MiB page: {sorted(set(addresses))[:4]}...)")


def backlog(device: torch.device, lengths: tuple[float, ...] = (250, 350, 500, 700, 1000, 1400, 2000, 4000, 8000),
            rounds: int = 2) -> None:
    """Does a row's host-free median depend on how long the GPU slept before it? The backlog is sized per
    row and process from the host's enqueue time; here it is set to each of ``lengths`` µs in turn (inputs,
    scratch, flush and outputs as they are; no growth), forwards and then backwards. Medians that follow
    the length point at the GPU's state after a sleep. The row's own backlog, as sized, comes first."""
    config = _study_config()
    print(f"\nhost-free medians (µs) behind a backlog of {', '.join(f'{x:g}' for x in lengths)} µs, "
          f"{rounds} rounds (the second backwards), 100 samples each")
    saved, growths = timing.backlog_us, timing.BACKLOG_GROWTHS
    timing.BACKLOG_GROWTHS = 0
    try:
        for draft in ("none", "logits"):
            for batch in (1, 8):
                call = _step(batch, device, draft)
                timing.backlog_us = saved
                own = timing.time_implementations({"step": call}, device, config).timings["step"]
                print(f"B={batch} draft={draft}: its own backlog {own.backlog_us:.0f} µs, median {own.median_us:.2f}")
                medians = []
                for round_ in range(rounds):
                    order = list(lengths) if round_ % 2 == 0 else list(reversed(lengths))
                    found = {}
                    for length in order:
                        timing.backlog_us = lambda enqueue, length=length: length
                        found[length] = timing.time_implementations({"step": call}, device, config).timings["step"]
                    medians.append([found[length].median_us for length in lengths])
                ran_out = sum(t.backlog_ran_out for t in found.values())
                print(_medians_line(f"B={batch} draft={draft}", medians, 17) + f"   (ran out, last round: {ran_out})")
    finally:
        timing.backlog_us, timing.BACKLOG_GROWTHS = saved, growths


def toggle(device: torch.device, measurements: int = 10, samples: int = 100) -> None:
    """Successive measurements of one row can alternate between two levels (``backlog``: B = 1, draft
    logits, 15.8 and 16.9 µs, one after the other, whatever the backlog). What flips? The same row is
    measured ``measurements`` times in a row each way: by ``time_implementations`` (one placement, two,
    four); by a plain loop (backlog, flush, events, call, then wait) with fresh events for each sample,
    read at once; with the same two events for every sample of a measurement, a pair of its own per
    measurement; with one pair for every sample of every measurement; with fresh events kept alive
    until the measurement ends; with a check event as the timer records; and the plain loop after what
    ``time_implementations`` does first (three warm-up calls, five enqueue probes), after each part
    alone, after one or two warm-up calls, and after a 2 ms sleep; last, the loop with one unflushed call
    after each sample's end event (the median of the means of successive pairs: if a call flips the
    state, each pair holds both), alone and after the preamble. On an H200 every loop stayed at one
    level, except after one or three warm-up calls (the levels alternated, as ``time_implementations``
    did) and after the sleep (mostly the lower level): an odd number of calls made without a flush flips
    a state the GPU keeps (``results/h200-two-states``)."""
    call = _step(1, device, "logits")
    config = timing.TimingConfig(warmup=3, min_samples=samples, max_samples=samples, max_ms=1e9, timer="host-free")
    stream = torch.cuda.current_stream(device)
    flush = timing._flush_windows(timing._flush_buffer(device, timing.DEFAULT_PLACEMENTS), device)[0]
    cycles = timing.sleep_cycles(1000.0, timing.sleep_cycles_per_us(device))

    def pair():
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def loop(pair_=None, keep: bool = False, check: bool = False, shift: int = 0, flip: bool = False) -> float:
        # a sample: backlog, flush, start, call, end, wait. ``pair_``: the same two events for every sample
        # (else fresh ones); ``keep``: every sample's events alive until the measurement ends, read then;
        # ``check``: a non-timing event after the sleep, queried after the end, as the timer does; ``shift``:
        # events made between the start and the end event (never recorded: torch makes a CUDA event at its
        # first record, so they are Python objects only); ``flip``: one unflushed call after the end event,
        # and the median of the means of successive pairs (if a call flips the state, each pair holds both)
        times, kept = [], []
        for _ in range(samples):
            if pair_ is not None:
                (start, end), spare = pair_, []
            else:
                start = torch.cuda.Event(enable_timing=True)
                spare = [torch.cuda.Event(enable_timing=True) for _ in range(shift)]
                end = torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(cycles)
            if check:
                woke = torch.cuda.Event()
                woke.record(stream)
            timing._evict(flush)
            start.record(stream)
            call()
            end.record(stream)
            if flip:
                call()
            if check:
                woke.query()
            end.synchronize()
            if keep:
                kept.append((start, end))
            else:
                times.append(start.elapsed_time(end) * 1000.0)
            del spare
        times = times or [start.elapsed_time(end) * 1000.0 for start, end in kept]
        if flip:
            return statistics.median((a + b) / 2 for a, b in zip(times[::2], times[1::2]))
        return statistics.median(times)

    def preamble(warm: int = 3, probes: int = timing.ENQUEUE_TRIES, sleep_us: float = 0.0) -> None:
        # what time_implementations does first: three warm-up calls, then five enqueue probes (or as given),
        # or a sleep of ``sleep_us``
        for _ in range(warm):
            call()
        torch.cuda.synchronize(device)
        if probes:
            timing._Sampler(device, True).enqueue_us(call, timing.sleep_cycles_per_us(device), probes)
        if sleep_us:
            torch.cuda._sleep(timing.sleep_cycles(sleep_us, timing.sleep_cycles_per_us(device)))

    def after_preamble(warm: int = 3, probes: int = timing.ENQUEUE_TRIES, sleep_us: float = 0.0) -> float:
        preamble(warm, probes, sleep_us)
        return loop()

    for _ in range(3):
        call()
    fixed = pair()
    ways = {"time_implementations": lambda: timing.time_implementations({"step": call}, device, config)
            .timings["step"].median_us,
            "time_implementations, 2 placements": lambda: timing.time_implementations(
                {"step": [call, call]}, device, config).timings["step"].median_us,
            "... 4 placements": lambda: timing.time_implementations(
                {"step": [call] * 4}, device, config).timings["step"].median_us,
            "loop, fresh events": loop, "loop, a pair per measurement": lambda: loop(pair()),
            "loop, one pair for all": lambda: loop(fixed),
            "loop, events kept to the end": lambda: loop(keep=True),
            "loop with a check event": lambda: loop(check=True),
            "... and one event made between": lambda: loop(check=True, shift=1),
            "... and two made between": lambda: loop(check=True, shift=2),
            "loop after warm-up and probes": after_preamble,
            "... after 3 warm-up calls": lambda: after_preamble(probes=0),
            "... after 1 warm-up call": lambda: after_preamble(warm=1, probes=0),
            "... after 2 warm-up calls": lambda: after_preamble(warm=2, probes=0),
            "... after 5 probes": lambda: after_preamble(warm=0),
            "... after 1 probe": lambda: after_preamble(warm=0, probes=1),
            "... after a 2 ms sleep": lambda: after_preamble(warm=0, probes=0, sleep_us=2000.0),
            "loop, a call after each sample (pair means)": lambda: loop(flip=True),
            "... after warm-up and probes": lambda: preamble() or loop(flip=True)}
    print(f"\nB=1 draft logits: {measurements} measurements of {samples} samples in a row, each way (µs)")
    for name, measure in ways.items():
        medians = [measure() for _ in range(measurements)]
        print(f"{name:<44} " + " ".join(f"{m:.2f}" for m in medians)
              + f"   max/min {max(medians) / min(medians):.3f}")


def read_flush(window: torch.Tensor) -> None:
    """An L2 flush that reads ``window`` (a sum into one number) instead of overwriting it."""
    torch.sum(window, dim=0, out=_sink(window.device))


@functools.cache
def _sink(device: torch.device) -> torch.Tensor:
    return torch.zeros((), dtype=torch.int64, device=device)


def flush_kind(device: torch.device, places: int = 6, rounds: int = 2) -> None:
    """Is the L2 flush's kind what moves a row with its placements? A write flush (``timing._evict``, the
    timer's) leaves the L2 full of dirty lines that the timed call writes back as it evicts them; a read
    flush (``read_flush``) leaves clean ones. Each kind times a row with the flush buffer at
    ``places`` addresses (inputs fixed), then with ``places`` copies of the inputs (flush buffer fixed),
    ``rounds`` times over: a kind whose medians stay together across placements makes rows that travel."""
    config = _study_config()
    kinds = {"write": timing._evict, "read": read_flush}
    pads = []

    def report(label: str, medians: list[list[float]]) -> None:
        print(_medians_line(label, medians, 40))

    def timed(call, buffer=None) -> float:
        with _flush_buffer_is(buffer) if buffer is not None else contextlib.nullcontext():
            return timing.time_implementations({"step": call}, device, config).timings["step"].median_us

    print(f"\nhost-free medians (µs) by flush kind, {places} placements, {rounds} rounds, 100 samples each")
    for draft in ("none", "logits"):
        for batch in (1, 8):
            call = _step(batch, device, draft)
            flushes = []
            for place in range(places):
                pads.append(torch.empty((place + 1) * (5 << 20), dtype=torch.uint8, device=device))
                timing._flush_buffer.cache_clear()
                flushes.append(timing._flush_buffer(device))
            copies = [_step(batch, device, draft) for _ in range(places)]
            for kind, evict in kinds.items():
                saved, timing._evict = timing._evict, evict
                try:
                    report(f"{kind}, flush placed, B={batch} draft={draft}",
                           [[timed(call, flush) for flush in flushes] for _ in range(rounds)])
                    report(f"{kind}, inputs placed, B={batch} draft={draft}",
                           [[timed(copy) for copy in copies] for _ in range(rounds)])
                finally:
                    timing._evict = saved


def _compiled_kernels() -> list:
    # every Triton kernel the launcher has compiled so far (the launcher module's JIT functions' caches)
    import triton

    from specbench.kernels import launch

    found = []
    for value in vars(launch).values():
        if isinstance(value, triton.runtime.JITFunction):
            for caches in value.device_caches.values():
                found.extend(caches[0].values())
    return found


def code(device: torch.device, loads: int = 6, rounds: int = 2) -> None:
    """Does a row's host-free median depend on where its kernels' code sits? The flush evicts the code
    from L2 with the data, so a cold call fetches its instructions from DRAM, and a process loads the code
    once, at an address no placement of the inputs moves. Each kernel is loaded ``loads`` times (the
    same binary, a new module each time, all kept loaded) and the row is timed with each load in turn,
    inputs fixed, ``rounds`` times over: medians that differ between loads but repeat for one load point
    at the code's placement."""
    config = _study_config()
    print(f"\nhost-free medians (µs), {loads} loads of the kernels' code, {rounds} rounds, 100 samples each; inputs fixed")
    for draft in ("none", "logits"):
        for batch in (1, 8):
            call = _step(batch, device, draft)
            call()  # compiles and loads what this row launches
            kernels = _compiled_kernels()
            placed = [[(k.module, k.function, k._run) for k in kernels]]
            for _ in range(loads - 1):
                for k in kernels:
                    k.module = None
                    k._init_handles()
                placed.append([(k.module, k.function, k._run) for k in kernels])
            medians = []
            for _ in range(rounds):
                row = []
                for handles in placed:
                    for k, (module, function, run) in zip(kernels, handles):
                        k.module, k.function, k._run = module, function, run
                    row.append(timing.time_implementations({"step": call}, device, config).timings["step"].median_us)
                medians.append(row)
            functions = len({h[1] for handles in placed for h in handles})
            print(_medians_line(f"B={batch} draft={draft}", medians, 17)
                  + f"   ({len(kernels)} kernels, {functions} function handles)")


@contextlib.contextmanager
def _flush_buffer_is(buffer: torch.Tensor):
    """Inside the block, the timer's flush buffer is ``buffer`` (its cached maker swapped for a fixed answer)."""
    saved = timing._flush_buffer
    timing._flush_buffer = lambda device, windows=timing.DEFAULT_PLACEMENTS: buffer
    try:
        yield
    finally:
        timing._flush_buffer = saved


PROCESS_ROWS = (("tiny kernel", None, "-"), ("sleep 5 µs", None, "-"), ("step", 1, "logits"), ("step", 1, "none"),
                ("step", 8, "logits"))


def _current_cpu() -> int:
    # the CPU this process last ran on (field 39 of /proc/self/stat)
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])


def _cpu_list(text: str) -> set[int]:
    cpus = set()
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _place_process(cpus: str) -> dict:
    """Before CUDA starts: the GPU's NUMA node and local CPUs (sysfs, from nvidia-smi's bus id), and with
    ``cpus`` ``local`` or ``far`` this process pinned to the CPUs on or off the GPU's node."""
    import os
    import subprocess

    bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
                         capture_output=True, text=True, check=True).stdout.strip().lower()
    pci = Path("/sys/bus/pci/devices") / bus[-12:]
    local = _cpu_list((pci / "local_cpulist").read_text())
    every = os.sched_getaffinity(0)
    if cpus != "any":
        chosen = local & every if cpus == "local" else every - local
        if not chosen:
            sys.exit(f"no {cpus} CPUs here: the GPU's are {sorted(local)}, this process may use {sorted(every)}")
        os.sched_setaffinity(0, chosen)
    cpu = _current_cpu()
    nodes = [int(p.name[4:]) for p in Path(f"/sys/devices/system/cpu/cpu{cpu}").glob("node*")]
    return {"cpus": cpus, "gpu_numa_node": int((pci / "numa_node").read_text()), "cpu": cpu,
            "cpu_node": nodes[0] if nodes else None, "cpu_is_local": cpu in local}


def process(device: torch.device, samples: int = 60) -> None:
    """What does one process read? Prints one JSON line: the host-free medians (default placements, the
    timer's defaults otherwise, ``samples`` samples) of a tiny kernel (the timer's own cost: backlog, flush,
    events and one launch), a 5 µs sleep (a kernel of known length) and the step at B = 1 and 8, plus the
    graph timer's B = 1 row. Run in several processes, a process whose every row reads slower by the same
    few hundred ns shows up in all of them (``offsets``); if the tiny kernel shows it too, the offset is the
    timer's, not the step's. ``--stream side`` times everything on a stream of its own instead of torch's
    default stream; ``--streams N`` spreads the placements over N streams (with the timer patched by
    ``results/h200-process-offset/streams/placement-streams.patch``);
    ``--cpus local|far`` pins the process to the CPUs on or off the GPU's NUMA node first."""
    import json
    import os

    side = "--stream" in sys.argv and sys.argv[sys.argv.index("--stream") + 1] == "side"
    placed = _place_process(sys.argv[sys.argv.index("--cpus") + 1] if "--cpus" in sys.argv else "any")
    stream = torch.cuda.Stream(device) if side else torch.cuda.current_stream(device)
    spread_over = int(sys.argv[sys.argv.index("--streams") + 1]) if "--streams" in sys.argv else 1
    if spread_over > 1 and not hasattr(timing, "PLACEMENT_STREAMS"):
        sys.exit("--streams needs the timer patched first: git apply results/h200-process-offset/streams/"
                 "placement-streams.patch (a study, not a feature: it spread the offset, README there)")
    timing.PLACEMENT_STREAMS = spread_over
    config = timing.TimingConfig(min_samples=samples, max_samples=samples, max_ms=1e9, timer="host-free")
    graph = timing.TimingConfig(min_samples=samples, max_samples=samples, max_ms=1e9, cuda_graph=True)
    medians = {}
    with torch.cuda.stream(stream):
        tiny = torch.zeros(16, device=device)
        rate = timing.sleep_cycles_per_us(device)
        known = {"tiny kernel": lambda: tiny.add_(1.0), "sleep 5 µs": lambda: torch.cuda._sleep(int(5 * rate))}
        for name, batch, draft in PROCESS_ROWS:
            if batch is None:
                calls = [known[name]] * config.placements
            else:
                calls = [_step(batch, device, draft) for _ in range(config.placements)]
                for index, call in enumerate(calls[1:], start=1):
                    calls[index] = bench._in_scratch_set(call, index)
            label = name if batch is None else f"{name} B={batch} draft={draft}"
            if spread_over > 1:  # each placement's first call on its own stream (its launcher scratch)
                for index, call in enumerate(calls):
                    with torch.cuda.stream(timing._placement_streams(device, spread_over)[index % spread_over]):
                        call()
                torch.cuda.synchronize(device)
            medians[label] = timing.time_implementations({"x": calls}, device, config).timings["x"].median_us
            if (batch, draft) == (1, "logits"):
                measured = timing.time_implementations({"x": calls[:graph.placement_count()]}, device, graph)
                medians[f"{label} graph"] = measured.timings["x"].median_us
            if draft != "none" and spread_over == 1:
                # each placement's call captured alone in a graph, replayed host-free: the call's launches read
                # from the GPU's memory, not the host's
                replays = [timing._capture([call], 1, device) for call in calls]
                measured = timing.time_implementations({"x": replays}, device, config)
                medians[f"{label} graph of one"] = measured.timings["x"].median_us
    print(json.dumps({"pid": os.getpid(), "stream": "side" if side else f"default x{spread_over}", **placed,
                      "cpu_after": _current_cpu(), "medians": medians}))


def offsets(path: str) -> None:
    """Each process's median of a row over the median of every process of its kind (the lines ``process``
    printed, one a process, in ``path``), row by row."""
    import json

    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.startswith("{")]
    for kind in sorted({(line["stream"], line.get("cpus", "any")) for line in lines}):
        chosen = [line for line in lines if (line["stream"], line.get("cpus", "any")) == kind]
        rows = list(chosen[0]["medians"])
        print(f"\nstream {kind[0]}, CPUs {kind[1]}: {len(chosen)} processes; each row's median over the processes' "
              f"median (µs); the CPU each started on, * where it is the GPU's local: "
              + " ".join(f"{line.get('cpu', '?')}{'*' if line.get('cpu_is_local') else ''}" for line in chosen))
        print(f"{'row':<30} {'median':>8}  ratio per process")
        for row in rows:
            values = [line["medians"][row] for line in chosen]
            middle = statistics.median(values)
            print(f"{row:<30} {middle:>8.2f}  " + " ".join(f"{v / middle:.3f}" for v in values)
                  + f"   max/min {max(values) / min(values):.3f}")


def spread(runs: list[str]) -> None:
    loaded = [by_key(read_results(run)[1], run) for run in runs]
    worst_spread, worst_ratio = 0.0, 0.0
    print(f"{'row':<80} {'max p80/p20':>11} {'max/min median':>15}")
    for key, record in loaded[0].items():
        rows = [found.get(key) for found in loaded]
        if any(row is None or row.get("status") != "ok" for row in rows):
            continue
        spreads = [row["p80_us"] / row["p20_us"] for row in rows]
        medians = [row["median_us"] for row in rows]
        worst_spread, worst_ratio = max(worst_spread, *spreads), max(worst_ratio, max(medians) / min(medians))
        flag = " <-" if max(spreads) > 1.10 or max(medians) / min(medians) > 1.03 else ""
        print(f"{kernels_label(record)[:80]:<80} {max(spreads):>11.3f} {max(medians) / min(medians):>15.3f}{flag}")
    ran_out = [(int(row.get("backlog_ran_out") or 0), int(row["samples"])) for found in loaded for row in found.values()
               if row.get("status") == "ok" and row.get("backlog_ran_out") is not None]
    print(f"samples whose backlog ran out: {sum(r for r, _ in ran_out)} of {sum(n for _, n in ran_out)} in "
          f"{len(ran_out)} rows, the most in one row {max((r for r, _ in ran_out), default=0)}")
    print(f"worst p80/p20 {worst_spread:.3f} (goal 1.10); worst ratio between runs {worst_ratio:.3f} (goal 1.03)")


STUDIES = {"process": process, "placement": placement, "scratch": scratch, "code": code, "flush-kind": flush_kind, "outputs": outputs,
           "backlog": backlog, "toggle": toggle}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "spread":
        spread(sys.argv[2:])
        return
    if len(sys.argv) > 2 and sys.argv[1] == "offsets":
        offsets(sys.argv[2])
        return
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU (the spread subcommand reads runs anywhere)")
    device = torch.device("cuda", torch.cuda.current_device())
    if "--warmup" in sys.argv:
        at = sys.argv.index("--warmup")
        if at + 1 >= len(sys.argv) or not sys.argv[at + 1].isdigit():
            sys.exit("--warmup takes a whole number of calls, e.g. --warmup 2")
        STUDY_WARMUP[0] = int(sys.argv[at + 1])
        del sys.argv[at:at + 2]
    if len(sys.argv) > 1:
        if sys.argv[1] not in STUDIES:
            sys.exit(f"unknown study {sys.argv[1]!r}; choose from spread, {', '.join(STUDIES)}, or none for the timer check")
        STUDIES[sys.argv[1]](device)
        return
    print(torch.cuda.get_device_name(device), "torch", torch.__version__)
    known_work(device)
    clock_study(device)
    host_free_step(device)

if __name__ == "__main__":
    main()
