"""Kernel charts are drawn from records alone; `specbench plot DIR` re-renders a results folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench import bench_charts, results, sweep
from specbench.bench_charts import render_kernel_charts
from specbench.cli import app
from specbench.scenarios import make_profile

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _record(impl: str, batch: int, k: int, graph: bool = False, status: str = "ok", **fields) -> dict:
    median = 10.0 * batch * k / (5.0 if impl == "triton" else 1.0)
    record = {
        "kind": "kernels", "mode": "probabilistic", "impl": impl, "batch_size": batch, "num_spec_tokens": k,
        "vocab_size": 128256, "model": "llama3", "dtype": "float32", "draft": "logits", "acceptance": "3",
        "acceptance_length": 3.0, "measured_acceptance_length": 3.0, "median_us": median, "p20_us": 0.9 * median,
        "p80_us": 1.1 * median, "samples": 50, "cuda_graph": graph, "l2_flush": True, "bytes_needed": 10**6,
        "bytes_all_rows": 2 * 10**6, "gbps": 1.0, "pct_peak": 1.0, "speedup_vs_torch": 5.0 if impl == "triton" else 1.0,
        "tokens_per_s": 3 * batch / (median * 1e-6), "token_agreement": 1.0, "status": status, "reason": None,
    }
    record.update(fields)
    return record


def _grid() -> list[dict]:
    rows = [_record(impl, b, k, graph) for impl in ("torch", "triton") for b in (1, 8, 64) for k in (3, 7)
            for graph in (False, True)]
    rows += [_record("triton", 512, 7, status="skipped", median_us=None, reason="out of memory")]
    rows += [_record("torch", 1, 3, mode="greedy", draft="none", dtype="bfloat16", acceptance="full",
                     acceptance_length=4.0)]
    return rows


def _is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == PNG_MAGIC


def test_charts_are_drawn_per_group_from_records_alone(tmp_path):
    paths = render_kernel_charts(_grid(), tmp_path)
    assert sorted(p.name for p in paths) == sorted([
        "time_vs_batch_L3-float32.png", "throughput_vs_batch_L3-float32.png",
        "speedup_triton_L3-float32.png", "speedup_triton_L3-float32_graph.png",
        "time_vs_batch_Lfull-bfloat16.png", "throughput_vs_batch_Lfull-bfloat16.png",
    ])
    assert all(p.parent == tmp_path and _is_png(p) for p in paths)


def test_each_method_other_than_token_gets_its_own_row_of_panels(tmp_path, monkeypatch):
    records = [_record(impl, b, 3, method=method) for impl in ("torch", "triton") for b in (1, 8)
               for method in ("token", "block")]
    titles = []
    save = bench_charts._save
    monkeypatch.setattr(bench_charts, "_save", lambda fig, path: titles.extend(
        ax.get_title() for ax in fig.axes if ax.get_title()) or save(fig, path))
    render_kernel_charts(records, tmp_path)
    assert sorted(set(titles)) == ["probabilistic/logits method=block, K=3, V=128256",
                                   "probabilistic/logits method=block, V=128256",
                                   "probabilistic/logits, K=3, V=128256", "probabilistic/logits, V=128256"]


def test_no_successful_rows_no_charts(tmp_path):
    assert render_kernel_charts([_record("torch", 1, 3, status="FAIL")], tmp_path / "charts") == []
    assert not (tmp_path / "charts").exists()


def _write(directory: Path, records: list[dict]) -> None:
    results.ResultsWriter(directory, {"kind": "test"}, records)


def test_plot_re_renders_kernels_and_sweep_charts_from_the_folder(tmp_path):
    swept = sweep.run_sweep([make_profile(2, acceptance_length=2.5)], num_requests=2000, backend="torch", device="cpu")
    _write(tmp_path, _grid() + swept)
    result = CliRunner().invoke(app, ["plot", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in tmp_path.glob("*.png"))
    assert "time_vs_batch_L3-float32.png" in written and "speedup_triton_L3-float32.png" in written
    assert "expected_speedup.png" in written  # from the sweep record
    assert result.stdout.count("chart:") == len(written)


def test_plot_can_write_elsewhere(tmp_path):
    _write(tmp_path / "run", _grid())
    result = CliRunner().invoke(app, ["plot", str(tmp_path / "run"), "--output", str(tmp_path / "charts")])
    assert result.exit_code == 0, result.output
    assert not list((tmp_path / "run").glob("*.png"))
    assert len(list((tmp_path / "charts").glob("*.png"))) == 6


def test_plot_of_a_folder_without_results_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(app, ["plot", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "is not a specbench results folder (no such folder)" in result.stderr
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(app, ["plot", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "(no results.json or results.json.gz in it)" in result.stderr


def test_plot_takes_the_results_file_itself(tmp_path):
    _write(tmp_path / "run", _grid())
    result = CliRunner().invoke(app, ["plot", str(tmp_path / "run" / "results.json")])
    assert result.exit_code == 0, result.output
    assert len(list((tmp_path / "run").glob("*.png"))) == 6  # beside the file, as for the folder


@pytest.mark.parametrize("payload, said", [("[1, 2]", "it holds a JSON list, not an object"),
                                           ('"text"', "it holds a JSON string, not an object"),
                                           ("null", "it holds null, not an object"), ("3", "it holds a JSON number"),
                                           ("true", "it holds a JSON true or false"),
                                           ('{"metadata": [], "records": []}', "it needs 'metadata' (an object)")])
def test_plot_of_json_that_is_not_a_results_file_says_what_it_holds(tmp_path, payload, said):
    (tmp_path / "results.json").write_text(payload)
    result = CliRunner().invoke(app, ["plot", str(tmp_path)])
    message = " ".join(result.stderr.split())
    assert result.exit_code == 2 and said in message
    assert "Traceback" not in result.output and "indices" not in message


def test_plot_of_a_folder_with_nothing_to_draw_says_so(tmp_path):
    _write(tmp_path, [_record("torch", 1, 3, status="skipped"), _record("triton", 1, 3, status="FAIL")])
    result = CliRunner().invoke(app, ["plot", str(tmp_path)])
    assert result.exit_code == 2 and (f"{tmp_path / 'results.json'} has no records to chart: every one of its 2 "
                                      f"kernels rows was skipped or failed, so none was timed") in " ".join(
        result.stderr.split())
    _write(tmp_path / "other", [{"kind": "mystery"}])
    result = CliRunner().invoke(app, ["plot", str(tmp_path / "other")])
    assert result.exit_code == 2 and "has no records to chart (kinds: mystery)" in " ".join(result.stderr.split())


def test_plot_of_a_file_without_records_names_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("e4.json").write_text('{"metadata": {}, "records": []}')
    result = CliRunner().invoke(app, ["plot", "e4.json"])
    assert result.exit_code == 2 and "error: e4.json has no records to chart (its records list is empty)" in " ".join(
        result.stderr.split())


@pytest.mark.parametrize("field, value", [("median_us", -5.0), ("median_us", float("nan")), ("median_us", 0),
                                          ("median_us", "fast"), ("batch_size", 0), ("tokens_per_s", float("inf"))])
def test_plot_refuses_values_no_chart_can_draw(tmp_path, field, value):
    _write(tmp_path, [_record("torch", 1, 3), _record("torch", 8, 3, **{field: value})])
    result = CliRunner().invoke(app, ["plot", str(tmp_path)])
    message = " ".join(result.stderr.split())
    assert result.exit_code == 2, result.output
    assert (f"has a record whose values its charts cannot use ({field} {value!r} in an ok row of 'torch'; a chart "
            f"needs a finite number above 0)") in message
    assert "Warning" not in result.output and not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("args, said", [(["plot", ""], "DIR needs a results folder or file name, got ''"),
                                        (["plot", "RUN", "-o", ""], "--output needs a folder name, got ''"),
                                        (["plot", "RUN", "-o", " "], "--output needs a folder name, got ' '")])
def test_plot_refuses_an_empty_path_rather_than_take_the_current_folder(tmp_path, monkeypatch, args, said):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "RUN", _grid())
    _write(tmp_path, _grid())
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and f"error: {said}" in result.stderr
    assert not list(tmp_path.glob("*.png")) and not list((tmp_path / "RUN").glob("*.png"))
