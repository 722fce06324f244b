"""`specbench export`: each format checked against the schema its documentation gives, on CPU runs."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from conftest import edited_run
from typer.testing import CliRunner

from specbench import export
from specbench.cli import app

jsonschema = pytest.importorskip("jsonschema", reason="the test extra installs jsonschema")

runner = CliRunner()
TINY = ["--device", "cpu", "--vocab-size", "64", "--max-ms", "0", "--min-samples", "3", "--warmup", "0",
        "--no-l2-flush", "--no-charts", "--impl", "torch"]

# Bencher Metric Format, as bencher.dev/docs/reference/bencher-metric-format states it: an object of
# benchmarks (non-empty names), each an object of measures, each with a number `value` and optional
# number bounds; a measure slug is at most 64 characters, a benchmark name at most 1024
BMF_SCHEMA = {
    "type": "object",
    "minProperties": 1,
    "propertyNames": {"minLength": 1, "maxLength": 1024},
    "additionalProperties": {
        "type": "object",
        "minProperties": 1,
        "propertyNames": {"minLength": 1, "maxLength": 64, "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
        "additionalProperties": {
            "type": "object",
            "required": ["value"],
            "properties": {"value": {"type": "number"}, "lower_value": {"type": "number"},
                           "upper_value": {"type": "number"}},
            "additionalProperties": False,
        },
    },
}
# github-action-benchmark's BenchmarkResult (src/extract.ts), read by tool customSmallerIsBetter:
# a non-empty array (an empty one is an error there) of name, value, unit, with optional text range, extra
GAB_SCHEMA = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["name", "unit", "value"],
        "properties": {"name": {"type": "string", "minLength": 1}, "unit": {"type": "string"},
                       "value": {"type": "number"}, "range": {"type": "string"}, "extra": {"type": "string"}},
        "additionalProperties": False,
    },
}


def _bmf_problems(payload) -> list[str]:
    problems = [error.message for error in jsonschema.Draft202012Validator(BMF_SCHEMA).iter_errors(payload)]
    for name, measures in (payload.items() if isinstance(payload, dict) else []):
        for slug, metric in measures.items():
            if isinstance(metric, dict) and {"lower_value", "upper_value"} <= set(metric) and not (
                    metric["lower_value"] <= metric["value"] <= metric["upper_value"]):
                problems.append(f"{name} {slug}: value outside its bounds")
    return problems


def _gab_problems(payload) -> list[str]:
    problems = [error.message for error in jsonschema.Draft202012Validator(GAB_SCHEMA).iter_errors(payload)]
    names = [entry.get("name") for entry in payload] if isinstance(payload, list) else []
    problems += [f"name {name!r} repeated" for name in set(names) if names.count(name) > 1]
    return problems


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("export")
    made = {}
    for name, args in (("kernels", ["kernels", *TINY, "--mode", "greedy,probabilistic", "--batch-size", "1,4",
                                    "-k", "2"]),
                       ("kernels-again", ["kernels", *TINY, "--mode", "greedy,probabilistic", "--batch-size", "1,4",
                                          "-k", "2"]),
                       ("sweep", ["sweep", "-l", "2,2.5", "-k", "3", "-n", "4000", "--no-charts"]),
                       ("plan", ["plan", "--rates", "0.8,0.6,0.4", "--max-k", "3", "-b", "1,8", "-c", "0.05",
                                 "--target-ms", "10"])):
        result = runner.invoke(app, [*args, "-o", str(root / name)])
        assert result.exit_code == 0, result.output
        made[name] = root / name
    compared = runner.invoke(app, ["compare", str(made["kernels"]), str(made["kernels-again"]), "--json",
                                   str(root / "compare.json")])
    assert compared.exit_code in (0, 1), compared.output
    made["compare"] = root / "compare.json"
    return made


def _export(path: Path, output_format: str, tmp_path: Path):
    target = tmp_path / f"out.{output_format}"
    result = runner.invoke(app, ["export", str(path), "--format", output_format, "--output", str(target)])
    assert result.exit_code == 0, result.output
    return target.read_text(), result


def test_the_validators_reject_what_the_formats_forbid():
    # negative controls: a check that passes everything would make the tests below vacuous
    assert _bmf_problems({"a": {"latency": {"value": 1.0, "lower_value": 0.5, "upper_value": 2.0}}}) == []
    assert _bmf_problems({"a": {"latency": {"value": "1"}}})
    assert _bmf_problems({"a": {"latency": {"lower_value": 1.0}}})
    assert _bmf_problems({"a": {"x" * 65: {"value": 1.0}}})
    assert _bmf_problems({"a": {"latency": {"value": 3.0, "lower_value": 0.5, "upper_value": 2.0}}})
    assert _bmf_problems({})
    assert _gab_problems([{"name": "a", "unit": "us", "value": 1.0, "range": "1-2", "extra": "x"}]) == []
    assert _gab_problems([{"name": "a", "value": 1.0}])
    assert _gab_problems([{"name": "a", "unit": "us", "value": "1"}])
    assert _gab_problems([{"name": "a", "unit": "us", "value": 1.0}, {"name": "a", "unit": "us", "value": 2.0}])
    assert _gab_problems([])


@pytest.mark.parametrize("kind", ["kernels", "sweep", "plan", "compare"])
def test_bencher_export_follows_the_metric_format(runs, kind, tmp_path):
    text, result = _export(runs[kind], "bencher", tmp_path)
    payload = json.loads(text)
    assert _bmf_problems(payload) == []
    rows = export.load(runs[kind])[2]
    assert len(payload) == len(rows) and "exported" in result.output
    if kind == "kernels":
        record = next(r for r in rows if r["status"] == "ok")
        name = next(n for n, r in zip(export.benchmark_names(kind, rows), rows) if r is record)
        assert payload[name]["latency"] == {"value": record["median_us"] * 1000, "lower_value": record["p20_us"] * 1000,
                                            "upper_value": record["p80_us"] * 1000}
    if kind == "sweep":
        metric = payload["L=2.5 min-variance K=3"]["acceptance-length"]
        assert metric["lower_value"] < metric["value"] < metric["upper_value"]


@pytest.mark.parametrize("kind", ["kernels", "sweep", "plan", "compare"])
def test_github_action_benchmark_export_follows_its_format(runs, kind, tmp_path):
    text, _ = _export(runs[kind], "github-action-benchmark", tmp_path)
    payload = json.loads(text)
    assert _gab_problems(payload) == []
    units = {entry["unit"] for entry in payload}
    assert units == {"kernels": {"us"}, "sweep": {"ns/position"}, "plan": {"ms/token"}, "compare": {"x baseline"}}[kind]


@pytest.mark.parametrize("kind", ["kernels", "sweep", "plan", "compare"])
def test_csv_export_has_one_row_per_record_in_a_fixed_column_order(runs, kind, tmp_path):
    text, _ = _export(runs[kind], "csv", tmp_path)
    table = list(csv.reader(io.StringIO(text)))
    header, body = table[0], table[1:]
    rows = export.load(runs[kind])[2]
    assert len(body) == len(rows)
    assert header[:2] == ["kind", "name"] and header[-2:] == ["commit", "device"]
    assert header[2:2 + len(export.KEY_COLUMNS[kind])] == list(export.KEY_COLUMNS[kind])
    assert "samples_us" not in header
    # a second export of the same result is the same text: the order does not hang on dict order
    again, _ = _export(runs[kind], "csv", tmp_path)
    assert again == text


def test_export_to_stdout_pipes_and_a_failed_row_is_left_out_of_the_json_formats(runs, tmp_path):
    payload = json.loads((runs["kernels"] / "results.json").read_text())
    payload["records"][0].update(status="FAIL", median_us=None, p20_us=None, p80_us=None, reason="planted")
    (tmp_path / "failed").mkdir()
    (tmp_path / "failed" / "results.json").write_text(json.dumps(payload))
    result = runner.invoke(app, ["export", str(tmp_path / "failed"), "--format", "github-action-benchmark"])
    assert result.exit_code == 0, result.output
    exported = json.loads(result.stdout)
    assert len(exported) == len(payload["records"]) - 1
    assert "1 without a number to chart (FAIL or skipped) left out" in " ".join(result.stderr.split())
    rows = list(csv.reader(io.StringIO(runner.invoke(app, ["export", str(tmp_path / "failed"), "--format",
                                                           "csv"]).stdout)))
    assert len(rows) == 1 + len(payload["records"]) and rows[1][rows[0].index("status")] == "FAIL"


@pytest.mark.parametrize("args, words", [
    (["--format", "junit"], "--format must be one of bencher, github-action-benchmark, csv, got 'junit'"),
    (["--format", "csv", "--output", "{tmp}"], "is a folder; give a file name"),
])
def test_bad_options_are_one_sentence_and_exit_2(runs, tmp_path, args, words):
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    result = runner.invoke(app, ["export", str(runs["sweep"]), *args])
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.output.split()) and result.output.count("error:") == 1


def test_a_folder_that_is_no_result_and_a_case_held_twice_are_refused(runs, tmp_path):
    result = runner.invoke(app, ["export", str(tmp_path), "--format", "csv"])
    assert result.exit_code == 2 and "is not a specbench results folder" in result.output
    payload = json.loads((runs["sweep"] / "results.json").read_text())
    payload["records"].append(payload["records"][0])
    (tmp_path / "twice").mkdir()
    (tmp_path / "twice" / "results.json").write_text(json.dumps(payload))
    result = runner.invoke(app, ["export", str(tmp_path / "twice"), "--format", "bencher"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "share the case 'L=2 min-variance K=3'" in said
    assert f"{tmp_path / 'twice'}: two rows of this sweep result share" in said  # the sentence names the file


def test_rows_alike_but_for_their_acceptance_label_or_model_get_distinct_names(runs):
    row = next(r for r in export.load(runs["kernels"])[2] if r["status"] == "ok")
    twins = [{**row, "acceptance": "scenario-a"}, {**row, "acceptance": "scenario-b"}]
    names = export.benchmark_names("kernels", twins)
    assert names[0] != names[1] and names[0].endswith("[scenario-a]")
    presets = [{**row, "model": "llama3"}, {**row, "model": "other-128k"}]
    assert len(set(export.benchmark_names("kernels", presets))) == 2


def test_a_run_kept_compressed_exports_as_the_plain_one(runs, tmp_path):
    import gzip
    import shutil

    kept = shutil.copytree(runs["kernels"], tmp_path / "kept")
    (kept / "results.json.gz").write_bytes(gzip.compress((kept / "results.json").read_bytes()))
    (kept / "results.json").unlink()
    assert export.load(kept) == export.load(runs["kernels"])
    assert export.load(kept / "results.json.gz") == export.load(runs["kernels"])
    assert _export(kept, "csv", tmp_path)[0] == _export(runs["kernels"], "csv", tmp_path)[0]


BASELINE = Path(__file__).resolve().parent.parent / "results" / "baselines" / "cpu-quick-a"


def _refused(path: Path, output_format: str) -> str:
    result = runner.invoke(app, ["export", str(path), "--format", output_format])
    assert result.exit_code == 2, result.output
    assert result.output.count("error:") == 1 and "Traceback" not in result.output
    return " ".join(result.stderr.split())


@pytest.mark.parametrize("output_format", export.FORMATS)
@pytest.mark.parametrize("kind, field", [*(("kernels", field) for field in (
    "batch_size", "mode", "impl", "draft", "dtype", "vocab_size", "num_spec_tokens", "cuda_graph",
    "acceptance_length")), ("sweep", "profile"), ("plan", "profile")])
def test_a_record_without_a_field_export_reads_is_one_sentence(runs, tmp_path, output_format, kind, field):
    # hand-edited files once raised a KeyError from describe_record or benchmark_names (exit 70)
    source = BASELINE if kind == "kernels" else runs[kind]
    edited = edited_run(source, tmp_path / "edited", lambda payload: payload["records"][1].pop(field))
    assert (f"{edited / 'results.json'}: record 1 lacks the field {field}, so export cannot read it as a {kind} "
            f"row") in _refused(edited, output_format)


@pytest.mark.parametrize("field, value, words", [
    ("batch_size", "4", 'has batch_size "4" where a whole number belongs'),
    ("acceptance_length", "3", 'has acceptance_length "3" where a finite number belongs'),
    ("cuda_graph", None, "has cuda_graph null where true or false belongs"),
    ("status", "done", 'has status "done" where ok, FAIL or skipped belongs'),
    ("top_p", "0.9", 'has top_p "0.9" where a finite number belongs'),
])
def test_a_record_with_a_field_of_the_wrong_type_is_one_sentence(tmp_path, field, value, words):
    edited = edited_run(BASELINE, tmp_path / "edited", lambda payload: payload["records"][0].update({field: value}))
    assert f"record 0 {words}" in _refused(edited, "bencher")


@pytest.mark.parametrize("output_format", export.FORMATS)
@pytest.mark.parametrize("key, value, shown", [
    ("median_us", -3.0, "-3.0"), ("median_us", float("nan"), "NaN"), ("median_us", "fast", '"fast"'),
    ("median_us", None, "null"), ("p20_us", -1.0, "-1.0"),
])
def test_a_row_marked_ok_without_a_usable_median_is_refused(tmp_path, output_format, key, value, shown):
    # a negative median was exported as a latency; a NaN or text one left the ok row out as "FAIL or skipped"
    edited = edited_run(BASELINE, tmp_path / "edited", lambda payload: payload["records"][1].update({key: value}))
    said = _refused(edited, output_format)
    assert f"{edited / 'results.json'}: record 1 (torch: greedy B=8 K=3 V=4096 float32 L=3) is marked ok" in said
    assert (f"its {key} is {shown}, not a number of microseconds >= 0: broken timing data, so nothing is "
            f"exported") in said


def test_a_case_held_twice_is_worded_for_a_run_that_repeated_it_and_for_runs_put_together(tmp_path):
    # sweep -k 3,3 (one run) or a hand-joined file (several runs): the advice once named only merge
    edited = edited_run(BASELINE, tmp_path / "edited", lambda payload: payload["records"].append(payload["records"][0]))
    said = _refused(edited, "bencher")
    assert "share the case 'torch: greedy B=1 K=3 V=4096 float32 L=3" in said
    assert "if one run repeated the case (a value given twice to an option), run it again without the repeat" in said
    assert "if rows of several runs were put in one file, join the runs with specbench merge instead" in said
