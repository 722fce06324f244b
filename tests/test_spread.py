"""Per-request spread in the synthetic simulation: the rule, both backends bit for bit, the exact law
of the M-point mixture, model profiles in scenarios and sweeps, and `profile fit`'s model report."""

from __future__ import annotations

from pathlib import Path

import pytest
import scipy.stats
import tomllib
import torch
from conftest import triton_launch
from typer.testing import CliRunner

from specbench import acceptance, profile_models, rng, scenarios, sweep
from specbench.cli import app
from specbench.errors import SpecbenchError
from specbench.verification import simulate_acceptance

EXAMPLES = Path(__file__).resolve().parent.parent / "scenarios" / "examples"
ALPHAS = profile_models.beta_quantile_rates(3.0, 1.2, 64)
K = 4
MIXTURE = profile_models.mixture_rates(ALPHAS, K)


def test_the_rule_picks_a_rate_per_request_from_the_spread_stream():
    # the docstring's rule written out for a few requests: m from the top bits of the SPREAD word
    counts = simulate_acceptance(MIXTURE, 50, seed=9, backend="torch", request_rates=ALPHAS)
    for r in range(50):
        seed = rng.request_seed(9, r)
        key = rng.seed_key(seed)
        word = int(rng.fmix32(rng.stream_key(key, torch.tensor(0), rng.SPREAD)))
        alpha = torch.tensor(ALPHAS[(word * 64) >> 32], dtype=torch.float32)
        accepted = 0
        while accepted < K and rng.to_uniform(rng.fmix32(rng.stream_key(key, torch.tensor(accepted), rng.ACCEPT))) < alpha:
            accepted += 1
        assert int(counts[r]) == accepted


def test_one_component_is_the_iid_profile_bit_for_bit():
    rates = acceptance.iid_rates(0.625, 3)  # 0.625 and its powers are exact in float32
    assert torch.equal(simulate_acceptance(rates, 4000, seed=2, backend="torch", request_rates=[0.625]),
                       simulate_acceptance(rates, 4000, seed=2, backend="torch"))


def test_triton_equals_torch_with_spread():
    triton_launch()
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the interpreter without a GPU: small sizes
    for seed, first in ((3, 0), (4, 1000)):
        got = simulate_acceptance(MIXTURE, 1500, seed=seed, first_request=first, backend="triton", device=device,
                                  request_rates=ALPHAS)
        want = simulate_acceptance(MIXTURE, 1500, seed=seed, first_request=first, backend="torch",
                                   request_rates=ALPHAS)
        assert torch.equal(got.cpu(), want)


def test_the_empirical_law_is_the_mixtures_closed_form():
    n = 200_000
    counts = simulate_acceptance(MIXTURE, n, seed=5, backend="torch", request_rates=ALPHAS)
    observed = torch.bincount(counts.to(torch.int64), minlength=K + 1).tolist()
    law = acceptance.accepted_distribution(MIXTURE)
    assert scipy.stats.chisquare(observed, [p * n for p in law]).pvalue > 1e-3
    # and it is not the i.i.d. law of the same mean length
    alpha = acceptance.length_to_alpha(acceptance.mean_acceptance_length(MIXTURE), K)
    iid = acceptance.accepted_distribution(acceptance.iid_rates(alpha, K))
    assert scipy.stats.chisquare(observed, [p * n for p in iid]).pvalue < 1e-6


@pytest.mark.parametrize(("values", "said"), [([0.5, 0.5, 0.5], "power of two"), ([], "power of two"),
                                              ([0.5, 1.5], "in [0, 1]"), ("0.5", "list of numbers")])
def test_bad_request_rates_are_refused(values, said):
    with pytest.raises(SpecbenchError, match=None) as raised:
        simulate_acceptance([0.5], 10, backend="torch", request_rates=values)
    assert said in str(raised.value)


def _scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_scenarios_hold_model_profiles(tmp_path):
    path = _scenario(tmp_path, '[[profiles]]\nname = "bg"\nmodel = "beta-geometric"\na = 3.0\nb = 1.2\n'
                               'num_spec_tokens = [3, 5]\nspread_components = 256\n'
                               '[[profiles]]\nname = "dd"\nmodel = "depth-decay"\nc1 = 0.8\nd = 0.9\nnum_spec_tokens = 3\n'
                               '[[profiles]]\nname = "i"\nmodel = "iid"\nalpha = 0.7\nnum_spec_tokens = 3\n')
    bg3, bg5, dd, iid = scenarios.load_scenario(path).profiles
    assert bg3.model == "beta-geometric" and bg3.model_parameters == (3.0, 1.2) and len(bg3.request_rates) == 256
    assert list(bg5.rates) == pytest.approx(profile_models.mixture_rates(bg5.request_rates, 5))
    assert dd.request_rates is None and list(dd.rates) == pytest.approx(profile_models.rates("depth-decay", (0.8, 0.9), 3))
    assert iid.alpha == 0.7 and list(iid.rates) == pytest.approx(acceptance.iid_rates(0.7, 3))


