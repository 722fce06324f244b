"""Benchmark cases, inputs with planned acceptance, byte counts, output checks and runs (CPU)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace

import pytest
import torch

from specbench import acceptance, bench, timing
from specbench.errors import SpecbenchError
from specbench.implementations import Implementation, resolve_all
from specbench.scenarios import make_profile
from specbench.verification import VerifyResult, verify

FAST = timing.TimingConfig(warmup=0, min_samples=2, max_samples=2, l2_flush=False)


def _case(mode="greedy", batch=6, k=3, vocab=50, draft="none", length=2.5, dtype="float32"):
    profile = make_profile(k, acceptance_length=length)
    return bench.Case(mode, batch, k, vocab, dtype, draft, profile.rates, profile.name)


# --- planned acceptance -----------------------------------------------------------------------------------------


def test_accepted_counts_follow_the_min_variance_schedule_exactly():
    counts = bench.assign_accepted_counts([1.0, 0.5, 0.0], 8)  # L = 2.5
    assert sorted(counts) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert bench.assign_accepted_counts([1.0, 0.5, 0.0], 8) == counts  # same seed, same order


def test_accepted_counts_follow_a_scenario_distribution():
    counts = bench.assign_accepted_counts([0.73, 0.52, 0.35], 100)
    # P(A = j) = 0.27, 0.21, 0.17, 0.35
    assert [counts.count(j) for j in range(4)] == [27, 21, 17, 35]
    assert sum(counts) / 100 == pytest.approx(0.73 + 0.52 + 0.35)


def test_accepted_counts_round_by_largest_remainder():
    assert bench.assign_accepted_counts([1.0, 0.5, 0.0], 1) in ([1], [2])
    assert sorted(bench.assign_accepted_counts([0.9, 0.0], 3)) == [1, 1, 1]  # quotas 0.3, 2.7, 0


@pytest.mark.parametrize("rates", [[0.7296, 0.5208, 0.3545], [0.54, 0.36, 0.26], [0.9, 0.2, 0.1, 0.05]])
def test_a_small_batch_is_planned_at_the_nearest_mean_it_can_have(rates):
    # at B = 1 the most likely count (A = 3 for EAGLE-3's profile) would plan L = 4 for L = 2.6
    mean = acceptance.mean_acceptance_length(rates) - 1
    for batch in (1, 2, 3, 5, 8, 13):
        counts = bench.assign_accepted_counts(rates, batch)
        assert len(counts) == batch and abs(sum(counts) / batch - mean) <= 0.5 / batch + 1e-12


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(("mode", "draft"), [("greedy", "none"), ("probabilistic", "logits"),
                                             ("probabilistic", "probs"), ("probabilistic", "none"),
                                             ("synthetic", "none")])
def test_inputs_make_accepted_positions_certain_and_the_next_one_impossible(mode, draft, dtype):
    case = _case(mode, batch=8, k=3, vocab=97, draft=draft, length=2.5, dtype=dtype)
    inputs = bench.make_inputs(case, seed=3)
    target = inputs.target_logits.double()  # [B, K + 1, V]
    p = _softmax(target)
    for b, planned in enumerate(inputs.planned_accepted.tolist()):
        for i in range(case.num_spec_tokens):
            x = int(inputs.draft_token_ids[b, i])
            assert 0 <= x < case.vocab_size
            if i < planned:
                assert x == int(target[b, i].argmax())  # greedy accepts
                if draft == "none" and mode == "probabilistic":
                    assert float(p[b, i, x]) > 1 - 1e-9  # u < p(x) for every u < 1
                elif draft == "logits":
                    assert float(_softmax(inputs.draft_logits[b, i])[x]) < 0.9 * float(p[b, i, x])
                elif draft == "probs":
                    assert float(inputs.draft_probs[b, i, x]) < 0.9 * float(p[b, i, x])
            elif i == planned:
                assert x != int(target[b, i].argmax())
                assert float(p[b, i, x]) == 0.0  # u * q(x) < 0 never holds
    assert inputs.target_logits.dtype == bench.DTYPES[dtype]
    assert (inputs.draft_logits is not None) == (draft == "logits")
    assert (inputs.draft_probs is not None) == (draft == "probs")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(("mode", "draft"), [("greedy", "none"), ("probabilistic", "logits"),
                                             ("probabilistic", "probs"), ("probabilistic", "none")])
def test_the_torch_reference_accepts_exactly_the_planned_counts(mode, draft, dtype):
    case = _case(mode, batch=16, k=4, vocab=301, draft=draft, length=2.75, dtype=dtype)
    inputs = bench.make_inputs(case)
    result = bench.torch_reference(inputs)
    assert result.num_accepted.tolist() == inputs.planned_accepted.tolist()
    assert float(result.num_accepted.double().mean()) + 1 == pytest.approx(2.75)


def test_synthetic_inputs_take_their_acceptance_from_the_rates():
    case = _case("synthetic", batch=64, k=3, length=3.0)  # rates [1, 1, 0]: exactly two accepted
    result = bench.torch_reference(bench.make_inputs(case))
    assert result.num_accepted.tolist() == [2] * 64


# --- bytes -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "draft", "needed", "all_rows"),
    [
        # B=2, K=3, V=10 float32 (a row is 40 bytes), A = [0, 3]; small tensors 2*(24+32+8) + 2*24 = 176 bytes
        ("greedy", "none", 5 * 40 + 176, 8 * 40 + 176),  # target rows 0..0 and 0..3
        ("probabilistic", "logits", (5 + 4) * 40 + 176, 14 * 40 + 176),  # + draft rows 0..0 and 0..2
        ("probabilistic", "probs", (5 + 1) * 40 + 3 * 4 + 176, 14 * 40 + 176),  # + one rejected row, 3 values
        ("probabilistic", "none", 5 * 40 + 176, 8 * 40 + 176),
        ("synthetic", "none", 2 * 40 + 176, 8 * 40 + 176),  # only the row each request emits from
    ],
)
def test_bytes_count_only_the_rows_a_request_needs(mode, draft, needed, all_rows):
    case = bench.Case(mode, 2, 3, 10, "float32", draft, (0.5, 0.5, 0.5), "x")
    assert bench.bytes_moved(case, torch.tensor([0, 3])) == (needed, all_rows)


def test_bytes_scale_with_the_element_size():
    wide = bench.Case("greedy", 1, 1, 1000, "float32", "none", (1.0,), "x")
    narrow = bench.Case("greedy", 1, 1, 1000, "bfloat16", "none", (1.0,), "x")
    small = 1 * (8 + 16 + 8) + 24
    assert bench.bytes_moved(wide, torch.tensor([1]))[0] - small == 2 * (bench.bytes_moved(narrow, torch.tensor([1]))[0]
                                                                        - small)


def test_block_bytes_count_the_rows_every_block_rule_reads():
    # K = 3, accepted 3, 0, 2. Logits: statistics of target and draft rows 0..2 for every request, plus the bonus
    # row 3 (7 rows), rows 0..2 (6), rows 0..2 (6). Probabilities: the bonus row (1); the terminal row 0, target
    # and draft (2); row 2 (2); plus p(x), q(x). Residual masses depend on the uniforms: not counted (a floor).
    accepted = torch.tensor([3, 0, 2])
    for draft, target, rows, gathers in (("logits", "logits", 19, 0), ("probs", "probs", 5, 3 * 3 * 4 * 2)):
        block = bench.Case("probabilistic", 3, 3, 100, draft=draft, target=target, method="block")
        assert bench.bytes_moved(block, accepted)[0] == rows * 400 + gathers + _small_bytes(3, 3)


def _small_bytes(batch: int, num_spec: int) -> int:
    # bytes_moved's per-request tensors (its module docstring)
    return batch * (num_spec * 8 + (num_spec + 1) * 8 + 4 + 4) + batch * (4 + 8 + 8 + 4)


# --- output checks ---------------------------------------------------------------------------------------------


def _result(tokens, accepted):
    tokens = torch.tensor(tokens, dtype=torch.int64)
    emitted = (tokens >= 0).sum(dim=1).to(torch.int32)
    return VerifyResult(tokens, emitted, torch.tensor(accepted, dtype=torch.int32))


REFERENCE = _result([[5, 7, -1], [3, -1, -1]], [1, 0])


def test_identical_outputs_pass():
    assert bench.check_output("greedy", REFERENCE, REFERENCE, 10) == bench.Check(True, None, 1.0)


def test_a_different_greedy_token_fails_and_says_where():
    check = bench.check_output("greedy", _result([[5, 8, -1], [3, -1, -1]], [1, 0]), REFERENCE, 10)
    assert not check.ok and check.reason == "tokens differ from the torch reference in 1 of 2 requests"
    assert check.token_agreement == pytest.approx(1 / 2)  # of the sampled tokens (slot A of each request)


@pytest.mark.parametrize(
    ("tokens", "accepted", "reason"),
    [
        ([[5, 7, -1], [3, 4, -1]], [1, 1], "num_accepted differs from the torch reference in 1 of 2 requests"),
        ([[5, 7, -1], [12, -1, -1]], [1, 0], "emits token ids outside [0, 10)"),
        ([[6, 7, -1], [3, -1, -1]], [1, 0], "accepted tokens differ from the torch reference"),
        ([[5, 7, -1], [3, -1, -1], [0, -1, -1]], [1, 0, 0], "output shape [3, 3] differs from the reference's [2, 3]"),
    ],
)
def test_probabilistic_outputs_that_break_the_contract_fail(tokens, accepted, reason):
    check = bench.check_output("probabilistic", _result(tokens, accepted), REFERENCE, 10)
    assert not check.ok and check.reason == reason


def test_on_natural_inputs_an_implementation_with_its_own_draws_keeps_its_own_counts():
    # drafts [5, 7] and [3, 4]; the reference accepted 1 and 0, this one 2 and 1 (its own uniforms)
    drafts = torch.tensor([[5, 7], [3, 4]])
    own = _result([[5, 7, 2], [3, 6, -1]], [2, 1])
    natural = {"same_rng": False, "draft_token_ids": drafts, "planned": False}
    assert bench.check_output("probabilistic", own, REFERENCE, 10, **natural).ok
    planned = bench.check_output("probabilistic", own, REFERENCE, 10, same_rng=False, draft_token_ids=drafts)
    assert planned.reason == "num_accepted differs from the torch reference in 2 of 2 requests"
    same = bench.check_output("probabilistic", own, REFERENCE, 10, draft_token_ids=drafts, planned=False)
    assert not same.ok  # specbench's own streams: the counts are the reference's on any inputs
    for tokens, emitted, reason in (
            ([[5, 8, 2], [3, 6, -1]], [3, 2], "accepted tokens are not the drafts"),
            ([[5, 7, -1], [3, 6, -1]], [2, 2], "num_emitted - num_accepted differs from the torch reference's"),
            ([[5, 7, 2], [3, 4, -1]], [3, 2], "emits, after a rejection, the very draft it rejected")):
        bad = VerifyResult(torch.tensor(tokens), torch.tensor(emitted, dtype=torch.int32),
                           torch.tensor([2, 1], dtype=torch.int32))
        check = bench.check_output("probabilistic", bad, REFERENCE, 10, **natural)
        assert not check.ok and check.reason.startswith(reason), check.reason


def test_tokens_past_the_last_emitted_slot_must_be_minus_one():
    bad = VerifyResult(torch.tensor([[5, 7, 2], [3, -1, -1]]), REFERENCE.num_emitted, REFERENCE.num_accepted)
    check = bench.check_output("greedy", bad, REFERENCE, 10)
    assert check.reason == "writes tokens past the last emitted slot (expected -1)"


def test_probabilistic_residual_tokens_may_differ_only_rarely():
    batch = 1000
    tokens = torch.full((batch, 2), -1, dtype=torch.int64)
    tokens[:, 0] = torch.arange(batch) % 10
    reference = VerifyResult(tokens, torch.ones(batch, dtype=torch.int32), torch.zeros(batch, dtype=torch.int32))
    one_off = tokens.clone()
    one_off[0, 0] = 9 - one_off[0, 0]
    rare = bench.check_output("probabilistic", reference._replace(output_token_ids=one_off), reference, 10)
    assert rare.ok and rare.token_agreement == pytest.approx(0.999)
    many_off = tokens.clone()
    many_off[:2, 0] = 9 - many_off[:2, 0]
    many = bench.check_output("probabilistic", reference._replace(output_token_ids=many_off), reference, 10)
    assert not many.ok and "99.80% of sampled (residual and bonus) tokens agree" in many.reason
    other_rng = bench.check_output("probabilistic", reference._replace(output_token_ids=many_off), reference, 10,
                                   same_rng=False)
    assert other_rng.ok


def test_agreement_counts_only_the_sampled_tokens():
    # 512 requests accepting all 7 drafts: 2 wrong bonus tokens are 2 of 512 samples (not 2 of 4096 tokens)
    batch, slots = 512, 8
    tokens = torch.arange(batch * slots, dtype=torch.int64).reshape(batch, slots) % 50
    reference = VerifyResult(tokens, torch.full((batch,), slots, dtype=torch.int32),
                             torch.full((batch,), slots - 1, dtype=torch.int32))
    two_off = tokens.clone()
    two_off[:2, -1] = (two_off[:2, -1] + 1) % 50
    check = bench.check_output("probabilistic", reference._replace(output_token_ids=two_off), reference, 50)
    assert not check.ok and check.token_agreement == pytest.approx(510 / 512)


def test_another_rng_may_not_emit_the_draft_it_rejected():
    drafts = torch.tensor([[5, 2], [3, 4]])
    reference = _result([[5, 2, 9], [1, -1, -1]], [2, 0])  # request 1 rejected draft 3 at slot 0
    emits_rejected = _result([[5, 2, 9], [3, -1, -1]], [2, 0])
    check = bench.check_output("probabilistic", emits_rejected, reference, 10, same_rng=False, draft_token_ids=drafts)
    assert not check.ok and "the very draft it rejected" in check.reason
    other_sample = _result([[5, 2, 2], [7, -1, -1]], [2, 0])  # a draft id as the *bonus* token is fine
    assert bench.check_output("probabilistic", other_sample, reference, 10, same_rng=False,
                              draft_token_ids=drafts).ok


# --- cases and the registry ------------------------------------------------------------------------------------


def test_plan_covers_the_grid_and_draft_kinds_only_for_probabilistic():
    cases = bench.plan_cases(modes=["greedy", "probabilistic", "synthetic"], batch_sizes=[1, 8],
                             vocabularies=[("llama3", 128256)], profiles=[make_profile(3, acceptance_length=3)],
                             drafts=["logits", "probs"], cuda_graph=[False, True])
    assert len(cases) == (1 + 2 + 1) * 2 * 2
    assert {c.draft for c in cases if c.mode != "probabilistic"} == {"none"}
    assert {c.model for c in cases} == {"llama3"}
    assert len({c.key("torch") for c in cases}) == len(cases)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"modes": ["warp"]}, "unknown mode 'warp'"),
        ({"drafts": ["hidden"]}, "unknown draft kind 'hidden'"),
        ({"dtypes": ["float8"]}, "unknown dtype 'float8'"),
        ({"batch_sizes": [0]}, "batch size must be at least 1, got 0"),
        ({"vocabularies": [(None, 1)]}, "vocabulary size must be at least 2"),
    ],
)
def test_a_bad_plan_names_the_value(fields, message):
    arguments = {"modes": ["greedy"], "batch_sizes": [1], "vocabularies": [(None, 10)],
                 "profiles": [make_profile(3, acceptance_length=2)], **fields}
    with pytest.raises(SpecbenchError, match=message):
        bench.plan_cases(**arguments)


# --- running cases with stand-in implementations ---------------------------------------------------------------


def _stand_in(name, transform=lambda result: result, calls=None, **fields):
    def prepare(kwargs):
        def call():
            if calls is not None:
                calls.append(name)
            return transform(verify(**kwargs, backend="torch"))

        return call

    return Implementation(name, "stand-in", prepare=prepare, **fields)


def _wrong(result):
    tokens = result.output_token_ids.clone()
    tokens[0, 0] = (tokens[0, 0] + 1) % 50
    return result._replace(output_token_ids=tokens)


def _crash(result):
    raise RuntimeError("illegal memory access")


def test_a_run_times_the_correct_and_records_why_the_others_were_not():
    impls = [_stand_in("torch"), _stand_in("wrong", _wrong), _stand_in("crash", _crash),
             _stand_in("picky", modes=("probabilistic",))]
    records = bench.run_case(_case(), impls, config=FAST, peak_gbps=100.0)
    by_name = {r["impl"]: r for r in records}
    assert [r["impl"] for r in records] == ["torch", "wrong", "crash", "picky"]
    ok = by_name["torch"]
    assert ok["status"] == "ok" and ok["samples"] == 2 and ok["speedup_vs_torch"] == 1.0
    assert ok["gbps"] == pytest.approx(ok["bytes_needed"] / (ok["median_us"] * 1e-6) / 1e9)
    assert ok["pct_peak"] == pytest.approx(ok["gbps"])  # peak 100 GB/s
    assert ok["measured_acceptance_length"] == pytest.approx(2.5)
    assert ok["tokens_per_s"] == pytest.approx(6 * 2.5 / (ok["median_us"] * 1e-6))
    assert by_name["wrong"]["status"] == "FAIL" and by_name["wrong"]["median_us"] is None
    assert by_name["wrong"]["reason"] == "tokens differ from the torch reference in 1 of 6 requests"
    assert by_name["crash"]["status"] == "FAIL" and "raised RuntimeError: illegal memory access" in \
        by_name["crash"]["reason"]
    assert by_name["picky"]["status"] == "skipped"
    assert by_name["picky"]["reason"] == "picky declares the modes probabilistic, not greedy"
    json.dumps(records)  # records are plain JSON


def test_a_crash_while_timed_or_a_wrong_return_type_is_a_fail_row_and_the_others_keep_theirs():
    calls: list[str] = []

    def crashes_once_timed(result):
        if calls.count("late") > 2:  # the check's call and the warm-up pass
            raise RuntimeError("illegal memory access")
        return result

    impls = [_stand_in("torch"), _stand_in("late", crashes_once_timed, calls=calls),
             _stand_in("tuple", lambda result: tuple(result))]
    torch_row, late, as_tuple = bench.run_case(_case(), impls, config=replace(FAST, warmup=1))
    assert torch_row["status"] == "ok" and torch_row["median_us"] is not None
    assert late["status"] == "FAIL" and late["reason"] == "raised RuntimeError while being timed: illegal memory access"
    assert as_tuple["status"] == "FAIL" and as_tuple["reason"] == "returned tuple, not a VerifyResult"


def test_a_fail_row_of_the_wrong_shape_has_no_measured_length_and_one_of_wrong_values_has_its_own():
    def short(result):  # one request too few: its counts are no request's
        return result._replace(output_token_ids=result.output_token_ids[:-1], num_accepted=result.num_accepted[:-1] * 0)

    def wider(result):  # the right counts beside tokens of another shape: the check stopped at the shape
        return result._replace(output_token_ids=result.output_token_ids[:, :-1])

    records = bench.run_case(_case(), [_stand_in("torch"), _stand_in("short", short), _stand_in("wider", wider),
                                       _stand_in("wrong", _wrong)], config=FAST)
    by_name = {r["impl"]: r for r in records}
    assert by_name["short"]["reason"].startswith("output shape [5, 4] differs")
    assert by_name["short"]["measured_acceptance_length"] is None
    assert by_name["wider"]["status"] == "FAIL" and by_name["wider"]["measured_acceptance_length"] is None
    assert by_name["wrong"]["status"] == "FAIL" and by_name["wrong"]["measured_acceptance_length"] == pytest.approx(2.5)


def test_speedup_is_the_ratio_of_medians_to_the_torch_baseline():
    records = bench.run_case(_case("synthetic"), [_stand_in("torch"), _stand_in("other")], config=FAST)
    torch_row, other = records
    assert other["speedup_vs_torch"] == pytest.approx(torch_row["median_us"] / other["median_us"])
    assert other["pct_peak"] is None  # no peak bandwidth measured


def test_out_of_memory_skips_the_case_and_the_run_goes_on():
    def reference(inputs):
        if inputs.case.batch_size == 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 40.00 GiB")
        return bench.torch_reference(inputs)

    cases = [_case(batch=2), _case(batch=3)]
    records = bench.run_benchmark(cases, [_stand_in("torch")], config=FAST, reference=reference)
    assert [(r["batch_size"], r["status"]) for r in records] == [(2, "skipped"), (3, "ok")]
    assert records[0]["reason"].startswith("out of memory: CUDA out of memory")


def test_out_of_memory_while_timing_keeps_the_fail_rows_found_before_it():
    calls: list[str] = []

    def runs_out_when_timed(result):
        if calls.count("torch") > 1:  # the check's call fits, the timed ones do not
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return result

    impls = [_stand_in("torch", runs_out_when_timed, calls=calls), _stand_in("wrong", _wrong)]
    torch_row, wrong = bench.run_case(_case(), impls, config=FAST)
    assert torch_row["status"] == "skipped" and torch_row["reason"].startswith("out of memory: CUDA out of memory")
    assert wrong["status"] == "FAIL" and wrong["reason"] == "tokens differ from the torch reference in 1 of 6 requests"


def test_a_reference_that_fails_skips_the_case_with_the_reason():
    def reference(inputs):
        raise NotImplementedError("probabilistic mode is not written yet")

    (record,) = bench.run_case(_case(), [_stand_in("torch")], config=FAST, reference=reference)
    assert record["status"] == "skipped"
    assert "NotImplementedError: probabilistic mode is not written yet" in record["reason"]


def test_rows_already_written_are_not_run_again_and_their_baseline_is_used():
    case = _case()
    first = bench.run_case(case, [_stand_in("torch")], config=FAST)
    calls: list[str] = []
    seen: list[dict] = []
    new = bench.run_benchmark([case], [_stand_in("torch", calls=calls), _stand_in("other", calls=calls)],
                              config=FAST, previous=first, on_record=seen.append)
    assert [r["impl"] for r in new] == ["other"] and seen == new
    assert "torch" not in calls
    assert new[0]["speedup_vs_torch"] == pytest.approx(first[0]["median_us"] / new[0]["median_us"])
    assert bench.record_key(first[0]) == case.key("torch")


def test_resume_tells_apart_profiles_with_the_same_mean_length():
    steady = make_profile(2, rates=[0.75, 0.75], name="steady")  # L = 2.5
    cliff = make_profile(2, rates=[1.0, 0.5], name="cliff")  # L = 2.5 too
    cases = bench.plan_cases(modes=["synthetic"], batch_sizes=[4], vocabularies=[(None, 50)], profiles=[steady, cliff])
    first = bench.run_case(cases[0], [_stand_in("torch")], config=FAST)
    new = bench.run_benchmark(cases, [_stand_in("torch")], config=FAST, previous=first)
    assert [r["acceptance"] for r in new] == ["cliff"]


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_the_triton_backend_passes_the_check_against_the_reference():
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU runs the interpreter (tests/conftest.py)
    impls = resolve_all(["torch", "triton"])
    for mode, draft in (("greedy", "none"), ("probabilistic", "logits"), ("synthetic", "none")):
        case = _case(mode, batch=3, k=2, vocab=40, draft=draft, length=2.0)
        records = bench.run_case(case, impls, device=device, config=FAST)
        assert [r["status"] for r in records] == ["ok", "ok"], records
        assert records[1]["token_agreement"] == 1.0


@pytest.mark.parametrize(("timer", "flush", "working_set", "cache", "label"), [
    ("host-free", True, 10 << 30, 50 << 20, "cold"),  # flushed before every sample
    ("perf_counter", True, 1 << 10, 50 << 20, "cold"),
    ("graph", True, 2 << 20, 50 << 20, "warm"),  # the flush runs once per replay: calls 2..10 find 2 MB cached
    ("graph", True, 600 << 20, 50 << 20, "cold"),  # more than L2: every call streams from DRAM
    ("events", False, 1 << 20, 50 << 20, "warm"),  # nothing evicts what fits
    ("events", False, 1 << 20, None, None),  # unknown cache: no label rather than a guess
])
def test_samples_are_labelled_warm_where_the_case_fits_in_the_cache_and_nothing_evicts_it(
        timer, flush, working_set, cache, label):
    assert bench.cache_state(timer, flush, working_set, cache) == label


def test_a_cold_median_below_the_dram_floor_is_flagged_and_an_honest_one_is_not(monkeypatch):
    # the same CPU row judged against an absurdly slow and an absurdly fast "DRAM": a negative control
    config = replace(FAST, l2_flush=True)
    for peak, flagged in ((1e-9, True), (1e9, False)):
        (record,) = bench.run_case(_case(), [_stand_in("torch")], config=config, peak_gbps=peak)
        assert record["timer"] == "perf_counter" and record["cache"] == "cold"
        assert record["dram_floor_us"] == pytest.approx(record["bytes_needed"] / (peak * 1e3))
        assert record["below_dram_floor"] is flagged
    monkeypatch.setattr(timing, "cache_bytes", lambda device: 1 << 30)
    (unflushed,) = bench.run_case(_case(), [_stand_in("torch")], config=FAST, peak_gbps=1e-9)
    assert unflushed["cache"] == "warm" and unflushed["below_dram_floor"] is None  # only a cold row is judged


def test_small_gpu_cases_are_timed_on_several_placements_and_cpu_cases_on_one():
    kwargs = {"target_logits": torch.zeros(2, 3, 5), "seeds": torch.zeros(2, dtype=torch.int64), "mode": "greedy"}
    assert bench._placed_copies(kwargs, torch.device("cpu"), timing.TimingConfig()) == []
    if torch.cuda.is_available():
        on_gpu = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        copies = bench._placed_copies(on_gpu, torch.device("cuda"), timing.TimingConfig())
        assert len(copies) == timing.DEFAULT_PLACEMENTS - 1
        copy = copies[0]
        assert copy["mode"] == "greedy" and torch.equal(copy["target_logits"], on_gpu["target_logits"])
        assert copy["target_logits"].data_ptr() != on_gpu["target_logits"].data_ptr()
        assert len(bench._placed_copies(on_gpu, torch.device("cuda"), timing.TimingConfig(cuda_graph=True, graph_calls=7))) == 6
        assert len(bench._placed_copies(on_gpu, torch.device("cuda"), timing.TimingConfig(placements=40))) == 39


def test_a_placement_runs_in_its_own_scratch_set():
    from specbench.kernels import launch

    seen = []
    placed = bench._in_scratch_set(lambda: seen.append(launch._stream_key(torch.device("cpu"))[-1]) or "result", 3)
    assert placed() == "result" and seen == [3] and launch._stream_key(torch.device("cpu"))[-1] == 0


def test_without_the_triton_launcher_loaded_a_placement_is_the_call_itself(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "specbench.kernels.launch", raising=False)

    def call():
        return "result"
    assert bench._in_scratch_set(call, 2) is call


def test_cold_graph_times_an_implementation_that_declares_no_graph_host_free_apart():
    from types import SimpleNamespace

    impls = [SimpleNamespace(name="triton", cuda_graph=True), SimpleNamespace(name="plugin", cuda_graph=False)]
    calls = {"triton": ["t"], "plugin": ["p"]}
    cold = timing.TimingConfig()  # the default: cold-graph
    groups = bench._timer_groups(calls, impls, torch.device("cuda"), cold)
    assert [(group, config.timer) for group, config in groups] == [({"triton": ["t"]}, "cold-graph"),
                                                                   ({"plugin": ["p"]}, "host-free")]
    for config in (timing.TimingConfig(timer="host-free"), timing.TimingConfig(cuda_graph=True)):
        assert bench._timer_groups(calls, impls, torch.device("cuda"), config) == [(calls, config)]
    assert bench._timer_groups(calls, impls, torch.device("cpu"), cold) == [(calls, cold)]  # perf_counter
    assert bench._timer_groups({"triton": ["t"]}, impls, torch.device("cuda"), cold) == [({"triton": ["t"]}, cold)]
