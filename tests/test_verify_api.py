"""``specbench.verification.verify``: one signature for every backend, every bad input named, result layout."""

from __future__ import annotations

import inspect
import math

import pytest
import torch
from conftest import same_result, triton_launch

from specbench import reference
from specbench.errors import SpecbenchError
from specbench.verification import simulate_acceptance, verify

B, K, V = 3, 2, 7


def _inputs(**overrides):
    generator = torch.Generator().manual_seed(0)
    inputs = {
        "target_logits": torch.randn(B, K + 1, V, generator=generator),
        "draft_token_ids": torch.randint(0, V, (B, K), generator=generator),
        "seeds": torch.arange(B, dtype=torch.int64),
        "backend": "torch",
    }
    inputs.update(overrides)
    return inputs


def _call(**overrides):
    inputs = _inputs(**overrides)
    return verify(inputs.pop("target_logits"), inputs.pop("draft_token_ids"), **inputs)


@pytest.mark.parametrize("name", ["verify", "simulate"])
def test_every_backend_has_the_same_signature(name):
    launch = triton_launch()
    assert inspect.signature(getattr(reference, name)) == inspect.signature(getattr(launch, name))


BAD_INPUTS = [
    # (overrides, words the message must contain)
    ({"mode": "beam"}, ["mode", "'beam'"]),
    ({"backend": "cuda"}, ["backend", "'cuda'"]),
    ({"target_logits": torch.zeros(B, V)}, ["target_logits", f"[{B}, {V}]"]),
    ({"target_logits": [[0.0]]}, ["target_logits", "list"]),
    ({"target_logits": torch.zeros(B, K + 1, V, dtype=torch.int64)}, ["target_logits", "int64"]),
    ({"target_logits": torch.zeros(B, K + 1, 0)}, ["target_logits", f"[{B}, {K + 1}, 0]"]),
    ({"target_logits": torch.zeros(B, V, K + 1).transpose(1, 2)}, ["target_logits", "contiguous"]),
    ({"draft_token_ids": torch.zeros(B, K + 1, dtype=torch.int64)}, ["draft_token_ids", f"{K + 1} draft slots", f"[{B}, {K + 2}, {V}]"]),
    ({"draft_token_ids": torch.zeros(B, K)}, ["draft_token_ids", "float32"]),
    ({"num_draft_tokens": torch.tensor([0, K + 1, 1])}, ["num_draft_tokens", str(K + 1)]),
    ({"num_draft_tokens": torch.tensor([0, -1, 1])}, ["num_draft_tokens", "-1"]),
    ({"num_draft_tokens": torch.tensor([1, 1])}, ["num_draft_tokens", "[2]"]),
    ({"num_draft_tokens": torch.tensor([1.0, 1.0, 1.0])}, ["num_draft_tokens", "float32"]),
    ({"temperatures": torch.tensor([1.0, -0.5, 1.0])}, ["temperatures", "-0.5"]),
    ({"temperatures": torch.tensor([1.0, math.nan, 1.0])}, ["temperatures", "nan"]),
    ({"temperatures": torch.tensor([1, 1, 1])}, ["temperatures", "int64"]),
    ({"draft_logits": torch.zeros(B, K, V), "draft_probs": torch.zeros(B, K, V)}, ["draft_logits", "draft_probs"]),
    ({"draft_logits": torch.zeros(B, K + 1, V)}, ["draft_logits", f"[{B}, {K + 1}, {V}]"]),
    ({"draft_probs": torch.zeros(B, K, V, dtype=torch.int32)}, ["draft_probs", "int32"]),
    ({"draft_logits": torch.zeros(B, K, V), "mode": "greedy"}, ["draft_logits", "'greedy'"]),
    ({"seeds": None}, ["seeds", "probabilistic"]),
    ({"seeds": torch.arange(B + 1)}, ["seeds", f"[{B + 1}]"]),
    ({"positions": torch.zeros(B, dtype=torch.float32)}, ["positions", "float32"]),
    ({"mode": "synthetic"}, ["synthetic", "acceptance_rates"]),
    ({"mode": "synthetic", "acceptance_rates": [0.5, 0.9]}, ["non-increasing", "0.9"]),
    ({"mode": "synthetic", "acceptance_rates": [1.2, 0.5]}, ["[0, 1]", "1.2"]),
    ({"mode": "synthetic", "acceptance_rates": [math.nan, 0.5]}, ["nan"]),
    ({"mode": "synthetic", "acceptance_rates": [0.5]}, ["acceptance rates", "0.5"]),
    ({"acceptance_rates": [0.5, 0.5]}, ["acceptance_rates", "'probabilistic'"]),
    ({"mode": "synthetic", "acceptance_rates": 0.5}, ["acceptance rates", "0.5"]),
    ({"mode": "synthetic", "acceptance_rates": [0.5, "x"]}, ["acceptance rates", "'x'"]),
    ({"mode": "synthetic", "target_logits": torch.zeros(B, 1, V), "draft_token_ids": torch.zeros(B, 0, dtype=torch.int64),
      "acceptance_rates": [0.5]}, ["acceptance rates", "bonus row", "[0.5]"]),
]