@pytest.mark.parametrize(("text", "said"), [
    ('model = "beta-geometric"\na = 3.0\nnum_spec_tokens = 3\n', "needs the field b"),
    ('model = "beta-geometric"\na = 3.0\nb = 1.0\nc1 = 0.5\nnum_spec_tokens = 3\n', "cannot go with"),
    ('model = "beta-geometric"\na = 3.0\nb = 1.0\nrates = [0.5]\nnum_spec_tokens = 3\n', "cannot go with"),
    ('model = "beta-geometric"\na = -1.0\nb = 1.0\nnum_spec_tokens = 3\n', "must be > 0"),
    ('model = "beta-geometric"\na = 1.0\nb = 1.0\nspread_components = 100\nnum_spec_tokens = 3\n', "power of two"),
    ('model = "depth-decay"\nc1 = 0.5\nd = 1.5\nnum_spec_tokens = 3\n', "[0, 1]"),
    ('model = "depth-decay"\nc1 = 0.5\nd = 0.5\n', "num_spec_tokens is required"),
    ('model = "gamma"\nnum_spec_tokens = 3\n', "must be one of"),
    ('rates = [0.5]\na = 3.0\n', "add model"),
])
def test_bad_model_profiles_are_one_sentence(tmp_path, text, said):
    with pytest.raises(SpecbenchError, match=None) as raised:
        scenarios.load_scenario(_scenario(tmp_path, text))
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_sweep_of_a_beta_geometric_profile_checks_the_mixture_and_differs_from_iid():
    profile = scenarios.make_model_profile(4, "beta-geometric", (3.0, 1.2), spread_components=1024)
    record, = sweep.run_sweep([profile], num_requests=100_000, seed=2, backend="torch", device="cpu")
    assert record["verdict"] == "ok" and record["model"] == "beta-geometric"
    assert record["expected_accepted_distribution"] == pytest.approx(acceptance.accepted_distribution(profile.rates))
    assert record["spread_discretisation_gap"] < 1e-4 and record["spread_components"] == 1024
    assert record["iid_same_length_p_value"] < 1e-6  # same L, another law of A
    assert record["measured_accepted_variance"] > record["iid_same_length_variance"]
    # the spread is part of the case seed: the same rates without spread are another experiment
    assert sweep.profile_key(profile) != sweep.profile_key(scenarios.make_profile(4, rates=list(profile.rates)))


def test_sweep_with_spread_through_triton_matches_torch():
    triton_launch()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    profile = scenarios.make_model_profile(3, "beta-geometric", (2.0, 1.0), spread_components=128)
    a, = sweep.run_sweep([profile], num_requests=600, seed=3, backend="triton", device=device)
    b, = sweep.run_sweep([profile], num_requests=600, seed=3, backend="torch", device="cpu")
    assert a["accepted_histogram"] == b["accepted_histogram"]


def test_the_shipped_spread_scenario_loads():
    loaded = scenarios.load_scenario(Path(__file__).resolve().parent.parent / "scenarios" / "spread-vs-iid.toml")
    assert [p.model for p in loaded.profiles] == ["beta-geometric", "beta-geometric", "depth-decay"]


def test_profile_fit_reports_every_model_the_best_and_the_figure(tmp_path):
    out = tmp_path / "fit.toml"
    result = CliRunner().invoke(app, ["profile", "fit", str(EXAMPLES / "vllm-metrics-before.prom"),
                                      str(EXAMPLES / "vllm-metrics-after.prom"), "-o", str(out), "--extend-k", "6",
                                      "--bootstrap", "40"])
    assert result.exit_code == 0, result.output
    for text in ("iid", "beta-geometric", "depth-decay", "best model (lowest AIC)", "extended to K = 6"):
        assert text in result.output
    figure = tmp_path / "fit-fit.png"
    assert figure.is_file() and figure.read_bytes()[:4] == b"\x89PNG"
    data = tomllib.loads(out.read_text())
    models = data["fit"]["models"]
    assert models["best"] in profile_models.MODEL_NAMES and models["extend_k"] == 6
    assert len(models["iid"]["extended_rates"]) == 6 and "alpha_ci" in models["iid"]
    assert set(models["beta-geometric"]) >= {"a", "b", "a_ci", "b_ci", "aic", "g_statistic", "degrees_of_freedom"}
    scenarios.load_scenario(out)  # still a scenario a sweep reads


def test_profile_fit_refuses_an_extension_below_the_measured_k(tmp_path):
    result = CliRunner().invoke(app, ["profile", "fit", str(EXAMPLES / "vllm-metrics-after.prom"), "-o",
                                      str(tmp_path / "x.toml"), "--extend-k", "2"])
    assert result.exit_code == 2 and "below the measured K" in result.output


def test_profile_fit_can_make_the_best_model_the_scenarios_profile(tmp_path):
    out = tmp_path / "model.toml"
    result = CliRunner().invoke(app, ["profile", "fit", str(EXAMPLES / "vllm-metrics-before.prom"),
                                      str(EXAMPLES / "vllm-metrics-after.prom"), "-o", str(out), "--extend-k", "8",
                                      "--bootstrap", "30", "--use-model", "best"])
    assert result.exit_code == 0, result.output
    data = tomllib.loads(out.read_text())
    assert data["model"] == data["fit"]["models"]["best"] and "rates" not in data
    profile, = scenarios.load_scenario(out).profiles
    assert profile.num_spec_tokens == 8 and profile.model == data["model"]
    assert list(profile.rates) == pytest.approx(data["fit"]["models"][data["model"]]["extended_rates"], rel=1e-9)
    refused = CliRunner().invoke(app, ["profile", "fit", str(EXAMPLES / "vllm-metrics-after.prom"), "-o",
                                       str(tmp_path / "y.toml"), "--use-model", "gamma"])
    assert refused.exit_code == 2 and "must be one of" in refused.output
