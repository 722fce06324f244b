"""`specbench sweep` through the command line: files, tables, every bad input, Ctrl-C."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from specbench import sweep
from specbench.cli import app
from specbench.cli_sweep import case_table, per_second
from specbench.results import read_results
from specbench.scenarios import DEFAULT_SCENARIO, load_scenario, make_profile

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, ["sweep", *args])


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_sweep_writes_results_charts_and_tables(tmp_path):
    out = tmp_path / "run"
    result = invoke("--rates", "0.9,0.7,0.5", "-n", "20000", "--seed", "4", "-o", str(out))
    assert result.exit_code == 0, result.output
    metadata, records = read_results(out)
    for key in ("specbench", "torch", "triton", "device", "commit", "command", "seed", "positions_per_second"):
        assert key in metadata, key
    assert metadata["seed"] == 4 and metadata["kind"] == "sweep"
    (record,) = records
    assert record["kind"] == "sweep" and record["num_spec_tokens"] == 3 and record["num_requests"] == 20000
    assert record["configured_rates"] == [0.9, 0.7, 0.5] and record["verdict"] == "ok"
    assert (out / "results.csv").is_file() and (out / sweep.LONG_CSV).is_file()
    for name in ("acceptance_per_position.png", "accepted_distribution.png", "expected_speedup.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    text = one_line(result.stdout)
    assert "p_1" in text and "c_3" in text and "P(A=3)" in text and "95% interval" in text
    assert str(out / "results.json") in "".join(result.stdout.split())  # rich may wrap the path


def test_length_range_and_several_k(tmp_path):
    result = invoke("--acceptance-length", "1.5:4.0:0.5", "-k", "3", "-n", "2000", "--no-charts", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    _, records = read_results(tmp_path)
    assert [r["configured_acceptance_length"] for r in records] == [1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    assert records[2]["configured_rates"] == [1.0, 0.5, 0.0]
    assert not list(tmp_path.glob("*.png"))
    result = invoke("-l", "2,3", "-k", "3", "-k", "5", "-n", "2000", "--no-charts", "-o", str(tmp_path / "b"))
    assert result.exit_code == 0, result.output
    _, records = read_results(tmp_path / "b")
    assert [(r["num_spec_tokens"], r["configured_acceptance_length"]) for r in records] == [
        (3, 2.0), (3, 3.0), (5, 2.0), (5, 3.0)]


def test_scenario_file_and_cost_ratio(tmp_path):
    result = invoke("--scenario", str(REPO / "scenarios" / "deepseek-v3-mtp.toml"), "-n", "3000", "--no-charts",
                    "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    metadata, records = read_results(tmp_path)
    assert metadata["scenario"] == "deepseek-v3-mtp"
    assert [r["configured_rates"] for r in records] == [[0.85], [0.9]]
    assert all(r["cost_ratio"] == 0.04 and "2412.19437" in r["source"] for r in records)
    result = invoke("-r", "0.5", "-n", "100", "-c", "0.5", "--no-charts", "-o", str(tmp_path / "c"))
    assert result.exit_code == 0, result.output
    assert read_results(tmp_path / "c")[1][0]["expected_speedup"] == pytest.approx(1.5 / 1.5)


def test_no_options_runs_the_default_scenario(tmp_path, monkeypatch):
    # files the name "default" could resolve to in the current folder: the embedded one runs regardless
    (tmp_path / "default").write_text("not a scenario")
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "default.toml").write_text('source = "a local file"\nrates = [0.1]\n')
    monkeypatch.chdir(tmp_path)
    result = invoke()
    assert result.exit_code == 0, result.output
    (folder,) = (tmp_path / "results").glob("sweep-*")
    metadata, records = read_results(folder)
    assert metadata["scenario"] == "default" and len(records) >= 4
    assert [r["profile"] for r in records] == [p.name for p in load_scenario(DEFAULT_SCENARIO).profiles]
    assert all(r["num_requests"] >= 2_000_000 and r["verdict"] == "ok" for r in records)
    # the default number of steps gives +-0.01 or better on every mean length
    assert all(r["mean_acceptance_length_ci_high"] - r["mean_acceptance_length_ci_low"] <= 0.02 for r in records)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--rates", "0.9,0.7", "--acceptance-length", "2.5"], ["only one of", "--rates 0.9,0.7", "2.5"]),
        (["--alpha", "0.8", "--acceptance-length", "2.5"], ["only one of", "--alpha 0.8"]),
        (["--alpha", "1.5"], ["--alpha", "[0, 1], got 1.5"]),
        (["--alpha", "-0.1,0.5", "-k", "2"], ["--alpha", "got -0.1"]),
        (["-l", "2.5", "--schedule", "uniform"], ["schedule must be one of min-variance, geometric", "'uniform'"]),
        (["-r", "0.5", "--schedule", "geometric"], ["--schedule geometric", "with --acceptance-length"]),
        (["-l", "1.5:4"], ["start:stop:step", "'1.5:4'"]),
        (["-l", "2", "-k", "3:7"], ["--num-spec-tokens range must read start:stop:step", "'3:7'"]),
        (["-r", "0.9:0.5:0.1"], ["--rates takes one profile", "not a start:stop:step range", "'0.9:0.5:0.1'"]),
        (["-l", "2", "-k", "10000"], ["--num-spec-tokens must be at most 64, got 10000"]),
        (["-l", "2", "-k", "1000000000000000000"], ["at most 64, got 1000000000000000000"]),
        (["-r", "0.5", "--threads", "0"], ["--threads", "got 0"]),
        (["-r", "0.5", "--threads", "two"], ["--threads", "'two'"]),
        (["--rates", "0.5,0.7"], ["non-increasing", "[0.5, 0.7]"]),
        (["--rates", "1.2,0.5"], ["[0, 1]", "1.2"]),
        (["--rates", "nan,0.5"], ["nan"]),
        (["--acceptance-length", "nan"], ["mean acceptance length", "nan"]),
        (["--acceptance-length", "5", "-k", "3"], ["[1, 4] for K=3", "got 5"]),
        (["--acceptance-length", "2", "-k", "0"], ["at least 1", "got 0"]),
        (["--rates", "0.9,0.7,0.5", "-k", "5"], ["(5), got 3"]),
        (["--rates", "0.9,abc"], ["--rates", "'0.9,abc'"]),
        (["-l", "4:1.5:0.5"], ["start <= stop", "'4:1.5:0.5'"]),
        (["-l", "1:2:0"], ["step > 0", "'1:2:0'"]),
        (["-l", "1:1000:0.001"], ["'1:1000:0.001' has 999001 values, more than 1000"]),
        (["-l", "2", "-k", "2.5"], ["--num-spec-tokens", "whole numbers", "'2.5'"]),
        (["-k", "3"], ["--num-spec-tokens 3 needs"]),
        # a bad value is named before the option it lacks
        (["-k", "-3"], ["--num-spec-tokens must be at least 1", "got -3"]),
        (["-k", "100"], ["--num-spec-tokens must be at most 64, got 100"]),
        (["--schedule", "geometric", "-k", "0"], ["--num-spec-tokens must be at least 1", "got 0"]),
        (["--schedule", "uniform"], ["schedule must be one of min-variance, geometric", "'uniform'"]),
        (["-r", "0.5", "--backend", "jax"], ["backend must be one of", "'jax'"]),
        (["-r", "0.5", "--device", "tpu"], ["device must be one of", "'tpu'"]),
        (["-r", "0.5", "-n", "1"], ["--num-requests", "'1'"]),
        (["-r", "0.5", "-n", "many"], ["--num-requests", "'many'"]),
        (["-r", "0.5", "-n", "2.5"], ["--num-requests", "whole number", "'2.5'"]),
        (["-r", "0.5", "-n", "1e300"], ["--num-requests", "whole number", "'1e300'"]),
        (["-r", "0.5", "-n", str(2**40 + 1)], ["--num-requests", "2**40", f"'{2**40 + 1}'"]),
        # a count in e notation is refused by every option, -n as --seed (-n 1e3 was taken, --seed 1e3 not)
        (["-r", "0.5", "-n", "1e3"], ["--num-requests takes a whole number in digits (2_000_000, not 2e6)", "'1e3'"]),
        (["-r", "0.5", "--seed", "1e3"], ["--seed takes a whole number in digits", "'1e3'"]),
        (["-r", "0.5", "--seed", "-3"], ["seed", "-3"]),
        (["-r", "0.5", "--seed", "abc"], ["--seed", "'abc'"]),
        (["-r", "0.5", "--cost-ratio", "-1"], ["cost ratio", "-1"]),
        (["-r", "0.5", "--cost-ratio", "inf"], ["cost ratio", "inf"]),
        (["-r", "0.5", "--cost-ratio", "abc"], ["--cost-ratio", "'abc'"]),
        (["--scenario", "no-such-scenario"], ["'no-such-scenario' does not exist"]),
        (["--scenario", ""], ["scenario file '' does not exist"]),
    ],
)
def test_bad_input_is_one_sentence_naming_the_value(tmp_path, args, needles):
    result = invoke(*args, "-o", str(tmp_path / "never"))
    assert result.exit_code == 2, result.output
    message = one_line(result.stderr)
    assert message.startswith("error:") and message.count("error:") == 1, message
    assert "Traceback" not in result.output and result.stdout == ""
    for needle in needles:
        assert needle in message, message
    assert not (tmp_path / "never").exists()


def test_output_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "taken"
    path.write_text("not a folder")
    result = invoke("-r", "0.5", "-n", "100", "-o", str(path))
    assert result.exit_code == 2
    assert "is a file, not a folder" in one_line(result.stderr) and "Traceback" not in result.output
    assert path.read_text() == "not a folder"


def test_repeated_rates_give_one_profile_each(tmp_path):
    result = invoke("-r", "0.9,0.7", "-r", "0.6", "-n", "2_000", "--no-charts", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    _, records = read_results(tmp_path)
    assert [(r["num_spec_tokens"], r["configured_rates"], r["num_requests"]) for r in records] == [
        (2, [0.9, 0.7], 2000), (1, [0.6], 2000)]
    assert "Sweep summary" in result.stdout


def test_bad_scenario_file_names_file_field_and_value(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("rates = [0.4, 0.6]\n")
    result = invoke("--scenario", str(path))
    assert result.exit_code == 2
    message = one_line(result.stderr)
    assert str(path) in message and "field rates" in message and "[0.4, 0.6]" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu(tmp_path):
    result = invoke("-r", "0.5", "--device", "cuda", "-o", str(tmp_path))
    assert result.exit_code == 2
    assert "'cuda'" in result.stderr and "no CUDA GPU" in one_line(result.stderr)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_triton_on_cpu_needs_the_interpreter(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    result = invoke("-r", "0.5", "--backend", "triton", "--device", "cpu", "-o", str(tmp_path))
    assert result.exit_code == 2
    assert "TRITON_INTERPRET=1" in one_line(result.stderr)


def test_a_wrong_simulation_is_flagged_loudly(tmp_path, monkeypatch):
    # feed the unconditional rates where the conditional ones belong: the classic bug
    def wrong(rates, num_requests, **kwargs):
        counts = torch.zeros(num_requests, dtype=torch.int32)
        alive = torch.ones(num_requests, dtype=torch.bool)
        generator = torch.Generator().manual_seed(kwargs.get("first_request", 0))
        for rate in rates:
            alive &= torch.rand(num_requests, generator=generator) < rate
            counts += alive.to(torch.int32)
        return counts

    monkeypatch.setattr(sweep, "simulate_acceptance", wrong)
    result = invoke("-r", "0.8,0.6,0.4", "-n", "100000", "--device", "cpu", "--backend", "torch", "--no-charts",
                    "-o", str(tmp_path))
    assert result.exit_code == 1, result.output
    assert "BUG" in result.stdout and "BUG" in result.stderr
    assert read_results(tmp_path)[1][0]["verdict"] == "BUG"


def test_interrupted_sweep_keeps_finished_cases(tmp_path, monkeypatch):
    real = sweep.simulate_acceptance

    def interrupt_in_third_case(rates, num_requests, **kwargs):
        if list(rates) == [1.0, 0.5, 0.0]:  # L = 2.5, the third case
            raise KeyboardInterrupt
        return real(rates, num_requests, **kwargs)

    monkeypatch.setattr(sweep, "simulate_acceptance", interrupt_in_third_case)
    options = ("-l", "1.5,2,2.5,3", "-n", "1000", "--device", "cpu", "--backend", "torch", "-o", str(tmp_path))
    result = invoke(*options)
    assert result.exit_code == 130
    assert "interrupted: 2 of 4 cases finished" in one_line(result.stdout)
    assert f"--output {tmp_path} --resume" in one_line(result.stdout)
    metadata, records = read_results(tmp_path)
    assert [r["configured_acceptance_length"] for r in records] == [1.5, 2.0]
    assert (metadata["interrupted"], metadata["finished_cases"], metadata["num_cases"]) == (True, 2, 4)
    assert (tmp_path / "accepted_distribution.png").is_file()  # charts of what finished

    monkeypatch.setattr(sweep, "simulate_acceptance", real)
    again = invoke(*options)  # no --resume: refused, with the way out named
    assert again.exit_code == 2 and "pass --resume to continue that run" in one_line(again.stderr)
    changed = invoke(*options[:-2], "--seed", "1", "-o", str(tmp_path), "--resume")
    assert changed.exit_code == 2 and "--seed 1 differs from the run" in one_line(changed.stderr)
    threads = 2 if metadata["threads"] == 1 else 1  # merge joins sweeps of equal threads only: so does --resume
    changed = invoke(*options, "--threads", str(threads), "--resume")
    assert changed.exit_code == 2 and f"--threads {threads} differs from the run" in one_line(changed.stderr)
    other = invoke("-l", "1.5,2,2.6,3", *options[2:], "--resume")
    assert other.exit_code == 2 and "profile list" in one_line(other.stderr)
    resumed = invoke(*options, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "2 of 4 cases already finished" in one_line(resumed.stdout)
    assert one_line(resumed.stdout).count("steps · torch on cpu") == 2  # only the missing cases ran
    metadata, records = read_results(tmp_path)
    assert [r["case"] for r in records] == [0, 1, 2, 3] and metadata["interrupted"] is False
    assert len(metadata["earlier_runs"]) == 1
    # the resumed cases are the ones a single run gives
    single = invoke("-l", "1.5,2,2.5,3", *options[2:-1], str(tmp_path / "single"))
    assert single.exit_code == 0, single.output
    assert [r["accepted_histogram"] for r in read_results(tmp_path / "single")[1]] == [
        r["accepted_histogram"] for r in records]


# `specbench sweep` in a process of its own whose second case (L = 2: rates 1, 0, 0) waits for Ctrl-C,
# so the signal lands mid-run however busy the machine is (a sweep left to run can finish first)
_WAITS_IN_ITS_SECOND_CASE = """
import sys, time
from specbench import sweep
from specbench.cli import main

