"""results.json has the documented fields: specbench/schema/results.schema.json, checked with jsonschema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specbench import results
from specbench.cli import app

jsonschema = pytest.importorskip("jsonschema", reason="the test extra installs jsonschema")

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(results.SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, payload) -> list[str]:
    return [f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(payload)]


def test_a_fresh_sweep_and_kernels_run_match_the_schema(tmp_path, validator):
    sweep = runner.invoke(app, ["sweep", "-l", "2.5", "-k", "2,3", "-n", "5000", "--no-charts", "-o",
                                str(tmp_path / "sweep")])
    assert sweep.exit_code == 0, sweep.output
    kernels = runner.invoke(app, ["kernels", "--mode", "all", "-b", "2", "-k", "2", "--vocab-size", "64",
                                  "--max-ms", "5", "--min-samples", "2", "--no-charts", "-o", str(tmp_path / "kernels")])
    assert kernels.exit_code == 0, kernels.output
    for folder in ("sweep", "kernels"):
        payload = json.loads((tmp_path / folder / results.RESULTS_JSON).read_text())
        assert payload["records"] and _errors(validator, payload) == []


@pytest.mark.parametrize("path", sorted((REPO / "results").glob("*/results.json")), ids=lambda p: p.parent.name)
def test_committed_results_match_the_schema(path, validator):
    assert _errors(validator, json.loads(path.read_text())) == []


def test_the_schema_rejects_what_a_reader_could_not_use(validator):
    payload = json.loads(next((REPO / "results").glob("h200-kernels/results.json")).read_text())
    payload["records"] = payload["records"][:1]
    assert _errors(validator, payload) == []
    broken = json.loads(json.dumps(payload))
    broken["records"][0]["median_us"] = "fast"
    assert _errors(validator, broken)
    missing = json.loads(json.dumps(payload))
    del missing["metadata"]["commit"]
    assert any("commit" in error for error in _errors(validator, missing))
