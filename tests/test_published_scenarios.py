"""The library of published profiles (scenarios/published/): every file loads, cites a source for each
profile, quotes each number it stores in that source, and is listed in the README."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specbench import scenarios

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = sorted((REPO / "scenarios" / "published").glob("*.toml"))


def test_there_is_a_library():
    assert len(PUBLISHED) >= 5


@pytest.mark.parametrize("path", PUBLISHED, ids=lambda p: p.stem)
def test_published_scenario_loads_and_cites_its_source(path):
    scenario = scenarios.load_scenario(path)  # validation: rates in [0, 1], non-increasing, L within [1, K + 1]
    assert scenario.name == path.stem
    assert scenario.description and len(scenario.source) > 40
    assert scenario.profiles
    for profile in scenario.profiles:
        assert len(profile.source) > 40, f"{path.name}: profile {profile.name} cites no source"
        assert len(profile.rates) == profile.num_spec_tokens


def _quoted(value: float, source: str) -> bool:
    # 0.390 is quoted as ".390", 0.2020 as "0.2020", 3.20 as "3.20": the shortest form, leading zero dropped
    return format(value, "g").lstrip("0") in source


@pytest.mark.parametrize("path", PUBLISHED, ids=lambda p: p.stem)
def test_every_stored_number_is_quoted_in_its_profile_source(path):
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = data.get("profiles", [data])
    loaded = scenarios.load_scenario(path).profiles
    assert len(loaded) == len(entries)  # one profile per entry: no lists that expand into unnamed profiles
    for entry, profile in zip(entries, loaded):
        numbers = list(entry.get("rates", [])) + [entry[key] for key in ("acceptance_length", "alpha") if key in entry]
        assert numbers, f"{path.name}: {profile.name} stores no number"
        for value in numbers:
            assert _quoted(value, profile.source), f"{path.name}: {profile.name}: {value} is not in its source"


def test_mean_length_only_profiles_say_so():
    """A source that gives only L is stored as a length, and its file says the per-position shape is assumed."""
    for path in PUBLISHED:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if any("acceptance_length" in entry for entry in data.get("profiles", [data])):
            text = path.read_text(encoding="utf-8")
            assert "assum" in text and "geometric" in text, path.name


def test_partial_vector_is_marked_and_not_filled_in():
    path = REPO / "scenarios" / "published" / "glm-5.2-16-token-drafter-partial.toml"
    scenario = scenarios.load_scenario(path)
    assert scenario.description.startswith("PARTIAL")
    first, length = scenario.profiles
    assert first.rates == (0.712, 0.517, 0.390)
    assert (length.num_spec_tokens, length.acceptance_length, length.schedule) == (16, 4.35, "geometric")


def test_published_numbers():
    folder = REPO / "scenarios" / "published"
    vllm = {p.name: p for p in scenarios.load_scenario(folder / "vllm-eagle3-mt-bench-per-position.toml").profiles}
    assert vllm["llama3.1-8b-eagle3"].rates == (0.7296, 0.5208, 0.3545)
    # the Llama drafter's conditional rates fall with depth: about 0.73, 0.71, 0.68
    rates = vllm["llama3.1-8b-eagle3"].rates
    assert [round(c, 2) for c in (rates[0], rates[1] / rates[0], rates[2] / rates[1])] == [0.73, 0.71, 0.68]
    ascend = {p.name: p for p in scenarios.load_scenario(
        folder / "vllm-ascend-10023-qwen3-30b-a3b-eagle3-long-context.toml").profiles}
    assert ascend["longbench-v2-full-attention"].rates == (0.3034, 0.0303, 0.0017)
    assert ascend["gsm8k-full-attention"].rates[0] > ascend["longbench-v2-full-attention"].rates[0]


def test_readme_lists_every_published_file():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for path in PUBLISHED:
        assert f"scenarios/published/{path.name}" in readme, path.name
