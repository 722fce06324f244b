"""Sharded runs on the CPU: `--shard I/N`, `specbench merge`, and `kernels --devices` with real worker processes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from specbench import bench, merge, results, shards
from specbench.cli import app
from specbench.errors import SpecbenchError

runner = CliRunner()
GRID = ["--vocab-size", "64", "--max-ms", "0", "--min-samples", "3", "--warmup", "0", "--no-l2-flush", "--impl",
        "torch", "--mode", "greedy,probabilistic", "--batch-size", "1,2,5", "-k", "2"]
KERNELS = ["kernels", "--device", "cpu", *GRID, "--no-charts"]
SWEEP = ["sweep", "-l", "2.2,2.5", "-k", "2,3", "-n", "3000", "--no-charts"]
needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")


def _invoke(*args: str, code: int = 0):
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


def _cases(folder: Path) -> list[tuple]:
    _, records = results.read_results(folder)
    return [(record["case"], bench.record_key(record)) for record in records]


@pytest.fixture(scope="module")
def kernels_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kernels-shards")
    runs = {"full": root / "full"}
    _invoke(*KERNELS, "-o", str(runs["full"]))
    for index in (1, 2, 3):
        runs[index] = root / f"shard-{index}"
        _invoke(*KERNELS, "--shard", f"{index}/3", "-o", str(runs[index]))
    return runs


def test_shards_deal_the_grid_by_position_and_each_case_runs_once():
    assert shards.parse_shard("2/3") == shards.Shard(2, 3)
    assert [shards.Shard(i, 3).positions(8) for i in (1, 2, 3)] == [[0, 5, 7], [1, 3], [2, 4, 6]]
    # an inner axis of size 2 under two shards: each shard gets both of its values, not one each
    halves = [shards.Shard(i, 2).positions(8) for i in (1, 2)]
    assert halves == [[0, 3, 4, 7], [1, 2, 5, 6]]
    assert all({p % 2 for p in half} == {0, 1} for half in halves)
    for count in (1, 2, 3, 5, 8):
        dealt = [shards.Shard(i, count).positions(23) for i in range(1, count + 1)]
        assert sorted(p for shard in dealt for p in shard) == list(range(23))
        assert max(map(len, dealt)) - min(map(len, dealt)) <= 1
    assert shards.Shard(4, 4).positions(3) == []
    for bad in ("0/3", "4/3", "3", "a/b", "1/0", "-1/2"):
        with pytest.raises(SpecbenchError, match="--shard takes I/N with 1 <= I <= N"):
            shards.parse_shard(bad)


def test_a_merged_sharded_kernels_run_holds_the_unsharded_runs_cases(kernels_runs, tmp_path):
    positions = [json.loads((kernels_runs[i] / "results.json").read_text())["metadata"]["shard"]["cases"]
                 for i in (1, 2, 3)]
    assert positions == [[0, 5], [1, 3], [2, 4]]
    result = _invoke("merge", str(kernels_runs[3]), str(kernels_runs[1]), str(kernels_runs[2]), "-o",
                     str(tmp_path / "merged"), "--no-charts")
    assert "merged 3 of 3 shards: 6 kernels records" in " ".join(result.output.split())
    assert _cases(tmp_path / "merged") == _cases(kernels_runs["full"])
    metadata, _ = results.read_results(tmp_path / "merged")
    assert "shard" not in metadata and metadata["partial"] is False and len(metadata["merged_from"]) == 3
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(results.SCHEMA_FILE.read_text()))
    for folder in (tmp_path / "merged", kernels_runs[1]):
        assert list(validator.iter_errors(json.loads((folder / "results.json").read_text()))) == []
    # the merged run reads like an unsharded one: compare, plot and export take it
    compared = runner.invoke(app, ["compare", str(kernels_runs["full"]), str(tmp_path / "merged")])
    assert compared.exit_code in (0, 1), compared.output
    assert "only in the" not in compared.output and compared.output.count("torch: ") == 6  # every case matched
    _invoke("plot", str(tmp_path / "merged"))
    exported = _invoke("export", str(tmp_path / "merged"), "--format", "bencher")
    assert len(json.loads(exported.stdout)) == 6


def test_a_merged_sharded_sweep_equals_the_unsharded_one(tmp_path):
    _invoke(*SWEEP, "-o", str(tmp_path / "full"))
    for index in (1, 2):
        _invoke(*SWEEP, "--shard", f"{index}/2", "-o", str(tmp_path / f"s{index}"))
    _invoke("merge", str(tmp_path / "s2"), str(tmp_path / "s1"), "-o", str(tmp_path / "merged"), "--no-charts")
    timing = ("simulation_seconds", "positions_per_second")
    _, full = results.read_results(tmp_path / "full")
    merged_metadata, merged = results.read_results(tmp_path / "merged")
    assert [{k: v for k, v in r.items() if k not in timing} for r in merged] == \
        [{k: v for k, v in r.items() if k not in timing} for r in full]
    assert merged_metadata["finished_cases"] == 4
    compared = _invoke("compare", str(tmp_path / "full"), str(tmp_path / "merged"))
    assert compared.output.count("same seed and steps") == 4


def _copy(source: Path, target: Path, **changes) -> Path:
    shutil.copytree(source, target)
    payload = json.loads((target / "results.json").read_text())
    for key, value in changes.items():
        if key == "shard_index":
            payload["metadata"]["shard"]["index"] = value
        else:
            payload["metadata"][key] = value
    (target / "results.json").write_text(json.dumps(payload))
    return target


@pytest.mark.parametrize("change, words", [
    ({"commit": "0123abc"}, "were made at different commits"),
    ({"seed": 7}, "were run with different settings (seed 0 vs 7)"),
    ({"torch": "2.0.0"}, "were run with different settings (torch"),
    ({"device": "NVIDIA H100 80GB HBM3"}, "ran on different machine types (device"),
    ({"shard_index": 1}, "both hold shard 1/3; their cases overlap"),
    ({"interrupted": True}, "the shards are incomplete: the run in"),
])
def test_merge_refuses_slices_that_are_not_one_run(kernels_runs, tmp_path, change, words):
    odd = _copy(kernels_runs[3], tmp_path / "odd", **change)
    result = runner.invoke(app, ["merge", str(kernels_runs[1]), str(kernels_runs[2]), str(odd), "-o",
                                 str(tmp_path / "merged")])
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split()) and result.output.count("error:") == 1
    assert not (tmp_path / "merged").exists()


def test_merge_refuses_an_incomplete_set_unless_allowed_and_an_unsharded_run(kernels_runs, tmp_path):
    result = runner.invoke(app, ["merge", str(kernels_runs[1]), str(kernels_runs[3]), "-o", str(tmp_path / "m")])
    assert result.exit_code == 2 and "shard 2/3 is not among them" in " ".join(result.output.split())
    result = _invoke("merge", str(kernels_runs[1]), str(kernels_runs[3]), "-o", str(tmp_path / "m"), "--allow-partial",
                     "--no-charts")
    assert "partial: shard 2/3 is not among them" in " ".join(result.output.split())
    metadata, records = results.read_results(tmp_path / "m")
    assert metadata["partial"] is True and [r["case"] for r in records] == [0, 2, 4, 5]
    result = runner.invoke(app, ["merge", str(kernels_runs["full"]), str(kernels_runs[1])])
    assert result.exit_code == 2 and "was not run with --shard" in result.output
    # nor into a folder that holds a run, kept compressed or not
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "results.json.gz").write_bytes(b"")
    result = runner.invoke(app, ["merge", str(kernels_runs[1]), str(kernels_runs[2]), str(kernels_runs[3]), "-o",
                                 str(kept)])
    assert result.exit_code == 2 and "already holds a results file" in " ".join(result.output.split())
    # a case held by two folders (a shard relabelled) is an overlap too
    twin = _copy(kernels_runs[1], tmp_path / "twin", shard_index=2)
    with pytest.raises(SpecbenchError, match="both hold the case torch: greedy B=1"):
        merge.merge_runs([kernels_runs[1], twin, kernels_runs[3]], tmp_path / "m2")


def test_resuming_a_shard_under_another_shard_names_both_as_given(tmp_path):
    out = tmp_path / "run"
    first = runner.invoke(app, [*SWEEP, "--shard", "1/2", "-o", str(out)])
    assert first.exit_code == 0, first.output
    for shard, said in ((["--shard", "2/2"], "--shard 2/2 differs from the run in"),
                        ([], "--shard none given differs from the run in")):
        again = runner.invoke(app, [*SWEEP, *shard, "-o", str(out), "--resume"])
        assert again.exit_code == 2 and said in " ".join(again.output.split()), again.output
        assert "(1/2); resume it with the same --shard" in " ".join(again.output.split()) and "{" not in again.output


def test_a_bad_shard_option_is_one_sentence_and_exit_2(tmp_path):
    for command in (KERNELS, SWEEP):
        result = runner.invoke(app, [*command, "--shard", "3/2", "-o", str(tmp_path / command[0])])
        assert result.exit_code == 2, result.output
        assert "--shard takes I/N with 1 <= I <= N" in " ".join(result.output.split())
    result = runner.invoke(app, ["kernels", *GRID, "--devices", "all", "--shard", "1/2"])
    assert result.exit_code == 2 and "cannot be combined with --shard" in " ".join(result.output.split())


@needs_no_gpu
def test_devices_on_a_machine_without_a_gpu_is_refused(tmp_path):
    result = runner.invoke(app, ["kernels", *GRID, "--devices", "all", "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "this process sees no CUDA GPU on this machine" in " ".join(result.output.split())


def test_devices_runs_one_worker_process_per_device_and_merges_them(kernels_runs, tmp_path, monkeypatch):
    # the orchestration of `--devices` with two real worker processes, each told its device is "cpu"
    monkeypatch.setattr(shards, "local_devices", lambda text: ["cpu", "cpu"])
    out = tmp_path / "devices"
    result = _invoke("kernels", *GRID, "--devices", "all", "-o", str(out), "--no-charts")
    assert "2 workers, one per GPU (cpu, cpu)" in " ".join(result.output.split())
    assert _cases(out) == _cases(kernels_runs["full"])
    for index in (1, 2):
        shard_meta, _ = results.read_results(out / "shards" / f"shard-{index}-of-2")
        assert shard_meta["shard"]["index"] == index and shard_meta["interrupted"] is False
        assert (out / "shards" / f"shard-{index}-of-2.log").stat().st_size > 0
    metadata, _ = results.read_results(out)
    assert metadata["shard_count"] == 2 and metadata["timing"]["min_samples"] == 3  # options reached the workers
    # a worker that fails is named, with its last line and its log
    result = runner.invoke(app, ["kernels", *GRID[:-2], "-k", "99", "--devices", "all", "-o", str(tmp_path / "bad")])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "the worker of shard 1/2 on device cpu exited with status 2" in said and "its log is" in said


def test_devices_name_the_gpus_as_this_process_sees_them(monkeypatch):
    # torch's index 1 under CUDA_VISIBLE_DEVICES=5,7 is physical GPU 7: a worker must be given "7"
    monkeypatch.setattr(shards, "_gpu_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    assert shards.local_devices("all") == ["5", "7"] and shards.local_devices("1") == ["7"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert shards.local_devices("all") == ["0", "1"] and shards.local_devices("1,0") == ["1", "0"]
    for bad, words in (("2", "GPU indices below 2"), ("0,0", "names GPU 0 twice"), ("x", "GPU indices below 2")):
        with pytest.raises(SpecbenchError, match=words):
            shards.local_devices(bad)


def test_the_gpus_are_counted_from_nvidia_smi_cut_to_the_visible_ones_else_by_torch(monkeypatch, tmp_path):
    # a fake nvidia-smi listing four cards: all four, or as many as CUDA_VISIBLE_DEVICES names
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\nprintf 'GPU-a\\nGPU-b\\nGPU-c\\nGPU-d\\n'\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert shards._gpu_count() == 4
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert shards._gpu_count() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert shards._gpu_count() == 0
    # no nvidia-smi on the PATH: torch counts
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert shards._gpu_count() == 3


def test_a_shard_beyond_the_grid_runs_nothing_and_still_merges(tmp_path):
    # more shards than cases (a Slurm array wider than the grid): the spare shard finishes empty
    for command, name in ((["sweep", "-l", "2.5", "-k", "2", "-n", "3000", "--no-charts"], "sweep"),
                          (["kernels", "--device", "cpu", *GRID[:8], "--impl", "torch", "--mode", "greedy",
                            "--batch-size", "1", "-k", "2", "--no-charts"], "kernels")):
        for index in (1, 2):
            _invoke(*command, "--shard", f"{index}/2", "-o", str(tmp_path / f"{name}-{index}"))
        metadata, records = results.read_results(tmp_path / f"{name}-2")
        assert records == [] and metadata["shard"]["cases"] == [] and metadata["interrupted"] is False
        _invoke("merge", str(tmp_path / f"{name}-1"), str(tmp_path / f"{name}-2"), "-o", str(tmp_path / f"{name}-m"),
                "--no-charts")
        assert len(results.read_results(tmp_path / f"{name}-m")[1]) == 1


def test_merged_from_names_the_gpu_each_shard_ran_on(kernels_runs, tmp_path):
    # --devices gives each worker its own card: the merged run says which card ran which slice, and cards of
    # one type (same name, SMs, memory) merge, however their UUIDs differ
    copies = [_copy(kernels_runs[index], tmp_path / f"gpu-{index}", gpu_uuid=f"GPU-{index}") for index in (1, 2, 3)]
    merged = merge.merge_runs(copies, tmp_path / "merged")
    assert [entry["gpu_uuid"] for entry in merged.metadata["merged_from"]] == ["GPU-1", "GPU-2", "GPU-3"]


def test_a_workers_driver_is_the_parents(monkeypatch):
    monkeypatch.setenv("SPECBENCH_DRIVER", "580.159.04")
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi to ask
    assert results.nvidia_driver() == "580.159.04"
    monkeypatch.delenv("SPECBENCH_DRIVER")
    assert results.nvidia_driver() == "unknown"


def test_a_gpus_uuid_is_recorded_where_torch_reports_it():
    from types import SimpleNamespace

    assert results._uuid(SimpleNamespace(uuid="3f2a-11")) == "GPU-3f2a-11"
    assert results._uuid(SimpleNamespace()) is None


def test_workers_start_before_the_parent_loads_what_follows_them_and_a_failed_load_stops_none(tmp_path, monkeypatch):
    # what follows the workers (the charts) loads while they run, not after them; the commit and the driver are
    # asked once for all workers; a module that cannot load stops no worker (it is said where it is used)
    events = []

    class Process:
        def __init__(self, command, env, **_):
            events.append(("start", command[command.index("--shard") + 1], env["SPECBENCH_COMMIT"],
                           env["SPECBENCH_DRIVER"]))

        def wait(self, timeout=None):
            events.append(("wait",))
            return 0

        def poll(self):
            return 0

    def load(name):
        events.append(("load", name))
        raise ImportError(f"no module named {name!r}")

    commits = iter(["abc1234", "other"])
    monkeypatch.setattr(shards.subprocess, "Popen", Process)
    monkeypatch.setattr(shards.importlib, "import_module", load)
    monkeypatch.setattr(results, "git_commit", lambda: next(commits))
    drivers = iter(["580.159.04", "other"])
    monkeypatch.setattr(results, "nvidia_driver", lambda: next(drivers))
    workers = shards.run_workers(["--quick"], ["0", "1"], tmp_path, meanwhile=("no_such_module",))
    assert events == [("start", "1/2", "abc1234", "580.159.04"), ("start", "2/2", "abc1234", "580.159.04"),
                      ("load", "no_such_module"), ("wait",), ("wait",)]
    assert [(worker.shard, worker.device, worker.status) for worker in workers] == [
        (shards.Shard(1, 2), "0", 0), (shards.Shard(2, 2), "1", 0)]


def test_merging_and_reading_records_load_neither_torch_nor_pandas():
    # --devices' parent and `specbench merge` read records only: torch and pandas would cost seconds a process
    import subprocess
    import sys

    code = ("import sys; import specbench.merge, specbench.records, specbench.results, specbench.shards; "
            "print(sorted(name for name in ('torch', 'pandas', 'triton') if name in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_the_csv_follows_the_json_at_most_every_second_and_at_every_flush(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "CSV_EVERY_S", 3600.0)
    writer = results.ResultsWriter(tmp_path, {"kind": "test"})
    for index in range(3):
        writer.add({"case": index, "median_us": 1.0 + index})
    assert len(json.loads((tmp_path / results.RESULTS_JSON).read_text())["records"]) == 3  # every record
    assert (tmp_path / results.RESULTS_CSV).read_text().strip() == ""  # the empty run's CSV, not yet rewritten
    writer.flush()
    assert len((tmp_path / results.RESULTS_CSV).read_text().strip().splitlines()) == 1 + 3
    monkeypatch.setattr(results, "CSV_EVERY_S", 0.0)
    writer.add({"case": 3, "median_us": 4.0})
    assert len((tmp_path / results.RESULTS_CSV).read_text().strip().splitlines()) == 1 + 4
    # a missing number is an empty cell, as pandas wrote it; lists are joined; a field some rows lack is empty
    writer.add({"case": 4, "median_us": float("nan"), "rates": [1.5, 2.25], "note": None, "extra": 7})
    lines = (tmp_path / results.RESULTS_CSV).read_text().splitlines()
    assert lines[0] == "case,median_us,rates,note,extra" and lines[1] == "0,1.0,,," and lines[-1] == "4,,1.5;2.25,,7"
