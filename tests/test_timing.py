"""The timing harness's logic: summaries, budgets, interleaving, graphs. No test asserts a speed."""

from __future__ import annotations

import pytest
import torch

from specbench import timing
from specbench.errors import SpecbenchError

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_summary_is_median_and_interpolated_percentiles():
    result = timing.summarize([10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0])
    # sorted 1..10: rank 0.2 * 9 = 1.8 -> 2.8; the median 5.5; rank 7.2 -> 8.2
    assert result[:4] == (5.5, pytest.approx(2.8), pytest.approx(8.2), 10)
    assert result.samples_us == (10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0)  # kept in the order taken
    assert timing.summarize([3.0]) == timing.Timing(3.0, 3.0, 3.0, 1, (3.0,))


def test_summary_of_nothing_is_an_error():
    with pytest.raises(SpecbenchError, match="zero timing samples"):
        timing.summarize([])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"warmup": -1}, "warm-up calls must be 0 or more, got -1"),
        ({"min_samples": 0}, "minimum samples must be at least 1, got 0"),
        ({"min_samples": 5, "max_samples": 4}, r"maximum samples must be at least the minimum \(5\), got 4"),
        ({"max_ms": -1.0}, "time budget must be 0 ms or more, got -1.0"),
        ({"graph_calls": 0}, "calls per CUDA graph must be at least 1, got 0"),
    ],
)
def test_bad_timing_settings_name_the_value(fields, message):
    with pytest.raises(SpecbenchError, match=message):
        timing.TimingConfig(**fields)


def _recorders(names):
    calls: list[str] = []
    return calls, {name: (lambda name=name: calls.append(name)) for name in names}


