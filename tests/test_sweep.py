"""The sweep library: the synthetic kernel's invariants on every backend, the statistics and their
verdicts, records, the long-form table and the charts."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import scipy.stats
import torch
from conftest import triton_launch

from specbench import acceptance, rng, sweep, sweep_charts
from specbench.errors import SpecbenchError
from specbench.scenarios import make_profile
from specbench.sweep_charts import render_sweep_charts
from specbench.verification import simulate_acceptance

EAGLE = [0.7296, 0.5208, 0.3545]


@pytest.fixture(params=["torch", "triton"])
def sim_backend(request) -> tuple[str, str]:
    """(backend, device): triton on the GPU when there is one, else under the interpreter."""
    if request.param == "triton":
        triton_launch()
        return "triton", "cuda" if torch.cuda.is_available() else "cpu"
    return "torch", "cpu"


# ---- the kernel's invariants, every backend ------------------------------------------------------

@pytest.mark.parametrize(
    ("rates", "allowed"),
    [([0.0, 0.0], {0}), ([1.0, 1.0, 1.0], {3}), ([1.0, 0.5, 0.0], {1, 2}), ([0.5, 0.0, 0.0], {0, 1}),
     (EAGLE, {0, 1, 2, 3}), ([0.9], {0, 1})],
)
def test_simulated_counts_obey_the_profile(sim_backend, rates, allowed):
    backend, device = sim_backend
    counts = simulate_acceptance(rates, 777, seed=5, backend=backend, device=device)
    assert counts.dtype == torch.int32 and counts.shape == (777,)
    assert set(counts.cpu().tolist()) == allowed  # every possible A shows up in 777 steps, no other


def test_a_rate_of_one_accepts_every_draw(sim_backend):
    # request 10909319 of seed 0 draws the largest uniform at position 1 (found by searching 2**25 requests)
    top = rng.uniform(rng.request_seed(0, 10_909_319), torch.tensor(1), rng.ACCEPT)
    assert float(top) == 1 - 2**-24
    backend, device = sim_backend
    counts = simulate_acceptance([1.0, 1.0, 1.0], 4, seed=0, first_request=10_909_317, backend=backend, device=device)
    assert counts.cpu().tolist() == [3, 3, 3, 3]


def test_counts_do_not_depend_on_chunking_or_backend(sim_backend):
    backend, device = sim_backend
    whole = simulate_acceptance(EAGLE, 1000, seed=11, backend=backend, device=device).cpu()
    parts = torch.cat([
        simulate_acceptance(EAGLE, 300, seed=11, first_request=0, backend=backend, device=device).cpu(),
        simulate_acceptance(EAGLE, 700, seed=11, first_request=300, backend=backend, device=device).cpu(),
    ])
    assert torch.equal(whole, parts)
    assert torch.equal(whole, simulate_acceptance(EAGLE, 1000, seed=11, backend="torch"))
    assert not torch.equal(whole, simulate_acceptance(EAGLE, 1000, seed=12, backend=backend, device=device).cpu())


def test_sweep_through_triton_matches_torch():
    triton_launch()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    profiles = [make_profile(3, rates=EAGLE), make_profile(4, acceptance_length=2.5)]
    triton = sweep.run_sweep(profiles, num_requests=500, seed=3, backend="triton", device=device)
    reference = sweep.run_sweep(profiles, num_requests=500, seed=3, backend="torch", device="cpu")
    for a, b in zip(triton, reference):
        assert a["backend"] == "triton" and b["backend"] == "torch"
        assert a["accepted_histogram"] == b["accepted_histogram"]


def test_each_case_has_its_own_seed_and_reproduces_alone():
    profiles = [make_profile(3, rates=EAGLE), make_profile(3, acceptance_length=2.5, schedule="geometric"),
                make_profile(2, rates=[0.6, 0.3])]
    records = sweep.run_sweep(profiles, num_requests=2000, seed=4, backend="torch", device="cpu")
    assert len({r["case_seed"] for r in records}) == 3 and all(r["seed"] == 4 for r in records)
    assert records[0]["case_seed"] != sweep.run_sweep(profiles[:1], num_requests=10, seed=5, backend="torch",
                                                      device="cpu")[0]["case_seed"]
    for record in records:  # the record says how to get its histogram back
        counts = simulate_acceptance(record["configured_rates"], 2000, seed=record["case_seed"], backend="torch")
        assert torch.bincount(counts.long(), minlength=len(record["configured_rates"]) + 1).tolist() == \
            record["accepted_histogram"]
    # run alone (or after other cases), a case gives the same result
    alone = sweep.run_sweep(profiles[2:], num_requests=2000, seed=4, backend="torch", device="cpu")
    assert alone[0]["accepted_histogram"] == records[2]["accepted_histogram"]


def test_resumed_cases_are_skipped_and_keep_their_index():
    profiles = [make_profile(1, rates=[0.5]), make_profile(1, rates=[0.4]), make_profile(1, rates=[0.3])]
    full = sweep.run_sweep(profiles, num_requests=500, seed=1, backend="torch", device="cpu")
    rest = sweep.run_sweep(profiles, num_requests=500, seed=1, backend="torch", device="cpu", skip_cases={0, 2})
    assert [r["case"] for r in rest] == [1]
    assert (rest[0]["accepted_histogram"], rest[0]["case_seed"]) == (full[1]["accepted_histogram"], full[1]["case_seed"])
    assert rest[0]["bug_p_threshold"] == full[1]["bug_p_threshold"]  # the skipped cases still count


def test_k_is_capped():
    # one limit for every profile: make_profile refuses it, and a sweep refuses a Profile built by hand
    with pytest.raises(SpecbenchError, match=r"K \(draft tokens per step\) must be at most 64, got 65"):
        make_profile(65, acceptance_length=2.0)
    by_hand = dataclasses.replace(make_profile(3, acceptance_length=2.0), num_spec_tokens=65, name="typed")
    with pytest.raises(SpecbenchError, match="must be at most 64, got 65 \\(profile 'typed'\\)"):
        sweep.run_sweep([by_hand], num_requests=10, backend="torch", device="cpu")


def test_histogram_is_the_same_in_small_chunks(monkeypatch):
    profile = make_profile(3, rates=EAGLE)
    whole, _ = sweep.simulate_histogram(profile, 5000, seed=2, backend="torch", device="cpu")
    monkeypatch.setattr(sweep, "_CHUNK_POSITIONS", 999)
    progress = []
    chunked, _ = sweep.simulate_histogram(profile, 5000, seed=2, backend="torch", device="cpu",
                                          on_progress=progress.append)
    assert chunked == whole and sum(whole) == 5000
    assert len(progress) == math.ceil(5000 / (999 // 3)) and sum(progress) == 5000 * 3


# ---- statistics and verdicts --------------------------------------------------------------------

def test_measure_hand_made_histogram():
    record = sweep.measure([0, 50, 50, 0], [1.0, 0.5, 0.0], bug_p=1e-5)
    assert record["measured_rates"] == [1.0, 0.5, 0.0]
    assert record["measured_conditional_rates"] == [1.0, 0.5, 0.0]
    assert record["measured_accepted_distribution"] == [0.0, 0.5, 0.5, 0.0]
    assert record["mean_acceptance_length"] == 2.5 and record["expected_acceptance_length"] == 2.5
    assert record["measured_accepted_variance"] == pytest.approx(0.25)
    assert record["verdict"] == "ok" and record["num_bugs"] == 0
    assert record["rates_verdicts"] == ["ok", "ok", "ok"]
    # Wilson at 100 of 100: [n / (n + z^2), 1]; at 0 of 100: [0, z^2 / (n + z^2)]
    z2 = 1.959963984540054**2
    low, high = record["measured_rates_ci_low"], record["measured_rates_ci_high"]
    assert low[0] == pytest.approx(100 / (100 + z2)) and high[0] == 1.0
    assert low[2] == 0.0 and high[2] == pytest.approx(z2 / (100 + z2))
    assert 0.39 < low[1] < 0.5 < high[1] < 0.61  # Wilson, n = 100: 0.5 +- ~0.097
    # no trials reach position 3 once p_2 is 0: its conditional rate is not measured
    none_past_zero = sweep.measure([30, 70, 0, 0], [0.7, 0.0, 0.0], bug_p=1e-5)
    assert none_past_zero["measured_conditional_rates"][2] is None
    assert none_past_zero["conditional_rates_verdicts"] == ["ok", "ok", "n/a"]


def test_a_miss_chance_explains_is_reported_not_alarmed():
    # 540 of 1000 at p = 0.5: Wilson [0.509, 0.571] misses 0.5, but the binomial p-value is ~0.012
    record = sweep.measure([460, 540], [0.5], bug_p=1e-5)
    assert record["rates_verdicts"] == ["outside 95%"]
    assert record["accepted_distribution_verdicts"] == ["outside 95%", "outside 95%"]
    assert record["mean_acceptance_length_verdict"] == "outside 95%"
    assert record["num_outside_95"] == 3 and record["num_bugs"] == 0 and record["verdict"] == "ok"
    assert 1e-5 < record["min_p_value"] < 0.05


def test_the_mean_length_test_holds_its_level_when_accepted_drafts_are_rare():
    # 3 accepted of 1000 at rate 2e-4: twice the exact binomial tail is 0.0023 (the normal one 4e-10)
    record = sweep.measure([997, 3], [0.0002], bug_p=1e-3)
    doubled_tail = 2 * min(scipy.stats.binom.cdf(3, 1000, 0.0002), scipy.stats.binom.sf(2, 1000, 0.0002))
    assert record["mean_acceptance_length_p_value"] == pytest.approx(doubled_tail, rel=1e-9)
    assert record["mean_acceptance_length_verdict"] == "outside 95%" and record["verdict"] == "ok"
    # every step in one bin: the interval still has the closed-form width
    none_accepted = sweep.measure([1000, 0], [0.0002], bug_p=1e-3)
    assert none_accepted["mean_acceptance_length_ci_high"] > 1.0 and none_accepted["verdict"] == "ok"
    # the same near full acceptance (rejections rare), K = 3, against the law of many correct runs
    rates = [0.99, 0.98, 0.97]
    distribution = acceptance.accepted_distribution(rates)
    generator = np.random.default_rng(3)
    runs = generator.multinomial(200, distribution, size=4000) @ np.arange(4)
    p_values = np.array([sweep._sum_p_value(int(total), 200, distribution) for total in runs])
    for level in (0.01, 0.05):  # a valid test rejects at most `level` of correct runs (up to noise)
        assert (p_values < level).mean() <= level + 3 * math.sqrt(level / 4000)


def test_a_single_count_past_a_zero_rate_is_a_bug():
    record = sweep.measure([0, 500_000, 499_999, 1], [1.0, 0.5, 0.0], bug_p=1e-6)
    assert record["verdict"] == "BUG"
    assert record["rates_verdicts"][2] == "BUG" and record["accepted_distribution_verdicts"][3] == "BUG"


def numpy_histogram(conditional: list[float], n: int, seed: int) -> list[int]:
    draws = np.random.default_rng(seed).uniform(size=(n, len(conditional))) < np.array(conditional)[None, :]
    return np.bincount(np.cumprod(draws, axis=1).sum(axis=1), minlength=len(conditional) + 1).tolist()


def test_verdicts_catch_unconditional_rates_used_as_conditional():
    # the classic bug: feeding p_i where c_i belongs gives P(A >= i) = p_1 p_2 ... p_i
    rates = [0.8, 0.6, 0.4]
    bug_p = sweep.FAMILY_BUG_ALPHA / 9
    right = sweep.measure(numpy_histogram(acceptance.conditional_rates(rates), 200_000, 1), rates, bug_p=bug_p)
    wrong = sweep.measure(numpy_histogram(rates, 200_000, 1), rates, bug_p=bug_p)
    assert right["verdict"] == "ok" and right["min_p_value"] > bug_p
    assert wrong["verdict"] == "BUG"
    assert wrong["rates_verdicts"] == ["ok", "BUG", "BUG"] and wrong["mean_acceptance_length_verdict"] == "BUG"


def test_measure_rejects_a_histogram_of_the_wrong_size():
    with pytest.raises(SpecbenchError, match="K \\+ 1 = 3 bins, got 2"):
        sweep.measure([1, 2], [0.5, 0.2], bug_p=1e-5)


def test_default_num_requests_bounds_the_mean_length_interval():
    z = 1.959963984540054
    for k in range(1, 33):
        n = sweep.default_num_requests(k)
        assert n >= sweep.MIN_DEFAULT_REQUESTS
        assert z * math.sqrt(k * k / 4 / n) <= 0.01  # Var(A) <= K^2 / 4 for A in [0, K]
    assert sweep.default_num_requests(3) == 2_000_000


def test_measured_intervals_hold_the_closed_forms():
    # an honest run: every check passes the BUG threshold, degenerate positions match exactly
    profiles = [make_profile(3, rates=EAGLE), make_profile(3, acceptance_length=2.5),
                make_profile(3, rates=[1.0, 1.0, 0.0])]
    records = sweep.run_sweep(profiles, num_requests=200_000, seed=0, backend="torch", device="cpu")
    assert [r["verdict"] for r in records] == ["ok", "ok", "ok"]
    for record in records:
        assert abs(record["mean_acceptance_length"] - record["expected_acceptance_length"]) < 0.02
        assert record["mean_acceptance_length_ci_high"] - record["mean_acceptance_length_ci_low"] < 0.02
    assert records[1]["measured_rates"][0] == 1.0 and records[1]["measured_rates"][2] == 0.0
    assert records[2]["mean_acceptance_length"] == 3.0 and records[2]["measured_accepted_variance"] == 0.0


# ---- records --------------------------------------------------------------------------------------

REQUIRED = ("kind", "profile", "source", "num_spec_tokens", "configured_rates", "measured_rates",
            "measured_rates_ci_low", "measured_rates_ci_high", "configured_conditional_rates",
            "measured_conditional_rates", "expected_accepted_distribution", "measured_accepted_distribution",
            "mean_acceptance_length", "expected_acceptance_length", "mean_acceptance_length_ci_low",
            "mean_acceptance_length_ci_high", "expected_accepted_variance", "measured_accepted_variance",
            "cost_ratio", "expected_speedup", "measured_speedup", "backend", "device", "num_requests", "seed",
            "positions_per_second", "verdict")


def test_records_hold_what_the_issue_lists():
    seen = []
    profiles = [make_profile(2, rates=[0.9, 0.5], source="a paper", cost_ratio=0.2), make_profile(1, rates=[0.3])]
    records = sweep.run_sweep(profiles, num_requests=1000, seed=9, backend="torch", device="cpu",
                              on_record=seen.append, scenario="mine")
    assert seen == records
    first, second = records
    for key in REQUIRED:
        assert key in first, key
    assert first["kind"] == "sweep" and first["scenario"] == "mine" and first["source"] == "a paper"
    assert (first["case"], second["case"]) == (0, 1)
    assert sum(first["accepted_histogram"]) == 1000 and first["simulated_positions"] == 2000
    assert first["cost_ratio"] == 0.2 and second["cost_ratio"] == sweep.DEFAULT_COST_RATIO
    assert first["expected_speedup"] == pytest.approx(2.4 / 1.4)
    overridden = sweep.run_sweep(profiles, num_requests=100, backend="torch", device="cpu", cost_ratio=0.0)
    assert [r["cost_ratio"] for r in overridden] == [0.0, 0.0]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"num_requests": 1}, "got 1"), ({"seed": -1}, "got -1"), ({"cost_ratio": float("nan")}, "got nan"),
     ({"device": "tpu"}, "got 'tpu'"), ({"backend": "jax"}, "got 'jax'")],
)
def test_run_sweep_rejects(kwargs, needle):
    with pytest.raises(SpecbenchError) as error:
        sweep.run_sweep([make_profile(1, rates=[0.5])], **kwargs)
    assert needle in str(error.value)
    with pytest.raises(SpecbenchError, match="at least one profile"):
        sweep.run_sweep([])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_refused():
    with pytest.raises(SpecbenchError, match="'cuda' was asked for"):
        sweep.resolve_device("cuda")
    assert sweep.resolve_device("auto") == "cpu"


def test_long_form_and_csv(tmp_path):
    records = sweep.run_sweep([make_profile(3, rates=EAGLE), make_profile(1, rates=[0.5])], num_requests=500,
                              backend="torch", device="cpu")
    frame = sweep.long_form([*records, {"kind": "kernels"}])
    assert len(frame) == (3 + 3 + 4 + 1) + (1 + 1 + 2 + 1)
    assert set(frame["quantity"]) == {"p", "c", "P(A=j)", "L"}
    row = frame[(frame["case"] == 0) & (frame["quantity"] == "p") & (frame["index"] == 2)].iloc[0]
    assert row["expected"] == 0.5208 and row["measured"] == records[0]["measured_rates"][1]
    path = sweep.write_long_csv(records, tmp_path)
    assert path.read_text().splitlines()[0] == ",".join(frame.columns)


# ---- charts ----------------------------------------------------------------------------------------

def test_charts_render_from_records_only(tmp_path):
    profiles = [make_profile(k, acceptance_length=length) for k in (1, 3) for length in (1.5, 2.0)]
    records = sweep.run_sweep(profiles, num_requests=300, backend="torch", device="cpu")
    paths = render_sweep_charts([*records, {"kind": "kernels"}], tmp_path / "charts")
    assert [p.name for p in paths] == ["acceptance_per_position.png", "accepted_distribution.png",
                                      "expected_speedup.png"]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert render_sweep_charts([{"kind": "kernels"}], tmp_path / "none") == []
    many = [dict(records[i % 4], case=i) for i in range(13)]
    names = {p.name for p in render_sweep_charts(many, tmp_path / "many")}
    assert {"acceptance_per_position-2.png", "accepted_distribution-2.png"} <= names


def test_speedup_chart_shows_every_case_at_its_own_cost_ratio():
    profiles = [make_profile(3, rates=EAGLE), make_profile(3, rates=[0.5, 0.3, 0.1], cost_ratio=0.0),
                make_profile(1, rates=[0.85], cost_ratio=0.04), make_profile(5, alpha=0.6, cost_ratio=0.0)]
    records = sweep.run_sweep(profiles, num_requests=300, backend="torch", device="cpu")
    figure = sweep_charts._speedup_figure(records)
    panels = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["c = 0.05", "c = 0", "c = 0.04"]
    for ax, cases in zip(panels, ([records[0]], [records[1], records[3]], [records[2]])):
        cases_drawn = [line for line in ax.lines if line.get_linestyle() == "None" and line.get_label()[0] != "_"]
        points = [(line.get_xdata()[0], line.get_ydata()[0], line.get_label()) for line in cases_drawn]
        # each measured case is a point of its own marker, named in the panel's legend
        assert points == [(r["mean_acceptance_length"], r["measured_speedup"], f"{r['profile']} (K={r['num_spec_tokens']})")
                          for r in cases]
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [p[2] for p in points]
        assert len({line.get_marker() for line in cases_drawn}) == len(cases)
    assert len({ax.get_ylim() for ax in panels}) == 1  # one y scale
    # at c = 0 every K's line is S = L: each keeps its own colour and dash, and a label where it ends
    curves = [line for line in panels[1].lines if line.get_label().startswith("K=")]
    assert len({(line.get_color(), str(line.get_linestyle())) for line in curves}) == len(curves) == 5  # K 1,2,3,5,7
    assert sorted(t.get_text() for t in panels[1].texts) == sorted(line.get_label() for line in curves)


def test_rate_chart_draws_one_line_where_p_and_c_coincide_and_the_distribution_names_both_lengths(tmp_path):
    profiles = [make_profile(3, acceptance_length=2.5), make_profile(3, acceptance_length=2.5, schedule="geometric")]
    records = sweep.run_sweep(profiles, num_requests=300, backend="torch", device="cpu")
    _, axes = sweep_charts._panels(2, 4.6, 3.4)
    for ax, record in zip(axes, records):
        sweep_charts._draw_rates(ax, record)
    configured = [[line.get_label() for line in ax.lines if line.get_label().startswith("configured")] for ax in axes]
    assert configured == [["configured p_i = c_i"], ["configured p_i", "configured c_i"]]
    sweep_charts._draw_distribution(axes[0], records[0])
    assert axes[0].get_title() == (f"L=2.5 min-variance  (K=3)\nL configured 2.500, measured "
                                   f"{records[0]['mean_acceptance_length']:.3f}")