BAD_SIMULATIONS = [
    # (arguments of simulate_acceptance, words the message must contain)
    ({"acceptance_rates": 0.5}, ["acceptance rates", "0.5"]),
    ({"acceptance_rates": "0.5"}, ["acceptance rates", "'0.5'"]),
    ({"num_requests": 2.5}, ["num_requests", "2.5"]),
    ({"num_requests": "3"}, ["num_requests", "'3'"]),
    ({"num_requests": 0}, ["num_requests", "0"]),
    ({"first_request": -1}, ["first_request", "-1"]),
    ({"seed": 2**63 - 5}, ["seed", str(2**63 - 5)]),
    ({"seed": -1}, ["seed", "-1"]),
    ({"seed": 1.5}, ["seed", "1.5"]),
    ({"seed": "a"}, ["seed", "'a'"]),
    ({"seed": 2**62, "first_request": 5}, ["seed", str(2**62)]),
    ({"seed": 2**62 - 1, "first_request": 2**62 - 5}, ["first_request + num_requests", str(2**62 + 5)]),
    ({"device": "bogus"}, ["device", "'bogus'"]),
    ({"device": "meta"}, ["device", "'meta'"]),
]


@pytest.mark.parametrize(("arguments", "words"), BAD_SIMULATIONS, ids=[" ".join(w) for _, w in BAD_SIMULATIONS])
def test_a_bad_simulation_argument_raises_one_error_naming_the_value(arguments, words):
    call = {"acceptance_rates": [0.8, 0.5], "num_requests": 10, "backend": "torch", **arguments}
    with pytest.raises(SpecbenchError) as caught:
        simulate_acceptance(call.pop("acceptance_rates"), call.pop("num_requests"), **call)
    message = str(caught.value)
    for word in words:
        assert word in message, f"{word!r} missing from {message!r}"


def test_rates_may_be_a_tensor_and_no_drafts_take_no_rates():
    from_list = simulate_acceptance([0.8, 0.5], 50, seed=3, backend="torch")
    assert torch.equal(simulate_acceptance(torch.tensor([0.8, 0.5]), 50, seed=3, backend="torch"), from_list)
    only_bonus = _call(mode="synthetic", target_logits=torch.randn(B, 1, V),
                       draft_token_ids=torch.zeros(B, 0, dtype=torch.int64), acceptance_rates=[])
    assert only_bonus.num_accepted.tolist() == [0] * B and only_bonus.num_emitted.tolist() == [1] * B


def test_strided_and_expanded_small_inputs_give_the_contiguous_result(run_verify):
    # the kernels index draft ids, counts, temperatures, seeds and positions densely
    generator = torch.Generator().manual_seed(5)
    batch = 4
    target = torch.randn(batch, K + 1, V, generator=generator)
    drafts = target[:, :K].argmax(dim=-1)  # accepted at T = 1 with probability p(x) >= 1/V
    plain = {
        "num_draft_tokens": torch.tensor([K, 1, 0, K], dtype=torch.int32),
        "temperatures": torch.full((batch,), 0.7),
        "seeds": torch.arange(10, 10 + batch),
        "positions": torch.arange(100, 100 + batch),
    }
    strided = {name: torch.stack([value, value], dim=1)[:, 0] for name, value in plain.items()}  # stride 2
    assert all(not value.is_contiguous() for value in strided.values())
    expected = run_verify(target, drafts, **plain)
    for mode in ("probabilistic", "greedy"):
        keywords = {} if mode == "probabilistic" else {"mode": "greedy"}
        want = expected if mode == "probabilistic" else run_verify(target, drafts, mode="greedy", **{
            k: v for k, v in plain.items() if k != "temperatures"})
        got = run_verify(target, drafts.t().contiguous().t(), **keywords, **{
            k: v for k, v in strided.items() if mode == "probabilistic" or k != "temperatures"})
        assert same_result(got, want)
    expanded = run_verify(target, drafts, **{**plain, "temperatures": torch.tensor([0.7]).expand(batch)})
    assert same_result(expanded, expected)


