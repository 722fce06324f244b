"""The command line as a whole: start-up cost, --version, flags, output formats, exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest
from typer.testing import CliRunner

from specbench import __version__, cli, console
from specbench.cli import app

runner = CliRunner()


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TERM": "dumb"})


def test_building_the_command_line_loads_no_torch_pandas_scipy_or_matplotlib():
    # what `specbench --help` costs: a module that is imported shows its submodules in sys.modules
    heavy = ("torch._C", "pandas.core", "scipy.stats", "scipy.optimize", "matplotlib.pyplot", "numpy.linalg")
    done = _python(f"import sys, specbench.cli; print([m for m in {heavy!r} if m in sys.modules])")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_public_api_is_still_one_import_away():
    done = _python("from specbench import verify, VerifyResult, simulate_acceptance; import specbench; "
                   "print(verify.__module__, VerifyResult.__name__, specbench.simulate_acceptance is simulate_acceptance)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["specbench.verification", "VerifyResult", "True"]
    missing = _python("import specbench; specbench.no_such_thing")
    assert missing.returncode == 1 and "no attribute 'no_such_thing'" in missing.stderr


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"specbench {__version__}"


def test_help_shows_flags_without_a_value_type_and_lists_exit_codes():
    result = runner.invoke(app, ["sweep", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    lines = [line for line in result.output.splitlines() if "--no-charts" in line or "--resume" in line]
    assert len(lines) == 2 and not any("<bool>" in line for line in lines)
    assert "<bool>" not in result.output
    assert "Exit status: 0 done, 1 a finding" in result.output and "70 a specbench bug" in result.output
    # a flag takes no value: giving one is a usage error (Click's own, exit 2)
    assert runner.invoke(app, ["sweep", "--no-charts", "true"]).exit_code == 2


def test_a_closed_pipe_ends_quietly_keeps_what_finished_and_is_not_a_finding(tmp_path):
    # `specbench sweep | true`: the reader is gone before the first case is printed; exit 1 would read
    # as a BUG, and the finished case must stay on disk, marked interrupted, with its charts
    out = tmp_path / "out"
    script = (f"{sys.executable} -m specbench sweep -l 2,2.5,3 -n 20000 -o {out} | true; "
              "echo \"status=${PIPESTATUS[0]}\"")
    done = subprocess.run(["bash", "-c", script], check=False, capture_output=True, text=True, timeout=300)
    status = int(done.stdout.strip().splitlines()[-1].removeprefix("status="))
    assert status == 141, done.stdout + done.stderr  # 141 = 128 + SIGPIPE, as `yes | head` gives
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    metadata = json.loads((out / "results.json").read_text())["metadata"]
    assert metadata["interrupted"] is True and metadata["finished_cases"] == 1
    assert (out / "accepted_distribution.png").stat().st_size > 0


def test_help_cut_short_by_a_closed_pipe_is_141_not_1():
    script = f"{sys.executable} -m specbench sweep --help | true; echo \"status=${{PIPESTATUS[0]}}\""
    done = subprocess.run(["bash", "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip().endswith("status=141") and "Traceback" not in done.stderr, done.stdout + done.stderr


def _sweep_table(tmp_path, *options: str) -> str:
    result = runner.invoke(app, [*options, "sweep", "-l", "2.5", "-n", "20000", "--no-charts", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    return result.output


def test_table_formats(tmp_path, monkeypatch):
    monkeypatch.setattr(console, "_table_format", "rich")  # the app's callback sets it per invocation
    markdown = _sweep_table(tmp_path / "md", "--format", "markdown")
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    assert any(set(line) <= set("|-: ") for line in rows)  # the header's separator row
    assert any("L=2.5 min-variance" in line for line in rows)
    plain = _sweep_table(tmp_path / "plain", "--format", "plain")
    assert "L=2.5 min-variance" in plain and not any(ch in plain for ch in "│┃━─|")
    assert runner.invoke(app, ["--format", "html", "env"]).exit_code == 2
    console.set_table_format("rich")


def test_piped_output_is_not_cut_at_80_columns(tmp_path):
    # a real subprocess whose stdout is a file: rich must not fall back to 80 columns
    log = tmp_path / "log.txt"
    with log.open("w") as handle:
        done = subprocess.run([sys.executable, "-m", "specbench", "sweep", "--rates", "0.95,0.9,0.85,0.8,0.75",
                               "-n", "20000", "--no-charts", "-o", str(tmp_path / "out")],
                              check=False, stdout=handle, stderr=subprocess.PIPE, text=True, timeout=300,
                              env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    metadata = json.loads((tmp_path / "out" / "results.json").read_text())["metadata"]
    name = metadata["profiles"][0]
    assert any(name in line for line in text.splitlines())  # the whole profile name on one line
    assert max(len(line) for line in text.splitlines()) > 80


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_an_unexpected_exception_is_a_bug_with_its_own_status_and_a_traceback_file(tmp_path, monkeypatch, capsys):
    def broken(name):
        raise RuntimeError("the table format exploded")

    monkeypatch.setattr(console, "set_table_format", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert cli.run(["env"]) == cli.EXIT_BUG == 70
    line = _one_line(capsys.readouterr().err)
    assert "specbench bug" in line and "RuntimeError: the table format exploded" in line
    saved = list(tmp_path.glob("specbench-bug-*.txt"))
    assert len(saved) == 1 and str(saved[0]) in line
    assert "Traceback" in saved[0].read_text() and "set_table_format" in saved[0].read_text()


def test_a_sys_exit_from_inside_a_command_is_not_a_success(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(console, "set_table_format", lambda name: sys.exit(0))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert cli.run(["env"]) == 70
    assert "SystemExit" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize("args, said", [
    (["sweep", "--bogus"], "No such option: --bogus"),
    (["profile", "fit"], "Missing argument 'FILE...'"),
    (["sweep", "--no-charts", "true"], "unexpected extra argument(s) (true)"),
    (["no-such-command"], "No such command 'no-such-command'"),
    (["plot"], "Missing argument 'DIR'"),
])
def test_usage_errors_are_one_red_sentence_with_status_2(args, said, capsys):
    assert cli.run(args) == 2
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert line.startswith("error: ") and said in line and "--help" in line
    assert "╭" not in captured.err + captured.out


@pytest.mark.parametrize("args, said", [
    (["kernels", "--top-k", "5", "--top-k", "6"], "--top-k was given 2 times (--top-k, --top-k)"),
    (["kernels", "-b", "1", "--batch-size=2"], "--batch-size / -b was given 2 times (-b, --batch-size=2)"),
    (["kernels", "--no-cuda-graph", "--cuda-graph"], "--cuda-graph/--no-cuda-graph was given 2 times"),
    (["--format", "plain", "--format", "rich", "sweep"], "--format was given 2 times"),
    (["profile", "fit", "x.txt", "-c", "1", "--cost-ratio", "2"], "--cost-ratio / -c was given 2 times"),
])
def test_an_option_of_one_value_given_twice_is_refused(args, said, capsys):
    # Click would keep the last value silently; options that take lists (--impl) add their repeats instead
    assert cli.run(args) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("error: ") and said in line and "give it once" in line, line


def test_an_unknown_implementation_names_the_launch_variants_too(capsys):
    assert cli.run(["verify", "--impl", "triton-tree"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "unknown implementation 'triton-tree'" in line and "triton-tree-finish64" in line, line


def test_specbench_alone_prints_the_help_and_status_2(capsys):
    assert cli.run([]) == 2
    assert "Exit status" in capsys.readouterr().out


@pytest.mark.parametrize("args, option", [
    (["verify", "--impl", "no-such-impl", "--json", "{missing}/verify.json"], "--json"),
    (["compare", "{tmp}/no-run", "{tmp}/no-run", "--markdown", "{missing}/compare.md"], "--markdown"),
    (["compare", "{tmp}/no-run", "{tmp}/no-run", "--json", "{missing}/compare.json"], "--json"),
    (["compare", "{tmp}/no-run", "{tmp}/no-run", "--chart", "{missing}/compare.png"], "--chart"),
    (["calibrate", "{tmp}/no-run", "{tmp}/other-run", "-o", "{missing}/calibration.json"], "--output"),
    (["export", "{tmp}/no-run", "--format", "csv", "-o", "{missing}/export.csv"], "--output"),
    (["profile", "fit", "{tmp}/no-scrape.txt", "-o", "{missing}/profile.toml"], "--output"),
    (["profile", "fit", "{tmp}/no-scrape.txt", "-o", "{tmp}/profile.toml", "--figure", "{missing}/fit.png"],
     "--figure"),
])
def test_an_output_file_in_a_missing_folder_is_refused_before_anything_is_read(tmp_path, capsys, args, option):
    # the inputs do not exist either: the output file is checked first, and no folder is made for it
    missing = tmp_path / "no" / "such"
    args = [arg.replace("{missing}", str(missing)).replace("{tmp}", str(tmp_path)) for arg in args]
    target = args[args.index(option if option in args else "-o") + 1]
    assert cli.run(args) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{option} {target}: no folder {missing}" in line, line
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("args, option, target", [
    (["export", "{a}", "--format", "csv", "-o", "{a}/results.json"], "--output", "{a}/results.json"),
    (["export", "{a}/results.json", "--format", "csv", "-o", "{a}/results.json"], "--output", "{a}/results.json"),
    (["compare", "{a}", "{b}", "--json", "{b}/results.json"], "--json", "{b}/results.json"),
    (["compare", "{a}", "{b}", "--markdown", "{a}/results.csv"], "--markdown", "{a}/results.csv"),
    (["compare", "{a}", "{b}", "--markdown", "{a}/../a/results.json"], "--markdown", "{a}/../a/results.json"),
    (["compare", "{a}", "{b}", "--calibration", "{a}/cal.json", "--json", "{a}/cal.json"], "--json", "{a}/cal.json"),
    (["calibrate", "{a}", "{b}", "-o", "{a}/results.json"], "--output", "{a}/results.json"),
])
def test_an_output_file_that_is_an_input_is_refused_and_the_input_kept(tmp_path, capsys, args, option, target):
    # writing there would replace the run the command reads (export --format csv over results.json made the run
    # unreadable); the sentence names the input, and nothing is written
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text("{}")
        (tmp_path / name / "results.csv").write_text("x\n")
    (tmp_path / "a" / "cal.json").write_text("{}")
    fill = {"{a}": str(tmp_path / "a"), "{b}": str(tmp_path / "b")}
    args = [_filled(arg, fill) for arg in args]
    assert cli.run(args) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{option} {_filled(target, fill)} is one of this command's inputs" in line, line
    assert (tmp_path / "a" / "results.json").read_text() == "{}" and (tmp_path / "b" / "results.json").read_text() == "{}"
    assert (tmp_path / "a" / "results.csv").read_text() == "x\n" and (tmp_path / "a" / "cal.json").read_text() == "{}"


def _filled(text: str, fill: dict[str, str]) -> str:
    for key, value in fill.items():
        text = text.replace(key, value)
    return text


def test_an_output_folder_is_made_with_the_folders_above_it(tmp_path):
    # folders (-o of sweep, kernels, plan, merge, plot) are made as `mkdir -p` makes them, files are not
    out = tmp_path / "runs" / "2026" / "sweep"
    result = runner.invoke(app, ["sweep", "-l", "2.5", "-n", "2000", "--no-charts", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "results.json").is_file()
