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
    start, end = timing._Sampler(torch.device("cuda", 1), flush=False).sample(lambda: None)
    assert start.device == end.device == torch.device("cuda", 1)