def test_unchecked_negative_temperatures_and_counts_follow_the_contract(run_verify):
    # check_values=False is the GPU default: a negative temperature makes every row of its request
    # invalid (nothing emitted, no id outside [0, V)); counts are clamped into [0, K]
    generator = torch.Generator().manual_seed(6)
    batch = 4
    target = torch.randn(batch, K + 1, V, generator=generator)
    drafts = torch.randint(0, V, (batch, K), generator=generator)
    seeds = torch.arange(batch)
    negative = run_verify(target, drafts, seeds=seeds, temperatures=torch.tensor([1.0, -1.0, 0.5, -2.0]),
                          check_values=False)
    assert negative.num_emitted[[1, 3]].tolist() == [0, 0]
    assert bool((negative.output_token_ids[[1, 3]] == -1).all())
    reference_rows = run_verify(target[[0, 2]], drafts[[0, 2]], seeds=seeds[[0, 2]],
                                temperatures=torch.tensor([1.0, 0.5]))
    assert torch.equal(negative.output_token_ids[[0, 2]], reference_rows.output_token_ids)
    for mode, extra in (("probabilistic", {}), ("synthetic", {"acceptance_rates": [0.9, 0.6]})):
        over = run_verify(target, drafts, mode=mode, seeds=seeds, check_values=False,
                          num_draft_tokens=torch.tensor([K + 1, K + 5, -3, 0], dtype=torch.int32), **extra)
        clamped = run_verify(target, drafts, mode=mode, seeds=seeds,
                             num_draft_tokens=torch.tensor([K, K, 0, 0], dtype=torch.int32), **extra)
        assert same_result(over, clamped)


@pytest.mark.parametrize(("overrides", "words"), BAD_INPUTS, ids=[" ".join(w) for _, w in BAD_INPUTS])
def test_a_bad_input_raises_one_error_naming_the_value(overrides, words):
    with pytest.raises(SpecbenchError) as caught:
        _call(**overrides)
    message = str(caught.value)
    for word in words:
        assert word in message, f"{word!r} missing from {message!r}"
    assert "\n" not in message


def test_triton_on_the_cpu_without_the_interpreter_is_a_usage_error(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(SpecbenchError, match="TRITON_INTERPRET=1"):
        _call(backend="triton")


def test_results_have_the_documented_layout(run_verify):
    inputs = _inputs()
    del inputs["backend"]
    result = run_verify(inputs.pop("target_logits"), inputs.pop("draft_token_ids"), **inputs)
    assert result.output_token_ids.shape == (B, K + 1) and result.output_token_ids.dtype == torch.int64
    assert result.num_emitted.shape == (B,) and result.num_emitted.dtype == torch.int32
    assert result.num_accepted.shape == (B,) and result.num_accepted.dtype == torch.int32


def test_defaults_and_integer_widths_change_nothing(run_verify):
    inputs = _inputs()
    del inputs["backend"]
    target, drafts, seeds = inputs["target_logits"], inputs["draft_token_ids"], inputs["seeds"]
    plain = run_verify(target, drafts, seeds=seeds)
    spelled_out = run_verify(
        target,
        drafts.to(torch.int32),
        seeds=seeds,
        num_draft_tokens=torch.full((B,), K, dtype=torch.int64),
        temperatures=torch.ones(B, dtype=torch.float64),
        positions=torch.zeros(B, dtype=torch.int32),
    )
    assert same_result(plain, spelled_out)


def test_greedy_mode_ignores_temperatures_and_needs_no_seeds(run_verify):
    inputs = _inputs()
    target, drafts = inputs["target_logits"], inputs["draft_token_ids"]
    drafts[:, 0] = target[:, 0].argmax(dim=-1)  # slot 0 matches: the bonus or slot 1 decides the rest
    greedy = run_verify(target, drafts, mode="greedy")
    hot = run_verify(target, drafts, mode="greedy", temperatures=torch.full((B,), 5.0))
    assert torch.equal(greedy.output_token_ids, hot.output_token_ids)
    assert bool((greedy.num_accepted >= 1).all())


def test_bfloat16_inputs_are_computed_in_float32(run_verify, backend):
    # seed 004: 16-bit inputs are upcast, and every probability is float32 arithmetic
    generator = torch.Generator().manual_seed(4)
    batch, vocab = (2000 if backend == "torch" else 6), 50
    target = (3 * torch.randn(batch, K + 1, vocab, generator=generator)).to(torch.bfloat16)
    draft = (3 * torch.randn(batch, K, vocab, generator=generator)).to(torch.bfloat16)
    drafts = torch.randint(0, vocab, (batch, K), generator=generator)
    common = {"seeds": torch.arange(batch), "temperatures": torch.full((batch,), 0.7)}
    for keywords in ({"draft_logits": draft}, {"draft_probs": draft.float().softmax(-1).to(torch.bfloat16)}, {}):
        sixteen = run_verify(target, drafts, **common, **keywords)
        upcast = {k: v.float() for k, v in keywords.items()}
        thirty_two = run_verify(target.float(), drafts, **common, **upcast)
        assert same_result(sixteen, thirty_two)


def test_outputs_are_fresh_tensors_not_views_of_the_inputs(run_verify):
    inputs = _inputs()
    target, drafts = inputs["target_logits"], inputs["draft_token_ids"]
    before = drafts.clone()
    result = run_verify(target, drafts, seeds=inputs["seeds"])
    result.output_token_ids.fill_(-7)
    assert torch.equal(drafts, before)
