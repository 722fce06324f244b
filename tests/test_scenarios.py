"""Scenario files: the shipped ones load and cite their sources; bad ones get one sentence naming
the file, the field and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench import scenarios
from specbench.errors import SpecbenchError

REPO = Path(__file__).resolve().parent.parent
SHIPPED = sorted((REPO / "scenarios").glob("*.toml")) + sorted(scenarios.EMBEDDED_DIR.glob("*.toml"))


def test_there_are_shipped_scenarios_and_a_default():
    names = {path.stem for path in SHIPPED}
    assert "default" in names
    assert len(names) >= 4


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_scenarios_load_and_cite_sources(path):
    scenario = scenarios.load_scenario(path)
    assert scenario.profiles
    for profile in scenario.profiles:
        assert len(profile.source) > 20, f"{path.name}: profile {profile.name} cites no source"
        assert len(profile.rates) == profile.num_spec_tokens


def test_default_profiles_match_the_scenario_files():
    by_name = {}
    for path in (REPO / "scenarios").glob("*.toml"):
        for profile in scenarios.load_scenario(path).profiles:
            by_name[profile.name] = profile
    default = scenarios.load_scenario(scenarios.EMBEDDED_DIR / "default.toml")
    matched = [p for p in default.profiles if p.name in by_name]
    assert len(matched) >= 3
    for profile in matched:
        assert profile == by_name[profile.name], profile.name


def test_published_numbers():
    eagle = scenarios.load_scenario(REPO / "scenarios" / "eagle3-llama3.1-8b.toml").profiles[0]
    assert eagle.rates == (0.7296, 0.5208, 0.3545) and eagle.num_spec_tokens == 3
    assert "test_acceptance_length.py" in eagle.source
    mtp = scenarios.load_scenario(REPO / "scenarios" / "deepseek-v3-mtp.toml").profiles
    assert [p.rates for p in mtp] == [(0.85,), (0.90,)]


def test_scenarios_are_found_by_name(monkeypatch):
    monkeypatch.chdir(REPO)
    assert scenarios.load_scenario("default").name == "default"
    assert scenarios.load_scenario("eagle3-llama3.1-8b").path == Path("scenarios/eagle3-llama3.1-8b.toml")
    with pytest.raises(SpecbenchError, match="'nope' does not exist .*default"):
        scenarios.load_scenario("nope")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


def test_lists_expand_into_profiles(tmp_path):
    path = write(tmp_path, 'source = "test"\nnum_spec_tokens = [2, 4]\nacceptance_length = [1.5, 2.5]\n')
    profiles = scenarios.load_scenario(path).profiles
    assert [(p.num_spec_tokens, p.acceptance_length) for p in profiles] == [(2, 1.5), (2, 2.5), (4, 1.5), (4, 2.5)]
    assert profiles[1].rates == (1.0, 0.5)
    assert profiles[3].rates == (1.0, 0.5, 0.0, 0.0)
    assert all(p.source == "test" for p in profiles)


def test_geometric_profiles_from_a_length_or_alpha(tmp_path):
    path = write(tmp_path, 'source = "test"\n[[profiles]]\nname = "geo"\nnum_spec_tokens = 2\nacceptance_length = 1.75\n'
                           'schedule = "geometric"\n[[profiles]]\nname = "iid"\nnum_spec_tokens = [1, 3]\nalpha = 0.5\n'
                           '[[profiles]]\nname = "minvar"\nnum_spec_tokens = 2\nacceptance_length = 1.75\n')
    geo, iid_1, iid_3, minvar = scenarios.load_scenario(path).profiles
    assert geo.rates == pytest.approx((0.5, 0.25)) and (geo.schedule, geo.acceptance_length) == ("geometric", 1.75)
    assert geo.alpha == pytest.approx(0.5)
    assert (iid_1.name, iid_1.rates, iid_1.schedule, iid_1.alpha) == ("iid (K=1, alpha=0.5)", (0.5,), "geometric", 0.5)
    assert iid_3.rates == (0.5, 0.25, 0.125)
    assert (minvar.rates, minvar.schedule, minvar.alpha) == ((0.75, 0.0), "min-variance", None)


def test_profiles_inherit_source_and_cost_ratio(tmp_path):
    path = write(tmp_path, 'name = "x"\nsource = "top"\ncost_ratio = 0.1\n'
                           '[[profiles]]\nrates = [0.5]\n[[profiles]]\nsource = "own"\ncost_ratio = 0\nrates = [0.4]\n')
    first, second = scenarios.load_scenario(path).profiles
    assert (first.name, first.source, first.cost_ratio) == ("x-1", "top", 0.1)
    assert (second.source, second.cost_ratio) == ("own", 0.0)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("rates = [0.5, 0.7]\n", ["field rates", "non-increasing", "[0.5, 0.7]"]),
        ("rates = [1.2]\n", ["field rates", "1.2"]),
        ("rates = [\"a\"]\n", ["field rates", "'a'"]),
        ("rates = []\n", ["field rates", "[]"]),
        ("acceptance_length = 5\nnum_spec_tokens = 3\n", ["field acceptance_length", "K=3, got 5"]),
        ("acceptance_length = 2.0\n", ["num_spec_tokens is required"]),
        ("rates = [0.5]\nacceptance_length = 1.5\n", ["acceptance_length or alpha", "got rates and acceptance_length"]),
        ("name = \"x\"\n", ["rates, acceptance_length or alpha", "got none"]),
        ("alpha = 0.8\n", ["num_spec_tokens is required with alpha"]),
        ("alpha = 1.5\nnum_spec_tokens = 3\n", ["field alpha", "[0, 1], got 1.5"]),
        ("alpha = [0.5, \"x\"]\nnum_spec_tokens = 3\n", ["field alpha", "'x'"]),
        ("acceptance_length = 2.5\nnum_spec_tokens = 3\nschedule = \"uniform\"\n",
         ["field schedule", "min-variance, geometric", "'uniform'"]),
        ("rates = [0.5]\nschedule = \"geometric\"\n", ["field schedule", "cannot go with rates"]),
        ("alpha = 0.5\nnum_spec_tokens = 2\nschedule = \"geometric\"\n", ["field schedule", "cannot go with alpha"]),
        ("[[profiles]]\nname = \"a\"\nrates = [0.4]\n[[profiles]]\nname = \"a\"\nrates = [0.5]\n",
         ["two profiles are named 'a'"]),
        ("rates = [0.9, 0.5]\nnum_spec_tokens = 3\n", ["field rates", "(3), got 2"]),
        ("rates = [0.5]\nnum_spec_tokens = 0\n", ["field num_spec_tokens", "got 0"]),
        ("rates = [0.5]\nnum_spec_tokens = \"1\"\n", ["field num_spec_tokens", "'1'"]),
        ("rates = [0.5]\ncost_ratio = -1\n", ["field cost_ratio", "got -1"]),
        ("rates = [0.5]\nrate = 0.5\n", ["unknown field rate"]),
        ("rates = [0.5]\nname = 3\n", ["field name", "got 3"]),
        ("profiles = [1, 2]\n", ["field profiles", "[1, 2]"]),
        ("rates = [0.5]\n[[profiles]]\nrates = [0.4]\n", ["field rates", "[[profiles]]"]),
        ("[[profiles]]\nrates = [0.4]\n[[profiles]]\nrates = [0.4, 0.6]\n",
         ["field profiles[1].rates", "[0.4, 0.6]"]),
        ("[[profiles]]\nrates = [0.4]\nspeed = 2\n", ["unknown field profiles[0].speed"]),
        ("rates = [0.5\n", ["not valid TOML"]),
    ],
)
def test_bad_scenario_names_file_field_and_value(tmp_path, text, needles):
    path = write(tmp_path, text)
    with pytest.raises(SpecbenchError) as error:
        scenarios.load_scenario(path)
    message = str(error.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message, message
    assert "\n" not in message


def test_make_profile_labels():
    assert scenarios.make_profile(3, acceptance_length=2.5).name == "L=2.5 min-variance"
    assert scenarios.make_profile(3, acceptance_length=2.5, schedule="geometric").name == "L=2.5 geometric"
    assert scenarios.make_profile(3, alpha=0.8).name == "alpha=0.8"
    assert scenarios.make_profile(2, rates=[0.9, 0.5]).name == "[0.9, 0.5]"
    with pytest.raises(SpecbenchError, match="cost ratio .* got -0.5"):
        scenarios.make_profile(1, rates=[0.5], cost_ratio=-0.5)
