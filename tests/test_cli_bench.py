"""`specbench kernels` and `specbench env` on the CPU: files, tables, every error path, Ctrl-C, --resume."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from specbench import bench, machine, results, timing
from specbench.cli import app
from specbench.errors import SpecbenchError

TINY = ["--device", "cpu", "--vocab-size", "64", "--max-ms", "0", "--min-samples", "2", "--warmup", "0", "--no-l2-flush"]
needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def _records(path):
    return json.loads((path / "results.json").read_text())["records"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


@needs_no_gpu
def test_default_run_on_a_cpu_times_torch_writes_files_and_skips_triton_once(tmp_path):
    result = run("kernels", "--output", str(tmp_path), "--max-ms", "0", "--min-samples", "1", "--warmup", "0")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("skipped triton") == 1
    payload = json.loads((tmp_path / "results.json").read_text())
    records = payload["records"]
    # the CPU default grid: three modes (probabilistic from logits), B 1 and 8, K 3, V 32000, L 3
    assert {(r["mode"], r["draft"], r["batch_size"]) for r in records} == {
        (m, d, b) for m, d in (("greedy", "none"), ("probabilistic", "logits"), ("synthetic", "none")) for b in (1, 8)
    }
    assert {(r["impl"], r["num_spec_tokens"], r["vocab_size"], r["status"]) for r in records} == {
        ("torch", 3, 32000, "ok")
    }
    assert {r["l2_flush"] for r in records} == {True}  # on by default
    metadata = payload["metadata"]
    assert metadata["kind"] == "kernels" and metadata["peak_bandwidth_gbps"] > 0
    assert metadata["timing"]["l2_flush"] is True and metadata["timing"]["clock"] == "time.perf_counter_ns"
    assert {"torch", "triton", "commit", "command", "device"} <= set(metadata)
    csv_lines = (tmp_path / "results.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + len(records) and "median_us" in csv_lines[0]
    assert (tmp_path / "time_vs_batch_L3-float32.png").stat().st_size > 0
    assert (tmp_path / "throughput_vs_batch_L3-float32.png").stat().st_size > 0
    assert "median µs" in result.stdout and "greedy B=8 K=3 V=32000 float32 L=3" in result.stdout


def test_options_shape_the_grid_and_the_table_shows_each_row(tmp_path):
    result = run("kernels", *TINY, "--mode", "probabilistic", "--draft", "logits,probs,none", "--batch-size", "1,3",
                 "--num-spec-tokens", "2", "--acceptance-length", "2,full", "--dtype", "bfloat16", "--impl", "torch",
                 "--output", str(tmp_path), "--no-charts")
    assert result.exit_code == 0, result.output
    records = _records(tmp_path)
    assert len(records) == 3 * 2 * 2
    assert {r["acceptance"] for r in records} == {"2", "full"}
    assert {r["acceptance_length"] for r in records} == {2.0, 3.0}
    for r in records:
        assert r["status"] == "ok" and r["dtype"] == "bfloat16" and r["samples"] == 2
        assert r["measured_acceptance_length"] == pytest.approx(r["acceptance_length"], abs=0.5)
    assert result.stdout.count("probabilistic/probs B=3 K=2 V=64 bfloat16 L=3") == 1
    assert not list(tmp_path.glob("*.png"))


def test_all_modes_may_be_named_among_others_and_the_flush_switched_off(tmp_path):
    result = run("kernels", *TINY, "--mode", "greedy,all", "--batch-size", "1", "--impl", "torch",
                 "--output", str(tmp_path), "--no-charts")
    assert result.exit_code == 0, result.output
    records = _records(tmp_path)
    assert sorted(r["mode"] for r in records) == ["greedy", "probabilistic", "synthetic"]
    assert {r["l2_flush"] for r in records} == {False}


def test_model_presets_set_the_vocabulary(tmp_path):
    result = run("kernels", "--device", "cpu", "--model", "Gemma-3", "--mode", "synthetic", "--batch-size", "1",
                 "--max-ms", "0", "--min-samples", "1", "--warmup", "0", "--no-l2-flush", "--output", str(tmp_path),
                 "--no-charts")
    assert result.exit_code == 0, result.output
    assert {(r["model"], r["vocab_size"]) for r in _records(tmp_path)} == {("gemma3", 262144)}


def test_shapes_run_only_the_listed_b_k_and_vocabulary_triples_in_their_order(tmp_path):
    result = run("kernels", "--device", "cpu", "--max-ms", "0", "--min-samples", "1", "--warmup", "0",
                 "--no-l2-flush", "--mode", "greedy", "--shapes", "2x2@64, 1X3@4_8,2x2@64", "-l", "2,full",
                 "--output", str(tmp_path), "--no-charts")
    assert result.exit_code == 0, result.output
    rows = [(r["batch_size"], r["num_spec_tokens"], r["vocab_size"], r["acceptance"]) for r in _records(tmp_path)]
    assert rows == [(2, 2, 64, "2"), (2, 2, 64, "full"), (1, 3, 48, "2"), (1, 3, 48, "full")]  # a repeat runs once
    models = run("kernels", "--device", "cpu", "--max-ms", "0", "--min-samples", "1", "--warmup", "0",
                 "--no-l2-flush", "--mode", "synthetic", "--shapes", "1x2@gemma3", "--output", str(tmp_path / "m"),
                 "--no-charts")
    assert models.exit_code == 0, models.output
    assert {(r["model"], r["vocab_size"], r["num_spec_tokens"]) for r in _records(tmp_path / "m")} == {
        ("gemma3", 262144, 2)}


def test_placements_reach_the_timer_and_the_timing_settings(tmp_path, monkeypatch):
    # the help's numbers are the code's
    assert timing.DEFAULT_PLACEMENTS == 40 and bench.PLACEMENT_BYTES == 64 << 20
    configs = []
    real_run = bench.run_benchmark
    monkeypatch.setattr(bench, "run_benchmark", lambda cases, impls, **kw: configs.append(kw["config"]) or
                        real_run(cases, impls, **kw))
    for name, extra in (("default", []), ("ten", ["--placements", "10"])):
        result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--no-charts", "-o",
                     str(tmp_path / name), *extra)
        assert result.exit_code == 0, result.output
    assert [config.placements for config in configs] == [40, 10]
    timing_of = {name: json.loads((tmp_path / name / "results.json").read_text())["metadata"]["timing"]
                 for name in ("default", "ten")}
    assert timing_of["default"]["placements"] == 40 and timing_of["ten"]["placements"] == 10
    assert {r["placements"] for r in _records(tmp_path / "ten")} == {1}  # a CPU row has one placement
    resumed = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1,2", "--no-charts", "-o",
                  str(tmp_path / "ten"), "--resume")
    assert resumed.exit_code == 2 and "timing" in _one_line(resumed.stderr)  # a resume keeps the placements
    # a folder written before placements were recorded ran ten: it resumes with ten, not with the default
    path = tmp_path / "default" / "results.json"
    payload = json.loads(path.read_text())
    del payload["metadata"]["timing"]["placements"]
    path.write_text(json.dumps(payload))
    assert results.UNRECORDED == {"timing": {"placements": 10}}
    older = ["kernels", *TINY, "--mode", "greedy", "--batch-size", "1,2", "--no-charts", "-o", str(tmp_path / "default"),
             "--resume"]
    refused = run(*older)
    assert refused.exit_code == 2 and "timing setting placements = 40 differs" in _one_line(refused.stderr)
    resumed = run(*older, "--placements", "10")
    assert resumed.exit_code == 0, resumed.output
    assert [r["batch_size"] for r in _records(tmp_path / "default")] == [1, 2]


@needs_no_gpu
def test_options_without_effect_on_a_cpu_run_are_noted(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # --interpret sets it: put back after the test
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "--placements", "5",
                 "--interpret", "--no-charts", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    said = _one_line(result.stdout)
    assert ("note: --placements 5 has no effect here: placements copy a small GPU case's inputs, and a CPU run times "
            "every row on one (its rows say placements 1)") in said
    assert "note: --interpret has no Triton implementation to run here (torch): the rows run on the CPU as without it"\
        in said and "default V" not in said  # --vocab-size given
    assert {r["placements"] for r in _records(tmp_path)} == {1}


def test_a_scenario_sets_k_and_the_rates(tmp_path):
    scenario = tmp_path / "eagle.toml"
    scenario.write_text('name = "eagle"\nrates = [0.75, 0.5]\n')
    out = tmp_path / "out"
    result = run("kernels", *TINY, "--scenario", str(scenario), "--mode", "greedy", "--batch-size", "4",
                 "--output", str(out), "--no-charts")
    assert result.exit_code == 0, result.output
    (record,) = _records(out)
    assert record["num_spec_tokens"] == 2 and record["acceptance"] == "eagle"
    assert record["acceptance_length"] == pytest.approx(2.25)
    assert record["measured_acceptance_length"] == pytest.approx(2.25)  # 4 requests: A = 0, 1, 2, 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "warp"], "unknown mode 'warp'"),
        (["--model", "gpt-5"], "unknown model 'gpt-5'"),
        (["--impl", "torch,tensorrt-llm"], "unknown implementation 'tensorrt-llm'"),
        (["--vocab-size", "100", "--model", "llama3"], "give --vocab-size or --model, not both"),
        (["--batch-size", "1,x"], "--batch-size takes comma-separated whole numbers, got 'x'"),
        (["--batch-size", "0"], "--batch-size values must be at least 1, got 0"),
        (["--batch-size", "1,,8"], "--batch-size takes comma-separated values, got '1,,8'"),
        (["--num-spec-tokens", "3", "--acceptance-length", "5"], "mean acceptance length must lie in [1, 4] for K=3"),
        (["--acceptance-length", "lots"], "--acceptance-length takes a number, got 'lots'"),
        (["--dtype", "float8"], "unknown dtype 'float8'"),
        (["--draft", "hidden"], "unknown draft kind 'hidden'"),
        (["--vocab-size", "1"], "--vocab-size values must be at least 2, got 1"),
        (["--scenario", "no-such-scenario"], "scenario file 'no-such-scenario' does not exist"),
        (["--scenario", "default", "--acceptance-length", "2"], "give --scenario or --acceptance-length"),
        (["--resume"], "--resume needs --output DIR"),
        (["--device", "gpu"], "device must be one of auto, cpu, cuda, got 'gpu'"),
        (["--interpret", "--device", "cuda"], "--interpret runs Triton on the CPU"),
        (["--max-samples", "1", "--min-samples", "5"], "maximum samples must be at least the minimum (5), got 1"),
        (["--max-ms", "soon"], "--max-ms takes a number, got 'soon'"),
        (["--seed", "1,2"], "--seed takes one whole number, got '1,2'"),
        (["-k", "1000000000000000000"], "K (draft tokens per step) must be at most 64, got 1000000000000000000"),
        (["-k", "65", "-l", "2"], "K (draft tokens per step) must be at most 64, got 65"),
        (["--placements", "0"], "--placements must be at least 1, got 0"),
        (["--placements", "101"], "--placements must be between 1 and 100, got 101"),
        (["--seed", "abc"], "--seed takes one whole number, got 'abc'"),
        (["--warmup", "-1"], "--warmup must be at least 0, got -1"),
        (["--max-ms", "-1"], "--max-ms must be 0 or more (milliseconds a case may sample for), got -1"),
        (["--max-ms", "nan"], "--max-ms must be 0 or more (milliseconds a case may sample for), got nan"),
        (["--devices", ""], "--devices needs all or GPU indices such as 0,1, got ''"),
        (["--placements", "4,8"], "--placements takes one whole number, got '4,8'"),
        (["--shapes", "1x3"], "--shapes takes BxK@MODEL or BxK@V"),
        (["--shapes", "0x3@llama3"], "--shapes takes BxK@MODEL or BxK@V"),
        (["--shapes", "1x65@llama3"], "--shapes takes BxK@MODEL or BxK@V"),
        (["--shapes", "1xk@llama3"], "--shapes takes BxK@MODEL or BxK@V"),
        (["--shapes", "1x3@gpt-5"], "unknown model 'gpt-5'"),
        (["--shapes", "1x3@1"], "vocabulary size must be at least 2"),
        (["--shapes", "1x3@²"], "unknown model '²'"),
        (["--shapes", "1x1@64", "--device", "cpu"], "got K = 1 in --shapes 1x1@64; pass --acceptance-length"),
        (["--shapes", "1x3@64", "-b", "8"], "so it cannot be combined with --batch-size"),
        (["--shapes", "1x3@64", "--scenario", "default"], "cannot be combined with --scenario"),
        (["--shapes", "1x3@64", "--tree", "2x2"], "cannot be combined with --tree"),
        (["--shapes", "1x3@64", "--quick"], "--quick runs a fixed grid, so it cannot be combined with --shapes"),
        (["--output", ""], "--output needs a folder name, got ''"),
        (["-o", " ", "--resume"], "--output needs a folder name, got ' '"),
        (["--inputs", "natural", "--mode", "probabilistic", "-l", "2"],
         ("--inputs natural sets its own acceptance (drafts drawn from the target's logits plus noise, see "
          "--draft-noise), so it cannot be combined with --acceptance-length; drop one of them")),
        (["--inputs", "natural", "--mode", "probabilistic", "--schedule", "geometric"],
         "so it cannot be combined with --schedule"),
    ],
)
def test_bad_options_get_one_sentence_and_exit_2(args, message):
    result = run("kernels", *args)
    assert result.exit_code == 2
    assert message in _one_line(result.stderr)
    assert result.stderr.startswith("error:") and "Traceback" not in result.output


@needs_no_gpu
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cuda-graph"], "--cuda-graph needs a CUDA GPU, and this run is on the CPU"),
        (["--device", "cuda"], "device 'cuda' was asked for, but torch sees no CUDA GPU"),
        (["--impl", "triton"], "no implementation can run here (triton: no GPU here"),
        (["--timer", "host-free"], "--timer host-free needs a CUDA GPU; a CPU run times every row with perf_counter"),
        (["--timer", "perf_counter,stopwatch"],
         "--timer takes perf_counter on the CPU (host-free, cold-graph, events, graph on a CUDA GPU), got 'stopwatch'"),
        (["--timer", "perf_counter,graph"], "--timer graph needs a CUDA GPU"),
        (["--timer", "graph", "--no-cuda-graph"], "give --timer or --cuda-graph/--no-cuda-graph, not both"),
    ],
)
def test_asking_for_a_gpu_on_a_cpu_machine_is_refused_cleanly(args, message):
    result = run("kernels", *args)
    assert result.exit_code == 2 and message in _one_line(result.stderr)


def test_an_existing_results_folder_needs_resume(tmp_path):
    (tmp_path / "results.json").write_text('{"metadata": {}, "records": []}')
    result = run("kernels", "--output", str(tmp_path))
    assert result.exit_code == 2 and "already holds results.json; pass --resume" in _one_line(result.stderr)


def test_a_wrong_implementation_is_shown_as_fail_and_not_timed(tmp_path, monkeypatch):
    from specbench.implementations import Implementation, builtin
    from specbench.verification import verify

    def prepare(kwargs):
        def call():
            result = verify(**kwargs, backend="torch")
            return result._replace(num_accepted=result.num_accepted + 1)

        return call

    monkeypatch.setitem(builtin.BUILT_IN, "wrong", Implementation("wrong", "off by one", prepare=prepare))
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "2,3", "--impl", "torch,wrong",
                 "--output", str(tmp_path), "--no-charts")
    assert result.exit_code == 1
    # one implementation, failed in two rows: counted once
    assert "FAIL" in result.stdout
    assert ("FAIL: 1 implementation (wrong) disagrees with the torch reference in 2 rows (see the FAIL rows above); "
            "those rows were not timed") in _one_line(result.stderr)
    wrong = [r for r in _records(tmp_path) if r["impl"] == "wrong"]
    assert [(r["status"], r["median_us"]) for r in wrong] == [("FAIL", None)] * 2
    assert wrong[0]["reason"] == "num_accepted differs from the torch reference in 2 of 2 requests"


def test_an_implementation_that_calls_sys_exit_is_a_fail_row_not_the_end_of_the_run(tmp_path, monkeypatch):
    import sys

    from specbench.implementations import Implementation, builtin

    monkeypatch.setitem(builtin.BUILT_IN, "leaves", Implementation("leaves", "exits", prepare=lambda kwargs: sys.exit))
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "2", "--impl", "torch,leaves",
                 "--output", str(tmp_path), "--no-charts")
    assert result.exit_code == 1, result.output
    leaves = [r for r in _records(tmp_path) if r["impl"] == "leaves"]
    assert [(r["status"], r["reason"]) for r in leaves] == [("FAIL", "raised SystemExit")]


def test_out_of_memory_is_recorded_as_skipped_and_the_run_goes_on(tmp_path, monkeypatch):
    make_inputs = bench.make_inputs

    def tight_memory(case, device="cpu", seed=0):
        if case.batch_size == 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
        return make_inputs(case, device, seed)

    monkeypatch.setattr(bench, "make_inputs", tight_memory)
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1,3,2", "--impl", "torch",
                 "--output", str(tmp_path), "--no-charts")
    assert result.exit_code == 0, result.output
    rows = [(r["batch_size"], r["status"]) for r in _records(tmp_path)]
    assert rows == [(1, "ok"), (3, "skipped"), (2, "ok")]
    assert "out of memory" in _records(tmp_path)[1]["reason"]


def test_ctrl_c_keeps_finished_rows_and_resume_finishes_the_rest(tmp_path, monkeypatch):
    run_case = bench.run_case
    ran: list[int] = []
    stop_at = [2]

    def interrupted(case, implementations, **keywords):
        if case.batch_size in stop_at:
            raise KeyboardInterrupt
        ran.append(case.batch_size)
        return run_case(case, implementations, **keywords)

    monkeypatch.setattr(bench, "run_case", interrupted)
    args = ["kernels", *TINY, "--mode", "greedy", "--batch-size", "1,2,3", "--impl", "torch"]
    first = run(*args, "--output", str(tmp_path))
    assert first.exit_code == 130 and "continue with --output" in _one_line(first.stdout)
    assert [r["batch_size"] for r in _records(tmp_path)] == [1]
    # marked as such, with the charts of what finished
    assert json.loads((tmp_path / "results.json").read_text())["metadata"]["interrupted"] is True
    assert (tmp_path / "time_vs_batch_L3-float32.png").stat().st_size > 0

    stop_at.clear()
    second = run(*args, "--output", str(tmp_path), "--resume", "--no-charts")
    assert second.exit_code == 0, second.output
    assert [r["batch_size"] for r in _records(tmp_path)] == [1, 2, 3]
    assert ran == [1, 2, 3]  # the finished case was not run again
    assert json.loads((tmp_path / "results.json").read_text())["metadata"]["interrupted"] is False


@needs_no_gpu  # the interpreter must be switched on before triton is first imported
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_interpret_runs_triton_on_the_cpu_and_skips_shapes_too_large(tmp_path):
    result = run("kernels", "--interpret", "--mode", "greedy,synthetic", "--batch-size", "2", "--vocab-size",
                 "48,300000", "--num-spec-tokens", "2", "--acceptance-length", "2", "--max-ms", "0", "--min-samples",
                 "1", "--warmup", "0", "--no-l2-flush", "--output", str(tmp_path), "--no-charts")
    assert result.exit_code == 0, result.output
    rows = {(r["impl"], r["mode"], r["vocab_size"]): r for r in _records(tmp_path)}
    for mode in ("greedy", "synthetic"):
        assert rows[("triton", mode, 48)]["status"] == "ok"
        assert rows[("triton", mode, 48)]["speedup_vs_torch"] > 0
        assert rows[("triton", mode, 300000)]["status"] == "skipped"
        assert "too large for the Triton interpreter" in rows[("triton", mode, 300000)]["reason"]
        assert rows[("torch", mode, 300000)]["status"] == "ok"


@pytest.mark.parametrize(("args", "message"), [
    (["--batch-size", "1000000000000"], "B=1000000000000 K=3 V=64 float32 L=3 needs at least 1,057,982.4 GiB"),
    (["--vocab-size", "1000000000000"], "V=1000000000000 float32 L=3 needs at least 14,901"),
])
def test_a_case_larger_than_memory_is_refused_before_any_input_is_built(tmp_path, args, message, monkeypatch):
    from specbench import machine

    monkeypatch.setattr(machine, "memory_bytes", lambda device: 64 << 30)
    tiny = [a for a in TINY if a not in ("--vocab-size", "64")] if "--vocab-size" in args else TINY
    result = run("kernels", *tiny, *args, "--mode", "greedy", "--impl", "torch", "--output", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    said = _one_line(result.stderr)
    assert message in said and "more than the host's memory (64.0 GiB); use a smaller --batch-size" in said
    assert not (tmp_path / "out").exists()


@needs_no_gpu
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_a_grid_too_large_for_the_interpreter_is_refused(tmp_path):
    result = run("kernels", "--interpret", "--model", "llama3", "--impl", "triton", "--output", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert ("triton would run under the Triton interpreter, which takes at most 262,144 target logits a case "
            "(B x (K+1) x V, a tree's K its N nodes), and the smallest case here has 513,024") in _one_line(result.stderr)


def test_a_run_whose_every_row_was_skipped_keeps_its_files_and_exits_2(tmp_path, monkeypatch):
    def no_memory(case, device="cpu", seed=0):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

    monkeypatch.setattr(bench, "make_inputs", no_memory)
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1,2", "--impl", "torch", "--output",
                 str(tmp_path), "--no-charts")
    assert result.exit_code == 2, result.output
    said = _one_line(result.stderr)
    assert "every row was skipped, nothing was timed (out of memory: CUDA out of memory" in said
    assert [r["status"] for r in _records(tmp_path)] == ["skipped", "skipped"]


def test_env_prints_versions_devices_and_bandwidth():
    result = run("env")
    assert result.exit_code == 0, result.output
    assert torch.__version__ in result.stdout
    assert "cpu copy bandwidth" in result.stdout and "GB/s" in result.stdout
    if not torch.cuda.is_available():
        assert "none (torch sees no CUDA device)" in result.stdout


def test_env_and_run_metadata_name_the_cpu_model(monkeypatch):
    info = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in info.read_text().splitlines()
             if line.startswith("model name")] if info.is_file() else []
    model = results.cpu_model()
    if names:  # Linux: the kernel's name for it, where platform.processor() is often empty
        assert model == " ".join(names[0].split())
    device = results.collect_metadata("cpu")["device"]
    assert device.startswith("cpu (") and model in device  # "cpu" first: compare tells CPU runs by it
    assert model in _one_line(run("env").stdout)
    monkeypatch.setattr(results, "cpu_model", lambda: "")  # nothing names it: the architecture alone
    assert results.device_description("cpu")["device"] == f"cpu ({platform.machine()}, {os.cpu_count()} cores)"


def test_output_folders_of_another_run_are_never_overwritten_or_mixed(tmp_path):
    sweep_dir = tmp_path / "sweep"
    assert run("sweep", "--rates", "0.5", "-n", "1000", "--no-charts", "-o", str(sweep_dir)).exit_code == 0
    before = (sweep_dir / "results.json").read_text()
    again = run("sweep", "--rates", "0.5", "-n", "1000", "--no-charts", "-o", str(sweep_dir))
    assert again.exit_code == 2 and "already holds results.json" in _one_line(again.output)
    resumed = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "--no-charts",
                  "-o", str(sweep_dir), "--resume")
    assert resumed.exit_code == 2 and "holds a sweep run, not a kernels run" in _one_line(resumed.output)
    assert (sweep_dir / "results.json").read_text() == before  # nothing was written

    kernels_dir = tmp_path / "kernels"
    first = ("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "--no-charts")
    assert run(*first, "-o", str(kernels_dir)).exit_code == 0
    other_seed = run(*first, "--seed", "7", "-o", str(kernels_dir), "--resume")
    assert other_seed.exit_code == 2 and "--seed 7 differs" in _one_line(other_seed.output)
    other_timing = run(*first, "--l2-flush", "-o", str(kernels_dir), "--resume")
    assert other_timing.exit_code == 2 and "l2_flush = True differs" in _one_line(other_timing.output)
    more = run(*first[:-5], "--batch-size", "1,2", "--impl", "torch", "--no-charts", "-o", str(kernels_dir), "--resume")
    assert more.exit_code == 0, more.output
    metadata = json.loads((kernels_dir / "results.json").read_text())["metadata"]
    # the metadata is the last run's, and lists the run before it (command, commit, versions, time)
    assert [sorted(earlier) for earlier in metadata["earlier_runs"]] == [sorted(results.EARLIER_RUN_FIELDS)]
    assert sorted(r["batch_size"] for r in _records(kernels_dir)) == [1, 2]


@pytest.mark.parametrize("name", ["results.csv", "results_long.csv"])
@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_a_folder_holding_another_runs_table_alone_is_not_overwritten(tmp_path, name, resume):
    (tmp_path / name).write_text("impl,median_us\ntorch,1.0\n")
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "--no-charts", "-o",
                 str(tmp_path), *resume)
    assert result.exit_code == 2
    assert (f"{tmp_path} already holds {name}, another run's table (without a results.json to resume): choose "
            f"another --output") in _one_line(result.stderr)
    assert (tmp_path / name).read_text() == "impl,median_us\ntorch,1.0\n" and not (tmp_path / "results.json").exists()


def test_a_resumed_run_keeps_the_threads_it_was_timed_with(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "cpu_count", lambda: 4)
    first = ("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "--no-charts", "-o",
             str(tmp_path))
    assert run(*first, "--threads", "1").exit_code == 0
    before = (tmp_path / "results.json").read_text()
    more = run(*first, "--threads", "2", "--batch-size", "2", "--resume")
    assert more.exit_code == 2
    assert f"--threads 2 differs from the run in {tmp_path} (1); resume it with the same --threads" in _one_line(
        more.stderr)
    assert (tmp_path / "results.json").read_text() == before
    # a folder from before runs recorded their threads: said so, not "none given"
    payload = json.loads(before)
    del payload["metadata"]["threads"]
    (tmp_path / "results.json").write_text(json.dumps(payload))
    old = run(*first, "--threads", "1", "--resume")
    assert old.exit_code == 2 and "holds a run that did not record its --threads" in _one_line(old.stderr)


def test_runs_started_in_the_same_second_get_their_own_default_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folders = {results.default_output_dir("sweep") for _ in range(3)}
    assert len(folders) == 3 and all(folder.is_dir() for folder in folders)


def test_unwritable_outputs_and_plot_targets_get_one_sentence(tmp_path):
    blocked = tmp_path / "blocked"
    (blocked / "results.json.tmp").mkdir(parents=True)  # the results file cannot be written there
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "-o", str(blocked))
    assert result.exit_code == 2 and "cannot write results into" in _one_line(result.output)
    assert "Traceback" not in result.output

    done = tmp_path / "done"
    assert run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "--no-charts",
               "-o", str(done)).exit_code == 0
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    plotted = run("plot", str(done), "-o", str(a_file))
    assert plotted.exit_code == 2 and "is a file, not a folder" in _one_line(plotted.output)


def test_an_implementation_named_twice_is_timed_once_and_large_seeds_work(tmp_path):
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "2", "--impl", "torch,torch", "--no-charts",
                 "--seed", str(2**62 - 1), "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert [r["impl"] for r in _records(tmp_path)] == ["torch"]
    too_big = run("kernels", *TINY, "--seed", str(2**62), "-o", str(tmp_path / "x"))
    assert too_big.exit_code == 2 and "[0, 2**62)" in _one_line(too_big.output)


def test_a_default_acceptance_length_too_long_for_k_says_it_is_the_default(tmp_path):
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--num-spec-tokens", "1", "-o",
                 str(tmp_path))
    message = _one_line(result.output)
    assert result.exit_code == 2 and "default --acceptance-length" in message and "--num-spec-tokens 1" in message
    given = run("kernels", *TINY, "--num-spec-tokens", "1", "--acceptance-length", "3", "-o", str(tmp_path))
    assert given.exit_code == 2 and "default" not in _one_line(given.output)


def test_rows_whose_samples_spread_widely_are_marked_and_explained(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    from specbench import cli_bench

    assert run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1,2", "--impl", "torch", "--no-charts",
               "-o", str(tmp_path)).exit_code == 0
    records = _records(tmp_path)
    records[0].update(p20_us=10.0, p80_us=35.0)  # spread 3.5x: a busy machine
    records[1].update(p20_us=10.0, p80_us=15.0)
    printed = io.StringIO()
    monkeypatch.setattr(cli_bench, "console", Console(file=printed, width=200))
    cli_bench._print_table(records)
    text = printed.getvalue()
    assert "10.0-35.0 ~" in text and "10.0-15.0 ~" not in text and "1 rows have p80 above 2x p20" in text


def test_schedule_shapes_the_inputs_and_threads_and_load_are_recorded(tmp_path):
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "8", "--num-spec-tokens", "3",
                 "--acceptance-length", "2.5", "--schedule", "geometric", "--threads", "1", "--impl", "torch",
                 "--output", str(tmp_path), "--no-charts")
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "results.json").read_text())
    (record,) = payload["records"]
    assert record["acceptance"] == "2.5 geometric" and record["acceptance_length"] == pytest.approx(2.5)
    # the geometric schedule spreads A over 0..3; the planned counts of 8 requests follow it
    assert record["measured_acceptance_length"] == pytest.approx(2.5, abs=1 / 16)
    metadata = payload["metadata"]
    assert metadata["threads"] == 1
    assert isinstance(metadata["load_average_start"], float) and isinstance(metadata["load_average_end"], float)
    for args, message in ((["--threads", "0"], "(the CPU cores this process may run on), got 0"),
                          (["--schedule", "flat"], "schedule must be one of min-variance, geometric, got 'flat'"),
                          (["--scenario", "default", "--schedule", "geometric"], "give --scenario or")):
        bad = run("kernels", *args)
        assert bad.exit_code == 2 and message in _one_line(bad.stderr), bad.output


@pytest.mark.parametrize(("args", "message"), [
    (["--mode", "greedy", "--draft", "probs,none"], ("--draft probs,none changes nothing outside the probabilistic "
     "mode (only the probabilistic mode takes a draft distribution), and this run has only greedy cases")),
    (["--mode", "greedy", "--method", "typical"], ("--method typical changes nothing outside the probabilistic mode "
     "(the greedy cases keep the argmax whatever the method), and this run has only greedy cases; add --mode "
     "probabilistic, or drop --method typical")),
    (["--mode", "synthetic,greedy", "--method", "token,block"], ("(the synthetic cases accept by their profile and "
     "the greedy cases keep the argmax whatever the method), and this run has only synthetic and greedy cases")),
])
def test_draft_kinds_and_methods_without_a_probabilistic_case_are_refused(tmp_path, args, message):
    result = run("kernels", *TINY, *args, "--impl", "torch", "--no-charts", "-o", str(tmp_path / "r"))
    assert result.exit_code == 2 and message in _one_line(result.stderr), result.output
    assert not (tmp_path / "r").exists()


def test_a_method_beside_greedy_cases_is_noted_as_applying_to_the_probabilistic_ones(tmp_path):
    result = run("kernels", *TINY, "--mode", "greedy,probabilistic", "--method", "token,typical", "-b", "1", "-k", "2",
                 "--impl", "torch", "--no-charts", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert ("note: the greedy cases keep the argmax whatever the method: --method typical applies to the "
            "probabilistic cases") in _one_line(result.output)
    assert sorted((r["mode"], r["method"]) for r in _records(tmp_path)) == [
        ("greedy", "token"), ("probabilistic", "token"), ("probabilistic", "typical")]


def test_the_table_shows_the_expected_length_beside_the_measured_one(tmp_path):
    # synthetic: drawn at the profile's rates, so one request measures a whole number around L = 2.5
    result = run("kernels", *TINY, "--mode", "synthetic,greedy", "--batch-size", "1", "--acceptance-length", "2.5",
                 "--impl", "torch", "--no-charts", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    by_mode = {r["mode"]: r for r in _records(tmp_path)}
    assert by_mode["synthetic"]["expected_acceptance_length"] == 2.5
    assert by_mode["synthetic"]["measured_acceptance_length"] in (1.0, 2.0, 3.0, 4.0)
    # greedy at B = 1: one request is planned a whole number of drafts, the nearest the profile allows
    assert by_mode["greedy"]["expected_acceptance_length"] == by_mode["greedy"]["measured_acceptance_length"]
    assert by_mode["greedy"]["expected_acceptance_length"] in (2.0, 3.0)
    assert "expected L" in result.output and "measured L" in result.output


def test_timers_choose_the_rows_of_a_gpu_run_and_the_graph_option_still_works():
    from specbench import cli_bench

    grid = cli_bench.Grid(gpu=True, interpret=False)
    assert cli_bench._timers(None, None, True, grid) == ("cold-graph", [False, True])  # the GPU default
    assert cli_bench._timers("events,graph", None, True, grid) == ("events", [False, True])
    assert cli_bench._timers("graph", None, True, grid) == ("cold-graph", [True])
    assert cli_bench._timers("host-free,graph", None, True, grid) == ("host-free", [False, True])
    assert cli_bench._timers("events", None, True, grid) == ("events", [False])
    assert cli_bench._timers(None, False, True, grid) == ("cold-graph", [False])  # --no-cuda-graph
    assert cli_bench._timers(None, True, True, grid) == ("cold-graph", [False, True])  # --cuda-graph
    assert cli_bench._timers("cold-graph,graph", None, True, grid) == ("cold-graph", [False, True])
    for text, said in (("events,host-free", "--timer takes one of host-free, cold-graph and events, not more"),
                       ("cold-graph,host-free", "--timer takes one of host-free, cold-graph and events, not more"),
                       ("cupti", "--timer takes host-free, cold-graph, events, graph on a GPU, got 'cupti'"),
                       ("perf_counter", "--timer takes host-free, cold-graph, events, graph on a GPU, got 'perf_counter'")):
        with pytest.raises(SpecbenchError, match=said):
            cli_bench._timers(text, None, True, grid)


def test_a_cpu_run_names_its_timer_in_every_row_and_in_the_metadata(tmp_path):
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--timer", "perf_counter", "--no-charts",
                 "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    payload = json.loads((tmp_path / "results.json").read_text())
    assert payload["metadata"]["timing"]["timers"] == ["perf_counter"]
    assert {(r["timer"], r["backlog_ran_out"]) for r in payload["records"] if r["status"] == "ok"} == {
        ("perf_counter", None)}
    assert "perf_counter" in _one_line(result.output)


def test_the_table_marks_a_cold_row_below_the_dram_floor_and_counts_backlogs_that_ran_out(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    from specbench import cli_bench

    assert run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1,2", "--impl", "torch", "--no-charts",
               "-o", str(tmp_path)).exit_code == 0
    records = _records(tmp_path)
    records[0].update(median_us=12.5, timer="host-free", cache="cold", below_dram_floor=True, backlog_ran_out=3)
    records[1].update(median_us=40.0, timer="graph", cache="warm", below_dram_floor=None, backlog_ran_out=0)
    printed = io.StringIO()
    monkeypatch.setattr(cli_bench, "console", Console(file=printed, width=250))
    cli_bench._print_table(records)
    text = _one_line(printed.getvalue())
    assert "12.5 !" in text and "40.0 !" not in text and "host-free cold, 3 ran out" in text and "graph warm" in text
    assert "1 cold rows have a median more than 1.25x below the bytes the case must move" in text
    assert "in 1 rows the GPU's backlog ran out in some samples" in text


def test_a_run_without_charts_loads_neither_the_sweeps_statistics_nor_matplotlib_nor_pandas(tmp_path):
    # every start pays its imports, each `--devices` worker too: scipy.stats (the sweep's, reached through its
    # device check) and matplotlib are most of a second each, pandas (once the CSV writer's) 0.3-0.4 s, and a
    # kernels run without charts needs none of them
    import subprocess
    import sys

    heavy = ("scipy.stats", "matplotlib.pyplot", "specbench.sweep", "pandas")
    arguments = ["kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "--no-charts", "-o",
                 str(tmp_path / "run")]
    code = (f"import sys; from specbench.cli import run; status = run({arguments!r}); "
            f"print(status, [m for m in {heavy!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []", done.stdout
    assert len(_records(tmp_path / "run")) == 1


def test_a_repeated_impl_adds_to_the_list_as_a_comma_does(tmp_path):
    result = run("kernels", *TINY, "--mode", "probabilistic", "--draft", "logits", "--batch-size", "1", "--impl",
                 "torch", "--impl", "textbook,torch", "--impl", "torch", "--no-charts", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert [r["impl"] for r in _records(tmp_path)] == ["torch", "textbook"]  # each once, in the order given
    empty = run("kernels", *TINY, "--impl", "torch", "--impl", "", "-o", str(tmp_path / "x"))
    assert empty.exit_code == 2 and "--impl takes comma-separated values, got ''" in _one_line(empty.output)


def test_devices_workers_are_given_every_repeated_impl():
    import typer

    from specbench import cli_bench

    command = typer.main.get_command(app).commands["kernels"]
    ctx = command.make_context("kernels", ["--impl", "torch", "--impl", "textbook", "--batch-size", "1"])
    assert cli_bench._worker_arguments(ctx) == ["--batch-size", "1", "--impl", "torch", "--impl", "textbook"]


def test_resume_into_a_folder_with_nothing_to_resume_says_it_starts_fresh(tmp_path):
    out = tmp_path / "new"
    result = run("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "--no-charts",
                 "-o", str(out), "--resume")
    assert result.exit_code == 0, result.output
    assert f"note: --resume: {out}/ holds no finished row, so there is nothing to resume" in _one_line(result.stderr)
    assert len(_records(out)) == 1


def test_resume_with_every_row_done_says_nothing_was_left_to_run(tmp_path):
    args = ("kernels", *TINY, "--mode", "greedy", "--batch-size", "1", "--impl", "torch", "--no-charts", "-o",
            str(tmp_path))
    assert run(*args).exit_code == 0
    result = run(*args, "--resume")
    assert result.exit_code == 0, result.output
    said = _one_line(result.stdout)
    assert f"writing to {tmp_path}/ (1 row already there is kept, not run again)" in said
    assert f"nothing was left to run: every row of this grid was already in {tmp_path}/" in said
    assert "median µs" not in said  # no empty table
    assert len(_records(tmp_path)) == 1