simulate = sweep.simulate_acceptance

def second_case_waits(rates, num_requests, **keywords):
    if list(rates) == [1.0, 0.0, 0.0]:
        print("second case started", file=sys.stderr, flush=True)
        time.sleep(600)
    return simulate(rates, num_requests, **keywords)

sweep.simulate_acceptance = second_case_waits
sys.argv[0] = "specbench"
main()
"""


def test_ctrl_c_in_a_real_process_leaves_readable_results(tmp_path):
    out = tmp_path / "partial"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-c", _WAITS_IN_ITS_SECOND_CASE, "sweep", "-l", "1.5,2,2.5", "-k", "3", "-n", "3000",
         "--no-charts", "--device", "cpu", "--backend", "torch", "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )
    before = []  # what it said on stderr until then (a busy-machine warning, say)
    for line in process.stderr:
        if line.strip() == "second case started":
            break
        before.append(line)
    else:
        process.wait(timeout=60)
        pytest.fail(f"the sweep ended (status {process.returncode}) without reaching its second case: {before}")
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    _, records = read_results(out)
    assert [r["configured_acceptance_length"] for r in records] == [1.5]
    assert "interrupted: 1 of 3 cases finished" in one_line(stdout)


def test_a_case_title_keeps_its_phrases_whole_on_a_terminal():
    (record,) = sweep.run_sweep([make_profile(3, acceptance_length=2.5)], num_requests=2000, backend="torch",
                                device="cpu")
    terminal = Console(file=io.StringIO(), width=80)
    terminal.print(case_table(record))
    name, run = (line.strip() for line in terminal.file.getvalue().splitlines()[:2])
    assert name == "L=2.5 min-variance  K=3"
    assert run.startswith("2,000 steps  ·  torch on cpu  ·  ") and run.endswith(" positions/s"), run


def test_rates_are_printed_with_a_prefix_that_keeps_three_figures():
    # the Triton interpreter simulates ~50k positions a second (once printed "0.0M"), an H200 1e11
    rates = (0.5, 512.0, 999.6, 49_830.0, 2.304e7, 1.2e11)
    assert [per_second(rate) for rate in rates] == ["0.5", "512", "1.0k", "49.8k", "23.0M", "120G"]


def test_shipped_scenarios_are_found_by_name_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["sweep", "--scenario", "eagle3-llama3.1-8b", "-n", "2000", "--no-charts",
                                      "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    folder = CliRunner().invoke(app, ["sweep", "--scenario", str(tmp_path), "-n", "2000"])
    assert folder.exit_code == 2 and "is a folder" in " ".join(folder.output.split())


def test_empty_output_and_a_scenario_past_the_k_cap_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("-r", "0.5", "-n", "100", "-o", "")
    assert result.exit_code == 2 and "--output needs a folder name, got ''" in one_line(result.stderr)
    assert not (tmp_path / "results.json").exists()
    big = tmp_path / "big.toml"
    big.write_text('source = "test"\nnum_spec_tokens = 65\nacceptance_length = 2\n')
    result = invoke("--scenario", str(big), "-n", "100", "-o", str(tmp_path / "never"))
    assert result.exit_code == 2 and "K (draft tokens per step) must be at most 64, got 65" in one_line(result.stderr)
    assert not (tmp_path / "never").exists()


def test_geometric_schedule_and_alpha(tmp_path):
    result = invoke("-l", "2.5", "--schedule", "geometric", "-n", "20000", "--no-charts", "-o", str(tmp_path / "g"))
    assert result.exit_code == 0, result.output
    _, (record,) = read_results(tmp_path / "g")
    assert record["profile"] == "L=2.5 geometric" and record["schedule"] == "geometric"
    alpha = record["configured_alpha"]
    assert record["configured_rates"] == pytest.approx([alpha, alpha**2, alpha**3])
    assert record["expected_acceptance_length"] == pytest.approx(2.5) and record["verdict"] == "ok"
    result = invoke("--alpha", "0.5,0.8", "-k", "2", "-n", "2000", "--no-charts", "-o", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    _, records = read_results(tmp_path / "a")
    assert [(r["profile"], r["configured_rates"]) for r in records] == [
        ("alpha=0.5", [0.5, 0.25]), ("alpha=0.8", [0.8, pytest.approx(0.64)])]


def test_metadata_holds_what_was_used(tmp_path):
    result = invoke("--scenario", str(REPO / "scenarios" / "deepseek-v3-mtp.toml"), "-n", "3000", "--threads", "1",
                    "--no-charts", "-o", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    metadata, _ = read_results(tmp_path / "a")
    assert (metadata["num_requests"], metadata["cost_ratio"], metadata["threads"]) == (3000, 0.04, 1)
    assert metadata["interrupted"] is False and metadata["finished_cases"] == metadata["num_cases"] == 2
    for key in ("load_average_start", "load_average_end"):
        assert isinstance(metadata[key], float), key
    # cases that differ: the default steps grow with K, scenario cost ratios differ per profile
    path = tmp_path / "mixed.toml"
    path.write_text('source = "t"\n[[profiles]]\nname = "a"\nrates = [0.5]\ncost_ratio = 0.1\n'
                    '[[profiles]]\nname = "b"\nrates = [0.5]\nnum_spec_tokens = 1\n')
    result = invoke("--scenario", str(path), "-n", "500", "--no-charts", "-o", str(tmp_path / "b"))
    assert result.exit_code == 0, result.output
    metadata, records = read_results(tmp_path / "b")
    assert metadata["cost_ratio"] == [0.1, sweep.DEFAULT_COST_RATIO] == [r["cost_ratio"] for r in records]
    assert metadata["num_requests"] == 500


def test_a_busy_machine_is_warned_about(tmp_path, monkeypatch):
    from specbench import machine

    monkeypatch.setattr(machine, "load_average", lambda: 40.0)
    result = invoke("-r", "0.5", "-n", "500", "--no-charts", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    message = one_line(result.stderr)
    assert "warning: the machine was busy when the run started: 1-minute load average 40.00" in message
    assert "busy at the end of the run" in message
    assert read_results(tmp_path)[0]["load_average_start"] == 40.0


def test_more_threads_than_cores_is_refused_and_the_busy_rule_reads_sensibly(monkeypatch):
    from specbench import machine

    monkeypatch.setattr(machine, "cpu_count", lambda: 2)
    result = invoke("-r", "0.5", "--threads", "1000")
    assert result.exit_code == 2
    assert "--threads must lie in [1, 2] (the CPU cores this process may run on), got 1000" in one_line(result.stderr)
    # two threads on two cores: any other process makes the machine busy, and the sentence says why
    said = machine.busy_warning(1.2, 2, at_end=False)
    assert "load average 1.20 on 2 cores, above 0.5, so this run's 2 threads would not each find a free core" in said
    assert machine.busy_warning(0.4, 2, at_end=False) is None
    assert "above 2.5, more work than cores" in machine.busy_warning(3.0, 2, at_end=True)


def test_resume_into_a_folder_with_nothing_to_resume_says_it_starts_fresh(tmp_path):
    out = tmp_path / "new"
    result = invoke("-l", "2.5", "-n", "2000", "--no-charts", "-o", str(out), "--resume")
    assert result.exit_code == 0, result.output
    note = one_line(result.stderr)
    assert f"note: --resume: {out}/ holds no finished case, so there is nothing to resume; starting a fresh run" \
        in note, note
    assert len(read_results(out)[1]) == 1


@pytest.mark.parametrize(("args", "note", "names"), [
    (["-k", "3,3", "-l", "2"], "--num-spec-tokens gives 3 more than once; it is taken once", ["L=2 min-variance"]),
    (["-a", "0.5,0.5"], "--alpha gives 0.5 more than once", ["alpha=0.5"]),
    (["-l", "1.0,1"], "--acceptance-length gives 1 more than once", ["L=1 min-variance"]),
    (["-l", "1:2:0.5,2,1.5"], "--acceptance-length gives 1.5, 2 more than once; each is taken once",
     ["L=1 min-variance", "L=1.5 min-variance", "L=2 min-variance"]),
    (["-r", "0.9,0.8", "-r", "0.9,0.8"], "--rates gives 0.9,0.8 more than once", ["[0.9, 0.8]"]),
])
def test_a_value_given_twice_runs_once_with_a_note(tmp_path, args, note, names):
    # `-k 3,3` ran the same case twice with the same seed; like plan's -b 1,1 each value is taken once, and said
    result = invoke(*args, "-n", "200", "--no-charts", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert f"note: {note}" in one_line(result.stderr), result.stderr
    _, records = read_results(tmp_path)
    assert [r["profile"] for r in records] == names


def test_a_tree_given_twice_runs_once(tmp_path):
    result = invoke("--tree", "2x2", "--tree", "parents:-1,-1,0,0,1,1", "-r", "0.8,0.3", "-r", "0.8,0.3", "-n", "200",
                    "--no-charts", "-o", str(tmp_path))
    assert result.exit_code == 0, result.output
    notes = one_line(result.stderr)
    assert "--tree gives 2x2 more than once" in notes and "--rates gives 0.8,0.3 more than once" in notes, notes
    assert len(read_results(tmp_path)[1]) == 1


def test_a_refused_value_given_twice_is_one_sentence_without_a_note(tmp_path):
    result = invoke("-k", "0,0", "-l", "2", "-o", str(tmp_path / "never"))
    assert result.exit_code == 2 and one_line(result.stderr).startswith("error:") and "note" not in result.stderr


def test_resume_names_the_k_that_differs_and_counts_one_case(tmp_path):
    # two cases of one name ('L=2 min-variance') at K=3 and K=4: the refusal named the same profile twice
    assert invoke("-l", "2", "-k", "3,4", "-n", "200", "--no-charts", "-o", str(tmp_path)).exit_code == 0
    result = invoke("-l", "2", "-k", "4,3", "-n", "200", "--no-charts", "-o", str(tmp_path), "--resume")
    assert result.exit_code == 2
    assert "is 'L=2 min-variance' at K=3, this run's is 'L=2 min-variance' at K=4" in one_line(result.stderr)
    one = tmp_path / "one"
    assert invoke("-r", "0.5", "-n", "200", "--no-charts", "-o", str(one)).exit_code == 0
    resumed = invoke("-r", "0.5", "-n", "200", "--no-charts", "-o", str(one), "--resume")
    assert resumed.exit_code == 0 and "1 of 1 case already finished" in one_line(resumed.stdout), resumed.output


def test_a_bad_specbench_format_names_the_variable(tmp_path, capsys, monkeypatch):
    from specbench import cli

    monkeypatch.setenv("SPECBENCH_FORMAT", "bogus")
    assert cli.run(["sweep", "-r", "0.5", "-o", str(tmp_path / "never")]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("error: SPECBENCH_FORMAT") and "got 'bogus'" in line and "--format must" not in line, line
    monkeypatch.delenv("SPECBENCH_FORMAT")
    assert cli.run(["--format", "bogus", "sweep"]) == 2
    assert "--format must be one of rich, plain, markdown, got 'bogus'" in one_line(capsys.readouterr().err)


def test_a_flag_given_twice_is_refused_as_a_flag(capsys):
    from specbench import cli

    assert cli.run(["sweep", "--no-charts", "--no-charts"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "--no-charts was given 2 times (--no-charts, --no-charts); it is a flag (it takes no value)" in line, line
    assert "one value" not in line
