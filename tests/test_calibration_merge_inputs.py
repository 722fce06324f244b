"""What `specbench calibrate` and `specbench merge` refuse in their inputs, on the committed CPU runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import edited_run
from typer.testing import CliRunner

from specbench.cli import app

runner = CliRunner()
BASELINES = Path(__file__).resolve().parent.parent / "results" / "baselines"
# two A/A runs of one commit (torch built in), and a run of that commit timing examples/slower_torch.py as torch
RUN_A, RUN_B, PLANTED = (BASELINES / name for name in ("cpu-quick-a", "cpu-quick-b", "cpu-quick-planted"))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _calibrate(tmp_path: Path, *runs: Path):
    result = runner.invoke(app, ["calibrate", *map(str, runs), "-o", str(tmp_path / "cal.json")])
    assert "Traceback" not in result.output
    return result


def test_two_runs_of_one_commit_calibrate(tmp_path):
    # the control for the refusals below: the committed A/A pair is accepted
    result = _calibrate(tmp_path, RUN_A, RUN_B)
    assert result.exit_code == 0, result.output
    assert "20 cases calibrated from 2 runs" in _one_line(result.output)


def test_runs_of_one_implementation_from_different_code_are_not_an_aa_set(tmp_path):
    # the planted run times a plugin 1.5x as slow under the name torch: calibrated, thresholds reached 16966%
    result = _calibrate(tmp_path, RUN_A, PLANTED)
    assert result.exit_code == 2, result.output
    assert (f"{RUN_A} takes the implementation torch from built-in and {PLANTED} from "
            f"examples/slower_torch.py:slower_torch: an A/A calibration needs runs of the same code"
            in _one_line(result.stderr))
    assert not (tmp_path / "cal.json").exists()


def test_runs_of_different_implementations_are_not_an_aa_set(tmp_path):
    other = edited_run(RUN_B, tmp_path / "other", lambda p: p["metadata"].update(implementations=["torch", "triton"]))
    result = _calibrate(tmp_path, RUN_A, other)
    assert result.exit_code == 2, result.output
    assert (f"{RUN_A} times the implementations torch and {other} torch, triton: an A/A calibration needs runs of "
            f"one command" in _one_line(result.stderr))


def test_a_copy_of_a_run_is_the_run_given_twice(tmp_path):
    # a copy has the run's creation time and its samples: it once calibrated every case at the 2% floor
    copy = shutil.copytree(RUN_A, tmp_path / "copy")
    result = _calibrate(tmp_path, RUN_A, RUN_B, copy)
    assert result.exit_code == 2, result.output
    assert (f"{copy} is the run {RUN_A} again (created 2026-11-24T22:52:58+00:00, with the same timings): an A/A "
            f"calibration needs each run once" in _one_line(result.stderr))


@pytest.mark.parametrize("change, words", [
    (lambda p: p["metadata"].update(threads=4), "differ in threads (1 vs 4), which changes what a timing sample"),
    (lambda p: p["records"][1].update(median_us=-3.0),
     ("is marked ok but its median_us is -3.0, not a positive number of microseconds: broken timing data, so "
      "nothing is calibrated")),
    (lambda p: p["records"][1].pop("batch_size"), "record 1 lacks the field batch_size, so calibrate cannot tell"),
])
def test_calibrate_words_its_refusals_for_runs_of_one_commit(tmp_path, change, words):
    # they said "(baseline) vs (current)" and "nothing is compared", compare's words for its two runs
    result = _calibrate(tmp_path, RUN_A, edited_run(RUN_B, tmp_path / "edited", change))
    assert result.exit_code == 2, result.output
    said = _one_line(result.stderr)
    assert words in said and "(baseline)" not in said and "nothing is compared" not in said


def _shards(tmp_path: Path) -> list[Path]:
    """RUN_A cut in two shards by hand, as `kernels --shard 1/2` and `--shard 2/2` would have written it."""
    payload = json.loads((RUN_A / "results.json").read_text())
    records = payload["records"]
    folders = []
    for index, part in ((1, records[:10]), (2, records[10:])):
        metadata = {**payload["metadata"], "shard": {"index": index, "count": 2}, "interrupted": False}
        folder = tmp_path / f"shard-{index}"
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps({"metadata": metadata, "records": part}))
        folders.append(folder)
    return folders


def test_merge_refuses_an_empty_output_as_sweep_does(tmp_path, monkeypatch):
    # Path("") is the current folder: merge once wrote results.json and the CSV there, exit 0
    shards = _shards(tmp_path)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for empty in ("", " "):
        result = runner.invoke(app, ["merge", *map(str, shards), "-o", empty, "--no-charts"])
        assert result.exit_code == 2, result.output
        assert f"--output needs a folder name, got {empty!r}" in _one_line(result.stderr)
    assert list(here.iterdir()) == []
    merged = runner.invoke(app, ["merge", *map(str, shards), "-o", str(tmp_path / "merged"), "--no-charts"])
    assert merged.exit_code == 0, merged.output
    assert len(json.loads((tmp_path / "merged" / "results.json").read_text())["records"]) == 20


@pytest.mark.parametrize("change, words", [
    (lambda p: p["records"][3].pop("mode"), "record 3 lacks the field mode, so merge cannot tell which case it is"),
    (lambda p: p["records"][3].update(tree=["2x2"]), 'record 3 has tree ["2x2"] where a string belongs'),
    (lambda p: p["metadata"]["shard"].update(index="1"), "names its shard '1'/2, not two whole numbers"),
])
def test_merge_refuses_a_hand_edited_shard_in_one_sentence(tmp_path, change, words):
    # a record without a field of its key raised a KeyError (exit 70); a list field could not be hashed
    first, second = _shards(tmp_path)
    payload = json.loads((first / "results.json").read_text())
    change(payload)
    (first / "results.json").write_text(json.dumps(payload))
    result = runner.invoke(app, ["merge", str(first), str(second), "-o", str(tmp_path / "merged"), "--no-charts"])
    assert result.exit_code == 2, result.output
    assert words in _one_line(result.stderr) and "Traceback" not in result.output