def test_implementations_are_interleaved_round_robin_with_rotating_order():
    calls, fns = _recorders("abc")
    config = timing.TimingConfig(warmup=1, min_samples=4, max_samples=4, l2_flush=False)
    measured = timing.time_implementations(fns, "cpu", config)
    assert calls[:3] == ["a", "b", "c"]  # warm-up
    rounds = [calls[3 + 3 * r: 6 + 3 * r] for r in range(4)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert len(calls) == 3 + 12
    assert {name: t.samples for name, t in measured.timings.items()} == {"a": 4, "b": 4, "c": 4}
    assert measured.errors == {}


def test_count_budget_caps_the_samples():
    calls, fns = _recorders("ab")
    config = timing.TimingConfig(warmup=0, min_samples=1, max_samples=7, max_ms=1e9, l2_flush=False)
    measured = timing.time_implementations(fns, "cpu", config)
    assert [t.samples for t in measured.timings.values()] == [7, 7]
    assert len(calls) == 14


def test_exhausted_time_budget_still_takes_the_minimum():
    calls, fns = _recorders("ab")
    config = timing.TimingConfig(warmup=2, min_samples=3, max_samples=100, max_ms=0.0, l2_flush=False)
    measured = timing.time_implementations(fns, "cpu", config)
    assert [t.samples for t in measured.timings.values()] == [3, 3]
    assert len(calls) == 2 * 2 + 2 * 3


def test_cpu_samples_are_positive_and_ordered():
    x = torch.randn(256, 256)
    config = timing.TimingConfig(warmup=1, min_samples=5, max_samples=5, l2_flush=True)
    t = timing.time_implementations({"matmul": lambda: x @ x}, "cpu", config).timings["matmul"]
    assert 0 < t.p20_us <= t.median_us <= t.p80_us
    assert t.samples == 5


def test_an_implementation_that_raises_fails_alone_and_out_of_memory_propagates():
    calls = []

    def broken_on_third_call():
        calls.append(1)
        if len(calls) >= 3:
            raise RuntimeError("kernel exploded")

    config = timing.TimingConfig(warmup=1, min_samples=5, max_samples=5, l2_flush=False)
    measured = timing.time_implementations({"broken": broken_on_third_call, "fine": lambda: None}, "cpu", config)
    assert measured.failures == {"broken": "raised RuntimeError while being timed: kernel exploded"}
    assert list(measured.timings) == ["fine"] and measured.timings["fine"].samples == 5

    def out_of_memory():
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory")

    with pytest.raises(RuntimeError, match="can't allocate memory"):
        timing.time_implementations({"oom": out_of_memory}, "cpu", timing.TimingConfig(warmup=0, l2_flush=False))


def test_cuda_graphs_need_a_gpu():
    with pytest.raises(SpecbenchError, match="CUDA graphs need a CUDA device, got cpu"):
        timing.time_implementations({"a": lambda: None}, "cpu", timing.TimingConfig(cuda_graph=True))


def test_cpu_copy_bandwidth_is_measured_once_per_process():
    timing.peak_bandwidth_gbps.cache_clear()
    first = timing.peak_bandwidth_gbps("cpu", 1 << 20, 3)
    assert first is not None and first > 0
    assert timing.peak_bandwidth_gbps("cpu", 1 << 20, 3) == first
    assert timing.peak_bandwidth_gbps.cache_info().hits == 1


@needs_gpu
def test_gpu_events_and_graph_replays_give_samples():
    x = torch.randn(1024, 1024, device="cuda")
    config = timing.TimingConfig(warmup=1, min_samples=3, max_samples=3, cuda_graph=True, graph_calls=4)
    measured = timing.time_implementations({"add": lambda: x + 1.0}, "cuda", config)
    t = measured.timings["add"]
    assert t.samples == 3 and 0 < t.p20_us <= t.median_us <= t.p80_us


@needs_gpu
def test_a_graph_is_captured_on_the_stream_its_warm_up_ran_on():
    # a launcher that keeps state per stream (the Triton launcher's scratch and arrival counters) made it in
    # the warm-up; made again while capturing, its memset would be replayed with every sample
    made: dict[int, torch.Tensor] = {}
    made_while_capturing = []

    def call():
        stream = torch.cuda.current_stream().cuda_stream
        if stream not in made:
            made[stream] = torch.zeros(64, device="cuda")
            made_while_capturing.append(torch.cuda.is_current_stream_capturing())
        made[stream].add_(1.0)

    replay = timing._capture([call], 4, torch.device("cuda", torch.cuda.current_device()))
    replay()
    torch.cuda.synchronize()
    assert made_while_capturing == [False]
    assert made[next(iter(made))].tolist() == [1.0 + 4] * 64  # the warm-up, then one replay of 4 calls (a capture runs none)


@needs_gpu
def test_a_call_that_cannot_be_captured_is_reported_not_raised():
    x = torch.randn(16, device="cuda")
    config = timing.TimingConfig(warmup=1, min_samples=2, max_samples=2, cuda_graph=True)
    measured = timing.time_implementations({"sync": lambda: x.sum().item(), "add": lambda: x + 1}, "cuda", config)
    assert "cannot be captured in a CUDA graph" in measured.errors["sync"]
    assert measured.timings["add"].samples == 2


@needs_gpu
def test_gpu_copy_bandwidth_is_measured_on_every_device():
    for index in range(torch.cuda.device_count()):
        assert timing.peak_bandwidth_gbps(f"cuda:{index}", 64 << 20) > 0


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_gpu_samples_are_taken_on_the_device_that_does_the_work():
    # events recorded on the current device (cuda:0) would time nothing of work on cuda:1 (`specbench env`)
    sample = timing._Sampler(torch.device("cuda", 1), flush=False).sample([lambda: None], backlog_cycles=[1000])
    (start, end), = sample.events
    assert start.device == end.device == torch.device("cuda", 1)


def test_the_backlog_covers_twice_the_enqueue_time_plus_a_pad_up_to_a_cap():
    assert timing.backlog_us(0.0) == timing.BACKLOG_PAD_US == 20.0
    assert timing.backlog_us(35.0) == 2 * 35.0 + 20.0
    assert timing.backlog_us(1e6) == timing.MAX_BACKLOG_US  # a call that waits for the GPU is never covered
    with pytest.raises(SpecbenchError, match="an enqueue time must be a number of microseconds >= 0, got -1"):
        timing.backlog_us(-1.0)


def test_sleep_cycles_round_up_so_the_sleep_is_never_short():
    assert timing.sleep_cycles(90.0, 1980.0) == 178_200  # 90 µs at 1.98 GHz
    assert timing.sleep_cycles(0.25, 1.0) == 1 and timing.sleep_cycles(0.0, 1755.0) == 0
    for rate in (0.0, -1.0, float("nan")):
        with pytest.raises(SpecbenchError, match="GPU clock must be a positive number of cycles per microsecond"):
            timing.sleep_cycles(10.0, rate)
    with pytest.raises(SpecbenchError, match="a sleep must last 0 microseconds or more, got -5"):
        timing.sleep_cycles(-5.0, 1000.0)


def test_each_device_and_setting_names_its_timer():
    assert timing.timer_name("cpu", timing.TimingConfig()) == "perf_counter"
    assert timing.timer_name("cpu", timing.TimingConfig(timer="events")) == "perf_counter"
    assert timing.timer_name("cuda", timing.TimingConfig()) == timing.DEFAULT_GPU_TIMER == "cold-graph"
    assert timing.timer_name("cuda:1", timing.TimingConfig(timer="events")) == "events"
    assert timing.timer_name("cuda", timing.TimingConfig(timer="events", cuda_graph=True)) == "graph"
    assert timing.timer_name("cuda", timing.TimingConfig(timer="cold-graph")) == "cold-graph"
    with pytest.raises(SpecbenchError, match=r"the timer of one call must be host-free, cold-graph or events \(the graph "
                                             r"timer is cuda_graph=True\), got 'graph'"):
        timing.TimingConfig(timer="graph")


def test_a_cpu_measurement_is_perf_counter_without_a_backlog():
    config = timing.TimingConfig(warmup=0, min_samples=3, max_samples=3, l2_flush=False)
    measured = timing.time_implementations({"a": lambda: None}, "cpu", config)
    assert measured.timer == "perf_counter"
    assert (measured.timings["a"].backlog_us, measured.timings["a"].backlog_ran_out) == (None, None)


def test_the_cpu_cache_is_the_last_level_linux_lists(tmp_path, monkeypatch):
    for index, (level, size) in enumerate([(1, "48K"), (1, "64K"), (2, "2048K"), (3, "30M")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "size").write_text(f"{size}\n")
    monkeypatch.setattr(timing, "CPU_CACHE_DIR", str(tmp_path))
    assert timing.cache_bytes("cpu") == 30 << 20
    monkeypatch.setattr(timing, "CPU_CACHE_DIR", str(tmp_path / "nowhere"))
    assert timing.cache_bytes("cpu") is None


@needs_gpu
def test_host_free_samples_of_a_known_sleep_last_the_sleep():
    # the call is itself a sleep of a known length: host-free samples must read that length (the GPU work
    # alone), and the backlog must hold in nearly every sample
    rate = timing.sleep_cycles_per_us(torch.device("cuda", torch.cuda.current_device()))
    config = timing.TimingConfig(warmup=2, min_samples=20, max_samples=20, l2_flush=False, timer="host-free")
    measured = timing.time_implementations({"sleep": lambda: torch.cuda._sleep(int(50 * rate))}, "cuda", config)
    t = measured.timings["sleep"]
    assert measured.timer == "host-free" and t.backlog_us >= timing.BACKLOG_PAD_US
    assert 45.0 < t.median_us < 60.0 and t.backlog_ran_out <= 2


@needs_gpu
def test_a_call_that_waits_for_the_gpu_runs_the_backlog_out_every_time():
    # reading a value back makes the host wait for the GPU: no backlog can cover it, and the check must see it
    x = torch.randn(1 << 20, device="cuda")
    config = timing.TimingConfig(warmup=1, min_samples=5, max_samples=5, l2_flush=False, timer="host-free")
    t = timing.time_implementations({"item": lambda: x.sum().item()}, "cuda", config).timings["item"]
    assert t.backlog_ran_out == 5


@needs_gpu
def test_a_backlog_too_short_is_counted_as_run_out(monkeypatch):
    # a negative control for the check: no backlog at all, before a launch-bound call of 200 kernels
    monkeypatch.setattr(timing, "BACKLOG_FACTOR", 0.0)
    monkeypatch.setattr(timing, "BACKLOG_PAD_US", 0.0)
    x = torch.zeros(16, device="cuda")

    def many_launches():
        for _ in range(200):
            x.add_(1.0)

    config = timing.TimingConfig(warmup=1, min_samples=10, max_samples=10, l2_flush=False, timer="host-free")
    t = timing.time_implementations({"launches": many_launches}, "cuda", config).timings["launches"]
    assert t.backlog_us == 0.0 and t.backlog_ran_out >= 8


class _FakeCuda:
    """Stands in for the CUDA calls the GPU timers make, logging them in order; ``query`` answers from
    ``ran_out`` (the sleep had ended: True), one answer per call (each placement's check)."""

    def __init__(self, ran_out):
        self.log: list = []
        self.answers = iter(ran_out)
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                self.timed = enable_timing

            def record(self, stream=None):
                fake.log.append("timed event" if self.timed else "woke event")

            def query(self):
                return next(fake.answers)

            def elapsed_time(self, other):
                return 0.010  # ms

        self.Event = Event

    def install(self, monkeypatch):
        import contextlib

        for name, value in (("Event", self.Event), ("current_stream", lambda device=None: "stream"),
                            ("_sleep", lambda cycles: self.log.append(("sleep", cycles))),
                            ("device", lambda device: contextlib.nullcontext()), ("synchronize", lambda device=None: None),
                            ("current_device", lambda: 0)):
            monkeypatch.setattr(torch.cuda, name, value)

        class Flush:  # the buffer, and its windows (sliced): each logs its overwrite and where it starts
            def __init__(inner, start: int = 0) -> None:
                inner.start = start

            def __getitem__(inner, window: slice) -> Flush:
                return Flush(window.start)

            def zero_(inner):
                self.log.append("flush")
                self.windows.append(inner.start)

        self.windows = []
        self.buffer_windows = []
        monkeypatch.setattr(timing, "_flush_buffer",
                            lambda device, windows: self.buffer_windows.append(windows) or Flush())
        monkeypatch.setattr(timing, "_evict", lambda window: window.zero_())  # the fake's flush logs itself
        monkeypatch.setattr(timing, "sleep_cycles_per_us", lambda device: 1500.0)


def test_host_free_sleeps_before_the_flush_and_counts_the_samples_whose_backlog_ran_out(monkeypatch):
    # the order of what the host enqueues is the timer: sleep, the check's event, flush, start, call, end
    measured_enqueues = []
    real_backlog = timing.backlog_us
    monkeypatch.setattr(timing, "backlog_us", lambda us: measured_enqueues.append(us) or real_backlog(us))
    fake = _FakeCuda([False] * 5 + [False, True, False, False, True, False, True, False])  # 5 probes, 8 samples
    fake.install(monkeypatch)
    config = timing.TimingConfig(warmup=1, min_samples=8, max_samples=8, timer="host-free")
    measured = timing.time_implementations({"step": lambda: fake.log.append("call")}, "cuda:0", config)
    t = measured.timings["step"]
    assert measured.timer == "host-free" and t.samples == 8 and t.median_us == pytest.approx(10.0)
    first = real_backlog(measured_enqueues[0])
    cycles = timing.sleep_cycles(first, 1500.0)
    sample = fake.log[-6:]
    assert sample[1:] == ["woke event", "flush", "timed event", "call", "timed event"]
    # a sample that ran out doubles the backlog for the samples after it, twice at most: the third does not
    sleeps = [entry[1] for entry in fake.log if isinstance(entry, tuple)]
    probe = timing.sleep_cycles(timing.ENQUEUE_PROBE_US, 1500.0)
    assert sleeps[:timing.ENQUEUE_TRIES] == [probe] * timing.ENQUEUE_TRIES
    grown = [cycles] * 2 + [timing.sleep_cycles(2 * first, 1500.0)] * 3 + [timing.sleep_cycles(4 * first, 1500.0)] * 3
    assert sleeps[timing.ENQUEUE_TRIES:] == grown
    assert t.backlog_ran_out == 3 and t.backlog_us == 4 * first
    fake = _FakeCuda([])
    fake.install(monkeypatch)
    events = timing.time_implementations({"step": lambda: fake.log.append("call")}, "cuda:0",
                                         timing.TimingConfig(warmup=0, min_samples=2, max_samples=2, timer="events"))
    assert events.timer == "events" and events.timings["step"].backlog_ran_out is None
    assert fake.log == ["flush", "timed event", "call", "timed event"] * 2  # no sleep, no check


def test_a_backlog_grows_no_further_than_its_cap(monkeypatch):
    # a call that waits for the GPU runs every backlog out: it grows to MAX_BACKLOG_US and stays there
    monkeypatch.setattr(timing, "backlog_us", lambda us: 0.75 * timing.MAX_BACKLOG_US)
    fake = _FakeCuda([False] * 5 + [True] * 4)
    fake.install(monkeypatch)
    config = timing.TimingConfig(warmup=0, min_samples=4, max_samples=4, timer="host-free")
    t = timing.time_implementations({"step": lambda: None}, "cuda:0", config).timings["step"]
    sleeps = [entry[1] for entry in fake.log if isinstance(entry, tuple)][timing.ENQUEUE_TRIES:]
    cap = timing.sleep_cycles(timing.MAX_BACKLOG_US, 1500.0)
    assert sleeps == [timing.sleep_cycles(0.75 * timing.MAX_BACKLOG_US, 1500.0)] + [cap] * 3
    assert t.backlog_ran_out == 4 and t.backlog_us == timing.MAX_BACKLOG_US


def test_each_placement_has_its_own_backlog_and_only_one_that_ran_out_grows(monkeypatch):
    # sleep, check, flush, call for every placement; the enqueue is measured on the first alone
    measured_enqueues = []
    real_backlog = timing.backlog_us
    monkeypatch.setattr(timing, "backlog_us", lambda us: measured_enqueues.append(us) or real_backlog(us))
    fake = _FakeCuda([False] * 5 + [True, False, False] + [False, True, False] + [False] * 3)
    fake.install(monkeypatch)
    config = timing.TimingConfig(warmup=0, min_samples=3, max_samples=3, timer="host-free")
    calls = [lambda j=j: fake.log.append(f"call {j}") for j in range(3)]
    t = timing.time_implementations({"step": calls}, "cuda:0", config).timings["step"]
    probe = ("sleep", timing.sleep_cycles(timing.ENQUEUE_PROBE_US, 1500.0))
    assert fake.log[:6] == [probe, "woke event", "flush", "timed event", "call 0", "timed event"]
    one = timing.ENQUEUE_TRIES * 6
    sleeps = [entry[1] for entry in fake.log[one:] if isinstance(entry, tuple)]
    assert len(sleeps) == 9 and fake.log[one + 1:one + 6] == ["woke event", "flush", "timed event", "call 0", "timed event"]
    first, doubled = (timing.sleep_cycles(factor * real_backlog(measured_enqueues[0]), 1500.0) for factor in (1, 2))
    assert t.backlog_us == 2 * real_backlog(measured_enqueues[0])  # the row reports the longest backlog
    assert sleeps == [first] * 3 + [doubled, first, first] + [doubled, doubled, first]
    assert t.backlog_ran_out == 2  # two samples with a placement whose backlog ran out


def test_placements_average_one_call_on_each_copy_per_sample():
    # two "copies" of one call that take 2 ms and 20 ms: every sample is their mean, 11 ms, never one of them
    # (sleep overshoots under load: the bounds leave 8 ms of it)
    import time as time_

    config = timing.TimingConfig(warmup=1, min_samples=6, max_samples=6, l2_flush=False)
    order = []

    def copy(seconds: float, name: str):
        def call():
            order.append(name)
            time_.sleep(seconds)
        return call

    measured = timing.time_implementations({"two": [copy(0.002, "a"), copy(0.020, "b")], "one": copy(0.001, "c")},
                                           "cpu", config)
    two, one = measured.timings["two"], measured.timings["one"]
    assert two.placements == 2 and one.placements == 1
    assert all(10900.0 < sample < 19000.0 for sample in two.samples_us)  # each within sleep overshoot of 11000
    assert order.count("a") == order.count("b") == 7  # one warm-up and six samples each
    with pytest.raises(SpecbenchError, match="at least one"):
        timing.time_implementations({"none": []}, "cpu", config)


def test_each_placement_flushes_its_own_window(monkeypatch):
    # placement j overwrites window j of the flush buffer, FLUSH_STEP bytes past window j - 1
    fake = _FakeCuda([False] * 100)
    fake.install(monkeypatch)
    config = timing.TimingConfig(warmup=0, min_samples=2, max_samples=2, timer="events")
    timing.time_implementations({"step": [lambda: None] * 3}, "cuda:0", config)
    step = timing.FLUSH_STEP // 4  # int32 elements
    assert fake.windows == [0, step, 2 * step] * 2
    assert len(timing._flush_windows(torch.zeros(4), torch.device("cpu"))) == 1  # a CPU has one window
    # the buffer holds as many windows as the config's placements; more copies than windows take them in turn
    fewer = _FakeCuda([False] * 100)
    fewer.install(monkeypatch)
    config = timing.TimingConfig(warmup=0, min_samples=1, max_samples=1, timer="events", placements=2)
    timing.time_implementations({"step": [lambda: None] * 3}, "cuda:0", config)
    assert fewer.buffer_windows == [2] and fewer.windows == [0, step, 0]
    assert len(timing._flush_windows(torch.zeros(1 << 20), torch.device("cuda"), 4)) == 4


def test_cold_graph_replays_each_placement_alone_behind_its_own_backlog_and_flush(monkeypatch):
    # each placement's call is captured alone (one call a graph); a sample then runs, per placement, what
    # host-free runs, with the graph's replay for the call
    fake = _FakeCuda([False] * 100)
    fake.install(monkeypatch)
    captured = []

    def capture(fns, num_calls, device):
        if fns[0] is raises:
            raise RuntimeError("operation not permitted when stream is capturing")
        captured.append((len(fns), num_calls))
        return lambda: fake.log.append(f"replay {fns[0]()}")

    def raises():
        return None

    monkeypatch.setattr(timing, "_capture", capture)
    calls = [lambda j=j: j for j in range(3)]
    config = timing.TimingConfig(warmup=0, min_samples=2, max_samples=2, timer="cold-graph", placements=3)
    measured = timing.time_implementations({"step": calls, "sync": raises}, "cuda:0", config)
    assert measured.timer == "cold-graph" and captured == [(1, 1)] * 3
    assert "cannot be captured in a CUDA graph" in measured.errors["sync"] and "sync" not in measured.timings
    t = measured.timings["step"]
    assert t.samples == 2 and t.placements == 3 and t.backlog_ran_out == 0 and t.median_us == pytest.approx(10.0)
    sample = fake.log[-18:]
    for j in range(3):
        assert sample[6 * j][0] == "sleep"
        assert sample[6 * j + 1:6 * j + 6] == ["woke event", "flush", "timed event", f"replay {j}", "timed event"]
    assert fake.windows[-3:] == [0, timing.FLUSH_STEP // 4, 2 * timing.FLUSH_STEP // 4]


def test_running_out_of_memory_while_capturing_is_raised_not_reported(monkeypatch):
    fake = _FakeCuda([False] * 10)
    fake.install(monkeypatch)

    def capture(fns, num_calls, device):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(timing, "_capture", capture)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        timing.time_implementations({"step": lambda: None}, "cuda:0", timing.TimingConfig(warmup=0, min_samples=1))


def test_a_graph_takes_the_most_placements_that_divide_its_calls():
    assert timing.TimingConfig().placement_count() == timing.DEFAULT_PLACEMENTS == 40
    assert timing.TimingConfig(placements=10).placement_count() == 10
    assert timing.TimingConfig(placements=40, cuda_graph=True).placement_count() == 10
    assert timing.TimingConfig(placements=4, cuda_graph=True).placement_count() == 2
    assert timing.TimingConfig(placements=7, cuda_graph=True).placement_count() == 5
    assert timing.TimingConfig(placements=10, cuda_graph=True, graph_calls=7).placement_count() == 7
    assert timing.TimingConfig(placements=6, cuda_graph=True, graph_calls=7).placement_count() == 1
    for bad in (0, timing.MAX_PLACEMENTS + 1):
        with pytest.raises(SpecbenchError, match=f"placements must be between 1 and 100, got {bad}"):
            timing.TimingConfig(placements=bad)


@needs_gpu
def test_a_graph_cycles_through_the_placements():
    x, y = torch.zeros(4, device="cuda"), torch.zeros(4, device="cuda")
    config = timing.TimingConfig(warmup=0, min_samples=2, max_samples=2, cuda_graph=True, graph_calls=10)
    t = timing.time_implementations({"adds": [lambda: x.add_(1.0), lambda: y.add_(1.0)]}, "cuda", config)
    torch.cuda.synchronize()
    assert t.timings["adds"].placements == 2
    assert x[0].item() == y[0].item() > 0  # both copies replayed equally often (capture warm-up included)
